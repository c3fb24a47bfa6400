//! The host: the `MachineId → machine` table, spawning, message routing, yield dispatch, exit
//! status and shutdown.
//!
//! # Memory ordering
//!
//! Most shared state here is under locks (the table's shards, a machine's exit slot, the
//! handler registry). Three orderings are atomic:
//!
//! - (D1) Shutdown waits for `live` to reach zero. The finisher whose decrement makes `live`
//!   zero (`release_live`) then does `fence(SeqCst)` and loads `closing`; shutdown stores
//!   `closing`, then `fence(SeqCst)`, then reads `live` under the `shut` lock. Either that
//!   finisher sees `closing` and notifies under the lock, or shutdown sees the decrement: the
//!   notification is never lost. Decrements that leave `live` above zero do not notify.
//! - (D2) `closing` is checked by spawners under the shard lock they insert with, and stored
//!   by shutdown before it walks the shards (taking each lock): a spawner either inserts
//!   before shutdown's snapshot of that shard or sees `closing` and gives up.
//! - (D3) A finishing machine stores `COMPLETE` and then decrements `live` with Release;
//!   shutdown reads `live` with Acquire, so once it has seen the count reach zero, every
//!   `is_complete()` it checks is true.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use std::sync::Arc as StdArc;
use std::time::{Duration, Instant};

use purloin_sched::{SpawnOptions, WaitInfo, WaitKind};

use super::cell::{MachineCell, Wake};
use super::error::{CompleteErrorKind, SendErrorKind};
use super::handler::{self, HandlerFn, Mode};
use super::table::{InsertError, Table};
use super::{
    CompleteError, Error, ErrorKind, Event, Machine, MachineId, MachineState, Payload, SendError,
    Yield,
};
use crate::Runtime;
use crate::loom::{
    Arc, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, StatCounter, fence, lock,
};

/// Host ids, so that an id from another host is never routed here by mistake.
static NEXT_HOST: StatCounter = StatCounter::new(1);

fn new_host_id() -> u64 {
    NEXT_HOST.fetch_add(1, Ordering::Relaxed) & ((1 << MachineId::HOST_BITS) - 1)
}

type Handlers = HashMap<Cow<'static, str>, handler::Entry>;

/// What the handles share.
pub(crate) struct HostShared {
    table: Table,
    /// Copy-on-write: dispatch clones the `Arc` under the lock and reads without it.
    handlers: Mutex<StdArc<Handlers>>,
    /// Machines spawned and not yet finished (D1).
    live: AtomicUsize,
    /// Shutdown started: spawns fail (D2), finishers notify (D1).
    closing: AtomicBool,
    shut: Mutex<()>,
    shut_cv: Condvar,
    /// The address of the runtime's user data: tells whether code runs on this host's
    /// runtime (see `Host::new`).
    runtime_id: usize,
}

/// A cloneable handle to a [`Host`]: routes messages, answers yields, waits for results, and
/// spawns machines from the host's own green threads and machine steps. Get one with
/// [`Host::handle`]; a [`Host`] also dereferences to its handle.
#[derive(Clone)]
pub struct HostHandle(Arc<HostShared>);

impl std::fmt::Debug for HostHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostHandle")
            .field("host", &self.0.table.host())
            .field("live", &self.0.live.load(Ordering::Relaxed))
            .finish()
    }
}

