//! Blocking handoff: a green thread blocking its OS thread inside `blocking()` lets the
//! worker's other green threads run elsewhere; and the monitor reports long runners.
#![cfg(not(loom))]

mod common;

use std::sync::mpsc;
use std::time::Duration;

use purloin_sched::Builder;

/// With ONE worker, green thread A blocks its OS thread (in `blocking`) until green thread B
/// sends on a std channel. B can only run if the monitor hands the P to another thread: without
/// the handoff this deadlocks (and the watchdog fails the test).
#[test]
fn blocking_section_hands_the_processor_to_another_thread() {
    let _w = common::watchdog("handoff", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let (tx, rx) = mpsc::channel::<u32>();
    let a = sched.spawn(move || purloin_sched::blocking(|| rx.recv().unwrap()));
    let b = sched.spawn(move || tx.send(7).unwrap());
    b.join().unwrap();
    assert_eq!(a.join().unwrap(), 7);
    assert!(sched.stats().global.handoffs >= 1, "{:?}", sched.stats().global);
    // And the runtime is still fine afterwards (the blocked worker became a spare).
    let hs: Vec<_> = (0..100).map(|i| sched.spawn(move || i)).collect();
    assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<i32>(), 4950);
}

#[test]
fn blocking_outside_a_green_thread_just_runs() {
    assert_eq!(purloin_sched::blocking(|| 5), 5);
}

/// Computes for `d` of wall time; with `points`, through a preemption point on every turn.
fn compute_for(d: Duration, points: bool) {
    let end = std::time::Instant::now() + d;
    let mut x = 0u64;
    while std::time::Instant::now() < end {
        x = x.wrapping_add(1);
        std::hint::black_box(x);
        if points {
            purloin_sched::preemption_point();
        }
    }
}

#[test]
fn a_long_runner_is_reported_once() {
    let _w = common::watchdog("long runner", Duration::from_secs(60));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_millis(20)).build().unwrap();
    let h = sched.spawn(|| compute_for(Duration::from_millis(200), false));
    h.join().unwrap();
    assert_eq!(sched.stats().global.long_runners, 1);
}

/// A loop that runs far past the threshold but reaches a preemption point on every turn (as a
/// loop of socket operations that never wait does) yields when the monitor asks: it is not
/// reported. Without the monitor's grace after its request, the loop is reported as soon as it
/// passes the threshold.
#[test]
fn a_loop_that_yields_when_asked_is_not_reported() {
    let _w = common::watchdog("preempted loop", Duration::from_secs(60));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_millis(5)).build().unwrap();
    let h = sched.spawn(|| compute_for(Duration::from_millis(200), true));
    h.join().unwrap();
    let stats = sched.stats();
    assert!(stats.total.yields >= 1, "the monitor never asked the loop to yield: {stats:?}");
    assert_eq!(stats.global.long_runners, 0, "a loop that yields when asked was reported");
}

/// A green thread that blocks its OS thread in the kernel (here `std::thread::sleep`; a
/// `std::sync::Mutex` wait is the same to the monitor) is reported too, as blocking.
#[test]
fn a_green_thread_blocking_its_os_thread_is_reported() {
    let _w = common::watchdog("blocked reporter", Duration::from_secs(60));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_millis(20)).build().unwrap();
    sched.spawn(|| std::thread::sleep(Duration::from_millis(200))).join().unwrap();
    assert_eq!(sched.stats().global.long_runners, 1);
}

/// A green thread that switches (yields, sleeps, parks) inside a blocking section whose P was
/// handed to another thread must not touch that P (it belongs to the new holder now): the
/// switch ends the section first. Two green threads keep yielding on the handed-off P while
/// the blocked one, after its P was taken, yields and sleeps inside `blocking`.
#[test]
fn switching_inside_a_blocking_section_after_a_handoff() {
    let _w = common::watchdog("switch in blocking", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let (tx, rx) = mpsc::channel::<u32>();
    let a = sched.spawn(move || {
        purloin_sched::blocking(|| {
            // B runs only once the monitor handed the P to another thread: afterwards this
            // worker thread no longer holds it.
            let v = rx.recv().unwrap();
            for _ in 0..20_000 {
                purloin_sched::yield_now();
            }
            purloin_sched::sleep(Duration::from_millis(1));
            v
        })
    });
    let b = sched.spawn(move || {
        tx.send(7).unwrap();
        for _ in 0..20_000 {
            purloin_sched::yield_now();
        }
    });
    let c = sched.spawn(|| {
        for _ in 0..20_000 {
            purloin_sched::yield_now();
        }
    });
    b.join().unwrap();
    c.join().unwrap();
    assert_eq!(a.join().unwrap(), 7);
    let hs: Vec<_> = (0..100).map(|i| sched.spawn(move || i)).collect();
    assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<i32>(), 4950);
}

