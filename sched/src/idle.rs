//! Who is searching, who is parked, and whom to wake (Go's "delicate dance").
//!
//! Workers are *running* (executing green threads), *searching* (spinning: looking for work to
//! steal) or *parked* (asleep on their P's parking lot). One word counts searching and unparked
//! workers; a short list under a lock names the parked ones, so a waker wakes exactly one
//! worker and tells it, by removing it from the list, that it was woken *searching* (the waker
//! counted it as such, so other submitters see a searcher and do not wake more: no wake-up
//! storms).
//!
//! The two sides of the dance:
//!
//! ```text
//!   submitter (spawn, unpark, timer)       worker going idle
//!   ─────────────────────────────────      ───────────────────────────────────────
//!   make the G visible (queue push)        snapshot its lot's state
//!   fence(SeqCst)                 (F1)     unparked -= 1, searching -= 1 if it was
//!   if searching == 0 and                  searching; join the sleepers list
//!      unparked < workers:                 fence(SeqCst)                        (F2)
//!        pop a sleeper, count it           re-check every queue; if work: undo, go
//!        unparked and searching,           wait on the lot with the snapshot
//!        signal its lot
//! ```
//!
//! # Memory ordering
//!
//! The guarantee (work conservation): a G made visible before F1 is either seen by the
//! re-check of a worker that executes F2 after F1, or the submitter sees that worker's
//! decrement and wakes a sleeper. F1 and F2 are SeqCst fences, so one precedes the other in
//! the single total order: if F2 comes first, the submitter's load after F1 sees the decrement
//! made before F2; if F1 comes first, the worker's re-check after F2 sees the push made before
//! F1 (store-buffering / Dekker). A woken worker cannot miss the signal: it took its lot
//! snapshot before joining the sleepers list, and a waker can only pick it from the list after
//! that, so the lot's word has moved by the time the worker waits on the snapshot.
//!
//! - (I1) The sleepers list and the counters change together under `sleepers`' lock; the lock
//!   orders a worker's registration before the waker that pops it.
//! - (I2) F1/F2 as above.
//! - (I3) A submitter whose push is a SeqCst read-modify-write (the swap into `runnext`) and
//!   whose load of the counters is SeqCst needs no F1 (on x86 the swap is already the only
//!   locked instruction; an `mfence` costs as much again, ~8 ns here). C++20's rules for SeqCst
//!   ([atomics.order] p4, adopted by Rust) forbid the store-buffering outcome: if the
//!   submitter's SeqCst load missed the worker's counter update, it precedes F2 in the single
//!   order S; if the worker's re-check after F2 missed the push, F2 precedes the push in S; the
//!   push precedes the load (program order) — a cycle. loom treats SeqCst accesses as AcqRel,
//!   so under loom this path keeps the fence (without it, loom reports a deadlock in
//!   `runnext_spawn_vs_other_worker_going_idle` — the outcome C++20 forbids but loom's weaker
//!   model allows; I3 rests on the argument above, not on that model).
//!
//! - (I4) A push that its pusher runs itself if nobody else does needs no F1: a fork's job
//!   (`join`), whose joiner takes it back from its own queue, or parks waiting for it, and then
//!   its worker's loop reaches it. Missing a worker that is going idle then costs parallelism,
//!   never the job: the wake-up is a hint ([`Idle::worker_to_wake_hint`], rayon's
//!   `new_internal_jobs` makes the same bet). Every other submission keeps F1: a spawner may
//!   spin on its child, which then has to run elsewhere. Modelled in `loom_idle`
//!   (`fork_vs_other_worker_going_idle`).
//!
//! At most half of the workers search at once (`2 * searching < workers`, Go's and tokio's
//! rule); the last searcher to find work wakes another so the ramp-up continues.

use crate::sync::{AtomicU32, Mutex, Ordering, fence, lock};

/// Packed counters: low 16 bits = searching workers, high 16 bits = unparked workers.
const SEARCH_ONE: u32 = 1;
const UNPARK_ONE: u32 = 1 << 16;
const SEARCH_MASK: u32 = UNPARK_ONE - 1;

fn searching(state: u32) -> u32 {
    state & SEARCH_MASK
}
fn unparked(state: u32) -> u32 {
    state >> 16
}

struct Sleepers {
    /// Parked workers (P indices), most recently parked last.
    list: Vec<usize>,
    /// Per P: the last waker that removed it from `list` counted it as searching.
    granted_search: Vec<bool>,
}

pub(crate) struct Idle {
    /// `unparked << 16 | searching`.
    state: AtomicU32,
    /// Parked workers, and how each one that was woken was counted.
    sleepers: Mutex<Sleepers>,
    /// Active processors (changes with `Scheduler::set_workers`).
    workers: AtomicU32,
}

