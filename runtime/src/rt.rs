//! The runtime: a scheduler plus what the facade adds (the netpoller, deadlock detection,
//! `PURLOIN_SCHEDTRACE`), built explicitly with [`Builder`] or created lazily as the global
//! runtime the first time a plain OS thread spawns (brpc's TaskControl: double-checked,
//! created once).

use std::io;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use purloin_sched::{Scheduler, ShutdownReport, StackSize};

use crate::current::{RuntimeData, with_current};
use crate::{JoinHandle, Stats};

/// Configures a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    sched: purloin_sched::Builder,
    deadlock_detection: bool,
    deadlock_grace: Duration,
    schedtrace: Option<Duration>,
    shutdown_grace: Duration,
    #[cfg_attr(loom, allow(dead_code))]
    trace: Option<std::path::PathBuf>,
}

/// [`Builder::shutdown_grace`]'s default. Under loom a real-time deadline that one
/// execution of a model reaches and another does not (loom runs slowly, on a loaded machine)
/// makes the model nondeterministic ("Reached unexpected exploration state"): the models get
/// a grace no execution reaches (loom's condvar waits never time out anyway).
const DEFAULT_SHUTDOWN_GRACE: Duration =
    if cfg!(loom) { Duration::from_secs(3600) } else { Duration::from_millis(250) };

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// The defaults: one worker per CPU, 128 KiB stacks, the monitor on, deadlock detection on
    /// (grace 1 s), no schedtrace, no park histogram, no trace — each overridden by its
    /// `PURLOIN_*` environment variable when set (see the table in the crate docs,
    /// "Configuration"): `PURLOIN_WORKERS`, `PURLOIN_STACK_SIZE`, `PURLOIN_DEADLOCK`,
    /// `PURLOIN_SCHEDTRACE`, `PURLOIN_PARK_HISTOGRAM` (and `PURLOIN_TRACE`, read by
    /// [`Builder::build`]). The builder's methods override the environment, as Go's
    /// `runtime.GOMAXPROCS` overrides `GOMAXPROCS`. A value that does not parse is ignored with
    /// a warning on stderr naming the accepted form, once per variable.
    ///
    /// # Examples
    ///
    /// ```
    /// // Two workers whatever PURLOIN_WORKERS says; the rest from the environment.
    /// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    /// assert_eq!(rt.block_on(|| purloin::stats().procs.len()), 2);
    /// ```
    pub fn new() -> Builder {
        let env = Env::read();
        let mut sched = purloin_sched::Builder::new()
            .locals_destructor(crate::local::free_map)
            .park_histogram(env.park_histogram.unwrap_or(false));
        if let Some(n) = env.workers {
            sched = sched.workers(n);
        }
        if let Some(size) = env.stack_size {
            sched = sched.stack_size(size);
        }
        if let Some(n) = env.spare_workers {
            sched = sched.max_spare_workers(n);
        }
        let (deadlock_detection, deadlock_grace) =
            env.deadlock.unwrap_or((true, DEFAULT_DEADLOCK_GRACE));
        Builder {
            sched,
            deadlock_detection,
            deadlock_grace,
            schedtrace: env.schedtrace.flatten(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            trace: None,
        }
    }

    /// How long dropping the [`Runtime`] waits for green threads that may still finish by
    /// themselves (runnable ones, and parked ones a pending timer, I/O wait or blocking
    /// section can wake) before unwinding them (default 250 ms). Parked green threads that
    /// nothing pending can wake are unwound at once. See [`Runtime`] for the shutdown steps.
    pub fn shutdown_grace(mut self, grace: Duration) -> Builder {
        self.shutdown_grace = grace;
        self
    }

    /// Number of workers (processors; Go's GOMAXPROCS).
    pub fn workers(mut self, n: usize) -> Builder {
        self.sched = self.sched.workers(n);
        self
    }

    /// Default stack size of green threads.
    pub fn stack_size(mut self, size: StackSize) -> Builder {
        self.sched = self.sched.stack_size(size);
        self
    }

    /// Prefix of worker thread names.
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Builder {
        self.sched = self.sched.thread_name(prefix);
        self
    }

    /// Blocking-section threshold before the processor is handed off (default 20 µs).
    pub fn blocking_threshold(mut self, d: Duration) -> Builder {
        self.sched = self.sched.blocking_threshold(d);
        self
    }

    /// Long-runner report threshold (default 10 ms).
    pub fn long_run_threshold(mut self, d: Duration) -> Builder {
        self.sched = self.sched.long_run_threshold(d);
        self
    }

    /// The most spare worker threads the runtime may add while workers are stalled in
    /// blocking calls nobody wrapped in [`blocking`](crate::blocking) (`std::thread::sleep`,
    /// a std lock, blocking I/O) or in long computations, so that the green threads queued
    /// behind them run meanwhile (default 32; 0 turns them off; `PURLOIN_SPARE_WORKERS`).
    /// Spares retire once idle for 200 ms. See
    /// [`purloin_sched::Builder::max_spare_workers`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = purloin::runtime::Builder::new().workers(1).max_spare_workers(4).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// // Blocks its worker's OS thread in a std receive (not wrapped in `blocking`) ...
    /// let waiter = rt.spawn(move || rx.recv_timeout(Duration::from_secs(60)).unwrap());
    /// // ... and the only green thread that can answer still runs, on a spare worker.
    /// rt.spawn(move || tx.send(7).unwrap()).join().unwrap();
    /// assert_eq!(waiter.join().unwrap(), 7);
    /// ```
    pub fn max_spare_workers(mut self, n: usize) -> Builder {
        self.sched = self.sched.max_spare_workers(n);
        self
    }

    /// Bounds how many green threads submitted from outside the runtime's workers (from
    /// `main`, a plain OS thread, another runtime) may wait to start at once; default: no
    /// bound. When all `n` places are taken, [`Runtime::try_spawn`] and
    /// [`try_spawn`](crate::try_spawn) give the closure back in
    /// [`TrySpawnError::Full`](crate::TrySpawnError::Full), and [`Runtime::spawn`] blocks the
    /// calling thread until one starts, so a server that accepts faster than it serves sheds
    /// load instead of queueing without limit. Spawns from the runtime's own green threads
    /// are not counted. See [`purloin_sched::Builder::max_outside_queued`] (why no bound by
    /// default, and how to choose one).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = purloin::runtime::Builder::new().max_outside_queued(10_000).build().unwrap();
    /// assert_eq!(rt.spawn(|| 1).join().unwrap(), 1);
    /// ```
    pub fn max_outside_queued(mut self, n: usize) -> Builder {
        self.sched = self.sched.max_outside_queued(n);
        self
    }

    /// Enables the monitor thread (default on).
    pub fn monitor(mut self, on: bool) -> Builder {
        self.sched = self.sched.monitor(on);
        self
    }

    /// Deadlock detection (default on, grace 1 s; `PURLOIN_DEADLOCK`): Go's "all goroutines
    /// are asleep - deadlock!". While [`Runtime::block_on`] or an OS thread outside the runtime
    /// (a `join` from `main`, a scope's owner) waits on a green thread, and for `grace` nothing
    /// could wake any green thread, the runtime reports the parked green threads and what each
    /// waits on; `block_on` then panics in its root, and for outside waiters every parked green
    /// thread is unwound so their joins return `Err` instead of hanging.
    ///
    /// It reports only what is certain, never a program that is merely waiting. "Nothing could
    /// wake any green thread" means: every worker idle with nothing queued, no timer, no I/O
    /// wait, no blocking section, and no OS thread in the process that could wake one — any
    /// thread other than the runtime's own and the ones waiting on it counts (the program's own
    /// threads, which may hold a sender or a lock; a tokio runtime's threads driving a bridged
    /// future; the signal dispatcher while a signal is watched). So a program that mixes in
    /// such threads is never stopped by a false report; a deadlock among green threads there
    /// goes unreported by this check (a wait-for cycle of locks is still found by
    /// [`detect_deadlock`](crate::detect_deadlock), and a dump shows every wait). Off Linux,
    /// where a process's threads cannot be listed, nothing is reported.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// // A program whose green threads wait for a long time on purpose can lengthen the grace
    /// // period, or turn the check off.
    /// let rt = purloin::runtime::Builder::new()
    ///     .deadlock_detection(true, Duration::from_secs(5))
    ///     .build()
    ///     .unwrap();
    /// # drop(rt);
    /// ```
    pub fn deadlock_detection(mut self, on: bool, grace: Duration) -> Builder {
        self.deadlock_detection = on;
        self.deadlock_grace = grace;
        self
    }

    /// Records how long green threads stay parked, in a histogram per worker, for
    /// [`stats`](crate::stats) (`Stats::park_durations`) and
    /// [`metrics::prometheus`](crate::metrics::prometheus)
    /// (`purloin_park_duration_seconds`); default off, or on with `PURLOIN_PARK_HISTOGRAM=1`.
    /// Each park then reads the OS clock twice (tens of nanoseconds on a path that costs about
    /// a hundred); off, a park pays one predictable branch. See
    /// [`purloin_sched::Builder::park_histogram`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = purloin::runtime::Builder::new().park_histogram(true).build().unwrap();
    /// rt.block_on(|| purloin::sleep(std::time::Duration::from_millis(1)));
    /// assert!(rt.stats().park_histogram().unwrap().count() >= 1);
    /// ```
    pub fn park_histogram(mut self, on: bool) -> Builder {
        self.sched = self.sched.park_histogram(on);
        self
    }

    /// Calls `f` on every worker OS thread when it starts, before it runs any green thread,
    /// with the thread's worker number (tokio's `on_thread_start`, brpc's
    /// `run_worker_startfn`): every worker thread, also the ones started later for blocking
    /// hand-offs and spare workers. A panic in `f` is reported on stderr and the worker goes
    /// on. See [`purloin_sched::Builder::on_worker_start`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = purloin::runtime::Builder::new()
    ///     .workers(2)
    ///     .on_worker_start(|n| eprintln!("worker thread {n} starts"))
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(|| ());
    /// ```
    pub fn on_worker_start(mut self, f: impl Fn(usize) + Send + Sync + 'static) -> Builder {
        self.sched = self.sched.on_worker_start(f);
        self
    }

    /// Calls `f` on every worker OS thread when it ends, after its last green thread (tokio's
    /// `on_thread_stop`). See [`purloin_sched::Builder::on_worker_stop`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// let stopped = Arc::new(AtomicUsize::new(0));
    /// let s = stopped.clone();
    /// let rt = purloin::runtime::Builder::new()
    ///     .workers(2)
    ///     .on_worker_stop(move |_| {
    ///         s.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// rt.block_on(|| ());
    /// drop(rt); // shuts down
    /// assert!(stopped.load(Ordering::Relaxed) >= 2); // one per worker thread (spares too)
    /// ```
    pub fn on_worker_stop(mut self, f: impl Fn(usize) + Send + Sync + 'static) -> Builder {
        self.sched = self.sched.on_worker_stop(f);
        self
    }

    /// Prints one line of scheduler state to stderr every `interval` (Go's
    /// `GODEBUG=schedtrace`); also set by `PURLOIN_SCHEDTRACE=<ms>` (a value that is not a
    /// whole number of milliseconds is ignored with a warning, once). [`Builder::build`]
    /// refuses an interval of zero.
    pub fn schedtrace(mut self, interval: Option<Duration>) -> Builder {
        self.schedtrace = interval;
        self
    }

    /// Records a trace of this runtime (and of every other one of the process meanwhile) to
    /// the file at `path`, from [`build`](Builder::build) until this runtime shuts down: see
    /// [`trace`](crate::trace) for what it holds and how to open it. Without this call the
    /// `PURLOIN_TRACE=<file>` environment variable, read by `build`, does the same for the
    /// first runtime built while no trace records.
    ///
    /// # Examples
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("purloin-builder-trace-{}.json", std::process::id()));
    /// let rt = purloin::runtime::Builder::new().workers(1).trace(&path).build().unwrap();
    /// rt.block_on(|| purloin::spawn(|| ()).join().unwrap());
    /// drop(rt); // stops the trace: the file is complete
    /// assert!(std::fs::read_to_string(&path).unwrap().contains("\"traceEvents\""));
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    #[cfg(not(loom))]
    pub fn trace(mut self, path: impl AsRef<std::path::Path>) -> Builder {
        self.trace = Some(path.as_ref().to_path_buf());
        self
    }

    /// Builds this runtime and makes it the global runtime: the one that [`spawn`](crate::spawn),
    /// [`scope`](crate::scope) and the other plain functions use from OS threads, which
    /// otherwise starts with [`Builder::new`]'s configuration on first use. Call it before
    /// anything uses the global runtime, typically first thing in `main`.
    ///
    /// # Errors
    /// The global runtime already started (something spawned on it, or another
    /// `install_global` came first): [`io::ErrorKind::AlreadyExists`]; or what
    /// [`Builder::build`] returns.
    ///
    /// # Examples
    ///
    /// ```
    /// // First thing in `main`:
    /// purloin::runtime::Builder::new()
    ///     .workers(2)
    ///     .stack_size(purloin::StackSize::Small)
    ///     .install_global()
    ///     .unwrap();
    /// assert_eq!(purloin::spawn(|| purloin::stats().procs.len()).join().unwrap(), 2);
    /// // Too late for a second configuration: it says so.
    /// let again = purloin::runtime::Builder::new().install_global().unwrap_err();
    /// assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
    /// ```
    pub fn install_global(self) -> io::Result<()> {
        let started = || {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                "purloin: the global runtime already started (a spawn, a join or another \
                 install_global used it first), so this configuration cannot apply; call \
                 runtime::Builder::install_global before the first use of the global runtime, \
                 or build an explicit runtime with Builder::build and use Runtime::block_on",
            )
        };
        if GLOBAL.get().is_some() {
            return Err(started());
        }
        let _one_at_a_time = lock(&INSTALLING);
        if GLOBAL.get().is_some() {
            return Err(started());
        }
        let rt = self.build()?;
        // Only another thread's first use can have won since the check: it started the
        // default runtime, and this one shuts down again.
        let sched = rt.sched.clone();
        GLOBAL.set(rt).map_err(|_| started())?;
        crate::current::set_global(sched.expect("a runtime just built has its scheduler"));
        Ok(())
    }

    /// Starts the runtime.
    ///
    /// # Errors
    /// Invalid configuration, or the OS refused threads, the netpoller, or the stack
    /// overflow handler; a trace to record ([`Builder::trace`]) could not start (another one
    /// records, or its file cannot be created).
    pub fn build(self) -> io::Result<Runtime> {
        if self.schedtrace.is_some_and(|every| every.is_zero()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "purloin: Builder::schedtrace(Some(Duration::ZERO)) would print without pause; \
                 use an interval of at least 1 ms (Go's schedtrace uses 1000 ms), or None to \
                 turn it off",
            ));
        }
        #[cfg(all(feature = "tracing", not(loom)))]
        crate::span_hook::install();
        // Before the workers start, so their first events are in it.
        #[cfg(not(loom))]
        let owned_trace = crate::trace::OwnedTrace::for_runtime(self.trace.as_deref())?;
        let sched = self.sched.build()?;
        let net = crate::net::install(&sched)?;
        let data = Arc::new(RuntimeData {
            deadlock_detection: self.deadlock_detection,
            deadlock_grace: self.deadlock_grace,
            net,
            fork_generation: crate::current::fork::generation(),
        });
        let _ = sched.set_user_data(data.clone());
        let sched = Arc::new(sched);
        let trace = self.schedtrace.map(|every| crate::schedtrace::start(&sched, every));
        let watch = self
            .deadlock_detection
            .then(|| crate::deadlock::start_watch(&sched, self.deadlock_grace));
        #[cfg(not(loom))]
        crate::debugging::start_from_env();
        Ok(Runtime {
            sched: Some(sched),
            data,
            trace,
            watch,
            grace: self.shutdown_grace,
            #[cfg(not(loom))]
            owned_trace,
        })
    }
}

