//! The counters: with `--features stats` they count; without they read zero.
//! One test function, because the counters are process-wide and tests run in parallel.
#![cfg(not(loom))]

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{spin_until, with_watchdog};
use purloin_parking::futex::{self, AtomicU32};
use purloin_parking::{Parker, ParkingLot, stats};

#[test]
fn counters_track_waits_wakes_skips_and_timeouts() {
    with_watchdog("counters_track_waits_wakes_skips_and_timeouts", || {
        // 1. signal() with nobody asleep: no syscall at all, every wake counted as skipped.
        let lot = ParkingLot::new();
        let before = stats::snapshot();
        for _ in 0..100_000 {
            lot.signal(1);
        }
        let d = stats::snapshot().since(&before);
        assert_eq!(d.syscalls(), 0, "signal with no waiter made a syscall: {d:?}");
        if stats::ENABLED {
            assert_eq!(d.wakes_skipped, 100_000);
        }

        // 2. unpark of a thread that is not parked: skipped too.
        let parker = Parker::new();
        let before = stats::snapshot();
        parker.unparker().unpark();
        parker.park();
        let d = stats::snapshot().since(&before);
        assert_eq!(d.syscalls(), 0);
        if stats::ENABLED {
            assert_eq!(d.wakes_skipped, 1);
        }

        // 3. a timed wait that expires: one wait, one timeout.
        let word = AtomicU32::new(0);
        let before = stats::snapshot();
        while futex::wait(&word, 0, Some(Instant::now() + Duration::from_millis(5)))
            != futex::WaitResult::TimedOut
        {}
        let d = stats::snapshot().since(&before);
        if stats::ENABLED {
            assert!(d.futex_waits >= 1);
            assert_eq!(d.timeouts, 1);
        } else {
            assert_eq!(d, stats::Counters::default());
        }

        // 4. a wake with nobody there is counted as empty where the OS reports how many it
        // woke; elsewhere (an upper bound: `wake_one` says 1) nothing tells it was empty.
        let before = stats::snapshot();
        let woken = futex::wake_one(&word);
        let d = stats::snapshot().since(&before);
        let empty = if futex::WAKE_COUNT_IS_EXACT {
            assert_eq!(woken, 0);
            1
        } else {
            assert_eq!(woken, 1);
            0
        };
        if stats::ENABLED {
            assert_eq!((d.futex_wakes, d.wakes_empty), (1, empty));
        }

        // 5. a signal that finds a registered sleeper issues exactly one wake.
        let before = stats::snapshot();
        thread::scope(|s| {
            let snapshot = lot.state();
            let lot = &lot;
            s.spawn(move || lot.wait(snapshot));
            spin_until(|| lot.waiters() == 1);
            lot.signal(1);
        });
        let d = stats::snapshot().since(&before);
        if stats::ENABLED {
            assert_eq!(d.futex_wakes, 1);
            assert_eq!(d.wakes_skipped, 0);
        }
    });
}
