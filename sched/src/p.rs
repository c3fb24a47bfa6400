//! P: a processor, the resource a worker must hold to run green threads.
//!
//! Each P owns a bounded local run queue (purloin-deque's `Worker`, LIFO for the owner, half
//! stealable in one CAS), a `runnext` slot (a G readied by the running G runs next and inherits
//! its time slice — Go's rule for communicate-and-wait pairs), a timer heap, caches of free G
//! records and stacks, and its counters.
//!
//! # Ownership
//!
//! The fields behind `UnsafeCell` (the deque's owner end, the caches) are touched only by the
//! worker that holds the P. A P changes hands only through its `status` word (the blocking
//! handoff: the monitor's CAS `SYSCALL => HANDOFF` and the new holder's Acquire of it), which
//! orders the old holder's last use before the new holder's first.
//!
//! # Memory ordering
//!
//! - (R1) `runnext` is set by the owner with a Release swap (or, when it is empty, a Release
//!   store: only the owner fills it) and taken by the owner or a thief with an AcqRel swap, so the taker sees the G's record as published by whoever made it
//!   runnable.
//! - (R2) `status`: the holder entering a blocking section stores `SYSCALL` with Release; the
//!   monitor's `SYSCALL => HANDOFF` CAS (AcqRel) and the holder's `SYSCALL => RUNNING` CAS
//!   (AcqRel) race on the same word, so exactly one wins, and whoever holds the P next sees the
//!   previous holder's writes to the owner-only fields.

use std::collections::VecDeque;

use purloin_deque::{Stealer, Worker};

use crate::entry::Entry;
use crate::g::GRef;
use crate::stats::PStats;
use crate::sync::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering, UnsafeCell, lock,
};
use crate::timer_heap::Timers;

/// Local run-queue capacity (Go and tokio use 256; loom models use 4).
#[cfg(not(loom))]
pub(crate) const LOCAL_QUEUE: usize = 256;
#[cfg(loom)]
pub(crate) const LOCAL_QUEUE: usize = 4;

/// Free G records kept per P before spilling to the global list.
pub(crate) const FREE_CACHE: usize = 64;

/// P status values.
pub(crate) const RUNNING: u32 = 0;
/// The holder is in a blocking section (`enter_blocking`); the monitor may retake the P.
pub(crate) const SYSCALL: u32 = 1;
/// The monitor retook the P from a blocked holder and is handing it to another worker.
pub(crate) const HANDOFF: u32 = 2;
/// Removed by `Scheduler::set_workers`: no worker holds it; it holds no work.
pub(crate) const RETIRED: u32 = 3;

/// A processor. The P's sit side by side in `Shared::ps`, each `Padded`: unpadded, where one P
/// ended and the next began would depend on the heap's layout, so a holder's hot writes could
/// share a cache-line pair with what another worker reads and writes on every spawn and steal.
pub(crate) struct P {
    /// Owner end of the local queue (holder only).
    local: UnsafeCell<Worker<Entry>>,
    /// Thief end of the local queue.
    pub(crate) stealer: Stealer<Entry>,
    /// The G to run next (null if none). Owner sets; owner or a last-pass thief takes (R1).
    pub(crate) runnext: AtomicPtr<()>,
    /// RUNNING / SYSCALL / HANDOFF (R2).
    pub(crate) status: AtomicU32,
    /// Bumped on every blocking section entry, so the monitor can tell a long one from a new one.
    pub(crate) syscall_tick: AtomicU64,
    /// Bumped every time a G is switched in (the monitor's "no scheduling point" check).
    pub(crate) schedtick: AtomicU64,
    /// Set by the monitor when the G running here passed the long-run threshold without a
    /// scheduling point; [`preemption_point`](crate::preemption_point) yields and clears it.
    /// Relaxed both ways: a request, not a handshake (a late one costs one more stretch of
    /// the same length; a stale one, one spurious yield).
    pub(crate) preempt: AtomicBool,
    /// A fork's job was queued here with a wake-up hint that woke nobody (`idle`, I4), so the
    /// queue may show work that no other worker is coming for: the next other push announces
    /// itself with F1 even onto a non-empty queue (`ready`'s notify rule). Holder only
    /// (Relaxed: written and read by the holding worker).
    pub(crate) fork_unannounced: AtomicBool,
    /// Deadlines: timed parks and callback timers (fired by anyone: `timer_heap`).
    pub(crate) timers: Timers,
    /// Free G records (holder only).
    pub(crate) free_gs: UnsafeCell<Vec<GRef>>,
    /// Number of live pinned green threads bound to the worker holding this P.
    pub(crate) pinned: AtomicU32,
    /// Runnable pinned G's (they may not be stolen, so they do not go in the local queue).
    pinned_queue: Mutex<VecDeque<GRef>>,
    /// Length of `pinned_queue`, readable without the lock.
    pinned_len: AtomicUsize,
    /// The OS thread holding this P (`os::ThreadHandle` as a word), for the monitor's CPU-time
    /// and blocked-thread checks.
    pub(crate) holder: AtomicU64,
    /// The G this P's worker is running (null on g0), for the monitor's long-runner report.
    pub(crate) running: AtomicPtr<crate::g::G>,
    pub(crate) stats: PStats,
    /// Park durations of the green threads that resumed here (`Builder::park_histogram`).
    pub(crate) park_durations: crate::stats::DurationBuckets,
    /// Sampled scheduling latencies of the green threads switched in here (`stats`,
    /// `Stats::sched_latency`).
    pub(crate) sched_latencies: crate::stats::DurationBuckets,
    /// Green threads spawned / finished by this P's holders (owner-written; see `Shared::live`).
    pub(crate) started: AtomicU64,
    pub(crate) finished: AtomicU64,
}

