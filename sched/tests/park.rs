//! park / unpark: token semantics, a soak of hand-offs across workers, stale handles, sleeps.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use purloin_sched::{Builder, GreenThread};

#[test]
fn unpark_before_park_makes_park_return() {
    let _w = common::watchdog("token", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let h = sched.spawn(|| {
        let me = purloin_sched::current().unwrap();
        assert!(me.unpark());
        purloin_sched::park(); // consumes the token: returns at once
        true
    });
    assert!(h.join().unwrap());
}

#[test]
fn unpark_of_a_finished_green_thread_returns_false() {
    let sched = Builder::new().workers(1).build().unwrap();
    let h = sched.spawn(|| ());
    let t = *h.thread();
    h.join().unwrap();
    // Let the worker finish the exit on g0.
    for _ in 0..1000 {
        if t.is_finished() {
            break;
        }
        std::thread::yield_now();
    }
    assert!(t.is_finished());
    assert!(!t.unpark());
    assert!(t.name().is_none());
}

/// Two green threads hand a baton back and forth 10^5 times with park/unpark, on two workers
/// (they migrate freely): no hand-off is lost (a lost one would hang: the watchdog fails it).
#[test]
fn park_unpark_soak_across_workers() {
    const ROUNDS: u64 = 100_000;
    let _w = common::watchdog("park soak", Duration::from_secs(240));
    let sched = Builder::new().workers(2).build().unwrap();
    let turn = Arc::new(AtomicU64::new(0));
    let peer: Arc<[std::sync::Mutex<Option<GreenThread>>; 2]> =
        Arc::new([std::sync::Mutex::new(None), std::sync::Mutex::new(None)]);
    let ready = Arc::new(std::sync::Barrier::new(2));
    let mut hs = Vec::new();
    for me in 0..2u64 {
        let turn = turn.clone();
        let peer = peer.clone();
        let ready = ready.clone();
        hs.push(sched.spawn(move || {
            *peer[me as usize].lock().unwrap() = purloin_sched::current();
            // Both registered before anyone unparks (a std barrier briefly blocks the worker:
            // fine here, there are two workers and two green threads).
            purloin_sched::blocking(|| ready.wait());
            let other = peer[1 - me as usize].lock().unwrap().unwrap();
            loop {
                let t = turn.load(Ordering::Acquire);
                if t >= 2 * ROUNDS {
                    other.unpark();
                    return;
                }
                if t % 2 == me {
                    turn.store(t + 1, Ordering::Release);
                    other.unpark();
                } else {
                    purloin_sched::park();
                }
            }
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    assert!(turn.load(Ordering::Relaxed) >= 2 * ROUNDS);
}

#[test]
fn sleep_waits_at_least_the_duration_and_frees_the_worker() {
    let _w = common::watchdog("sleep", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let other_ran = Arc::new(AtomicBool::new(false));
    let o = other_ran.clone();
    let h = sched.spawn(move || {
        let start = Instant::now();
        let o2 = o.clone();
        let other = purloin_sched::spawn(move || o2.store(true, Ordering::Release)).unwrap();
        purloin_sched::sleep(Duration::from_millis(30));
        // With one worker the other green thread can only have run while we slept.
        let ran_meanwhile = o.load(Ordering::Acquire);
        other.join().unwrap();
        (start.elapsed(), ran_meanwhile)
    });
    let (slept, ran_meanwhile) = h.join().unwrap();
    assert!(slept >= Duration::from_millis(30), "slept only {slept:?}");
    assert!(ran_meanwhile);
    assert!(other_ran.load(Ordering::Acquire));
}

#[test]
fn park_timeout_returns_without_unpark() {
    let _w = common::watchdog("park_timeout", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let h = sched.spawn(|| {
        let start = Instant::now();
        // Spurious returns are allowed: loop until the deadline passed.
        let deadline = start + Duration::from_millis(20);
        while Instant::now() < deadline {
            purloin_sched::park_deadline(deadline);
        }
        start.elapsed()
    });
    assert!(h.join().unwrap() >= Duration::from_millis(20));
}

/// Many green threads sleeping at once with different deadlines all wake.
#[test]
fn many_timers() {
    let _w = common::watchdog("many timers", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let hs: Vec<_> = (0..1000u64)
        .map(|i| {
            sched.spawn(move || {
                purloin_sched::sleep(Duration::from_micros(100 * (i % 50)));
                i
            })
        })
        .collect();
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 999 * 1000 / 2);
}
