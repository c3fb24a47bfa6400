//! `purloin::trace`: a trace of a known program parses, and its slices, parks and flows are
//! consistent (every slice closed and properly nested on its track, every unpark after a park
//! of the same green thread, every flow's start finished and both ends on real slices), with
//! every kind of event the program must cause.
#![cfg(not(loom))]

mod rt_common;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use rt_common::watchdog;

/// One trace records at a time per process: the tests take turns.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The known program: ping-pong on rendezvous channels, sleeps, a blocking section, a
/// fan-out that can only run by being stolen, spawns from the main thread, a socket read
/// woken by the poller, idle workers.
fn program(rt: &purloin::Runtime) {
    // Spawned from the main OS thread: through the global queue.
    let from_main: Vec<_> = (0..4).map(|i| rt.spawn(move || i * 2)).collect();
    rt.block_on(|| {
        // Ping-pong: each side parks on the channel and is unparked by the other.
        let (tx1, rx1) = purloin::sync::channel::bounded::<u32>(0);
        let (tx2, rx2) = purloin::sync::channel::bounded::<u32>(0);
        let echo = purloin::Builder::new()
            .name("echo".into())
            .spawn(move || {
                for v in rx1.iter() {
                    tx2.send(v).unwrap();
                }
            })
            .unwrap();
        for i in 0..200 {
            tx1.send(i).unwrap();
            assert_eq!(rx2.recv().unwrap(), i);
        }
        drop(tx1);
        echo.join().unwrap();

        // Timers: a sleep parks until a timer fires. Three of them: a sleep whose worker the
        // OS stalls past its deadline before it parks returns without a timer, and the check
        // below needs one timer fired.
        for _ in 0..3 {
            purloin::sleep(Duration::from_millis(2));
        }

        // A blocking section.
        purloin::blocking(|| std::fs::metadata(".").is_ok());

        // Fan-out: children queued on this worker while it spins without a scheduling point
        // can only start by being stolen by the other worker.
        let started = Arc::new(AtomicUsize::new(0));
        let children: Vec<_> = (0..16)
            .map(|_| {
                let started = started.clone();
                purloin::spawn(move || {
                    started.fetch_add(1, Ordering::Relaxed);
                    purloin::yield_now();
                })
            })
            .collect();
        while started.load(Ordering::Relaxed) == 0 {
            std::hint::spin_loop();
        }
        for c in children {
            c.join().unwrap();
        }

        // I/O: the reader parks in accept or read until the poller reports its socket ready
        // (the write comes only once it is seen parked).
        let listener = purloin::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = purloin::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            b[0]
        });
        let mut client = purloin::net::TcpStream::connect(addr).unwrap();
        let rid = reader.thread().id();
        let parked = || {
            let dump = purloin::debugging::dump();
            dump.threads
                .iter()
                .any(|t| t.id == rid && t.state == purloin::sched::GreenState::Parked)
        };
        while !parked() {
            purloin::yield_now();
        }
        client.write_all(&[9]).unwrap();
        assert_eq!(reader.join().unwrap(), 9);

        // Idle time: sleep until a worker has slept (found nothing to run and parked its OS
        // thread), however long the spinning before it takes on a loaded machine.
        let parks = || purloin::stats().total.parks;
        let before = parks();
        while parks() == before {
            purloin::sleep(Duration::from_millis(1));
        }
    });
    for (i, h) in from_main.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), i * 2);
    }
}

/// Microseconds with three decimals → nanoseconds.
fn ns(v: &Value) -> i64 {
    (v.as_f64().expect("a number") * 1000.0).round() as i64
}

/// One end of a flow: (ts, is the finish, tid), listed per (category, id).
type FlowEnd = (i64, bool, u64);

#[derive(Debug)]
struct Slice {
    ts: i64,
    end: i64,
    cat: String,
    name: String,
}