// SAFETY: the UnsafeCell fields (the deque's owner end, caches) are only touched by the
// worker holding the P; holding passes between threads through `status` (R2). Everything else
// is atomic or locked.
unsafe impl Sync for P {}
// SAFETY: as above.
unsafe impl Send for P {}

impl P {
    pub(crate) fn new(_index: usize) -> P {
        let local = Worker::bounded(LOCAL_QUEUE);
        let stealer = local.stealer();
        P {
            local: UnsafeCell::new(local),
            stealer,
            runnext: AtomicPtr::new(core::ptr::null_mut()),
            status: AtomicU32::new(RUNNING),
            syscall_tick: AtomicU64::new(0),
            schedtick: AtomicU64::new(0),
            preempt: AtomicBool::new(false),
            fork_unannounced: AtomicBool::new(false),
            timers: Timers::new(),
            free_gs: UnsafeCell::new(Vec::new()),
            pinned: AtomicU32::new(0),
            pinned_queue: Mutex::new(VecDeque::new()),
            pinned_len: AtomicUsize::new(0),
            running: AtomicPtr::new(core::ptr::null_mut()),
            holder: AtomicU64::new(0),
            stats: PStats::default(),
            park_durations: crate::stats::DurationBuckets::new(),
            sched_latencies: crate::stats::DurationBuckets::new(),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
        }
    }

    /// The owner end of the local queue.
    ///
    /// # Safety
    /// - The caller must hold this P (be the worker it is bound to, with `status` won).
    pub(crate) unsafe fn local(&self) -> &Worker<Entry> {
        // SAFETY: only the holder calls this (caller's obligation), so no other thread uses
        // the owner end concurrently; the reference does not outlive the holding.
        self.local.with(|w| unsafe { &*w })
    }

