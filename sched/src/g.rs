//! G: the green-thread record and its state machine.
//!
//! A G is a small record: its state word, the entry it will run, and — once it has run — its
//! saved [`Context`] and its [`Stack`]. Records are never freed while the scheduler lives
//! (they are recycled through free lists), so a [`GRef`] is always safe to dereference and a
//! stale handle is detected by the generation in the state word, brpc's version butex idea:
//! a green thread's id is `generation << 32 | slot`.
//!
//! # States
//!
//! ```text
//!            spawn               claim (worker)            switch out (publish on g0)
//!   FREE ──────────▶ RUNNABLE ─────────────────▶ RUNNING ──────────────────────────▶ RUNNABLE (yield)
//!     ▲                 │  ▲                        │  park(): RUNNING => PARKING      │
//!     │                 │  │ unpark: PARKED         ▼                                  │
//!     │   claim (joiner)│  └──── => RUNNABLE ──── PARKED ◀── g0: PARKING => PARKED     │
//!     │                 ▼                                                              │
//!     │              CLAIMED (run inline by its joiner; the queue entry goes stale)    │
//!     └──── g0 after exit, or the last party to drop a reference: gen += 1 ◀───────────┘
//! ```
//!
//! `NOTIFIED` is a flag next to the status: an unpark that finds the G not yet `PARKED`
//! (running, switching out, or queued) sets it, and the G's next `park` consumes it and
//! returns at once — std's token semantics, so an unpark racing a park is never lost. An unpark
//! that finds `PARKED` moves it to `RUNNABLE` with one CAS and is the only party that queues
//! it, so it is never run twice.
//!
//! # Memory ordering
//!
//! The guarantee: whoever moves a G to `RUNNING` (a worker claiming it) sees every write made by
//! the last thread that ran it or set it up (its context, stack, entry), and a waker that
//! queues a parked G sees the context saved by the switch that parked it.
//!
//! - (G1) `publish_parked` stores `PARKING => PARKED` with Release after the G's context has
//!   been stored on g0; the unparker's `PARKED => RUNNABLE` CAS is AcqRel (Acquire pairs with
//!   G1), and then hands the G to a queue whose push/pop is itself Release/Acquire.
//! - (G2) `claim` (`RUNNABLE => RUNNING` by a worker, or `RUNNABLE => CLAIMED` by a joiner) is
//!   an AcqRel CAS pairing with the Release of whichever transition made it `RUNNABLE` (spawn
//!   publishes through the queue, yield through the queue, unpark through G1's CAS).
//! - (G3) `unpark` of a running G is an AcqRel CAS that sets `NOTIFIED` — always a write, also
//!   when the flag is already set (a wake merged into a pending token must still publish the
//!   waker's writes); `park` consumes it with an AcqRel read-modify-write, so writes before
//!   the unpark happen before the return from `park`.
//! - (G4) `release` (the last reference) bumps the generation with a Release store; a handle's
//!   operations are CASes that include the generation, so they fail on a recycled record. A
//!   party that reads a record's cells without owning it (a handle's `name`, the registry's
//!   sweeps) first takes a reference (`try_ref`, Acquire), then checks the generation: a
//!   spawn stores the new life's first reference with Release, after the recycle, so a
//!   reference taken on the new life comes with the new generation, and a stale handle
//!   reads none of the cells written for it.

use core::fmt;
use core::panic::Location;
use core::ptr::NonNull;

use purloin_context::Context;
use purloin_stack::{Stack, StackSize};

use crate::sync::{AtomicU32, AtomicU64, Ordering, UnsafeCell};

/// Status values (low 4 bits of the state word).
pub(crate) const FREE: u32 = 0;
pub(crate) const RUNNABLE: u32 = 1;
pub(crate) const RUNNING: u32 = 2;
pub(crate) const PARKING: u32 = 3;
pub(crate) const PARKED: u32 = 4;
pub(crate) const CLAIMED: u32 = 5;
/// Finished; the record waits for its last reference to be dropped.
pub(crate) const DONE: u32 = 6;
/// Parked, and claimed by a dump that is walking its stack (see `dump`): like `PARKING`, an
/// unpark leaves `NOTIFIED` and the dump, not the unparker, queues it.
pub(crate) const INSPECTED: u32 = 7;
const STATUS_MASK: u32 = 0xF;
/// An unpark arrived while the G was not parked; its next park returns at once.
pub(crate) const NOTIFIED: u32 = 1 << 4;
/// Shutdown asked this G to unwind the next time it resumes from a park or yield.
pub(crate) const CANCEL: u32 = 1 << 5;
/// Spawned and never run yet: only such a G may be run inline by its joiner.
pub(crate) const FRESH: u32 = 1 << 6;
/// An interrupt is pending: the G's next interruptible wait (or the one it is in) returns
/// `Interrupted` and consumes it. Set together with `NOTIFIED` (or by moving a parked G to
/// `RUNNABLE`), so a park in progress returns and the wait sees it.
pub(crate) const INTERRUPT: u32 = 1 << 7;
/// Held interrupts: a count (bits 8..16) of the cancelled tokens in whose scope the G runs,
/// each added when such a token is cancelled (or entered cancelled) and taken back when the G
/// leaves its scope. Every interruptible wait returns `Interrupted` while it is not zero;
/// nothing consumes it.
pub(crate) const HOLD_ONE: u32 = 1 << 8;
pub(crate) const HOLD_MASK: u32 = 0xFF << 8;

