//! Configuring a scheduler: [`Builder`] (validated when built) and [`SpawnOptions`].
//!
//! Every check names the value, the allowed range and the fix ("use between 1 and 32767
//! (the default is one per CPU)"), so a misconfiguration fails at `build` with a message a
//! user can act on, never later in a worker.

use std::io;
use std::sync::Arc as StdArc;
use std::time::Duration;

use purloin_stack::StackSize;

use crate::scheduler::Scheduler;
use crate::shared::Config;

/// Configures and builds a [`Scheduler`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use purloin_sched::{Builder, StackSize};
///
/// let sched = Builder::new()
///     .workers(2)
///     .stack_size(StackSize::Small)
///     .thread_name("app-worker")
///     .blocking_threshold(Duration::from_micros(50))
///     .build()
///     .unwrap();
/// assert_eq!(sched.workers(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    config: Config,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

/// [`Builder::max_spare_workers`]'s default.
const DEFAULT_SPARE_WORKERS: usize = 32;

impl Builder {
    /// A builder with the defaults: one worker per available CPU, 128 KiB stacks, the monitor
    /// on (blocking handoff after 20 µs, long-runner report after 10 ms).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().build().unwrap();
    /// let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    /// assert_eq!(sched.workers(), cpus);
    /// ```
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
                max_spare_workers: if cfg!(loom) { 0 } else { DEFAULT_SPARE_WORKERS },
                park_histogram: false,
                locals_destructor: None,
                max_outside_queued: usize::MAX,
                worker_hooks: WorkerHooks::default(),
            },
        }
    }

    /// Number of processors (P's), i.e. green threads running in parallel (Go's GOMAXPROCS).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().workers(3).build().unwrap();
    /// assert_eq!(sched.workers(), 3);
    /// ```
    pub fn workers(mut self, n: usize) -> Builder {
        self.config.workers = n;
        self
    }

    /// The most processors [`Scheduler::set_workers`] may grow to (default: the larger of
    /// `workers` and twice the CPU count). Each possible processor costs a few KiB up front.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::Builder;
    ///
    /// let sched = Builder::new().workers(1).max_workers(2).build().unwrap();
    /// sched.set_workers(2).unwrap();
    /// assert!(sched.set_workers(3).is_err()); // above max_workers
    /// ```
    pub fn max_workers(mut self, n: usize) -> Builder {
        self.config.max_workers = n;
        self
    }

    /// Default stack size of green threads spawned without an explicit one.
    ///
    /// A green thread's stack holds its own frames and those of the runtime calls it makes
    /// (spawn, park, wake-ups), which are shallow; the runtime's deep paths (a spawn that
    /// spills a full queue into the global queue, whose memory reclamation may collect
    /// garbage) run on the worker's own stack. An overflow is reported and ends the process
    /// (it is never silent).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::{Builder, StackSize};
    ///
    /// let sched = Builder::new().stack_size(StackSize::Bytes(256 * 1024)).build().unwrap();
    /// assert_eq!(sched.spawn(|| 7).join().unwrap(), 7);
    ///
    /// // A size no stack can have is refused when the scheduler is built.
    /// assert!(Builder::new().stack_size(StackSize::Bytes(0)).build().is_err());
    /// ```
    pub fn stack_size(mut self, size: StackSize) -> Builder {
        self.config.stack_size = size;
        self
    }

    /// Prefix of worker thread names (`<prefix>-<n>`).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::Builder;
    ///
    /// let sched = Builder::new().thread_name("db-worker").build().unwrap();
    /// // Green threads run on the workers, whose OS threads carry the prefix.
    /// let name = sched.spawn(|| std::thread::current().name().map(String::from)).join();
    /// assert!(name.unwrap().unwrap().starts_with("db-worker"));
    ///
    /// assert!(Builder::new().thread_name("bad\0name").build().is_err());
    /// ```
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Builder {
        self.config.thread_name = prefix.into();
        self
    }

    /// Enables or disables the monitor thread (blocking handoff and long-runner reports).
    ///
    /// # Examples
    ///
    /// ```
    /// // Without the monitor a blocking call keeps its worker's processor; fine for a
    /// // scheduler whose green threads never block.
    /// let sched = purloin_sched::Builder::new().monitor(false).build().unwrap();
    /// assert_eq!(sched.spawn(|| 1 + 1).join().unwrap(), 2);
    /// ```
    pub fn monitor(mut self, on: bool) -> Builder {
        self.config.monitor = on;
        self
    }

    /// Records how long green threads stay parked, in a histogram per processor
    /// ([`Stats::park_durations`](crate::Stats::park_durations), [`ParkHistogram`](crate::ParkHistogram));
    /// default off.
    ///
    /// Each park then reads the OS clock twice (when the green thread switches out and when it
    /// is back), a few dozen instructions and some tens of nanoseconds on a path that costs
    /// about a hundred: worth it to see the latency of waits in a server, too much to pay
    /// always. Off, a park pays one predictable branch.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().park_histogram(true).build().unwrap();
    /// let h = sched.spawn(|| purloin_sched::sleep(std::time::Duration::from_millis(1)));
    /// h.join().unwrap();
    /// assert!(sched.stats().park_histogram().unwrap().count() >= 1);
    /// ```
    pub fn park_histogram(mut self, on: bool) -> Builder {
        self.config.park_histogram = on;
        self
    }

    /// How long a blocking section may hold its worker's processor before the monitor hands
    /// the processor to another thread (default 20 µs).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let sched = purloin_sched::Builder::new()
    ///     .blocking_threshold(Duration::from_millis(1))
    ///     .build()
    ///     .unwrap();
    /// # drop(sched);
    /// ```
    pub fn blocking_threshold(mut self, d: Duration) -> Builder {
        self.config.blocking_threshold = d;
        self
    }

    /// How long a green thread may run without a scheduling point before the monitor asks it
    /// to yield at its next [`preemption_point`](crate::preemption_point) (default 10 ms). One
    /// that runs on for a quarter of this more CPU time without reaching one is reported on
    /// stderr and counted in [`GlobalStats::long_runners`](crate::GlobalStats::long_runners), as is
    /// one that blocks its worker's OS thread in the kernel for this long.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // A batch job whose green threads compute for a while between scheduling points.
    /// let sched = purloin_sched::Builder::new()
    ///     .long_run_threshold(Duration::from_secs(1))
    ///     .build()
    ///     .unwrap();
    /// # drop(sched);
    /// ```
    pub fn long_run_threshold(mut self, d: Duration) -> Builder {
        self.config.long_run_threshold = d;
        self
    }

    /// How often (in scheduling ticks) a worker takes from the global queue before its local
    /// one, for fairness (default 61, Go's value). Must be at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::Builder;
    ///
    /// assert!(Builder::new().global_queue_interval(31).build().is_ok());
    /// assert!(Builder::new().global_queue_interval(0).build().is_err());
    /// ```
    pub fn global_queue_interval(mut self, ticks: u32) -> Builder {
        self.config.global_queue_interval = ticks;
        self
    }

    /// Upper bound on OS threads the scheduler starts (workers plus blocking handoffs).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::Builder;
    ///
    /// assert!(Builder::new().workers(2).max_threads(64).build().is_ok());
    /// let err = Builder::new().workers(2).max_threads(1).build().unwrap_err();
    /// assert!(err.to_string().contains("max_threads"));
    /// ```
    pub fn max_threads(mut self, n: usize) -> Builder {
        self.config.max_threads = n;
        self
    }

    /// The most *spare workers* the monitor may add while workers are stalled (default 32;
    /// 0 turns them off).
    ///
    /// A worker is stalled when one green thread has kept it from every scheduling point for
    /// a while: blocked in a call nobody wrapped in [`blocking`](crate::blocking) (a std
    /// lock, `std::thread::sleep`, blocking file or socket I/O, a foreign call), seen as one
    /// continuous kernel wait of its OS thread for 1 ms, or computing for the
    /// [long-run threshold](Builder::long_run_threshold) while the queues stand still (no
    /// worker takes work from anyone, no spawn adds any). If runnable green threads wait (on its processor or in the global queue)
    /// and no worker is idle to take them, the monitor adds a processor with a new worker
    /// thread, which steals them; the stalled green thread keeps its worker and processor
    /// and carries on when its call returns. Spares beyond the stalled workers retire once
    /// they have been idle for 200 ms, and their threads end. Pinned green threads of a
    /// stalled worker cannot move and wait for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let sched = purloin_sched::Builder::new().workers(1).max_spare_workers(4).build().unwrap();
    /// // An unmarked blocking call does not stop the other green threads for long.
    /// let sleeper = sched.spawn(|| std::thread::sleep(Duration::from_millis(200)));
    /// let other = sched.spawn(|| 7);
    /// assert_eq!(other.join().unwrap(), 7);
    /// sleeper.join().unwrap();
    /// ```
    pub fn max_spare_workers(mut self, n: usize) -> Builder {
        self.config.max_spare_workers = n;
        self
    }

    /// Frees the local-storage pointer ([`set_current_locals`](crate::set_current_locals)) of
    /// the second closure of a [`join`](crate::join) that another worker stole and ran as a
    /// green thread of its own: called on that green thread's stack when the closure returns
    /// or unwinds, before the joiner sees its result, while the pointer is non-null (again if
    /// the destructor set a new one). A closure run by its joiner shares the joiner's locals
    /// and calls nothing. Green threads started by `spawn` are the spawner's to clean up (wrap
    /// the body). Without a destructor, such a pointer is left behind when the job ends.
    ///
    /// The scheduler calls `f` only with a non-null pointer that a green thread stored with
    /// `set_current_locals` and that is detached from it at the call (the green thread's
    /// pointer is null again), once per stored pointer: `f` may take ownership of it.
    ///
    /// # Examples
    ///
    /// ```
    /// /// # Safety
    /// /// `ptr` is a detached pointer from `Box::<String>::into_raw`.
    /// unsafe fn free(ptr: *mut ()) {
    ///     // SAFETY: the caller passes a pointer from `Box::<String>::into_raw` (contract above).
    ///     drop(unsafe { Box::from_raw(ptr.cast::<String>()) });
    /// }
    ///
    /// let sched = purloin_sched::Builder::new().locals_destructor(free).build().unwrap();
    /// let r = sched.spawn(|| {
    ///     let joiner = purloin_sched::current().unwrap().id();
    ///     purloin_sched::join(
    ///         || 1,
    ///         move || {
    ///             if purloin_sched::current().unwrap().id() != joiner {
    ///                 // Stolen: a green thread of its own, whose locals `free` frees.
    ///                 let mine = Box::into_raw(Box::new(String::from("scratch")));
    ///                 purloin_sched::set_current_locals(mine.cast());
    ///             }
    ///             2
    ///         },
    ///     )
    /// });
    /// assert_eq!(r.join().unwrap(), (1, 2));
    /// ```
    pub fn locals_destructor(mut self, f: unsafe fn(*mut ())) -> Builder {
        self.config.locals_destructor = Some(f);
        self
    }

    /// Bounds how many green threads submitted from outside the scheduler's workers (from
    /// `main`, a plain OS thread, a green thread of another scheduler) may wait to start at
    /// once (default: no bound), so a producer that submits faster than the workers serve
    /// sheds load instead of growing the global queue without limit (brpc's full remote
    /// queue).
    ///
    /// A green thread holds its place from its spawn until it starts running (or is dropped
    /// unrun at shutdown). When all `n` are taken, [`Scheduler::try_spawn`] returns
    /// [`TrySpawnError::Full`](crate::TrySpawnError::Full) with the closure, and
    /// [`Scheduler::spawn`] / [`Scheduler::spawn_with`] block the calling OS thread until a
    /// place frees up. Spawns from the scheduler's own green threads are not counted: they
    /// queue on their worker, which runs them itself, and blocking them could stop the
    /// very green threads that free places.
    ///
    /// No bound by default because a bound changes what `spawn` does: a program that spawns
    /// a burst from `main` and releases it only afterwards would block in `spawn`. Choose one
    /// when outside submissions come from a source that does not wait for them (accepted
    /// connections, requests from another system), at a few times what the workers start
    /// per latency budget; `n` must be at least 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use purloin_sched::{Builder, TrySpawnError};
    ///
    /// let sched =
    ///     Builder::new().workers(1).max_spare_workers(0).max_outside_queued(2).build().unwrap();
    /// // Keep the one worker busy, so nothing submitted from here starts.
    /// let (started, release) = (mpsc::channel(), mpsc::channel::<()>());
    /// let busy = sched.spawn(move || {
    ///     started.0.send(()).unwrap();
    ///     release.1.recv().unwrap();
    /// });
    /// started.1.recv().unwrap();
    /// let queued = [sched.try_spawn(|| 1).unwrap(), sched.try_spawn(|| 2).unwrap()];
    /// match sched.try_spawn(|| 3) {
    ///     Err(TrySpawnError::Full(f)) => drop(f), // shed it
    ///     other => panic!("a third may not wait: {other:?}"),
    /// }
    /// release.0.send(()).unwrap();
    /// busy.join().unwrap();
    /// assert_eq!(queued.map(|h| h.join().unwrap()), [1, 2]);
    ///
    /// assert!(Builder::new().max_outside_queued(0).build().is_err());
    /// ```
    pub fn max_outside_queued(mut self, n: usize) -> Builder {
        self.config.max_outside_queued = n;
        self
    }

    /// Calls `f` on every worker OS thread of the scheduler when it starts, before it runs any
    /// green thread, with the thread's worker number (brpc's `run_worker_startfn`, tokio's
    /// `on_thread_start`): to set CPU affinity, a thread priority or thread-locals of a
    /// library the green threads use.
    ///
    /// Every worker thread calls it, also the ones started later: by
    /// [`Scheduler::set_workers`], for a processor handed off from a worker blocked in a
    /// system call, and spare workers the monitor adds for stalled ones
    /// ([`max_spare_workers`](Self::max_spare_workers)). The number is the one at the end of
    /// the thread's name ([`thread_name`](Self::thread_name)): 0, 1, 2, ... in the order the
    /// scheduler started its threads, never reused, so it is not a processor index (a spare
    /// thread may later hold any processor).
    ///
    /// The thread holds a processor while `f` runs, which runs nothing else meanwhile: keep it
    /// short. `f` runs before the thread becomes a worker: the scheduler's functions see a
    /// plain thread (a spawn goes to the global queue, a park blocks the OS thread). A panic
    /// in `f` is caught and reported on stderr with the worker's name, and the worker goes on
    /// (it does not take its processor down with it).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let s = started.clone();
    /// let sched = purloin_sched::Builder::new()
    ///     .workers(2)
    ///     .on_worker_start(move |_worker| {
    ///         s.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// sched.spawn(|| ()).join().unwrap();
    /// drop(sched); // shuts down: every worker thread has ended
    /// assert!(started.load(Ordering::Relaxed) >= 2); // one per worker thread (spares too)
    /// ```
    pub fn on_worker_start(mut self, f: impl Fn(usize) + Send + Sync + 'static) -> Builder {
        self.config.worker_hooks.start = Some(StdArc::new(f));
        self
    }

    /// Calls `f` on every worker OS thread when it ends, after it ran its last green thread,
    /// with the thread's worker number (tokio's `on_thread_stop`; see
    /// [`on_worker_start`](Self::on_worker_start) for which threads and numbers). A worker
    /// thread ends at shutdown, when [`Scheduler::set_workers`] removes its processor, and
    /// when a spare retires. Shutdown waits for the hooks of the threads it waits for. A panic
    /// in `f` is caught and reported on stderr.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// let stopped = Arc::new(AtomicUsize::new(0));
    /// let s = stopped.clone();
    /// let sched = purloin_sched::Builder::new()
    ///     .workers(2)
    ///     .on_worker_stop(move |_worker| {
    ///         s.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// sched.spawn(|| ()).join().unwrap();
    /// drop(sched);
    /// assert!(stopped.load(Ordering::Relaxed) >= 2); // one per worker thread (spares too)
    /// ```
    pub fn on_worker_stop(mut self, f: impl Fn(usize) + Send + Sync + 'static) -> Builder {
        self.config.worker_hooks.stop = Some(StdArc::new(f));
        self
    }

    /// The configuration, for the crate's loom models (which build `Shared` without threads).
    #[cfg(all(test, loom))]
    pub(crate) fn config_for_tests(self) -> Config {
        self.config
    }

    /// Validates the configuration and starts the workers (and the monitor).
    ///
    /// # Errors
    /// `InvalidInput` for 0 workers, more than 32,767, a global queue interval of 0, a stack
    /// size that cannot be leased (see [`StackSize::validate`]), a thread name with a NUL
    /// byte, or `max_threads` below the worker count; the OS error if a thread cannot be
    /// started.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::Builder;
    ///
    /// let err = Builder::new().workers(0).build().unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    ///
    /// let sched = Builder::new().workers(1).build().unwrap();
    /// assert_eq!(sched.workers(), 1);
    /// ```
    pub fn build(self) -> io::Result<Scheduler> {
        Scheduler::start(self.validated()?)
    }

    /// The configuration with `max_workers` resolved, or the first invalid setting.
    fn validated(self) -> io::Result<Config> {
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
        if max + c.max_spare_workers > 32_767 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-sched: max_workers ({max}) plus max_spare_workers ({}) is above \
                     32767; lower either",
                    c.max_spare_workers
                ),
            ));
        }
        if c.max_outside_queued == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "purloin-sched: max_outside_queued(0) would refuse every spawn from outside the \
                 workers; use at least 1, or leave it unset for no bound",
            ));
        }
        let mut config = self.config;
        config.max_workers = max;
        Ok(config)
    }
}

