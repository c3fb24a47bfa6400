//! Loom models of the green thread's state machine on the real code: a park (`begin_park`, the switch,
//! then `publish_parked` on g0) racing an unpark from another thread.

use super::*;
use crate::registry::registry;
use crate::sync::thread;
use crate::sync::{Arc, AtomicUsize};

/// Exactly one party resumes the G: either the parker (token seen before parking, or
/// `publish_parked` found NOTIFIED) or the unparker (it won `PARKED => RUNNABLE`) — never
/// both (double run), never neither (lost wake-up). Mutation check: making
/// `publish_parked` store `PARKED` unconditionally (ignoring NOTIFIED) fails this model
/// ("resumed 0 times"), and so does setting NOTIFIED with a plain store in `unpark`.
#[test]
fn unpark_racing_park_resumes_exactly_once() {
    loom::model(|| {
        let g = registry().alloc();
        let generation = g.prepare_spawn(0);
        assert!(g.claim_for_run());
        let resumed = Arc::new(AtomicUsize::new(0));
        let r2 = resumed.clone();
        let gp = g;
        let parker = thread::spawn(move || {
            // The G parks: RUNNING => PARKING, (switch), then on g0: publish.
            if gp.take_notified() || !gp.begin_park() {
                gp.take_notified();
                r2.fetch_add(1, Ordering::SeqCst);
                return;
            }
            if !gp.publish_parked() {
                r2.fetch_add(1, Ordering::SeqCst);
            }
        });
        if g.unpark(generation) == Unparked::Queue {
            resumed.fetch_add(1, Ordering::SeqCst);
        }
        parker.join().unwrap();
        assert_eq!(resumed.load(Ordering::SeqCst), 1, "resumed exactly once");
    });
}

/// A wake that lands on an already pending (stale) token must still reach the parker: the
/// waker publishes its condition (a waiter's `DONE`) and unparks while the G, holding a
/// token left by an earlier wake, consumes that token and re-checks the condition. Either
/// the re-check sees the condition or a token remains for the next park. Mutation check:
/// returning `Noted` without a read-modify-write when `NOTIFIED` is already set fails this
/// model ("lost wake-up").
#[test]
fn wake_merged_into_pending_token_is_not_lost() {
    loom::model(|| {
        let g = registry().alloc();
        let generation = g.prepare_spawn(0);
        assert!(g.claim_for_run());
        // A stale token from an earlier wake is pending.
        assert_eq!(g.unpark(generation), Unparked::Noted);
        let done = Arc::new(AtomicUsize::new(0));
        let requeued = Arc::new(AtomicUsize::new(0));
        let (d2, q2) = (done.clone(), requeued.clone());
        let waker = thread::spawn(move || {
            d2.store(1, Ordering::Release);
            if g.unpark(generation) == Unparked::Queue {
                q2.fetch_add(1, Ordering::SeqCst);
            }
        });
        // The G: a park that consumes the pending token returns at once...
        assert!(g.take_notified());
        // ...and its loop re-checks the condition; unseen, it parks again for real.
        let seen = done.load(Ordering::Acquire) == 1;
        let mut resumed_itself = false;
        if !seen {
            resumed_itself = if g.take_notified() || !g.begin_park() {
                g.take_notified();
                true
            } else {
                !g.publish_parked()
            };
        }
        waker.join().unwrap();
        assert!(
            seen || resumed_itself || requeued.load(Ordering::SeqCst) == 1,
            "lost wake-up: parked with the condition unseen and nobody to resume it"
        );
    });
}

/// A dump's capture of a parked G (`begin_inspect` .. `end_inspect`) racing an unpark:
/// the G is queued exactly once (by the unparker if it won `PARKED => RUNNABLE` before the
/// claim, else by the dump), never while the dump owns its stack, and never lost. Mutation
/// check: `end_inspect` storing `PARKED` unconditionally (ignoring `NOTIFIED`) fails this
/// model ("queued 0 times": a lost wake-up); making `unpark` treat `INSPECTED` like
/// `PARKED` fails it ("queued while inspected").
#[test]
fn inspect_racing_unpark_queues_exactly_once() {
    loom::model(|| {
        let g = registry().alloc();
        let generation = g.prepare_spawn(0);
        assert!(g.claim_for_run());
        assert!(g.begin_park());
        assert!(g.publish_parked());
        let queued = Arc::new(AtomicUsize::new(0));
        let inspecting = Arc::new(AtomicUsize::new(0));
        let (q2, i2) = (queued.clone(), inspecting.clone());
        let unparker = thread::spawn(move || {
            if g.unpark(generation) == Unparked::Queue {
                assert_eq!(i2.load(Ordering::SeqCst), 0, "queued while inspected");
                q2.fetch_add(1, Ordering::SeqCst);
            }
        });
        if g.begin_inspect(generation) {
            inspecting.store(1, Ordering::SeqCst);
            // (the stack walk)
            inspecting.store(0, Ordering::SeqCst);
            if !g.end_inspect() {
                queued.fetch_add(1, Ordering::SeqCst);
            }
        }
        unparker.join().unwrap();
        assert_eq!(queued.load(Ordering::SeqCst), 1, "queued exactly once");
    });
}

/// A yield (`publish_runnable` on g0) racing an unpark keeps the token: the next park
/// returns at once. Mutation check: `publish_runnable` as a load and a plain store of the
/// new status fails this model ("token lost").
#[test]
fn yield_keeps_a_racing_token() {
    loom::model(|| {
        let g = registry().alloc();
        let generation = g.prepare_spawn(0);
        assert!(g.claim_for_run());
        let waker = thread::spawn(move || g.unpark(generation));
        g.publish_runnable();
        let noted = waker.join().unwrap() == Unparked::Noted;
        assert!(g.claim_for_run());
        if noted {
            assert!(g.take_notified(), "token lost by the yield");
        }
    });
}

/// A joiner claiming a fresh G inline races a worker that dequeued its entry: exactly one
/// runs it, and the record's references reach zero exactly once (recycled once).
#[test]
fn inline_claim_vs_worker_claim() {
    loom::model(|| {
        let g = registry().alloc();
        let generation = g.prepare_spawn(0);
        let ran = Arc::new(AtomicUsize::new(0));
        let recycled = Arc::new(AtomicUsize::new(0));
        let (r2, c2) = (ran.clone(), recycled.clone());
        let worker = thread::spawn(move || {
            // A worker popped the queue entry.
            if g.claim_for_run() {
                r2.fetch_add(1, Ordering::SeqCst);
                g.finish_run();
            }
            if g.drop_ref() {
                c2.fetch_add(1, Ordering::SeqCst);
            }
        });
        if g.claim_inline(generation) {
            ran.fetch_add(1, Ordering::SeqCst);
            g.finish_run();
            if g.drop_ref() {
                recycled.fetch_add(1, Ordering::SeqCst);
            }
        }
        worker.join().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        // A failed inline claim that dropped the last reference recycles by itself
        // (bumping the generation); count that too.
        let internal = usize::from(g.generation() != generation);
        assert_eq!(recycled.load(Ordering::SeqCst) + internal, 1, "recycled exactly once");
    });
}