/// Builds a state word.
#[inline]
pub(crate) const fn word(generation: u32, bits: u32) -> u64 {
    ((generation as u64) << 32) | bits as u64
}
#[inline]
pub(crate) const fn generation_of(w: u64) -> u32 {
    (w >> 32) as u32
}
#[inline]
pub(crate) const fn bits_of(w: u64) -> u32 {
    w as u32
}
#[inline]
pub(crate) const fn status_of(w: u64) -> u32 {
    (w as u32) & STATUS_MASK
}

/// Where a green thread was spawned: the spawn call's place in the source
/// (`#[track_caller]`), kept as one pointer.
pub(crate) type SpawnSite = &'static Location<'static>;

/// "Not pinned" in [`G::pinned_to`].
pub(crate) const NOT_PINNED: usize = usize::MAX;

/// Worker indexes a G can be pinned to: below 2^31, so the pin word's sign-extension maps
/// only `u32::MAX` to [`NOT_PINNED`].
pub(crate) const MAX_PIN: usize = i32::MAX as usize;

/// The green-thread record. Fields behind `UnsafeCell` belong to whoever holds the G's
/// scheduling reference: the spawner before it is queued, the worker that claimed it while it
/// runs and while it switches out, nobody while it is parked (the context is saved; the
/// unparker that wins the `PARKED => RUNNABLE` CAS takes the reference).
///
/// `repr(C)`, in this order: the fields a park, a wake-up and a switch in touch come first,
/// side by side, so that resuming a green thread whose record went cold while others ran
/// misses on as few cache lines as the record allows; the fields only spawns, exits and
/// reporters touch come last.
#[repr(C)]
pub(crate) struct G {
    /// `generation << 32 | flags | status`; see the module docs.
    pub(crate) state: AtomicU64,
    /// The coarse clock's value (`clock`) when the G last changed state: spawned, switched in,
    /// parked, queued by a wake-up or a yield, entered or left a blocking section. Written by
    /// whoever makes the change (the party that owns the record at that moment); read racily
    /// by dumps (how long a green thread has been in its state).
    pub(crate) since: crate::sync::DiagU64,
    /// Time on a worker (`GreenThread::cpu_time`), in the coarse clock's nanoseconds, up to
    /// the `since` stamp while the G runs: every stamp of a running G first charges it the
    /// clock's advance since the previous one ([`G::charge_and_stamp`]). Written by the G's
    /// owner (the G itself, or its worker's g0 after it switched out); read racily.
    pub(crate) run_ns: crate::sync::DiagU64,
    /// Times switched in (brpc's `nswitch`; a yield resumed at once counts, as in
    /// `ProcStats::switches`). Written by the worker that switches it in; read racily.
    pub(crate) switches: crate::sync::DiagU64,
    /// Saved registers while switched out.
    pub(crate) context: UnsafeCell<Option<Context>>,
    /// The scheduler this green thread belongs to (set at spawn, read by wakers that won a
    /// transition to RUNNABLE; the scheduler outlives every G it runs).
    pub(crate) sched: UnsafeCell<*const crate::shared::Shared>,
    /// What the G runs: a green thread's task, taken when it starts (or by a joiner running
    /// it inline), or a stackless task, kept until the record is recycled.
    pub(crate) work: UnsafeCell<Work>,
    /// While this G runs a child inline (join-helping), the child's identity for `current()`.
    /// Touched only by the G itself.
    pub(crate) inline_child: UnsafeCell<Option<InlineChild>>,
    /// What the G waits on while parked (diagnostics: deadlock reports), with `wait_holder`
    /// and `wait_kind`. Written by the G itself; read racily (atomics) by reporters.
    pub(crate) wait_object: crate::sync::DiagUsize,
    pub(crate) wait_holder: crate::sync::DiagU64,
    pub(crate) wait_kind: crate::sync::DiagU8,
    /// Not counted in the scheduler's live green threads (a fork-join job: its joiner is).
    pub(crate) uncounted: UnsafeCell<bool>,
    /// Worker index this G must run on, or [`NOT_PINNED`], in 32 bits (see
    /// [`G::pinned_to`]; a worker index is below [`MAX_PIN`]).
    pinned_to: AtomicU32,
    /// References that may still touch the record's non-atomic fields: the scheduling
    /// reference (1 while the G is alive) plus one per stale queue entry or inline runner.
    refs: AtomicU32,
    /// The record's permanent slot number (the low half of the id).
    pub(crate) slot: u32,
    /// While a joiner runs this G inline, the joiner's record (unparks are forwarded there).
    pub(crate) host: crate::sync::AtomicPtr<G>,
    /// The stack, attached when the G first runs and detached on g0 after it exits.
    pub(crate) stack: UnsafeCell<Option<Stack>>,
    /// Name for diagnostics (`current().name()`, overflow and deadlock reports).
    pub(crate) name: UnsafeCell<Option<std::sync::Arc<str>>>,
    /// Stack size class requested at spawn.
    pub(crate) stack_size: UnsafeCell<StackSize>,
    /// Green-local storage owned by the runtime layer (an opaque pointer, freed by it).
    pub(crate) locals: UnsafeCell<*mut ()>,
    /// The id of `inline_child` (0 if none), readable by reporters.
    pub(crate) inline_child_id: crate::sync::DiagU64,
    /// The id of the green thread that spawned this one (0: spawned from a plain thread, or a
    /// fork-join job). Written by `prepare_*` before the record is published; read racily by
    /// dumps.
    pub(crate) spawned_by: crate::sync::DiagU64,
    /// Where in the source it was spawned (null: unknown, as for a fork-join job). Written with
    /// `spawned_by`; read racily by dumps (every value ever stored is a `'static` location).
    pub(crate) created_at: crate::sync::DiagPtr<Location<'static>>,
    /// Its labels (`labels`): written by the G itself while it runs, and by its spawner
    /// before it is published (inherited); read only by parties that own the record (the G,
    /// a dump holding it `INSPECTED`, the worker switching it in).
    labels: UnsafeCell<Option<crate::labels::Labels>>,
}

