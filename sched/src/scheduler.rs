//! The scheduler handle: building it, spawning on it, observing it, shutting it down.
//!
//! # Shutdown
//!
//! Dropping a [`Scheduler`] (or calling [`Scheduler::shutdown_timeout`]) goes through these
//! steps:
//!
//! 1. The phase becomes *draining*: spawns from outside the scheduler fail; green threads may
//!    still spawn (their children are part of finishing).
//! 2. Runnable green threads run to completion; we wait until none is alive, or the timeout,
//!    or nothing pending can wake the ones left (every worker parked, nothing queued, no
//!    timer, I/O wait or blocking section: [`Scheduler::is_quiescent`], seen twice 10 ms
//!    apart), whichever comes first.
//! 3. Green threads still alive are parked ones (or ones that never yield): every parked one is
//!    resumed with a forced unwind ([`ForcedUnwind`](crate::ForcedUnwind)) so its destructors
//!    run, repeatedly (a destructor may park again), until none is alive or a second timeout.
//!    Green threads that still reach scheduling points (yielding, not stuck) extend that
//!    wait, up to 5 s in all. Built with `panic = "abort"`, an unwind would abort the
//!    process: the parked green threads are left parked instead (their stacks leaked), with
//!    one line on stderr.
//! 4. The phase becomes *stopped*; every worker is woken, leaves its loop, and is joined; the
//!    monitor stops. Green threads that never reached a scheduling point are reported as
//!    unfinished and their workers are left running (detached) rather than hanging the caller.

use std::io;
use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use purloin_stack::StackSize;

use crate::g::{self, registry};
use crate::join::JoinHandle;
use crate::stats::{GlobalStats, ProcStats};
use crate::sync::{Arc, Ordering, lock};
use crate::task::TaskCell;
use crate::worker::{self, Config, PHASE_DRAINING, PHASE_STOPPED, Shared, current_worker};

/// Configures and builds a [`Scheduler`].
#[derive(Clone, Debug)]
pub struct Builder {
    config: Config,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// A builder with the defaults: one worker per available CPU, 1 MiB stacks, the monitor
    /// on (blocking handoff after 20 µs, long-runner report after 10 ms).
    pub fn new() -> Builder {
        let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        Builder {
            config: Config {
                workers,
                max_workers: 0,
                stack_size: StackSize::default(),
                thread_name: String::from("purloin-worker"),
                global_queue_interval: 61,
                max_runnext_streak: 3,
                monitor: !cfg!(loom),
                blocking_threshold: Duration::from_micros(20),
                long_run_threshold: Duration::from_millis(10),
                max_threads: 10_000,
            },
        }
    }

    /// Number of processors (P's), i.e. green threads running in parallel (Go's GOMAXPROCS).
    pub fn workers(mut self, n: usize) -> Builder {
        self.config.workers = n;
        self
    }

    /// The most processors [`Scheduler::set_workers`] may grow to (default: the larger of
    /// `workers` and twice the CPU count). Each possible processor costs a few KiB up front.
    pub fn max_workers(mut self, n: usize) -> Builder {
        self.config.max_workers = n;
        self
    }

    /// Default stack size of green threads spawned without an explicit one.
    pub fn stack_size(mut self, size: StackSize) -> Builder {
        self.config.stack_size = size;
        self
    }

    /// Prefix of worker thread names (`<prefix>-<n>`).
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Builder {
        self.config.thread_name = prefix.into();
        self
    }

    /// Enables or disables the monitor thread (blocking handoff and long-runner reports).
    pub fn monitor(mut self, on: bool) -> Builder {
        self.config.monitor = on;
        self
    }

    /// How long a blocking section may hold its worker's processor before the monitor hands
    /// the processor to another thread (default 20 µs).
    pub fn blocking_threshold(mut self, d: Duration) -> Builder {
        self.config.blocking_threshold = d;
        self
    }

    /// How long a green thread may run without a scheduling point before the monitor reports
    /// it (default 10 ms).
    pub fn long_run_threshold(mut self, d: Duration) -> Builder {
        self.config.long_run_threshold = d;
        self
    }