/// [`Builder::deadlock_detection`]'s default grace period.
const DEFAULT_DEADLOCK_GRACE: Duration = Duration::from_secs(1);

/// The configuration read from `PURLOIN_*` environment variables (`None`: unset or ignored).
struct Env {
    workers: Option<usize>,
    stack_size: Option<StackSize>,
    deadlock: Option<(bool, Duration)>,
    schedtrace: Option<Option<Duration>>,
    park_histogram: Option<bool>,
    spare_workers: Option<usize>,
}

impl Env {
    fn read() -> Env {
        Env {
            workers: env_value("PURLOIN_WORKERS", parse_workers, "a number of workers from 1 up"),
            stack_size: env_value(
                "PURLOIN_STACK_SIZE",
                parse_stack_size,
                "small, normal, large, or a size in bytes with an optional k/m/g suffix, such as \
                 64k",
            ),
            deadlock: env_value(
                "PURLOIN_DEADLOCK",
                parse_deadlock,
                "1 (on), 0 (off), or the grace period in milliseconds, such as 2000",
            ),
            schedtrace: env_value(
                "PURLOIN_SCHEDTRACE",
                parse_schedtrace,
                "a whole number of milliseconds between trace lines, such as \
                 PURLOIN_SCHEDTRACE=1000 (0 or empty: off)",
            ),
            park_histogram: env_value("PURLOIN_PARK_HISTOGRAM", parse_switch, "1 (on) or 0 (off)"),
            spare_workers: env_value(
                "PURLOIN_SPARE_WORKERS",
                |v| v.trim().parse().ok(),
                "the most spare workers for stalled ones, such as 32 (0: none)",
            ),
        }
    }
}