/// What a G runs: one field for both kinds, since a record is either a green thread or a
/// stackless task (one word-sized tag shared instead of two `Option`s side by side).
pub(crate) enum Work {
    /// Nothing (a FREE record, or a green thread whose task was taken).
    None,
    /// A green thread's task, until it starts.
    Task(crate::task::TaskRef),
    /// A stackless task (stepped on the worker's own stack) instead of a green thread.
    Step(std::sync::Arc<dyn crate::Task>),
}

impl Work {
    /// Takes a green thread's task, leaving [`Work::None`]; a stackless task stays.
    pub(crate) fn take_task(&mut self) -> Option<crate::task::TaskRef> {
        if !matches!(self, Work::Task(_)) {
            return None;
        }
        match core::mem::replace(self, Work::None) {
            Work::Task(t) => Some(t),
            _ => None,
        }
    }
}

/// What a G runs inline for its joiner (join-helping), as `current()` sees it.
#[derive(Clone, Copy)]
pub(crate) enum InlineChild {
    /// A child with a G record.
    Thread(crate::GreenThread),
    /// A lazily spawned child with no G (yet): its identity is made on demand (see `lazy`).
    Lazy(NonNull<crate::task::CellHead>),
}

// SAFETY: the UnsafeCell fields are only touched by the holder of the G's scheduling
// reference, which is handed between threads through Release/Acquire pairs (G1, G2); the
// `Context`, `Stack` and task inside are `Send`. All other fields are atomics.
unsafe impl Sync for G {}
// SAFETY: as above; a G record moves between threads only as a `GRef`.
unsafe impl Send for G {}

impl G {
    fn new(slot: u32) -> G {
        G {
            state: AtomicU64::new(word(1, FREE)),
            since: crate::sync::DiagU64::new(0),
            run_ns: crate::sync::DiagU64::new(0),
            switches: crate::sync::DiagU64::new(0),
            spawned_by: crate::sync::DiagU64::new(0),
            created_at: crate::sync::DiagPtr::new(core::ptr::null_mut()),
            labels: UnsafeCell::new(None),
            refs: AtomicU32::new(0),
            slot,
            pinned_to: AtomicU32::new(NOT_PINNED as u32),
            host: crate::sync::AtomicPtr::new(core::ptr::null_mut()),
            context: UnsafeCell::new(None),
            stack: UnsafeCell::new(None),
            work: UnsafeCell::new(Work::None),
            uncounted: UnsafeCell::new(false),
            name: UnsafeCell::new(None),
            stack_size: UnsafeCell::new(StackSize::default()),
            sched: UnsafeCell::new(core::ptr::null()),
            locals: UnsafeCell::new(core::ptr::null_mut()),
            inline_child: UnsafeCell::new(None),
            inline_child_id: crate::sync::DiagU64::new(0),
            wait_kind: crate::sync::DiagU8::new(0),
            wait_object: crate::sync::DiagUsize::new(0),
            wait_holder: crate::sync::DiagU64::new(0),
        }
    }

    /// The worker index this G must run on, or [`NOT_PINNED`] (Relaxed: written before the G
    /// is published, or by the G itself while it runs; the queue hand-offs order it). The
    /// 32-bit word is sign-extended, so `u32::MAX` reads as `NOT_PINNED` with no branch.
    #[inline]
    pub(crate) fn pinned_to(&self) -> usize {
        self.pinned_to.load(Ordering::Relaxed) as i32 as isize as usize
    }

    /// Pins the G to worker `pi` (at spawn, before the G is published).
    pub(crate) fn set_pinned_to(&self, pi: usize) {
        assert!(pi < MAX_PIN, "worker index {pi} does not fit a G's pin word");
        self.pinned_to.store(pi as u32, Ordering::Relaxed);
    }