/// Runs [`Machine`]s on a purloin runtime, on the runtime's own workers, queues and stealing
/// (each machine is a stackless task of the scheduler).
///
/// The host owns its runtime, so it can always spawn and so that shutdown happens in the
/// right order: machines first (cancel, wait, close), then the runtime. Use
/// [`runtime`](Host::runtime) to run green threads on the same workers.
///
/// ```
/// use purloin::machine::{Error, Events, Host, Payload, Machine, StepOutput};
/// use purloin::runtime::Runtime;
///
/// /// Asks the `double` handler for 2 × its input and completes with the answer.
/// struct Doubler(u64);
///
/// impl Machine for Doubler {
///     fn init(&mut self, method: &str, input: Payload) -> Result<(), Error> {
///         if method != "run" {
///             return Err(Error::unknown_method(method, &["run"]));
///         }
///         self.0 = input.take::<u64>()?;
///         Ok(())
///     }
///
///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
///         match events.next() {
///             None => out.yield_command("double", 1, Payload::new(self.0)),
///             Some(answer) => out.complete(answer.into_result()?),
///         }
///         Ok(())
///     }
/// }
///
/// let host = Host::new(Runtime::builder().workers(2).build().unwrap());
/// host.register("double", |y| {
///     let n = *y.data().downcast_ref::<u64>().unwrap();
///     let _ = y.complete(Ok(Payload::new(2 * n)));
/// });
/// let id = host.spawn_machine(Doubler(0), "run", Payload::new(21u64)).unwrap();
/// let result = host.wait(id).unwrap();
/// assert_eq!(result.downcast::<u64>().unwrap(), 42);
/// let report = host.shutdown(std::time::Duration::from_secs(1));
/// assert_eq!(report.cancelled + report.timed_out, 0);
/// ```
pub struct Host {
    handle: HostHandle,
    rt: Option<Runtime>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("handle", &self.handle).field("runtime", &self.rt).finish()
    }
}

/// What [`Host::shutdown`] did to the host's machines, with the runtime's own
/// [`ShutdownReport`](crate::runtime::ShutdownReport) inside.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostShutdownReport {
    /// Machines that were running at shutdown and completed after their
    /// [`Cancel`](super::EventKind::Cancel) event, within the timeout.
    pub cancelled: usize,
    /// Machines that did not complete within the timeout and were closed by the host
    /// ([`Machine::close`] without another step; their waiters see
    /// [`ErrorKind::Closed`]).
    pub timed_out: usize,
    /// Machines that could not even be closed: a step that never returned keeps its worker
    /// (the runtime's report then counts that worker's work as unfinished too).
    pub unfinished: usize,
    /// The runtime's own shutdown report (green threads, including handlers).
    pub runtime: crate::runtime::ShutdownReport,
}

impl Host {
    /// A host running its machines on `runtime` (which it owns from now on).
    ///
    /// # Panics
    /// If called from one of `runtime`'s own green threads with a single worker (it waits
    /// for a first, tiny task to run on the runtime).
    pub fn new(runtime: Runtime) -> Host {
        let runtime_id = runtime_identity(&runtime);
        let shared = HostShared {
            table: Table::new(new_host_id()),
            handlers: Mutex::new(StdArc::new(Handlers::new())),
            live: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            shut: Mutex::new(()),
            shut_cv: Condvar::new(),
            runtime_id,
        };
        Host { handle: HostHandle(Arc::new(shared)), rt: Some(runtime) }
    }

    /// The runtime the machines run on (to run green threads next to them).
    ///
    /// # Panics
    /// Never while the host exists (the runtime is only taken by shutdown, which consumes
    /// the host).
    pub fn runtime(&self) -> &Runtime {
        self.rt.as_ref().expect("the host owns its runtime until shutdown")
    }

    /// A cloneable handle (for handlers, machines, other threads).
    pub fn handle(&self) -> HostHandle {
        self.handle.clone()
    }

    /// Starts `machine` at its entry point `method` with `input`, from any thread.
    ///
    /// [`Machine::init`] runs here, on the caller's thread; if it fails, the machine is
    /// closed and never runs. Otherwise the machine is queued on the runtime (the caller's
    /// local queue when called from one of its workers, the global queue otherwise) and its
    /// first step runs with no events.
    ///
    /// # Errors
    /// - `ErrorKind::InvalidInput` with the [`Error`] of `init` inside (an unknown method,
    ///   bad input): `err.get_ref()` downcasts to [`Error`];
    /// - the host or its runtime is shutting down.
    pub fn spawn_machine<M: Machine>(
        &self,
        machine: M,
        method: &str,
        input: Payload,
    ) -> io::Result<MachineId> {
        self.handle.0.spawn(Some(self.runtime()), &self.handle, Box::new(machine), method, input)
    }