/// Checks a parsed trace; returns the problems found (empty: consistent) and the counts by
/// event kind.
fn check(trace: &Value) -> (Vec<String>, BTreeMap<String, usize>) {
    let mut errors = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let events = trace["traceEvents"].as_array().expect("a traceEvents array");
    let mut slices: HashMap<u64, Vec<Slice>> = HashMap::new();
    // (ts, order: park before unpark at the same instant, id, is_unpark)
    let mut parks: Vec<(i64, u8, u64)> = Vec::new();
    let mut flows: HashMap<(String, u64), Vec<FlowEnd>> = HashMap::new();
    let mut named_tracks = std::collections::HashSet::new();
    for e in events {
        let ph = e["ph"].as_str().unwrap_or("?");
        let tid = e["tid"].as_u64().unwrap_or(0);
        let name = e["name"].as_str().unwrap_or("").to_owned();
        let cat = e["cat"].as_str().unwrap_or("").to_owned();
        match ph {
            "M" => {
                if name == "thread_name" {
                    named_tracks.insert(tid);
                }
            }
            "X" => {
                let Some(dur) = e.get("dur") else {
                    errors.push(format!("a complete slice without dur: {e}"));
                    continue;
                };
                let (ts, dur) = (ns(&e["ts"]), ns(dur));
                if dur < 0 {
                    errors.push(format!("a slice with negative duration: {e}"));
                }
                *kinds.entry(format!("slice {cat}")).or_default() += 1;
                if cat == "wake" || cat == "spawn" {
                    let id = e["args"]["id"].as_u64().unwrap();
                    if cat == "wake" {
                        parks.push((ts, 1, id));
                    }
                }
                slices.entry(tid).or_default().push(Slice { ts, end: ts + dur, cat, name });
            }
            "i" => {
                *kinds.entry(name.clone()).or_default() += 1;
                let id = e["args"]["id"].as_u64();
                match name.as_str() {
                    "park" => parks.push((ns(&e["ts"]), 0, id.unwrap())),
                    "unpark" => parks.push((ns(&e["ts"]), 1, id.unwrap())),
                    _ => {}
                }
            }
            "s" | "f" => {
                let id = e["id"].as_u64().expect("a flow id");
                if ph == "f" && e["bp"] != "e" {
                    errors.push(format!("a flow end not bound to its enclosing slice: {e}"));
                }
                *kinds.entry(format!("flow {cat}")).or_default() += usize::from(ph == "s");
                flows.entry((cat, id)).or_default().push((ns(&e["ts"]), ph == "f", tid));
            }
            other => errors.push(format!("an unexpected phase {other:?}: {e}")),
        }
    }

    // Slices: on each track, each slice starts after the previous one at its level ended, or
    // nests inside it (what the viewers require of complete events).
    for (tid, list) in &mut slices {
        if !named_tracks.contains(tid) {
            errors.push(format!("track {tid} has no thread_name"));
        }
        list.sort_by_key(|s| (s.ts, -s.end));
        let mut stack: Vec<&Slice> = Vec::new();
        for s in list.iter() {
            while stack
                .last()
                .is_some_and(|top| top.end <= s.ts && !(top.ts == s.ts && top.end == s.ts))
            {
                stack.pop();
            }
            if let Some(top) = stack.last()
                && s.end > top.end
            {
                errors.push(format!(
                    "track {tid}: slice {} {} [{}, {}] overlaps {} {} [{}, {}]",
                    s.cat, s.name, s.ts, s.end, top.cat, top.name, top.ts, top.end
                ));
            }
            if s.cat == "run" && stack.iter().any(|t| t.cat == "run") {
                errors.push(format!("track {tid}: run slice {} inside another run slice", s.name));
            }
            stack.push(s);
        }
    }

    // Parks: each green thread's unparks each follow a park not yet unparked.
    parks.sort();
    let mut parked: HashMap<u64, i64> = HashMap::new();
    for (ts, is_unpark, id) in &parks {
        let n = parked.entry(*id).or_default();
        if *is_unpark == 1 {
            if *n == 0 {
                errors.push(format!("G{id} unparked at {ts} ns without a park before"));
            } else {
                *n -= 1;
            }
        } else {
            *n += 1;
        }
    }

    // Flows: starts and finishes alternate per (category, id), every start is finished, and
    // both ends lie in a slice of their track (a finish at the start of a run slice).
    let within = |tid: u64, ts: i64| {
        slices.get(&tid).is_some_and(|l| l.iter().any(|s| s.ts <= ts && ts <= s.end))
    };
    // A finish is written a nanosecond into its run slice (or at the start of an empty one).
    let run_starts_at = |tid: u64, ts: i64| {
        slices.get(&tid).is_some_and(|l| {
            l.iter().any(|s| s.cat == "run" && (s.ts + 1 == ts || s.ts == ts) && ts <= s.end)
        })
    };
    for ((cat, id), list) in &mut flows {
        list.sort_by_key(|&(ts, fin, _)| (ts, fin));
        let mut open = false;
        for &(ts, fin, tid) in list.iter() {
            if fin {
                if !open {
                    errors.push(format!("{cat} flow of G{id}: a finish at {ts} without a start"));
                }
                if !run_starts_at(tid, ts) {
                    errors.push(format!("{cat} flow of G{id}: finish at {ts} on track {tid} is at no run slice's start"));
                }
                open = false;
            } else {
                if open {
                    errors.push(format!(
                        "{cat} flow of G{id}: a second start at {ts} before a finish"
                    ));
                }
                if !within(tid, ts) {
                    errors.push(format!(
                        "{cat} flow of G{id}: start at {ts} on track {tid} is in no slice"
                    ));
                }
                open = true;
            }
        }
        if open {
            errors.push(format!("{cat} flow of G{id}: started but never finished"));
        }
    }
    (errors, kinds)
}

