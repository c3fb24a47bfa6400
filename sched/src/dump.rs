//! Dumps: every green thread of a scheduler with its state, what it waits on, and — for a
//! parked one — a backtrace of its own stack (Go's `runtime.Stack(all)`, brpc's bthread
//! tracer).
//!
//! # Capturing a parked green thread's stack
//!
//! A parked G's registers are saved in its [`Context`](purloin_context::Context) and nothing
//! runs on its stack. The dump claims it, walks its stack from the inside, and lets it go:
//!
//! 1. `PARKED => INSPECTED` (`G::begin_inspect`, D1). From here the dump owns the G's context
//!    and stack, as a worker owns a G that is switching out (`PARKING`): an unpark (or a
//!    shutdown's cancel) finds a status that is not `PARKED`, so it only sets `NOTIFIED` and
//!    does not queue the G. `unpark` itself is unchanged — no new branch on the wake path.
//! 2. [`Context::visit`](purloin_context::Context::visit) switches onto the G's stack, on
//!    this OS thread, with a function that walks the stack with the DWARF unwinder
//!    ([`backtrace::trace_unsynchronized`], `_Unwind_Backtrace`) into a fixed buffer of
//!    instruction pointers and switches straight back. None of the G's code runs; its saved
//!    words are restored, so a visit leaves no trace on its stack. The walk goes up from the
//!    switch through the G's frames and ends at the entry trampoline, whose CFI says "no
//!    caller".
//! 3. `INSPECTED => PARKED` (`G::end_inspect`, D2) — or, if an unpark arrived meanwhile,
//!    `INSPECTED => RUNNABLE` with the token consumed, and the dump queues the G (exactly what
//!    g0 does when an unpark races a park: `publish_parked`).
//!
//! Symbolizing happens afterwards, on the caller's stack.
//!
//! # What a backtrace shows
//!
//! See [`StackTrace`]: the walk's own frames are dropped, the scheduler's park and switch
//! frames hidden, its way in collapsed. How the walk tells its own frames without symbols
//! (an optimized build names inlined frames without their paths): on a parked green thread's
//! stack they are the frames below its saved stack pointer, then the visit function that
//! `purloin_context` calls from the green thread's switch on its way in; on the caller's own
//! stack, the frames up to the walker's, known by the start address of the enclosing
//! function. Frames are sorted by crate (`Origin`) by their paths, or by their files' crate
//! source directories, learned by resolving one known function of each runtime crate
//! ([`note_runtime_code`] for the facade and purloin-sync) and from the path-named frames of
//! the same dump.
//!
//! # Which schedulers
//!
//! Every scheduler of the process is listed, weakly, from its start until its shutdown
//! begins ([`dump_all`]). A shutdown that begins while a `dump_all` looks at green threads
//! waits until it is done looking, so a dump never holds a green thread of a scheduler that
//! is stopping.
//!
//! # Memory ordering
//!
//! - (D1) `begin_inspect`'s CAS is AcqRel: its Acquire pairs with G1 (`publish_parked`'s
//!   Release after the context was stored) and with an earlier dump's D2, so the dump sees
//!   the saved context and stack words.
//! - (D2) `end_inspect`'s CAS is AcqRel: its Release publishes the restored context and stack
//!   words to the next party to move the G out of `PARKED` (an unparker's AcqRel CAS) or, when
//!   it makes the G `RUNNABLE`, to the worker that claims it through the queue (G2). Its
//!   Acquire pairs with the Release of the unpark that left `NOTIFIED` (G3), whose writes the
//!   queue push then hands on to the G.
//!
//! The race with unpark is modelled in `g.rs` (`inspect_racing_unpark_queues_exactly_once`).
//!
//! # Time in a state, and the spawner
//!
//! Every change of state stamps the G with the coarse clock (`clock`: one load and one store,
//! no OS clock read on the park, wake and switch paths); a dump subtracts the stamp from a
//! precise reading. The result is never less than the true time in the state and exceeds it
//! by at most the coarse clock's lag (one monitor tick while the monitor runs). The
//! spawner's id and the spawn's place in the source (the spawn functions are `#[track_caller]`: one pointer to a
//! `'static` [`Location`]) are written into the G when its record is prepared (for a lazy
//! spawn, kept in the task cell until then, in the identity's slot, which holds them until
//! the identity is made).
//!
//! # Grouped dumps
//!
//! [`Scheduler::dump_grouped`](crate::Scheduler::dump_grouped) tallies the green threads into
//! groups by state, wait kind, stack and spawn site ([`GroupedDump`]). Each parked green
//! thread's stack is walked into one reused buffer and hashed with the rest of its key; only a
//! group's first walk is kept, and the symbolization (the expensive part of a dump) runs once
//! per group. A full dump symbolizes each distinct stack once too, and each instruction
//! pointer once.
//!
//! Running and runnable green threads are reported without a backtrace: a running one's
//! stack changes under us, and a runnable one sits in a queue from which a worker may claim
//! it at any moment. The green thread calling the dump is the exception: its own stack is
//! walked in place.

use core::fmt;
use core::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use crate::g::{self, GRef};
use crate::registry::{recycle_anywhere, registry};
use crate::shared::Shared;
use crate::sync::Ordering;
use crate::thread::{GreenId, WaitInfo, wait_info_of};

/// Instruction pointers captured per green thread at most.
const MAX_FRAMES: usize = 128;

/// Room a walk needs below a parked green thread's stack pointer (the unwinder's context and
/// its search for frame descriptions take a few KiB). A green thread parked closer to its stack
/// limit is reported without a backtrace rather than risking its guard page.
const WALK_HEADROOM: usize = 32 * 1024;

/// What a green thread is doing at the moment of a [`Dump`].
///
/// # Examples
///
/// ```
/// use purloin_sched::GreenState;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let me = purloin_sched::current().unwrap().id();
///     let dump = purloin_sched::current_dump().unwrap();
///     dump.threads.into_iter().find(|t| t.id == me).unwrap().state
/// });
/// // The green thread that asks sees itself running.
/// assert!(matches!(h.join().unwrap(), GreenState::Running { .. }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GreenState {
    /// Running on the worker holding processor `worker`.
    Running {
        /// The processor's index.
        worker: usize,
    },
    /// Running in a blocking section ([`blocking`](crate::blocking)): on the processor
    /// `worker` if it still holds it, or `None` once the processor was handed to another
    /// worker (also, for an instant, a green thread being switched in).
    Blocking {
        /// The processor's index, if it still holds one.
        worker: Option<usize>,
    },
    /// In a run queue, ready to run.
    Runnable,
    /// Spawned and never run yet.
    NotStarted,
    /// Parked: waiting for an unpark (see [`GreenDump::wait`]).
    Parked,
    /// Being run inline by the green thread that joins it (join-helping).
    RunInline,
    /// Finished; its join handle has not taken the result yet.
    Finished,
}

impl fmt::Display for GreenState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GreenState::Running { worker } => write!(f, "running on worker {worker}"),
            GreenState::Blocking { worker: Some(w) } => {
                write!(f, "in a blocking section on worker {w}")
            }
            GreenState::Blocking { worker: None } => {
                f.write_str("in a blocking section (its processor handed off)")
            }
            GreenState::Runnable => f.write_str("runnable"),
            GreenState::NotStarted => f.write_str("runnable, not started"),
            GreenState::Parked => f.write_str("parked"),
            GreenState::RunInline => f.write_str("run inline by its joiner"),
            GreenState::Finished => f.write_str("finished, not joined"),
        }
    }
}