    /// The former name of [`spawn_machine`](Host::spawn_machine).
    ///
    /// # Errors
    /// As [`spawn_machine`](Host::spawn_machine).
    #[deprecated(note = "renamed to `spawn_machine`")]
    pub fn spawn_process<M: Machine>(
        &self,
        machine: M,
        method: &str,
        input: Payload,
    ) -> io::Result<MachineId> {
        self.spawn_machine(machine, method, input)
    }

    /// Shuts down: sends a [`Cancel`](super::EventKind::Cancel) event to every machine that
    /// has not completed, waits up to `timeout` for them to complete, then closes the rest
    /// (each gets [`Machine::close`] and no further step) and waits up to `timeout` again for
    /// that; then shuts the runtime down with the same timeout. Results not yet taken with
    /// [`wait`](HostHandle::wait) are dropped; handles see every id as unknown afterwards.
    ///
    /// # Panics
    /// If called from a green thread or machine step of this host's runtime (it would wait
    /// for itself).
    pub fn shutdown(mut self, timeout: Duration) -> HostShutdownReport {
        self.shutdown_inner(timeout)
    }

    fn shutdown_inner(&mut self, timeout: Duration) -> HostShutdownReport {
        let Some(rt) = self.rt.take() else { return HostShutdownReport::default() };
        if self.handle.0.on_runtime() {
            // Put it back so that Drop does not try again while we unwind.
            self.rt = Some(rt);
            panic!(
                "purloin::machine: Host::shutdown called from the host's own runtime (a green \
                 thread, handler or machine step); it would wait for itself. Shut the host \
                 down from the thread that owns it"
            );
        }
        let (cancelled, timed_out, unfinished) = self.handle.0.shutdown_machines(timeout);
        let runtime = rt.shutdown_timeout(timeout);
        HostShutdownReport { cancelled, timed_out, unfinished, runtime }
    }
}

impl core::ops::Deref for Host {
    type Target = HostHandle;

    fn deref(&self) -> &HostHandle {
        &self.handle
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if self.rt.is_some() && self.handle.0.on_runtime() {
            // Dropped on its own runtime (or unwinding from `shutdown`'s panic): shutting the
            // runtime down here would wait for itself. Leak it rather than abort.
            eprintln!(
                "purloin::machine: a Host was dropped on its own runtime; its runtime is leaked \
                 (drop or shut down the host from the thread that owns it)"
            );
            core::mem::forget(self.rt.take());
        }
        if self.rt.is_some() {
            let report = self.shutdown_inner(Duration::from_secs(5));
            if report.unfinished > 0 {
                eprintln!(
                    "purloin::machine: {} machines were still inside a step when the host \
                     was dropped; their workers were detached",
                    report.unfinished
                );
            }
        }
    }
}

/// The identity of `runtime` as seen from its workers: the address of its user data (which
/// `purloin::Runtime`'s builder always sets). Learnt by stepping a one-shot stackless task on
/// it (no green thread, no stack), because only code on a worker can see it.
fn runtime_identity(runtime: &Runtime) -> usize {
    struct Probe(Arc<(Mutex<Option<usize>>, Condvar)>);
    impl purloin_sched::Task for Probe {
        fn step(&self) -> purloin_sched::TaskStep {
            let addr = purloin_sched::with_user_data(|d| d.map_or(0, data_addr));
            *lock(&self.0.0) = Some(addr);
            self.0.1.notify_all();
            purloin_sched::TaskStep::Done
        }
    }
    // A runtime built without user data gets some, so that it has an identity (ignored if
    // it already has its own).
    let _ = runtime.scheduler().set_user_data(StdArc::new(()));
    let slot = Arc::new((Mutex::new(None), Condvar::new()));
    runtime
        .scheduler()
        .spawn_task(StdArc::new(Probe(slot.clone())))
        .expect("a runtime that was just handed over is running");
    let mut addr = lock(&slot.0);
    loop {
        if let Some(a) = *addr {
            return a;
        }
        addr = slot.1.wait(addr).unwrap_or_else(|p| p.into_inner());
    }
}

fn data_addr(d: &(dyn core::any::Any + Send + Sync)) -> usize {
    d as *const (dyn core::any::Any + Send + Sync) as *const () as usize
}

/// Whether this code runs on a worker's own stack (a machine step or an inline handler): a
/// blocking wait there would block the worker thread.
fn on_worker_stack() -> bool {
    !purloin_sched::in_green_thread() && purloin_sched::with_user_data(|d| d.is_some())
}

