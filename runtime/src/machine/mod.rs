//! State machines stepped by the work-stealing scheduler: like Erlang processes,
//! but without a stack. They are not OS processes: child processes are in
//! [`purloin::process`](crate::process).
//!
//! A **machine** is a value implementing [`Machine`]: [`init`](Machine::init) picks one of
//! its entry points, [`step`](Machine::step) advances it with [`Events`] (answers to its
//! yields, messages, cancellation) and writes a [`Status`] and **yields** — commands with
//! correlation tags — into a [`StepOutput`], and [`close`](Machine::close) releases it. A
//! machine has no stack: between steps it is a small record, so a million of them cost what a
//! million small structs cost.
//!
//! A [`Host`] runs machines on a purloin runtime. Each machine is a *stackless task* of the
//! scheduler (`purloin::sched::Task`), so machines and green threads share the same
//! processors, local run queues (LIFO), global queue (FIFO, taken in batches of up to 16),
//! steal-half from a random victim, and idle/wake protocol — the find-work order is the
//! scheduler's, not a second one. The host adds:
//!
//! - a `MachineId → machine` table (lock-free lookups, sharded locks for writers) that routes
//!   [`send`](HostHandle::send) and [`complete_yield`](HostHandle::complete_yield);
//! - a lock-free **MPSC event queue** per machine (senders and handlers produce; the worker
//!   stepping the machine drains it);
//! - **handlers** per command name ([`register`](HostHandle::register)): each yield runs on a
//!   green thread (so a handler may block), or inline on the worker for cheap commands
//!   ([`register_inline`](HostHandle::register_inline)), and answers with
//!   [`Yield::complete`] / [`complete_yield`](HostHandle::complete_yield);
//! - exit status ([`wait`](HostHandle::wait)) and [`shutdown`](Host::shutdown) with
//!   cancellation.
//!
//! ```
//! use purloin::machine::{Error, EventKind, Events, Host, Payload, Machine, StepOutput};
//! use purloin::runtime::Runtime;
//! use std::time::Duration;
//!
//! /// Fetches two pages at once (fan-out), completes with their total size (fan-in).
//! #[derive(Default)]
//! struct Crawl {
//!     pending: usize,
//!     total: usize,
//! }
//!
//! impl Machine for Crawl {
//!     fn init(&mut self, method: &str, _input: Payload) -> Result<(), Error> {
//!         match method {
//!             "crawl" => Ok(()),
//!             other => Err(Error::unknown_method(other, &["crawl"])),
//!         }
//!     }
//!
//!     fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
//!         if self.pending == 0 {
//!             out.yield_command("fetch", 1, Payload::new("/a"));
//!             out.yield_command("fetch", 2, Payload::new("/bb"));
//!             self.pending = 2;
//!             return Ok(()); // no status set + yields made = wait for all answers
//!         }
//!         for event in events {
//!             match event.kind {
//!                 EventKind::YieldComplete => {
//!                     self.total += event.into_result()?.take::<usize>()?;
//!                     self.pending -= 1;
//!                 }
//!                 EventKind::Cancel => return Err(Error::cancelled("shutting down")),
//!                 EventKind::Message => {}
//!             }
//!         }
//!         out.complete(Payload::new(self.total));
//!         Ok(())
//!     }
//! }
//!
//! let host = Host::new(Runtime::builder().workers(2).build().unwrap());
//! // A handler runs on a green thread: it may block (sleep, I/O, locks).
//! host.register("fetch", |y| {
//!     let path = *y.data().downcast_ref::<&str>().unwrap();
//!     purloin::sleep(Duration::from_millis(1));
//!     let _ = y.complete(Ok(Payload::new(path.len() * 100)));
//! });
//! let id = host.spawn_machine(Crawl::default(), "crawl", Payload::empty()).unwrap();
//! assert_eq!(host.wait(id).unwrap().downcast::<usize>().unwrap(), 500);
//!
//! // An unknown entry point is reported by spawn_machine itself.
//! let err = host.spawn_machine(Crawl::default(), "index", Payload::empty()).unwrap_err();
//! assert!(err.to_string().contains("unknown method `index`"));
//! host.shutdown(Duration::from_secs(1));
//! ```
//!
//! # States
//!
//! ```text
//!             spawn_machine                         Status::Complete / error / panic
//!   [*] ──────────────────▶ Ready ──claim (CAS)──▶ Running ──────────────────────────▶ Complete
//!                             ▲  ▲                  │   │
//!                             │  │  Status::Idle    │   │ Status::WaitYields (yields in flight)
//!     any event (message,     │  └──── Idle ◀───────┘   ▼
//!     answer, cancel) ────────┘                       Blocked ── last answer / cancel ──▶ Ready
//! ```
//!
//! Each machine's `state` word holds these states and decides who runs the machine; the
//! scheduler's task underneath is one way to get it run. The **wakeup flag** — an
//! event arriving while the worker still holds the machine — is a bit of that word: the
//! worker parks the machine with a CAS that fails while the flag is set, and steps it again
//! instead. The memory-ordering argument is in the source of `cell.rs`.
//!
//! **Inline hand-off.** A step that wakes an Idle machine of the same host (a send, or the
//! last answer to a Blocked one) wins the machine and runs it on the same worker right after
//! its own step, without the scheduler: the woken machine's task stays parked (`chain.rs`;
//! one machine at a time, for up to about a millisecond before the scheduler gets the worker
//! back). A message that wakes an Idle machine is handed over directly, without a queue node.
//! Other wake-ups go through the scheduler: from a handler's green thread or a step (beyond
//! the hand-off) into that worker's `runnext` slot (it runs next, Go's rule for a readied
//! goroutine), from a plain thread into the global queue. A `Continue` status re-queues the
//! machine behind other ready work (local queue).
//!
//! # Rules for a step
//!
//! A step runs on a worker's own stack: it must not block (no [`wait`](HostHandle::wait) —
//! that returns [`ErrorKind::WouldBlock`] —, no sleeping, no blocking I/O). Blocking work is a
//! yield to a handler. A panic in a step fails that machine (its waiters get
//! [`ErrorKind::Panicked`]) and nothing else; sending to an unknown or finished id is a
//! [`SendError`], never a panic.
//!
//! # Shutdown
//!
//! [`Host::shutdown`] sends a [`Cancel`](EventKind::Cancel) event to every machine not yet
//! complete, waits for them up to a timeout, then *closes* the rest — [`Machine::close`]
//! without another step — and reports how many completed after the cancellation and how many
//! were closed ([`HostShutdownReport`]). Then it shuts the runtime down.
//!
//! # Loom models
//!
//! `cargo xtask loom -p purloin` runs the models of this module: the event queue alone
//! (`queue.rs`), and the host end to end on a one-worker runtime
//! (`runtime/tests/loom_machine.rs`): an answer racing the worker that still holds the
//! machine (the wakeup flag), a message racing the step that goes Idle, and shutdown racing a
//! send.

mod cell;
mod chain;
mod error;
mod handler;
mod host;
#[cfg(all(test, loom))]
mod models;
mod payload;
mod queue;
mod step;
mod table;

pub use error::{CompleteError, CompleteErrorKind, Error, ErrorKind, SendError, SendErrorKind};
pub use handler::Yield;
pub use host::{Host, HostHandle, HostShutdownReport};
pub use payload::Payload;
pub use step::{
    Command, Event, EventKind, Events, Machine, MachineId, MachineState, Status, StepOutput,
};

#[allow(deprecated)]
pub use step::Process;

/// The former name of [`MachineId`].
#[deprecated(note = "renamed to `MachineId`; the type is the same")]
pub type Pid = MachineId;

/// The former name of [`MachineState`].
#[deprecated(note = "renamed to `MachineState`; the type is the same")]
pub type ProcessState = MachineState;

/// The former name of [`HostShutdownReport`].
#[deprecated(
    note = "renamed to `HostShutdownReport` (`purloin::runtime::ShutdownReport` is the runtime's)"
)]
pub type ShutdownReport = HostShutdownReport;
