//! loom models of `ParkingLot` and `ParkingLots`, run on the crate's real code with the futex
//! emulation. `cargo xtask loom -p purloin-parking`.
//!
//! Mutation checks (scratch edits to the real code, each run, seen failing, reverted):
//! - M1 `snapshot_look_wait_never_misses_a_signal` with the snapshot taken AFTER looking for
//!   work: loom reports `deadlock` (the worker sleeps through the only signal).
//! - M2 same model, `signal`'s `fetch_add` weakened from Release to Relaxed: `deadlock` (a
//!   snapshot that reads the new epoch no longer makes the work visible, so the worker waits
//!   on the new epoch).
//! - M3 same model, registration made unconditional (`fetch_add(WAITER)` instead of the
//!   compare-and-swap against the snapshot's epoch): `deadlock`.
//! - M10 same model, and `two_workers_one_task_is_taken_exactly_once`: `signal` decides
//!   whether to wake from a separate load of the waiter count before its `fetch_add` (the
//!   shape of brpc#2916/#3539): `deadlock` / "exceeded maximum number of branches" (the main
//!   thread spins forever while both workers sleep with the task queued).
//! - M4 `signal_with_no_waiter_makes_no_wake_call`, `signal` waking even with no waiter: the
//!   wake-call assertion fails.
//! - M9 `stop_wakes_every_waiter_and_later_waits_return_at_once`, `stop` without its
//!   `wake_all`: `deadlock`.
//! - M11 `timed_wait_racing_a_signal_keeps_the_count_and_the_work`, a timed-out wait that
//!   returns without its `-1 waiter`: the `waiters() == 0` assertion fails.
//! - Not caught: M1 in `two_workers_one_task_is_taken_exactly_once` at preemption bound 2
//!   (the failing schedule needs three preemptions); the one-worker model catches it.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use purloin_parking::{ParkingLot, ParkingLots, stats};

/// A worker runs brpc's idle loop (snapshot, look, wait) against a producer that publishes
/// work and then signals. The worker must find the work: a lost wake-up is a loom deadlock.
/// The "queue" is a flag published with Release/Acquire, as a real queue synchronises its
/// items itself; what the lot must add is P1: a snapshot that includes the signal must make
/// the flag visible, else the worker waits on the new epoch and nobody signals again
/// (deadlock). If the worker never called `wait`, no wake call may have been made.
#[test]
fn snapshot_look_wait_never_misses_a_signal() {
    loom::model(|| {
        let lot = Arc::new(ParkingLot::new());
        let data = Arc::new(UnsafeCell::new(0usize));
        let ready = Arc::new(AtomicBool::new(false));

        let worker = {
            let (lot, data, ready) = (lot.clone(), data.clone(), ready.clone());
            thread::spawn(move || {
                let mut waited = false;
                loop {
                    let state = lot.state(); // 1. snapshot
                    // Acquire: pairs with the producer's Release store (the queue's own sync).
                    if ready.load(Ordering::Acquire) {
                        // 2. found the work. SAFETY: the producer wrote `data` before its
                        // Release store of `ready`, which this Acquire load read; nobody
                        // writes `data` afterwards.
                        return (unsafe { data.with(|p| *p) }, waited);
                    }
                    waited = true;
                    lot.wait(state); // 3.
                }
            })
        };

        // SAFETY: the worker reads `data` only after seeing `ready`, which is published below.
        unsafe { data.with_mut(|p| *p = 42) };
        ready.store(true, Ordering::Release);
        let woken = lot.signal(1);

        let (seen, waited) = worker.join().unwrap();
        assert_eq!(seen, 42);
        assert!(woken <= 1);
        if !waited {
            assert_eq!(stats::snapshot().futex_wakes, 0, "signal woke although nobody waited");
        }
        assert_eq!(lot.waiters(), 0);
    });
}

/// Two workers share a lot and run the idle loop against one task; the producer publishes it
/// and signals once. The task must not stay queued while both workers sleep (the main thread
/// yields until it is taken; were both asleep, the model would exceed loom's branch limit),
/// it is taken exactly once, and `stop()` then releases both workers. This includes the case
/// where the signal's wake lands on a worker whose snapshot is newer than the signal.
#[test]
fn two_workers_one_task_is_taken_exactly_once() {
    loom::model(|| {
        let lot = Arc::new(ParkingLot::new());
        let queued = Arc::new(AtomicUsize::new(0));
        let taken = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (lot, queued, taken) = (lot.clone(), queued.clone(), taken.clone());
                thread::spawn(move || {
                    loop {
                        let state = lot.state();
                        if queued
                            .compare_exchange(1, 0, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                        {
                            taken.fetch_add(1, Ordering::Release);
                            continue;
                        }
                        if state.is_stopped() {
                            return;
                        }
                        lot.wait(state);
                    }
                })
            })
            .collect();
        queued.store(1, Ordering::Release);
        lot.signal(1);
        while taken.load(Ordering::Acquire) == 0 {
            thread::yield_now();
        }
        lot.stop();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(taken.load(Ordering::Acquire), 1);
        assert_eq!(lot.waiters(), 0);
    });
}

