//! One process-wide observer of the scheduler: called when a green thread switches out and
//! back in, and at the scheduler's events (spawn, park, unpark, steal).
//!
//! The scheduler depends on no tracing or profiling library; a layer above (the `purloin`
//! facade's `tracing` feature) installs a [`Hook`] that translates. A hook is installed once
//! per process and never removed. Every site first reads one flag (`INSTALLED`, Relaxed) and
//! branches; with no hook installed that load and predictable branch is all it costs, and the
//! event's fields are not even computed (each site passes a closure, called out of line).
//! With the flag set, the hook itself comes from the `OnceLock` (its Acquire load pairs with
//! the Release of the one `set`, so the flag's Relaxed read publishes nothing by itself).
//!
//! # Where the hook runs
//!
//! - [`Hook::switch_out`] runs on the green thread's own stack, on the OS thread it ran on,
//!   just before it switches out (yield, park, exit, a blocking section's requeue);
//!   [`Hook::switch_in`] runs on its stack on the OS thread that resumed it, before any of its
//!   code, with the word `switch_out` returned. Thread-local state that belongs to the green
//!   thread (the span stack of a `tracing` subscriber) moves between OS threads this way.
//! - [`Hook::event`] runs where the event happens: on the green thread that spawns or unparks,
//!   on the parking green thread just before it switches out, on the worker that steals. It
//!   must not park, spawn or switch.

use std::sync::OnceLock;

use crate::GreenId;
use crate::sync::{HOOK_FLAG, HookFlag};

/// A scheduler event reported to the installed [`Hook`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A green thread was spawned (`id` is `None` for a lazily spawned one: its identity is
    /// made only if something asks for it). `by` is the spawning green thread, if any.
    Spawn {
        /// The new green thread.
        id: Option<GreenId>,
        /// The spawner, when it is a green thread.
        by: Option<GreenId>,
    },
    /// A green thread is about to park (its switch-out follows).
    Park {
        /// The parking green thread.
        id: GreenId,
    },
    /// A parked green thread was made runnable. `by` is the waking green thread, if any.
    Unpark {
        /// The woken green thread.
        id: GreenId,
        /// The waker, when it is a green thread.
        by: Option<GreenId>,
    },
    /// Worker `thief` took `count` entries from worker `victim`'s local queue.
    Steal {
        /// The stealing worker's P.
        thief: usize,
        /// The P it stole from.
        victim: usize,
        /// How many run-queue entries moved.
        count: usize,
    },
}

/// An observer of green-thread switches and scheduler events. See the module docs for where
/// each method runs. Every method has a do-nothing default.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use purloin_sched::hook::{self, Event, Hook};
///
/// struct CountSpawns(AtomicU64);
/// impl Hook for CountSpawns {
///     fn event(&self, e: Event) {
///         if let Event::Spawn { .. } = e {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// static COUNT: CountSpawns = CountSpawns(AtomicU64::new(0));
/// if hook::install(&COUNT).is_ok() {
///     let sched = purloin_sched::Scheduler::new().unwrap();
///     sched.spawn(|| ()).join().unwrap();
///     assert!(COUNT.0.load(Ordering::Relaxed) >= 1);
/// }
/// ```
pub trait Hook: Sync + 'static {
    /// On the green thread's stack and OS thread, before it switches out. `finished` is true
    /// when it ended (it never switches in again: release what the word would carry). Returns
    /// a word given to [`switch_in`](Hook::switch_in).
    fn switch_out(&self, finished: bool) -> usize {
        let _ = finished;
        0
    }

    /// On the green thread's stack, on the OS thread that resumed it, before its code runs
    /// again; `saved` is what its last `switch_out` returned.
    fn switch_in(&self, saved: usize) {
        let _ = saved;
    }

    /// A scheduler event, where it happens.
    fn event(&self, event: Event) {
        let _ = event;
    }
}

static HOOK: OnceLock<&'static dyn Hook> = OnceLock::new();

/// Set once `HOOK` holds the hook: the sites' one load and branch.
static INSTALLED: HookFlag = HookFlag::new(false);

/// Installs the process's hook. Green threads switched out before the hook was installed are
/// switched in with `saved == 0`.
///
/// # Errors
/// The hook already installed (there is one per process, never removed), when there is one.
///
/// # Examples
///
/// ```
/// use purloin_sched::hook::{self, Hook};
///
/// struct Quiet;
/// impl Hook for Quiet {}
/// static QUIET: Quiet = Quiet;
/// // The first install wins; a second one is refused.
/// let _ = hook::install(&QUIET);
/// assert!(hook::install(&QUIET).is_err());
/// ```
pub fn install(hook: &'static dyn Hook) -> Result<(), &'static dyn Hook> {
    let mut installed = false;
    let current = HOOK.get_or_init(|| {
        installed = true;
        hook
    });
    if installed {
        // Relaxed: a site that sees the flag reads the hook through the OnceLock (Acquire).
        INSTALLED.store(true, HOOK_FLAG);
        Ok(())
    } else {
        Err(*current)
    }
}

/// Whether a hook is installed: the one load and branch of every site.
#[inline(always)]
pub(crate) fn installed() -> bool {
    INSTALLED.load(HOOK_FLAG)
}

/// The installed hook (after [`installed`] said there is one).
#[cold]
fn get() -> Option<&'static dyn Hook> {
    HOOK.get().copied()
}

/// The hook's [`Hook::switch_out`] (out of line: the switch inlines only the flag's test).
#[cold]
#[inline(never)]
pub(crate) fn switch_out(finished: bool) -> usize {
    get().map_or(0, |h| h.switch_out(finished))
}

/// The hook's [`Hook::switch_in`] (out of line, as [`switch_out`]).
#[cold]
#[inline(never)]
pub(crate) fn switch_in(saved: usize) {
    if let Some(h) = get() {
        h.switch_in(saved);
    }
}

/// Reports the event `make` builds, if a hook is installed (the closure runs only then, out
/// of line).
#[inline(always)]
pub(crate) fn emit(make: impl FnOnce() -> Event) {
    if installed() {
        cold_emit(make);
    }
}

#[cold]
#[inline(never)]
fn cold_emit(make: impl FnOnce() -> Event) {
    if let Some(h) = get() {
        h.event(make());
    }
}
