//! Real-thread behaviour of `Parker` / `Unparker`.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::with_watchdog;
use purloin_parking::Parker;

#[test]
fn unpark_before_park_makes_park_return_at_once() {
    let parker = Parker::new();
    let unparker = parker.unparker();
    assert!(!unparker.unpark(), "not parked: no wake issued");
    parker.park(); // consumes the token
    // Only one token: the next timed park times out.
    assert!(!parker.park_timeout(Duration::from_millis(1)));
}

#[test]
fn tokens_do_not_accumulate() {
    let parker = Parker::new();
    let unparker = parker.unparker();
    for _ in 0..3 {
        assert!(!unparker.unpark());
    }
    assert!(parker.park_timeout(Duration::ZERO));
    assert!(!parker.park_timeout(Duration::ZERO));
}

#[test]
fn park_timeout_returns_after_the_timeout() {
    with_watchdog("park_timeout_returns_after_the_timeout", || {
        let parker = Parker::new();
        for millis in [0u64, 1, 25] {
            let start = Instant::now();
            assert!(!parker.park_timeout(Duration::from_millis(millis)));
            let elapsed = start.elapsed();
            assert!(elapsed >= Duration::from_millis(millis));
            assert!(elapsed < Duration::from_millis(millis) + Duration::from_secs(10));
        }
        let deadline = Instant::now() + Duration::from_millis(10);
        assert!(!parker.park_deadline(deadline));
        assert!(Instant::now() >= deadline);
        assert!(!parker.park_deadline(Instant::now() - Duration::from_millis(1)));
    });
}

#[test]
fn huge_timeout_parks_until_unparked() {
    with_watchdog("huge_timeout_parks_until_unparked", || {
        let parker = Parker::new();
        let unparker = parker.unparker();
        let t = thread::spawn(move || unparker.unpark());
        assert!(parker.park_timeout(Duration::MAX));
        t.join().unwrap();
    });
}

#[test]
fn unparker_may_outlive_its_parker() {
    let parker = Parker::new();
    let unparker = parker.unparker();
    let clone = unparker.clone();
    drop(parker);
    assert!(!unparker.unpark());
    assert!(!clone.unpark());
}

#[test]
fn a_wake_from_another_thread_ends_an_untimed_park() {
    with_watchdog("a_wake_from_another_thread_ends_an_untimed_park", || {
        let parker = Parker::new();
        let unparker = parker.unparker();
        let data = AtomicUsize::new(0);
        thread::scope(|s| {
            s.spawn(|| {
                data.store(42, Ordering::Relaxed);
                unparker.unpark();
            });
            parker.park();
            // P1: the unpark's Release / the park's Acquire make the write visible.
            assert_eq!(data.load(Ordering::Relaxed), 42);
        });
    });
}

/// Many unparkers, one parker: a counter only grows, the owner parks until it reaches the
/// total. A lost unpark would leave the owner parked forever (the watchdog fails the test).
#[test]
fn concurrent_unparks_are_never_lost() {
    with_watchdog("concurrent_unparks_are_never_lost", || {
        const UNPARKERS: usize = 3;
        const EACH: usize = 20_000;
        let parker = Parker::new();
        let posted = AtomicUsize::new(0);
        thread::scope(|s| {
            for _ in 0..UNPARKERS {
                let unparker = parker.unparker();
                let posted = &posted;
                s.spawn(move || {
                    for _ in 0..EACH {
                        posted.fetch_add(1, Ordering::Release);
                        unparker.unpark();
                    }
                });
            }
            while posted.load(Ordering::Acquire) < UNPARKERS * EACH {
                parker.park();
            }
        });
    });
}

/// The 10^6-round ping-pong: each side parks until the other hands it the turn.
#[test]
fn ping_pong_a_million_rounds_never_hangs() {
    with_watchdog("ping_pong_a_million_rounds_never_hangs", || {
        const ROUNDS: usize = 1_000_000;
        let parkers = [Parker::new(), Parker::new()];
        let unparkers = [parkers[0].unparker(), parkers[1].unparker()];
        let turn = AtomicUsize::new(0);
        let woke_sleeper = AtomicUsize::new(0);
        thread::scope(|s| {
            for (me, parker) in parkers.into_iter().enumerate() {
                let (turn, unparkers, woke_sleeper) = (&turn, &unparkers, &woke_sleeper);
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        let mine = 2 * round + me;
                        while turn.load(Ordering::Acquire) != mine {
                            parker.park();
                        }
                        turn.store(mine + 1, Ordering::Release);
                        if unparkers[1 - me].unpark() {
                            woke_sleeper.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(turn.into_inner(), 2 * ROUNDS);
        eprintln!(
            "ping-pong: {} of {} unparks found the peer asleep",
            woke_sleeper.into_inner(),
            2 * ROUNDS
        );
    });
}