/// One frame of a [`StackTrace`]: an instruction pointer and, where the debug info knows it,
/// the function, file and line (one frame per inlined function).
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(purloin_sched::park);
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// let dump = sched.dump();
/// for frame in &dump.threads[0].backtrace.as_ref().unwrap().frames {
///     let name = frame.function.as_deref().unwrap_or("?");
///     println!("{:#x} {name} {:?}:{:?}", frame.ip, frame.file, frame.line);
/// }
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Frame {
    /// The instruction pointer (a return address for every frame but the innermost).
    pub ip: usize,
    /// The demangled function name.
    pub function: Option<String>,
    /// The source file.
    pub file: Option<std::path::PathBuf>,
    /// The line in `file`.
    pub line: Option<u32>,
}

/// A symbolized backtrace of a green thread's own stack, innermost frame first, cut to read
/// like Go's traceback: for a parked green thread, from the wait its code called to its own
/// entry function.
///
/// Each frame is sorted by where its code comes from — the runtime's crates (`purloin*`), the
/// standard library, or the user's (anything else) — by the function's path, or, for a
/// function inlined without one (line tables only, as release builds have), by its source
/// file's crate directory. Then:
///
/// - the walk's own frames (the `backtrace` crate, the walker, the context switch that visits
///   the stack) are dropped;
/// - the runtime's frames above the first frame of user code go to [`hidden`](Self::hidden),
///   except the outermost of them, the call the user made, which comes first in
///   [`frames`](Self::frames) (for a channel receive `Receiver::recv`, for a bare park
///   `park`), as Go shows `chanrecv` and not the `gopark` and `mcall` above it;
/// - everything below the last frame of user code (the entry trampoline, the task's call,
///   `catch_unwind`, the facade's wrappers) is the runtime's way in,
///   [`entry`](Self::entry), which `Display` shows as one line.
///
/// A stack with no user frame at all (a green thread running a runtime function directly,
/// such as `spawn(park)`) hides only the scheduler's switch above the wait and collapses only
/// the scheduler's own entry frames.
///
/// # Examples
///
/// ```
/// #[inline(never)]
/// fn wait_here() {
///     purloin_sched::park();
/// }
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(wait_here);
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// let dump = sched.dump();
/// let bt = dump.threads[0].backtrace.as_ref().unwrap();
/// // The first frame is the wait; the scheduler's switch is hidden, its way in collapsed.
/// let first = bt.frames[0].function.as_deref().unwrap();
/// assert!(first.ends_with("park"), "{bt}");
/// assert!(bt.contains("wait_here"), "{bt}");
/// assert!(!bt.entry.is_empty());
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct StackTrace {
    /// The frames a reader needs: from the wait (or, for the green thread that asked for the
    /// dump, the dump call) to the green thread's entry function.
    pub frames: Vec<Frame>,
    /// The runtime's frames above `frames[0]`: its park and switch machinery (or the dump's
    /// own frames), innermost first. Not shown by `Display`.
    pub hidden: Vec<Frame>,
    /// The runtime's frames below the last of `frames`: the entry trampoline, the task's
    /// call, `catch_unwind` and the facade's wrappers, innermost first. `Display` shows them
    /// as one line.
    pub entry: Vec<Frame>,
}

impl StackTrace {
    /// Whether some frame of [`frames`](Self::frames) has a function name containing `name`.
    ///
    /// # Examples
    ///
    /// ```
    /// let t = purloin_sched::StackTrace::default();
    /// assert!(!t.contains("main"));
    /// ```
    pub fn contains(&self, name: &str) -> bool {
        self.frames.iter().any(|f| f.function.as_deref().is_some_and(|n| n.contains(name)))
    }
}

impl fmt::Display for StackTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, fr) in self.frames.iter().enumerate() {
            match &fr.function {
                Some(name) => writeln!(f, "  {i:3}: {name}")?,
                None => writeln!(f, "  {i:3}: {:#x} (no symbol)", fr.ip)?,
            }
            if let (Some(file), Some(line)) = (&fr.file, fr.line) {
                writeln!(f, "           at {}:{line}", file.display())?;
            }
        }
        if !self.entry.is_empty() {
            writeln!(f, "       ... runtime entry frames ({})", self.entry.len())?;
        }
        Ok(())
    }
}

/// One green thread in a [`Dump`].
///
/// # Examples
///
/// ```
/// use purloin_sched::{GreenState, SpawnOptions};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let opts = SpawnOptions { name: Some("idle".into()), ..SpawnOptions::default() };
/// let (h, line) = (sched.spawn_with(opts, purloin_sched::park).unwrap(), line!());
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// let dump = sched.dump();
/// let t = &dump.threads[0];
/// assert_eq!(t.name.as_deref(), Some("idle"));
/// assert_eq!(t.state, GreenState::Parked);
/// assert!(t.in_state_for.is_some()); // how long it has been parked
/// assert_eq!(t.spawned_by, None); // spawned from a plain thread
/// assert_eq!(t.created_at.unwrap().line(), line); // where `spawn_with` was called
/// assert!(t.backtrace.as_ref().unwrap().contains("park"));
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GreenDump {
    /// Its id.
    pub id: GreenId,
    /// Its name, if it has one.
    pub name: Option<Arc<str>>,
    /// What it is doing.
    pub state: GreenState,
    /// What it waits on, if parked in a primitive that records it.
    pub wait: Option<WaitInfo>,
    /// How long it has been in `state`: since it was spawned (not started), queued by a
    /// wake-up or a yield (runnable), switched in (running; a yield that found nothing else
    /// to run does not count), entered or left a blocking section, or parked. `None` for
    /// finished green threads and ones run inline by their joiner.
    ///
    /// Measured from a stamp of the scheduler's coarse clock, which the monitor refreshes: it
    /// is never less than the true duration and exceeds it by at most the clock's lag, 10 ms
    /// while the monitor runs (see [`Builder::monitor`](crate::Builder::monitor); without it
    /// the lag is larger).
    pub in_state_for: Option<Duration>,
    /// How long it has run on a worker ([`GreenThread::cpu_time`](crate::GreenThread::cpu_time):
    /// coarse) and how many times it was switched in; `None` for finished green threads and
    /// stackless tasks.
    pub cpu: Option<(Duration, u64)>,
    /// The green thread that spawned it (for a spawn from a child that its joiner ran inline,
    /// the joiner: the green thread whose record ran the code, as in hook events' `by`).
    /// `None` if a plain thread spawned it, and for a fork-join job
    /// ([`join`](crate::join)'s second closure run by another worker). The spawner may have
    /// ended since: ids are never reused.
    pub spawned_by: Option<GreenId>,
    /// Where in the source it was spawned: the call of the spawn function (they are all
    /// `#[track_caller]`, as are the facade's). `None` for a fork-join job.
    pub created_at: Option<&'static Location<'static>>,
    /// The child it runs inline (join-helping), if any.
    pub running_inline: Option<GreenId>,
    /// Its labels ([`set_current_labels`](crate::set_current_labels), inherited at spawn):
    /// for the green threads whose record the dump may read, the parked ones (held while
    /// their stacks are walked) and the caller; `None` for the others and in
    /// [`states`](crate::Scheduler::states).
    pub labels: Option<crate::Labels>,
    /// Its stack, innermost frame first: for parked green threads, and for the one calling
    /// the dump. `None` for running and runnable ones (their stacks may change under us), for
    /// stackless tasks, and for one parked too close to its stack limit for the walk.
    pub backtrace: Option<StackTrace>,
}