    /// How often (in scheduling ticks) a worker takes from the global queue before its local
    /// one, for fairness (default 61, Go's value). Must be at least 1.
    pub fn global_queue_interval(mut self, ticks: u32) -> Builder {
        self.config.global_queue_interval = ticks;
        self
    }

    /// Upper bound on OS threads the scheduler starts (workers plus blocking handoffs).
    pub fn max_threads(mut self, n: usize) -> Builder {
        self.config.max_threads = n;
        self
    }

    /// The configuration, for the crate's loom models (which build `Shared` without threads).
    #[cfg(all(test, loom))]
    pub(crate) fn config_for_tests(self) -> Config {
        self.config
    }

    /// Starts the workers (and the monitor).
    ///
    /// # Errors
    /// `InvalidInput` for 0 workers, more than 32,767, a global queue interval of 0, a stack
    /// size that cannot be leased (see [`StackSize::validate`]), a thread name with a NUL
    /// byte, or `max_threads` below the worker count; the OS error if a thread cannot be
    /// started.
    pub fn build(self) -> io::Result<Scheduler> {
        let c = &self.config;
        if c.workers == 0 || c.workers > 32_767 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-sched: {} workers requested; use between 1 and 32767 (the default \
                     is one per CPU)",
                    c.workers
                ),
            ));
        }
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let max = if c.max_workers == 0 { c.workers.max(2 * cpus) } else { c.max_workers };
        if max < c.workers || max > 32_767 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-sched: max_workers ({max}) must be between the worker count ({}) \
                     and 32767",
                    c.workers
                ),
            ));
        }
        if c.global_queue_interval == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "purloin-sched: global_queue_interval must be at least 1 tick (Go uses 61)",
            ));
        }
        if c.thread_name.contains('\0') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-sched: Builder::thread_name({:?}) contains a NUL byte, which OS \
                     thread names cannot hold; remove it",
                    c.thread_name
                ),
            ));
        }
        if let Err(e) = c.stack_size.validate() {
            return Err(io::Error::new(
                e.kind(),
                format!("purloin-sched: Builder::stack_size({:?}) is refused: {e}", c.stack_size),
            ));
        }
        if c.max_threads < c.workers {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-sched: max_threads ({}) is below the worker count ({}); raise it",
                    c.max_threads, c.workers
                ),
            ));
        }
        #[cfg(not(loom))]
        {
            purloin_stack::overflow::install_handler()?;
            if purloin_context::valgrind::running_on_valgrind() {
                // purloin-stack may not issue client requests (only purloin-context contains
                // assembly): it calls this hook for every slot it hands out.
                let _ = purloin_stack::valgrind::set_stack_register_hook(register_with_valgrind);
            }
        }
        let mut config = self.config;
        config.max_workers = max;
        let shared = Arc::new(Shared::new(config));
        for p in 0..shared.active().len() {
            if let Err(e) = worker::start_worker(&shared, p) {
                stop_workers(&shared);
                return Err(e);
            }
        }
        let monitor = if shared.config.monitor { start_monitor(&shared)? } else { None };
        Ok(Scheduler { shared, monitor })
    }
}

/// Registers a stack slot with valgrind for good (slots are never unmapped).
#[cfg(not(loom))]
fn register_with_valgrind(start: *mut u8, end: *mut u8) {
    core::mem::forget(purloin_context::valgrind::StackRegistration::new(start, end));
}

#[cfg(not(loom))]
fn start_monitor(shared: &Arc<Shared>) -> io::Result<Option<std::thread::JoinHandle<()>>> {
    let parker = purloin_parking::Parker::new();
    let handle = crate::blocking::MonitorHandle {
        deep_sleep: crate::sync::AtomicBool::new(false),
        unparker: parker.unparker(),
    };
    let _ = shared.monitor.set(handle);
    let s = shared.clone();
    std::thread::Builder::new()
        .name(format!("{}-monitor", shared.config.thread_name))
        .spawn(move || crate::blocking::monitor_main(s, parker))
        .map(Some)
        .map_err(|e| io::Error::new(e.kind(), format!("could not start the monitor thread: {e}")))
}