#[test]
fn trace_of_a_known_program_is_consistent() {
    let _w = watchdog("trace_of_a_known_program_is_consistent", Duration::from_secs(60));
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("purloin-trace-test-{}.json", std::process::id()));
    let rt = purloin::runtime::Builder::new().workers(2).trace(&path).build().unwrap();
    assert!(purloin::trace::is_recording());
    program(&rt);
    // Shutting the runtime down stops its trace and completes the file.
    drop(rt);
    assert!(!purloin::trace::is_recording());
    let text = std::fs::read_to_string(&path).unwrap();
    let trace: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the trace at {} is not JSON: {e}", path.display()));
    let (errors, kinds) = check(&trace);
    assert!(
        errors.is_empty(),
        "{} problems, first ones:\n{}\nkinds: {kinds:?}",
        errors.len(),
        errors[..errors.len().min(20)].join("\n")
    );
    for kind in [
        "slice run",
        "slice blocking",
        "slice worker",
        "park",
        "unpark",
        "spawn",
        "flow spawn",
        "flow wake",
        "steal",
        "global pull",
        "timers fired",
        "poller wake",
    ] {
        assert!(kinds.get(kind).copied().unwrap_or(0) > 0, "no {kind:?} in the trace: {kinds:?}");
    }
    // The named green thread's slices carry its name.
    assert!(text.contains("\"echo G"), "the echo thread's run slices are not named");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn start_and_stop_write_valid_json_and_count() {
    let _w = watchdog("start_and_stop_write_valid_json_and_count", Duration::from_secs(60));
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join(format!("purloin-trace-api-{}.json", std::process::id()));
    purloin::trace::start(&path).unwrap();
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    rt.block_on(|| {
        for _ in 0..10 {
            purloin::spawn(purloin::yield_now).join().unwrap();
        }
    });
    drop(rt);
    let summary = purloin::trace::stop().unwrap();
    assert_eq!(summary.dropped, 0);
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let n = trace["traceEvents"].as_array().unwrap().len() as u64;
    assert_eq!(n, summary.events, "the summary counts what the file holds");
    let (errors, _) = check(&trace);
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(purloin::trace::stop().is_err(), "a second stop finds no trace");
    std::fs::remove_file(&path).unwrap();
}

