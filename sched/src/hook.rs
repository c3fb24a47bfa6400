//! The process's observers of the scheduler ([`Hook`]s): called when a green thread switches
//! out and back in, and at the scheduler's events (spawn, first run, park, unpark, steal,
//! global-queue pulls, worker sleeps and wake-ups, blocking sections, timers fired, poller
//! wake-ups).
//!
//! The scheduler depends on no tracing or profiling library; a layer above (the `purloin`
//! facade's trace and `tracing` feature) installs a [`Hook`] that translates, and a program
//! may add its own (a metrics exporter), up to [`MAX_HOOKS`] in all. Hooks are installed with
//! [`install`] and never removed: a hook that should stop working checks a flag of its own
//! (the facade's do). Removal would need every switch to take part in a reclamation scheme so
//! that no site still calls a removed hook; never removing keeps a site's cost at one load.
//!
//! Every site first reads one flag (`INSTALLED`, Relaxed) and branches; with no hook
//! installed that load and predictable branch is all it costs, and the event's fields are not
//! even computed (each site passes a closure, called out of line). With the flag set, the
//! hooks come from a fixed array of `OnceLock` slots filled in order and never emptied: a
//! site calls the hooks of the slots that are set, up to the first empty one (each slot's
//! Acquire load pairs with the Release of its one `set`, so the flag's Relaxed read publishes
//! nothing by itself, and a hook being installed meanwhile is called from some switch on).
//! Installs are serialised by a lock, so the same hook is never installed twice.
//!
//! # Several hooks: order, and the switch word
//!
//! Every hook sees every switch and event. [`Hook::switch_out`]s and [`Hook::event`]s run in
//! the order the hooks were installed; [`Hook::switch_in`]s in the reverse order (the last to
//! see the green thread leave is the first to see it come back, like nested scopes). Each
//! hook gets back, in its `switch_in`, exactly the word *its own* `switch_out` returned: the
//! switching frame keeps one word per hook (on the green thread's stack, across the switch),
//! so hooks never share or see each other's words. A hook installed while a green thread was
//! switched out sees that green thread's next `switch_in` with `saved == 0`.
//!
//! # Where the hooks run
//!
//! - [`Hook::switch_out`] runs on the green thread's own stack, on the OS thread it ran on,
//!   just before it switches out (yield, park, exit, a blocking section's requeue);
//!   [`Hook::switch_in`] runs on its stack on the OS thread that resumed it, before any of its
//!   code, with the word `switch_out` returned. Thread-local state that belongs to the green
//!   thread (the span stack of a `tracing` subscriber) moves between OS threads this way.
//! - [`Hook::event`] runs where the event happens: on the green thread that spawns or unparks,
//!   on the new green thread's stack before its first code ([`Event::Start`]), on the parking
//!   green thread just before it switches out, on the green thread entering or leaving a
//!   blocking section, on the worker (its own stack, between green threads) that steals, pulls
//!   from the global queue, fires timers, polls or sleeps. It must not park, spawn or switch.
//!
//! # Identities of lazily spawned green threads
//!
//! A spawn that may be lazy (`lazy`) takes no G record and so has no id: its
//! [`Event::Spawn`] says `id: None`, and its first run has the id of whatever record the
//! runner gives it (or none, when its joiner runs it inline). A hook that draws spawn → first
//! run needs both ends: [`set_eager_spawn`] makes spawns take a record (and an id) at once
//! while a hook is installed. With no hook installed its flag is never read.

use std::sync::{Mutex, OnceLock};

use crate::GreenId;
use crate::sync::{HOOK_FLAG, HookFlag};

