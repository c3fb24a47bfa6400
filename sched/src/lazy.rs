//! Lazily spawned green threads: identity on demand.
//!
//! A spawn from a green thread with default options does not take a G record: its queue entry
//! is the task cell itself (`Entry::task`), and whoever dequeues the entry owns the task.
//! A worker that dequeues it takes a G from its own cache (`M::adopt_task`), so the record
//! never moves between cores: the spawner never touched it. A joiner that dequeues it runs the
//! task inline without any G. A record taken at spawn would cost two cache-line transfers per
//! child that carry no data the child needs: the spawner writing a record another worker
//! recycled last, and the runner claiming a record the spawner just wrote.
//!
//! A green thread still has an identity ([`GreenThread`]) whenever someone asks for it: its
//! handle's `thread()`, or `current()` inside it while its joiner runs it inline. The
//! [`Identity`] in the task cell's head makes one on demand, exactly once, and hands it to the
//! party that runs the task.
//!
//! # States of `bind`
//!
//! ```text
//!   UNBOUND ──(a worker dequeued the entry; `taker` = its G, RUNNING)──────────────▶ STARTED
//!      │  └──(thread(): a RUNNABLE|FRESH G, claimed later by whoever runs it)──▶ BOUND
//!      │
//!      ├──(the joiner dequeued it to run it inline; `taker` = the joiner)──▶ INLINE ──(thread()
//!      │                       or current(): a CLAIMED G forwarding to the joiner)──▶ BOUND
//!      │                                                    │
//!      │                                          (inline run ended)
//!      ▼                                                    ▼
//!    (shutdown drained the entry) ────────────────────▶ ENDED ──(thread(): an ended G)──▶ BOUND
//! ```
//!
//! Every arrow into BOUND passes through BINDING: the party that wins the CAS into BINDING
//! makes the G and writes `bound`; everyone else waits for BOUND (a few stores). The worker
//! that dequeues the entry needs no such section: it writes its own G into `taker` and
//! publishes it with the one CAS that also tells it whether a handle got there first. STARTED
//! and BOUND are final: the identity is then in `taker` or in `bound`.
//!
//! # Memory ordering
//!
//! The guarantee: whoever reads the identity sees the G its maker prepared, and a binder that
//! makes a G for an inline run sees the joiner in `taker`.
//!
//! - (L1) The binder's CAS into BINDING is Acquire (it sees what the previous state's writer
//!   published, L2); it writes `bound` and the G's fields, then stores BOUND with Release.
//!   Every reader loads BOUND with Acquire before reading `bound`.
//! - (L2) The entry's taker writes `taker` before its Release CAS out of UNBOUND (to STARTED
//!   or INLINE); a reader's Acquire load of STARTED, or a binder's Acquire CAS from INLINE,
//!   pairs with it.
//! - (L3) An inline run has no concurrent binder: the joiner dequeued the entry inside
//!   `JoinHandle::join(self)`, which owns the handle, so until the run ends nobody else can
//!   call `thread()`, and `current()` inside the child runs on the joiner's thread. So the
//!   joiner enters INLINE and ENDED with plain stores, and a G made during the run (from
//!   INLINE, by the joiner itself) is found in program order. The joiner's Acquire load at the
//!   start pairs with L1 of a handle that made a record before the join.

use crate::GreenThread;
use crate::g::{GRef, SpawnSite};
use crate::sync::{AtomicU32, Ordering, UnsafeCell};

const UNBOUND: u32 = 0;
const BINDING: u32 = 1;
const BOUND: u32 = 2;
const STARTED: u32 = 3;
const INLINE: u32 = 4;
const ENDED: u32 = 5;

/// A lazily spawned green thread's identity (in its task cell's head).
pub(crate) struct Identity {
    bind: AtomicU32,
    /// The identity: written by the holder of BINDING, read after BOUND (L1). Before that,
    /// who spawned the task and where ([`Bound::spawn`]), written by the spawner before it
    /// queues the entry (published with it) and read only by a party that holds BINDING or
    /// that left UNBOUND for STARTED (after which no binder can start): the spawner needs no
    /// room of its own in every task cell.
    bound: UnsafeCell<Bound>,
    /// Written by whoever dequeued the entry, before it leaves UNBOUND (L2): at STARTED the
    /// identity it runs the task with, at INLINE the joiner running it (unparks of a G made
    /// during the run are forwarded there).
    taker: UnsafeCell<Option<GreenThread>>,
}