/// Every green thread of a scheduler at one moment (a racy snapshot: each green thread is
/// looked at once, in turn; a parked one cannot run while its stack is walked). `Display`s
/// like Go's SIGQUIT traceback.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(purloin_sched::park);
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// let dump = sched.dump();
/// let t = dump.threads.iter().find(|t| t.id == h.thread().id()).unwrap();
/// assert_eq!(t.state, purloin_sched::GreenState::Parked);
/// println!("{dump}");
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Dump {
    /// The green threads, by id.
    pub threads: Vec<GreenDump>,
    /// Number of processors (workers).
    pub workers: usize,
    /// The scheduler's number ([`Scheduler::number`](crate::Scheduler::number)); 0 in a
    /// `Dump::default()`.
    pub scheduler: u64,
}

impl Dump {
    /// Number of green threads in `state` (compared by variant, ignoring worker numbers).
    ///
    /// # Examples
    ///
    /// ```
    /// let dump = purloin_sched::Dump::default();
    /// assert_eq!(dump.count(purloin_sched::GreenState::Parked), 0);
    /// ```
    pub fn count(&self, state: GreenState) -> usize {
        let d = core::mem::discriminant(&state);
        self.threads.iter().filter(|t| core::mem::discriminant(&t.state) == d).count()
    }
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "purloin: scheduler #{}: {} green threads on {} workers",
            self.scheduler,
            self.threads.len(),
            self.workers
        )?;
        for t in &self.threads {
            writeln!(f)?;
            write!(f, "green thread {}", t.id)?;
            if let Some(name) = &t.name {
                write!(f, " \"{name}\"")?;
            }
            write!(f, " [{}", t.state)?;
            if let Some(w) = t.wait {
                write!(f, ": {}", w.kind.describe())?;
                if w.object != 0 {
                    write!(f, " {:#x}", w.object)?;
                }
                if let Some(h) = w.holder {
                    write!(f, ", held by {h}")?;
                }
            }
            if let Some(d) = t.in_state_for {
                write!(f, ", for {}", ShortDuration(d))?;
            }
            if let Some((ran, switches)) = t.cpu {
                let plural = if switches == 1 { "" } else { "es" };
                write!(f, "; ran {} in {switches} switch{plural}", ShortDuration(ran))?;
            }
            if let Some(c) = t.running_inline {
                write!(f, "; running {c} inline")?;
            }
            writeln!(f, "]:")?;
            match &t.backtrace {
                Some(bt) => write!(f, "{bt}")?,
                None => writeln!(f, "  (no backtrace)")?,
            }
            match (t.spawned_by, t.created_at) {
                (Some(by), Some(at)) => writeln!(f, "created by green thread {by} at {at}")?,
                (Some(by), None) => writeln!(f, "created by green thread {by}")?,
                (None, Some(at)) => writeln!(f, "created by a plain thread at {at}")?,
                (None, None) => {}
            }
            if let Some(l) = &t.labels {
                writeln!(f, "labels: {l}")?;
            }
        }
        Ok(())
    }
}

/// The green threads of a scheduler grouped by what they are doing, with counts, largest
/// group first: Go's goroutine profile with `debug=1`. Green threads fall into one group when
/// they share their state, the kind of their wait, their stack (the same return addresses, so
/// the same place reached by the same path), their spawn site and their labels.
///
/// Made for programs with many green threads: each stack is walked into a fixed buffer and
/// hashed, and only the first stack of each group is kept and symbolized, so the time and
/// memory follow the number of green threads for the walk and the number of groups for the
/// rest; nothing is formatted per green thread. `Display` reads
/// "12000 × parked: a channel receive" followed by the group's stack and spawn site.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let hs: Vec<_> = (0..10).map(|_| sched.spawn(purloin_sched::park)).collect();
/// while sched.parked().len() < 10 {
///     std::thread::yield_now();
/// }
/// let grouped = sched.dump_grouped();
/// // Ten green threads parked at the same place, spawned at the same line: one group.
/// assert_eq!(grouped.groups.len(), 1);
/// assert_eq!(grouped.groups[0].count, 10);
/// assert!(grouped.groups[0].backtrace.as_ref().unwrap().contains("park"));
/// println!("{grouped}");
/// for h in hs {
///     h.thread().unpark();
///     h.join().unwrap();
/// }
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct GroupedDump {
    /// The groups, largest first (ties: the group whose first member has the lower id).
    pub groups: Vec<GreenGroup>,
    /// Number of green threads (the sum of the groups' counts).
    pub threads: usize,
    /// Number of processors (workers).
    pub workers: usize,
    /// The scheduler's number ([`Scheduler::number`](crate::Scheduler::number)).
    pub scheduler: u64,
}

/// How many ids a [`GreenGroup`] keeps as examples of its members.
pub const GROUP_SAMPLE: usize = 8;

/// One group of a [`GroupedDump`]: green threads in the same state, waiting on the same kind
/// of object, with the same stack, spawned at the same place, with the same labels.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GreenGroup {
    /// How many green threads are in it.
    pub count: usize,
    /// Their state.
    pub state: GreenState,
    /// What they wait on, for parked ones in a primitive that records it (the objects differ
    /// from member to member; the kind is the same).
    pub wait: Option<crate::WaitKind>,
    /// Their stack (see [`StackTrace`]): for parked green threads and for the one calling the
    /// dump; `None` as in [`GreenDump::backtrace`].
    pub backtrace: Option<StackTrace>,
    /// Where in the source they were spawned.
    pub spawned_at: Option<&'static Location<'static>>,
    /// Their labels (as [`GreenDump::labels`]: read for parked green threads and the caller).
    pub labels: Option<crate::Labels>,
    /// The longest time a member has been in `state` (see [`GreenDump::in_state_for`]).
    pub longest: Option<Duration>,
    /// The ids of the first members met, up to [`GROUP_SAMPLE`] of them, in ascending order.
    pub sample: Vec<GreenId>,
}

impl GroupedDump {
    /// Number of green threads in `state` (compared by variant, ignoring worker numbers).
    ///
    /// # Examples
    ///
    /// ```
    /// let dump = purloin_sched::GroupedDump::default();
    /// assert_eq!(dump.count(purloin_sched::GreenState::Parked), 0);
    /// ```
    pub fn count(&self, state: GreenState) -> usize {
        let d = core::mem::discriminant(&state);
        self.groups.iter().filter(|g| core::mem::discriminant(&g.state) == d).map(|g| g.count).sum()
    }
}

impl fmt::Display for GroupedDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "purloin: scheduler #{}: {} green threads on {} workers, in {} groups by state, \
             wait, stack and spawn site",
            self.scheduler,
            self.threads,
            self.workers,
            self.groups.len()
        )?;
        for g in &self.groups {
            writeln!(f)?;
            write!(f, "{} × {}", g.count, g.state)?;
            if let Some(w) = g.wait {
                write!(f, ": {}", w.describe())?;
            }
            if let Some(d) = g.longest {
                write!(f, ", the longest for {}", ShortDuration(d))?;
            }
            writeln!(f)?;
            match &g.backtrace {
                Some(bt) => write!(f, "{bt}")?,
                None => writeln!(f, "  (no backtrace)")?,
            }
            if let Some(at) = g.spawned_at {
                writeln!(f, "created at {at}")?;
            }
            if let Some(l) = &g.labels {
                writeln!(f, "labels: {l}")?;
            }
            write!(f, "e.g. green thread")?;
            if g.count > 1 {
                f.write_str("s")?;
            }
            for (i, id) in g.sample.iter().enumerate() {
                write!(f, "{}{id}", if i == 0 { " " } else { ", " })?;
            }
            if g.count > g.sample.len() {
                f.write_str(", ...")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// A duration as a dump shows it: "850µs", "12.5ms", "1.2s", "95s".
struct ShortDuration(Duration);

impl fmt::Display for ShortDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d >= Duration::from_secs(10) {
            write!(f, "{}s", d.as_secs())
        } else if d >= Duration::from_secs(1) {
            write!(f, "{:.1}s", d.as_secs_f64())
        } else if d >= Duration::from_millis(1) {
            write!(f, "{:.1}ms", d.as_secs_f64() * 1e3)
        } else {
            write!(f, "{}µs", d.as_micros())
        }
    }
}