impl HostHandle {
    pub(crate) fn shared(&self) -> &HostShared {
        &self.0
    }

    /// Starts `machine` (see [`Host::spawn_machine`]) from a green thread, handler or machine
    /// step of the host's runtime (from elsewhere use [`Host::spawn_machine`]).
    ///
    /// # Errors
    /// As [`Host::spawn_machine`], and: called from outside the host's runtime.
    pub fn spawn_machine<M: Machine>(
        &self,
        machine: M,
        method: &str,
        input: Payload,
    ) -> io::Result<MachineId> {
        self.0.spawn(None, self, Box::new(machine), method, input)
    }

    /// The former name of [`spawn_machine`](HostHandle::spawn_machine).
    ///
    /// # Errors
    /// As [`spawn_machine`](HostHandle::spawn_machine).
    #[deprecated(note = "renamed to `spawn_machine`")]
    pub fn spawn_process<M: Machine>(
        &self,
        machine: M,
        method: &str,
        input: Payload,
    ) -> io::Result<MachineId> {
        self.spawn_machine(machine, method, input)
    }

    /// Sends `message` to machine `id`: it arrives as a [`Message`](super::EventKind::Message)
    /// event and wakes the machine if it is Idle (a Blocked machine sees it when its yields
    /// are answered). Never blocks.
    ///
    /// `Ok` means the message was queued; a machine that completes before its next step
    /// never sees it (it is dropped with the machine's queue).
    ///
    /// # Errors
    /// The id is unknown to this host, or the machine has completed; the message is in the
    /// error.
    pub fn send(&self, id: MachineId, mut message: Payload) -> Result<(), SendError> {
        // The hop of every message ring: kept apart from `deliver`. The message stays where
        // the caller put it until the machine is won (see `MachineCell::send`).
        // SAFETY: on `Ok` the message was moved out; it is forgotten below, never used again.
        let sent = self.0.table.with(id, |cell| unsafe { cell.send(&mut message) });
        match sent {
            Some(Ok(())) => {
                core::mem::forget(message);
                Ok(())
            }
            Some(Err(_completed)) => Err(SendError::new(SendErrorKind::Finished, id, message)),
            None => Err(SendError::new(SendErrorKind::UnknownMachine, id, message)),
        }
    }

    /// Asks machine `id` to stop: sends it a [`Cancel`](super::EventKind::Cancel) event
    /// (which wakes it even when Blocked). The machine decides how to complete.
    ///
    /// # Errors
    /// As [`send`](HostHandle::send).
    pub fn cancel(&self, id: MachineId) -> Result<(), SendError> {
        let why = Error::cancelled(format!("{id} was cancelled with HostHandle::cancel"));
        self.deliver(id, Event::cancel(why), Wake::IfWaiting)
    }

    fn deliver(&self, id: MachineId, event: Event, wake: Wake) -> Result<(), SendError> {
        let mut event = Some(event);
        let pushed =
            self.0.table.with(id, |cell| cell.push(event.take().expect("pushed once"), wake));
        let to_wake = match pushed {
            None => {
                let data = event.take().expect("not pushed").data;
                return Err(SendError::new(SendErrorKind::UnknownMachine, id, data));
            }
            Some(Err(back)) => return Err(SendError::new(SendErrorKind::Finished, id, back.data)),
            Some(Ok(w)) => w,
        };
        if let Some(w) = to_wake {
            w.wake();
        }
        Ok(())
    }

    /// Answers yield `tag` of machine `id` with `result`: the machine receives a
    /// [`YieldComplete`](super::EventKind::YieldComplete) event. A Blocked machine is woken
    /// by the answer to its last yield in flight; an Idle one by any answer. Never blocks.
    ///
    /// # Errors
    /// The id is unknown, the machine has completed, or no yield with this tag is in
    /// flight (each yield is answered exactly once).
    pub fn complete_yield(
        &self,
        id: MachineId,
        tag: u64,
        result: Result<Payload, Error>,
    ) -> Result<(), CompleteError> {
        let completed = self.0.table.with(id, |cell| cell.complete(tag, result));
        let to_wake = completed
            .ok_or(CompleteErrorKind::UnknownMachine)
            .and_then(|r| r)
            .map_err(|k| CompleteError::new(k, id, tag))?;
        if let Some(w) = to_wake {
            w.wake();
        }
        Ok(())
    }