    /// Takes the runnext G (owner or thief): AcqRel swap (R1).
    pub(crate) fn take_runnext(&self) -> Option<Entry> {
        if self.runnext.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let e = self.runnext.swap(core::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: runnext only ever holds entries' words, and the swap took this one out.
        unsafe { Entry::from_ptr(e) }
    }

    /// Puts `g` in runnext (holder only); returns the G it displaced, which the caller queues.
    pub(crate) fn put_runnext(&self, e: Entry) -> Option<Entry> {
        // Release publishes the entry (and what it points at) to whoever takes it (R1).
        // SeqCst: the swap is also the StoreLoad barrier of a submitter's wake-up check
        // (idle.rs, I3).
        let old = self.runnext.swap(e.as_ptr(), Ordering::SeqCst);
        // SAFETY: runnext only ever holds entries' words, and the swap took this one out.
        unsafe { Entry::from_ptr(old) }
    }

    /// Puts `g` in an empty runnext (holder only; the caller saw it empty). A plain Release
    /// store (R1): only the holder fills runnext and thieves only empty it, so it is still
    /// empty here.
    pub(crate) fn fill_empty_runnext(&self, e: Entry) {
        debug_assert!(self.runnext.load(Ordering::Relaxed).is_null());
        self.runnext.store(e.as_ptr(), Ordering::Release);
    }

    /// The holder enters a blocking section: `RUNNING => SYSCALL` (R2, Release: ends the
    /// holder's use of the owner-only parts until it gets the P back).
    pub(crate) fn enter_syscall(&self) {
        self.syscall_tick.store(self.syscall_tick.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.status.store(SYSCALL, Ordering::Release);
    }

    /// The holder leaves its blocking section: `SYSCALL => RUNNING` if the monitor did not
    /// retake the P meanwhile (R2: the CAS races `try_retake` on the same word).
    pub(crate) fn try_exit_syscall(&self) -> bool {
        self.status.compare_exchange(SYSCALL, RUNNING, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// The monitor retakes the P of a blocked holder: `SYSCALL => HANDOFF` (R2: Acquire sees
    /// the old holder's last writes, which the next holder inherits through the handoff).
    pub(crate) fn try_retake(&self) -> bool {
        self.status.compare_exchange(SYSCALL, HANDOFF, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// The new holder takes a handed-off P: `HANDOFF => RUNNING`.
    pub(crate) fn take_handed(&self) {
        debug_assert_eq!(self.status.load(Ordering::Relaxed), HANDOFF);
        self.status.store(RUNNING, Ordering::Release);
    }

    /// Whether the P visibly has runnable work (racy snapshot: for the idle re-check and the
    /// monitor).
    pub(crate) fn has_work(&self) -> bool {
        !self.runnext.load(Ordering::Relaxed).is_null() || !self.stealer.is_empty()
    }

    /// Queue length snapshot (stats, schedtrace).
    pub(crate) fn queue_len(&self) -> usize {
        self.stealer.len() + usize::from(!self.runnext.load(Ordering::Relaxed).is_null())
    }
}

impl P {
    /// Queues a runnable pinned G (any thread). The caller wakes the holder.
    pub(crate) fn push_pinned(&self, g: GRef) {
        let mut q = lock(&self.pinned_queue);
        q.push_back(g);
        // Under the lock; the Relaxed counter is only a hint for `has_pinned` (the idle
        // re-check reads it after F2, and the push happened under a lock the holder takes).
        self.pinned_len.store(q.len(), Ordering::Relaxed);
    }

    /// Takes a runnable pinned G (holder only).
    pub(crate) fn pop_pinned(&self) -> Option<GRef> {
        if self.pinned_len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut q = lock(&self.pinned_queue);
        let g = q.pop_front();
        self.pinned_len.store(q.len(), Ordering::Relaxed);
        g
    }

    /// Whether pinned work seems queued (a Relaxed hint, no lock: the pusher wakes the holder,
    /// and `pop_pinned` looks again on the next scheduling round).
    pub(crate) fn may_have_pinned(&self) -> bool {
        self.pinned_len.load(Ordering::Relaxed) != 0
    }

    /// Whether pinned work is queued (a lock-taking check, for the idle re-check).
    pub(crate) fn has_pinned(&self) -> bool {
        !lock(&self.pinned_queue).is_empty()
    }
}

/// Loom models of the P's own protocols: runnext taken by the owner vs. a last-pass thief
/// (c), and the blocking handoff's retake vs. the holder's return (d).
#[cfg(all(test, loom))]
mod loom_p {
    use super::*;
    use crate::registry::registry;
    use crate::sync::{Arc, thread};

    /// (c) The owner puts a G in runnext and takes it back while a thief steals it on its last
    /// pass: exactly one gets it, and the taker, on its own thread, sees the record as
    /// published by `put_runnext` (R1; loom checks the cell). Mutation checks:
    /// `put_runnext`'s swap Relaxed, or `take_runnext`'s without Acquire, fails this model
    /// (a causality violation).
    #[test]
    fn runnext_owner_vs_thief() {
        /// The taker's look at the record it took: the cell written before `put_runnext`.
        fn took(e: Option<Entry>) -> bool {
            let Some(g) = e.and_then(Entry::record) else { return false };
            // SAFETY: the taker owns the record now; the owner's write happens-before (R1).
            assert_eq!(unsafe { g.locals.with(|l| *l) }, 1 as *mut ());
            true
        }
        loom::model(|| {
            let p = Arc::new(P::new(0));
            let g = registry().alloc();
            let p2 = p.clone();
            let thief = thread::spawn(move || took(p2.take_runnext()));
            // SAFETY: a fresh record, not yet published.
            unsafe { g.locals.with_mut(|l| *l = 1 as *mut ()) };
            assert!(p.put_runnext(g.into()).is_none());
            let mine = took(p.take_runnext());
            let stolen = thief.join().unwrap();
            assert!(mine != stolen, "taken exactly once");
        });
    }

    /// (d) The monitor retakes a P in a blocking section while its holder returns: exactly one
    /// of them wins, and whoever holds the P next sees the old holder's writes to the owner-only
    /// parts (the free-record cache here; loom flags a racing access). Mutation check: making
    /// `enter_syscall` store with Relaxed fails this model (causality violation on the cell).
    #[test]
    fn retake_vs_exit_syscall() {
        loom::model(|| {
            let p = Arc::new(P::new(0));
            let g = registry().alloc();
            let p2 = p.clone();
            // The monitor runs concurrently with the holder's last use of the P.
            let monitor = thread::spawn(move || {
                if p2.try_retake() {
                    // The new holder (handed the P by the monitor) uses the cache.
                    p2.take_handed();
                    // SAFETY: the retake won: the P is ours now.
                    let n = p2.free_gs.with_mut(|v| unsafe { (*v).pop().is_some() as usize });
                    return Some(n);
                }
                None
            });
            // The holder uses an owner-only part, then enters a blocking section, then returns.
            // SAFETY: the holder owns the cache until `enter_syscall`.
            p.free_gs.with_mut(|v| unsafe { (*v).push(g) });
            p.enter_syscall();
            let back = p.try_exit_syscall();
            let retaken = monitor.join().unwrap();
            assert!(!(back && retaken.is_some()), "holder and monitor both won");
            if back {
                // SAFETY: the holder got its P back.
                let n = p.free_gs.with_mut(|v| unsafe { (*v).len() });
                assert_eq!(n, 1);
            } else {
                assert_eq!(retaken, Some(1));
            }
        });
    }

    /// (d) continued: the monitor retakes the P of a blocked holder and hands it to a new
    /// holder, which uses the owner-only parts and enters a blocking section of its own; the
    /// old holder then returns. `SYSCALL` is back, so the old holder's exit CAS may win the P
    /// (nobody uses a P in `SYSCALL`; Go's `exitsyscallfast` does the same), and it must then
    /// see the new holder's writes: the exit's Acquire pairs with the new holder's Release
    /// store of `SYSCALL` (R2). Mutation check: `try_exit_syscall`'s CAS without Acquire fails
    /// this model (causality violation on the cache).
    #[test]
    fn exit_syscall_after_a_handoff_and_a_second_blocking_section() {
        loom::model(|| {
            let p = Arc::new(P::new(0));
            let g = registry().alloc();
            // The old holder used the cache, then entered a blocking section.
            // SAFETY: the holder owns the cache until `enter_syscall`.
            p.free_gs.with_mut(|v| unsafe { (*v).push(g) });
            p.enter_syscall();
            let p2 = p.clone();
            // The old holder returns from its blocking section.
            let old_holder = thread::spawn(move || {
                if !p2.try_exit_syscall() {
                    return None;
                }
                // SAFETY: the exit won: the P is ours.
                Some(p2.free_gs.with_mut(|v| unsafe { (*v).len() }))
            });
            let retaken = p.try_retake();
            if retaken {
                // The monitor hands the P over; the new holder uses the cache, then blocks.
                p.take_handed();
                // SAFETY: the new holder owns the cache until `enter_syscall`.
                p.free_gs.with_mut(|v| unsafe { (*v).pop() });
                p.enter_syscall();
            }
            if let Some(n) = old_holder.join().unwrap() {
                assert_eq!(n, usize::from(!retaken), "the old holder sees the cache as left");
            }
        });
    }
}