/// Instruction pointers captured by a walk.
struct Ips {
    ips: [usize; MAX_FRAMES],
    len: usize,
    /// How many of the first frames belong to the walk itself (the walker, and for a parked
    /// green thread the visit of its stack), found without symbols: see `walk_here`.
    own: usize,
    /// For the walk of a parked green thread: its saved stack pointer. The walk's own frames
    /// are the ones below it (their canonical frame address is at most it); the green
    /// thread's frames are above.
    parked_sp: usize,
}

/// A walk's instruction pointers and how many of the first ones are the walk's own frames.
struct Walk {
    ips: Vec<usize>,
    own: usize,
}

impl Ips {
    fn new(parked_sp: usize) -> Ips {
        Ips { ips: [0; MAX_FRAMES], len: 0, own: 0, parked_sp }
    }

    /// Empties it for another walk (the array is overwritten, not cleared).
    fn reset(&mut self, parked_sp: usize) {
        self.len = 0;
        self.own = 0;
        self.parked_sp = parked_sp;
    }

    /// The walked instruction pointers.
    fn as_slice(&self) -> &[usize] {
        &self.ips[..self.len]
    }

    /// Walks the current stack into `self` (no allocation, no lock), counting the walk's own
    /// first frames: on a parked green thread's stack, those below its saved stack pointer;
    /// on the caller's own stack, those up to this function's frame, recognized by the start
    /// address of the function that encloses it (so neither needs a symbol name, which an
    /// optimized build may not keep for an inlined frame).
    #[inline(never)]
    fn walk_here(&mut self) {
        let me = Ips::walk_here as fn(&mut Ips) as usize;
        let mut found = false;
        // SAFETY: `trace_unsynchronized` requires that no other thread walks with it at the
        // same time *through the same unwinder state*: libgcc's `_Unwind_Backtrace` keeps no
        // global mutable state besides its own locked frame-description caches, so concurrent
        // walks are fine (std's own backtraces call it unsynchronized too).
        unsafe {
            backtrace::trace_unsynchronized(|frame| {
                if self.len == MAX_FRAMES {
                    return false;
                }
                if !found {
                    if self.parked_sp != 0 {
                        if frame.sp() as usize <= self.parked_sp {
                            self.own = self.len + 1;
                        } else {
                            found = true;
                        }
                    } else if frame.symbol_address() as usize == me {
                        self.own = self.len + 1;
                        found = true;
                    }
                }
                self.ips[self.len] = frame.ip() as usize;
                self.len += 1;
                true
            })
        };
    }

    fn walk(&self) -> Walk {
        Walk { ips: self.ips[..self.len].to_vec(), own: self.own }
    }
}

/// The function [`Context::visit`](purloin_context::Context::visit) runs on a parked green
/// thread's stack: walk it into the `Ips` whose address is `data`.
fn walk_visited(data: usize) {
    // SAFETY: `data` is the address of the `Ips` in `capture_parked`'s frame, which waits in
    // `visit` until we return; nothing else touches it meanwhile.
    let ips = unsafe { &mut *(data as *mut Ips) };
    ips.walk_here();
}

/// The crates whose frames are the runtime's: this one, the ones built on it (the facade and
/// purloin-sync) and the crates below.
const RUNTIME_CRATES: [&str; 7] = [
    "purloin",
    "purloin_sync",
    "purloin_sched",
    "purloin_context",
    "purloin_stack",
    "purloin_parking",
    "purloin_deque",
];

/// The crates of the standard library (and its unwinding glue).
const STD_CRATES: [&str; 4] = ["std", "core", "alloc", "panic_unwind"];

/// The frames a walk starts with, in the walker itself: each is called through a pointer or
/// never inlined, so its frame always has its full path.
const WALKER_FUNCTIONS: [&str; 2] =
    ["purloin_sched::dump::Ips::walk_here", "purloin_sched::dump::walk_visited"];

/// Frames of the scheduler's switch out, above the wait a green thread called, found by
/// name when a stack has no user frame to anchor on (inlined frames carry their bare name).
const SWITCH_FUNCTIONS: [&str; 9] = [
    "switch_out_from",
    "switch_hooked",
    "resume_g0",
    "switch_out",
    "park_on",
    "park_on_unless",
    "park_timed",
    "resume",
    "run_ontop",
];

/// Where a frame's code comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// One of [`RUNTIME_CRATES`], by its crate's name (the `usize`: its index there).
    Runtime(usize),
    /// The standard library.
    Std,
    /// Anything else: the program's own code and its other dependencies.
    User,
    /// No name and no file to tell.
    Unknown,
}

/// The crate of a demangled function path (`purloin_sched` for
/// `purloin_sched::thread::park`, `core` for `<core::panic::AssertUnwindSafe<F> as
/// core::ops::FnOnce<()>>::call_once`), or `None` for a bare name (an inlined function
/// described by line tables only, such as `park` or `{closure#0}`).
fn crate_of(function: &str) -> Option<&str> {
    let path = match function.strip_prefix('<') {
        // `<Type as Trait>::f`: the type's crate.
        Some(inner) => {
            let end = inner.find(" as ").or_else(|| inner.find('>')).unwrap_or(inner.len());
            inner[..end].trim_start_matches(['&', '*']).trim_start_matches("mut ")
        }
        None => function,
    };
    let head = &path[..path.find('<').unwrap_or(path.len())];
    let end = head.find("::")?;
    let name = &head[..end];
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some(name)
}

/// The source directory of the crate that `file` belongs to: its path up to and including
/// the last `src` component.
fn source_root(file: &std::path::Path) -> Option<&std::path::Path> {
    file.ancestors().skip(1).find(|dir| dir.file_name().is_some_and(|n| n == "src"))
}

/// Whether `file` is a source file of the standard library (its paths in the toolchain's
/// debug info look like `/rustc/<hash>/library/std/src/panicking.rs`).
fn is_std_file(file: &std::path::Path) -> bool {
    let mut parts = file.components().map(|c| c.as_os_str());
    while let Some(part) = parts.next() {
        if part == "library" {
            return parts.next().is_some_and(|c| STD_CRATES.iter().any(|s| c == *s));
        }
    }
    false
}

/// Sorts the frames of one or more walks by [`Origin`] and cuts each into a [`StackTrace`].
/// Frames with a path name their crate; for the others (inlined frames under line tables
/// only), the crate is learned from the source directories of the frames that have one.
struct Sorter {
    /// Crate source directories seen with a path-named frame, and their origin.
    roots: Vec<(std::path::PathBuf, Origin)>,
}