/// The two lives of [`Identity::bound`] in one slot of two words: the spawn's facts until an
/// identity is made, the identity after. Which one it holds follows from `bind` (see
/// `bound`).
#[derive(Clone, Copy)]
union Bound {
    spawn: Spawn,
    identity: Option<GreenThread>,
}

// The spawn's facts share the identity's two words: task cells do not grow for them.
const _: () = assert!(size_of::<Bound>() == size_of::<Option<GreenThread>>());

/// Who spawned a lazily spawned green thread, and where.
#[derive(Clone, Copy)]
struct Spawn {
    /// The spawning green thread's id (0: none).
    by: u64,
    at: Option<SpawnSite>,
}

impl Identity {
    pub(crate) fn new() -> Identity {
        Identity {
            bind: AtomicU32::new(UNBOUND),
            bound: UnsafeCell::new(Bound { spawn: Spawn { by: 0, at: None } }),
            taker: UnsafeCell::new(None),
        }
    }

    /// Records the green thread that spawns the task, by its id, and where it does (see
    /// `bound`).
    ///
    /// # Safety
    /// The caller is the spawner and has not queued the entry yet (nobody else can see the
    /// cell).
    #[inline]
    pub(crate) unsafe fn set_spawner(&self, by: u64, at: SpawnSite) {
        // SAFETY: nobody else sees the cell yet (the caller's obligation).
        unsafe { self.bound.with_mut(|b| *b = Bound { spawn: Spawn { by, at: Some(at) } }) };
    }

    /// The spawner's id for `G::spawned_by` (0: none) and the place of the spawn.
    ///
    /// # Safety
    /// The caller holds BINDING, entered from UNBOUND or INLINE, or left UNBOUND for STARTED
    /// (see `bound`).
    unsafe fn spawner(&self) -> (u64, Option<SpawnSite>) {
        // SAFETY: `bound` still holds the spawn's facts (no identity was published: the
        // states the caller is in come before any) and nobody writes it now (the caller's
        // obligation); the spawner's write was published with the entry (or, for a handle
        // binding in another thread, with the handle).
        let spawn = unsafe { self.bound.with(|b| (*b).spawn) };
        (spawn.by, spawn.at)
    }

    /// The identity, if one was made (never makes one).
    pub(crate) fn peek(&self) -> Option<GreenThread> {
        // Acquire pairs with L1 and L2.
        match self.bind.load(Ordering::Acquire) {
            s @ (BOUND | STARTED) => Some(self.read(s)),
            _ => None,
        }
    }

    /// The current state once no binder is at work.
    fn settled(&self) -> u32 {
        let mut spin = crate::sync::Spin::settling();
        loop {
            // Acquire: pairs with L1 when it returns BOUND, L2 for STARTED.
            let s = self.bind.load(Ordering::Acquire);
            if s != BINDING {
                return s;
            }
            // The binder runs a few stores (and at most a free-list lock); it never waits.
            spin.step();
        }
    }

    /// Publishes `t` as the identity (the caller holds BINDING).
    fn publish(&self, t: GreenThread) -> GreenThread {
        // SAFETY: we hold BINDING: nobody else writes `bound`, and nobody reads it before
        // BOUND.
        unsafe { self.bound.with_mut(|b| *b = Bound { identity: Some(t) }) };
        // Release: L1.
        self.bind.store(BOUND, Ordering::Release);
        t
    }

    /// The identity in final state `s` (BOUND or STARTED), seen with Acquire (or written by
    /// this thread, L3).
    fn read(&self, s: u32) -> GreenThread {
        let t = if s == STARTED {
            // SAFETY: the caller saw STARTED with Acquire (L2): `taker` is written and never
            // written again.
            unsafe { self.taker.with(|t| *t) }
        } else {
            // SAFETY: the caller saw BOUND with Acquire (L1) or made it (L3): `bound` holds
            // the identity `publish` wrote, and is never written again.
            unsafe { self.bound.with(|b| (*b).identity) }
        };
        t.expect("a final identity state holds a green thread")
    }