/// A scheduler event reported to the installed [`Hook`]s.
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
        /// What it waits for, as its wait primitive recorded it (`set_wait_info`), if it did.
        wait: Option<crate::WaitInfo>,
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
    /// A green thread starts its first run: on its own stack, on the OS thread that runs it,
    /// before any of its code (later runs are announced by [`Hook::switch_in`]). A child its
    /// joiner runs inline (join-helping) starts on the joiner's stack, and ends with an
    /// [`Event::InlineEnd`]; meanwhile its switches are the joiner's.
    Start {
        /// The green thread.
        id: GreenId,
    },
    /// The child `id` that its joiner ran inline ended: the joiner's own code continues, on
    /// this OS thread.
    InlineEnd {
        /// The child that ran inline.
        id: GreenId,
    },
    /// Worker `p` took a batch from the global queue (one entry to run, the rest moved to its
    /// local queue).
    GlobalPull {
        /// The pulling worker's P.
        p: usize,
    },
    /// The worker holding P `p` found nothing to run and is about to sleep (on its lot, or
    /// blocked in the poller); an [`Event::WorkerWake`] on the same OS thread follows.
    WorkerPark {
        /// The sleeping worker's P.
        p: usize,
    },
    /// The worker that sent [`Event::WorkerPark`] woke up (work, a timer, readiness or stop).
    WorkerWake {
        /// The woken worker's P.
        p: usize,
    },
    /// The running green thread entered a blocking section (`enter_blocking`): its OS thread
    /// may block; the monitor may hand the P to another thread.
    BlockingEnter {
        /// The green thread.
        id: GreenId,
    },
    /// The running green thread left its blocking section (a switch-out may follow at once if
    /// its P was handed off).
    BlockingLeave {
        /// The green thread.
        id: GreenId,
    },
    /// Due timers of one P's heap fired, on this OS thread (their wake-ups or callbacks
    /// already ran).
    TimersFired {
        /// How many fired.
        count: usize,
    },
    /// The netpoller reported readiness: `readied` green threads were unparked (their
    /// [`Event::Unpark`]s came before this).
    PollerWake {
        /// How many green threads it readied.
        readied: usize,
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
/// hook::install(&COUNT).unwrap();
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// sched.spawn(|| ()).join().unwrap();
/// assert!(COUNT.0.load(Ordering::Relaxed) >= 1);
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

/// Most hooks a process can [`install`].
pub const MAX_HOOKS: usize = 8;

/// The installed hooks, in order: set slots first, never emptied (module docs).
static HOOKS: [OnceLock<&'static dyn Hook>; MAX_HOOKS] = [const { OnceLock::new() }; MAX_HOOKS];

/// Serialises [`install`]s (the check for the same hook and the choice of a slot).
static INSTALLING: Mutex<()> = Mutex::new(());

/// Set once `HOOKS` holds a hook: the sites' one load and branch.
static INSTALLED: HookFlag = HookFlag::new(false);

/// [`set_eager_spawn`]'s flag (read only after `INSTALLED`).
static EAGER_SPAWN: HookFlag = HookFlag::new(false);

/// While `on` (and a hook is installed), every spawn takes a G record at once, so its
/// [`Event::Spawn`] has an id and its first run is announced with the same id
/// ([`Event::Start`]). Spawns cost what a non-lazy spawn costs meanwhile (`lazy`: two
/// cache-line transfers per child), and a joiner no longer runs an unstarted child inline.
///
/// The switch is one for the process, not per hook: the last call wins, whichever hook made
/// it (the facade's trace turns it on while it records, and off when it stops).
///
/// # Examples
///
/// ```
/// use purloin_sched::hook::{self, Event, Hook};
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// struct SawId(AtomicBool);
/// impl Hook for SawId {
///     fn event(&self, e: Event) {
///         if let Event::Spawn { id: Some(_), by: Some(_) } = e {
///             self.0.store(true, Ordering::Relaxed);
///         }
///     }
/// }
/// static SAW: SawId = SawId(AtomicBool::new(false));
/// hook::install(&SAW).unwrap();
/// hook::set_eager_spawn(true);
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// // A spawn from a green thread (lazy otherwise) now reports its id.
/// sched.spawn(|| purloin_sched::spawn(|| ()).unwrap().join().unwrap()).join().unwrap();
/// assert!(SAW.0.load(Ordering::Relaxed));
/// ```
pub fn set_eager_spawn(on: bool) {
    // Relaxed: a hint; a spawn that reads the old value is lazy (or not) once more.
    EAGER_SPAWN.store(on, HOOK_FLAG);
}

/// Whether spawns must take a record now ([`set_eager_spawn`]); only read after
/// [`installed`].
#[cold]
pub(crate) fn eager_spawn() -> bool {
    EAGER_SPAWN.load(HOOK_FLAG)
}

/// Why [`install`] refused a hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstallError {
    /// This very hook (the same object) is installed already: it sees every switch and
    /// event once, not twice.
    AlreadyInstalled,
    /// [`MAX_HOOKS`] hooks are installed (they are never removed).
    Full,
}

impl core::fmt::Display for InstallError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            InstallError::AlreadyInstalled => f.write_str(
                "purloin: this scheduler hook is installed already (install it once per process)",
            ),
            InstallError::Full => write!(
                f,
                "purloin: {MAX_HOOKS} scheduler hooks are installed, the most a process can \
                 have (hooks are never removed); combine some of them into one hook"
            ),
        }
    }
}

