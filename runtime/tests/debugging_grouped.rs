//! Grouped dumps through the facade, and the dump signal's choice between the full and the
//! grouped form: past `SIGNAL_GROUPED_ABOVE` green threads it writes the groups. The signal
//! tests run this binary again as a child process (`child_process_body`).
#![cfg(not(loom))]

mod rt_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use purloin::debugging::SIGNAL_GROUPED_ABOVE;
use purloin::sched::{GreenState, WaitKind};

#[inline(never)]
fn parked_in_grouped_marker(rx: purloin::sync::channel::Receiver<u32>) {
    let _ = rx.recv();
}

/// The child's part: `PURLOIN_GROUPED_CHILD=n` parks `n` green threads of the global runtime
/// in a channel receive, says "ready", waits for a line on stdin, releases them and exits.
#[test]
fn child_process_body() {
    let Some(n) = std::env::var_os("PURLOIN_GROUPED_CHILD") else { return };
    let n: usize = n.to_str().unwrap().parse().unwrap();
    let (tx, rx) = purloin::sync::channel::bounded::<u32>(0);
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let rx = rx.clone();
            purloin::spawn(move || parked_in_grouped_marker(rx))
        })
        .collect();
    while purloin::debugging::dump_grouped().count(GreenState::Parked) < n {
        std::thread::yield_now();
    }
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    // A dump in progress holds stderr until it is written whole: wait for it.
    drop(std::io::stderr().lock());
    drop(tx);
    for h in handles {
        h.join().unwrap();
    }
    println!("still running");
}

/// Runs the child with `n` parked green threads, sends it SIGQUIT, and returns its stderr.
fn signal_dump_of(n: usize) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process_body", "--nocapture", "--test-threads=1"])
        .env("PURLOIN_GROUPED_CHILD", n.to_string())
        .env("PURLOIN_DUMP_SIGNAL", "SIGQUIT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let until = |r: &mut dyn BufRead, what: &str| {
        let mut text = String::new();
        loop {
            let mut l = String::new();
            assert!(r.read_line(&mut l).unwrap() > 0, "the child ended before {what:?}:\n{text}");
            text.push_str(&l);
            if l.contains(what) {
                return text;
            }
        }
    };
    until(&mut out, "ready");
    // SAFETY: a plain system call on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) }, 0);
    let mut text = until(&mut err, "=== end of the purloin dump ===");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    until(&mut out, "still running");
    err.read_to_string(&mut text).unwrap();
    assert!(child.wait().unwrap().success(), "{text}");
    text
}

/// Past the threshold the signal writes one group for the many green threads parked at one
/// place, with the count; up to it, every green thread.
#[test]
fn the_dump_signal_groups_past_the_threshold() {
    let _w = rt_common::watchdog("grouped dump signal", Duration::from_secs(300));
    let many = SIGNAL_GROUPED_ABOVE + 100;
    let text = signal_dump_of(many);
    assert!(text.contains("green threads grouped by stack"), "{text}");
    assert!(text.contains(&format!("{many} × parked: a channel receive")), "{text}");
    assert!(text.contains("parked_in_grouped_marker"), "{text}");
    assert!(!text.contains("\ngreen thread "), "no per-thread section: {text}");
    let few = 3;
    let text = signal_dump_of(few);
    assert!(!text.contains("grouped by stack"), "{text}");
    assert_eq!(text.matches("parked_in_grouped_marker").count(), few, "{text}");
}

/// `debugging::dump_grouped` from a green thread: its runtime's green threads, one group per
/// place, the calling green thread in a group of its own.
#[test]
fn dump_grouped_counts_the_runtime_s_green_threads() {
    let _w = rt_common::watchdog("dump_grouped", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    rt.block_on(|| {
        let (tx, rx) = purloin::sync::channel::bounded::<u32>(0);
        let hs: Vec<_> = (0..40)
            .map(|_| {
                let rx = rx.clone();
                purloin::spawn(move || parked_in_grouped_marker(rx))
            })
            .collect();
        while purloin::debugging::dump_grouped().count(GreenState::Parked) < 40 {
            purloin::yield_now();
        }
        let g = purloin::debugging::dump_grouped();
        let text = g.to_string();
        assert_eq!(g.threads, 41, "{text}");
        assert_eq!(g.groups[0].count, 40, "{text}");
        assert_eq!(g.groups[0].wait, Some(WaitKind::ChannelRecv), "{text}");
        let bt = g.groups[0].backtrace.as_ref().unwrap();
        assert!(bt.contains("parked_in_grouped_marker"), "{text}");
        assert!(bt.frames[0].function.as_deref().unwrap().contains("recv"), "{text}");
        let me = purloin::current().unwrap().id();
        assert!(g.groups.iter().any(|g| g.count == 1 && g.sample == [me]), "{text}");
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
    });
}