/// Reads and parses environment variable `name`; a value that does not parse is ignored with
/// a warning naming the `expected` form, printed once per variable and process.
fn env_value<T>(name: &str, parse: fn(&str) -> Option<T>, expected: &str) -> Option<T> {
    use std::sync::Mutex;
    static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let v = std::env::var(name).ok()?;
    let parsed = parse(&v);
    if parsed.is_none() {
        let mut warned = WARNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !warned.iter().any(|w| w == name) {
            warned.push(name.to_string());
            eprintln!("purloin: ignoring {name}={v:?}: expected {expected}");
        }
    }
    parsed
}

/// A `PURLOIN_WORKERS` value: a positive whole number.
fn parse_workers(v: &str) -> Option<usize> {
    v.trim().parse().ok().filter(|n| *n > 0)
}

/// A `PURLOIN_STACK_SIZE` value: a class name, or bytes (`k`, `m`, `g` suffixes, binary),
/// rounded up to whole pages and checked as [`StackSize::validate`] does.
fn parse_stack_size(v: &str) -> Option<StackSize> {
    let v = v.trim().to_ascii_lowercase();
    let size = match v.as_str() {
        "small" => StackSize::Small,
        "normal" => StackSize::Normal,
        "large" => StackSize::Large,
        _ => {
            let (digits, shift) = match v.char_indices().last()? {
                (i, 'k') => (&v[..i], 10),
                (i, 'm') => (&v[..i], 20),
                (i, 'g') => (&v[..i], 30),
                _ => (v.as_str(), 0),
            };
            let n: usize = digits.trim().parse().ok()?;
            let bytes = n.checked_mul(1 << shift).filter(|b| *b > 0)?;
            if bytes > StackSize::MAX_BYTES {
                return None;
            }
            StackSize::at_least(bytes)
        }
    };
    size.validate().ok().map(|()| size)
}

