//! Loom models of the producer controls on the real code: a no-signal spawn's queueing
//! (`HeldP::push_nosignal` / `Shared::push_global_quiet`, counted in `Shared::unsignalled`)
//! followed by `Shared::flush`, against a worker going idle (`M::find_runnable`); and the
//! bound on outside submissions (`Shared::reserve_outside` / `release_outside`), whose waiting
//! submitter sleeps on `Shared::outside_room`.

use crate::loom_idle::{model, new_g, shared, worker};
use crate::ready::Slot;
use crate::shared::Shared;
use crate::sync::thread as lthread;
use crate::sync::{Arc, Ordering};
use crate::worker::M;

/// A no-signal spawn from outside any worker (queued in the global queue with no wake-up),
/// then a flush, races the only worker going idle: the worker must end up with the G, woken
/// by the flush or seeing the G in its re-check (a lost wake-up leaves it parked: loom
/// reports the deadlock). Mutation check: without F1 in `Idle::wake_for_batch` (the flush's
/// fence between the queued entry and its read of the idle state) this model fails with a
/// deadlock; so it does when the flush is left out (`Shared::flush` not called), which shows
/// the model depends on the flush and not on a wake-up the spawn gave anyway.
#[test]
fn quiet_outside_spawn_then_flush_vs_worker_going_idle() {
    model(|| {
        let s = shared(1);
        let s2 = s.clone();
        let w = lthread::spawn(move || worker(s2, 0));
        let g = new_g(&s);
        s.push_global_quiet(g);
        s.flush();
        assert_eq!(w.join().unwrap(), g);
        assert_eq!(s.unsignalled.load(Ordering::Relaxed), 0, "the flush took the count");
    });
}

/// A green thread's no-signal spawn onto its worker's local queue, then a flush, races the
/// other worker going idle: the idle worker must end up with the G (woken by the flush, or
/// seeing it in its re-check, then stealing it from a P that does not schedule). The quiet
/// push marks the P `fork_unannounced`, which is what a later notifying push reads.
/// Mutation check: without F1 in `Idle::wake_for_batch` this model fails with a deadlock.
#[test]
fn quiet_local_spawn_then_flush_vs_other_worker_going_idle() {
    model(|| {
        let s = shared(2);
        let s2 = s.clone();
        let idle = lthread::spawn(move || worker(s2, 1));
        let g = new_g(&s);
        let busy = M::new(s.clone(), 0, 0);
        busy.held_on_g0().push_nosignal(g.into());
        s.unsignalled.fetch_add(1, Ordering::Release);
        s.flush();
        assert_eq!(idle.join().unwrap(), g);
    });
}

/// The outside bound at 1: one submission holds the unit; a second submitter waits for room
/// while a third only tries; the holder then starts (releases its unit). The count never
/// exceeds the bound (a third that succeeded means the waiter's unit came after it was given
/// back), and the waiter is never left asleep after the release (a lost wake-up: loom reports
/// the deadlock). Mutation check: taking the lot's snapshot after reading the count in
/// `reserve_outside` (instead of before) fails this model with a deadlock: the release's
/// signal lands between the read and the snapshot, and the waiter sleeps on a count it
/// already saw full.
#[test]
fn outside_bound_holds_and_a_waiting_submitter_gets_the_released_unit() {
    model(|| {
        let b = crate::Builder::new().workers(1).monitor(false).max_outside_queued(1);
        let s = Arc::new(Shared::new(b.config_for_tests()));
        assert!(s.reserve_outside(false), "the first unit is free");
        let s2 = s.clone();
        let waiter = lthread::spawn(move || {
            let got = s2.reserve_outside(true);
            let held = s2.outside_queued.load(Ordering::Relaxed);
            assert!(held <= 1, "the bound held: {held} units out");
            got
        });
        let s3 = s.clone();
        let trier = lthread::spawn(move || s3.reserve_outside(false));
        s.release_outside();
        let tried = trier.join().unwrap();
        if tried {
            // The trier took the released unit; the waiter needs it given back in turn.
            s.release_outside();
        }
        assert!(waiter.join().unwrap(), "a running scheduler gives the waiter its unit");
        assert_eq!(s.outside_queued.load(Ordering::Relaxed), 1, "one unit out: the waiter's");
    });
}

/// Enqueueing through the slot a no-signal spawn does not use still works beside it: a
/// notifying local spawn after a quiet one wakes the other worker (the quiet push left the
/// P `fork_unannounced`, so the notify fences even though work was visible before it).
/// Mutation check: dropping the `fork_unannounced` store from `push_nosignal` fails this
/// model with a deadlock.
#[test]
fn notifying_spawn_after_a_quiet_one_vs_other_worker_going_idle() {
    model(|| {
        let s = shared(2);
        let s2 = s.clone();
        let idle = lthread::spawn(move || worker(s2, 1));
        let quiet = new_g(&s);
        let loud = new_g(&s);
        let busy = M::new(s.clone(), 0, 0);
        busy.held_on_g0().push_nosignal(quiet.into());
        busy.held_on_g0().enqueue(loud.into(), Slot::Local);
        let found = idle.join().unwrap();
        assert!(found == quiet || found == loud, "the idle worker took one of the two");
    });
}