impl std::error::Error for InstallError {}

/// Adds `hook` to the process's hooks: from now on it sees every switch and event of every
/// scheduler, after the hooks installed before it (module docs). Hooks are never removed.
///
/// # Errors
///
/// [`InstallError::AlreadyInstalled`] if this hook (the same object, compared by address) is
/// installed already; [`InstallError::Full`] if [`MAX_HOOKS`] are.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use purloin_sched::hook::{self, Event, Hook, InstallError};
///
/// struct Parks(AtomicU64);
/// impl Hook for Parks {
///     fn event(&self, e: Event) {
///         if let Event::Park { .. } = e {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
/// static A: Parks = Parks(AtomicU64::new(0));
/// static B: Parks = Parks(AtomicU64::new(0));
/// hook::install(&A).unwrap();
/// hook::install(&B).unwrap(); // a second hook: both see every event
/// assert_eq!(hook::install(&A), Err(InstallError::AlreadyInstalled));
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(purloin_sched::park);
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// h.thread().unpark();
/// h.join().unwrap();
/// assert!(A.0.load(Ordering::Relaxed) >= 1 && B.0.load(Ordering::Relaxed) >= 1);
/// ```
pub fn install(hook: &'static dyn Hook) -> Result<(), InstallError> {
    let _serial = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let same = |h: &&'static dyn Hook| core::ptr::addr_eq(*h as *const dyn Hook, hook);
    if hooks().any(|h| same(&h)) {
        return Err(InstallError::AlreadyInstalled);
    }
    let slot = HOOKS.iter().find(|s| s.get().is_none()).ok_or(InstallError::Full)?;
    // Under the lock nobody else sets a slot: this one is still empty.
    let _ = slot.set(hook);
    // Relaxed: a site that sees the flag reads the hooks through their OnceLocks (Acquire).
    INSTALLED.store(true, HOOK_FLAG);
    Ok(())
}

/// The installed hooks, in installation order (module docs).
fn hooks() -> impl Iterator<Item = &'static dyn Hook> {
    HOOKS.iter().map_while(|s| s.get().copied())
}

/// The id of the green thread whose record runs on this OS thread: the one [`Event::Park`]
/// and [`Event::Unpark`] name. It differs from `current()`'s id while a joiner runs a child
/// inline ([`Event::Start`]): then the joiner parks and is woken for the child. `None` off a
/// green thread.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     purloin_sched::hook::running_record() == purloin_sched::current().map(|t| t.id())
/// });
/// assert!(h.join().unwrap());
/// assert_eq!(purloin_sched::hook::running_record(), None);
/// ```
pub fn running_record() -> Option<GreenId> {
    crate::thread::running_g().map(|g| GreenId(g.id_with(g.generation())))
}

/// Whether a hook is installed: the one load and branch of every site.
#[inline(always)]
pub(crate) fn installed() -> bool {
    INSTALLED.load(HOOK_FLAG)
}

/// What the hooks' `switch_out`s returned, one word per hook in installation order (0 for a
/// hook installed since), kept in the switching frame across the switch (module docs).
pub(crate) struct Saved([usize; MAX_HOOKS]);

impl Saved {
    /// No words: every hook gets 0.
    pub(crate) const fn new() -> Saved {
        Saved([0; MAX_HOOKS])
    }
}

/// The hooks' [`Hook::switch_out`]s, their words kept in `saved` (out of line: the switch
/// inlines only the flag's test).
#[cold]
#[inline(never)]
pub(crate) fn switch_out(finished: bool, saved: &mut Saved) {
    for (word, h) in saved.0.iter_mut().zip(hooks()) {
        *word = h.switch_out(finished);
    }
}

/// The hooks' [`Hook::switch_in`]s, in reverse order, each with its own word from `saved`.
/// Out of line, as [`switch_out`].
#[cold]
#[inline(never)]
pub(crate) fn switch_in(saved: &Saved) {
    let n = hooks().count();
    for (word, slot) in saved.0[..n].iter().zip(&HOOKS[..n]).rev() {
        if let Some(h) = slot.get() {
            h.switch_in(*word);
        }
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
    let event = make();
    for h in hooks() {
        h.event(event);
    }
}