/// A `PURLOIN_DEADLOCK` value: on with the default grace, off, or on with a grace period.
fn parse_deadlock(v: &str) -> Option<(bool, Duration)> {
    match v.trim() {
        "1" | "on" => Some((true, DEFAULT_DEADLOCK_GRACE)),
        "0" | "off" | "" => Some((false, DEFAULT_DEADLOCK_GRACE)),
        ms => ms.parse().ok().map(|ms| (true, Duration::from_millis(ms))),
    }
}

/// A `PURLOIN_SCHEDTRACE` value: `Some(None)` for off (empty or 0), `Some(Some(ms))`, or
/// `None` if it is not a whole number of milliseconds.
fn parse_schedtrace(v: &str) -> Option<Option<Duration>> {
    let v = v.trim();
    if v.is_empty() {
        return Some(None);
    }
    let ms: u64 = v.parse().ok()?;
    Some((ms > 0).then(|| Duration::from_millis(ms)))
}

/// An on/off environment value: `Some(true)` for `1`, `Some(false)` for `0` or empty, `None`
/// otherwise.
fn parse_switch(v: &str) -> Option<bool> {
    match v.trim() {
        "1" => Some(true),
        "0" | "" => Some(false),
        _ => None,
    }
}

/// A purloin runtime: workers running green threads.
///
/// # Shutdown
///
/// Dropping it (or [`Runtime::shutdown_timeout`]) shuts it down in this order:
///
/// 1. The schedtrace thread, if any, stops. Spawns from outside the runtime start failing;
///    its green threads may still spawn.
/// 2. Runnable green threads run to completion. This waits until none is alive, or for the
///    grace period ([`Builder::shutdown_grace`], 250 ms by default; `shutdown_timeout`'s
///    argument), or until nothing pending can wake the parked ones left (every worker idle,
///    no timer, I/O wait or blocking section), whichever comes first: a green thread parked
///    on a channel nobody will send on is not waited for.
/// 3. Parked green threads are resumed with a forced unwind
///    ([`ForcedUnwind`](crate::ForcedUnwind)), so their destructors run and their joiners
///    get `Err`; again, until none is alive or for the grace period.
/// 4. The workers and the monitor stop and are joined. Green threads that never reached a
///    scheduling point are reported on stderr and their workers left running (detached);
///    what was queued behind them is cancelled ([`Cancelled`](crate::Cancelled)).
///
/// Dropping a runtime from one of its own green threads hands the shutdown to a new OS
/// thread (it cannot wait for itself): the drop returns at once and the shutdown proceeds
/// once the dropping green thread has finished.
///
/// A runtime cannot be used in a child process forked after it started (its worker threads
/// exist only in the parent): spawning there fails with an error that says so (the plain
/// functions such as [`spawn`](crate::spawn) panic with it).
pub struct Runtime {
    sched: Option<Arc<Scheduler>>,
    data: Arc<RuntimeData>,
    trace: Option<crate::schedtrace::Schedtrace>,
    watch: Option<crate::deadlock::Watch>,
    grace: Duration,
    /// The trace this runtime started (`Builder::trace`, `PURLOIN_TRACE`), stopped once its
    /// workers have ended.
    #[cfg(not(loom))]
    owned_trace: Option<crate::trace::OwnedTrace>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("workers", &self.scheduler().workers()).finish()
    }
}