#[cfg(loom)]
fn start_monitor(_shared: &Arc<Shared>) -> io::Result<Option<std::thread::JoinHandle<()>>> {
    Ok(None)
}

/// Options for one spawn.
#[derive(Clone, Debug, Default)]
pub struct SpawnOptions {
    /// Name for diagnostics.
    pub name: Option<StdArc<str>>,
    /// Stack size; `None` uses the scheduler's default (attached lazily at first run). An
    /// explicit size is leased at spawn, so a failure is reported by the spawn.
    pub stack_size: Option<StackSize>,
    /// Run only on the spawning green thread's worker (never migrate, never stolen).
    pub pinned: bool,
    /// Switch to the new green thread at once; the spawner is re-queued (brpc's start_urgent).
    pub urgent: bool,
}

/// A running G/M/P scheduler. Dropping it shuts it down: runnable green threads finish,
/// parked ones are unwound with [`ForcedUnwind`](crate::ForcedUnwind) so their destructors run
/// (see [`Scheduler::shutdown_timeout`]).
pub struct Scheduler {
    pub(crate) shared: Arc<Shared>,
    monitor: Option<std::thread::JoinHandle<()>>,
}

impl core::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Scheduler").field("workers", &self.shared.active().len()).finish()
    }
}

/// What shutdown did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Parked green threads that were resumed with a forced unwind.
    pub cancelled: usize,
    /// Green threads still alive when shutdown gave up (they never reached a scheduling
    /// point); their workers were detached.
    pub unfinished: usize,
}

/// A parked green thread (see [`Scheduler::parked`]).
#[derive(Clone, Debug)]
pub struct ParkedThread {
    /// Its handle.
    pub thread: crate::GreenThread,
    /// Its name, if it has one.
    pub name: Option<StdArc<str>>,
    /// What it waits on, if the primitive it parked in recorded it.
    pub wait: Option<crate::WaitInfo>,
    /// The child it was running inline (join-helping) when it parked: the wait is the
    /// child's.
    pub running_inline: Option<crate::GreenId>,
}

/// A snapshot of the scheduler's counters.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Per processor.
    pub procs: Vec<ProcStats>,
    /// Sum over processors.
    pub total: ProcStats,
    /// Scheduler-wide counters.
    pub global: GlobalStats,
    /// Green threads alive (spawned, not finished).
    pub live: usize,
    /// Runnable green threads in each processor's local queue (and runnext).
    pub queue_lens: Vec<usize>,
    /// Green threads in the global queue.
    pub global_queue_len: usize,
    /// Workers searching for work right now.
    pub searching: u32,
    /// Workers parked right now.
    pub parked: u32,
    /// OS threads running as workers (including blocking-handoff spares).
    pub threads: usize,
    /// G records allocated in this process (all schedulers; recycled, never freed).
    pub g_records: usize,
}

impl Scheduler {
    /// A scheduler with the default configuration (see [`Builder::new`]).
    pub fn new() -> io::Result<Scheduler> {
        Builder::new().build()
    }

    /// Number of processors.
    pub fn workers(&self) -> usize {
        self.shared.active().len()
    }