impl Sorter {
    fn learn<'a>(walks: impl Iterator<Item = &'a Vec<Vec<Frame>>>) -> Sorter {
        let mut sorter = Sorter { roots: Vec::new() };
        // The runtime's own functions first: their crates are known without their names.
        for (addr, krate) in runtime_code() {
            // The entry address itself: no return address to step back from.
            let mut file = None;
            backtrace::resolve((addr + 1) as *mut core::ffi::c_void, |sym| {
                file = file.take().or_else(|| sym.filename().map(|p| p.to_path_buf()));
            });
            if let Some(file) = file {
                sorter.note(&file, Self::origin_of_crate(krate));
            }
        }
        for f in walks.flatten().flatten() {
            let (Some(name), Some(file)) = (&f.function, &f.file) else { continue };
            let Some(krate) = crate_of(name) else { continue };
            sorter.note(file, Self::origin_of_crate(krate));
        }
        sorter
    }

    /// Remembers that `file`'s crate source directory holds code of `origin` (the first
    /// word on a directory stands).
    fn note(&mut self, file: &std::path::Path, origin: Origin) {
        if let Some(root) = source_root(file)
            && !self.roots.iter().any(|(r, _)| r == root)
        {
            self.roots.push((root.to_path_buf(), origin));
        }
    }

    fn origin_of_crate(krate: &str) -> Origin {
        if let Some(i) = RUNTIME_CRATES.iter().position(|c| *c == krate) {
            Origin::Runtime(i)
        } else if STD_CRATES.contains(&krate) {
            Origin::Std
        } else {
            Origin::User
        }
    }

    fn origin(&self, f: &Frame) -> Origin {
        if let Some(krate) = f.function.as_deref().and_then(crate_of) {
            return Self::origin_of_crate(krate);
        }
        if f.function.as_deref().is_some_and(|n| n.starts_with("__rust")) {
            return Origin::Std;
        }
        let Some(file) = &f.file else {
            return if f.function.is_some() { Origin::User } else { Origin::Unknown };
        };
        if is_std_file(file) {
            return Origin::Std;
        }
        let root = source_root(file);
        match self.roots.iter().find(|(r, _)| Some(r.as_path()) == root) {
            Some((_, origin)) => *origin,
            None => Origin::User,
        }
    }

    /// Cuts one walk's frames (innermost first, the walk's own frames already left out) as
    /// [`StackTrace`] says. With `by_name`, the walk could not tell its own frames
    /// apart: they are found by the walker's function names.
    fn cut(&self, mut frames: Vec<Frame>, by_name: bool) -> StackTrace {
        if by_name
            && let Some(w) = frames.iter().rposition(|f| {
                f.function
                    .as_deref()
                    .is_some_and(|n| WALKER_FUNCTIONS.iter().any(|w| n.starts_with(w)))
            })
        {
            frames.drain(..=w);
        }
        // The walk ends at the trampoline, or at a zero return address past it.
        while frames.last().is_some_and(|f| f.ip == 0) {
            frames.pop();
        }
        if frames.is_empty() {
            return StackTrace::default();
        }
        let origins: Vec<Origin> = frames.iter().map(|f| self.origin(f)).collect();
        let (start, end) = match origins.iter().position(|o| *o == Origin::User) {
            Some(first_user) => {
                let last_user =
                    origins.iter().rposition(|o| *o == Origin::User).unwrap_or(first_user);
                // The outermost runtime frame above the user's code: the call it made.
                let start = origins[..first_user]
                    .iter()
                    .rposition(|o| matches!(o, Origin::Runtime(_)))
                    .unwrap_or(0);
                (start, last_user + 1)
            }
            None => {
                let start = frames
                    .iter()
                    .zip(&origins)
                    .take_while(|(f, o)| matches!(o, Origin::Runtime(_)) && is_switch(f))
                    .count()
                    .min(frames.len().saturating_sub(1));
                let (sched, context) =
                    (crate_index("purloin_sched"), crate_index("purloin_context"));
                let entry = origins[start..]
                    .iter()
                    .rev()
                    .take_while(|o| match o {
                        Origin::Std | Origin::Unknown => true,
                        Origin::Runtime(i) => *i == sched || *i == context,
                        Origin::User => false,
                    })
                    .count()
                    .min(frames.len() - start - 1);
                (start, frames.len() - entry)
            }
        };
        let entry = frames.split_off(end);
        let shown = frames.split_off(start);
        StackTrace { frames: shown, hidden: frames, entry }
    }
}

/// Whether `f` is one of [`SWITCH_FUNCTIONS`] (by its last path segment, without generic
/// arguments: an inlined generic frame is named `park_on_unless<0>`).
fn is_switch(f: &Frame) -> bool {
    f.function.as_deref().is_some_and(|n| {
        let last = n.rsplit("::").next().unwrap_or(n);
        let last = last.split('<').next().unwrap_or(last);
        SWITCH_FUNCTIONS.contains(&last)
    })
}

/// Resolves one captured instruction pointer to its frames: the functions inlined there,
/// innermost first, then the function the code belongs to.
fn resolve(ip: usize) -> Vec<Frame> {
    let mut frames = Vec::new();
    backtrace::resolve(ip as *mut core::ffi::c_void, |sym| {
        frames.push(Frame {
            ip,
            function: sym.name().map(|n| format!("{n:#}")),
            file: sym.filename().map(|p| p.to_path_buf()),
            line: sym.lineno(),
        });
    });
    if frames.is_empty() {
        frames.push(Frame { ip, function: None, file: None, line: None });
    }
    frames
}

/// Symbolizes the captured walks of one dump and cuts each into a [`StackTrace`]. Identical
/// walks (green threads parked at the same place by the same path) are symbolized once, and
/// each instruction pointer is resolved once: the cost follows the distinct stacks, not the
/// green threads.
fn symbolize(walks: &[&Walk]) -> Vec<StackTrace> {
    let mut distinct: Vec<&Walk> = Vec::new();
    let mut index: std::collections::HashMap<(&[usize], usize), usize> =
        std::collections::HashMap::new();
    let which: Vec<usize> = walks
        .iter()
        .map(|w| {
            *index.entry((&w.ips[..], w.own)).or_insert_with(|| {
                distinct.push(w);
                distinct.len() - 1
            })
        })
        .collect();
    let mut cache: std::collections::HashMap<usize, Vec<Frame>> = std::collections::HashMap::new();
    let resolved: Vec<Vec<Vec<Frame>>> = distinct
        .iter()
        .map(|w| {
            w.ips.iter().map(|&ip| cache.entry(ip).or_insert_with(|| resolve(ip)).clone()).collect()
        })
        .collect();
    let sorter = Sorter::learn(resolved.iter());
    let traces: Vec<StackTrace> = resolved
        .into_iter()
        .zip(&distinct)
        .map(|(mut groups, w)| {
            // The walk's own frames, then, on a parked green thread's stack, the visit's
            // function that its switch called on its way back in (code of purloin_context
            // alone: the green thread's frame has the scheduler's code around it).
            let mut own = w.own.min(groups.len());
            if w.own > 0 {
                let context = Origin::Runtime(crate_index("purloin_context"));
                own += groups[own..]
                    .iter()
                    .take_while(|g| g.iter().all(|f| sorter.origin(f) == context))
                    .count();
            }
            let frames = groups.split_off(own).into_iter().flatten().collect();
            sorter.cut(frames, w.own == 0)
        })
        .collect();
    which.into_iter().map(|i| traces[i].clone()).collect()
}

/// The index of `krate` in [`RUNTIME_CRATES`].
fn crate_index(krate: &str) -> usize {
    RUNTIME_CRATES.iter().position(|c| *c == krate).expect("one of the runtime's crates")
}