    /// Waits until machine `id` completes and takes its result (the value it completed
    /// with, or its error: a failure, a panic, a close at shutdown). Parks a green thread;
    /// blocks a plain thread.
    ///
    /// The result is taken by exactly one waiter, and the id is then forgotten.
    ///
    /// # Errors
    /// The machine's error; or [`ErrorKind::UnknownMachine`] (never spawned here, result
    /// already taken, host shut down); or [`ErrorKind::WouldBlock`] when called inside a
    /// machine step or an inline handler (that would block a worker thread: yield a command
    /// whose handler waits instead).
    pub fn wait(&self, id: MachineId) -> Result<Payload, Error> {
        self.wait_inner(id, None)
    }

    /// [`wait`](HostHandle::wait) for at most `timeout`.
    ///
    /// # Errors
    /// As [`wait`](HostHandle::wait), and [`ErrorKind::TimedOut`] (the machine keeps
    /// running; wait again later).
    pub fn wait_timeout(&self, id: MachineId, timeout: Duration) -> Result<Payload, Error> {
        self.wait_inner(id, Instant::now().checked_add(timeout))
    }

    fn wait_inner(&self, id: MachineId, deadline: Option<Instant>) -> Result<Payload, Error> {
        if on_worker_stack() {
            return Err(Error::with_kind(
                ErrorKind::WouldBlock,
                format!(
                    "wait({id}) inside a machine step or inline handler would block a worker \
                     thread; yield a command whose (green-thread) handler waits instead"
                ),
            ));
        }
        let cell = self.0.lookup(id).ok_or_else(|| unknown_machine(id))?;
        let me = purloin_sched::current();
        let mut registered = false;
        let mut exit = lock(&cell.exit);
        loop {
            if exit.done {
                let Some(result) = exit.result.take() else {
                    return Err(unknown_machine(id));
                };
                exit.taken = true;
                drop(exit);
                self.0.forget(&cell);
                return result;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                if let Some(g) = me {
                    exit.green_waiters.retain(|w| *w != g);
                }
                return Err(Error::with_kind(
                    ErrorKind::TimedOut,
                    format!("{id} did not complete within the timeout; it is still running"),
                ));
            }
            match me {
                Some(g) => {
                    if !registered {
                        exit.green_waiters.push(g);
                        registered = true;
                    }
                    drop(exit);
                    let object = StdArc::as_ptr(&cell) as *const () as usize;
                    purloin_sched::set_wait_info(Some(WaitInfo {
                        kind: WaitKind::Join,
                        object,
                        holder: None,
                    }));
                    match deadline {
                        Some(d) => purloin_sched::park_deadline(d),
                        None => purloin_sched::park(),
                    }
                    purloin_sched::set_wait_info(None);
                    exit = lock(&cell.exit);
                }
                None => {
                    exit.os_waiters += 1;
                    exit = match deadline {
                        Some(d) => match cell.exit_cv.wait_timeout(exit, d - now) {
                            Ok((g, _)) => g,
                            Err(p) => p.into_inner().0,
                        },
                        None => cell.exit_cv.wait(exit).unwrap_or_else(|p| p.into_inner()),
                    };
                    exit.os_waiters -= 1;
                }
            }
        }
    }

    /// Says nobody will wait for `id`: its result is dropped when it completes (at once if
    /// it already has) and the id is forgotten. Without `wait` or `detach`, a completed
    /// machine's result is kept until the host shuts down.
    ///
    /// # Errors
    /// [`ErrorKind::UnknownMachine`].
    pub fn detach(&self, id: MachineId) -> Result<(), Error> {
        let cell = self.0.lookup(id).ok_or_else(|| unknown_machine(id))?;
        let mut exit = lock(&cell.exit);
        if exit.taken {
            return Err(unknown_machine(id));
        }
        exit.detached = true;
        if exit.done {
            let result = exit.result.take();
            exit.taken = true;
            drop(exit);
            drop(result);
            self.0.forget(&cell);
        }
        Ok(())
    }

