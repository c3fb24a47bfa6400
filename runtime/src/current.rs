//! What the layers under the runtime reach of it: the per-runtime data kept next to each
//! scheduler (its netpoller, its deadlock settings), found from the current green thread,
//! and the global runtime's scheduler once it has started. `rt` builds and owns runtimes; the
//! modules it uses (sockets, signals, the deadlock watch, the dump signal) find what they
//! need here instead of reaching back into it.

use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use purloin_sched::Scheduler;

/// Per-runtime state the facade keeps next to the scheduler (reachable from green threads
/// through the scheduler's user data).
pub(crate) struct RuntimeData {
    pub(crate) deadlock_detection: bool,
    pub(crate) deadlock_grace: Duration,
    /// The netpoller (sockets used by this runtime's green threads register with it).
    pub(crate) net: Arc<crate::net::Driver>,
    /// The process's fork generation when this runtime started (see `fork`).
    pub(crate) fork_generation: u32,
}

impl RuntimeData {
    /// Refuses to spawn on a runtime that was started before this process was forked: its
    /// worker threads exist only in the parent, so nothing would ever run.
    pub(crate) fn check_not_forked(&self) -> io::Result<()> {
        if self.fork_generation == fork::generation() {
            return Ok(());
        }
        Err(io::Error::other(
            "purloin: this process is a fork of the one that started the runtime, whose worker \
             threads exist only in the parent, so a green thread spawned here would never run; \
             in the child, exec a program, or build a new runtime (purloin::runtime::Builder) \
             and spawn on it",
        ))
    }
}

/// Fork detection: a `pthread_atfork` child handler counts forks, so a runtime can tell it is
/// being used in a child process that does not have its threads.
pub(crate) mod fork {
    use std::sync::Once;
    use std::sync::atomic::{AtomicU32, Ordering};

    static GENERATION: AtomicU32 = AtomicU32::new(0);

    extern "C" fn in_child() {
        // Relaxed: the child has one thread at this point.
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }

    /// The number of forks between the first runtime's start and now, as seen by this
    /// process (0 in the process that started it).
    pub(crate) fn generation() -> u32 {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            // SAFETY: registers a handler that only increments an atomic (async-signal-safe,
            // as a fork child handler must be); no other arguments.
            let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
            debug_assert_eq!(rc, 0, "pthread_atfork failed");
        });
        // Relaxed: a fork happens-before everything in the child.
        GENERATION.load(Ordering::Relaxed)
    }
}

/// Calls `f` with the runtime data of the runtime running the current green thread.
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&RuntimeData>) -> R) -> R {
    purloin_sched::with_user_data(|d| f(d.and_then(|d| d.downcast_ref::<RuntimeData>())))
}

/// The global runtime's scheduler, set once by `rt` when it starts the global runtime (which
/// is never dropped).
static GLOBAL: OnceLock<Arc<Scheduler>> = OnceLock::new();

/// Records the global runtime's scheduler.
pub(crate) fn set_global(sched: Arc<Scheduler>) {
    let _ = GLOBAL.set(sched);
}

/// The global runtime's scheduler, if it has started (this never starts it).
pub(crate) fn global_scheduler() -> Option<&'static Scheduler> {
    GLOBAL.get().map(|s| &**s)
}