    /// Changes the number of processors while the scheduler runs (Go's `procresize`, what
    /// `runtime.GOMAXPROCS(n)` does). Growing starts a worker per new processor. Shrinking
    /// stops the world for the removed processors: their workers finish the green thread they
    /// are running (green threads are not preempted), move their runnable green threads to the
    /// global queue and their timers to processor 0, and exit; this call returns when all of
    /// them have. Green threads are not lost and keep running on the remaining processors.
    ///
    /// # Errors
    /// `n` is 0 or above [`Builder::max_workers`]; a removed processor has pinned green
    /// threads (they may not change OS thread); the scheduler is shutting down; a worker thread
    /// cannot be started.
    pub fn set_workers(&self, n: usize) -> io::Result<()> {
        let s = &self.shared;
        let _resize = lock(&s.resize.0);
        if n == 0 || n > s.ps.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-sched: set_workers({n}): use between 1 and max_workers ({}); raise \
                     Builder::max_workers to grow further",
                    s.ps.len()
                ),
            ));
        }
        if !s.is_running() {
            return Err(io::Error::other(
                "purloin-sched: set_workers: the scheduler is shutting down",
            ));
        }
        let old = s.nprocs.load(Ordering::Acquire);
        if n > old {
            for p in &s.ps[old..n] {
                p.status.store(crate::p::RUNNING, Ordering::Release);
            }
            s.idle.add_workers((n - old) as u32);
            s.nprocs.store(n, Ordering::Release);
            for p in old..n {
                worker::start_worker(&self.shared, p)?;
            }
            return Ok(());
        }
        if let Some(i) = (n..old).find(|&i| s.ps[i].pinned.load(Ordering::Acquire) > 0) {
            return Err(io::Error::other(format!(
                "purloin-sched: set_workers({n}): worker {i} has pinned green threads, which may \
                 not move to another OS thread; let them finish first"
            )));
        }
        // From here, no new work goes to processors n..old (spawns, steals and wake-ups only
        // see the active ones); their workers retire at their next scheduling point.
        s.nprocs.store(n, Ordering::Release);
        drop(_resize);
        for p in n..old {
            s.wake_worker(p);
        }
        let mut guard = lock(&s.resize.0);
        while (n..old).any(|i| s.ps[i].status.load(Ordering::Acquire) != crate::p::RETIRED) {
            for p in n..old {
                s.wake_worker(p);
            }
            guard = match s.resize.1.wait_timeout(guard, Duration::from_millis(10)) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        Ok(())
    }

    /// Spawns a green thread running `f`.
    ///
    /// # Errors
    /// The scheduler is shutting down (spawning from outside), or `opts` asks for an invalid
    /// stack size or one that cannot be mapped, or for a pinned spawn from outside a green
    /// thread of this scheduler.
    pub fn spawn_with<F, T>(&self, opts: SpawnOptions, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn_on(&self.shared, opts, f)
    }

    /// Spawns a green thread running `f` with default options.
    ///
    /// # Panics
    /// If the scheduler is shutting down (use [`Scheduler::spawn_with`] to get the error).
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_with(SpawnOptions::default(), f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A snapshot of the counters (cheap: relaxed loads, no locks except small ones).
    pub fn stats(&self) -> Stats {
        stats_of(&self.shared)
    }

    /// The green threads of this scheduler that are parked now, with what each waits on (a
    /// racy snapshot, for diagnostics and deadlock reports).
    pub fn parked(&self) -> Vec<ParkedThread> {
        parked_of(&self.shared)
    }
}

fn parked_of(shared: &Arc<Shared>) -> Vec<ParkedThread> {
    {
        let me = Arc::as_ptr(shared);
        let mut out = Vec::new();
        registry().for_each(|gref| {
            if !gref.try_ref() {
                return;
            }
            let w = gref.state.load(Ordering::Acquire);
            // SAFETY: we hold a reference: the record is not recycled under us, and `sched`
            // is written only at spawn, before the G is published.
            let ours = unsafe { gref.sched.with(|s| *s) } == me;
            if ours && g::status_of(w) == g::PARKED {
                let thread = crate::GreenThread { g: gref, generation: g::generation_of(w) };
                let inline = gref.inline_child_id.load(crate::sync::STAT);
                out.push(ParkedThread {
                    thread,
                    name: gref.name(),
                    wait: crate::thread::wait_info_of(gref),
                    running_inline: (inline != 0).then_some(crate::GreenId(inline)),
                });
            }
            if gref.drop_ref() {
                g::recycle_anywhere(gref);
            }
        });
        out
    }
}

impl Scheduler {
    /// Asks a green thread of this scheduler to unwind, as shutdown does: if it is parked it
    /// resumes at once, and its `park` (or next one) panics with
    /// [`ForcedUnwind`](crate::ForcedUnwind), running its destructors; its joiner receives the
    /// payload as `Err`. Returns false if the green thread has ended.
    pub fn cancel(&self, thread: &crate::GreenThread) -> bool {
        match thread.g.cancel(thread.generation) {
            g::Unparked::Queue => {
                self.shared.push_global(thread.g);
                true
            }
            g::Unparked::Noted | g::Unparked::Forward => true,
            g::Unparked::Stale => false,
        }
    }

