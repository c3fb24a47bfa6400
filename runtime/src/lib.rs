//! purloin: M:N stackful green threads for Rust, scheduled the way Go's runtime and brpc's
//! bthread do it.
//!
//! ```
//! // `spawn` works anywhere; from `main` it starts the global runtime (one worker per CPU).
//! let handles: Vec<_> = (0..10u64).map(|i| purloin::spawn(move || i * i)).collect();
//! let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
//! assert_eq!(sum, 285);
//! ```
//!
//! The API is shaped like `std::thread`: [`spawn`] returns a [`JoinHandle`]; [`Builder`] sets
//! a name, a stack size or pinning; [`scope`] borrows; [`join`] forks and joins; [`sleep`],
//! [`yield_now`], [`park`] and [`GreenThread::unpark`] work on green threads (and fall back to
//! the OS thread outside one). [`runtime::Runtime`] configures a runtime explicitly.
//!
//! # Green threads and thread-locals
//!
//! A green thread may stop on one OS thread and continue on another. Do not hold a
//! `thread_local!` reference across a scheduling point (a yield, park, join, lock, channel or
//! I/O wait); use [`green_local!`] for per-green-thread state, and [`Builder::pinned`] when a
//! library needs to stay on one OS thread. A green thread that blocks its OS thread
//! (`std::sync::Mutex`, `std::thread::sleep`, blocking I/O, a foreign call) does not stop the
//! others: after 1 ms the runtime starts a spare worker thread that takes over the queued
//! green threads. It still costs that thread: prefer [`sync`] and [`sleep`], which block only
//! the green thread, and wrap calls known to block in [`blocking`] (a hand-off after 20 µs).
//!
//! # I/O
//!
//! Blocking-style I/O parks only the calling green thread: [`net`] (TCP, UDP and Unix
//! sockets on the runtime's epoll netpoller), [`io::Async`] (the same for any descriptor: a
//! pipe, a tty, an eventfd), [`process`] (child processes waited on through a pidfd, their
//! pipes as green I/O), [`signal`] (SIGTERM, SIGINT, … as values on a channel), [`time`]
//! (sleeping, and [`time::after`] / [`time::Ticker`] channels for [`select!`]) and [`fs`]
//! (files through [`blocking`]). [`machine`] hosts stackless state machines (many small
//! actors stepped on the same workers).
//!
//! # Cancellation
//!
//! [`JoinHandle::interrupt`] makes a green thread's current (or next) wait return an
//! "interrupted" error (brpc's `bthread_interrupt`); [`cancel::CancelToken`] cancels a tree of
//! work with deadlines, reaching every green thread running in a token's scope without a
//! token in every signature (Go's `context.Context`); [`cancel::try_scope`] cancels the
//! siblings of the first child that fails (Go's `errgroup.WithContext`, Trio's nursery). The
//! [`cancel`] module lists what each wait does and the Go, brpc and tokio equivalents.
//!
//! # Async Rust
//!
//! [`future::block_on`] runs a future on a green thread, parking only the green thread;
//! [`JoinHandle`] and [`ScopedJoinHandle`] are [`IntoFuture`], so
//! async code can `.await` a green thread; with the `tokio` feature, `purloin::tokio::block_on`
//! runs futures that need tokio's reactor or timers. The [`future`] module's docs ("Using async
//! crates from green threads") show all three and what never to hold across a park.
//!
//! # Configuration
//!
//! The global runtime (the one [`spawn`] starts from an OS thread) takes its configuration
//! from the environment, read once when it starts, or from code:
//! [`runtime::Builder::install_global`] before its first use. Every
//! [`runtime::Builder::new`] reads the same variables as its defaults, and the builder's
//! methods override them. A value that does not parse is ignored with a warning naming the
//! accepted form.
//!
//! | variable | what it sets | accepted values | in code |
//! |---|---|---|---|
//! | `PURLOIN_WORKERS` | workers (Go's `GOMAXPROCS`); default one per CPU | a number from 1 up | [`runtime::Builder::workers`] |
//! | `PURLOIN_STACK_SIZE` | default green-thread stack; default 128 KiB | `small`, `normal`, `large`, or bytes with an optional `k`/`m`/`g` suffix (`64k`) | [`runtime::Builder::stack_size`] |
//! | `PURLOIN_DEADLOCK` | the deadlock watch; default on, grace 1 s | `1`, `0`, or the grace in milliseconds | [`runtime::Builder::deadlock_detection`] |
//! | `PURLOIN_TRACE` | record a trace file from the start | a file path | [`runtime::Builder::trace`], [`trace::start`] |
//! | `PURLOIN_DUMP_SIGNAL` | dump every green thread's stack to stderr on a signal | a signal name (`SIGQUIT`, `QUIT`) or number | [`debugging::dump_on_signal`] |
//! | `PURLOIN_SCHEDTRACE` | a line of scheduler state every N ms (Go's `schedtrace`) | milliseconds; `0` or empty: off | [`runtime::Builder::schedtrace`] |
//! | `PURLOIN_PARK_HISTOGRAM` | the park-duration histogram | `1` or `0` | [`runtime::Builder::park_histogram`] |
//! | `PURLOIN_SPARE_WORKERS` | the most spare workers added for workers stalled in unmarked blocking calls or long computations; default 32 | a number; `0`: none | [`runtime::Builder::max_spare_workers`] |
//!
//! # Cargo features
//!
//! - `tokio`: the `purloin::tokio` bridge (depends on tokio with `rt-multi-thread`, `net`,
//!   `time`).
//! - `deadlock-detection`: record lock holders for deadlock reports in release builds too
//!   (turns on [`sync`]'s feature of the same name).
//! - `tracing`: a span entered on a green thread stays entered on whichever worker runs it
//!   (a `tracing` subscriber's span stack is per OS thread: the runtime moves it at every
//!   switch), and the scheduler reports spawn, park, unpark and steal as `TRACE` events under
//!   the `purloin::sched` target. Set the subscriber before the first runtime is built. See
//!   [`debugging`](crate::debugging#6-tracing).
//!
//! No feature is needed for [`trace`]: a Chrome trace-event / Perfetto file of what the
//! scheduler did (`PURLOIN_TRACE=out.json`), written without any dependency.
//!
//! # Layers
//!
//! purloin re-exports the crates it is built from, for users who need a layer directly:
//! [`deque`], [`parking`], [`stack`], [`context`], [`sched`], and [`sync`] (purloin-sync, the
//! green-aware locks and channels, with [`select!`]).
#![warn(missing_docs)]