    /// The state of machine `id` (a snapshot), or `None` if the id is unknown.
    pub fn status(&self, id: MachineId) -> Option<MachineState> {
        self.0.lookup(id).map(|c| c.state())
    }

    /// Number of machines spawned and not yet completed.
    pub fn live_machines(&self) -> usize {
        self.0.live.load(Ordering::Relaxed)
    }

    /// The former name of [`live_machines`](HostHandle::live_machines).
    #[deprecated(note = "renamed to `live_machines`")]
    pub fn live_processes(&self) -> usize {
        self.live_machines()
    }

    /// Registers `handler` for yields of `command` (replacing an earlier one). Each yield
    /// runs on a new green thread of the host's runtime, so the handler may block (sleep,
    /// lock, do I/O, wait for another machine). It answers with [`Yield::complete`].
    ///
    /// A yield whose command has no handler is answered at once with an
    /// [`ErrorKind::NoHandler`] error.
    pub fn register<F>(&self, command: impl Into<Cow<'static, str>>, handler: F)
    where
        F: Fn(Yield) + Send + Sync + 'static,
    {
        self.0.register(command.into(), Mode::Green, StdArc::new(handler));
    }

    /// Registers a handler that runs on the worker right after the step that yielded, without
    /// a green thread: for cheap, non-blocking commands (it must not block: a blocking call
    /// there stalls the worker, and [`wait`](HostHandle::wait) returns
    /// [`ErrorKind::WouldBlock`]). A panic in it answers the yield with
    /// [`ErrorKind::HandlerLost`].
    pub fn register_inline<F>(&self, command: impl Into<Cow<'static, str>>, handler: F)
    where
        F: Fn(Yield) + Send + Sync + 'static,
    {
        self.0.register(command.into(), Mode::Inline, StdArc::new(handler));
    }
}

fn unknown_machine(id: MachineId) -> Error {
    Error::with_kind(
        ErrorKind::UnknownMachine,
        format!(
            "{id} is unknown to this host: it was never spawned here, its result was already \
             taken by another wait, or the host shut down"
        ),
    )
}

impl HostShared {
    /// Whether the calling code runs on a worker (green thread or step) of this host's
    /// runtime.
    fn on_runtime(&self) -> bool {
        purloin_sched::with_user_data(|d| d.is_some_and(|d| data_addr(d) == self.runtime_id))
    }

    fn lookup(&self, id: MachineId) -> Option<StdArc<MachineCell>> {
        self.table.get(id)
    }

    /// Removes `cell` from the table (if it is still the entry for its id).
    fn forget(&self, cell: &StdArc<MachineCell>) {
        self.table.remove(cell.id);
    }

    fn spawn(
        &self,
        runtime: Option<&Runtime>,
        handle: &HostHandle,
        mut machine: Box<dyn Machine>,
        method: &str,
        input: Payload,
    ) -> io::Result<MachineId> {
        if runtime.is_none() && !self.on_runtime() {
            return Err(io::Error::other(
                "HostHandle::spawn_machine was called outside the host's runtime, where it \
                 has no scheduler to use; call Host::spawn_machine on the Host, or call it from \
                 a machine step, a handler or a green thread of the host's runtime",
            ));
        }
        if self.closing.load(Ordering::Relaxed) {
            return Err(shutting_down());
        }
        if let Err(e) = machine.init(method, input) {
            machine.close();
            return Err(io::Error::new(io::ErrorKind::InvalidInput, e));
        }
        self.live.fetch_add(1, Ordering::Relaxed);
        let mut machine = Some(machine);
        // D2: `closing` is checked under the shard lock that shutdown also takes.
        let inserted = self.table.insert(
            || !self.closing.load(Ordering::Relaxed),
            |id| {
                let p = machine.take().expect("made once");
                StdArc::new(MachineCell::new(id, handle.clone(), p))
            },
        );
        let cell = match inserted {
            Ok(cell) => cell,
            Err(why) => {
                self.release_live();
                if let Some(mut p) = machine {
                    p.close();
                }
                return Err(match why {
                    InsertError::Refused => shutting_down(),
                    InsertError::Full => io::Error::other(
                        "cannot spawn a machine: the host has 16,777,216 live or unwaited \
                         machines; wait for or detach finished ones",
                    ),
                });
            }
        };
        let task: StdArc<dyn purloin_sched::Task> = cell.clone();
        let spawned = match runtime {
            Some(rt) => rt.scheduler().spawn_task(task),
            None => purloin_sched::spawn_task(task),
        };
        match spawned {
            Ok(thread) => {
                cell.publish_handle(super::cell::TaskRef::Green(thread));
                Ok(cell.id)
            }
            Err(e) => {
                self.forget(&cell);
                self.release_live();
                cell.abandon();
                Err(e)
            }
        }
    }

    fn register(&self, command: Cow<'static, str>, mode: Mode, f: StdArc<HandlerFn>) {
        let thread_name: StdArc<str> = StdArc::from(format!("handler:{command}"));
        let mut handlers = lock(&self.handlers);
        let mut next = Handlers::clone(&handlers);
        next.insert(command, handler::Entry { mode, f, thread_name });
        *handlers = StdArc::new(next);
    }

    /// Hands a step's yields to their handlers (called by the step, on its worker).
    pub(crate) fn dispatch(
        &self,
        cell: &MachineCell,
        commands: impl Iterator<Item = super::Command>,
    ) {
        let handlers = lock(&self.handlers).clone();
        for c in commands {
            let Some(entry) = handlers.get(c.name.as_ref()) else {
                let why = Error::with_kind(
                    ErrorKind::NoHandler,
                    format!(
                        "{} yielded command `{}` (tag {}) but no handler is registered for it; \
                         call HostHandle::register(\"{}\", ..) before spawning the machine",
                        cell.id, c.name, c.tag, c.name
                    ),
                );
                if let Ok(Some(w)) = cell.complete(c.tag, Err(why)) {
                    w.wake();
                }
                continue;
            };
            let y = Yield::new(cell.id, c.tag, c.name, c.data, cell.host.clone());
            match entry.mode {
                Mode::Inline => {
                    let f = &entry.f;
                    // A panic drops `y` while unwinding, which answers it (HandlerLost).
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(y)));
                }
                Mode::Green => {
                    let f = entry.f.clone();
                    let opts = SpawnOptions {
                        name: Some(entry.thread_name.clone()),
                        ..SpawnOptions::default()
                    };
                    // If the spawn fails the closure, and `y` with it, is dropped: the yield
                    // is answered with HandlerLost.
                    if let Ok(h) =
                        purloin_sched::spawn_with(opts, crate::local::with_locals(move || f(y)))
                    {
                        drop(h);
                    }
                }
            }
        }
    }