    /// Pins the running G to worker `pi` unless it is pinned already; true if it was not.
    pub(crate) fn pin_if_unpinned(&self, pi: usize) -> bool {
        assert!(pi < MAX_PIN, "worker index {pi} does not fit a G's pin word");
        self.pinned_to
            .compare_exchange(NOT_PINNED as u32, pi as u32, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// The current generation (for building handles).
    pub(crate) fn generation(&self) -> u32 {
        generation_of(self.state.load(Ordering::Acquire))
    }

    pub(crate) fn id_with(&self, generation: u32) -> u64 {
        ((generation as u64) << 32) | self.slot as u64
    }

    /// Drops a reference; returns true if it was the last one (the caller recycles the record).
    pub(crate) fn drop_ref(&self) -> bool {
        // AcqRel: the last dropper must see every other party's writes before recycling.
        self.refs.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Stamps the record with the coarse clock: it changes state now (`clock`). The caller owns
    /// the record (see `since`).
    #[inline]
    pub(crate) fn stamp(&self) {
        self.since.store(crate::clock::coarse(), crate::sync::STAT);
    }

    /// Stamps the running G (as [`G::stamp`]) after charging it the coarse clock's advance
    /// since its last stamp (`run_ns`): at every change of state that ends or splits a run
    /// (park, yield, a blocking section's requeue, entering and leaving a blocking section).
    /// The caller owns the record and the G is running (its last stamp is the switch-in's or
    /// one of these, never a queueing's precise reading).
    #[inline]
    pub(crate) fn charge_and_stamp(&self) {
        let now = crate::clock::coarse();
        let last = self.since.load(crate::sync::STAT);
        let ran = self.run_ns.load(crate::sync::STAT).wrapping_add(now.saturating_sub(last));
        self.run_ns.store(ran, crate::sync::STAT);
        self.since.store(now, crate::sync::STAT);
    }

    /// Time on a worker in the coarse clock's nanoseconds, the running slice included if the
    /// G is running (a racy read: see `GreenThread::cpu_time`). The caller holds a reference.
    pub(crate) fn run_nanos(&self) -> u64 {
        let ran = self.run_ns.load(crate::sync::STAT);
        if status_of(self.state.load(Ordering::Relaxed)) != RUNNING {
            return ran;
        }
        let last = self.since.load(crate::sync::STAT) & !crate::clock::PRECISE;
        ran.wrapping_add(crate::clock::coarse().saturating_sub(last))
    }

    /// Records who spawned the G and where (the caller owns the record: see `spawned_by`).
    #[inline]
    pub(crate) fn set_creator(&self, spawner: u64, at: Option<SpawnSite>) {
        self.spawned_by.store(spawner, crate::sync::STAT);
        let at = at.map_or(core::ptr::null_mut(), |l| core::ptr::from_ref(l).cast_mut());
        self.created_at.store(at, crate::sync::STAT);
    }

    /// Where the G was spawned, if known (racy read for dumps: any value is a `'static`
    /// location or null).
    pub(crate) fn created_at(&self) -> Option<SpawnSite> {
        let at = self.created_at.load(crate::sync::STAT);
        // SAFETY: every non-null value stored in `created_at` came from a
        // `&'static Location<'static>` (`set_creator`).
        unsafe { at.cast_const().as_ref() }
    }

    /// Makes a FREE record RUNNABLE for a new green thread spawned by the green thread with id
    /// `spawner` (0: none), at no known place: one scheduling reference.
    pub(crate) fn prepare_spawn(&self, spawner: u64) -> u32 {
        self.prepare_spawn_at(spawner, None)
    }

    /// [`G::prepare_spawn`] for a green thread spawned at `at` in the source.
    #[inline]
    pub(crate) fn prepare_spawn_at(&self, spawner: u64, at: Option<SpawnSite>) -> u32 {
        let gen_now = self.generation();
        self.set_creator(spawner, at);
        self.stamp();
        // Release (G4): a reference taken on this life (`try_ref`, Acquire) comes after the
        // recycle that ended the last one, so a stale handle that takes it finds the new
        // generation and reads none of the cells written for this life.
        self.refs.store(1, Ordering::Release);
        // Relaxed: the record is published to others through the run queue (Release push).
        self.state.store(word(gen_now, RUNNABLE | FRESH), Ordering::Relaxed);
        gen_now
    }

    /// Makes a FREE record the RUNNING G of a worker that is about to run it (a lazily spawned
    /// green thread, see `lazy`; `spawner` as for `prepare_spawn`; the switch-in stamps it):
    /// one scheduling reference, held by that worker. The record is published later, with the
    /// identity (`lazy`, L2), and by the switch to it.
    pub(crate) fn prepare_running(&self, spawner: u64) -> u32 {
        let gen_now = self.generation();
        self.set_creator(spawner, None);
        // Release: as in `prepare_spawn` (G4).
        self.refs.store(1, Ordering::Release);
        self.state.store(word(gen_now, RUNNING), Ordering::Relaxed);
        gen_now
    }

    /// Makes a FREE record the CLAIMED G of a child that its joiner `host` is already running
    /// inline (a lazily spawned child that needed an identity during the run; see `lazy`;
    /// `spawner` as for `prepare_spawn`): one scheduling reference, held by the joiner; unparks
    /// are forwarded to the host.
    pub(crate) fn prepare_claimed(&self, host: GRef, spawner: u64, at: Option<SpawnSite>) -> u32 {
        let gen_now = self.generation();
        self.set_creator(spawner, at);
        // Release: as in `prepare_spawn` (G4).
        self.refs.store(1, Ordering::Release);
        self.host.store(host.as_ptr(), Ordering::Relaxed);
        // Relaxed: published with the identity (`lazy`, L1).
        self.state.store(word(gen_now, CLAIMED), Ordering::Relaxed);
        gen_now
    }

    /// A worker that dequeued this G claims it: `RUNNABLE => RUNNING` (G2). Returns false if
    /// the entry is stale (a joiner claimed it first); the caller must then `drop_ref`.
    pub(crate) fn claim_for_run(&self) -> bool {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if status_of(cur) != RUNNABLE {
                return false;
            }
            let next = (cur & !((STATUS_MASK | FRESH) as u64)) | RUNNING as u64;
            // AcqRel pairs with the Release that made it RUNNABLE (G2).
            match self.state.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// A joiner claims a not-yet-started G of generation `generation` to run it inline:
    /// `RUNNABLE => CLAIMED` (G2). The queue entry stays and becomes stale: it keeps its
    /// reference, and the joiner holds the scheduling reference.
    pub(crate) fn claim_inline(&self, generation: u32) -> bool {
        let cur = word(generation, RUNNABLE | FRESH);
        let next = word(generation, CLAIMED);
        // The reference for the queue entry (which stays, stale) must exist before the CAS
        // publishes CLAIMED: a worker popping that entry right after the CAS drops one. Take
        // it only on a live record (never resurrect a FREE one sitting in a free list), and
        // not at all when the word already shows another state or generation.
        if self.state.load(Ordering::Relaxed) != cur || !self.try_ref() {
            return false;
        }
        // AcqRel pairs with the Release that made it RUNNABLE (G2).
        if self.state.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            true
        } else {
            // Not claimed (another generation, started, or notified): give the reference
            // back; if that was the last one, whoever dropped the others left recycling to us.
            if self.drop_ref() {
                crate::registry::recycle_anywhere(GRef(NonNull::from(self)));
            }
            false
        }
    }

    /// Like `claim_inline`, for a caller that already removed the G's only queue entry (it
    /// popped it from its own local queue): no stale entry remains, so no extra reference.
    pub(crate) fn claim_popped_inline(&self, generation: u32) -> bool {
        let cur = word(generation, RUNNABLE | FRESH);
        let next = word(generation, CLAIMED);
        // AcqRel pairs with the Release that made it RUNNABLE (G2).
        self.state.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// Whether the G is RUNNABLE (a queue entry of a G that is not is stale: see
    /// `join::take_from_global_head`). Acquire: pairs with the transition that left RUNNABLE.
    pub(crate) fn is_runnable(&self) -> bool {
        status_of(self.state.load(Ordering::Acquire)) == RUNNABLE
    }

    /// Consumes a pending `NOTIFIED` token of the running G. Returns true if there was one.
    pub(crate) fn take_notified(&self) -> bool {
        let cur = self.state.load(Ordering::Relaxed);
        if bits_of(cur) & NOTIFIED == 0 {
            return false;
        }
        // AcqRel pairs with the unparker's CAS (G3).
        self.state.fetch_and(!(NOTIFIED as u64), Ordering::AcqRel);
        true
    }

    /// `RUNNING => PARKING` before switching out to park. Fails (returns false) if a
    /// `NOTIFIED` token is pending; the caller consumes it and does not park.
    #[inline]
    pub(crate) fn begin_park(&self) -> bool {
        self.begin_park_unless(NOTIFIED)
    }

    /// [`G::begin_park`] that also fails if any of `flags` is set (an interruptible park
    /// passes the interrupt bits, checked with the same load).
    #[inline]
    pub(crate) fn begin_park_unless(&self, flags: u32) -> bool {
        let cur = self.state.load(Ordering::Relaxed);
        if bits_of(cur) & (NOTIFIED | flags) != 0 || status_of(cur) != RUNNING {
            return false;
        }
        let next = (cur & !(STATUS_MASK as u64)) | PARKING as u64;
        self.state.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// On g0, after the parking G's context was saved: `PARKING => PARKED` (G1). Returns false
    /// if an unpark set `NOTIFIED` in the meantime; then the G is made `RUNNABLE` (token
    /// consumed) and the caller must queue it.
    pub(crate) fn publish_parked(&self) -> bool {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert_eq!(status_of(cur), PARKING);
            let (next, parked) = if bits_of(cur) & NOTIFIED != 0 {
                ((cur & !((STATUS_MASK | NOTIFIED) as u64)) | RUNNABLE as u64, false)
            } else {
                ((cur & !(STATUS_MASK as u64)) | PARKED as u64, true)
            };
            // Release publishes the saved context to the unparker (G1).
            match self.state.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return parked,
                Err(actual) => cur = actual,
            }
        }
    }

    /// On g0, once the parking G has switched out: stores its suspended context `ctx` in the
    /// record, then publishes `PARKED` (G1, whose Release hands that store to the unparker and
    /// on to whoever resumes the G). Returns what [`G::publish_parked`] returns.
    ///
    /// # Safety
    ///
    /// The caller is g0 of the worker that ran the G, which began parking (`PARKING`): it owns
    /// the record's cells until `PARKED` is published.
    pub(crate) unsafe fn save_context_and_park(&self, ctx: Context) -> bool {
        // SAFETY: the caller owns the record until the publish below (see above).
        unsafe { self.context.with_mut(|c| *c = Some(ctx)) };
        self.publish_parked()
    }

    /// Takes the G's saved context out of the record, to resume it (or, for a dump, to walk
    /// its stack).
    ///
    /// # Safety
    ///
    /// The caller owns the record's cells: it claimed the G (`RUNNING`, `CLAIMED`) or, for a
    /// dump, moved it to `INSPECTED`.
    pub(crate) unsafe fn take_context(&self) -> Option<Context> {
        // SAFETY: the caller owns the record (see above).
        unsafe { self.context.with_mut(|c| (*c).take()) }
    }

    /// A dump claims a parked G of `generation` to walk its stack: `PARKED => INSPECTED`
    /// (D1). While INSPECTED, the G's context and stack belong to the dump: an unpark or a
    /// cancel finds a status that is not `PARKED` and only sets `NOTIFIED` (the unchanged
    /// default arm of `unpark`), so nobody else queues it. Returns false if the G is not
    /// parked (any more) or the generation is gone.
    #[cfg_attr(loom, allow(dead_code))] // used by `dump` (not built under loom) and the models
    pub(crate) fn begin_inspect(&self, generation: u32) -> bool {
        let cur = self.state.load(Ordering::Relaxed);
        if generation_of(cur) != generation || status_of(cur) != PARKED {
            return false;
        }
        let next = (cur & !(STATUS_MASK as u64)) | INSPECTED as u64;
        // Acquire pairs with G1 (the context saved by the switch that parked it) and with
        // D2 of an earlier dump (the stack words it restored).
        self.state.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// The dump is done with the G's stack: `INSPECTED => PARKED` (D2), or, if an unpark or
    /// cancel arrived meanwhile (`NOTIFIED`), `INSPECTED => RUNNABLE` with the token consumed,
    /// like `publish_parked`. Returns false in the second case: the caller must queue the G.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn end_inspect(&self) -> bool {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert_eq!(status_of(cur), INSPECTED);
            let (next, parked) = if bits_of(cur) & NOTIFIED != 0 {
                ((cur & !((STATUS_MASK | NOTIFIED) as u64)) | RUNNABLE as u64, false)
            } else {
                ((cur & !(STATUS_MASK as u64)) | PARKED as u64, true)
            };
            // Release (D2): publishes the restored context and stack words to whoever moves
            // the G out of PARKED next (an unparker's AcqRel CAS, G1's partner) or, in the
            // RUNNABLE case, to the worker that claims it (through the queue push, G2).
            // Acquire: pairs with the unparker's Release (G3), handed on through the queue.
            match self.state.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return parked,
                Err(actual) => cur = actual,
            }
        }
    }

    /// On g0 after a yield: `RUNNING => RUNNABLE` (keeps flags). The caller queues it.
    ///
    /// A read-modify-write, not a store: an unpark (`NOTIFIED`) or a cancel (`CANCEL`) may set
    /// a flag on the running G at any moment, and a store computed from an earlier load would
    /// erase it.
    pub(crate) fn publish_runnable(&self) {
        // Relaxed: the queue push that follows is the Release that publishes the G (G2).
        let prev = self.state.fetch_xor((RUNNING ^ RUNNABLE) as u64, Ordering::Relaxed);
        debug_assert_eq!(status_of(prev), RUNNING);
    }

    /// Wakes the green thread of `generation`. Returns `Unparked::Queue` when the caller won
    /// the `PARKED => RUNNABLE` transition and must queue the G; `Noted` when a token was left
    /// for a G that is not parked (or forwarded); `Stale` when the generation is gone.
    pub(crate) fn unpark(&self, generation: u32) -> Unparked {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if generation_of(cur) != generation {
                return Unparked::Stale;
            }
            let bits = bits_of(cur);
            let next = match status_of(cur) {
                PARKED => word(generation, (bits & !STATUS_MASK) | RUNNABLE),
                FREE | DONE => return Unparked::Stale,
                CLAIMED => return Unparked::Forward,
                // Also when NOTIFIED is already set: the CAS (then writing the same value) is
                // what orders this waker's earlier writes before the consumption of the token
                // (G3). Returning after a plain load would let the G consume the older token,
                // miss those writes on its re-check, and park for good.
                _ => word(generation, bits | NOTIFIED),
            };
            // AcqRel: Acquire pairs with G1 (the saved context), Release with the park side's
            // consumption of the token (G3).
            match self.state.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) if status_of(cur) == PARKED => return Unparked::Queue,
                Ok(_) => return Unparked::Noted,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Asks a G of `generation` to unwind (shutdown): sets `CANCEL`, and if it is parked moves
    /// it to `RUNNABLE` like an unpark. Returns whether the caller must queue it.
    pub(crate) fn cancel(&self, generation: u32) -> Unparked {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if generation_of(cur) != generation || matches!(status_of(cur), FREE | DONE) {
                return Unparked::Stale;
            }
            let bits = bits_of(cur) | CANCEL;
            let (next, queue) = match status_of(cur) {
                PARKED => (word(generation, (bits & !STATUS_MASK) | RUNNABLE), true),
                _ => (word(generation, bits | NOTIFIED), false),
            };
            match self.state.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return if queue { Unparked::Queue } else { Unparked::Noted },
                Err(actual) => cur = actual,
            }
        }
    }

    /// Interrupts the green thread of `generation`: sets `INTERRUPT` (or, if `hold`, adds one
    /// held interrupt) and wakes it like an unpark. Returns `Queue` if the caller moved it
    /// `PARKED => RUNNABLE` and must queue it, `Forward` if a joiner runs it inline (the flag
    /// is set on this record, where the child's waits look; the caller wakes the host),
    /// `Noted` if it was not parked (`NOTIFIED` set too, so a park in progress returns), and
    /// `Stale` if the generation is gone.
    pub(crate) fn interrupt(&self, generation: u32, hold: bool) -> Unparked {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if generation_of(cur) != generation || matches!(status_of(cur), FREE | DONE) {
                return Unparked::Stale;
            }
            let bits = if hold {
                assert!(
                    bits_of(cur) & HOLD_MASK != HOLD_MASK,
                    "purloin: a green thread runs inside more than 255 cancelled token scopes"
                );
                bits_of(cur) + HOLD_ONE
            } else {
                bits_of(cur) | INTERRUPT
            };
            let (next, outcome) = match status_of(cur) {
                PARKED => (word(generation, (bits & !STATUS_MASK) | RUNNABLE), Unparked::Queue),
                CLAIMED => (word(generation, bits), Unparked::Forward),
                _ => (word(generation, bits | NOTIFIED), Unparked::Noted),
            };
            // AcqRel, as `unpark` (I1): Acquire pairs with G1 when it queues a parked G;
            // Release orders the interrupter's writes before the wait that sees the flag
            // (its Acquire load in `interrupt_bits`).
            match self.state.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return outcome,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The interrupt bits (`INTERRUPT | HOLD_MASK`) of the live generation `generation`, or 0.
    /// Acquire: pairs with `interrupt`'s Release (I1).
    #[inline]
    pub(crate) fn interrupt_bits(&self, generation: u32) -> u32 {
        let w = self.state.load(Ordering::Acquire);
        let bits = bits_of(w) & (INTERRUPT | HOLD_MASK);
        // The generation matters only when a flag is set (the common answer is one test).
        if bits != 0 && generation_of(w) != generation { 0 } else { bits }
    }

    /// Clears a one-shot interrupt (`hold` false) or takes back one held interrupt (`hold`)
    /// on the live generation `generation`; returns whether there was one.
    pub(crate) fn clear_interrupt(&self, generation: u32, hold: bool) -> bool {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            let bits = bits_of(cur);
            let mask = if hold { HOLD_MASK } else { INTERRUPT };
            if generation_of(cur) != generation || bits & mask == 0 {
                return false;
            }
            let next = if hold { cur - HOLD_ONE as u64 } else { cur & !(INTERRUPT as u64) };
            // Acquire: the consumer of a one-shot interrupt sees the interrupter's writes (I1).
            match self.state.compare_exchange_weak(cur, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The G finished (exited on g0, or its inline run by a joiner ended): status `DONE`,
    /// flags cleared. Wakers now see it as stale.
    pub(crate) fn finish_run(&self) {
        let cur = self.state.load(Ordering::Relaxed);
        // Release: pairs with `try_ref`'s generation check readers (nothing else to publish).
        self.state.store(word(generation_of(cur), DONE), Ordering::Release);
    }

    /// Takes a reference if the record still has one (like `Weak::upgrade`), so a non-owner
    /// (a handle's `name()`, the monitor) can read the record's cells without racing
    /// `recycle`. The caller must check the generation afterwards and `drop_ref` when done.
    pub(crate) fn try_ref(&self) -> bool {
        let mut n = self.refs.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return false;
            }
            // Acquire: pairs with the Release half of other parties' `drop_ref`.
            match self.refs.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
    }

    /// Whether shutdown asked this (running) G to unwind.
    pub(crate) fn is_cancelled(&self) -> bool {
        bits_of(self.state.load(Ordering::Acquire)) & CANCEL != 0
    }

    /// Recycles the record after its last reference: bumps the generation (G4) and clears
    /// per-life fields. The caller must hold the last reference.
    pub(crate) fn recycle(&self) {
        let generation = self.generation().wrapping_add(1).max(1);
        self.pinned_to.store(NOT_PINNED as u32, Ordering::Relaxed);
        self.host.store(core::ptr::null_mut(), Ordering::Relaxed);
        self.wait_kind.store(0, crate::sync::STAT);
        self.run_ns.store(0, crate::sync::STAT);
        self.switches.store(0, crate::sync::STAT);
        // SAFETY: the caller holds the last reference, so no other thread touches these.
        unsafe {
            self.name.with_mut(|n| *n = None);
            self.labels.with_mut(|l| *l = None);
            self.work.with_mut(|w| *w = Work::None);
            self.uncounted.with_mut(|u| *u = false);
            self.context.with_mut(|c| *c = None);
            self.locals.with_mut(|l| *l = core::ptr::null_mut());
            self.inline_child.with_mut(|c| *c = None);
            self.inline_child_id.store(0, crate::sync::STAT);
            self.stack.with_mut(|s| *s = None);
        }
        // Release: handles that CAS with the old generation now fail (G4).
        self.state.store(word(generation, FREE), Ordering::Release);
    }

    /// Whether this G is a stackless task's record (a state-machine step), not a green thread
    /// (caller holds a reference or knows the G is alive).
    pub(crate) fn is_step(&self) -> bool {
        // SAFETY: the step task is written only at spawn (before the G is published) and
        // cleared at recycle; callers read it while the G is alive.
        unsafe { self.work.with(|w| matches!(*w, Work::Step(_))) }
    }

    /// Its labels. The caller owns the record: it is the G itself (running), the G's spawner
    /// before publishing it, a dump holding it `INSPECTED`, or the worker switching it in.
    pub(crate) fn own_labels(&self) -> Option<crate::labels::Labels> {
        // SAFETY: only the record's owner (the caller, see above) touches `labels`.
        unsafe { self.labels.with(|l| (*l).clone()) }
    }

    /// Whether it has labels (the caller owns the record, as for [`G::own_labels`]).
    #[inline]
    pub(crate) fn has_labels(&self) -> bool {
        // SAFETY: as in `own_labels`.
        unsafe { self.labels.with(|l| (*l).is_some()) }
    }

    /// Replaces its labels, returning the old ones (the caller owns the record, as for
    /// [`G::own_labels`]).
    pub(crate) fn replace_own_labels(
        &self,
        labels: Option<crate::labels::Labels>,
    ) -> Option<crate::labels::Labels> {
        // SAFETY: as in `own_labels`.
        unsafe { self.labels.with_mut(|l| core::mem::replace(&mut *l, labels)) }
    }

    /// Reads the name (caller holds a reference or knows the G is alive).
    pub(crate) fn name(&self) -> Option<std::sync::Arc<str>> {
        // SAFETY: the name is written only at spawn (before the G is published) and cleared at
        // recycle; callers read it while the G is alive.
        unsafe { self.name.with(|n| (*n).clone()) }
    }
}

/// What `unpark`/`cancel` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unparked {
    /// The caller moved the G `PARKED => RUNNABLE` and must queue it.
    Queue,
    /// A token was left (the G was not parked) or was already there.
    Noted,
    /// The G is being run inline by its joiner: forward to the host.
    Forward,
    /// The generation is gone (the green thread ended).
    Stale,
}