pub mod cancel;
mod current;
mod deadlock;
#[cfg(not(loom))]
pub mod debugging;
pub mod fs;
pub mod future;
#[cfg(not(loom))]
mod hook;
#[cfg(not(loom))]
mod hook_dispatch;
pub mod io;
pub mod labels;
mod local;
mod loom;
pub mod machine;
#[cfg(not(loom))]
pub mod metrics;
pub mod net;
pub mod process;
mod rt;
mod schedtrace;
mod scope;
#[cfg(not(loom))]
pub mod signal;
// Under loom only the handler-to-dispatcher protocol is built (its model); the rest needs
// `static` atomics, which loom's are not.
#[cfg(all(test, loom))]
#[path = "signal/pending.rs"]
mod signal_pending;
#[cfg(all(feature = "tracing", not(loom)))]
mod span_hook;
// Under loom only the trace recorder's stop handshake is built (its model).
mod spawn;
mod stats;
pub mod time;
#[cfg(feature = "tokio")]
pub mod tokio;
#[cfg(not(loom))]
pub mod trace;
#[cfg(all(test, loom))]
#[path = "trace/handshake.rs"]
mod trace_handshake;

pub use purloin_context as context;
pub use purloin_deque as deque;
pub use purloin_parking as parking;
pub use purloin_sched as sched;
pub use purloin_stack as stack;
pub use purloin_sync as sync;

pub use deadlock::DeadlockReport;
pub use local::{AccessError, LocalKey};
pub use purloin_sched::{
    Cancelled, ForcedUnwind, GreenId, GreenThread, JoinFuture, JoinHandle, StackSize, Stats,
    TrySpawnError, blocking, current, in_green_thread, interrupted, park, park_deadline,
    park_timeout, preemption_point, take_interrupt, yield_now,
};
pub use purloin_sync::select;
pub use rt::detect_deadlock;
pub use scope::{Scope, ScopedJoinFuture, ScopedJoinHandle};
pub use spawn::{Builder, flush, join, scope, spawn, spawn_urgent, try_spawn};
pub use stats::stats;
pub use time::{sleep, sleep_until};

/// Explicitly configured runtimes (most programs just call [`spawn`], which uses the global
/// runtime).
pub mod runtime {
    pub use crate::rt::{Builder, Runtime};
    pub use purloin_sched::ShutdownReport;
    /// Observers of every switch and scheduler event ([`hook::install`] adds one; they
    /// compose with the facade's trace and `tracing` support).
    pub use purloin_sched::hook;
}

pub use rt::Runtime;