/// Functions of the runtime's crates above this one (the facade), each with its crate's
/// name, registered with [`note_runtime_code`].
static RUNTIME_CODE: std::sync::Mutex<Vec<(usize, &'static str)>> =
    std::sync::Mutex::new(Vec::new());

/// Registers the function at `addr` as code of `krate`, a crate of the runtime built on this
/// one (the `purloin` facade registers itself and purloin-sync when it builds a runtime). A
/// dump resolves it to learn the crate's source directory, so that it can tell that crate's
/// inlined frames, which optimized builds describe by bare names and files only, from the
/// user's. Unknown crate names are ignored.
///
/// # Examples
///
/// ```
/// fn some_function_of_the_facade() {}
/// purloin_sched::note_runtime_code("purloin", some_function_of_the_facade as fn() as usize);
/// ```
#[doc(hidden)]
pub fn note_runtime_code(krate: &'static str, addr: usize) {
    if !RUNTIME_CRATES.contains(&krate) {
        return;
    }
    let mut code = RUNTIME_CODE.lock().unwrap_or_else(|e| e.into_inner());
    if !code.iter().any(|(_, k)| *k == krate) {
        code.push((addr, krate));
    }
}

/// The functions a dump resolves first to learn the runtime crates' source directories: one
/// of this crate, one of `purloin_context`, and the registered ones.
fn runtime_code() -> Vec<(usize, &'static str)> {
    let mut code = vec![
        (Ips::walk_here as fn(&mut Ips) as usize, "purloin_sched"),
        (
            purloin_context::is_abandon_payload as fn(&(dyn core::any::Any + Send)) -> bool
                as usize,
            "purloin_context",
        ),
    ];
    code.extend(RUNTIME_CODE.lock().unwrap_or_else(|e| e.into_inner()).iter().copied());
    code
}

/// Captures the stack of the parked green thread `g` of `generation`, or returns `None` if it
/// is no longer parked (or has no stack to walk), and its labels (if it was still parked).
/// Leaves it parked, or queues it if an unpark arrived during the walk.
fn capture_parked(
    g: GRef,
    generation: u32,
    shared: &Shared,
) -> (Option<Walk>, Option<crate::Labels>) {
    let mut ips = Ips::new(0);
    let (walked, labels) = walk_parked(g, generation, shared, &mut ips);
    (walked.then(|| ips.walk()), labels)
}

/// [`capture_parked`] into `ips` (reset first), without allocating; returns whether the stack
/// was walked, and the green thread's labels if it was held.
fn walk_parked(
    g: GRef,
    generation: u32,
    shared: &Shared,
    ips: &mut Ips,
) -> (bool, Option<crate::Labels>) {
    if !g.begin_inspect(generation) {
        return (false, None);
    }
    // INSPECTED: the dump owns the record, labels included.
    let labels = g.own_labels();
    // SAFETY: INSPECTED: the dump owns the G's cells (D1), like g0 owns a PARKING G.
    let ctx = unsafe { g.context.with_mut(|c| (*c).take()) };
    ips.reset(ctx.as_ref().map_or(0, |c| c.stack_pointer()));
    let mut walked = false;
    if let Some(mut ctx) = ctx {
        // SAFETY: as above.
        let limit = unsafe { g.stack.with(|s| (*s).as_ref().map(|s| s.limit() as usize)) };
        if let Some(limit) = limit
            && ctx.stack_pointer().saturating_sub(limit) >= WALK_HEADROOM
        {
            // SAFETY: `ctx` is the G's context, suspended by its switch out (it parked) on
            // its stack, which stays attached while the G lives; the dump owns both while the
            // G is INSPECTED (no worker resumes it: nobody can queue it); there are at least
            // WALK_HEADROOM bytes below its stack pointer; `walk_visited` does not unwind and
            // touches no thread-local.
            unsafe { ctx.visit(ips as *mut Ips as usize, walk_visited) };
            walked = true;
        }
        // SAFETY: still INSPECTED: ours.
        unsafe { g.context.with_mut(|c| *c = Some(ctx)) };
    }
    if !g.end_inspect() {
        // An unpark arrived meanwhile and left its token: we queue it (D2).
        crate::ready::schedule(g, shared, false);
    }
    (walked, labels)
}

/// A dump whose stacks are walked but not yet symbolized.
struct Captured {
    dump: Dump,
    /// Each walked stack, with the index of its thread.
    walks: Vec<(usize, Walk)>,
}

/// Dumps the green threads of `shared`; with `backtraces`, walks the stacks of the parked ones
/// (and of the calling green thread) and symbolizes them.
pub(crate) fn dump_of(shared: &Arc<Shared>, backtraces: bool) -> Dump {
    let number = number_of(shared);
    finish(vec![capture(shared, backtraces, number)]).pop().expect("one dump in, one out")
}

/// Symbolizes the walks of `captured` (on the caller's stack, after every green thread was
/// let go), learning the crates' source directories from all of them at once.
fn finish(captured: Vec<Captured>) -> Vec<Dump> {
    let walks: Vec<&Walk> = captured.iter().flat_map(|c| c.walks.iter().map(|(_, w)| w)).collect();
    let mut traces = symbolize(&walks).into_iter();
    captured
        .into_iter()
        .map(|c| {
            let mut dump = c.dump;
            for (i, _) in c.walks {
                dump.threads[i].backtrace = traces.next();
            }
            dump.threads.sort_by_key(|t| t.id);
            dump
        })
        .collect()
}

/// Looks at every green thread of `shared` once; with `backtraces`, walks the stacks of the
/// parked ones (and of the calling green thread).
fn capture(shared: &Arc<Shared>, backtraces: bool, number: u64) -> Captured {
    let me = crate::thread::running_g();
    let sched = Arc::as_ptr(shared);
    // Durations are measured against a precise reading (which also refreshes the clock).
    let now = crate::clock::refresh();
    let mut threads = Vec::new();
    let mut walks: Vec<(usize, Walk)> = Vec::new();
    registry().for_each(|gref| {
        if !gref.try_ref() {
            return;
        }
        // SAFETY: we hold a reference (the record is not recycled under us); `sched` is written
        // only at spawn, before the G is published.
        let ours = unsafe { gref.sched.with(|s| *s) } == sched;
        let w = gref.state.load(Ordering::Acquire);
        if ours {
            let generation = g::generation_of(w);
            if let Some(state) = state_of(shared, gref, w) {
                let inline = gref.inline_child_id.load(crate::sync::STAT);
                let (trace, labels) = if !backtraces {
                    (None, None)
                } else if me == Some(gref) {
                    let mut ips = Ips::new(0);
                    ips.walk_here();
                    (Some(ips.walk()), gref.own_labels())
                } else if state == GreenState::Parked {
                    capture_parked(gref, generation, shared)
                } else {
                    (None, None)
                };
                if let Some(t) = trace {
                    walks.push((threads.len(), t));
                }
                let timed = !matches!(state, GreenState::Finished | GreenState::RunInline);
                let since = gref.since.load(crate::sync::STAT);
                let spawner = gref.spawned_by.load(crate::sync::STAT);
                threads.push(GreenDump {
                    id: GreenId(gref.id_with(generation)),
                    name: gref.name(),
                    state,
                    in_state_for: timed.then(|| crate::clock::elapsed(since, now)),
                    cpu: (state != GreenState::Finished && !gref.is_step()).then(|| {
                        let ran = Duration::from_nanos(gref.run_nanos());
                        (ran, gref.switches.load(crate::sync::STAT))
                    }),
                    spawned_by: (spawner != 0).then_some(GreenId(spawner)),
                    created_at: gref.created_at(),
                    wait: wait_info_of(gref),
                    running_inline: (inline != 0).then_some(GreenId(inline)),
                    labels,
                    backtrace: None,
                });
            }
        }
        if gref.drop_ref() {
            recycle_anywhere(gref);
        }
    });
    Captured { dump: Dump { threads, workers: shared.active().len(), scheduler: number }, walks }
}

/// A group being collected: its key (with the first member's walk) and its tallies.
struct GroupAcc {
    hash: u64,
    state: GreenState,
    wait: Option<crate::WaitKind>,
    spawned_at: Option<&'static Location<'static>>,
    labels: Option<crate::Labels>,
    walk: Option<Walk>,
    count: usize,
    /// The oldest stamp of the coarse clock among the members (`None`: untimed states).
    oldest: Option<u64>,
    sample: Vec<GreenId>,
}

impl GroupAcc {
    fn matches(
        &self,
        state: GreenState,
        wait: Option<crate::WaitKind>,
        at: Option<&'static Location<'static>>,
        labels: &Option<crate::Labels>,
        ips: Option<(&[usize], usize)>,
    ) -> bool {
        self.state == state
            && self.wait == wait
            && self.labels == *labels
            && self.spawned_at.map(core::ptr::from_ref) == at.map(core::ptr::from_ref)
            && self.walk.as_ref().map(|w| (&w.ips[..], w.own)) == ips
    }
}

/// Mixes `x` into `h` (a multiply-rotate hash: the keys are return addresses, not chosen by an
/// adversary, and every candidate match is compared in full).
#[inline]
fn mix(h: u64, x: u64) -> u64 {
    (h.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95)
}

/// A grouped dump whose groups' stacks are walked but not yet symbolized.
struct CapturedGroups {
    groups: Vec<GroupAcc>,
    threads: usize,
    workers: usize,
    scheduler: u64,
    now: u64,
}

/// Looks at every green thread of `shared` once and tallies it into its group (see
/// [`GroupedDump`]): a parked one's stack is walked into one reused buffer and hashed; a new
/// group keeps its first member's walk, an existing one only counts.
fn capture_grouped(shared: &Arc<Shared>, number: u64) -> CapturedGroups {
    let me = crate::thread::running_g();
    let sched = Arc::as_ptr(shared);
    let now = crate::clock::refresh();
    let mut groups: Vec<GroupAcc> = Vec::new();
    let mut by_hash: std::collections::HashMap<u64, Vec<usize>> = std::collections::HashMap::new();
    let mut threads = 0;
    let mut ips = Box::new(Ips::new(0));
    registry().for_each(|gref| {
        if !gref.try_ref() {
            return;
        }
        // SAFETY: as in `capture`.
        let ours = unsafe { gref.sched.with(|s| *s) } == sched;
        let w = gref.state.load(Ordering::Acquire);
        if ours && let Some(state) = state_of(shared, gref, w) {
            let generation = g::generation_of(w);
            let (walked, labels) = if me == Some(gref) {
                ips.reset(0);
                ips.walk_here();
                (true, gref.own_labels())
            } else if state == GreenState::Parked {
                walk_parked(gref, generation, shared, &mut ips)
            } else {
                (false, None)
            };
            let wait = wait_info_of(gref).map(|w| w.kind);
            let at = gref.created_at();
            let stack = walked.then(|| (ips.as_slice(), ips.own));
            let (kind, worker) = match state {
                GreenState::Running { worker } => (0, worker as u64),
                GreenState::Blocking { worker } => (1, worker.map_or(u64::MAX, |w| w as u64)),
                GreenState::Runnable => (2, 0),
                GreenState::NotStarted => (3, 0),
                GreenState::Parked => (4, 0),
                GreenState::RunInline => (5, 0),
                GreenState::Finished => (6, 0),
            };
            let mut hash = mix(mix(0, kind), worker);
            hash = mix(hash, wait.map_or(u64::MAX, |k| k as u64));
            hash = mix(hash, at.map_or(0, |l| core::ptr::from_ref(l) as u64));
            if let Some(l) = &labels {
                use core::hash::BuildHasher;
                let h = std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default();
                hash = mix(hash, h.hash_one(l));
            }
            if let Some((s, own)) = stack {
                hash = mix(hash, own as u64);
                hash = s.iter().fold(hash, |h, &ip| mix(h, ip as u64));
            }
            let candidates = by_hash.entry(hash).or_default();
            let found = candidates.iter().copied().find(|&i| {
                groups[i].hash == hash && groups[i].matches(state, wait, at, &labels, stack)
            });
            let i = found.unwrap_or_else(|| {
                groups.push(GroupAcc {
                    hash,
                    state,
                    wait,
                    spawned_at: at,
                    labels,
                    walk: walked.then(|| ips.walk()),
                    count: 0,
                    oldest: None,
                    sample: Vec::new(),
                });
                candidates.push(groups.len() - 1);
                groups.len() - 1
            });
            let group = &mut groups[i];
            group.count += 1;
            if !matches!(state, GreenState::Finished | GreenState::RunInline) {
                let since = gref.since.load(crate::sync::STAT);
                group.oldest = Some(group.oldest.map_or(since, |o| o.min(since)));
            }
            if group.sample.len() < GROUP_SAMPLE {
                group.sample.push(GreenId(gref.id_with(generation)));
            }
            threads += 1;
        }
        if gref.drop_ref() {
            recycle_anywhere(gref);
        }
    });
    CapturedGroups { groups, threads, workers: shared.active().len(), scheduler: number, now }
}

/// Symbolizes the groups' walks (one per group, on the caller's stack, after every green
/// thread was let go) and sorts the groups, largest first.
fn finish_grouped(captured: Vec<CapturedGroups>) -> Vec<GroupedDump> {
    let walks: Vec<&Walk> =
        captured.iter().flat_map(|c| c.groups.iter().filter_map(|g| g.walk.as_ref())).collect();
    let mut traces = symbolize(&walks).into_iter();
    captured
        .into_iter()
        .map(|c| {
            let now = c.now;
            let mut groups: Vec<GreenGroup> = c
                .groups
                .into_iter()
                .map(|mut g| {
                    g.sample.sort_unstable();
                    GreenGroup {
                        count: g.count,
                        state: g.state,
                        wait: g.wait,
                        backtrace: g.walk.as_ref().and_then(|_| traces.next()),
                        spawned_at: g.spawned_at,
                        labels: g.labels,
                        longest: g.oldest.map(|since| crate::clock::elapsed(since, now)),
                        sample: g.sample,
                    }
                })
                .collect();
            groups.sort_by(|a, b| {
                b.count.cmp(&a.count).then(a.sample.first().cmp(&b.sample.first()))
            });
            GroupedDump { groups, threads: c.threads, workers: c.workers, scheduler: c.scheduler }
        })
        .collect()
}

/// [`Scheduler::dump_grouped`](crate::Scheduler::dump_grouped) of `shared`.
pub(crate) fn dump_grouped_of(shared: &Arc<Shared>) -> GroupedDump {
    let number = number_of(shared);
    finish_grouped(vec![capture_grouped(shared, number)]).pop().expect("one dump in, one out")
}

/// The state a dump reports for a green thread of `shared` whose state word is `w` (`None`
/// for a free record).
fn state_of(shared: &Shared, gref: GRef, w: u64) -> Option<GreenState> {
    match g::status_of(w) {
        g::RUNNABLE if g::bits_of(w) & g::FRESH != 0 => Some(GreenState::NotStarted),
        g::RUNNABLE => Some(GreenState::Runnable),
        g::RUNNING => Some(running_state(shared, gref)),
        // PARKING: switching out to park (its stack is not walked until it has).
        g::PARKING | g::PARKED | g::INSPECTED => Some(GreenState::Parked),
        g::CLAIMED => Some(GreenState::RunInline),
        g::DONE => Some(GreenState::Finished),
        _ => None,
    }
}

/// The schedulers of the process from their start until their shutdown begins, weakly, in
/// the order they started, with their numbers. Dumps hold it for reading while they look at
/// green threads; registering and unregistering (the start of a shutdown) take it for
/// writing, so a shutdown waits for the dumps in progress.
static SCHEDULERS: std::sync::RwLock<Live> =
    std::sync::RwLock::new(Live { last: 0, list: Vec::new() });

struct Live {
    /// The last number given out.
    last: u64,
    list: Vec<(u64, std::sync::Weak<Shared>)>,
}

fn live_read() -> std::sync::RwLockReadGuard<'static, Live> {
    // A panic never happens while the lock is held for writing (pushes and retains).
    SCHEDULERS.read().unwrap_or_else(|e| e.into_inner())
}

