//! The scheduler's shared state (Go's `schedt`, brpc's `TaskControl`): configuration, the
//! P's, the global queue, the idle protocol's state, lifecycle, live counting, and the
//! submit-side operations every party uses (notify and wake, global and pinned pushes).
//!
//! The worker loop that consumes this state is in `worker`; what makes a G runnable is in
//! `ready`. `impl Shared` has a second part in `blocking.rs`: the monitor's kicks, the
//! blocking hand-off and the spare workers.

use std::time::{Duration, Instant};

use purloin_deque::Injector;
use purloin_parking::ParkingLots;
use purloin_stack::StackSize;

use crate::entry::Entry;
use crate::g::GRef;
use crate::idle::Idle;
use crate::p::{self, P};
use crate::stats::{SharedStats, bump};
use crate::sync::{
    Arc, AtomicBool, AtomicU32, AtomicUsize, Condvar, Mutex, Ordering, Padded, STAT, fence, lock,
    thread,
};
use crate::timer_heap::Epoch;
use crate::worker::NO_P;

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
    /// Processors the monitor may add for stalled workers (`Builder::max_spare_workers`).
    pub(crate) max_spare_workers: usize,
    /// Record park durations (`Builder::park_histogram`).
    pub(crate) park_histogram: bool,
    /// Frees a green thread's local-storage pointer when a fork-join job that ran as its own
    /// green thread ends ([`Builder::locals_destructor`](crate::Builder::locals_destructor)).
    pub(crate) locals_destructor: Option<unsafe fn(*mut ())>,
    /// The most green threads submitted from outside the workers that may wait to start
    /// (`Builder::max_outside_queued`); `usize::MAX`: no bound.
    pub(crate) max_outside_queued: usize,
    /// `Builder::on_worker_start` and `on_worker_stop`.
    pub(crate) worker_hooks: crate::builder::WorkerHooks,
}