    /// A machine finished (called at the end of its last step): publishes the exit status.
    pub(crate) fn machine_finished(&self, cell: &MachineCell, result: Result<Payload, Error>) {
        // Before the exit is published, so a waiter that got the result sees the machine
        // gone from `live_machines` too (the exit lock orders the two).
        self.release_live();
        let (greens, detached, unneeded) = {
            let mut exit = lock(&cell.exit);
            exit.done = true;
            let unneeded = if exit.detached {
                exit.taken = true;
                Some(result)
            } else {
                exit.result = Some(result);
                None
            };
            if exit.os_waiters > 0 {
                cell.exit_cv.notify_all();
            }
            (core::mem::take(&mut exit.green_waiters), exit.detached, unneeded)
        };
        drop(unneeded);
        for g in greens {
            g.unpark();
        }
        if detached {
            self.table.remove(cell.id);
        }
    }

    /// Takes one off `live` (a machine finished, or a spawn that counted itself failed) and,
    /// if that made it zero while shutdown waits for zero, wakes shutdown (D1).
    ///
    /// Only the decrement that reaches zero notifies: shutdown waits for zero and nothing
    /// else, so the others have nothing to say, and each notification takes the `shut` lock,
    /// which shutdown's waiting thread takes again on every wake-up. A million machines
    /// ending at once would otherwise convoy the workers on that lock (their steps blocked in
    /// the kernel, reported by the monitor as blocking their workers).
    fn release_live(&self) {
        // Release (D3): the `COMPLETE` store and everything the step did happen before
        // shutdown's Acquire load that reads the decrement.
        let last = self.live.fetch_sub(1, Ordering::Release) == 1;
        if !last {
            return;
        }
        // D1: the decrement (above) before the load of `closing`.
        fence(Ordering::SeqCst);
        if self.closing.load(Ordering::Relaxed) {
            let _g = lock(&self.shut);
            self.shut_cv.notify_all();
        }
    }

