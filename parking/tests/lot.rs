//! Real-thread behaviour of `ParkingLot`.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{spin_until, with_watchdog};
use purloin_parking::ParkingLot;

#[test]
fn signal_without_waiter_wakes_nobody_but_changes_the_state() {
    let lot = ParkingLot::new();
    let before = lot.state();
    assert_eq!(lot.signal(1), 0);
    assert_eq!(lot.signal(0), 0);
    assert_ne!(lot.state(), before);
    assert_eq!(lot.waiters(), 0);
}

#[test]
fn wait_on_a_stale_snapshot_returns_at_once() {
    let lot = ParkingLot::new();
    let s = lot.state();
    lot.signal(1);
    lot.wait(s); // would hang (and trip no watchdog: it is the main test thread) if broken
    assert!(!lot.wait_deadline(s, Instant::now() + Duration::from_secs(3600)));
    assert_eq!(lot.waiters(), 0);
}

#[test]
fn wait_deadline_times_out_after_the_deadline() {
    with_watchdog("wait_deadline_times_out_after_the_deadline", || {
        let lot = ParkingLot::new();
        let deadline = Instant::now() + Duration::from_millis(30);
        let s = lot.state();
        assert!(lot.wait_deadline(s, deadline));
        assert!(Instant::now() >= deadline);
        assert_eq!(lot.waiters(), 0, "a timed-out waiter must unregister");
    });
}

#[test]
fn a_signal_from_another_thread_ends_a_wait() {
    with_watchdog("a_signal_from_another_thread_ends_a_wait", || {
        let lot = ParkingLot::new();
        thread::scope(|s| {
            let snapshot = lot.state();
            let lot = &lot;
            let waiter = s.spawn(move || {
                lot.wait_deadline(snapshot, Instant::now() + Duration::from_secs(3600))
            });
            spin_until(|| lot.waiters() == 1);
            assert!(lot.signal(1) <= 1);
            assert!(!waiter.join().unwrap(), "woken by a signal, not timed out");
        });
        assert_eq!(lot.waiters(), 0);
    });
}

#[test]
fn two_signals_wake_two_sleepers() {
    with_watchdog("two_signals_wake_two_sleepers", || {
        let lot = ParkingLot::new();
        let returned = AtomicUsize::new(0);
        thread::scope(|s| {
            let snapshot = lot.state();
            for _ in 0..2 {
                let (lot, returned) = (&lot, &returned);
                s.spawn(move || {
                    lot.wait(snapshot);
                    returned.fetch_add(1, Ordering::SeqCst);
                });
            }
            spin_until(|| lot.waiters() == 2);
            lot.signal(1);
            spin_until(|| returned.load(Ordering::SeqCst) >= 1);
            lot.signal(1);
        });
        assert_eq!(returned.into_inner(), 2);
    });
}

#[test]
fn stop_wakes_every_waiter_and_later_waits_return_at_once() {
    with_watchdog("stop_wakes_every_waiter_and_later_waits_return_at_once", || {
        let lot = ParkingLot::new();
        thread::scope(|s| {
            let snapshot = lot.state();
            for _ in 0..8 {
                let lot = &lot;
                s.spawn(move || lot.wait(snapshot));
            }
            spin_until(|| lot.waiters() == 8);
            lot.stop();
        });
        assert!(lot.is_stopped());
        assert!(lot.state().is_stopped());
        lot.wait(lot.state());
        assert!(!lot.wait_deadline(lot.state(), Instant::now() + Duration::from_secs(3600)));
        lot.stop(); // idempotent
        assert_eq!(lot.waiters(), 0);
    });
}

/// More waiters than the 8-bit count holds: the extra ones poll, and every one still ends.
#[test]
fn more_than_255_waiters_all_wake() {
    with_watchdog("more_than_255_waiters_all_wake", || {
        const THREADS: usize = 300;
        let lot = ParkingLot::new();
        let go = AtomicBool::new(false);
        let returned = AtomicUsize::new(0);
        thread::scope(|s| {
            for _ in 0..THREADS {
                thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn_scoped(s, || {
                        loop {
                            let state = lot.state();
                            if go.load(Ordering::Acquire) {
                                break;
                            }
                            lot.wait(state);
                        }
                        returned.fetch_add(1, Ordering::SeqCst);
                    })
                    .expect("spawn waiter");
            }
            spin_until(|| lot.waiters() == 255);
            go.store(true, Ordering::Release);
            lot.signal(u32::MAX);
        });
        assert_eq!(returned.into_inner(), THREADS);
        assert_eq!(lot.waiters(), 0);
    });
}

/// Two threads hand a baton back and forth, each sleeping on its own lot: a lost wake-up hangs
/// (and the watchdog fails the test).
#[test]
fn ping_pong_between_two_lots_never_hangs() {
    with_watchdog("ping_pong_between_two_lots_never_hangs", || {
        const ROUNDS: usize = 100_000;
        let lots = [ParkingLot::new(), ParkingLot::new()];
        let turn = AtomicUsize::new(0); // even: player 0, odd: player 1
        thread::scope(|s| {
            for me in 0..2 {
                let (lots, turn) = (&lots, &turn);
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        let mine = 2 * round + me;
                        loop {
                            let state = lots[me].state();
                            if turn.load(Ordering::Acquire) == mine {
                                break;
                            }
                            lots[me].wait(state);
                        }
                        turn.store(mine + 1, Ordering::Release);
                        lots[1 - me].signal(1);
                    }
                });
            }
        });
        assert_eq!(turn.into_inner(), 2 * ROUNDS);
    });
}
