//! Dumps as a reader sees them, and `PURLOIN_DUMP_SIGNAL`: a signal writes the dump of every
//! runtime of the process to stderr and the program keeps running. The signal tests run this
//! binary again as a child process with the variable set (`child_process_body`).
#![cfg(not(loom))]

mod rt_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::time::Duration;

use purloin::sched::{GreenState, StackTrace};

/// The child's part, chosen by `PURLOIN_DUMP_SIGNAL_CHILD`:
/// - `global`: starts the global runtime and parks a green thread in a known function;
/// - `explicit`: builds one runtime with workers named `explicit-worker` and never touches
///   the global one; its green thread waits in a channel receive.
///
/// Then it says "ready" and waits for a line on stdin; after it, it reports how many worker
/// threads of the global runtime exist (its workers are named `purloin-worker-N`), wakes its
/// green thread, and exits normally.
#[test]
fn child_process_body() {
    let Some(mode) = std::env::var_os("PURLOIN_DUMP_SIGNAL_CHILD") else { return };
    let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
    let (rt, h) = if mode == "global" {
        (None, purloin::spawn(move || parked_in_signal_marker(rx)))
    } else {
        let rt = purloin::runtime::Builder::new()
            .workers(2)
            .thread_name("explicit-worker")
            .build()
            .unwrap();
        let h = rt.spawn(move || parked_in_signal_marker(rx));
        while rt.scheduler().parked().is_empty() {
            std::thread::yield_now();
        }
        (Some(rt), h)
    };
    while rt.is_none() && purloin::debugging::dump().count(GreenState::Parked) == 0 {
        std::thread::yield_now();
    }
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    // A dump in progress holds stderr until it is written whole: wait for it.
    drop(std::io::stderr().lock());
    println!("global workers: {}", threads_named("purloin-worker"));
    tx.send(1).unwrap();
    assert_eq!(h.join().unwrap(), 1);
    drop(rt);
    println!("still running");
}

/// The threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|t| {
            let comm = std::fs::read_to_string(t.as_ref().unwrap().path().join("comm"));
            comm.is_ok_and(|c| c.starts_with(prefix))
        })
        .count()
}

#[inline(never)]
fn parked_in_signal_marker(rx: purloin::sync::channel::Receiver<u32>) -> u32 {
    rx.recv().unwrap()
}

/// A child running `child_process_body` in `mode` with `PURLOIN_DUMP_SIGNAL=signal`, once it
/// said "ready".
struct Kid {
    child: Child,
    out: BufReader<ChildStdout>,
    err: BufReader<ChildStderr>,
}

impl Kid {
    fn start(mode: &str, signal: &str) -> Kid {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_process_body", "--nocapture", "--test-threads=1"])
            .env("PURLOIN_DUMP_SIGNAL_CHILD", mode)
            .env("PURLOIN_DUMP_SIGNAL", signal)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let err = BufReader::new(child.stderr.take().unwrap());
        let mut kid = Kid { child, out, err };
        kid.stdout_until("ready");
        kid
    }

    fn stdout_until(&mut self, what: &str) -> String {
        let mut line = String::new();
        while !line.contains(what) {
            line.clear();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "the child ended before {what:?}");
        }
        line
    }

    /// Stderr up to and including the first line containing `what`.
    fn stderr_until(&mut self, what: &dyn Fn(&str) -> bool) -> String {
        let mut text = String::new();
        loop {
            let mut l = String::new();
            assert!(self.err.read_line(&mut l).unwrap() > 0, "stderr closed early:\n{text}");
            text.push_str(&l);
            if what(&l) {
                return text;
            }
        }
    }

    fn signal(&self, n: i32) {
        // SAFETY: plain system call on our own child.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, n) }, 0);
    }

    /// Lets the child finish; returns the global runtime's worker count it saw and the rest
    /// of its stderr.
    fn finish(mut self) -> (usize, String) {
        self.child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let line = self.stdout_until("global workers: ");
        let globals = line.trim().rsplit(' ').next().unwrap().parse().unwrap();
        self.stdout_until("still running");
        let mut rest = String::new();
        self.err.read_to_string(&mut rest).unwrap();
        assert!(self.child.wait().unwrap().success(), "{rest}");
        (globals, rest)
    }
}

