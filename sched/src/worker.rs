//! M: the worker threads, the scheduling loop, and switching green threads in and out.
//!
//! Each worker (an OS thread, Go's M) holds one P and runs a loop on its own stack (Go's g0):
//! find a runnable G, switch to it, and when the G switches back, finish what it asked for —
//! re-queue it (yield), mark it parked (park), or release its stack (exit). That finishing work
//! runs on g0 *after* the switch, so a G becomes visible to other workers only once its
//! registers are saved (protocol 4): Go's `park_m` on g0, brpc's "remained" callback.
//!
//! # Finding work (Go's order)
//!
//! ```text
//!  every 61st tick: due timers, then one G from the global queue, else the oldest local G
//!                   (fairness: G's that never leave the local queue cannot starve these)
//!  pinned queue → runnext (at most 3 in a row) → local pop (LIFO) → runnext
//!  → global batch (min(16, len/P + 1)) → due timers → poller (non-blocking)
//!  → steal half (random start, coprime stride, 4 passes; on the last, a victim's runnext
//!    after 3 µs unless the victim scheduled meanwhile)
//!  → spin (< 4 tight, 4–15 yield the thread, ≥ 16 park with deadline = next timer)
//! ```
//!
//! The monitor polls the poller when busy workers have not for 10 ms (Go's sysmon). A yield
//! with nothing else runnable locally and no fairness tick due resumes the G at once. A G
//! spawned from a green thread goes to runnext (Go's `newproc`), the displaced G to the local
//! queue; a lazily spawned task fills runnext only if it is empty, else it goes on top of the
//! local queue (no read-modify-write: `push_spawned_and_notify`).
//!
//! # Thread-locals and migration
//!
//! A G may resume on another worker, so no code here keeps a thread-local *address* across a
//! switch: the worker is found again after every resume from the `data` word the resumer
//! passes (a pointer to its `M`), and [`current_m`] is never inlined (llvm#98479).

use core::cell::Cell;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use purloin_context::{Context, Transfer};
use purloin_deque::{Injector, Steal};
use purloin_parking::ParkingLots;
use purloin_stack::StackSize;

use crate::GreenThread;
use crate::g::{GRef, NOT_PINNED, Unparked, registry};
use crate::idle::Idle;
use crate::p::{self, P};
use crate::stats::{SharedStats, add, bump};
use crate::sync::{
    Arc, AtomicBool, AtomicU32, AtomicUsize, Condvar, Mutex, Ordering, STAT, fence, lock, thread,
};

/// What a G asks g0 to do when it switches out (the `data` of the resume into g0).
pub(crate) const ACT_YIELD: usize = 1;
pub(crate) const ACT_PARK: usize = 2;
pub(crate) const ACT_EXIT: usize = 3;
/// Leave the P behind: the G lost its P in a blocking section; queue it globally.
pub(crate) const ACT_REQUEUE_GLOBAL: usize = 4;

/// Search rounds before a worker parks: tight spins below the first bound, OS-thread yields
/// below the second (seed 003's adaptive spinning). Under loom a worker parks after one round:
/// spinning adds nothing to the protocol and multiplies the interleavings.
#[cfg(not(loom))]
const SPIN_TIGHT: u32 = 4;
#[cfg(not(loom))]
const SPIN_YIELD: u32 = 16;
#[cfg(loom)]
const SPIN_TIGHT: u32 = 0;
#[cfg(loom)]
const SPIN_YIELD: u32 = 1;
/// Passes over the victims per steal attempt (Go: 4; the last one may take `runnext`).
#[cfg(not(loom))]
const STEAL_PASSES: usize = 4;
#[cfg(loom)]
const STEAL_PASSES: usize = 2;

/// "No P" in `M::p`.
pub(crate) const NO_P: usize = usize::MAX;

/// Scheduler lifecycle (`Shared::phase`).
pub(crate) const PHASE_RUNNING: u32 = 0;
/// Shutdown requested: no new work from outside; running and runnable G's finish.
pub(crate) const PHASE_DRAINING: u32 = 1;
/// Workers exit once they see this.
pub(crate) const PHASE_STOPPED: u32 = 2;

/// Scheduler configuration (built by `Builder`).
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) workers: usize,
    pub(crate) max_workers: usize,
    pub(crate) stack_size: StackSize,
    pub(crate) thread_name: String,
    pub(crate) global_queue_interval: u32,
    pub(crate) max_runnext_streak: u32,
    pub(crate) monitor: bool,
    pub(crate) blocking_threshold: Duration,
    pub(crate) long_run_threshold: Duration,
    pub(crate) max_threads: usize,
}

/// Everything the workers of one scheduler share.
pub(crate) struct Shared {
    pub(crate) ps: Box<[P]>,
    pub(crate) injector: Injector<GRef>,
    pub(crate) idle: Idle,
    pub(crate) lots: ParkingLots,
    /// Green threads started and finished by threads that held no P (outside submissions,
    /// blocking sections, shutdown); the per-P counters hold the rest (see `live`).
    started_outside: crate::sync::AtomicU64,
    finished_outside: crate::sync::AtomicU64,
    pub(crate) phase: AtomicU32,
    /// Signalled when `live` drops to zero during shutdown.
    pub(crate) all_done: (Mutex<()>, Condvar),
    pub(crate) config: Config,
    pub(crate) stats: SharedStats,
    pub(crate) epoch: Instant,
    /// Active P's: `ps[..nprocs]` (changed by `Scheduler::set_workers`; the rest are RETIRED).
    pub(crate) nprocs: AtomicUsize,
    /// Serialises `set_workers`; the condvar is signalled when a removed P retires.
    pub(crate) resize: (Mutex<()>, Condvar),
    pub(crate) threads: Mutex<Vec<thread::JoinHandle<()>>>,
    /// Workers without a P (after a blocking section lost theirs), waiting for one.
    pub(crate) spares: Mutex<Vec<Arc<crate::blocking::Spare>>>,
    pub(crate) threads_alive: AtomicUsize,
    pub(crate) monitor_stop: AtomicBool,
    pub(crate) poller: crate::poll::PollerSlot,
    /// Data the layer above attaches to this scheduler (the runtime's per-runtime state).
    pub(crate) user_data: std::sync::OnceLock<std::sync::Arc<dyn core::any::Any + Send + Sync>>,
    /// The monitor's wake-up handle (set once, when the monitor starts).
    pub(crate) monitor: std::sync::OnceLock<crate::blocking::MonitorHandle>,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Shared {
        let n = config.workers;
        let max = config.max_workers.max(n);
        let ps: Box<[P]> = (0..max).map(P::new).collect();
        for p in &ps[n..] {
            p.status.store(p::RETIRED, Ordering::Relaxed);
        }
        Shared {
            ps,
            injector: Injector::new(),
            idle: Idle::new(n, max),
            lots: ParkingLots::new(max),
            started_outside: crate::sync::AtomicU64::new(0),
            finished_outside: crate::sync::AtomicU64::new(0),
            phase: AtomicU32::new(PHASE_RUNNING),
            all_done: (Mutex::new(()), Condvar::new()),
            config,
            stats: SharedStats::default(),
            epoch: Instant::now(),
            nprocs: AtomicUsize::new(n),
            resize: (Mutex::new(()), Condvar::new()),
            threads: Mutex::new(Vec::new()),
            spares: Mutex::new(Vec::new()),
            threads_alive: AtomicUsize::new(0),
            monitor_stop: AtomicBool::new(false),
            poller: crate::poll::PollerSlot::default(),
            monitor: std::sync::OnceLock::new(),
            user_data: std::sync::OnceLock::new(),
        }
    }

    /// The active processors.
    pub(crate) fn active(&self) -> &[P] {
        &self.ps[..self.nprocs.load(Ordering::Acquire)]
    }

    pub(crate) fn nanos_since_epoch(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos().min(u64::MAX as u128 - 1) as u64
    }

