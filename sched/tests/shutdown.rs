//! Shutdown: parked green threads are unwound (their destructors run), nothing leaks, and
//! spawning afterwards is an error.
#![cfg(not(loom))]

mod common;

use common::Counted;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, ForcedUnwind, SpawnOptions};

#[test]
fn parked_green_threads_are_unwound_and_their_destructors_run() {
    let _w = common::watchdog("shutdown unwind", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let mut hs = Vec::new();
    for _ in 0..100 {
        let (d, p) = (drops.clone(), parked.clone());
        hs.push(sched.spawn(move || {
            let _guard = Counted(d);
            p.fetch_add(1, Ordering::SeqCst);
            loop {
                purloin_sched::park(); // never unparked
            }
        }));
    }
    while parked.load(Ordering::SeqCst) < 100 {
        std::thread::yield_now();
    }
    let report = sched.shutdown_timeout(Duration::from_millis(50));
    assert_eq!(report.unfinished, 0);
    assert_eq!(report.cancelled, 100);
    assert_eq!(drops.load(Ordering::SeqCst), 100, "every parked green thread's guard dropped");
    for h in hs {
        let err = h.join().unwrap_err();
        assert!(err.downcast_ref::<ForcedUnwind>().is_some());
    }
}

#[test]
fn runnable_work_finishes_before_shutdown_returns() {
    let _w = common::watchdog("shutdown drain", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..10_000 {
        let d = done.clone();
        drop(sched.spawn(move || {
            purloin_sched::yield_now();
            d.fetch_add(1, Ordering::SeqCst);
        }));
    }
    let report = sched.shutdown_timeout(Duration::from_secs(30));
    assert_eq!(report, Default::default());
    assert_eq!(done.load(Ordering::SeqCst), 10_000);
}

#[test]
fn stats_show_no_live_green_threads_after_work() {
    let sched = Builder::new().workers(2).build().unwrap();
    let hs: Vec<_> = (0..1000).map(|i| sched.spawn(move || i)).collect();
    for h in hs {
        h.join().unwrap();
    }
    // Exits finish on g0 right after the joiner is woken: wait for the count to settle.
    let _w = common::watchdog("live to zero", Duration::from_secs(30));
    while sched.stats().live != 0 {
        std::thread::yield_now();
    }
    let s = sched.stats();
    assert_eq!(s.live, 0);
    assert!(s.total.switches >= 1000);
}

#[test]
fn pinned_spawn_from_outside_is_an_error() {
    let sched = Builder::new().workers(1).build().unwrap();
    let opts = SpawnOptions { pinned: true, ..Default::default() };
    let err = sched.spawn_with(opts, || ()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn pinned_green_threads_never_change_os_thread() {
    let _w = common::watchdog("pinned", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let h = sched.spawn(|| {
        let kids: Vec<_> = (0..8)
            .map(|_| {
                purloin_sched::spawn_with(
                    SpawnOptions { pinned: true, ..Default::default() },
                    || {
                        let me = std::thread::current().id();
                        for i in 0..1000 {
                            if i % 3 == 0 {
                                purloin_sched::yield_now();
                            } else {
                                purloin_sched::sleep(Duration::from_micros(10));
                            }
                            assert_eq!(
                                std::thread::current().id(),
                                me,
                                "a pinned green thread moved"
                            );
                        }
                    },
                )
                .unwrap()
            })
            .collect();
        for k in kids {
            k.join().unwrap();
        }
    });
    h.join().unwrap();
}