    /// Whether nothing can make progress by itself: every worker is parked, no green thread is
    /// queued, no timer is pending, no I/O is awaited, yet green threads are alive (parked).
    /// Only a wake-up from outside the scheduler (a plain OS thread) could change that; the
    /// runtime's deadlock detector uses it (Go's `checkdead`).
    pub fn is_quiescent(&self) -> bool {
        quiescent(&self.shared)
    }

    /// OS threads outside the scheduler that wait on one of its green threads now (in
    /// [`JoinHandle::join`], or holding an [`OutsideWait`](crate::OutsideWait)): with
    /// [`Scheduler::is_quiescent`], what tells a deadlock from green threads waiting for an OS
    /// thread.
    pub fn outside_waiters(&self) -> usize {
        crate::outside::count(Arc::as_ptr(&self.shared))
    }

    /// Counts the calling OS thread as waiting on a green thread of this scheduler while the
    /// guard lives (for waits the layer above implements, such as a scope's owner).
    pub fn outside_wait(&self) -> crate::OutsideWait {
        crate::OutsideWait::new(Arc::as_ptr(&self.shared))
    }

    /// Attaches data of the layer above to this scheduler, readable from its green threads
    /// with [`with_user_data`]. Can be set once; returns the data back if already set.
    pub fn set_user_data(
        &self,
        data: StdArc<dyn core::any::Any + Send + Sync>,
    ) -> Result<(), StdArc<dyn core::any::Any + Send + Sync>> {
        self.shared.user_data.set(data)
    }

    /// Installs the I/O poller the workers poll (the runtime's netpoller).
    pub fn set_poller(&self, poller: StdArc<dyn crate::Poller>) {
        self.shared.poller.install(poller);
    }

