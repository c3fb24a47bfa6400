//! Loom models of protocol 4 on the real state-machine code: a park (`begin_park`, the switch,
//! then `publish_parked` on g0) racing an unpark from another thread.

use super::*;
use crate::registry::registry;
use crate::sync::thread;
use crate::sync::{Arc, AtomicUsize};

/// Exactly one party resumes the G: either the parker (token seen before parking, or
/// `publish_parked` found NOTIFIED) or the unparker (it won `PARKED => RUNNABLE`) — never
/// both (double run), never neither (lost wake-up). Whoever resumes a G that parked sees what
/// the park published: the context g0 saved (`save_context_and_park`, the code the switch
/// runs; read with `take_context`, as the worker's `execute` does) and a write the G made
/// before it parked (a cell of its own), both loom cells, so an unordered read is reported.
/// Mutation checks: making `publish_parked` store `PARKED` unconditionally (ignoring
/// NOTIFIED) fails this model ("resumed 0 times"), and so does setting NOTIFIED with a plain
/// store in `unpark`; `publish_parked`'s CAS with Relaxed success (G1) fails it (a causality
/// violation on the saved context).
#[test]
fn unpark_racing_park_resumes_exactly_once() {
    loom::model(|| {
        let g = registry().alloc();
        let generation = g.prepare_spawn(0);
        assert!(g.claim_for_run());
        // Written by the G before it parks, read by whoever resumes it.
        let data = Arc::new(UnsafeCell::new(0u32));
        let resumed = Arc::new(AtomicUsize::new(0));
        let (r2, d2) = (resumed.clone(), data.clone());
        let gp = g;
        let parker = thread::spawn(move || {
            // SAFETY: the running G owns its data until it parks.
            unsafe { d2.with_mut(|d| *d = 1) };
            // The G parks: RUNNING => PARKING, (switch), then on g0: save and publish.
            if gp.take_notified() || !gp.begin_park() {
                // A token: the park returns at once, with no switch (nothing saved).
                gp.take_notified();
                r2.fetch_add(1, Ordering::SeqCst);
                return;
            }
            // SAFETY: this thread is the parking G's g0 (it began the park above).
            if !unsafe { gp.save_context_and_park(Context::placeholder()) } {
                // An unpark raced the park: g0 runs the G again at once.
                resume_parked(gp, &d2);
                r2.fetch_add(1, Ordering::SeqCst);
            }
        });
        if g.unpark(generation) == Unparked::Queue {
            // (The queue hand-off between waker and worker is a Release/Acquire pair of its
            // own; the waker stands for the worker that claims the G.)
            resume_parked(g, &data);
            resumed.fetch_add(1, Ordering::SeqCst);
        }
        parker.join().unwrap();
        assert_eq!(resumed.load(Ordering::SeqCst), 1, "resumed exactly once");
    });
}

/// What a worker does to resume a G that parked: claims it (G2), takes the context the park
/// saved, and (standing for the resumed G) reads what the G wrote before it parked.
fn resume_parked(g: GRef, data: &UnsafeCell<u32>) {
    assert!(g.claim_for_run(), "a G made runnable by its wake-up is claimable");
    // SAFETY: claimed above: this thread owns the record's cells.
    let ctx = unsafe { g.take_context() };
    assert!(ctx.is_some(), "the resumer found no saved context");
    // SAFETY: the G is resumed; its data is ordered after its park by the claim.
    assert_eq!(unsafe { data.with(|d| *d) }, 1, "the write made before the park is lost");
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
