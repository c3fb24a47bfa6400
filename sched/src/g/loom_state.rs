//! Loom models of the green thread's state machine on the real code: a park (`begin_park`, the switch,
//! then `publish_parked` on g0) racing an unpark from another thread.

use super::*;
use crate::registry::registry;
use crate::sync::thread;
use crate::sync::{Arc, AtomicUsize};

/// What a park publishes and a wake-up hands over, in loom cells (loom reports a read that is
/// not ordered after the write).
struct Handoff {
    /// Written by the G before it parks; read by whoever resumes it.
    data: UnsafeCell<u32>,
    /// Written by the waker before it unparks; read by the G once it is resumed.
    cond: UnsafeCell<u32>,
}

impl Handoff {
    fn new() -> Arc<Handoff> {
        Arc::new(Handoff { data: UnsafeCell::new(0), cond: UnsafeCell::new(0) })
    }

    /// The waker: its write, then the unpark (G3: the write happens before the G's return
    /// from `park`).
    fn wake(&self, g: GRef, generation: u32) -> Unparked {
        // SAFETY: only the waker writes `cond`, before the unpark that publishes it.
        unsafe { self.cond.with_mut(|c| *c = 1) };
        g.unpark(generation)
    }

    /// The G, woken: sees the waker's write.
    fn check_woken(&self) {
        // SAFETY: ordered after the waker's write by the wake-up (G3), or a race loom reports.
        assert_eq!(unsafe { self.cond.with(|c| *c) }, 1, "the waker's write is lost");
    }

    /// The G parks: its write, `RUNNING => PARKING`, (the switch), then on g0 the context is
    /// saved and `PARKED` published (`save_context_and_park`, the code the switch runs).
    /// Returns true if the G resumed itself (a token before it parked: the park returns with
    /// no switch; or an unpark that `publish_parked` found: g0 runs it again at once).
    fn park(&self, g: GRef) -> bool {
        // SAFETY: the running G owns its data until it parks.
        unsafe { self.data.with_mut(|d| *d = 1) };
        if g.take_notified() || !g.begin_park() {
            g.take_notified();
            self.check_woken();
            return true;
        }
        // SAFETY: this thread is the parking G's g0 (it began the park above).
        if unsafe { g.save_context_and_park(Context::placeholder()) } {
            return false;
        }
        self.resume_parked(g);
        true
    }

    /// What a worker does to resume a G that parked: claims it (G2), takes the context the
    /// park saved (as `execute` does) and, standing for the resumed G, reads the G's own write
    /// and the waker's. (The queue hand-off between waker and worker is a Release/Acquire
    /// pair of its own; the waker stands for the worker that claims the G.)
    fn resume_parked(&self, g: GRef) {
        assert!(g.claim_for_run(), "a G made runnable by its wake-up is claimable");
        // SAFETY: claimed above: this thread owns the record's cells.
        let ctx = unsafe { g.take_context() };
        assert!(ctx.is_some(), "the resumer found no saved context");
        // SAFETY: the G is resumed; its park is ordered before the claim (G1, G2).
        assert_eq!(unsafe { self.data.with(|d| *d) }, 1, "the write made before the park is lost");
        self.check_woken();
    }
}