    /// The identity, made now if nobody has yet (a handle's `thread()`, or `current()` inside
    /// an inline run). `alloc` gives a FREE record; `sched` is the scheduler it belongs to.
    pub(crate) fn get(
        &self,
        sched: *const crate::shared::Shared,
        alloc: impl FnOnce() -> GRef,
    ) -> GreenThread {
        let mut alloc = Some(alloc);
        loop {
            let s = self.settled();
            if s == BOUND || s == STARTED {
                return self.read(s);
            }
            // Acquire: L1 (and L2 when leaving INLINE).
            if self.bind.compare_exchange(s, BINDING, Ordering::Acquire, Ordering::Relaxed).is_err()
            {
                continue;
            }
            let g = (alloc.take().expect("one record per binding"))();
            // SAFETY: the record is FREE and unpublished: we own its cells (as in `spawn_g`).
            unsafe { g.sched.with_mut(|p| *p = sched) };
            // SAFETY: we hold BINDING.
            let (spawner, at) = unsafe { self.spawner() };
            let t = match s {
                // Not started: a RUNNABLE record that whoever dequeues the entry claims.
                UNBOUND => GreenThread { g, generation: g.prepare_spawn_at(spawner, at) },
                // Running inline: claimed by its joiner, to which unparks are forwarded.
                INLINE => {
                    // SAFETY: written before INLINE, seen through our Acquire CAS (L2); the
                    // joiner does not write it again.
                    let host = unsafe { self.taker.with(|h| *h) }.expect("INLINE has a host");
                    GreenThread { g, generation: g.prepare_claimed(host.g, spawner, at) }
                }
                // Ended without a G: the identity of a green thread that has ended.
                _ => {
                    let generation = g.generation();
                    crate::registry::recycle_anywhere(g);
                    GreenThread { g, generation }
                }
            };
            return self.publish(t);
        }
    }

    /// Called by the worker that dequeued the entry: the G to run the task on, claimed for
    /// this worker (RUNNING). `alloc` gives a FREE record; `recycle` takes it back if a handle
    /// had made one first.
    pub(crate) fn start_on_worker(
        &self,
        alloc: impl FnOnce() -> GRef,
        recycle: impl FnOnce(GRef),
    ) -> GRef {
        let g = alloc();
        // The spawner is read once the record is ours for good (below): 0 until then.
        let mine = GreenThread { g, generation: g.prepare_running(0) };
        // SAFETY: only the entry's taker (us) writes `taker`, before leaving UNBOUND (L2);
        // readers read it only after STARTED.
        unsafe { self.taker.with_mut(|t| *t = Some(mine)) };
        loop {
            // Release: L2. Acquire on failure: L1.
            match self.bind.compare_exchange(UNBOUND, STARTED, Ordering::Release, Ordering::Acquire)
            {
                Ok(_) => {
                    // SAFETY: we left UNBOUND for STARTED: no binder can start now.
                    let (spawner, at) = unsafe { self.spawner() };
                    g.set_creator(spawner, at);
                    return g;
                }
                Err(BINDING) => {
                    self.settled();
                }
                Err(s) => {
                    debug_assert_eq!(s, BOUND, "a queued task is neither inline nor ended");
                    // A handle made a RUNNABLE G: the entry was its only queue entry, now ours.
                    // Ours goes back, unpublished (its only reference dropped, as at an exit).
                    let last = g.drop_ref();
                    debug_assert!(last, "nobody else saw our record");
                    g.recycle();
                    recycle(g);
                    let t = self.read(BOUND);
                    let claimed = t.g.claim_for_run();
                    debug_assert!(claimed, "a lazily bound G is claimed only by its entry's taker");
                    return t.g;
                }
            }
        }
    }

    /// Called by the joiner that dequeued the entry (in `JoinHandle::join`), before it runs
    /// the task inline on `host`. `Ok(Some(child))`: a handle had made the child's G, now
    /// claimed for the inline run (forwarding to `host`); `Ok(None)`: no G (INLINE). `Err(())`:
    /// the handle's G has a pending unpark or cancel and cannot run inline; the caller must
    /// queue the entry again.
    #[inline]
    pub(crate) fn start_inline(&self, host: GRef) -> Result<Option<GreenThread>, ()> {
        // Acquire: L1, for a record a handle made before the join (L3: no binder now).
        if self.bind.load(Ordering::Acquire) == UNBOUND {
            // SAFETY: only the entry's taker (us) writes `taker`; binders read it only after
            // INLINE, on this thread (L3). The generation is not used.
            unsafe { self.taker.with_mut(|h| *h = Some(GreenThread { g: host, generation: 0 })) };
            // Relaxed: L3.
            self.bind.store(INLINE, Ordering::Relaxed);
            return Ok(None);
        }
        let t = self.read(BOUND);
        if !t.g.claim_popped_inline(t.generation) {
            return Err(());
        }
        t.g.host.store(host.as_ptr(), Ordering::Release);
        Ok(Some(t))
    }