/// A worker thread hook ([`Builder::on_worker_start`], [`Builder::on_worker_stop`]).
pub(crate) type WorkerHook = StdArc<dyn Fn(usize) + Send + Sync>;

/// The worker thread hooks of a scheduler.
#[derive(Clone, Default)]
pub(crate) struct WorkerHooks {
    pub(crate) start: Option<WorkerHook>,
    pub(crate) stop: Option<WorkerHook>,
}

impl core::fmt::Debug for WorkerHooks {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WorkerHooks")
            .field("start", &self.start.is_some())
            .field("stop", &self.stop.is_some())
            .finish()
    }
}

impl WorkerHooks {
    /// Runs `hook` (the `which` hook: "start" or "stop") for worker thread `worker` on this
    /// thread; a panic is caught and reported, so the worker goes on.
    pub(crate) fn run(hook: &Option<WorkerHook>, which: &str, worker: usize) {
        let Some(f) = hook else { return };
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(worker)));
        if let Err(payload) = ran {
            let msg = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a non-string payload");
            let name = std::thread::current().name().unwrap_or("a worker").to_owned();
            eprintln!(
                "purloin: the on_worker_{which} hook panicked on worker thread {name} \
                 (number {worker}): {msg}; the worker goes on without it (catch the panic in \
                 the hook to handle it yourself)"
            );
        }
    }
}

/// Options for one spawn.
///
/// # Examples
///
/// ```
/// use purloin_sched::{Scheduler, SpawnOptions};
///
/// let sched = Scheduler::new().unwrap();
/// let opts = SpawnOptions { name: Some("worker-7".into()), ..SpawnOptions::default() };
/// let h = sched.spawn_with(opts, || purloin_sched::current().unwrap().name()).unwrap();
/// assert_eq!(h.join().unwrap().as_deref(), Some("worker-7"));
/// ```
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
    /// Queue the green thread without waking an idle worker for it (brpc's
    /// `BTHREAD_NOSIGNAL`): a producer that spawns a batch pays for the wake-ups once, in
    /// [`Scheduler::flush`] (or [`flush`](crate::flush) from a green thread), which wakes
    /// one parked worker per green thread queued this way. Until then the batch runs only
    /// when a worker comes by for other reasons: the spawning green thread's own worker once
    /// it parks or yields, or a worker woken for other work. Flush after the batch.
    pub nosignal: bool,
}