/// Whether `line` starts a dump (this version's or an older one's header).
fn dump_header(line: &str) -> bool {
    line.starts_with("purloin: dump of") || line.contains("green threads on")
}

#[test]
fn sigquit_writes_the_dump_and_the_program_keeps_running() {
    let _w = rt_common::watchdog("dump signal", Duration::from_secs(120));
    let mut kid = Kid::start("global", "SIGQUIT");
    kid.signal(libc::SIGQUIT);
    let head = kid.stderr_until(&dump_header);
    let (_, rest) = kid.finish();
    let text = head + &rest;
    assert!(text.contains("parked_in_signal_marker"), "{text}");
    assert!(text.contains("(the global runtime)"), "{text}");
    assert!(text.contains("=== end of the purloin dump ==="), "{text}");
}

/// A program that runs only a runtime of its own: the signal's dump shows that runtime's
/// green thread, in a section labelled with its number and workers, and does not start the
/// global runtime (no `purloin-worker` threads appear, no section for it).
#[test]
fn the_signal_dumps_an_explicit_runtime_without_starting_the_global_one() {
    let _w = rt_common::watchdog("dump signal, explicit runtime", Duration::from_secs(120));
    let mut kid = Kid::start("explicit", "SIGQUIT");
    kid.signal(libc::SIGQUIT);
    let head = kid.stderr_until(&dump_header);
    let (globals, rest) = kid.finish();
    let text = head + &rest;
    assert_eq!(globals, 0, "the dump started the global runtime:\n{text}");
    assert!(text.contains("parked_in_signal_marker"), "{text}");
    assert!(text.contains("(built with runtime::Builder), 2 workers, "), "{text}");
    assert!(!text.contains("global runtime"), "{text}");
    assert!(text.contains("=== end of the purloin dump ==="), "{text}");
}

/// Names beyond the common six: lower case, no prefix, and a real-time signal by its
/// `SIGRTMIN+n` name.
#[test]
fn a_real_time_signal_named_in_lower_case_asks_for_the_dump() {
    let _w = rt_common::watchdog("dump on SIGRTMIN+2", Duration::from_secs(120));
    let mut kid = Kid::start("explicit", "sigrtmin+2");
    kid.signal(libc::SIGRTMIN() + 2);
    let head = kid.stderr_until(&dump_header);
    let (_, rest) = kid.finish();
    let text = head + &rest;
    assert!(text.contains("parked_in_signal_marker"), "{text}");
    let mut kid = Kid::start("explicit", "usr2");
    kid.signal(libc::SIGUSR2);
    kid.stderr_until(&dump_header);
    kid.finish();
}

/// A signal a dump cannot use is refused with a message naming the valid ones, and the
/// program runs on without a dump signal.
#[test]
fn an_uncatchable_dump_signal_is_refused_with_the_valid_ones() {
    let _w = rt_common::watchdog("refused dump signal", Duration::from_secs(120));
    for (signal, why) in [("SIGKILL", "cannot be caught"), ("segv", "stack-overflow detection")] {
        let mut kid = Kid::start("explicit", signal);
        let message = kid.stderr_until(&|l: &str| l.contains("PURLOIN_DUMP_SIGNAL="));
        assert!(message.contains(why), "{message}");
        assert!(message.contains("use one of SIGHUP, SIGINT, SIGQUIT,"), "{message}");
        assert!(message.contains("SIGRTMIN+n"), "{message}");
        let (globals, _) = kid.finish();
        assert_eq!(globals, 0);
    }
}

/// Whether a frame's function is `name` (its path ends with it, or it is the bare name an
/// inlined frame has under line tables only).
fn is_fn(f: &purloin::sched::Frame, name: &str) -> bool {
    f.function.as_deref().is_some_and(|n| n == name || n.ends_with(&format!("::{name}")))
}