    /// Called by the joiner when an inline run that started without a G ends. Returns the G
    /// made for it during the run (CLAIMED, forwarding to the joiner), which the caller
    /// releases.
    #[inline]
    pub(crate) fn end_inline(&self) -> Option<GreenThread> {
        // Relaxed: L3 (only this thread changed the state since INLINE).
        if self.bind.load(Ordering::Relaxed) == INLINE {
            self.bind.store(ENDED, Ordering::Relaxed);
            return None;
        }
        Some(self.read(BOUND))
    }

    /// Called by whoever drained the entry of a task that will never run (shutdown). Returns
    /// the G a handle made (RUNNABLE), which the caller claims and releases.
    pub(crate) fn end_unstarted(&self) -> Option<GreenThread> {
        loop {
            // Acquire on failure: L1.
            match self.bind.compare_exchange(UNBOUND, ENDED, Ordering::Relaxed, Ordering::Acquire) {
                Ok(_) => return None,
                Err(BINDING) => {
                    self.settled();
                }
                Err(_) => return Some(self.read(BOUND)),
            }
        }
    }
}

/// Releases the G of a lazily spawned child that its joiner ran inline (claimed at the start
/// or made during the run): the same end as an eagerly spawned child run inline.
pub(crate) fn release_inline(child: GreenThread) {
    child.g.host.store(core::ptr::null_mut(), Ordering::Release);
    child.g.finish_run();
    if child.g.drop_ref() {
        crate::registry::recycle_anywhere(child.g);
    }
}

/// Loom models of the identity protocol (L1–L3) on the real code: records come from the
/// registry, as a worker's cache would give them.
#[cfg(all(test, loom))]
mod loom_identity {
    use super::*;
    use crate::g;
    use crate::registry::registry;
    use crate::sync::{Arc, thread};

    /// A handle's `thread()` races the worker that dequeued the task: exactly one record is
    /// made, both sides see the same identity, and the worker runs on it (claimed once).
    /// Mutation checks (each fails this model): `start_on_worker` leaving UNBOUND with a swap
    /// instead of the CAS ("one identity": the handle's record and the worker's both stand);
    /// that CAS with Relaxed on success (loom reports the racing read of `taker`); `publish`
    /// storing BOUND with Relaxed (loom reports the racing read of `bound`); the worker
    /// reading the spawner from `bound` before its CAS out of UNBOUND (loom reports the
    /// binder's concurrent write of `bound`).
    #[test]
    fn handle_binding_races_the_worker_start() {
        loom::model(|| {
            let identity = Arc::new(Identity::new());
            let i2 = identity.clone();
            let handle = thread::spawn(move || i2.get(core::ptr::null(), || registry().alloc()));
            let ran_on =
                identity.start_on_worker(|| registry().alloc(), |g| registry().give_free([g]));
            let seen = handle.join().unwrap();
            assert_eq!(seen.g, ran_on, "one identity");
            assert_eq!(g::status_of(ran_on.state.load(Ordering::Relaxed)), g::RUNNING);
            assert_eq!(ran_on.generation(), seen.generation);
            assert_eq!(identity.peek(), Some(seen));
        });
    }

    /// A joiner's look at the identity (`peek`, for its wait's deadlock report) races the
    /// worker that dequeued the task: a peek that finds the identity reads the worker's
    /// `taker` after the worker wrote it (L2; loom reports an unordered read). Mutation
    /// check: `peek`'s load without Acquire fails this model.
    #[test]
    fn peek_races_the_worker_start() {
        loom::model(|| {
            let identity = Arc::new(Identity::new());
            let i2 = identity.clone();
            let joiner = thread::spawn(move || i2.peek());
            let ran_on =
                identity.start_on_worker(|| registry().alloc(), |g| registry().give_free([g]));
            if let Some(seen) = joiner.join().unwrap() {
                assert_eq!(seen.g, ran_on, "one identity");
            }
        });
    }

