//! The runtime: a scheduler plus what the facade adds (the netpoller, deadlock detection,
//! `PURLOIN_SCHEDTRACE`), built explicitly with [`Builder`] or created lazily as the global
//! runtime the first time a plain OS thread spawns (brpc's TaskControl: double-checked,
//! created once).

use std::io;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use purloin_sched::{Scheduler, ShutdownReport, StackSize};

use crate::{JoinHandle, Stats};

/// Configures a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    sched: purloin_sched::Builder,
    deadlock_detection: bool,
    deadlock_grace: Duration,
    schedtrace: Option<Duration>,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// The defaults: one worker per CPU, 1 MiB stacks, the monitor on, deadlock detection on
    /// (grace 1 s), schedtrace from the `PURLOIN_SCHEDTRACE` environment variable.
    pub fn new() -> Builder {
        let schedtrace = std::env::var("PURLOIN_SCHEDTRACE")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis);
        Builder {
            sched: purloin_sched::Builder::new(),
            deadlock_detection: true,
            deadlock_grace: Duration::from_secs(1),
            schedtrace,
        }
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

    /// Enables the monitor thread (default on).
    pub fn monitor(mut self, on: bool) -> Builder {
        self.sched = self.sched.monitor(on);
        self
    }

    /// Deadlock detection in [`Runtime::block_on`]: when nothing can make progress (every
    /// worker parked, no timers, no I/O) for `grace`, report the parked green threads and what
    /// they wait on, and panic in the root. Turn it off if plain OS threads outside the
    /// runtime wake green threads after long pauses (they are invisible to the detector).
    pub fn deadlock_detection(mut self, on: bool, grace: Duration) -> Builder {
        self.deadlock_detection = on;
        self.deadlock_grace = grace;
        self
    }

    /// Prints one line of scheduler state to stderr every `interval` (Go's
    /// `GODEBUG=schedtrace`); also set by `PURLOIN_SCHEDTRACE=<ms>`.
    pub fn schedtrace(mut self, interval: Option<Duration>) -> Builder {
        self.schedtrace = interval;
        self
    }

    /// Starts the runtime.
    ///
    /// # Errors
    /// Invalid configuration, or the OS refused threads, the netpoller, or the stack
    /// overflow handler.
    pub fn build(self) -> io::Result<Runtime> {
        let sched = self.sched.build()?;
        let net = crate::net::install(&sched)?;
        let data = Arc::new(RuntimeData {
            deadlock_detection: self.deadlock_detection,
            deadlock_grace: self.deadlock_grace,
            net,
        });
        let _ = sched.set_user_data(data.clone());
        let sched = Arc::new(sched);
        let trace = self.schedtrace.map(|every| crate::stats::start_schedtrace(&sched, every));
        #[cfg(not(loom))]
        crate::debugging::start_from_env();
        Ok(Runtime { sched: Some(sched), data, trace })
    }
}

/// Per-runtime state the facade keeps next to the scheduler (reachable from green threads
/// through the scheduler's user data).
pub(crate) struct RuntimeData {
    pub(crate) deadlock_detection: bool,
    pub(crate) deadlock_grace: Duration,
    /// The netpoller (sockets used by this runtime's green threads register with it).
    pub(crate) net: Arc<crate::net::Driver>,
}

/// A purloin runtime: workers running green threads. Dropping it shuts it down: runnable
/// green threads finish, parked ones are unwound so their destructors run.
pub struct Runtime {
    sched: Option<Arc<Scheduler>>,
    data: Arc<RuntimeData>,
    trace: Option<crate::stats::Schedtrace>,
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
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.scheduler().spawn(crate::local::with_locals(f))
    }

    /// Runs `f` as a green thread of this runtime (the *root*) and blocks the calling thread
    /// until it returns; its panic, if any, is resumed here. `f` may borrow from the caller.
    ///
    /// While the root waits, deadlock detection watches the runtime: if nothing can make
    /// progress any more, it prints the parked green threads and what each waits on ("all
    /// green threads are asleep — deadlock!") and panics here.
    ///
    /// Called from a green thread of this runtime, it just calls `f`.
    pub fn block_on<F, T>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        if purloin_sched::in_green_thread() {
            return f();
        }
        let state = crate::scope::ScopeState::new();
        let wait = crate::scope::WaitAll(state.clone());
        // SAFETY: `wait` waits for the root in every exit path of this function (it is
        // dropped after the join below, or while unwinding), so `f`'s borrows stay valid.
        let spawned = unsafe {
            crate::scope::spawn_scoped(Some(self.scheduler()), Default::default(), &state, f)
        };
        let mut root = spawned.unwrap_or_else(|e| panic!("purloin: block_on: {e}"));
        let deadlock = self.wait_root(&mut root);
        let result = root.join();
        drop(wait);
        match (result, deadlock) {
            (Ok(v), _) => v,
            // The root was unwound by the detector: panic here with the report's headline.
            (Err(_), Some(report)) => panic!("{}", report.headline()),
            (Err(payload), None) => std::panic::resume_unwind(payload),
        }
    }

    /// Builds a default runtime, runs `f` on it with [`Runtime::block_on`], and shuts it down.
    ///
    /// # Panics
    /// If the runtime cannot be built (the error is in the message), or if `f` panics.
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
        handle: &mut crate::scope::ScopedParts<'_, T>,
    ) -> Option<crate::deadlock::DeadlockReport> {
        let sched = self.scheduler();
        let mut quiet_since: Option<Instant> = None;
        loop {
            if handle.wait_timeout(Duration::from_millis(100)) {
                return None;
            }
            if !self.data.deadlock_detection {
                continue;
            }
            if sched.is_quiescent() {
                let since = *quiet_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= self.data.deadlock_grace && sched.is_quiescent() {
                    let report = crate::deadlock::report(sched, Some(*handle.thread()));
                    eprintln!("{report}");
                    #[cfg(not(loom))]
                    eprintln!("{}", sched.dump());
                    sched.cancel(handle.thread());
                    return Some(report);
                }
            } else {
                quiet_since = None;
            }
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
        let Some(sched) = self.sched.take() else { return ShutdownReport::default() };
        match Arc::try_unwrap(sched) {
            Ok(s) => s.shutdown_timeout(timeout),
            Err(shared) => {
                // Still referenced (by a schedtrace thread that is just exiting): the last
                // reference shuts it down on drop.
                drop(shared);
                ShutdownReport::default()
            }
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if self.sched.is_some() {
            let report = self.shutdown(Duration::from_secs(5));
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

static GLOBAL: OnceLock<Runtime> = OnceLock::new();

/// The global runtime, started on first use with the default configuration.
///
/// # Panics
/// If it cannot be started (the OS refused threads or memory): there is nothing to spawn on.
pub(crate) fn global() -> &'static Runtime {
    GLOBAL.get_or_init(|| {
        Runtime::new().unwrap_or_else(|e| panic!("purloin: cannot start the global runtime: {e}"))
    })
}

/// Calls `f` with the runtime data of the runtime running the current green thread.
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&RuntimeData>) -> R) -> R {
    purloin_sched::with_user_data(|d| f(d.and_then(|d| d.downcast_ref::<RuntimeData>())))
}