fn live_write() -> std::sync::RwLockWriteGuard<'static, Live> {
    SCHEDULERS.write().unwrap_or_else(|e| e.into_inner())
}

/// Lists a scheduler that just started; returns its number (1 for the process's first).
pub(crate) fn register(shared: &Arc<Shared>) -> u64 {
    let mut live = live_write();
    live.last += 1;
    let number = live.last;
    live.list.retain(|(_, w)| w.strong_count() > 0);
    live.list.push((number, Arc::downgrade(shared)));
    number
}

/// Takes a scheduler whose shutdown begins off the list, once no dump looks at it.
pub(crate) fn unregister(shared: &Arc<Shared>) {
    let ptr = Arc::as_ptr(shared);
    live_write().list.retain(|(_, w)| w.strong_count() > 0 && w.as_ptr() != ptr);
}

/// The number of a listed scheduler (0 once its shutdown began).
fn number_of(shared: &Arc<Shared>) -> u64 {
    let ptr = Arc::as_ptr(shared);
    live_read().list.iter().find(|(_, w)| w.as_ptr() == ptr).map_or(0, |(n, _)| *n)
}

/// Every running scheduler of the process, each as [`Scheduler::dump`](crate::Scheduler::dump)
/// shows it, in the order they started ([`Dump::scheduler`] tells them apart). Schedulers
/// whose shutdown has begun are left out; one that starts or stops meanwhile waits until
/// every green thread was looked at (not for the symbolization).
///
/// Made for a process-wide dump on a signal: it needs no handle to any scheduler.
///
/// # Examples
///
/// ```
/// let a = purloin_sched::Builder::new().workers(1).build().unwrap();
/// let b = purloin_sched::Builder::new().workers(2).build().unwrap();
/// let h = b.spawn(purloin_sched::park);
/// while b.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// let dumps = purloin_sched::dump_all();
/// let of_b = dumps.iter().find(|d| d.scheduler == b.number()).unwrap();
/// assert_eq!(of_b.workers, 2);
/// assert!(of_b.threads.iter().any(|t| t.id == h.thread().id()));
/// assert!(dumps.iter().any(|d| d.scheduler == a.number()));
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
pub fn dump_all() -> Vec<Dump> {
    let captured: Vec<Captured> = {
        let live = live_read();
        live.list
            .iter()
            .filter_map(|(n, w)| Some((*n, w.upgrade()?)))
            .map(|(n, shared)| capture(&shared, true, n))
            .collect()
    };
    finish(captured)
}