    /// A handle binding the identity (`thread()`) races shutdown draining the task's entry
    /// (`end_unstarted`): the drain gets the record the binder made, having read `bound`
    /// after the binder wrote it (L1; loom reports an unordered read), or the binder makes
    /// the identity of a green thread that has ended; the record is released once. Mutation
    /// check: `end_unstarted`'s CAS without Acquire on failure fails this model.
    #[test]
    fn handle_binding_races_a_drain() {
        loom::model(|| {
            let identity = Arc::new(Identity::new());
            let i2 = identity.clone();
            let handle = thread::spawn(move || i2.get(core::ptr::null(), || registry().alloc()));
            // What shutdown's drain does with the entry of a task that never ran.
            let drained = identity.end_unstarted();
            if let Some(t) = drained {
                assert!(t.g.claim_for_run(), "a handle-made record of an unstarted task");
                t.g.finish_run();
                assert!(t.g.drop_ref(), "the drain holds the only reference");
                crate::registry::recycle_anywhere(t.g);
            }
            let seen = handle.join().unwrap();
            if let Some(t) = drained {
                assert_eq!(seen, t, "one identity");
            }
            assert_eq!(identity.peek(), Some(seen));
        });
    }

    /// `current()` inside a child run inline makes its identity (a CLAIMED record forwarding
    /// to the joiner); another thread unparks that identity while the run ends and the joiner
    /// releases the record: the unpark is forwarded to the host or finds the green thread
    /// ended, and the record is released once. Mutation check: `end_inline` ignoring the
    /// record made during the run (returning `None`) fails this model ("the joiner gets the
    /// record made during the run").
    #[test]
    fn an_identity_made_during_an_inline_run_is_released_once() {
        loom::model(|| {
            let host = registry().alloc();
            let identity = Identity::new();
            assert_eq!(identity.start_inline(host), Ok(None));
            let t = identity.get(core::ptr::null(), || registry().alloc());
            assert_eq!(g::status_of(t.g.state.load(Ordering::Relaxed)), g::CLAIMED);
            assert_eq!(t.g.host.load(Ordering::Relaxed), host.as_ptr());
            let waker = thread::spawn(move || t.g.unpark(t.generation));
            let ended = identity.end_inline();
            assert_eq!(ended, Some(t), "the joiner gets the record made during the run");
            release_inline(t);
            let unparked = waker.join().unwrap();
            assert!(matches!(unparked, g::Unparked::Forward | g::Unparked::Stale), "{unparked:?}");
            assert_ne!(t.g.generation(), t.generation, "released");
            assert_eq!(g::status_of(t.g.state.load(Ordering::Relaxed)), g::FREE);
            // After the run, the identity is of a green thread that has ended.
            assert_eq!(identity.peek(), Some(t));
        });
    }

    /// A queued task whose handle made a RUNNABLE record races the joiner taking it inline
    /// and an unpark through the handle: the joiner claims the record unless the unpark came
    /// first (then a worker must run it: `Err`), and the token is never lost.
    #[test]
    fn inline_start_claims_a_handle_made_record_unless_it_was_unparked() {
        loom::model(|| {
            let host = registry().alloc();
            let identity = Arc::new(Identity::new());
            let t = identity.get(core::ptr::null(), || registry().alloc());
            let waker = thread::spawn(move || t.g.unpark(t.generation));
            match identity.start_inline(host) {
                Ok(Some(c)) => {
                    assert_eq!(c, t);
                    // Claimed before the unpark: it is forwarded to the host.
                    assert_eq!(waker.join().unwrap(), g::Unparked::Forward);
                    release_inline(c);
                }
                Ok(None) => panic!("a bound identity is used"),
                Err(()) => {
                    // The token is pending: a worker claims the record and keeps it.
                    assert_eq!(waker.join().unwrap(), g::Unparked::Noted);
                    assert_eq!(
                        identity
                            .start_on_worker(|| registry().alloc(), |g| registry().give_free([g])),
                        t.g
                    );
                    assert!(t.g.take_notified(), "the unpark's token reaches the run");
                }
            }
        });
    }
}
