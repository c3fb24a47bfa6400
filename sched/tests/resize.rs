//! Changing the number of processors at run time (Go's procresize): no green thread is lost,
//! timers move with their processor's work, pinned green threads block a shrink.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, SpawnOptions};

#[test]
fn shrinking_and_growing_keeps_every_green_thread() {
    let _w = common::watchdog("resize", Duration::from_secs(120));
    // No spare processors: this test counts the processors `set_workers` makes (a worker
    // thread the loaded OS leaves waiting for a lock may get a spare; `tests/unmarked.rs`).
    let sched = Builder::new().workers(4).max_workers(8).max_spare_workers(0).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // Busy green threads that yield and sleep (timers) while the processor count changes.
    let hs: Vec<_> = (0..200)
        .map(|i| {
            let (d, s) = (done.clone(), stop.clone());
            sched.spawn(move || {
                let mut rounds = 0u64;
                while !s.load(Ordering::Acquire) {
                    if i % 2 == 0 {
                        purloin_sched::yield_now();
                    } else {
                        purloin_sched::sleep(Duration::from_micros(200));
                    }
                    rounds += 1;
                }
                d.fetch_add(1, Ordering::SeqCst);
                rounds
            })
        })
        .collect();
    for n in [1, 3, 8, 2, 1, 4] {
        sched.set_workers(n).unwrap();
        assert_eq!(sched.workers(), n);
        assert_eq!(sched.stats().procs.len(), n);
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Release);
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 200);
    // Still works after all that.
    assert_eq!(sched.spawn(|| 7).join().unwrap(), 7);
}

#[test]
fn bad_sizes_are_errors() {
    let sched = Builder::new().workers(2).max_workers(4).build().unwrap();
    assert_eq!(sched.set_workers(0).unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    let err = sched.set_workers(5).unwrap_err();
    assert!(err.to_string().contains("max_workers"), "{err}");
}

#[test]
fn pinned_green_threads_block_removing_their_processor() {
    let _w = common::watchdog("resize pinned", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    // Pin a green thread to whichever worker runs this spawner, and learn which one.
    let (r2, rd) = (release.clone(), ready.clone());
    let spawner = sched.spawn(move || {
        let pinned = purloin_sched::spawn_with(
            SpawnOptions { pinned: true, ..Default::default() },
            move || {
                rd.store(true, Ordering::Release);
                while !r2.load(Ordering::Acquire) {
                    purloin_sched::sleep(Duration::from_millis(1));
                }
            },
        )
        .unwrap();
        pinned.join().unwrap();
    });
    while !ready.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    // Shrinking to 1 either succeeds (the pin is on worker 0) or names the pinned threads.
    match sched.set_workers(1) {
        Ok(()) => assert_eq!(sched.workers(), 1),
        Err(e) => assert!(e.to_string().contains("pinned"), "{e}"),
    }
    release.store(true, Ordering::Release);
    spawner.join().unwrap();
}