    /// Every machine not yet complete.
    fn snapshot_live(&self) -> Vec<StdArc<MachineCell>> {
        self.table.collect(|c| !c.is_complete())
    }

    /// Waits until no machine is live or `timeout` passes.
    fn wait_live_zero(&self, timeout: Duration) {
        let deadline = Instant::now().checked_add(timeout);
        let mut g = lock(&self.shut);
        // Acquire pairs with the finishers' Release decrement (D3); the fences (D1) make
        // sure a finisher either sees `closing` or its decrement is seen here.
        while self.live.load(Ordering::Acquire) > 0 {
            g = match deadline {
                None => self.shut_cv.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return;
                    }
                    match self.shut_cv.wait_timeout(g, d - now) {
                        Ok((g, _)) => g,
                        Err(p) => p.into_inner().0,
                    }
                }
            };
        }
    }

    /// Cancels, waits, closes, waits. Returns (cancelled, timed out, unfinished).
    pub(crate) fn shutdown_machines(&self, timeout: Duration) -> (usize, usize, usize) {
        self.closing.store(true, Ordering::Relaxed);
        // D1/D2: `closing` before the reads of `live` and the shard walk.
        fence(Ordering::SeqCst);
        let running = self.snapshot_live();
        // One message for every machine (each knows its own id): a million machines cost
        // no million strings made here and freed on the workers.
        let why = Error::cancelled(
            "the machine is cancelled because its host is shutting down; complete soon",
        );
        for cell in &running {
            if let Ok(Some(w)) = cell.push(Event::cancel(why.clone()), Wake::IfWaiting) {
                w.wake();
            }
        }
        self.wait_live_zero(timeout);
        let late: Vec<_> = running.iter().filter(|c| !c.is_complete()).collect();
        let cancelled = running.len() - late.len();
        if !late.is_empty() {
            for cell in &late {
                if let Some(w) = cell.request_close() {
                    w.wake();
                }
            }
            self.wait_live_zero(timeout.max(Duration::from_millis(100)));
        }
        let unfinished = late.iter().filter(|c| !c.is_complete()).count();
        let timed_out = late.len() - unfinished;
        // Break the cycles (table → cell → host, registry → handler → host).
        self.table.clear();
        let handlers = core::mem::replace(&mut *lock(&self.handlers), StdArc::new(Handlers::new()));
        drop(handlers);
        (cancelled, timed_out, unfinished)
    }
}

/// Hooks for the crate's own loom models (`models.rs`), which drive a real machine cell and
/// this table without a runtime.
#[cfg(all(test, loom))]
impl HostHandle {
    pub(crate) fn for_model() -> HostHandle {
        HostHandle(Arc::new(HostShared {
            table: Table::new(new_host_id()),
            handlers: Mutex::new(StdArc::new(Handlers::new())),
            live: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            shut: Mutex::new(()),
            shut_cv: Condvar::new(),
            runtime_id: usize::MAX,
        }))
    }

    /// Makes a cell for `machine` and enters it in the table (what `spawn` does before it
    /// hands the task to the scheduler).
    pub(crate) fn adopt_for_model(&self, machine: Box<dyn Machine>) -> StdArc<MachineCell> {
        self.0.live.fetch_add(1, Ordering::Relaxed);
        let made = self
            .0
            .table
            .insert(|| true, |id| StdArc::new(MachineCell::new(id, self.clone(), machine)));
        made.ok().expect("a model table has room")
    }
}

fn shutting_down() -> io::Error {
    io::Error::other(
        "cannot spawn a machine: its host is shutting down (spawn before Host::shutdown, or \
         check the error in the machines that spawn children)",
    )
}
