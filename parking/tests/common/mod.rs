//! Helpers shared by the real-thread tests.
#![allow(dead_code)]

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// A generous bound for anything that should take milliseconds: a hang fails the test after
/// this long instead of blocking CI.
pub const WATCHDOG: Duration = Duration::from_secs(120);

/// Runs `f` on the current thread while a watchdog thread waits (on a channel, with a timeout)
/// for it to finish; if `WATCHDOG` passes first the watchdog prints `name` and aborts the
/// process, so a lost wake-up shows up as a failed test binary, not a stuck CI job.
pub fn with_watchdog<R>(name: &str, f: impl FnOnce() -> R) -> R {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let label = name.to_owned();
    let watchdog = thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(WATCHDOG) {
            eprintln!("watchdog: test `{label}` still running after {WATCHDOG:?}: hung; aborting");
            std::process::abort();
        }
    });
    let result = f();
    drop(done_tx);
    watchdog.join().expect("watchdog thread panicked");
    result
}

/// Yields until `cond()` holds, under the caller's watchdog. For waiting until another thread
/// reached a state (e.g. "registered as a waiter") without sleeping.
pub fn spin_until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        thread::yield_now();
    }
}