impl Idle {
    pub(crate) fn new(workers: usize, max_workers: usize) -> Idle {
        assert!(workers > 0 && max_workers < SEARCH_MASK as usize, "worker count out of range");
        Idle {
            state: AtomicU32::new(workers as u32 * UNPARK_ONE),
            sleepers: Mutex::new(Sleepers {
                list: Vec::with_capacity(workers),
                granted_search: vec![false; max_workers],
            }),
            workers: AtomicU32::new(workers as u32),
        }
    }

    /// Submit side: after making work visible, returns the P index of a parked worker that
    /// the caller must wake (by signalling its lot), or `None` if no wake-up is needed.
    pub(crate) fn worker_to_wake(&self) -> Option<usize> {
        // F1: orders the caller's push before the loads below (pairs with F2).
        fence(Ordering::SeqCst);
        self.sleeper_to_wake(self.state.load(Ordering::Relaxed))
    }

    /// [`Idle::worker_to_wake`] for a submitter whose push was itself a SeqCst read-modify-write
    /// (the swap into `runnext`): F1 is then implied (I3) and costs nothing extra.
    pub(crate) fn worker_to_wake_after_sc_push(&self) -> Option<usize> {
        // I3. loom models only SeqCst *fences* as sequentially consistent (SeqCst accesses
        // count as AcqRel there), so its models keep the explicit F1 on this path.
        #[cfg(loom)]
        fence(Ordering::SeqCst);
        self.sleeper_to_wake(self.state.load(Ordering::SeqCst))
    }

    /// [`Idle::worker_to_wake`] without F1, for a push its pusher will run itself if nobody
    /// else does (I4): it may miss a worker that is going idle at this moment.
    pub(crate) fn worker_to_wake_hint(&self) -> Option<usize> {
        self.sleeper_to_wake(self.state.load(Ordering::Relaxed))
    }

    fn sleeper_to_wake(&self, state: u32) -> Option<usize> {
        if !self.should_wake(state) {
            return None;
        }
        let mut sleepers = lock(&self.sleepers);
        // Re-check under the lock: another submitter may have woken someone already.
        if !self.should_wake(self.state.load(Ordering::Relaxed)) {
            return None;
        }
        let p = sleepers.list.pop()?;
        sleepers.granted_search[p] = true;
        // The woken worker starts searching; count it now so other submitters stand back.
        self.state.fetch_add(SEARCH_ONE | UNPARK_ONE, Ordering::SeqCst);
        Some(p)
    }

    /// The submit side for a batch of `k` entries queued without a wake-up (a flush of
    /// no-signal spawns, brpc's `bthread_flush`): after F1, takes up to `k` parked workers off
    /// the sleepers list, each counted unparked and searching (as [`Idle::worker_to_wake`]
    /// counts the one it picks), and calls `wake` with each P index. Unlike a single
    /// submission it wakes even while others search: the batch has work for several workers
    /// at once (Go's `injectglist` starts one worker per queued G up to the idle P's). Returns
    /// how many it took.
    pub(crate) fn wake_for_batch(&self, k: usize, mut wake: impl FnMut(usize)) -> usize {
        // F1: orders the caller's pushes before the loads below (pairs with F2).
        fence(Ordering::SeqCst);
        if k == 0 || unparked(self.state.load(Ordering::Relaxed)) >= self.workers() {
            return 0;
        }
        // All taken under one lock, woken after it: a woken worker that finds work wakes the
        // next sleeper itself (`M::found_work`), which must not take one of ours first.
        let taken: Vec<usize> = {
            let mut sleepers = lock(&self.sleepers);
            let n = k.min(sleepers.list.len());
            let at = sleepers.list.len() - n;
            let taken: Vec<usize> = sleepers.list.drain(at..).collect();
            for &p in &taken {
                sleepers.granted_search[p] = true;
            }
            self.state.fetch_add(n as u32 * (SEARCH_ONE | UNPARK_ONE), Ordering::SeqCst);
            taken
        };
        for &p in &taken {
            wake(p);
        }
        taken.len()
    }

    fn workers(&self) -> u32 {
        self.workers.load(Ordering::Relaxed)
    }

    fn should_wake(&self, state: u32) -> bool {
        searching(state) == 0 && unparked(state) < self.workers.load(Ordering::Relaxed)
    }

    /// Wakes a specific parked worker (a pinned G became runnable on its P, or shutdown).
    /// Returns true if it was parked (and is now counted unparked, not searching).
    pub(crate) fn take_sleeper(&self, p: usize) -> bool {
        let mut sleepers = lock(&self.sleepers);
        if let Some(i) = sleepers.list.iter().position(|&s| s == p) {
            sleepers.list.swap_remove(i);
            sleepers.granted_search[p] = false;
            self.state.fetch_add(UNPARK_ONE, Ordering::SeqCst);
            true
        } else {
            false
        }
    }

