//! A G/M/P work-stealing scheduler for stackful green threads, built the way Go's runtime and
//! brpc's bthread are built.
//!
//! - **G** — a green thread: a small record (its entry, state, id); a guard-paged stack from
//!   [`purloin_stack`] and a saved [`purloin_context::Context`] are attached when it first runs.
//!   A spawn from a green thread with default options queues only its task: the worker that
//!   runs it gives it a record from its own cache, and a joiner that runs it inline needs none
//!   (its identity is made if something asks for it).
//! - **P** — a processor: exactly N of them (Go's GOMAXPROCS), each with a bounded local run
//!   queue ([`purloin_deque`]), a `runnext` slot, timers, caches and counters.
//! - **M** — a worker OS thread holding a P; idle workers sleep on [`purloin_parking`] lots.
//!
//! ```
//! use purloin_sched::Builder;
//!
//! let sched = Builder::new().workers(2).build().unwrap();
//! let h = sched.spawn(|| {
//!     // On a green thread: spawn children, join them (join-helping runs them inline).
//!     let kids: Vec<_> = (0..10u64)
//!         .map(|i| purloin_sched::spawn(move || i * i).unwrap())
//!         .collect();
//!     kids.into_iter().map(|k| k.join().unwrap()).sum::<u64>()
//! });
//! assert_eq!(h.join().unwrap(), 285);
//! ```
//!
//! # Thread-locals and migration
//!
//! A green thread may stop on one OS thread and continue on another (when another worker
//! steals it, or after a blocking section). A reference to a `thread_local!` value held across
//! a yield, park, channel wait or I/O wait may therefore point at another thread's value —
//! the hazard behind may#6, generator#58 and llvm#98479. Rules:
//!
//! - do not keep a `thread_local!` reference (or a `RefCell` borrow of one) across a
//!   scheduling point; re-access it after;
//! - for per-green-thread state use green-local storage (the `purloin` facade's
//!   `green_local!`);
//! - when code really needs one OS thread (a library with thread affinity), spawn the green
//!   thread **pinned** ([`SpawnOptions::pinned`]): it runs only on its spawner's worker and
//!   is never stolen (Go's `LockOSThread`). A worker with pinned green threads is exempt from
//!   the blocking handoff, so they never change OS thread.
//!
//! The scheduler's own code follows the rule: after every switch it finds its worker again
//! from the resumer's argument, never from a cached thread-local address.
//!
//! # Loom
//!
//! `cargo xtask loom -p purloin-sched` runs the models (unit models next to the code they
//! check, and `tests/loom_sched.rs`) against this crate's real code, with every atomic from
//! loom and contexts on purloin-context's loom backend. `LOOM.md`, next to this crate's
//! manifest, lists every labelled memory ordering with the weakening that removes it and the
//! model that then fails (or why no model can).
#![warn(missing_docs)]

mod blocking;
mod builder;
mod callback_timer;
mod cells;
mod clock;
#[cfg(not(loom))]
mod dump;
mod entry;
mod fork;
mod g;
mod held;
mod help;
pub mod hook;
mod idle;
mod join;
mod join_future;
mod labels;
mod lazy;
#[cfg(all(test, loom))]
mod loom_flush;
#[cfg(all(test, loom))]
mod loom_idle;
#[cfg(all(test, loom))]
mod loom_monitor;
#[cfg(all(test, loom))]
mod loom_spare;
mod os;
mod outside;
mod p;
mod poll;
mod ready;
mod registry;
mod scheduler;
mod shared;
mod shutdown;
pub mod spin;
mod stackless;
mod stats;
mod switch;
mod sync;
mod task;
mod thread;
mod timer_heap;
mod worker;

#[cfg(not(loom))]
pub use blocking::on_long_runner;
pub use blocking::{blocking, enter_blocking, exit_blocking};
pub use builder::{Builder, SpawnOptions};
pub use callback_timer::{Timer, call_at, call_every};
#[cfg(not(loom))]
pub use dump::{
    Dump, Frame, GROUP_SAMPLE, GreenDump, GreenGroup, GreenState, GroupedDump, StackTrace,
    current_dump, current_dump_grouped, current_worker_states, dump_all, dump_all_grouped,
    note_runtime_code,
};
pub use fork::{join, join_or_else};
pub use help::{run_detached_inline, run_detached_inline_while};
pub use join::JoinHandle;
pub use join_future::JoinFuture;
pub use labels::{Labels, current_labels, set_current_labels};
pub use outside::{
    BlockingOnFutures, IdleEvents, OutsideEvents, OutsideWait, ThreadMark, blocking_on_futures,
    helper_thread, helper_threads, idle_events, note_idle_event, note_outside_event,
    outside_events, wait_idle_event, wait_outside_event,
};
pub use poll::Poller;
pub use purloin_stack::StackSize;
pub use scheduler::{
    ParkedThread, Scheduler, ShutdownReport, TrySpawnError, current_parked, current_stats, flush,
    spawn_detached_unchecked, spawn_grouped_unchecked, spawn_with, with_user_data,
};
pub use stackless::{Task, TaskStep, spawn_task};
pub use stats::{
    DurationHistogram, GlobalStats, ParkHistogram, ProcStats, SCHED_LATENCY_PERIOD, Stats,
};
pub use switch::NoSwitch;
pub use task::Cancelled;
pub use thread::{
    ForcedUnwind, GreenId, GreenThread, WaitInfo, WaitKind, current, current_locals,
    in_green_thread, interrupted, park, park_deadline, park_deadline_interruptible,
    park_interruptible, park_timeout, preemption_point, set_current_locals, set_wait_info, sleep,
    sleep_until, take_interrupt, yield_now,
};

/// Spawns a green thread on the scheduler running the current green thread.
///
/// # Errors
/// See [`spawn_with`].
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let a = purloin_sched::spawn(|| 20).unwrap();
///     let b = purloin_sched::spawn(|| 22).unwrap();
///     a.join().unwrap() + b.join().unwrap()
/// });
/// assert_eq!(h.join().unwrap(), 42);
/// ```
#[track_caller]
pub fn spawn<F, T>(f: F) -> std::io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_with(SpawnOptions::default(), f)
}