/// With the `tracing` feature and a subscriber, the facade's one hook serves both the span
/// mover and the recorder: spans stay current across parks (the switch word carries the span
/// stack and the recorder's park bit together), and the trace is still consistent.
#[cfg(feature = "tracing")]
#[test]
fn spans_and_trace_share_the_hook() {
    use tracing_subscriber::prelude::*;

    let _w = watchdog("spans_and_trace_share_the_hook", Duration::from_secs(60));
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let _ = tracing_subscriber::registry().try_init();
    let path =
        std::env::temp_dir().join(format!("purloin-trace-spans-{}.json", std::process::id()));
    let rt = purloin::runtime::Builder::new().workers(2).trace(&path).build().unwrap();
    rt.block_on(|| {
        let hs: Vec<_> = (0..8)
            .map(|i| {
                purloin::spawn(move || {
                    let span = tracing::info_span!("job", i);
                    let _entered = span.enter();
                    for _ in 0..20 {
                        // Parks inside the span, maybe resuming on the other worker.
                        purloin::sleep(Duration::from_micros(200));
                        assert_eq!(tracing::Span::current().id(), span.id());
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    drop(rt);
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let (errors, kinds) = check(&trace);
    assert!(errors.is_empty(), "{errors:#?}");
    // Most of the 160 sleeps park (one whose timer fires before it parks does not).
    assert!(kinds.get("flow wake").copied().unwrap_or(0) > 0, "{kinds:?}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_runtime_stops_only_its_own_trace() {
    let _w = watchdog("a_runtime_stops_only_its_own_trace", Duration::from_secs(60));
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir();
    let first = dir.join(format!("purloin-trace-own-1-{}.json", std::process::id()));
    let second = dir.join(format!("purloin-trace-own-2-{}.json", std::process::id()));
    let rt = purloin::runtime::Builder::new().workers(1).trace(&first).build().unwrap();
    rt.block_on(|| purloin::spawn(|| ()).join().unwrap());
    // The user stops the runtime's trace early and starts another one.
    assert_eq!(purloin::trace::stop().unwrap().path, first);
    purloin::trace::start(&second).unwrap();
    rt.block_on(|| purloin::spawn(|| ()).join().unwrap());
    drop(rt);
    assert!(purloin::trace::is_recording(), "the runtime stopped a trace it did not start");
    assert_eq!(purloin::trace::stop().unwrap().path, second);
    for path in [first, second] {
        let text = std::fs::read_to_string(&path).unwrap();
        let trace: Value = serde_json::from_str(&text).unwrap();
        let (errors, _) = check(&trace);
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        std::fs::remove_file(&path).unwrap();
    }
}

/// Memory stays bounded under a trace. A trace makes every spawn take its G record at once
/// (for the spawn's flow id), so a parent that spawns a wave of children and joins them in
/// spawn order runs most of them inline after claiming them in the global queue (where they
/// overflowed), which leaves a stale entry holding each finished record. With one worker,
/// which runs the parent without a switch, nobody pulled those entries: each wave grew the
/// global queue and the records by a wave's worth. The joiner now drops them as it goes.
#[test]
fn waves_of_spawn_and_join_under_a_trace_keep_memory_bounded() {
    const WAVE: usize = 20_000;
    let _w = watchdog(
        "waves_of_spawn_and_join_under_a_trace_keep_memory_bounded",
        Duration::from_secs(120),
    );
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let path =
        std::env::temp_dir().join(format!("purloin-trace-waves-{}.json", std::process::id()));
    let rt = purloin::runtime::Builder::new().workers(1).trace(&path).build().unwrap();
    let after_each: Vec<(usize, usize)> = rt.block_on(|| {
        (0..4)
            .map(|_| {
                let hs: Vec<_> = (0..WAVE).map(|i| purloin::spawn(move || i)).collect();
                for (i, h) in hs.into_iter().enumerate() {
                    assert_eq!(h.join().unwrap(), i);
                }
                let s = purloin::stats();
                (s.global_queue_len, s.g_records)
            })
            .collect()
    });
    drop(rt);
    std::fs::remove_file(&path).unwrap();
    for (wave, &(queued, records)) in after_each.iter().enumerate() {
        assert!(
            queued < 1_000,
            "after wave {wave}: {queued} entries in the global queue (stale ones of joined \
             children piling up); all: {after_each:?}"
        );
        assert!(
            records < 2 * WAVE,
            "after wave {wave}: {records} G records for waves of {WAVE}; all: {after_each:?}"
        );
    }
}

/// The variable that makes a test of this binary run its child branch (in a child process).
const CHILD: &str = "PURLOIN_TRACE_TEST_CHILD";

/// Runs this binary's test `name` alone in a child process, its child branch selected by
/// `CHILD=mode`, with `trace` as `PURLOIN_TRACE` if given; returns the exit code, stdout and
/// stderr.
fn run_child(
    name: &str,
    mode: &str,
    trace: Option<&std::path::Path>,
) -> (Option<i32>, String, String) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture"]).env(CHILD, mode).env_remove("PURLOIN_TRACE");
    if let Some(path) = trace {
        cmd.env("PURLOIN_TRACE", path);
    }
    let out = cmd.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Some work on the runtime `spawn` reaches: green threads that yield, park on a channel and
/// are joined.
fn some_work() {
    let (tx, rx) = purloin::sync::channel::bounded::<u32>(0);
    let receiver = purloin::spawn(move || rx.iter().sum::<u32>());
    let hs: Vec<_> = (0..8u32)
        .map(|i| {
            let tx = tx.clone();
            purloin::spawn(move || {
                purloin::yield_now();
                tx.send(i).unwrap();
            })
        })
        .collect();
    drop(tx);
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(receiver.join().unwrap(), 28);
}

/// `PURLOIN_TRACE` naming a file that cannot be created: a warning naming the path and the
/// OS error, and the program runs without a trace, on the global runtime and on a runtime
/// built explicitly (where `Builder::trace` with such a path is still an error).
#[test]
fn an_unwritable_trace_variable_warns_and_runs_untraced() {
    const NAME: &str = "an_unwritable_trace_variable_warns_and_runs_untraced";
    match std::env::var(CHILD).as_deref() {
        Ok("global") => {
            some_work();
            assert!(!purloin::trace::is_recording());
            return;
        }
        Ok("explicit") => {
            let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
            rt.block_on(some_work);
            assert!(!purloin::trace::is_recording());
            let bad = std::env::var_os("PURLOIN_TRACE").unwrap();
            let err = purloin::runtime::Builder::new().trace(bad).build().err();
            assert!(err.is_some(), "Builder::trace to an unwritable path must fail the build");
            return;
        }
        _ => {}
    }
    let _w = watchdog(NAME, Duration::from_secs(120));
    let bad = std::env::temp_dir()
        .join(format!("purloin-no-such-dir-{}", std::process::id()))
        .join("trace.json");
    for mode in ["global", "explicit"] {
        let (code, out, err) = run_child(NAME, mode, Some(&bad));
        assert_eq!(code, Some(0), "{mode}: the child failed\nstdout:\n{out}\nstderr:\n{err}");
        let warning = err
            .lines()
            .find(|l| l.contains("PURLOIN_TRACE"))
            .unwrap_or_else(|| panic!("{mode}: no warning about PURLOIN_TRACE on stderr:\n{err}"));
        for part in [&bad.display().to_string(), "No such file or directory", "without a trace"] {
            assert!(warning.contains(part), "{mode}: the warning lacks {part:?}: {warning}");
        }
        let warnings = err.lines().filter(|l| l.contains("PURLOIN_TRACE")).count();
        assert_eq!(warnings, 1, "{mode}: warned more than once:\n{err}");
    }
}

/// A program on the global runtime with `PURLOIN_TRACE` set that never calls `stop` gets a
/// complete, consistent file when it exits normally: returning from its test function (so
/// from `main`), calling `std::process::exit` on the main thread, or on a green thread. In
/// the last case the test's thread is blocked in a join when the process exits, with the
/// record of its spawn in its buffer: the file and stderr say that one thread's last
/// records are missing, and that spawn is all that is missing.
#[test]
fn a_trace_never_stopped_is_complete_at_exit() {
    const NAME: &str = "a_trace_never_stopped_is_complete_at_exit";
    match std::env::var(CHILD).as_deref() {
        Ok("return") => return some_work(),
        Ok("exit") => {
            some_work();
            std::process::exit(0);
        }
        Ok("exit-on-green") => {
            purloin::spawn(|| {
                some_work();
                std::process::exit(0)
            })
            .join()
            .unwrap();
            unreachable!("the process exited");
        }
        _ => {}
    }
    let _w = watchdog(NAME, Duration::from_secs(120));
    for mode in ["return", "exit", "exit-on-green"] {
        let path = std::env::temp_dir()
            .join(format!("purloin-trace-exit-{mode}-{}.json", std::process::id()));
        let (code, out, err) = run_child(NAME, mode, Some(&path));
        assert_eq!(code, Some(0), "{mode}: the child failed\nstdout:\n{out}\nstderr:\n{err}");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{mode}: no trace at {}: {e}", path.display()));
        let trace: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
            let tail = &text[text.len().saturating_sub(200)..];
            panic!("{mode}: the trace is not complete JSON ({e}); it ends with:\n{tail}")
        });
        let (mut errors, kinds) = check(&trace);
        if mode == "exit-on-green" {
            assert_eq!(trace["otherData"]["unflushed_threads"], 1, "{mode}");
            assert!(err.contains("1 threads' last events missing"), "{mode}: stderr:\n{err}");
            // The blocked thread's spawn: its flow has no start.
            let lost =
                |e: &String| e.starts_with("spawn flow of G") && e.ends_with("without a start");
            assert_eq!(errors.iter().filter(|e| lost(e)).count(), 1, "{mode}: {errors:#?}");
            errors.retain(|e| !lost(e));
        } else {
            assert_eq!(trace["otherData"]["unflushed_threads"], 0, "{mode}");
        }
        assert!(errors.is_empty(), "{mode}: {errors:#?}");
        for kind in ["slice run", "flow spawn", "park", "unpark"] {
            assert!(kinds.get(kind).copied().unwrap_or(0) > 0, "{mode}: no {kind:?}: {kinds:?}");
        }
        assert_eq!(trace["otherData"]["dropped_events"], 0, "{mode}");
        std::fs::remove_file(&path).unwrap();
    }
}

/// A writer that lags (its file is a pipe nobody reads yet) makes the recorders drop whole
/// buffers rather than queue them: the drops are counted in the summary, in the file's
/// `otherData`, and on stderr when the trace stops, and the file is still valid JSON.
#[test]
fn a_lagging_writer_drops_and_counts() {
    const NAME: &str = "a_lagging_writer_drops_and_counts";
    if std::env::var(CHILD).as_deref() == Ok("lag") {
        use std::os::unix::ffi::OsStrExt;
        let path = std::env::temp_dir().join(format!("purloin-trace-fifo-{}", std::process::id()));
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let reader = {
            let path = path.clone();
            std::thread::spawn(move || {
                // Opening blocks until the writer opens its end (in `start`).
                let mut f = std::fs::File::open(&path).unwrap();
                wait.recv().unwrap();
                let mut text = String::new();
                f.read_to_string(&mut text).unwrap();
                text
            })
        };
        purloin::trace::start(&path).unwrap();
        // About 350,000 events; the writer can take at most the pipe's buffer, the 32 queued
        // batches of 4096 and the one it writes until the reader reads.
        let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
        rt.block_on(|| {
            for i in 0..100_000u32 {
                assert_eq!(purloin::spawn(move || i).join().unwrap(), i);
            }
        });
        drop(rt);
        go.send(()).unwrap();
        let summary = purloin::trace::stop().unwrap();
        let text = reader.join().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(summary.dropped > 0, "nothing dropped: {summary:?}");
        let trace: Value = serde_json::from_str(&text).expect("the trace is valid JSON");
        assert_eq!(trace["otherData"]["dropped_events"], summary.dropped, "{summary:?}");
        assert_eq!(trace["otherData"]["unflushed_threads"], summary.unflushed_threads as u64);
        let n = trace["traceEvents"].as_array().unwrap().len() as u64;
        assert_eq!(n, summary.events, "the summary counts what the file holds");
        println!("DROPPED={}", summary.dropped);
        return;
    }
    let _w = watchdog(NAME, Duration::from_secs(300));
    let (code, out, err) = run_child(NAME, "lag", None);
    assert_eq!(code, Some(0), "the child failed\nstdout:\n{out}\nstderr:\n{err}");
    let dropped = out
        .lines()
        .find_map(|l| l.strip_prefix("DROPPED="))
        .unwrap_or_else(|| panic!("no count from the child:\n{out}"));
    assert!(
        err.contains(&format!("{dropped} scheduler events dropped")),
        "the stop did not report the {dropped} dropped events on stderr:\n{err}"
    );
}