    /// Submit side of the idle protocol: after work became visible, wake a parked worker if
    /// nobody is searching (see `idle`).
    pub(crate) fn notify_work(&self) {
        if !self.try_wake_one() {
            self.stats.wakes_skipped.fetch_add(1, STAT);
        }
    }

    /// [`Shared::notify_work`] from the holder of `p`: a skipped wake-up is counted in the
    /// P's own counter (a shared counter's read-modify-write on every spawn would bounce
    /// its cache line between the workers).
    pub(crate) fn notify_work_from(&self, p: &P) {
        if !self.try_wake_one() {
            bump(&p.stats.wakes_skipped);
        }
    }

    /// [`Shared::notify_work_from`] after a push into `runnext` (a SeqCst swap: no F1 needed,
    /// see `idle`, I3).
    fn notify_work_after_runnext_push(&self, p: &P) {
        match self.idle.worker_to_wake_after_sc_push() {
            Some(to_wake) => self.wake_sleeper(to_wake),
            None => bump(&p.stats.wakes_skipped),
        }
    }

    /// The body of the notify functions. Returns whether a worker was woken.
    fn try_wake_one(&self) -> bool {
        let Some(p) = self.idle.worker_to_wake() else { return false };
        self.wake_sleeper(p);
        true
    }

    /// Signals the parked worker of P `p`, which `Idle` took off its sleepers list.
    fn wake_sleeper(&self, p: usize) {
        self.lots.lot(p).signal(1);
        self.poller.wake_if_blocked(p);
        self.stats.wakes_sent.fetch_add(1, STAT);
    }

    /// Wakes the worker holding P `p` specifically (pinned work, shutdown).
    pub(crate) fn wake_worker(&self, p: usize) {
        if self.idle.take_sleeper(p) {
            self.lots.lot(p).signal(1);
            self.poller.wake_if_blocked(p);
            self.stats.wakes_sent.fetch_add(1, STAT);
        }
    }

    /// Wakes every parked worker.
    pub(crate) fn wake_all(&self) {
        for p in 0..self.active().len() {
            self.wake_worker(p);
        }
    }

    /// Queues a runnable G from outside any worker of this scheduler.
    pub(crate) fn push_global(&self, g: GRef) {
        self.injector.push(g);
        self.notify_work();
    }

    /// Queues a pinned G on its P and wakes that P's worker.
    pub(crate) fn push_pinned(&self, p: usize, g: GRef) {
        self.ps[p].push_pinned(g);
        self.wake_worker(p);
    }

    /// Whether any queue visibly holds work (the idle re-check).
    pub(crate) fn any_work(&self, my_p: usize) -> bool {
        // The local queues first: the injector's check pins crossbeam-epoch, which issues a
        // SeqCst fence of its own; checked first, it would hide a missing F2 from the models.
        self.active().iter().any(|p| p.has_work())
            || (my_p != NO_P && self.ps[my_p].has_pinned())
            || !self.injector.is_empty()
    }