/// A green thread with several long stretches (separated by scheduling points) is reported
/// once, not once per stretch.
#[test]
fn a_long_runner_with_many_stretches_is_reported_once() {
    let _w = common::watchdog("long runner stretches", Duration::from_secs(60));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_millis(20)).build().unwrap();
    let h = sched.spawn(|| {
        for _ in 0..4 {
            compute_for(Duration::from_millis(100), false);
            purloin_sched::yield_now();
        }
    });
    h.join().unwrap();
    assert_eq!(sched.stats().global.long_runners, 1);
}

/// A green thread inside `blocking()` is doing what it was told to: the monitor hands its
/// processor off and does not report it as having blocked its worker (it used to: after the
/// handoff the processor still named it as running, and the idle new holder looked blocked).
#[test]
fn a_blocking_section_is_not_reported_as_blocking_its_worker() {
    let _w = common::watchdog("no false report", Duration::from_secs(60));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_millis(5)).build().unwrap();
    let h =
        sched.spawn(|| purloin_sched::blocking(|| std::thread::sleep(Duration::from_millis(300))));
    h.join().unwrap();
    let g = sched.stats().global;
    assert!(g.handoffs >= 1, "the processor was handed off: {g:?}");
    assert_eq!(g.long_runners, 0, "a blocking section reported as a long runner: {g:?}");
}

/// Waits (the watchdog bounds it) until the monitor of `sched` has found every worker parked
/// and gone to sleep with no deadline.
fn wait_for_idle_monitor(sched: &purloin_sched::Scheduler) {
    while sched.stats().global.monitor_idle_sleeps == 0 || sched.stats().parked == 0 {
        std::thread::yield_now();
    }
}

/// With every worker parked the monitor sleeps with no deadline: its round count stays flat
/// across an idle window (a polling monitor adds a round every 10 ms at most), and the event
/// that ends the window — a parked green thread unparked from outside, which wakes a worker —
/// wakes the monitor.
#[test]
fn an_idle_monitor_sleeps_until_a_worker_leaves_its_park() {
    let _w = common::watchdog("idle monitor", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let release = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let r = release.clone();
    let parked = sched.spawn(move || {
        while !r.load(std::sync::atomic::Ordering::Acquire) {
            purloin_sched::park();
        }
    });
    wait_for_idle_monitor(&sched);
    let before = sched.stats().global;
    // The window: any length shows a polling monitor; a sleeping one stays flat whatever it is.
    std::thread::sleep(Duration::from_millis(200));
    let after = sched.stats().global;
    assert_eq!(
        (after.monitor_wakeups, after.monitor_idle_sleeps),
        (before.monitor_wakeups, before.monitor_idle_sleeps),
        "the monitor woke while every worker was parked"
    );
    release.store(true, std::sync::atomic::Ordering::Release);
    parked.thread().unpark();
    parked.join().unwrap();
    while sched.stats().global.monitor_wakeups == after.monitor_wakeups {
        std::thread::yield_now();
    }
}

/// A green thread that enters a blocking call right after the runtime was idle (the monitor
/// asleep with no deadline) still gets its P handed off: with ONE worker, B runs only if the
/// monitor wakes and hands the P to another thread (without it the watchdog fails the test).
#[test]
fn a_blocking_section_after_idleness_is_handed_off() {
    let _w = common::watchdog("handoff after idle", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    sched.spawn(|| ()).join().unwrap();
    wait_for_idle_monitor(&sched);
    let handoffs = sched.stats().global.handoffs;
    let (tx, rx) = mpsc::channel::<u32>();
    let a = sched.spawn(move || purloin_sched::blocking(|| rx.recv().unwrap()));
    let b = sched.spawn(move || tx.send(7).unwrap());
    b.join().unwrap();
    assert_eq!(a.join().unwrap(), 7);
    assert!(sched.stats().global.handoffs > handoffs, "{:?}", sched.stats().global);
}