/// A pointer to a G record (never a job or a task cell: run-queue entries are `Entry`).
/// Records live as long as the scheduler, so it is always valid to dereference while the
/// scheduler is alive; whether it still denotes the same green thread is
/// decided by the generation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct GRef(NonNull<G>);

// SAFETY: G is Sync (see above) and outlives every GRef (records are freed only when the
// scheduler is dropped, after every worker has stopped).
unsafe impl Send for GRef {}
// SAFETY: as above.
unsafe impl Sync for GRef {}

impl GRef {
    /// A new FREE record, never freed (records are recycled through the registry's lists).
    #[cfg(loom)]
    pub(crate) fn new_record(slot: u32) -> GRef {
        GRef(NonNull::from(Box::leak(Box::new(G::new(slot)))))
    }

    /// A new FREE record in `mem` (a slot of the registry's never-freed record slabs).
    #[cfg(not(loom))]
    pub(crate) fn new_record_in(mem: &'static mut core::mem::MaybeUninit<G>, slot: u32) -> GRef {
        GRef(NonNull::from(mem.write(G::new(slot))))
    }

    pub(crate) fn as_ptr(self) -> *mut G {
        self.0.as_ptr()
    }

    /// # Safety
    /// - `ptr` must point at a live G record of this scheduler (or be null, giving `None`).
    pub(crate) unsafe fn from_ptr(ptr: *mut G) -> Option<GRef> {
        NonNull::new(ptr).map(GRef)
    }
}