impl Runtime {
    /// A runtime with the default configuration.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// A builder.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The scheduler underneath (for the layers' APIs).
    pub fn scheduler(&self) -> &Scheduler {
        self.sched.as_ref().expect("the runtime is running")
    }

    /// Spawns a green thread on this runtime.
    ///
    /// # Panics
    /// If the runtime is shutting down, or this process is a fork of the one that started
    /// it.
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.check_usable();
        self.scheduler().spawn(crate::local::with_locals(f))
    }

    /// Spawns a green thread on this runtime unless its bound on outside submissions is
    /// reached ([`Builder::max_outside_queued`]); then `f` comes back in
    /// [`TrySpawnError::Full`](crate::TrySpawnError::Full). See [`try_spawn`](crate::try_spawn).
    ///
    /// # Errors
    /// `Full` as above; `Refused` if the runtime is shutting down or this process is a fork
    /// of the one that started it.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = purloin::runtime::Builder::new().max_outside_queued(4).build().unwrap();
    /// match rt.try_spawn(|| 42) {
    ///     Ok(h) => assert_eq!(h.join().unwrap(), 42),
    ///     Err(e) => assert!(e.is_full(), "{e}"),
    /// }
    /// ```
    #[track_caller]
    pub fn try_spawn<F, T>(&self, f: F) -> Result<JoinHandle<T>, crate::TrySpawnError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if let Err(e) = self.data.check_not_forked() {
            return Err(crate::TrySpawnError::Refused(e));
        }
        self.scheduler().try_spawn_wrapped(f, crate::local::with_locals)
    }

    /// Wakes workers for the green threads spawned on this runtime with
    /// [`Builder::nosignal`](crate::Builder::nosignal) since the last flush: one parked
    /// worker per green thread, up to every parked one. Returns how many it woke.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = purloin::Runtime::new().unwrap();
    /// let h = rt.block_on(|| purloin::Builder::new().nosignal(true).spawn(|| 5).unwrap());
    /// rt.flush();
    /// assert_eq!(h.join().unwrap(), 5);
    /// ```
    pub fn flush(&self) -> usize {
        self.scheduler().flush()
    }

    /// Whether the calling code runs on a green thread of this runtime.
    fn is_current(&self) -> bool {
        with_current(|d| d.is_some_and(|d| std::ptr::eq(d, Arc::as_ptr(&self.data))))
    }

    /// Panics if this process is a fork of the one that started the runtime.
    pub(crate) fn check_usable(&self) {
        if let Err(e) = self.data.check_not_forked() {
            panic!("{e}");
        }
    }

    /// [`RuntimeData::check_not_forked`] of this runtime.
    pub(crate) fn check_not_forked(&self) -> io::Result<()> {
        self.data.check_not_forked()
    }

    /// Runs `f` as a green thread of this runtime (the *root*) and blocks the calling thread
    /// until it returns; its panic, if any, is resumed here. `f` may borrow from the caller.
    ///
    /// While the root waits, deadlock detection watches the runtime: if nothing can make
    /// progress any more, it prints the parked green threads and what each waits on ("all
    /// green threads are asleep — deadlock!") and panics here.
    ///
    /// Called from a green thread of this runtime, it just calls `f`. Called from a green
    /// thread of another runtime, `f` still runs on this one (as its root) while the calling
    /// green thread parks.
    #[track_caller]
    pub fn block_on<F, T>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        if purloin_sched::in_green_thread() && self.is_current() {
            return f();
        }
        self.check_usable();
        // This thread waits on the root: not a thread that could wake a green thread.
        let _mark = self.scheduler().mark_waiting_thread();
        let state = crate::scope::ScopeState::new_root();
        let wait = crate::scope::WaitAll(&state);
        // SAFETY: `wait` waits for the root in every exit path of this function (it is
        // dropped after the join below, or while unwinding), so `f`'s borrows stay valid,
        // and so does `state`, which the root points to.
        let spawned = unsafe {
            crate::scope::spawn_scoped(Some(self.scheduler()), Default::default(), &state, f)
        };
        let root = spawned.unwrap_or_else(|e| panic!("purloin: block_on: {e}"));
        let deadlock = self.wait_root(&state, &root);
        // Without a deadlock the root's count is zero, so its result is stored: take it
        // without a second wait (for the scheduler's end of the green thread).
        let result = if deadlock.is_none() { root.join_counted_finished() } else { root.join() };
        drop(wait);
        match (result, deadlock) {
            (Ok(v), _) => v,
            // The root was unwound by the detector: panic here with the report's headline.
            (Err(_), Some(report)) => panic!("{}", report.headline()),
            (Err(payload), None) => match never_ran(&*payload) {
                Some(why) => panic!("purloin: block_on: the root green thread never ran: {why}"),
                None => std::panic::resume_unwind(payload),
            },
        }
    }

    /// Builds a default runtime, runs `f` on it with [`Runtime::block_on`], and shuts it down.
    ///
    /// # Panics
    /// If the runtime cannot be built (the error is in the message), or if `f` panics.
    #[track_caller]
    pub fn run<F, T>(f: F) -> T
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let rt = Runtime::new().unwrap_or_else(|e| panic!("purloin: cannot start a runtime: {e}"));
        rt.block_on(f)
    }

    /// Waits for the root; if the runtime deadlocks meanwhile, prints the report, unwinds the
    /// root (it is borrowed from our caller's frame, so it must finish before we can panic),
    /// and returns the report.
    fn wait_root<T>(
        &self,
        state: &crate::scope::ScopeState,
        handle: &crate::scope::ScopedParts<'_, T>,
    ) -> Option<crate::deadlock::DeadlockReport> {
        let sched = self.scheduler();
        let mut quiet_since: Option<Instant> = None;
        loop {
            // The snapshot comes before the checks: an idle event (the root's end, the last
            // busy worker parking) after it ends the wait.
            let since = purloin_sched::idle_events();
            if state.all_finished() {
                return None;
            }
            if !self.data.deadlock_detection || !sched.is_quiescent() {
                quiet_since = None;
                purloin_sched::wait_idle_event(since, None);
                continue;
            }
            let since_quiet = *quiet_since.get_or_insert_with(Instant::now);
            let grace = self.data.deadlock_grace;
            if since_quiet.elapsed() < grace || !crate::deadlock::is_certain(sched) {
                // In the grace period, or an OS thread could still wake a green thread:
                // look again at the next idle event, or when the period (or a re-check of
                // the process's threads, backing off) is due.
                let due = crate::deadlock::next_look(since_quiet, grace);
                purloin_sched::wait_idle_event(since, Some(due));
                if purloin_sched::idle_events() != since {
                    // Something ran meanwhile: the quiet period starts over.
                    quiet_since = None;
                }
                continue;
            }
            let report = crate::deadlock::report(sched, Some(*handle.thread()));
            eprintln!("{report}");
            #[cfg(not(loom))]
            {
                eprintln!("{}", sched.dump());
                crate::trace::flight_on_trouble("block_on found a deadlock");
            }
            sched.cancel(handle.thread());
            return Some(report);
        }
    }

    /// A snapshot of this runtime's counters.
    pub fn stats(&self) -> Stats {
        self.scheduler().stats()
    }

    /// Shuts down, waiting at most `timeout` for runnable green threads before unwinding the
    /// parked ones.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> ShutdownReport {
        self.shutdown(timeout)
    }

    fn shutdown(&mut self, timeout: Duration) -> ShutdownReport {
        drop(self.trace.take());
        drop(self.watch.take());
        let Some(sched) = self.sched.take() else { return ShutdownReport::default() };
        let report = match Arc::try_unwrap(sched) {
            Ok(s) => s.shutdown_timeout(timeout),
            Err(shared) => {
                // Still referenced (by a schedtrace thread that is just exiting): the last
                // reference shuts it down on drop.
                drop(shared);
                ShutdownReport::default()
            }
        };
        // The workers have ended (their buffers went to the writer as they exited).
        #[cfg(not(loom))]
        if let Some(t) = self.owned_trace.take() {
            t.finish();
        }
        report
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if self.sched.is_some() && self.is_current() {
            // It cannot wait for itself: a new OS thread shuts it down once this green thread
            // (and the others) are done.
            let this = Runtime {
                sched: self.sched.take(),
                data: self.data.clone(),
                trace: self.trace.take(),
                watch: self.watch.take(),
                grace: self.grace,
                #[cfg(not(loom))]
                owned_trace: self.owned_trace.take(),
            };
            let handed = std::thread::Builder::new()
                .name("purloin-shutdown".into())
                .spawn(move || drop(this));
            if let Err(e) = handed {
                eprintln!(
                    "purloin: a runtime dropped from one of its own green threads could not \
                     start a thread to shut it down ({e}); it keeps running"
                );
            }
            return;
        }
        if self.sched.is_some() {
            let report = self.shutdown(self.grace);
            if report.unfinished > 0 {
                eprintln!(
                    "purloin: {} green threads never reached a scheduling point during \
                     shutdown; their workers were detached",
                    report.unfinished
                );
            }
        }
    }
}