    /// Shuts down, waiting at most `timeout` for runnable green threads to finish before
    /// unwinding the parked ones (and as long again for those to finish).
    ///
    /// The steps: (1) spawns from outside start failing; green threads may still spawn;
    /// (2) runnable green threads run to completion, until none is alive, or `timeout`, or
    /// nothing pending can wake the rest ([`Scheduler::is_quiescent`]);
    /// (3) every parked green thread is resumed with a forced unwind, repeatedly (a destructor
    /// may park again), until none is alive or a second timeout; (4) every worker is woken,
    /// leaves its loop and is joined, and the monitor stops. Green threads that never reached a
    /// scheduling point are counted in [`ShutdownReport::unfinished`] and their workers are left
    /// running (detached) rather than hanging the caller.
    ///
    /// # Panics
    /// If called from one of this scheduler's own green threads (it would wait for itself).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> ShutdownReport {
        self.shutdown_inner(timeout)
    }

    fn shutdown_inner(&mut self, timeout: Duration) -> ShutdownReport {
        let shared = self.shared.clone();
        if shared.phase.load(Ordering::Acquire) == PHASE_STOPPED {
            return ShutdownReport::default();
        }
        if current_worker().is_some_and(|m| Arc::ptr_eq(&m.shared, &shared)) {
            panic!(
                "purloin-sched: a scheduler cannot be shut down from one of its own green \
                 threads (it would wait for itself); drop it from the thread that owns it"
            );
        }
        shared.phase.store(PHASE_DRAINING, Ordering::Release);
        shared.wake_all();
        let mut report = ShutdownReport::default();
        let all_done = wait_all_done(&shared, timeout);
        if !all_done && cfg!(panic = "abort") {
            // A forced unwind is a panic, which aborts the process under `panic = "abort"`:
            // leave the parked green threads parked (their stacks and captures are leaked).
            report.unfinished = shared.live();
            eprintln!(
                "purloin: {} green threads were still alive at shutdown and were not unwound \
                 (panic = \"abort\" cannot unwind them); their stacks are leaked",
                report.unfinished
            );
        } else if !all_done {
            let wait = timeout.max(Duration::from_millis(100));
            let mut deadline = Instant::now() + wait;
            // Green threads still running and reaching scheduling points (yielding, not
            // stuck) get more time, up to this bound: a short grace is meant for parked ones.
            let hard_deadline = Instant::now() + wait.max(BUSY_SHUTDOWN_BOUND);
            let (mut ticks, mut live) = (sched_ticks(&shared), shared.live());
            loop {
                report.cancelled += cancel_parked(&shared);
                if wait_all_done(&shared, Duration::from_millis(10)) {
                    break;
                }
                let now = Instant::now();
                let (now_ticks, now_live) = (sched_ticks(&shared), shared.live());
                // Progress: scheduling rounds, or green threads finishing (an unwinding one
                // may take a while, printing its panic, without a scheduling point).
                if now_ticks != ticks || now_live < live {
                    (ticks, live) = (now_ticks, now_live);
                    deadline = deadline.max((now + wait).min(hard_deadline));
                }
                if now >= deadline {
                    report.unfinished = shared.live();
                    break;
                }
            }
        }
        shared.phase.store(PHASE_STOPPED, Ordering::Release);
        stop_workers(&shared);
        shared.monitor_stop.store(true, Ordering::Release);
        if let Some(mon) = shared.monitor.get() {
            mon.unparker.unpark();
        }
        if let Some(h) = self.monitor.take() {
            let _ = h.join();
        }
        if report.unfinished == 0 {
            let threads = core::mem::take(&mut *lock(&shared.threads));
            for t in threads {
                let _ = t.join();
            }
            drain_queues(&shared, true);
        } else {
            // The workers of the green threads that never yield are detached, but what is
            // queued behind them is failed with `Cancelled`, so its joiners do not wait
            // forever; only the stuck green threads themselves stay unfinished.
            drain_queues(&shared, false);
            report.unfinished = shared.live();
        }
        report
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if std::thread::panicking()
            && current_worker().is_some_and(|m| Arc::ptr_eq(&m.shared, &self.shared))
        {
            // Unwinding from `shutdown_timeout`'s panic on one of our own green threads: a
            // second panic here would abort. The scheduler keeps running (leaked).
            return;
        }
        if self.shared.phase.load(Ordering::Acquire) != PHASE_STOPPED {
            let report = self.shutdown_inner(Duration::from_secs(5));
            if report.unfinished > 0 {
                eprintln!(
                    "purloin: {} green threads did not finish at shutdown (they never reached \
                     a scheduling point); their worker threads were detached",
                    report.unfinished
                );
            }
        }
    }
}

/// Spawns on `shared` (the body of every spawn function).
pub(crate) fn spawn_on<F, T>(
    shared: &Arc<Shared>,
    opts: SpawnOptions,
    f: F,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (task, packet) = TaskCell::allocate(f);
    let inline_stack = if opts.pinned || opts.stack_size.is_some() {
        None
    } else {
        Some(shared.config.stack_size.bytes())
    };
    // Before `spawn_g`: an urgent spawn switches, after which `shared` (possibly borrowed from
    // the spawning worker) is not to be used.
    let sched = Arc::as_ptr(shared);
    let (thread, lazy) = match worker::spawn_lazy(shared, &opts, task) {
        Ok(()) => (std::sync::OnceLock::new(), true),
        // On an error `task` is dropped unrun (its packet completes with `Cancelled`) and so
        // is `packet`, which then frees the cell.
        Err(task) => {
            let t = worker::spawn_g(shared, crate::stackless::Entry::Green(task), &opts)?;
            (std::sync::OnceLock::from(t), false)
        }
    };
    Ok(JoinHandle { task: packet, thread, lazy, sched, inline_stack, registered: None })
}