    /// A green thread of this scheduler was spawned (counted in `live`). `p` is the P the
    /// caller holds, if any: its owner-written counter avoids a contended read-modify-write.
    pub(crate) fn note_started(&self, p: Option<&P>) {
        match p {
            Some(p) => {
                let n = p.started.load(Ordering::Relaxed);
                // Release: a reader that sees the matching `finished` sees this too (L1).
                p.started.store(n + 1, Ordering::Release);
            }
            None => {
                self.started_outside.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// A green thread of this scheduler finished. During shutdown this wakes the thread waiting
    /// for the count to reach zero.
    ///
    /// # Memory ordering
    ///
    /// (L1) `live` reads every `finished` counter (Acquire) before every `started` one: a
    /// finish it sees happened after its spawn, so the spawn is seen too, and the difference
    /// never goes negative. (L2) The shutdown waiter stores `phase` then F5, then reads `live`
    /// under `all_done`'s lock; a finisher stores its counter, then a SeqCst fence, then reads
    /// `phase`: one of them sees the other (store buffering with SeqCst fences), so a finish
    /// that brings `live` to zero during shutdown always notifies, or the waiter sees zero
    /// before it sleeps. The fence is F6 for a finish off a P; a worker holding a P does not
    /// fence here (an `mfence` per green thread, ~8 ns): the fence is F2 of its next idle
    /// transition (`M::park`), which it reaches before sleeping — after the last finish there
    /// is nothing left to run — and after which it reads `phase` and notifies
    /// ([`Shared::notify_if_draining`]). (The waiter also re-checks every 10 ms.)
    pub(crate) fn note_finished(&self, p: Option<&P>) {
        self.note_finished_under_live_host(p);
        if p.is_none() {
            // F6 (pairs with F5 in `fence_before_live_check`).
            fence(Ordering::SeqCst);
            self.notify_if_draining();
        }
    }

    /// During shutdown, wakes the thread waiting for `live` to reach zero. Called after a
    /// SeqCst fence that follows the caller's finish (L2).
    pub(crate) fn notify_if_draining(&self) {
        if self.phase.load(Ordering::Relaxed) != PHASE_RUNNING {
            let _guard = lock(&self.all_done.0);
            self.all_done.1.notify_all();
        }
    }

    /// Like [`note_finished`](Self::note_finished), for a green thread its joiner ran inline:
    /// the joiner is itself a live green thread of this scheduler (or a fork job whose joiner
    /// is), so this finish cannot bring `live` to zero and nobody needs waking. The joiner's
    /// own finish, later in the same program order, takes care of L2.
    pub(crate) fn note_finished_under_live_host(&self, p: Option<&P>) {
        match p {
            Some(p) => {
                let n = p.finished.load(Ordering::Relaxed);
                // Release: L1.
                p.finished.store(n + 1, Ordering::Release);
            }
            None => {
                self.finished_outside.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    /// F5: the shutdown waiter's fence between storing the phase and reading `live` (L2).
    pub(crate) fn fence_before_live_check(&self) {
        fence(Ordering::SeqCst);
    }

    /// Green threads spawned and not yet finished (a snapshot; never negative, see L1).
    pub(crate) fn live(&self) -> usize {
        let mut finished = self.finished_outside.load(Ordering::Acquire);
        for p in self.ps.iter() {
            finished += p.finished.load(Ordering::Acquire);
        }
        let mut started = self.started_outside.load(Ordering::Acquire);
        for p in self.ps.iter() {
            started += p.started.load(Ordering::Acquire);
        }
        started.saturating_sub(finished) as usize
    }

    pub(crate) fn is_running(&self) -> bool {
        self.phase.load(Ordering::Acquire) == PHASE_RUNNING
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A worker's own state. Lives on the worker thread's stack (g0) for the thread's lifetime;
/// green threads running on this worker reach it through the `data` word of each resume.
/// Only code running on this OS thread touches it (g0, or the G it is running).
pub(crate) struct M {
    pub(crate) shared: Arc<Shared>,
    /// The P this worker holds, or `NO_P`.
    pub(crate) p: Cell<usize>,
    /// The scheduling context, while a G runs.
    pub(crate) g0: Cell<Option<Context>>,
    /// The G being run.
    pub(crate) current: Cell<Option<GRef>>,
    /// Inside a blocking section (the P may be retaken: do not touch its owner-only parts).
    pub(crate) in_blocking: Cell<bool>,
    /// Schedules left until the next fairness tick (counts down from `global_queue_interval`).
    fair_countdown: Cell<u32>,
    runnext_streak: Cell<u32>,
    rng: Cell<u64>,
    pub(crate) searching: Cell<bool>,
    /// A stackless task is being stepped on this worker (wakes it makes use runnext).
    stepping: Cell<bool>,
    /// Set while this worker queues a batch of green threads the poller readied, which it is
    /// about to run itself: pushes do not wake another worker; the batch notifies once, for
    /// the green threads beyond the first (Go's findRunnable runs one and injects the rest).
    pub(crate) poll_batch: Cell<bool>,
    /// This worker retired with its removed P (`set_workers`): its thread ends.
    retired: Cell<bool>,
    /// A finished G's stack, handed to the next G that has none (brpc's ending_sched).
    spare_stack: Cell<Option<purloin_stack::Stack>>,
    /// Back-off of a join's look into its own local queue (`join::take_back_from_below`).
    pub(crate) take_back: crate::join::LookBackoff,
    /// Back-off of a join's look at the global queue's head (`join::take_from_global_head`).
    pub(crate) global_head: crate::join::LookBackoff,
    /// Back-off of a join's look at its own local queue's top (`join::take_from_local_top`).
    pub(crate) local_top: crate::join::LookBackoff,
}

/// The worker this OS thread runs, or null. Never inlined: a G may resume on another thread,
/// and an inlined thread-local access could reuse a thread-pointer computed before a switch.
#[inline(never)]
pub(crate) fn current_m() -> *const M {
    crate::sync::current_worker_ptr().cast()
}

/// The worker this OS thread runs, if any.
///
/// The reference is only good until the calling green thread next switches (a park, yield,
/// join, or any user code that may do one): after that the green thread may run on another
/// worker. Fetch it again after every such call — using a stale one touches another OS
/// thread's owner-only state (this has bitten: see `fork::take_back`).
pub(crate) fn current_worker<'a>() -> Option<&'a M> {
    let m = current_m();
    // SAFETY: the current-worker slot is set by `worker_main` to an M that lives on that thread's stack for
    // as long as the pointer is set, and only this thread reads it; the returned reference is
    // used by the caller before it can switch threads (callers re-fetch after switches).
    unsafe { m.as_ref() }
}

impl M {
    fn new(shared: Arc<Shared>, p: usize, id: usize) -> M {
        let interval = shared.config.global_queue_interval;
        M {
            shared,
            p: Cell::new(p),
            g0: Cell::new(None),
            current: Cell::new(None),
            in_blocking: Cell::new(false),
            fair_countdown: Cell::new(interval),
            runnext_streak: Cell::new(0),
            rng: Cell::new(
                0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
            ),
            searching: Cell::new(false),
            spare_stack: Cell::new(None),
            retired: Cell::new(false),
            stepping: Cell::new(false),
            poll_batch: Cell::new(false),
            take_back: crate::join::LookBackoff::new(),
            global_head: crate::join::LookBackoff::new(),
            local_top: crate::join::LookBackoff::new(),
        }
    }

    /// The P this worker holds. Panics (a broken invariant) if it holds none.
    pub(crate) fn p(&self) -> &P {
        &self.shared.ps[self.p.get()]
    }

    /// Whether this worker may use its P's owner-only parts right now.
    pub(crate) fn holds_p(&self) -> bool {
        self.p.get() != NO_P && !self.in_blocking.get()
    }

    fn next_rand(&self) -> u64 {
        // xorshift64*: cheap and good enough for victim selection.
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The scheduling loop. Returns when the scheduler stops (or this worker loses its P and
    /// must become a spare: then the caller decides).
    pub(crate) fn run(&self) {
        let mut next: Option<GRef> = None;
        loop {
            if self.p.get() == NO_P {
                return;
            }
            if next.is_none() && self.p.get() >= self.shared.nprocs.load(Ordering::Acquire) {
                self.retire();
                return;
            }
            let g = match next.take() {
                Some(g) => g,
                None => match self.find_runnable() {
                    Some(g) => g,
                    None => return,
                },
            };
            next = self.execute(g);
        }
    }

    /// This worker's P was removed by `Scheduler::set_workers`: hand its work to the others
    /// (global queue; timers to P 0), leave the idle counts, and let the thread end.
    fn retire(&self) {
        let shared = &*self.shared;
        let pi = self.p.get();
        let p = &shared.ps[pi];
        // SAFETY: this worker holds P `pi` until it marks it RETIRED below.
        let local = unsafe { p.local() };
        let mut moved = Vec::new();
        moved.extend(p.take_runnext());
        while let Some(g) = local.pop() {
            moved.push(g);
        }
        if !moved.is_empty() {
            shared.injector.push_batch(moved);
        }
        p.move_timers_to(&shared.ps[0], shared);
        shared.idle.retire(pi, self.searching.replace(false));
        // SAFETY: as above; the cache goes to the global list.
        let cached: Vec<GRef> = p.free_gs.with_mut(|v| unsafe { core::mem::take(&mut *v) });
        registry().give_free(cached);
        p.status.store(p::RETIRED, Ordering::Release);
        self.p.set(NO_P);
        self.retired.set(true);
        let _guard = lock(&shared.resize.0);
        shared.resize.1.notify_all();
        drop(_guard);
        shared.notify_work();
    }

    // ---------------------------------------------------------------------------------------
    // Finding work

    /// Accepts a dequeued G: claims it (`RUNNABLE => RUNNING`) or, for a stale entry of a G
    /// its joiner ran inline, drops the entry's reference.
    fn accept(&self, g: GRef) -> Option<GRef> {
        if let Some(job) = g.job() {
            return Some(self.adopt_job(job));
        }
        if let Some(cell) = g.task_cell() {
            return Some(self.adopt_task(cell));
        }
        if g.claim_for_run() {
            return Some(g);
        }
        if g.drop_ref() {
            self.recycle(g);
        }
        None
    }

    /// One pass over this worker's own sources (no stealing). Returns a claimed G.
    fn find_local(&self) -> Option<GRef> {
        let pi = self.p.get();
        let p = &self.shared.ps[pi];
        // A countdown, not `tick % interval`: a division costs more than the rest of a yield.
        let fair = self.fair_countdown.get() <= 1;
        self.fair_countdown.set(if fair {
            self.shared.config.global_queue_interval
        } else {
            self.fair_countdown.get() - 1
        });
        // SAFETY: this worker holds P `pi` (find_local runs on g0 of the holder).
        let local = unsafe { p.local() };

        if let Some(g) = p.pop_pinned() {
            return self.accept(g).or_else(|| self.find_local());
        }
        if fair {
            // Fairness: due timers fire, and a G in the global queue, or the oldest local G,
            // runs at least this often (otherwise G's that never leave the local queue, like a
            // yield loop, would starve them: timers are otherwise checked only when it is
            // empty).
            self.run_timers(p);
            if let Some(g) = self.take_global(1) {
                return Some(g);
            }
            if let Some(g) = steal_success(p.stealer.steal()).and_then(|g| self.accept(g)) {
                return Some(g);
            }
        }
        if self.runnext_streak.get() < self.shared.config.max_runnext_streak
            && let Some(g) = p.take_runnext()
        {
            self.runnext_streak.set(self.runnext_streak.get() + 1);
            if let Some(g) = self.accept(g) {
                return Some(g);
            }
        }
        self.runnext_streak.set(0);
        while let Some(g) = local.pop() {
            if let Some(g) = self.accept(g) {
                return Some(g);
            }
        }
        if let Some(g) = p.take_runnext().and_then(|g| self.accept(g)) {
            return Some(g);
        }
        let n = (self.shared.injector.len() / self.shared.active().len() + 1).min(16);
        if let Some(g) = self.take_global(n) {
            return Some(g);
        }
        if self.run_timers(p) > 0 {
            return self.find_local();
        }
        if self.poll_ready(false) > 0 {
            return self.find_local();
        }
        None
    }

    /// Takes one G from the global queue and moves up to `n - 1` more into the local queue.
    fn take_global(&self, n: usize) -> Option<GRef> {
        if self.shared.injector.is_empty() {
            return None;
        }
        let p = self.p();
        // SAFETY: this worker holds its P.
        let local = unsafe { p.local() };
        for _ in 0..4 {
            match self.shared.injector.steal_batch_and_pop(local, n.saturating_sub(1)) {
                Steal::Success(g) => {
                    bump(&p.stats.global_pulls);
                    if let Some(g) = self.accept(g) {
                        return Some(g);
                    }
                    // A stale entry: the batch (if any) is now local.
                    return local.pop().and_then(|g| self.accept(g));
                }
                Steal::Empty => return None,
                Steal::Retry => crate::sync::spin_hint(),
            }
        }
        None
    }

    /// Steals from other P's: random start, coprime stride, 4 passes; the victim's runnext
    /// only on the last pass, after a short back-off if the victim is running (Go's rule).
    fn steal_work(&self) -> Option<GRef> {
        let shared = &*self.shared;
        let n = shared.active().len();
        if n == 1 {
            return None;
        }
        let me = self.p.get();
        let p = &shared.ps[me];
        // SAFETY: this worker holds its P.
        let local = unsafe { p.local() };
        for pass in 0..STEAL_PASSES {
            let last = pass == STEAL_PASSES - 1;
            let r = self.next_rand() as usize;
            // A stride coprime with n visits every P once (n is small: the loop is short).
            let mut stride = 1 + (r >> 16) % n;
            while gcd(stride, n) != 1 {
                stride = stride % n + 1;
            }
            let mut victim = r % n;
            for _ in 0..n {
                victim = (victim + stride) % n;
                if victim == me {
                    continue;
                }
                let v = &shared.ps[victim];
                if last
                    && v.run_timers_if_due(self) > 0
                    && let Some(g) = local.pop().and_then(|g| self.accept(g))
                {
                    return Some(g);
                }
                if !v.stealer.is_empty() {
                    bump(&p.stats.steal_attempts);
                    let before = local.len();
                    if let Steal::Success(g) = v.stealer.steal_half_into(local) {
                        bump(&p.stats.steals);
                        add(&p.stats.stolen, (local.len() - before) as u64 + 1);
                        if let Some(g) = self.accept(g) {
                            return Some(g);
                        }
                        if let Some(g) = local.pop().and_then(|g| self.accept(g)) {
                            return Some(g);
                        }
                    }
                }
                if last && !v.runnext.load(Ordering::Relaxed).is_null() {
                    // The victim's running G probably just readied it and is about to block;
                    // give it ~3 µs to run it itself (a channel hand-off costs ~50 ns). If it
                    // scheduled meanwhile, it is making progress through its runnext (a
                    // ping-pong pair): stealing would split the pair across cores. (Go steals
                    // whatever sits there after the wait; the park re-check sees a runnext
                    // that stays, so nothing is stranded.)
                    if v.status.load(Ordering::Relaxed) == p::RUNNING {
                        let tick = v.schedtick.load(Ordering::Relaxed);
                        backoff_spin(Duration::from_micros(3));
                        if v.schedtick.load(Ordering::Relaxed) != tick {
                            continue;
                        }
                    }
                    bump(&p.stats.steal_attempts);
                    if let Some(g) = v.take_runnext() {
                        bump(&p.stats.steals);
                        bump(&p.stats.stolen);
                        if let Some(g) = self.accept(g) {
                            return Some(g);
                        }
                    }
                }
            }
        }
        None
    }

    /// The whole search: local sources, then stealing with adaptive spinning, then parking.
    /// Returns `None` when the scheduler stops (or this worker lost its P).
    fn find_runnable(&self) -> Option<GRef> {
        let mut round: u32 = 0;
        loop {
            if let Some(g) = self.find_local() {
                self.found_work();
                return Some(g);
            }
            if self.shared.phase.load(Ordering::Acquire) == PHASE_STOPPED {
                self.leave_searching();
                return None;
            }
            if self.p.get() >= self.shared.nprocs.load(Ordering::Acquire) {
                // Removed by `set_workers`: back to `run`, which retires this worker.
                return None;
            }
            if self.searching.get() || self.shared.idle.try_start_searching() {
                self.searching.set(true);
                if let Some(g) = self.steal_work() {
                    self.found_work();
                    return Some(g);
                }
            }
            round += 1;
            bump(&self.p().stats.spins);
            if round < SPIN_TIGHT {
                for _ in 0..(1 << round) {
                    crate::sync::spin_hint();
                }
            } else if round < SPIN_YIELD {
                thread::yield_now();
            } else {
                self.park();
                round = 0;
                if self.p.get() == NO_P {
                    return None;
                }
            }
        }
    }

    /// Found work while (possibly) searching: stop searching; the last searcher wakes another
    /// so a burst keeps ramping up (Go's resetspinning).
    fn found_work(&self) {
        if self.searching.replace(false) && self.shared.idle.stop_searching() {
            self.shared.notify_work();
        }
    }

    fn leave_searching(&self) {
        if self.searching.replace(false) {
            self.shared.idle.stop_searching();
        }
    }

    /// Parks this worker's OS thread until woken, a timer is due, or the scheduler stops.
    fn park(&self) {
        let shared = &*self.shared;
        let pi = self.p.get();
        let lot = shared.lots.lot(pi);
        // The snapshot comes before joining the sleepers: a waker can only pick us after it.
        let snapshot = lot.state();
        shared.idle.transition_to_parked(pi, self.searching.replace(false));
        shared.idle.fence_before_recheck();
        // F2 is also the fence of this worker's finishes since its last park (L2).
        shared.notify_if_draining();
        let p = &shared.ps[pi];
        let due = p.next_timer_deadline(shared);
        let recheck = shared.any_work(pi)
            || shared.phase.load(Ordering::Acquire) == PHASE_STOPPED
            || due.is_some_and(|d| d <= Instant::now())
            || self.poll_ready(false) > 0;
        if recheck {
            // Work appeared between giving up and parking: search for it (as Go does after
            // `checkRunqsNoP`), even past the half-of-the-workers limit.
            if !shared.idle.unpark_self(pi) {
                shared.idle.start_searching_unconditionally();
            }
            self.searching.set(true);
            crate::sync::spin_hint();
            return;
        }
        bump(&p.stats.parks);
        let readied = self.poll_blocking(due, &snapshot);
        if readied.is_none() {
            match due {
                Some(d) => {
                    lot.wait_deadline(snapshot, d);
                }
                None => lot.wait(snapshot),
            }
        }
        self.searching.set(shared.idle.unpark_self(pi));
        if readied.is_some_and(|n| n > 1) {
            // This worker runs one of them; someone else may take the rest.
            shared.notify_work_from(p);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Timers and the poller

    /// Fires this P's due timers (holder only). Returns how many G's were woken.
    fn run_timers(&self, p: &P) -> usize {
        p.run_timers_if_due(self)
    }

    fn poll_ready(&self, _block: bool) -> usize {
        crate::poll::poll_nonblocking(self)
    }

    fn poll_blocking(
        &self,
        deadline: Option<Instant>,
        snapshot: &purloin_parking::State,
    ) -> Option<usize> {
        crate::poll::poll_blocking(self, deadline, snapshot)
    }

    // ---------------------------------------------------------------------------------------
    // Running a G

    /// Switches to `g` (claimed, RUNNING) and, when it switches back, finishes what it asked.
    /// Returns a G to run immediately (a parked G whose unpark raced its park).
    fn execute(&self, g: GRef) -> Option<GRef> {
        let pi = self.p.get();
        let p = &self.shared.ps[pi];
        bump(&p.stats.switches);
        p.schedtick.store(p.schedtick.load(Ordering::Relaxed) + 1, Ordering::Relaxed);

        // SAFETY: this worker claimed `g` (RUNNING): it owns the record's cells.
        let task =
            unsafe { g.step_task.with(|t| (*t).as_ref().map(|t| &**t as *const dyn crate::Task)) };
        if let Some(task) = task {
            // SAFETY: the task stays in the claimed record's cell until `finish` (which runs
            // after the step, on this thread), so the pointer is valid for the step.
            return self.step(g, unsafe { &*task });
        }
        // SAFETY: as above.
        let has_context = unsafe { g.context.with(|c| (*c).is_some()) };
        if !has_context && let Err(e) = self.attach_stack(g) {
            self.fail_start(g, e);
            return None;
        }
        self.current.set(Some(g));
        p.running.store(g.as_ptr(), Ordering::Relaxed);
        // SAFETY: as above; the context was saved by the G's last switch out (or just made).
        let mut ctx =
            unsafe { g.context.with_mut(|c| (*c).take()) }.expect("a runnable G has a context");
        let t: Transfer = loop {
            // SAFETY: `ctx` is a suspended context of a G whose stack is alive (attached to
            // it); it switches back to us with `switch_out`, passing an ACT_* code.
            let t: Transfer = unsafe { ctx.resume(self as *const M as usize) };
            if t.data != ACT_YIELD {
                break t;
            }
            bump(&p.stats.yields);
            let pin = g.pinned_to.load(Ordering::Relaxed);
            if (pin == NOT_PINNED || pin == pi) && self.resume_yielder_at_once(p) {
                // A new scheduling round of the same G, without leaving this frame (the
                // record stays RUNNING and current; the monitor sees the tick).
                ctx = t.context;
                bump(&p.stats.switches);
                p.schedtick.store(p.schedtick.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                continue;
            }
            break t;
        };
        self.current.set(None);
        p.running.store(core::ptr::null_mut(), Ordering::Relaxed);
        let action = t.data;
        let pin = g.pinned_to.load(Ordering::Relaxed);
        match action {
            ACT_YIELD => {
                // SAFETY: we still own the record until the push below publishes it.
                unsafe { g.context.with_mut(|c| *c = Some(t.context)) };
                g.publish_runnable();
                if pin != NOT_PINNED {
                    self.shared.ps[pin].push_pinned(g);
                } else if p.has_work() {
                    // Other local work is waiting: go behind all of it, in the global queue
                    // (Go's Gosched), where any worker may pick it up.
                    self.shared.injector.push(g);
                } else {
                    // Nothing else here: the fast path, no shared queue touched.
                    self.push_local(g);
                }
                None
            }
            ACT_PARK => {
                // SAFETY: we own the record until PARKED is published (G1).
                unsafe { g.context.with_mut(|c| *c = Some(t.context)) };
                if g.publish_parked() {
                    None
                } else {
                    // An unpark raced the park: run it again at once (token consumed).
                    g.claim_for_run().then_some(g)
                }
            }
            ACT_EXIT => {
                // The finished G's context is never resumed; dropping it is a no-op on real
                // stacks and ends its thread on the loom backend.
                let _ = t.context;
                self.finish(g);
                None
            }
            ACT_REQUEUE_GLOBAL => {
                // SAFETY: we own the record until the push publishes it.
                unsafe { g.context.with_mut(|c| *c = Some(t.context)) };
                g.publish_runnable();
                self.shared.push_global(g);
                None
            }
            other => unreachable!("unknown switch-out action {other}"),
        }
    }

    /// After a yield: whether to run the yielder again at once. With nothing else runnable on
    /// this P (runnext, local and pinned queues empty) and no fairness tick due, `find_local`
    /// would pop the yielder straight back from the local queue: skip that round trip (a
    /// publish, a push, a pop and a claim: four atomic read-modify-writes). The G stays
    /// RUNNING; a token that arrives meanwhile stays in its state word for its next park.
    /// Global queue, timers and the poller are looked at on the fairness tick, as before.
    fn resume_yielder_at_once(&self, p: &P) -> bool {
        if self.fair_countdown.get() <= 1 || p.has_work() || p.may_have_pinned() {
            return false;
        }
        self.fair_countdown.set(self.fair_countdown.get() - 1);
        true
    }

    /// Runs one step of a stackless task on this worker's own stack (g0) and finishes what it
    /// asked for, like `execute` does for a switched-out G.
    fn step(&self, g: GRef, task: &dyn crate::Task) -> Option<GRef> {
        let p = self.p();
        p.running.store(g.as_ptr(), Ordering::Relaxed);
        // While stepping, a task this one wakes goes to runnext (like a green thread's wake-up):
        // a process ring stays on one core instead of being stolen hop by hop.
        self.stepping.set(true);
        let outcome = if g.is_cancelled() {
            panic::catch_unwind(AssertUnwindSafe(|| task.cancel()))
        } else {
            panic::catch_unwind(AssertUnwindSafe(|| task.step()))
        };
        self.stepping.set(false);
        p.running.store(core::ptr::null_mut(), Ordering::Relaxed);
        match outcome {
            Ok(crate::TaskStep::Yield) => {
                g.publish_runnable();
                self.push_local(g);
                None
            }
            Ok(crate::TaskStep::Wait) => {
                // The same token rules as a green thread's park: a wake that arrived during
                // the step (NOTIFIED) makes it run again instead of waiting.
                if g.take_notified() || !g.begin_park() {
                    g.take_notified();
                    return Some(g);
                }
                if g.publish_parked() { None } else { g.claim_for_run().then_some(g) }
            }
            Ok(crate::TaskStep::Done) => {
                self.finish(g);
                None
            }
            Err(payload) => {
                task.panicked(payload);
                self.finish(g);
                None
            }
        }
    }

    /// Gives `g` a stack and a fresh context before its first run.
    fn attach_stack(&self, g: GRef) -> io::Result<()> {
        #[cfg(not(loom))]
        {
            // SAFETY: this worker owns the claimed G's cells.
            let (size, has_stack) =
                unsafe { (g.stack_size.with(|s| *s), g.stack.with(|s| (*s).is_some())) };
            if !has_stack {
                let reuse = self.spare_stack.take();
                let stack = match reuse {
                    Some(s) if s.size() == size => s,
                    other => {
                        drop(other);
                        purloin_stack::lease(size)?
                    }
                };
                // SAFETY: as above.
                unsafe { g.stack.with_mut(|s| *s = Some(stack)) };
            }
            // SAFETY: as above; the stack is attached to `g` and outlives its context (the
            // context is dropped on g0 before the stack is detached in `finish`).
            let ctx = unsafe {
                g.stack.with(|s| {
                    let s = (*s).as_ref().expect("stack attached above");
                    s.set_label(g.id_with(g.generation()), g.name().as_deref().unwrap_or(""));
                    Context::new(s.top(), s.limit(), g_entry)
                })
            };
            // SAFETY: as above.
            unsafe { g.context.with_mut(|c| *c = Some(ctx)) };
        }
        #[cfg(loom)]
        {
            // The loom backend of purloin-context runs each context on a loom thread; the
            // stack pointers are not used.
            // SAFETY: the loom backend ignores the pointers; g is owned by this worker.
            let ctx =
                unsafe { Context::new(core::ptr::null_mut(), core::ptr::null_mut(), g_entry) };
            // SAFETY: as above.
            unsafe { g.context.with_mut(|c| *c = Some(ctx)) };
        }
        Ok(())
    }

    /// A G could not get a stack: its joiner receives the error; the G is finished.
    fn fail_start(&self, g: GRef, e: io::Error) {
        // SAFETY: this worker owns the claimed G's cells.
        let task = unsafe { g.task.with_mut(|t| (*t).take()) };
        if let Some(task) = task {
            task.fail(Box::new(e));
        }
        self.finish(g);
    }

    /// On g0 after a G exited: release its stack, account for it, recycle the record.
    fn finish(&self, g: GRef) {
        // SAFETY: the G exited: this worker owns its cells and its stack is no longer in use
        // (we are on g0).
        let stack = unsafe { g.stack.with_mut(|s| (*s).take()) };
        if let Some(s) = stack {
            s.clear_label();
            // Keep it for the next G that has none; the previous spare goes back to the pool.
            // A big stack goes back at once: the pool gives its touched pages back.
            if s.worth_keeping() {
                drop(self.spare_stack.replace(Some(s)));
            }
        }
        let pin = g.pinned_to.load(Ordering::Relaxed);
        if pin != NOT_PINNED {
            self.shared.ps[pin].pinned.fetch_sub(1, Ordering::Relaxed);
        }
        g.finish_run();
        // SAFETY: as above.
        let counted = !unsafe { g.uncounted.with(|u| *u) };
        if g.drop_ref() {
            self.recycle(g);
        }
        if counted {
            let p = self.holds_p().then(|| self.p());
            self.shared.note_finished(p);
        }
    }

    /// Returns a record whose last reference was dropped to the free lists.
    pub(crate) fn recycle(&self, g: GRef) {
        g.recycle();
        self.recycle_cached(g);
    }

    /// Puts an already recycled (FREE) record in the P's cache, or the global list.
    pub(crate) fn recycle_cached(&self, g: GRef) {
        if self.holds_p() {
            // SAFETY: this worker holds its P (holds_p), so it owns the P's caches.
            let full = self.p().free_gs.with_mut(|v| unsafe {
                (*v).push(g);
                (*v).len() > 2 * p::FREE_CACHE
            });
            if full {
                // SAFETY: as above.
                let spill: Vec<GRef> =
                    self.p().free_gs.with_mut(|v| unsafe { (*v).drain(p::FREE_CACHE..).collect() });
                registry().give_free(spill);
            }
        } else {
            registry().give_free([g]);
        }
    }

    /// A free record for a new G: the P's cache, else the global list, else a new one.
    /// Gives a dequeued fork-join job (a lazy G, see `GRef::for_job`) its G, claimed for this
    /// worker to run: the job is about to run somewhere other than inline in its joiner, so it
    /// needs a stack of its own (it may park).
    fn adopt_job(&self, job: crate::g::JobSlot) -> GRef {
        let g = self.alloc_g();
        // SAFETY: the slot outlives the entry we dequeued (see `GRef::for_job`); the deque's
        // push (Release) / pop (Acquire) published it. The record is FREE and unpublished: we
        // own its cells, emptied by `recycle` (plain writes, as in `spawn_g`).
        unsafe {
            let job = *job.as_ptr();
            g.task.with_mut(|t| t.write(Some(crate::task::TaskRef::Borrowed(job))));
            g.uncounted.with_mut(|u| u.write(true));
            g.stack_size.with_mut(|s| s.write(self.shared.config.stack_size));
            g.sched.with_mut(|s| s.write(Arc::as_ptr(&self.shared)));
        }
        g.prepare_spawn();
        let claimed = g.claim_for_run();
        debug_assert!(claimed, "a fresh record is claimable");
        g
    }

    /// Gives a dequeued lazily spawned green thread (see `lazy`) its G, claimed for this
    /// worker to run. The G comes from this worker's cache (unless a handle asked for the
    /// thread's identity before it started), so the record does not move between cores.
    fn adopt_task(&self, cell: core::ptr::NonNull<()>) -> GRef {
        // SAFETY: we dequeued the entry, so we own the cell's G side (given up at spawn), and
        // the cell lives until that side completes; the deque's push (Release) / pop (Acquire)
        // published it.
        let task = unsafe { crate::task::OwnedTask::from_cell(cell) };
        // SAFETY: as above; the head is at offset 0 of the cell.
        let head = unsafe { &*cell.cast::<crate::task::CellHead>().as_ptr() };
        let g = head.identity.start_on_worker(|| self.alloc_g(), |g| self.recycle_cached(g));
        // SAFETY: we claimed the record: we own its cells, emptied by `recycle` (plain writes,
        // as in `spawn_g`).
        unsafe {
            g.task.with_mut(|t| t.write(Some(crate::task::TaskRef::Owned(task))));
            g.stack_size.with_mut(|s| s.write(self.shared.config.stack_size));
            g.sched.with_mut(|s| s.write(Arc::as_ptr(&self.shared)));
        }
        g
    }

    pub(crate) fn alloc_g(&self) -> GRef {
        if self.holds_p() {
            // SAFETY: this worker holds its P, so it owns the P's caches.
            let cached = self.p().free_gs.with_mut(|v| unsafe {
                if (*v).is_empty() {
                    registry().take_free(&mut *v, p::FREE_CACHE);
                }
                (*v).pop()
            });
            if let Some(g) = cached {
                return g;
            }
        }
        registry().alloc()
    }

    /// Makes a runnable G visible in this worker's local queue and, if the queue (with runnext)
    /// was empty, runs the submit side of the idle protocol (`notify_work`: the StoreLoad
    /// fence and a wake-up if nobody searches).
    ///
    /// Pushing onto a queue that already held work needs no wake-up: when that work became
    /// visible, a worker was woken, or one was searching (it takes the work or re-checks every
    /// queue before it parks), or none was parked; and a searcher that finds work while others
    /// remain wakes the next one (`found_work`). So every non-empty queue has someone coming.
    pub(crate) fn push_local_and_notify(&self, g: GRef) {
        let p = self.p();
        let was_empty = p.runnext.load(Ordering::Relaxed).is_null()
            // SAFETY: callers hold the P (see `push_local`).
            && unsafe { p.local() }.is_empty();
        self.push_local(g);
        if was_empty && !self.poll_batch.get() {
            self.shared.notify_work_from(p);
        }
    }

    /// Queues a lazily spawned task without a read-modify-write: into runnext if it is empty
    /// (a Release store; only the holder ever fills runnext, thieves only empty it, so nobody
    /// can fill it between the load and the store), else on top of the local queue. Notifies as
    /// [`M::push_local_and_notify`] does.
    ///
    /// Why not Go's swap (the new G in runnext, the displaced one to the local queue, as
    /// [`M::put_runnext_and_notify`] does): in a burst of spawns runnext is always full, and the
    /// swap is a locked instruction that waits for the spawn's stores to the cell to drain:
    /// 17% of a one-worker spawn burst (2.5–2.6 vs 2.1–2.2 ms for 100k). And why runnext at
    /// all: a child spawned and then joined must not be stolen meanwhile (a thief takes runnext
    /// only after a grace period). Pushed on the local queue instead, 4–7% of such children
    /// were stolen by a searching worker and spawn+join in a loop took 21 instead of 8 ms.
    pub(crate) fn push_spawned_and_notify(&self, g: GRef) {
        let p = self.p();
        if !p.runnext.load(Ordering::Relaxed).is_null() {
            // Work was already visible (runnext): no wake-up needed (see `push_local_and_notify`).
            self.push_local(g);
            return;
        }
        // SAFETY: callers hold the P.
        let local_empty = unsafe { p.local() }.is_empty();
        p.fill_empty_runnext(g);
        if local_empty && !self.poll_batch.get() {
            self.shared.notify_work_from(p);
        }
    }

    /// Puts a G readied by the running G in runnext (the displaced one goes to the local
    /// queue), notifying as [`M::push_local_and_notify`] does.
    pub(crate) fn put_runnext_and_notify(&self, g: GRef) {
        let p = self.p();
        // SAFETY: callers hold the P.
        let local_empty = unsafe { p.local() }.is_empty();
        match p.put_runnext(g) {
            Some(old) => self.push_local(old),
            None if local_empty => self.shared.notify_work_after_runnext_push(p),
            None => {}
        }
    }

    /// Pushes a runnable G on this worker's local queue (overflowing half to the global queue).
    pub(crate) fn push_local(&self, g: GRef) {
        // SAFETY: callers hold the P (g0, or a G running on this worker outside a blocking
        // section).
        unsafe { self.p().local() }.push_or_overflow(g, &self.shared.injector);
    }
}

fn steal_success<T>(s: Steal<T>) -> Option<T> {
    match s {
        Steal::Success(t) => Some(t),
        _ => None,
    }
}

fn backoff_spin(d: Duration) {
    #[cfg(not(loom))]
    {
        let start = Instant::now();
        while start.elapsed() < d {
            core::hint::spin_loop();
        }
    }
    #[cfg(loom)]
    {
        let _ = d;
        crate::sync::spin_hint();
    }
}

// -------------------------------------------------------------------------------------------
// The green-thread side of switching

/// First code on a new G's stack. Never returns and never unwinds (an unwind across the
/// context switch would be undefined behaviour): panics of the G's closure are caught by its
/// task; anything else aborts.
extern "C-unwind" fn g_entry(t: Transfer) -> ! {
    let ran = panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the resumer passes a pointer to its live M (see `execute`).
        let m = unsafe { &*(t.data as *const M) };
        adopt_worker(m);
        m.g0.set(Some(t.context));
        let g = m.current.get().expect("a G runs with current set");
        // SAFETY: this G is RUNNING on this worker: it owns its cells.
        let task = unsafe { g.task.with_mut(|t| (*t).take()) };
        if let Some(task) = task {
            task.run();
        }
    }));
    if let Err(payload) = ran {
        // Under loom, a context dropped while suspended unwinds with the backend's private
        // payload so its loom thread can end: let it through (it never happens on real stacks).
        if purloin_context::is_abandon_payload(&*payload) {
            panic::resume_unwind(payload);
        }
        abort_with("purloin: a panic escaped a green thread's entry; aborting");
    }
    // A section left open by a bare `enter_blocking` ends with the G.
    crate::blocking::exit_blocking();
    switch_out(ACT_EXIT);
    abort_with("purloin: a finished green thread was resumed; aborting")
}

pub(crate) fn abort_with(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::abort()
}

/// Switches from the running G back to its worker's g0 with `action`, and returns when some
/// worker resumes the G. Must be called on a G's stack.
#[inline(never)]
pub(crate) fn switch_out(action: usize) {
    // SAFETY: only called from a G's stack, where the current-worker slot names the worker
    // running it.
    switch_out_from(unsafe { &*current_m() }, action);
}

/// [`switch_out`] for a caller that already fetched its worker `m` (since its last switch).
/// Returns the worker that resumed the G (it may be another one: use it, not `m`, after).
pub(crate) fn switch_out_from<'a>(m: &M, action: usize) -> &'a M {
    let g0 = m.g0.take().expect("switch_out called outside a green thread");
    if std::thread::panicking() {
        // An unwinding G must not migrate: std's panic count is per OS thread.
        pin_current(m);
    }
    // SAFETY: g0 is this worker's scheduling context, suspended in `execute`, on the worker's
    // own stack which outlives the G's run.
    let t = unsafe { g0.resume(action) };
    // SAFETY: the resumer passes a pointer to its live M, which outlives the G's run on it.
    let m = unsafe { &*(t.data as *const M) };
    adopt_worker(m);
    m.g0.set(Some(t.context));
    m
}

/// After a G resumes: under loom every context is its own loom thread, so the G's thread must
/// adopt the current-worker slot of the worker that resumed it (on real stacks the G runs on
/// the worker's own OS thread and the slot is already right).
#[inline(always)]
fn adopt_worker(m: &M) {
    #[cfg(loom)]
    crate::sync::set_current_worker_ptr((m as *const M).cast());
    #[cfg(not(loom))]
    let _ = m;
}

/// Pins the running G to the P of the worker running it (no-op if already pinned).
fn pin_current(m: &M) {
    let Some(g) = m.current.get() else { return };
    let pi = m.p.get();
    if pi != NO_P
        && g.pinned_to
            .compare_exchange(NOT_PINNED, pi, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        m.shared.ps[pi].pinned.fetch_add(1, Ordering::Relaxed);
    }
}

// -------------------------------------------------------------------------------------------
// Making G's runnable

/// Queues a G that just became RUNNABLE (unpark, timer, spawn): on its pinned P, else in the
/// current worker's runnext (when a G readies another: they run as a unit), else its local
/// queue (on g0), else the global queue.
pub(crate) fn schedule(g: GRef, shared: &Shared, use_runnext: bool) {
    let pin = g.pinned_to.load(Ordering::Relaxed);
    if pin != NOT_PINNED {
        shared.push_pinned(pin, g);
        return;
    }
    if let Some(m) = current_worker()
        && core::ptr::eq(&*m.shared, shared)
        && m.holds_p()
    {
        if use_runnext && (m.current.get().is_some() || m.stepping.get()) {
            m.put_runnext_and_notify(g);
        } else {
            m.push_local_and_notify(g);
        }
        return;
    }
    shared.push_global(g);
}

/// Wakes a green thread (the body of `GreenThread::unpark`).
pub(crate) fn unpark(t: &GreenThread) -> bool {
    let mut t = *t;
    loop {
        match t.g.unpark(t.generation) {
            Unparked::Queue => {
                // SAFETY: we won PARKED => RUNNABLE, so the G is alive and so is its scheduler
                // (shutdown waits for every live G).
                let shared = unsafe { &*t.g.sched.with(|s| *s) };
                schedule(t.g, shared, true);
                return true;
            }
            Unparked::Noted => return true,
            Unparked::Stale => return false,
            Unparked::Forward => {
                let host = t.g.host.load(Ordering::Acquire);
                // SAFETY: host pointers always name live records.
                match unsafe { GRef::from_ptr(host) } {
                    Some(h) => t = GreenThread { g: h, generation: h.generation() },
                    None => return true,
                }
            }
        }
    }
}

/// A FREE record for an identity made on demand (`lazy`): this worker's cache, else the
/// global list.
pub(crate) fn alloc_record() -> GRef {
    match current_worker() {
        Some(m) => m.alloc_g(),
        None => registry().alloc(),
    }
}

/// Spawns `task` lazily if it may be (see `lazy`): from a green thread of `shared` on a worker
/// holding its P, with default options. Gives the task back otherwise.
pub(crate) fn spawn_lazy(
    shared: &Arc<Shared>,
    opts: &crate::SpawnOptions,
    task: crate::task::OwnedTask,
) -> Result<(), crate::task::OwnedTask> {
    let default_opts =
        !opts.pinned && !opts.urgent && opts.stack_size.is_none() && opts.name.is_none();
    let Some(m) = current_worker().filter(|m| {
        default_opts && m.holds_p() && m.current.get().is_some() && Arc::ptr_eq(&m.shared, shared)
    }) else {
        return Err(task);
    };
    let p = m.p();
    shared.note_started(Some(p));
    bump(&p.stats.spawned);
    m.push_spawned_and_notify(GRef::for_task(task.into_cell()));
    Ok(())
}

/// Spawns a G on `shared` (the body of the public spawn functions). `task` must be fresh.
pub(crate) fn spawn_g(
    shared: &Arc<Shared>,
    entry: crate::stackless::Entry,
    opts: &crate::SpawnOptions,
) -> io::Result<GreenThread> {
    let here = current_worker().filter(|m| Arc::ptr_eq(&m.shared, shared));
    if !shared.is_running() && here.is_none() {
        return Err(io::Error::other(
            "cannot spawn: the runtime is shutting down (spawn before dropping the runtime, \
             or from one of its green threads)",
        ));
    }
    let pinned_home = here.filter(|m| m.holds_p());
    if opts.pinned
        && pinned_home.is_some_and(|m| m.p.get() >= shared.nprocs.load(Ordering::Acquire))
    {
        return Err(io::Error::other(
            "cannot spawn a pinned green thread on a worker that is being removed \
             (Scheduler::set_workers is shrinking the runtime)",
        ));
    }
    if opts.pinned && pinned_home.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a pinned green thread can only be spawned from a green thread of the same \
             runtime (it is pinned to the spawner's worker)",
        ));
    }
    let stack = match opts.stack_size {
        Some(size) if !cfg!(loom) => Some(purloin_stack::lease(size)?),
        _ => None,
    };
    let g = match here {
        Some(m) => m.alloc_g(),
        None => registry().alloc(),
    };
    let size = opts.stack_size.unwrap_or(shared.config.stack_size);
    // SAFETY: the record is FREE and not yet published: we own it. Its optional fields were
    // emptied by `recycle` (or never set), so plain writes (no drop of the old value, and no
    // load of a cold cache line) are right.
    unsafe {
        match entry {
            crate::stackless::Entry::Green(task) => {
                g.task.with_mut(|t| t.write(Some(crate::task::TaskRef::Owned(task))))
            }
            crate::stackless::Entry::Step(task) => g.step_task.with_mut(|t| *t = Some(task)),
        }
        g.name.with_mut(|n| n.write(opts.name.clone()));
        g.stack_size.with_mut(|s| s.write(size));
        g.stack.with_mut(|s| s.write(stack));
        g.sched.with_mut(|s| s.write(Arc::as_ptr(shared)));
    }
    let generation = g.prepare_spawn();
    shared.note_started(here.filter(|m| m.holds_p()).map(|m| m.p()));
    let handle = GreenThread { g, generation };
    if opts.pinned {
        let m = pinned_home.expect("checked above");
        let pi = m.p.get();
        g.pinned_to.store(pi, Ordering::Relaxed);
        m.shared.ps[pi].pinned.fetch_add(1, Ordering::Relaxed);
        shared.push_pinned(pi, g);
        return Ok(handle);
    }
    match here {
        Some(m) if m.holds_p() => {
            bump(&m.p().stats.spawned);
            if m.current.get().is_some() {
                // Go's newproc: the child goes to runnext (the displaced one to the local
                // queue). A thief takes runnext only after a grace period, so a child that is
                // joined soon is usually still here for its joiner to run inline (a stolen
                // child costs its joiner a park and a cross-core wake-up).
                m.put_runnext_and_notify(g);
                if opts.urgent {
                    crate::yield_now();
                }
            } else {
                m.push_local_and_notify(g);
            }
        }
        _ => shared.push_global(g),
    }
    Ok(handle)
}

// -------------------------------------------------------------------------------------------
// Worker threads

/// Starts the worker thread that holds P `p` first.
pub(crate) fn start_worker(shared: &Arc<Shared>, p: usize) -> io::Result<()> {
    let shared2 = shared.clone();
    let id = shared.stats.threads_started.fetch_add(1, STAT) as usize;
    shared.threads_alive.fetch_add(1, Ordering::Relaxed);
    let name = format!("{}-{}", shared.config.thread_name, id);
    let spawn = thread_builder(name).spawn(move || worker_main(shared2, p, id));
    match spawn {
        Ok(h) => {
            lock(&shared.threads).push(h);
            Ok(())
        }
        Err(e) => {
            shared.threads_alive.fetch_sub(1, Ordering::Relaxed);
            Err(io::Error::new(e.kind(), format!("could not start a worker thread: {e}")))
        }
    }
}

#[cfg(not(loom))]
fn thread_builder(name: String) -> std::thread::Builder {
    std::thread::Builder::new().name(name)
}
#[cfg(loom)]
fn thread_builder(name: String) -> loom::thread::Builder {
    loom::thread::Builder::new().name(name)
}

fn worker_main(shared: Arc<Shared>, p: usize, id: usize) {
    #[cfg(not(loom))]
    let _alt = purloin_stack::overflow::AltStack::install_current_thread().ok();
    if shared.ps[p].status.load(Ordering::Acquire) == p::HANDOFF {
        // Started by the monitor for a retaken P (blocking handoff).
        shared.ps[p].take_handed();
    }
    shared.ps[p].holder.store(crate::os::current_thread(), Ordering::Relaxed);
    let m = M::new(shared, p, id);
    crate::sync::set_current_worker_ptr((&m as *const M).cast());
    loop {
        m.run();
        if m.shared.phase.load(Ordering::Acquire) == PHASE_STOPPED {
            break;
        }
        if m.p.get() == NO_P && m.retired.get() {
            break;
        }
        if m.p.get() == NO_P {
            // Lost the P in a blocking section: wait as a spare until handed one.
            if !crate::blocking::wait_as_spare(&m) {
                break;
            }
        }
    }
    m.leave_searching();
    crate::sync::set_current_worker_ptr(core::ptr::null());
    drop(m.spare_stack.take());
    m.shared.threads_alive.fetch_sub(1, Ordering::Relaxed);
}

/// Loom models of protocol 2 (submit vs. going idle) on the real worker code: `find_runnable`
/// (search, give up, the dance, park on the lot) against `Shared::push_global` +
/// `notify_work`, without context switches (the models stop at "a worker found the G").
#[cfg(all(test, loom))]
mod loom_idle {
    use super::*;
    use crate::sync::Arc;
    use crate::sync::thread as lthread;

    /// Like `loom::model`, with room for crossbeam-epoch's own branches (the injector pins
    /// the epoch; its collector's teardown alone takes thousands of loom branches).
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        b.max_branches = b.max_branches.max(200_000);
        b.check(f);
    }

    fn shared(workers: usize) -> Arc<Shared> {
        let b = crate::Builder::new().workers(workers).monitor(false);
        Arc::new(Shared::new(b.config_for_tests()))
    }

    fn new_g(shared: &Arc<Shared>) -> GRef {
        let g = registry().alloc();
        // SAFETY: a fresh FREE record, not yet published.
        unsafe { g.sched.with_mut(|s| *s = Arc::as_ptr(shared)) };
        g.prepare_spawn();
        shared.note_started(None);
        g
    }

    /// Runs a worker's search on P `p` until it finds a G; returns it.
    fn worker(shared: Arc<Shared>, p: usize) -> GRef {
        let m = M::new(shared, p, p);
        crate::sync::set_current_worker_ptr((&m as *const M).cast());
        let g = m.find_runnable().expect("the scheduler is running");
        m.found_work();
        crate::sync::set_current_worker_ptr(core::ptr::null());
        g
    }

    /// One worker going idle (searching, the re-check, parking) races an outside submission:
    /// the worker always finds the G (a lost wake-up leaves it parked forever: loom reports
    /// the deadlock). Mutation check: removing F1 (`fence` in `Idle::worker_to_wake`) or F2
    /// (`Idle::fence_before_recheck`) makes this model fail with a deadlock.
    #[test]
    fn outside_submission_vs_one_worker_going_idle() {
        model(|| {
            let s = shared(1);
            let s2 = s.clone();
            let w = lthread::spawn(move || worker(s2, 0));
            let g = new_g(&s);
            s.push_global(g);
            let found = w.join().unwrap();
            assert_eq!(found, g);
        });
    }

    /// A worker whose green thread spawns (a local push + `notify_work`, then it keeps running
    /// and never looks at its queue again) races the other worker going idle: the idle worker
    /// must be woken (or see the G in its re-check) and steal it — Go's delicate dance between
    /// `runqput` + `wakep` and the last spinner's re-check. Mutation check: removing F1 or F2
    /// makes this model fail with a deadlock.
    #[test]
    fn local_spawn_vs_other_worker_going_idle() {
        spawn_vs_other_worker_going_idle(|busy, g| {
            busy.push_local(g);
            busy.shared.notify_work();
        });
    }

    /// P 0's worker submits a G with `submit` while the worker of P 1 goes idle; P 1's worker
    /// must end up with it.
    fn spawn_vs_other_worker_going_idle(submit: fn(&M, GRef)) {
        model(move || {
            let s = shared(2);
            let s2 = s.clone();
            let idle = lthread::spawn(move || worker(s2, 1));
            let g = new_g(&s);
            submit(&M::new(s.clone(), 0, 0), g);
            let found = idle.join().unwrap();
            assert_eq!(found, g);
        });
    }

    /// The same race for a spawn from a green thread, which goes to runnext (Go's `newproc`):
    /// `put_runnext_and_notify` (the swap, then F1 and the idle check) against the other worker
    /// going idle (F2, then a re-check that reads every runnext). The idle worker must end up
    /// with the G: woken, or seeing it in its re-check, then taking the runnext of a victim that
    /// does not schedule. Mutation check: `put_runnext_and_notify` without its notify fails
    /// with a deadlock.
    #[test]
    fn runnext_spawn_vs_other_worker_going_idle() {
        spawn_vs_other_worker_going_idle(|busy, g| busy.put_runnext_and_notify(g));
    }

    /// The same race for a lazy spawn (`push_spawned_and_notify`): into an empty runnext with
    /// a plain Release store, so the StoreLoad fence F1 is the explicit one in
    /// `notify_work_from`. Mutation checks: without the notify, loom reports a deadlock; with
    /// the runnext store Relaxed, a causality violation on the G record the thief takes.
    #[test]
    fn lazy_spawn_into_runnext_vs_other_worker_going_idle() {
        spawn_vs_other_worker_going_idle(|busy, g| busy.push_spawned_and_notify(g));
    }
}