/// Exactly one party resumes the G: either the parker (token seen before parking, or
/// `publish_parked` found NOTIFIED) or the unparker (it won `PARKED => RUNNABLE`) — never
/// both (double run), never neither (lost wake-up). Whoever resumes it sees what the park
/// published (the context g0 saved, and the G's own write) and what the waker wrote before
/// the unpark (see [`Handoff`]). Mutation checks: making `publish_parked` store `PARKED`
/// unconditionally (ignoring NOTIFIED) fails this model ("resumed 0 times"), and so does
/// setting NOTIFIED with a plain store in `unpark`; `publish_parked`'s CAS with Relaxed
/// success (G1) fails it (a causality violation on the saved context).
#[test]
fn unpark_racing_park_resumes_exactly_once() {
    loom::model(|| {
        let g = registry().alloc();
        let generation = g.prepare_spawn(0);
        assert!(g.claim_for_run());
        let cells = Handoff::new();
        let resumed = Arc::new(AtomicUsize::new(0));
        let (r2, c2) = (resumed.clone(), cells.clone());
        let parker = thread::spawn(move || {
            if c2.park(g) {
                r2.fetch_add(1, Ordering::SeqCst);
            }
        });
        if cells.wake(g, generation) == Unparked::Queue {
            cells.resume_parked(g);
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

/// A dump's capture of a parked G (`begin_inspect` .. `end_inspect`) racing the park itself
/// and an unpark: the G is resumed exactly once (by itself if the unpark came before it
/// parked, by the unparker if it won `PARKED => RUNNABLE`, else by the dump), never queued
/// while the dump owns its stack, and never lost. The dump takes the saved context and puts
/// it back as `dump` does around its stack walk: it must see the context the park saved
/// (D1), and whoever resumes the G after the dump must see it put back (D2), besides the
/// park's and the waker's writes (see [`Handoff`]). Mutation checks: `end_inspect` storing
/// `PARKED` unconditionally (ignoring `NOTIFIED`) fails this model ("resumed 0 times": a
/// lost wake-up); making `unpark` treat `INSPECTED` like `PARKED` fails it ("queued while
/// inspected"); `begin_inspect`'s CAS without Acquire (D1) and `end_inspect`'s without
/// Release (D2) each fail it (a causality violation on the context).
#[test]
fn inspect_racing_unpark_queues_exactly_once() {
    loom::model(|| {
        let g = registry().alloc();
        let generation = g.prepare_spawn(0);
        assert!(g.claim_for_run());
        let cells = Handoff::new();
        let resumed = Arc::new(AtomicUsize::new(0));
        let inspecting = Arc::new(AtomicUsize::new(0));
        let (r2, c2, i2) = (resumed.clone(), cells.clone(), inspecting.clone());
        let dump = thread::spawn(move || {
            if g.begin_inspect(generation) {
                i2.store(1, Ordering::SeqCst);
                // SAFETY: INSPECTED: the dump owns the G's context until `end_inspect`.
                let ctx = unsafe { g.take_context() };
                assert!(ctx.is_some(), "the dump found no saved context");
                // (the stack walk) The context goes back, as `dump` puts it back.
                // SAFETY: as above.
                unsafe { g.context.with_mut(|c| *c = ctx) };
                i2.store(0, Ordering::SeqCst);
                if !g.end_inspect() {
                    c2.resume_parked(g);
                    r2.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        let (r3, c3, i3) = (resumed.clone(), cells.clone(), inspecting.clone());
        let unparker = thread::spawn(move || {
            if c3.wake(g, generation) == Unparked::Queue {
                assert_eq!(i3.load(Ordering::SeqCst), 0, "queued while inspected");
                c3.resume_parked(g);
                r3.fetch_add(1, Ordering::SeqCst);
            }
        });
        if cells.park(g) {
            resumed.fetch_add(1, Ordering::SeqCst);
        }
        dump.join().unwrap();
        unparker.join().unwrap();
        assert_eq!(resumed.load(Ordering::SeqCst), 1, "resumed exactly once");
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

/// A stale handle reads a record whose green thread ended while the record is recycled and
/// taken by a spawn for a new green thread (`GreenThread::name`: `try_ref`, the generation
/// check, then the name): it finds the old name or none, and never reads the record's
/// cells while the recycle clears them or the spawn writes them (loom reports the race).
/// Mutation checks: the spawn's store of the first reference (`prepare_spawn`, G4) Relaxed,
/// or `try_ref`'s CAS without Acquire, fails this model (a causality violation on the name).
#[test]
fn stale_handle_vs_recycle_and_respawn() {
    loom::model(|| {
        let g = registry().alloc();
        // SAFETY: a fresh record, not yet published.
        unsafe { g.name.with_mut(|n| *n = Some("old".into())) };
        let generation = g.prepare_spawn(0);
        assert!(g.claim_for_run());
        let handle = crate::GreenThread { g, generation };
        let reader = thread::spawn(move || handle.name());
        // The green thread exits: DONE, then its scheduling reference goes; the last
        // reference's dropper recycles the record and gives it back.
        g.finish_run();
        if g.drop_ref() {
            g.recycle();
            registry().give_free([g]);
        }
        // A spawn takes a free record: this one, if it is back already.
        let next = registry().alloc();
        if next == g {
            // SAFETY: a FREE record from the free list: the spawner's until it publishes it.
            unsafe { next.name.with_mut(|n| *n = Some("new".into())) };
            next.prepare_spawn(0);
        }
        let name = reader.join().unwrap();
        assert!(name.as_deref().is_none_or(|n| n == "old"), "the stale handle read {name:?}");
    });
}

/// An interrupt racing a park (I1) resumes the G exactly once, like an unpark, and the resumed
/// G sees the interrupt flag and what the interrupter wrote before it. A held interrupt (a
/// cancelled token) the same way, and taking it back leaves no flag. Mutation check: setting
/// the flag without `NOTIFIED` for a G that is not parked yet (the `_` arm of `interrupt`)
/// fails this model ("Causality violation: Concurrent read and write accesses": the G that
/// resumes itself reads the interrupter's cell without the token's synchronisation).
#[test]
fn interrupt_racing_park_resumes_exactly_once() {
    for hold in [false, true] {
        loom::model(move || {
            let g = registry().alloc();
            let generation = g.prepare_spawn(0);
            assert!(g.claim_for_run());
            let cells = Handoff::new();
            let resumed = Arc::new(AtomicUsize::new(0));
            let (r2, c2) = (resumed.clone(), cells.clone());
            let parker = thread::spawn(move || {
                if c2.park(g) {
                    r2.fetch_add(1, Ordering::SeqCst);
                    assert_ne!(g.interrupt_bits(generation), 0, "the interrupt is not seen");
                }
            });
            // SAFETY: only the interrupter writes `cond`, before the interrupt publishes it.
            unsafe { cells.cond.with_mut(|c| *c = 1) };
            if g.interrupt(generation, hold) == Unparked::Queue {
                cells.resume_parked(g);
                resumed.fetch_add(1, Ordering::SeqCst);
                assert_ne!(g.interrupt_bits(generation), 0, "the interrupt is not seen");
            }
            parker.join().unwrap();
            assert_eq!(resumed.load(Ordering::SeqCst), 1, "resumed exactly once");
            assert!(g.clear_interrupt(generation, hold), "the interrupt was consumed");
            assert_eq!(g.interrupt_bits(generation), 0);
        });
    }
}