/// [`Scheduler::is_quiescent`] of `s`.
fn quiescent(s: &Shared) -> bool {
    let (searching, parked) = s.idle.counts();
    searching == 0
        && parked as usize == s.active().len()
        && s.live() > 0
        && s.injector.is_empty()
        && s.active()
            .iter()
            .all(|p| !p.has_work() && !p.has_pinned() && p.next_timer_deadline(s).is_none())
        && !s.poller.has_waiters()
        && lock(&s.spares).len() + s.active().len() >= s.threads_alive.load(Ordering::Relaxed)
}

/// How long shutdown keeps waiting for green threads that still reach scheduling points
/// after the parked ones were unwound (see `shutdown_inner`).
const BUSY_SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// Scheduling rounds of every processor so far: changes while green threads still reach
/// scheduling points.
fn sched_ticks(shared: &Shared) -> u64 {
    shared.ps.iter().map(|p| p.schedtick.load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
}

fn wait_all_done(shared: &Shared, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    // F5 (pairs with F6 in `note_finished`, or F2 of a worker's next park): the phase was
    // stored before this call.
    shared.fence_before_live_check();
    let mut guard = lock(&shared.all_done.0);
    let mut quiet = 0;
    loop {
        if shared.live() == 0 {
            return true;
        }
        // Nothing pending can wake the green threads still alive (every worker parked, no
        // queued work, timer, I/O wait or blocking section): waiting longer cannot help, so
        // their unwinding starts now. Seen twice, 10 ms apart, so a wake-up in flight between
        // a worker's park and its next search is not mistaken for quiescence.
        if quiescent(shared) {
            quiet += 1;
            if quiet >= 2 {
                return false;
            }
        } else {
            quiet = 0;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        // Re-check at least every 10 ms: the notification comes from `note_finished`.
        let wait = (deadline - now).min(Duration::from_millis(10));
        guard = match shared.all_done.1.wait_timeout(guard, wait) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        };
    }
}

/// Resumes every parked green thread of `shared` with a forced unwind. Returns how many.
fn cancel_parked(shared: &Arc<Shared>) -> usize {
    let me = Arc::as_ptr(shared);
    let mut n = 0;
    registry().for_each(|gref| {
        if !gref.try_ref() {
            return;
        }
        let w = gref.state.load(Ordering::Acquire);
        // SAFETY: we hold a reference, so the record is not recycled under us; `sched` is
        // written only at spawn, before the G is published.
        let ours = unsafe { gref.sched.with(|s| *s) } == me;
        if ours && g::status_of(w) == g::PARKED {
            let generation = g::generation_of(w);
            if gref.cancel(generation) == g::Unparked::Queue {
                n += 1;
                shared.push_global(gref);
            }
        }
        if gref.drop_ref() {
            g::recycle_anywhere(gref);
        }
    });
    n
}

fn stop_workers(shared: &Arc<Shared>) {
    shared.phase.store(PHASE_STOPPED, Ordering::Release);
    shared.lots.stop();
    // A worker blocked in the I/O poller is not on a lot: wake the poller too.
    shared.poller.wake_blocked();
    for s in lock(&shared.spares).iter() {
        s.wake();
    }
}

/// After every worker stopped: drop queue entries left behind (stale entries of children run
/// inline, whose records wait for them). With `workers_stopped` false (shutdown gave up on
/// green threads that never yield, whose workers still run them), only what a thief may take
/// is taken (queues and runnext; not the P's caches).
fn drain_queues(shared: &Shared, workers_stopped: bool) {
    let mut pending = Vec::new();
    while let purloin_deque::Steal::Success(g) = shared.injector.steal() {
        pending.push(g);
    }
    for p in shared.ps.iter() {
        while let purloin_deque::Steal::Success(g) = p.stealer.steal() {
            pending.push(g);
        }
        pending.extend(p.take_runnext());
        if !workers_stopped {
            continue;
        }
        // SAFETY: every worker has stopped: nobody holds the P any more.
        let cached: Vec<_> = p.free_gs.with_mut(|v| unsafe { core::mem::take(&mut *v) });
        registry().give_free(cached);
    }
    for g in pending {
        if let Some(job) = g.job() {
            // A fork-join job nobody started (shutdown gave up on its joiner's worker): fail
            // it so its joiner, if it ever resumes, sees the job done.
            // SAFETY: the slot outlives the entry (see `GRef::for_job`).
            unsafe { (*job.as_ptr()).as_ref() }.fail(Box::new(crate::Cancelled));
            continue;
        }
        if let Some(cell) = g.task_cell() {
            // A lazily spawned green thread that never ran. Not expected (a queued task counts
            // as live, and the queues are drained only when nothing is), but handled as a
            // fork-join job is: release the G a handle may have made for it, then fail the
            // task (its joiner gets `Cancelled`).
            // SAFETY: we dequeued the entry: we own the cell's G side, so the cell is live.
            let head = unsafe { &*cell.cast::<crate::task::CellHead>().as_ptr() };
            if let Some(t) = head.identity.end_unstarted()
                && t.g.claim_for_run()
            {
                t.g.finish_run();
                if t.g.drop_ref() {
                    g::recycle_anywhere(t.g);
                }
            }
            // SAFETY: as above.
            drop(unsafe { crate::task::OwnedTask::from_cell(cell) });
            shared.note_finished(None);
            continue;
        }
        if g.claim_for_run() {
            // A runnable G that never ran (only possible if shutdown gave up on others).
            // SAFETY: we claimed it: we own its cells.
            if let Some(task) = unsafe { g.task.with_mut(|t| (*t).take()) } {
                task.fail(Box::new(crate::Cancelled));
            }
            g.finish_run();
            // SAFETY: as above.
            if !unsafe { g.uncounted.with(|u| *u) } {
                shared.note_finished(None);
            }
        }
        if g.drop_ref() {
            g::recycle_anywhere(g);
        }
    }
}

pub(crate) fn stats_of(shared: &Shared) -> Stats {
    let procs: Vec<ProcStats> = shared.active().iter().map(|p| p.stats.snapshot()).collect();
    let mut total = ProcStats::default();
    for p in &procs {
        total += *p;
    }
    let (searching, parked) = shared.idle.counts();
    let mut global = shared.stats.snapshot();
    global.wakes_skipped += total.wakes_skipped;
    Stats {
        total,
        procs,
        global,
        live: shared.live(),
        queue_lens: shared.active().iter().map(|p| p.queue_len()).collect(),
        global_queue_len: shared.injector.len(),
        searching,
        parked,
        threads: shared.threads_alive.load(Ordering::Relaxed),
        g_records: registry().allocated(),
    }
}

/// Spawns on the scheduler running the current green thread.
///
/// # Errors
/// Not on a green thread (use [`Scheduler::spawn_with`] from plain threads), or the reasons of
/// [`Scheduler::spawn_with`].
pub fn spawn_with<F, T>(opts: SpawnOptions, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let Some(m) = current_worker() else {
        return Err(io::Error::other(
            "purloin-sched: spawn() outside a green thread has no scheduler to use; call \
             Scheduler::spawn on a Scheduler (or use the purloin facade, which starts one)",
        ));
    };
    // No clone of the Arc: a read-modify-write of the scheduler's shared reference count on
    // every spawn would bounce its cache line between the workers.
    spawn_on(&m.shared, opts, f)
}

/// Calls `f` with the data attached (by [`Scheduler::set_user_data`]) to the scheduler running
/// the current green thread, or with `None` outside a green thread (or if none was attached).
pub fn with_user_data<R>(f: impl FnOnce(Option<&(dyn core::any::Any + Send + Sync)>) -> R) -> R {
    match current_worker() {
        Some(m) => f(m.shared.user_data.get().map(|a| &**a)),
        None => f(None),
    }
}

/// A snapshot of the counters of the scheduler running the current green thread (or whose
/// worker runs this code), or `None` elsewhere.
pub fn current_stats() -> Option<Stats> {
    current_worker().map(|m| stats_of(&m.shared))
}

/// The parked green threads of the scheduler running the current green thread (see
/// [`Scheduler::parked`]), or `None` outside a worker.
pub fn current_parked() -> Option<Vec<ParkedThread>> {
    current_worker().map(|m| parked_of(&m.shared))
}