/// Everything the workers of one scheduler share.
pub(crate) struct Shared {
    /// Every possible P, each padded (the P's sit side by side: `Padded`).
    pub(crate) ps: Box<[Padded<P>]>,
    pub(crate) injector: Injector<Entry>,
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
    pub(crate) epoch: Epoch,
    /// Active P's: `ps[..nprocs]` (changed by `Scheduler::set_workers` and by the monitor's
    /// spares; the rest are RETIRED or retiring).
    pub(crate) nprocs: AtomicUsize,
    /// How many of the active P's are spares the monitor added for stalled workers
    /// (`blocking`'s spare workers). Changed only under `resize`'s lock.
    pub(crate) spare_procs: AtomicUsize,
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
    /// Green threads submitted from outside that have not started yet, counted only under a
    /// bound (`Config::max_outside_queued`, the `outside` module's back-pressure).
    pub(crate) outside_queued: AtomicUsize,
    /// Where outside submitters wait for room under the bound.
    pub(crate) outside_room: purloin_parking::ParkingLot,
    /// Entries queued by no-signal spawns since the last flush (`Scheduler::flush`).
    pub(crate) unsignalled: AtomicUsize,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Shared {
        let n = config.workers;
        let max = config.max_workers.max(n) + config.max_spare_workers;
        let ps: Box<[Padded<P>]> = (0..max).map(|i| Padded(P::new(i))).collect();
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
            epoch: Epoch::now(),
            nprocs: AtomicUsize::new(n),
            spare_procs: AtomicUsize::new(0),
            resize: (Mutex::new(()), Condvar::new()),
            threads: Mutex::new(Vec::new()),
            spares: Mutex::new(Vec::new()),
            threads_alive: AtomicUsize::new(0),
            monitor_stop: AtomicBool::new(false),
            poller: crate::poll::PollerSlot::default(),
            monitor: std::sync::OnceLock::new(),
            user_data: std::sync::OnceLock::new(),
            outside_queued: AtomicUsize::new(0),
            outside_room: purloin_parking::ParkingLot::new(),
            unsignalled: AtomicUsize::new(0),
        }
    }

    /// The active processors.
    pub(crate) fn active(&self) -> &[Padded<P>] {
        &self.ps[..self.nprocs.load(Ordering::Acquire)]
    }

    pub(crate) fn nanos_since_epoch(&self, at: Instant) -> u64 {
        self.epoch.nanos(at)
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
    pub(crate) fn notify_work_after_runnext_push(&self, p: &P) {
        match self.idle.worker_to_wake_after_sc_push() {
            Some(to_wake) => self.wake_sleeper(to_wake),
            None => bump(&p.stats.wakes_skipped),
        }
    }

    /// [`Shared::notify_work_from`] for a fork's job, which its joiner runs itself if nobody
    /// takes it: a hint without F1 (see `idle`, I4). Returns whether a worker was woken.
    pub(crate) fn notify_fork_from(&self, p: &P) -> bool {
        match self.idle.worker_to_wake_hint() {
            Some(to_wake) => {
                self.wake_sleeper(to_wake);
                true
            }
            None => {
                bump(&p.stats.wakes_skipped);
                false
            }
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

    /// Queues a runnable G from outside any worker of this scheduler. On a green thread (of
    /// any scheduler) the push runs on its worker's own stack: it may pin crossbeam-epoch,
    /// which may collect garbage (`switch::on_worker_stack`).
    pub(crate) fn push_global(&self, g: GRef) {
        match crate::worker::current_worker() {
            Some(m) => crate::switch::on_worker_stack(m, || self.injector.push(g.into())),
            None => self.injector.push(g.into()),
        }
        self.notify_work();
    }

    /// [`Shared::push_global`] without the wake-up, for a no-signal spawn: counted in
    /// `unsignalled` for the flush that wakes workers for it.
    pub(crate) fn push_global_quiet(&self, g: GRef) {
        match crate::worker::current_worker() {
            Some(m) => crate::switch::on_worker_stack(m, || self.injector.push(g.into())),
            None => self.injector.push(g.into()),
        }
        // N2, Release: a flush on another thread that counts this entry sees it queued (its
        // swap is AcqRel), and so do the workers it wakes.
        self.unsignalled.fetch_add(1, Ordering::Release);
    }

    /// Wakes parked workers for the entries no-signal spawns queued since the last flush:
    /// one per entry, up to every parked worker. Returns how many were woken.
    pub(crate) fn flush(&self) -> usize {
        // N2, AcqRel: pairs with the no-signal spawns' Release increments. F1 (in
        // `wake_for_batch`) orders the queued entries before the idle state it reads.
        let k = self.unsignalled.swap(0, Ordering::AcqRel);
        self.idle.wake_for_batch(k, |p| self.wake_sleeper(p))
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

    /// [`Scheduler::is_quiescent`](crate::Scheduler::is_quiescent): every worker parked,
    /// nothing queued, no timer, I/O wait or blocking section, green threads alive.
    pub(crate) fn quiescent(&self) -> bool {
        let (searching, parked) = self.idle.counts();
        searching == 0
            && parked as usize == self.active().len()
            && self.live() > 0
            && self.injector.is_empty()
            && self.active().iter().all(|p| {
                !p.has_work() && !p.has_pinned() && p.timers.next_deadline(self.epoch).is_none()
            })
            && !self.poller.has_waiters()
            && lock(&self.spares).len() + self.active().len()
                >= self.threads_alive.load(Ordering::Relaxed)
    }

    /// Scheduling rounds of every processor so far: changes while green threads still reach
    /// scheduling points.
    pub(crate) fn sched_ticks(&self) -> u64 {
        self.ps.iter().map(|p| p.schedtick.load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
    }

    pub(crate) fn is_running(&self) -> bool {
        self.phase.load(Ordering::Acquire) == PHASE_RUNNING
    }
}