/// [`dump_all`] grouped: every running scheduler of the process, each as
/// [`Scheduler::dump_grouped`](crate::Scheduler::dump_grouped) shows it, in the order they
/// started.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
/// let h = sched.spawn(purloin_sched::park);
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// let dumps = purloin_sched::dump_all_grouped();
/// let mine = dumps.iter().find(|d| d.scheduler == sched.number()).unwrap();
/// assert_eq!(mine.threads, 1);
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
pub fn dump_all_grouped() -> Vec<GroupedDump> {
    let captured: Vec<CapturedGroups> = {
        let live = live_read();
        live.list
            .iter()
            .filter_map(|(n, w)| Some((*n, w.upgrade()?)))
            .map(|(n, shared)| capture_grouped(&shared, n))
            .collect()
    };
    finish_grouped(captured)
}

/// Where a RUNNING G runs: the processor whose `running` names it, and whether that
/// processor's holder is in a blocking section.
fn running_state(shared: &Shared, g: GRef) -> GreenState {
    for (i, p) in shared.active().iter().enumerate() {
        if p.running.load(Ordering::Relaxed) == g.as_ptr() {
            return if p.status.load(Ordering::Relaxed) == crate::p::RUNNING {
                GreenState::Running { worker: i }
            } else {
                GreenState::Blocking { worker: Some(i) }
            };
        }
    }
    GreenState::Blocking { worker: None }
}

impl crate::Scheduler {
    /// Every green thread of this scheduler: id, name, state, what it waits on, and a
    /// backtrace of its own stack for each parked one (and for the caller, if it is one of
    /// them). See [`Dump`].
    ///
    /// Safe to call while the scheduler runs: a parked green thread is held (it cannot be
    /// resumed) only while its own stack is walked; an unpark meanwhile is kept and honoured
    /// right after. Walking and symbolizing take time (the first symbolization reads the
    /// binary's debug info): this is a diagnostic, not something to call in a loop.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(purloin_sched::park);
    /// while sched.parked().is_empty() {
    ///     std::thread::yield_now();
    /// }
    /// let dump = sched.dump();
    /// let bt = dump.threads[0].backtrace.as_ref().unwrap();
    /// // `park` (inlined frames carry no path with line tables only).
    /// assert!(bt.contains("park"), "{bt}");
    /// h.thread().unpark();
    /// h.join().unwrap();
    /// ```
    pub fn dump(&self) -> Dump {
        dump_of(&self.shared, true)
    }

    /// Like [`dump`](Self::dump) without backtraces: states only, no green thread is held.
    /// Cheap enough for metrics (one pass over the green-thread records).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let dump = sched.states();
    /// assert!(dump.threads.iter().all(|t| t.backtrace.is_none()));
    /// ```
    pub fn states(&self) -> Dump {
        dump_of(&self.shared, false)
    }

    /// Every green thread of this scheduler, grouped by state, wait, stack and spawn site,
    /// with counts, largest group first (see [`GroupedDump`]). Like [`dump`](Self::dump), it
    /// holds each parked green thread while its stack is walked; unlike it, it symbolizes one
    /// stack per group and keeps no per-thread record, so it stays fast with a million green
    /// threads.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(purloin_sched::park);
    /// while sched.parked().is_empty() {
    ///     std::thread::yield_now();
    /// }
    /// let grouped = sched.dump_grouped();
    /// assert_eq!(grouped.count(purloin_sched::GreenState::Parked), 1);
    /// h.thread().unpark();
    /// h.join().unwrap();
    /// ```
    pub fn dump_grouped(&self) -> GroupedDump {
        dump_grouped_of(&self.shared)
    }
}

/// [`Scheduler::dump_grouped`](crate::Scheduler::dump_grouped) of the scheduler running the
/// current green thread (`None` on a plain thread).
///
/// # Examples
///
/// ```
/// assert!(purloin_sched::current_dump_grouped().is_none());
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let g = sched.spawn(|| purloin_sched::current_dump_grouped().unwrap()).join().unwrap();
/// assert_eq!(g.threads, 1); // the caller itself, running
/// ```
pub fn current_dump_grouped() -> Option<GroupedDump> {
    crate::worker::current_worker().map(|m| dump_grouped_of(&m.shared))
}

/// The dump of the scheduler running the current green thread (`None` on a plain thread).
///
/// # Examples
///
/// ```
/// assert!(purloin_sched::current_dump().is_none());
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let dump = sched.spawn(|| purloin_sched::current_dump().unwrap()).join().unwrap();
/// assert!(dump.threads[0].backtrace.is_some()); // the caller's own stack
/// ```
pub fn current_dump() -> Option<Dump> {
    crate::worker::current_worker().map(|m| dump_of(&m.shared, true))
}

/// [`Scheduler::states`](crate::Scheduler::states) of the scheduler running the current green
/// thread (`None` on a plain thread).
///
/// # Examples
///
/// ```
/// assert!(purloin_sched::current_worker_states().is_none());
/// ```
pub fn current_worker_states() -> Option<Dump> {
    crate::worker::current_worker().map(|m| dump_of(&m.shared, false))
}
