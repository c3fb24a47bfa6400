//! `PURLOIN_DUMP_SIGNAL=SIGQUIT`: a SIGQUIT writes the dump to stderr and the program keeps
//! running. The test runs itself as a child process with the variable set.
#![cfg(not(loom))]

mod rt_common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The child: starts the global runtime (which reads the variable), parks a green thread in a known
/// function, says "ready", and waits for a line on stdin before exiting normally.
#[test]
fn child_process_body() {
    if std::env::var_os("PURLOIN_DUMP_SIGNAL_CHILD").is_none() {
        return;
    }
    // The global runtime (the one the signal dumps), built on first use.
    let h = purloin::spawn(parked_in_signal_marker);
    while purloin::debugging::dump().count(purloin::sched::GreenState::Parked) == 0 {
        std::thread::yield_now();
    }
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    h.thread().unpark();
    h.join().unwrap();
    println!("still running");
}

#[inline(never)]
fn parked_in_signal_marker() {
    purloin::park();
}

#[test]
fn sigquit_writes_the_dump_and_the_program_keeps_running() {
    let _w = rt_common::watchdog("dump signal", Duration::from_secs(120));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process_body", "--nocapture", "--test-threads=1"])
        .env("PURLOIN_DUMP_SIGNAL_CHILD", "1")
        .env("PURLOIN_DUMP_SIGNAL", "SIGQUIT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended early");
    }
    // SAFETY: plain system call on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
    // The dump ends up on stderr; read until the marker's frame shows.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut text = String::new();
    loop {
        let mut l = String::new();
        assert!(err.read_line(&mut l).unwrap() > 0, "stderr closed before the dump:\n{text}");
        text.push_str(&l);
        if l.contains("parked_in_signal_marker") {
            break;
        }
    }
    assert!(text.contains("green threads on"), "{text}");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    while !rest.contains("still running") {
        rest.clear();
        assert!(out.read_line(&mut rest).unwrap() > 0, "the child died after the signal");
    }
    assert!(child.wait().unwrap().success());
}