    /// Takes P `p`'s worker off the sleepers list if it is parked (then counted unparked, not
    /// searching, as [`Idle::take_sleeper`] does) and runs `removed` before the lock is
    /// released; returns whether it did. The monitor retires a spare this way (S2 in
    /// `blocking`): `removed` shrinks the active processors, and the worker, which always
    /// takes this lock ([`Idle::unpark_self`]) after its wait returns and before it looks for
    /// work, sees the shrink then. A worker that left the list first (it woke for work) is not
    /// retired.
    pub(crate) fn take_sleeper_then(&self, p: usize, removed: impl FnOnce()) -> bool {
        let mut sleepers = lock(&self.sleepers);
        let Some(i) = sleepers.list.iter().position(|&s| s == p) else { return false };
        sleepers.list.swap_remove(i);
        sleepers.granted_search[p] = false;
        self.state.fetch_add(UNPARK_ONE, Ordering::SeqCst);
        removed();
        true
    }

    /// A worker asks to start searching. Refused when half of the workers already search.
    pub(crate) fn try_start_searching(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if 2 * searching(state) >= self.workers.load(Ordering::Relaxed) {
                return false;
            }
            match self.state.compare_exchange_weak(
                state,
                state + SEARCH_ONE,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => state = actual,
            }
        }
    }

    /// A worker whose idle re-check found work searches for it even past the "at most half"
    /// limit (Go does the same after `checkRunqsNoP` finds work): the work is there now.
    pub(crate) fn start_searching_unconditionally(&self) {
        self.state.fetch_add(SEARCH_ONE, Ordering::SeqCst);
    }

    /// A searching worker found work. Returns true if it was the last searcher: the caller
    /// must then wake another worker if there may be more work (Go's `resetspinning`).
    pub(crate) fn stop_searching(&self) -> bool {
        let prev = self.state.fetch_sub(SEARCH_ONE, Ordering::SeqCst);
        debug_assert!(searching(prev) > 0);
        searching(prev) == 1
    }

    /// A worker goes idle: it leaves the counts (and the searchers, if it was one) and joins
    /// the sleepers. The caller then executes F2 through [`Idle::fence_before_recheck`],
    /// re-checks every queue and either parks or calls [`Idle::unpark_self`]. Returns true if
    /// it was the last unparked worker (every worker is parked now).
    pub(crate) fn transition_to_parked(&self, p: usize, was_searching: bool) -> bool {
        let mut sleepers = lock(&self.sleepers);
        let dec = UNPARK_ONE + if was_searching { SEARCH_ONE } else { 0 };
        let prev = self.state.fetch_sub(dec, Ordering::SeqCst);
        sleepers.granted_search[p] = false;
        sleepers.list.push(p);
        unparked(prev) == 1
    }

    /// F2 (pairs with F1 in `worker_to_wake`).
    pub(crate) fn fence_before_recheck(&self) {
        fence(Ordering::SeqCst);
    }

    /// After waking (or after a re-check found work): leaves the sleepers list. Returns true if
    /// a waker had already removed this worker and counted it as searching; false if the worker
    /// removed itself (spurious return, timer, or re-check), in which case it is counted as
    /// unparked and not searching.
    pub(crate) fn unpark_self(&self, p: usize) -> bool {
        let mut sleepers = lock(&self.sleepers);
        if let Some(i) = sleepers.list.iter().position(|&s| s == p) {
            sleepers.list.swap_remove(i);
            self.state.fetch_add(UNPARK_ONE, Ordering::SeqCst);
            false
        } else {
            core::mem::take(&mut sleepers.granted_search[p])
        }
    }

    /// Processors were added (`Scheduler::set_workers`): their new workers start unparked.
    pub(crate) fn add_workers(&self, k: u32) {
        let _sleepers = lock(&self.sleepers);
        self.workers.fetch_add(k, Ordering::SeqCst);
        self.state.fetch_add(k * UNPARK_ONE, Ordering::SeqCst);
    }

    /// The (unparked) worker of a removed processor leaves the counts for good.
    pub(crate) fn retire(&self, p: usize, was_searching: bool) {
        let mut sleepers = lock(&self.sleepers);
        sleepers.list.retain(|&s| s != p);
        sleepers.granted_search[p] = false;
        let dec = UNPARK_ONE + if was_searching { SEARCH_ONE } else { 0 };
        self.state.fetch_sub(dec, Ordering::SeqCst);
        self.workers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Snapshot for stats: (searching, parked).
    pub(crate) fn counts(&self) -> (u32, u32) {
        let s = self.state.load(Ordering::Relaxed);
        (searching(s), self.workers.load(Ordering::Relaxed).saturating_sub(unparked(s)))
    }
}
