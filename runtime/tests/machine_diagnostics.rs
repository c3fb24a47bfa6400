//! What the monitor says about machines: nothing false at a big host's shutdown, and a step
//! that blocks its worker is called a task step, not a green thread. Each runs in a child
//! process whose stderr is checked.
#![cfg(not(loom))]

mod machine_common;

use std::process::Command;
use std::time::Duration;

use machine_common::{host, watchdog};
use purloin::machine::{Error, EventKind, Events, Machine, Payload, StepOutput};

/// Idles until cancelled, then completes.
struct Quiet;

impl Machine for Quiet {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        for e in events {
            if e.kind == EventKind::Cancel {
                out.complete(Payload::empty());
                return Ok(());
            }
        }
        out.idle();
        Ok(())
    }
}

/// Blocks its worker's OS thread in its first step, then completes.
struct Sleeper;

impl Machine for Sleeper {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, _events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        std::thread::sleep(Duration::from_millis(300));
        out.complete(Payload::empty());
        Ok(())
    }
}

const CHILD: &str = "PURLOIN_TEST_MACHINE_DIAGNOSTICS_CHILD";

/// Runs test `name` of this binary in a child process with `CHILD` set; returns its stdout
/// and stderr after checking it exited with 0.
fn run_child(name: &str) -> (String, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// Shutting down a host with many idle machines (their cancel steps finishing on both
/// workers at once) prints nothing: none of that blocks a worker. Each finishing step used to
/// take the host's shutdown lock to notify, and the workers convoyed on it (reported as
/// "green thread … has blocked its worker's OS thread"). 100,000 machines in a debug build
/// (a few seconds), 1,000,000 in release; `PURLOIN_TEST_BIG_HOST=N` picks another count.
#[test]
fn shutting_down_a_big_host_reports_no_blocked_worker() {
    let n: usize = std::env::var("PURLOIN_TEST_BIG_HOST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 100_000 } else { 1_000_000 });
    if std::env::var_os(CHILD).is_some() {
        let host = host(2);
        for _ in 0..n {
            host.spawn_machine(Quiet, "q", Payload::empty()).unwrap();
        }
        let report = host.shutdown(Duration::from_secs(60));
        println!("REPORT {} {} {}", report.cancelled, report.timed_out, report.unfinished);
        return;
    }
    let _w = watchdog("big host shutdown", Duration::from_secs(600));
    let (stdout, stderr) = run_child("shutting_down_a_big_host_reports_no_blocked_worker");
    assert!(stdout.contains(&format!("REPORT {n} 0 0")), "{stdout}");
    assert!(!stderr.contains("purloin:"), "a diagnostic at shutdown:\n{stderr}");
}

/// A machine step that blocks its worker (`std::thread::sleep`) is reported once, as a
/// task step with advice for steps, not as a green thread.
#[test]
fn a_blocking_step_is_reported_as_a_task_step() {
    if std::env::var_os(CHILD).is_some() {
        let host = host(2);
        let id = host.spawn_machine(Sleeper, "s", Payload::empty()).unwrap();
        host.wait(id).unwrap();
        host.shutdown(Duration::from_secs(10));
        return;
    }
    let _w = watchdog("blocking step", Duration::from_secs(120));
    let (_, stderr) = run_child("a_blocking_step_is_reported_as_a_task_step");
    let lines: Vec<_> = stderr.lines().filter(|l| l.starts_with("purloin:")).collect();
    assert_eq!(lines.len(), 1, "one report:\n{stderr}");
    assert!(lines[0].contains("a task step (stackless task "), "{}", lines[0]);
    assert!(lines[0].contains("has blocked its worker's OS thread"), "{}", lines[0]);
    assert!(lines[0].contains("yield a command whose handler"), "{}", lines[0]);
    assert!(!lines[0].contains("green thread "), "{}", lines[0]);
}