/// No thread waits: concurrent signals are pure `fetch_add`s. Asserted through the emulation's
/// counters: not a single wake call reached the (emulated) futex.
#[test]
fn signal_with_no_waiter_makes_no_wake_call() {
    loom::model(|| {
        let lot = Arc::new(ParkingLot::new());
        let before = lot.state();
        let other = {
            let lot = lot.clone();
            thread::spawn(move || lot.signal(1))
        };
        let mine = lot.signal(1);
        let theirs = other.join().unwrap();
        assert_eq!((mine, theirs), (0, 0));
        assert_ne!(lot.state(), before);
        let c = stats::snapshot();
        assert_eq!(c.futex_wakes, 0);
        assert_eq!(c.futex_waits, 0);
        assert_eq!(c.wakes_skipped, 2);
    });
}

/// `stop()` ends every wait, and waits after it return at once.
#[test]
fn stop_wakes_every_waiter_and_later_waits_return_at_once() {
    loom::model(|| {
        let lot = Arc::new(ParkingLot::new());
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let lot = lot.clone();
                thread::spawn(move || {
                    loop {
                        let state = lot.state();
                        if state.is_stopped() {
                            return;
                        }
                        lot.wait(state);
                    }
                })
            })
            .collect();
        lot.stop();
        for w in waiters {
            w.join().unwrap();
        }
        // After stop: returns at once (a hang would be a loom deadlock).
        lot.wait(lot.state());
        assert!(!lot.wait_deadline(lot.state(), std::time::Instant::now()));
        assert_eq!(lot.waiters(), 0);
    });
}

/// Two threads wait on the same pre-signal snapshot. `signal(1)` alone must let at least one
/// of them return (the main thread yields until one did; if none could, the model would run
/// out of branches), and a second `signal(1)` must release the other.
#[test]
fn two_waiters_one_signal_wakes_one_second_signal_wakes_the_other() {
    loom::model(|| {
        let lot = Arc::new(ParkingLot::new());
        let returned = Arc::new(AtomicUsize::new(0));
        let snapshot = lot.state();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (lot, returned) = (lot.clone(), returned.clone());
                thread::spawn(move || {
                    lot.wait(snapshot);
                    returned.fetch_add(1, Ordering::Release);
                })
            })
            .collect();
        lot.signal(1);
        while returned.load(Ordering::Acquire) == 0 {
            thread::yield_now();
        }
        lot.signal(1);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(lot.waiters(), 0);
    });
}

/// A timed wait racing with a signal: whether the emulated deadline fires before, during or
/// after the signal, the waiter unregisters and finds the work (falling back to an untimed
/// wait after one timeout, so the model stays finite).
#[test]
fn timed_wait_racing_a_signal_keeps_the_count_and_the_work() {
    loom::model(|| {
        let lot = Arc::new(ParkingLot::new());
        let ready = Arc::new(AtomicBool::new(false));
        let worker = {
            let (lot, ready) = (lot.clone(), ready.clone());
            thread::spawn(move || {
                let state = lot.state();
                if ready.load(Ordering::Relaxed) {
                    return;
                }
                let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
                if !lot.wait_deadline(state, far) {
                    return; // signalled
                }
                loop {
                    let state = lot.state();
                    if ready.load(Ordering::Relaxed) {
                        return;
                    }
                    lot.wait(state);
                }
            })
        };
        ready.store(true, Ordering::Relaxed);
        lot.signal(1);
        worker.join().unwrap();
        assert_eq!(lot.waiters(), 0);
    });
}

/// `signal_task` walks from the caller's lot to the lot where the only worker sleeps.
#[test]
fn signal_task_walks_the_lots_to_the_sleeper() {
    loom::model(|| {
        let lots = Arc::new(ParkingLots::new(2));
        let ready = Arc::new(AtomicBool::new(false));
        let worker = {
            let (lots, ready) = (lots.clone(), ready.clone());
            thread::spawn(move || {
                let lot = lots.lot(lots.lot_for_worker(1));
                loop {
                    let state = lot.state();
                    if ready.load(Ordering::Relaxed) {
                        return;
                    }
                    lot.wait(state);
                }
            })
        };
        ready.store(true, Ordering::Relaxed);
        let woken = lots.signal_task(1, 0);
        worker.join().unwrap();
        assert!(woken <= 1);
        assert_eq!(lots.waiters(), 0);
    });
}
