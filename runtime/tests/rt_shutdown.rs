//! Shutdown answers quickly and never aborts: a runtime dropped from one of its own green
//! threads hands its shutdown off; parked green threads that nothing pending can wake are
//! unwound at once instead of after the grace period; the grace period is a builder option.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Drops;

/// Dropping a runtime from one of its own green threads used to panic twice (the scheduler
/// refuses to wait for itself, then its destructor refused again during the unwind) and
/// abort; now the drop returns and a new OS thread shuts the runtime down.
#[test]
fn dropping_a_runtime_from_its_own_green_thread_hands_the_shutdown_off() {
    let _w = common::watchdog("drop from own green thread", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let slot: Arc<Mutex<Option<purloin::Runtime>>> = Arc::new(Mutex::new(None));
    let s2 = slot.clone();
    let h = rt.spawn(move || {
        let rt = loop {
            if let Some(rt) = s2.lock().unwrap().take() {
                break rt;
            }
            purloin::yield_now();
        };
        drop(rt);
        5
    });
    *slot.lock().unwrap() = Some(rt);
    assert_eq!(h.join().unwrap(), 5);
}

/// With a grace period of an hour, dropping a runtime whose green threads are parked on a
/// channel, in `park()` and on a mutex (nothing inside the runtime can wake them) still
/// returns at once, after unwinding them (their destructors run).
#[test]
fn parked_green_threads_nothing_can_wake_are_unwound_without_waiting_the_grace() {
    let _w = common::watchdog("drop with parked threads", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let rt = purloin::runtime::Builder::new()
        .workers(2)
        .shutdown_grace(Duration::from_secs(3600))
        .build()
        .unwrap();
    let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
    let lock = Arc::new(purloin::sync::Mutex::new(()));
    let held = lock.clone();
    let (p, d) = (parked.clone(), drops.clone());
    drop(rt.spawn(move || {
        let _g = Drops(d);
        let _held = held.lock();
        p.fetch_add(1, Ordering::SeqCst);
        purloin::park();
    }));
    while parked.load(Ordering::SeqCst) < 1 {
        std::thread::yield_now();
    }
    for i in 0..3 {
        let (p, d, rx, lock) = (parked.clone(), drops.clone(), rx.clone(), lock.clone());
        drop(rt.spawn(move || {
            let _g = Drops(d);
            p.fetch_add(1, Ordering::SeqCst);
            match i {
                0 => drop(rx.recv()),
                1 => loop {
                    purloin::park();
                },
                _ => drop(lock.lock()),
            }
        }));
    }
    while parked.load(Ordering::SeqCst) < 4 {
        std::thread::yield_now();
    }
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), 4, "every parked green thread was unwound");
    drop(tx);
}

/// A green thread in a long `sleep` (a pending timer) is waited for only for the grace
/// period, then unwound.
#[test]
fn a_long_sleep_is_unwound_after_the_grace_period() {
    let _w = common::watchdog("drop with a sleeper", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let rt = purloin::runtime::Builder::new()
        .workers(1)
        .shutdown_grace(Duration::from_millis(10))
        .build()
        .unwrap();
    let (d, s) = (drops.clone(), started.clone());
    let h = rt.spawn(move || {
        let _g = Drops(d);
        s.fetch_add(1, Ordering::SeqCst);
        purloin::sleep(Duration::from_secs(3600));
    });
    while started.load(Ordering::SeqCst) < 1 {
        std::thread::yield_now();
    }
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(h.join().unwrap_err().downcast_ref::<purloin::ForcedUnwind>().is_some());
}

/// A short grace is for parked green threads: one that keeps running and reaching
/// scheduling points (yielding) is still waited for (up to 5 s), not detached as stuck.
#[test]
fn a_busy_yielding_green_thread_finishes_despite_a_short_grace() {
    let _w = common::watchdog("busy at shutdown", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let h = rt.spawn(move || {
        s.store(1, Ordering::SeqCst);
        // Busy for 400 ms (longer than the grace and the unwinding wait after it), yielding.
        let start = std::time::Instant::now();
        let mut rounds = 0u64;
        while start.elapsed() < Duration::from_millis(400) {
            rounds += 1;
            purloin::yield_now();
        }
        rounds
    });
    while started.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let report = rt.shutdown_timeout(Duration::from_millis(10));
    assert_eq!(report.unfinished, 0, "{report:?}");
    assert!(h.join().is_ok());
}
