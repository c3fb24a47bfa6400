//! Loom models of the monitor's sleeps (M1 in `blocking`) on the real code: the monitor's
//! `monitor_nap(Nap::Idle)` (store the nap, fence, re-check that every worker is parked, park)
//! against a worker leaving its park (`Idle::unpark_self`, then `Shared::monitor_kick_idle`,
//! what `M::park` does on every return), and its backed-off nap against a worker entering a
//! blocking section (`Shared::monitor_kick`). The monitor thread body itself is not modelled
//! (it reads clocks and thread CPU times); its decisions to nap are.

use crate::blocking::{MonitorHandle, NAP_AWAKE, Nap, monitor_nap};
use crate::shared::Shared;
use crate::sync::thread as lthread;
use crate::sync::{Arc, Ordering};
use std::time::Duration;

/// A scheduler of `workers` P's (no threads started) whose monitor handle is set, every
/// worker counted as parked; returns it and the monitor's parker.
fn idle_scheduler(workers: usize) -> (Arc<Shared>, purloin_parking::Parker) {
    let b = crate::Builder::new().workers(workers).monitor(false);
    let shared = Arc::new(Shared::new(b.config_for_tests()));
    let parker = purloin_parking::Parker::new();
    let _ = shared.monitor.set(MonitorHandle::new(parker.unparker()));
    for p in 0..workers {
        shared.idle.transition_to_parked(p, false);
    }
    (shared, parker)
}

/// The monitor decides to sleep with no deadline (it saw every worker parked) while a worker
/// leaves its park: the monitor must not stay asleep (a lost kick leaves it parked forever,
/// which loom reports as a deadlock), and it ends awake. Mutation check: removing the fence
/// in `monitor_nap` (or the one in `Shared::monitor_kick_idle`) makes this model fail with a
/// deadlock (the monitor's re-check misses the unparked worker while the worker's read of
/// `nap` misses the monitor's store).
#[test]
fn idle_monitor_vs_worker_leaving_park() {
    loom::model(|| {
        let (s, parker) = idle_scheduler(1);
        let s2 = s.clone();
        let worker = lthread::spawn(move || {
            s2.idle.unpark_self(0);
            s2.monitor_kick_idle();
        });
        monitor_nap(&s, s.monitor.get().unwrap(), &parker, Nap::Idle);
        worker.join().unwrap();
        assert_eq!(s.monitor.get().unwrap().nap.load(Ordering::Relaxed), NAP_AWAKE);
    });
}

/// Two workers, one woken by a submitter: the submitter's read-modify-write counts it
/// unparked (`Idle::worker_to_wake`), and the woken worker kicks after its wait returns. The
/// monitor wakes either way. Mutation check: removing the fence in `monitor_nap` makes this
/// model fail with a deadlock.
#[test]
fn idle_monitor_vs_waker_and_worker() {
    loom::model(|| {
        let (s, parker) = idle_scheduler(2);
        let s2 = s.clone();
        let waker = lthread::spawn(move || {
            // A submitter counts a sleeper unparked and searching (`Idle::worker_to_wake`);
            // the woken worker kicks after its wait returns.
            if let Some(p) = s2.idle.worker_to_wake() {
                s2.idle.unpark_self(p);
                s2.monitor_kick_idle();
            }
        });
        monitor_nap(&s, s.monitor.get().unwrap(), &parker, Nap::Idle);
        waker.join().unwrap();
    });
}

/// The monitor backs off (`Nap::BackedOff`, a nap that a worker entering a blocking section
/// must end; here so long that only that kick ends it) while the worker enters a blocking
/// section (`P::enter_syscall`, then `Shared::monitor_kick`, what `enter_blocking` does): the
/// monitor's re-check sees the `SYSCALL`, or the worker's read of `nap` sees the monitor's
/// nap and kicks it (a lost kick leaves the monitor parked: loom reports the deadlock).
/// Mutation check: removing the fence in `Shared::monitor_kick` (or the one in `monitor_nap`)
/// makes this model fail with a deadlock.
#[test]
fn backed_off_monitor_vs_worker_entering_a_blocking_section() {
    loom::model(|| {
        let b = crate::Builder::new().workers(1).monitor(false);
        let s = Arc::new(Shared::new(b.config_for_tests()));
        let parker = purloin_parking::Parker::new();
        let _ = s.monitor.set(MonitorHandle::new(parker.unparker()));
        let s2 = s.clone();
        let worker = lthread::spawn(move || {
            s2.ps[0].enter_syscall();
            s2.monitor_kick();
        });
        // `Duration::MAX` has no deadline: the nap ends only by a kick.
        monitor_nap(&s, s.monitor.get().unwrap(), &parker, Nap::BackedOff(Duration::MAX));
        worker.join().unwrap();
    });
}

/// The monitor retakes the P of a holder in a blocking section and hands it to a spare worker
/// (`Shared::hand_to_spare`, the monitor's hand-off when a spare waits) while the spare waits
/// (`wait_as_spare`): the spare gets the P and sees the old holder's writes to its owner-only
/// parts (the free-record cache here), which reach the monitor through the retake (B1) and
/// the spare through the hand-over (B2); loom reports an unordered access to the cache.
/// Mutation check: the hand-over's swap without Release, or the spare's without Acquire,
/// fails this model (causality violation).
#[test]
fn retaken_p_handed_to_a_spare() {
    loom::model(|| {
        let b = crate::Builder::new().workers(1).monitor(false);
        let s = Arc::new(Shared::new(b.config_for_tests()));
        let s2 = s.clone();
        let spare = lthread::spawn(move || {
            let m = crate::worker::M::new(s2.clone(), crate::worker::NO_P, 1);
            assert!(crate::blocking::wait_as_spare(&m), "the spare is handed the P");
            // SAFETY: the spare holds P 0 now.
            s2.ps[0].free_gs.with_mut(|v| unsafe { (*v).len() })
        });
        let s3 = s.clone();
        let monitor = lthread::spawn(move || {
            // The monitor retakes the P once its holder is in the blocking section, and hands
            // it over once the spare waits.
            while !s3.ps[0].try_retake() {
                lthread::yield_now();
            }
            while !s3.hand_to_spare(0) {
                lthread::yield_now();
            }
        });
        // The holder uses the cache, then enters a blocking section and stays in it.
        let g = crate::registry::registry().alloc();
        // SAFETY: the holder owns the cache until `enter_syscall`.
        s.ps[0].free_gs.with_mut(|v| unsafe { (*v).push(g) });
        s.ps[0].enter_syscall();
        monitor.join().unwrap();
        assert_eq!(spare.join().unwrap(), 1, "the spare sees the holder's cache");
    });
}
