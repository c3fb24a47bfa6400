//! `JoinHandle` edge cases: a handle waited on from one thread and joined from another, a
//! timeout too large to be a deadline, and a join of a green thread queued behind a shutdown
//! that gave up.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, Cancelled};

/// `wait_timeout` on one OS thread registers it as the waiter; a `join` on another OS thread
/// still returns when the child finishes (it used to park forever: the wake went to the
/// first thread).
#[test]
fn wait_timeout_on_one_thread_then_join_on_another() {
    let _w = common::watchdog("cross-thread join", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let go = Arc::new(AtomicBool::new(false));
    let g2 = go.clone();
    let mut h = sched.spawn(move || {
        while !g2.load(Ordering::Acquire) {
            purloin_sched::yield_now();
        }
        7
    });
    assert!(!h.wait_timeout(Duration::from_millis(1)));
    let joiner = std::thread::spawn(move || {
        // Also a second wait_timeout from this other thread.
        let _ = h.wait_timeout(Duration::from_millis(1));
        h.join().unwrap()
    });
    go.store(true, Ordering::Release);
    assert_eq!(joiner.join().unwrap(), 7);
}

/// `Duration::MAX` is accepted (no overflow panic) and waits until the child finishes, from an
/// OS thread and from a green thread.
#[test]
fn wait_timeout_accepts_duration_max() {
    let _w = common::watchdog("wait_timeout(MAX)", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let mut h = sched.spawn(|| 1);
    assert!(h.wait_timeout(Duration::MAX));
    assert_eq!(h.join().unwrap(), 1);
    let outer = sched.spawn(|| {
        let mut h = purloin_sched::spawn(|| 2).unwrap();
        assert!(h.wait_timeout(Duration::MAX));
        h.join().unwrap()
    });
    assert_eq!(outer.join().unwrap(), 2);
}

/// A shutdown that gives up on a green thread that never yields still fails the green
/// threads queued behind it with `Cancelled`, so their joins return.
#[test]
fn join_of_a_thread_queued_behind_a_shutdown_that_gave_up() {
    let _w = common::watchdog("join after give-up", Duration::from_secs(60));
    let sched = Builder::new().workers(1).monitor(false).build().unwrap();
    let (started, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (s2, r2) = (started.clone(), release.clone());
    let spinner = sched.spawn(move || {
        s2.store(true, Ordering::Release);
        // Never reaches a scheduling point until the test lets it go.
        while !r2.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    });
    while !started.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let queued = sched.spawn(|| 1);
    let report = sched.shutdown_timeout(Duration::from_millis(20));
    assert_eq!(report.unfinished, 1, "only the spinner is unfinished: {report:?}");
    let err = queued.join().unwrap_err();
    assert!(err.downcast_ref::<Cancelled>().is_some(), "the queued thread was cancelled");
    release.store(true, Ordering::Release);
    spinner.join().unwrap();
}