/// No frame of the stack walk itself (the walker, the `backtrace` crate, the visit of the
/// parked stack) anywhere in the trace.
fn assert_no_walker_frames(bt: &StackTrace) {
    for f in bt.frames.iter().chain(&bt.hidden).chain(&bt.entry) {
        let name = f.function.as_deref().unwrap_or("");
        let file = f.file.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        assert!(
            !name.contains("walk_here")
                && !name.contains("walk_visited")
                && !name.contains("trace_unsynchronized")
                && !name.contains("visit")
                && !file.contains("/backtrace-"),
            "a walker frame {name} at {file}:\n{bt}"
        );
    }
}

#[inline(never)]
fn waits_in_a_channel_receive(rx: purloin::sync::channel::Receiver<u32>) -> u32 {
    rx.recv().unwrap()
}

/// A green thread parked in a channel receive reads like Go's traceback: the receive first,
/// then the test's own function; the runtime's way in as one line; then where it was created
/// (this file and line). No frame of the walk itself shows.
#[test]
fn a_parked_receive_starts_at_the_receive_and_ends_with_its_creation() {
    let _w = rt_common::watchdog("dump of a receive", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
    let (h, line) = (rt.spawn(move || waits_in_a_channel_receive(rx)), line!());
    while rt.scheduler().parked().is_empty() {
        std::thread::yield_now();
    }
    let dump = rt.scheduler().dump();
    let t = dump.threads.iter().find(|t| t.id == h.thread().id()).unwrap();
    let bt = t.backtrace.as_ref().unwrap();
    assert!(is_fn(&bt.frames[0], "recv"), "starts at the receive:\n{bt}");
    assert!(is_fn(&bt.frames[1], "waits_in_a_channel_receive"), "then the caller:\n{bt}");
    assert!(!bt.entry.is_empty(), "{bt}");
    assert!(bt.hidden.iter().any(|f| is_fn(f, "park")), "the park is hidden:\n{bt}");
    assert_no_walker_frames(bt);
    let at = t.created_at.expect("a spawn records its place");
    assert!(at.file().ends_with("debugging_signal.rs"), "{at}");
    assert_eq!(at.line(), line);
    let text = dump.to_string();
    let created = format!("created by a plain thread at {}:{line}:", at.file());
    assert!(text.contains(&created), "{text}");
    assert!(text.contains("... runtime entry frames"), "{text}");
    tx.send(1).unwrap();
    assert_eq!(h.join().unwrap(), 1);
}

/// Spawns through the facade (`block_on`'s root, and from a green thread `purloin::spawn`,
/// `Builder::spawn`, a scope) record the place of the call and the spawning green thread.
#[test]
fn facade_spawns_record_their_place() {
    let _w = rt_common::watchdog("facade spawn places", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let root_line = line!() + 1;
    rt.block_on(|| {
        let me = purloin::current().unwrap().id();
        let dump = purloin::debugging::dump();
        let root = dump.threads.iter().find(|t| t.id == me).unwrap();
        assert_eq!(root.created_at.map(|at| at.line()), Some(root_line), "{dump}");
        let (a, la) = (purloin::spawn(purloin::park), line!());
        let (b, lb) =
            (purloin::Builder::new().name("b".into()).spawn(purloin::park).unwrap(), line!());
        purloin::scope(|s| {
            let (c, lc) = (s.spawn(purloin::park), line!());
            while purloin::debugging::dump().count(GreenState::Parked) < 3 {
                purloin::yield_now();
            }
            let dump = purloin::debugging::dump();
            for (id, line) in [(a.thread().id(), la), (b.thread().id(), lb), (c.thread().id(), lc)]
            {
                let t = dump.threads.iter().find(|t| t.id == id).unwrap();
                assert_eq!(t.spawned_by, Some(me), "{dump}");
                let at = t.created_at.unwrap();
                assert!(at.file().ends_with("debugging_signal.rs"), "{at}");
                assert_eq!(at.line(), line, "{dump}");
            }
            c.thread().unpark();
            c.join().unwrap();
        });
        for h in [a, b] {
            h.thread().unpark();
            h.join().unwrap();
        }
    });
}