/// Why a green thread never ran, if its join payload says so: the error of its stack lease
/// (an `io::Error`) or [`Cancelled`](crate::Cancelled) (the runtime shut down first), rather
/// than a panic of its own.
pub(crate) fn never_ran(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    if let Some(e) = payload.downcast_ref::<io::Error>() {
        return Some(e.to_string());
    }
    payload.downcast_ref::<crate::Cancelled>().map(|c| c.to_string())
}

static GLOBAL: OnceLock<Runtime> = OnceLock::new();

/// Serializes [`Builder::install_global`] calls, so two of them do not both build.
static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The global runtime: the one [`Builder::install_global`] installed, or one started on first
/// use with [`Builder::new`]'s configuration (the defaults and the `PURLOIN_*` environment).
///
/// # Panics
/// If it cannot be started (the OS refused threads or memory, or the environment asks for
/// what cannot be built): there is nothing to spawn on.
pub(crate) fn global() -> &'static Runtime {
    GLOBAL.get_or_init(|| {
        let rt = Runtime::new()
            .unwrap_or_else(|e| panic!("purloin: cannot start the global runtime: {e}"));
        crate::current::set_global(
            rt.sched.clone().expect("a runtime just built has its scheduler"),
        );
        rt
    })
}

/// Reports the wait-for cycles among the parked green threads of the runtime running the
/// current green thread (or of the global runtime), even while other green threads still run
/// (a partial deadlock). `None` if there is none.
pub fn detect_deadlock() -> Option<crate::deadlock::DeadlockReport> {
    let report = match purloin_sched::current_parked() {
        Some(parked) => crate::deadlock::report_of(parked, None),
        None => crate::deadlock::report(global().scheduler(), None),
    };
    (!report.cycles.is_empty()).then_some(report)
}