impl core::ops::Deref for GRef {
    type Target = G;
    fn deref(&self) -> &G {
        // SAFETY: a GRef is only made from a record (`Registry::alloc`, or `from_ptr`, whose
        // caller vouches for it), and records are never freed while any GRef is alive.
        unsafe { self.0.as_ref() }
    }
}

impl fmt::Debug for GRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "G#{}", self.slot)
    }
}

#[cfg(all(test, loom))]
mod loom_state;

#[cfg(all(test, not(loom), target_pointer_width = "64"))]
mod tests {
    use super::G;

    /// A G record is memory every parked green thread keeps (a million parked threads hold a
    /// million records), so its size is pinned here: a field that grows it fails this test and
    /// has to earn its bytes (or share a word with another field). The spawn's place
    /// (`created_at`, 8 bytes) earns them as Go's `gopc` does: a dump shows where every
    /// green thread was created. The run time and the switch count (`run_ns`, `switches`,
    /// 16 bytes) earn theirs as brpc's `cputime_ns` and `nswitch` do: per green thread CPU
    /// accounting in dumps and from handles (a 32-bit count would wrap within hours on a
    /// busy long-lived green thread, and no field has 4 bytes of padding to spare). The
    /// labels (8 bytes, one shared pointer) earn them as Go's `labels` field does: a dump or a
    /// trace can tell which request a green thread serves.
    #[test]
    fn record_size_is_pinned() {
        assert_eq!(size_of::<super::Work>(), 24, "a green thread's or a stackless task's work");
        assert_eq!(size_of::<Option<crate::labels::Labels>>(), 8, "labels: one pointer");
        assert!(size_of::<G>() <= 240, "G record grew to {} bytes", size_of::<G>());
    }
}
