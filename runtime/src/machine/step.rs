//! The [`Machine`] trait and what a step sees and produces: [`Events`] in, [`StepOutput`]
//! (status and yields) out.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;

use super::{Error, HostHandle, Payload};

/// A machine's id on its host: `host << 48 | generation << 24 | slot`.
///
/// The slot is reused after its machine is forgotten (waited for, detached, or dropped at
/// shutdown) and its generation bumped, so a stale id is reported as unknown rather than
/// routed to the slot's new machine (until the same slot has been reused 2^24 times). The
/// host part makes an id of another host unknown here, never misrouted.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MachineId(pub(crate) u64);

impl MachineId {
    pub(crate) const SLOT_BITS: u32 = 24;
    pub(crate) const GEN_BITS: u32 = 24;
    pub(crate) const HOST_BITS: u32 = 64 - Self::SLOT_BITS - Self::GEN_BITS;

    pub(crate) fn new(host: u64, generation: u32, slot: u32) -> MachineId {
        MachineId(
            host << (Self::SLOT_BITS + Self::GEN_BITS)
                | u64::from(generation) << Self::SLOT_BITS
                | u64::from(slot),
        )
    }

    /// The raw value, e.g. for logs.
    pub fn as_u64(self) -> u64 {
        self.0
    }

    pub(crate) fn slot(self) -> u32 {
        (self.0 & ((1 << Self::SLOT_BITS) - 1)) as u32
    }

    pub(crate) fn generation(self) -> u32 {
        ((self.0 >> Self::SLOT_BITS) & ((1 << Self::GEN_BITS) - 1)) as u32
    }

    pub(crate) fn host(self) -> u64 {
        self.0 >> (Self::SLOT_BITS + Self::GEN_BITS)
    }
}

impl fmt::Debug for MachineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MachineId({}.{}.{})", self.host(), self.slot(), self.generation())
    }
}

impl fmt::Display for MachineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "machine {}.{}.{}", self.host(), self.slot(), self.generation())
    }
}

/// A state machine advanced by events: what a [`Host`](super::Host) runs.
///
/// The host calls [`init`](Machine::init) once (in
/// [`spawn_machine`](super::Host::spawn_machine), on the caller's thread), then
/// [`step`](Machine::step) on a worker thread each time the machine is ready, and
/// [`close`](Machine::close) exactly once at the end (after it completed, failed, panicked,
/// or was closed at shutdown). No step follows `close`; steps of one machine never overlap.
///
/// A step runs on a worker's own stack, like a stackless task: it must not block. Work that
/// blocks (I/O, waiting, sleeping) goes into a **yield**: a command that the host dispatches
/// to a handler running on a green thread, whose answer comes back as an event.
///
/// ```
/// use purloin::machine::{Error, Events, Payload, Machine, StepOutput};
///
/// /// Adds the numbers it is sent until it receives 0.
/// #[derive(Default)]
/// struct Adder(u64);
///
/// impl Machine for Adder {
///     fn init(&mut self, method: &str, input: Payload) -> Result<(), Error> {
///         match method {
///             "sum" => {
///                 self.0 = input.take::<u64>()?;
///                 Ok(())
///             }
///             other => Err(Error::unknown_method(other, &["sum"])),
///         }
///     }
///
///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
///         for event in events {
///             match event.data.take::<u64>()? {
///                 0 => {
///                     out.complete(Payload::new(self.0));
///                     return Ok(());
///                 }
///                 n => self.0 += n,
///             }
///         }
///         out.idle();
///         Ok(())
///     }
/// }
/// # let _ = Adder::default();
/// ```
pub trait Machine: Send + 'static {
    /// Prepares the machine for the entry point `method` with its `input`.
    ///
    /// A machine may have several entry points; return [`Error::unknown_method`] for a
    /// method it does not have (that error is what
    /// [`spawn_machine`](super::Host::spawn_machine) reports, and the machine never runs).
    ///
    /// # Errors
    /// The method is unknown or the input is invalid.
    fn init(&mut self, method: &str, input: Payload) -> Result<(), Error>;

    /// Advances the state machine with `events` (yield completions, messages, cancellation,
    /// in arrival order) and writes the status and any yields into `out`.
    ///
    /// Events not taken from `events` are dropped after the step. The first step has no
    /// events (unless messages already arrived).
    ///
    /// # Errors
    /// Returning an error fails the machine: its waiters receive the error. A panic does the
    /// same, with [`ErrorKind::Panicked`](super::ErrorKind::Panicked).
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error>;

    /// Releases resources. Called exactly once, after the last step (also after a failed
    /// `init`). The default does nothing.
    fn close(&mut self) {}
}

/// The former name of [`Machine`], with the same methods.
///
/// Every type that implements `Process` is a [`Machine`] (a blanket impl forwards the three
/// methods), so existing implementations keep running on a [`Host`](super::Host) while the
/// compiler points at this name. Implement [`Machine`] instead: rename the trait in the
/// `impl` line; the methods stay as they are.
#[deprecated(note = "renamed to `Machine` (same methods): write `impl Machine for ..`")]
pub trait Process: Send + 'static {
    /// See [`Machine::init`].
    ///
    /// # Errors
    /// As [`Machine::init`].
    fn init(&mut self, method: &str, input: Payload) -> Result<(), Error>;

    /// See [`Machine::step`].
    ///
    /// # Errors
    /// As [`Machine::step`].
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error>;

    /// See [`Machine::close`].
    fn close(&mut self) {}
}

#[allow(deprecated)]
impl<T: Process> Machine for T {
    #[inline]
    fn init(&mut self, method: &str, input: Payload) -> Result<(), Error> {
        Process::init(self, method, input)
    }

    #[inline]
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        Process::step(self, events, out)
    }

    #[inline]
    fn close(&mut self) {
        Process::close(self)
    }
}

/// The kind of an [`Event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The answer to a yield: `tag` is the yield's tag, `data` the result, `error` set if the
    /// command failed.
    YieldComplete,
    /// A message sent with [`send`](super::HostHandle::send): `data` is the message, `tag` 0.
    Message,
    /// The machine is asked to stop (host shutdown or
    /// [`cancel`](super::HostHandle::cancel)); `error` says why. The machine should complete
    /// soon; at shutdown it is closed when the timeout passes.
    Cancel,
}

/// Something that happened to a machine, delivered to its next step.
#[derive(Debug)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The correlation tag of a [`YieldComplete`](EventKind::YieldComplete) (0 otherwise).
    pub tag: u64,
    /// The result of a yield, or a message's body (empty for a cancellation or a failed
    /// yield).
    pub data: Payload,
    /// The failure of a yield, or the reason of a cancellation.
    pub error: Option<Error>,
}

impl Event {
    pub(crate) fn message(data: Payload) -> Event {
        Event { kind: EventKind::Message, tag: 0, data, error: None }
    }

    pub(crate) fn cancel(reason: Error) -> Event {
        Event { kind: EventKind::Cancel, tag: 0, data: Payload::empty(), error: Some(reason) }
    }

    pub(crate) fn completion(tag: u64, result: Result<Payload, Error>) -> Event {
        match result {
            Ok(data) => Event { kind: EventKind::YieldComplete, tag, data, error: None },
            Err(e) => Event {
                kind: EventKind::YieldComplete,
                tag,
                data: Payload::empty(),
                error: Some(e),
            },
        }
    }

    /// The yield's result as a `Result` (for a [`YieldComplete`](EventKind::YieldComplete)).
    pub fn into_result(self) -> Result<Payload, Error> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.data),
        }
    }
}

/// The events of one step, oldest first. An iterator: `for event in events { .. }` takes
/// them; those not taken are dropped after the step.
///
/// The events are read straight out of the event queue's nodes (no copy into a buffer).
#[derive(Default)]
pub struct Events {
    /// Events drained by earlier wake-ups that did not step the machine (while Blocked).
    pub(crate) carry: VecDeque<Event>,
    /// A message handed over by the sender that woke the machine (no queue node).
    pub(crate) direct: Option<Event>,
    /// Events taken from the queue for this step.
    pub(crate) fresh: super::queue::NodeList,
}

impl Events {
    /// Number of events not yet taken.
    pub fn len(&self) -> usize {
        self.carry.len() + usize::from(self.direct.is_some()) + self.fresh.len()
    }

    /// Whether every event has been taken (or there were none).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The events not yet taken, without taking them.
    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.carry.iter().chain(self.direct.iter()).chain(self.fresh.iter())
    }

    /// Drops the events not taken (each check is one load when there are none; the carry
    /// buffer's allocation is kept for next time).
    pub(crate) fn clear(&mut self) {
        if self.direct.is_some() {
            self.direct = None;
        }
        if self.fresh.len() > 0 {
            drop(core::mem::take(&mut self.fresh));
        }
        if !self.carry.is_empty() {
            self.carry.clear();
        }
    }

    /// Whether a [`Cancel`](EventKind::Cancel) event is among those not yet taken.
    pub fn has_cancel(&self) -> bool {
        self.iter().any(|e| e.kind == EventKind::Cancel)
    }
}

impl Iterator for Events {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        // Early returns, not `or_else` chains: an event is eight words, moved once.
        if !self.carry.is_empty() {
            return self.carry.pop_front();
        }
        if self.direct.is_some() {
            return self.direct.take();
        }
        if self.fresh.len() == 0 {
            // Inlined into the step: the usual end of a step's loop costs no call.
            return None;
        }
        self.fresh.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len(), Some(self.len()))
    }
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A command for a handler, made by [`StepOutput::yield_command`].
#[derive(Debug)]
pub struct Command {
    /// Which handler runs it (as registered with [`register`](super::HostHandle::register)).
    pub name: Cow<'static, str>,
    /// The correlation tag: the answer comes back as a
    /// [`YieldComplete`](EventKind::YieldComplete) event with this tag. Unique among the
    /// machine's yields in flight.
    pub tag: u64,
    /// The command's argument.
    pub data: Payload,
}

/// What a machine asks for after a step.
#[derive(Debug)]
pub enum Status {
    /// Step me again soon (after other ready work): Running → Ready.
    Continue,
    /// Wake me when **all** my yields in flight have been answered (or on a cancellation);
    /// messages arriving meanwhile wait for that step: Running → Blocked.
    WaitYields,
    /// Wake me on any event (a message, any yield's answer, a cancellation): Running → Idle.
    Idle,
    /// I am finished, with this result: Running → Complete.
    Complete(Result<Payload, Error>),
}

/// The state of a machine as the host sees it (its lifecycle states), from
/// [`status`](super::HostHandle::status).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MachineState {
    /// Queued to run (or about to be).
    Ready,
    /// A worker is running its step.
    Running,
    /// Waiting for its yields to be answered.
    Blocked,
    /// Waiting for any event (messages).
    Idle,
    /// Finished; its result waits for [`wait`](super::HostHandle::wait).
    Complete,
}

/// Where a step writes its status and its yields.
///
/// If the step sets no status, the machine waits: [`Status::WaitYields`] if it made yields
/// in this step, [`Status::Idle`] otherwise.
pub struct StepOutput<'a> {
    id: super::MachineId,
    host: &'a HostHandle,
    buf: &'a mut StepBuf,
}

/// What a step writes, kept with the machine between steps (the yields' buffer is reused).
#[derive(Default)]
pub(crate) struct StepBuf {
    pub(crate) status: Option<Status>,
    pub(crate) yields: Vec<Command>,
}

impl<'a> StepOutput<'a> {
    pub(crate) fn new(id: super::MachineId, host: &'a HostHandle, buf: &'a mut StepBuf) -> Self {
        StepOutput { id, host, buf }
    }

    /// The id of the machine being stepped.
    #[inline]
    pub fn machine_id(&self) -> super::MachineId {
        self.id
    }

    /// The former name of [`machine_id`](StepOutput::machine_id).
    #[deprecated(note = "renamed to `machine_id`")]
    pub fn pid(&self) -> super::MachineId {
        self.id
    }

    /// The host running the machine: to [`send`](HostHandle::send) messages to other
    /// machines or [`spawn`](HostHandle::spawn_machine) new ones from inside a step.
    #[inline]
    pub fn host(&self) -> &'a HostHandle {
        self.host
    }

    /// Asks the handler registered for `command` to run it with `data`; the answer comes back
    /// as a [`YieldComplete`](EventKind::YieldComplete) event with this `tag`. Tags must be
    /// unique among the machine's yields in flight (reusing one fails the machine with
    /// [`ErrorKind::Protocol`](super::ErrorKind::Protocol)).
    pub fn yield_command(
        &mut self,
        command: impl Into<Cow<'static, str>>,
        tag: u64,
        data: Payload,
    ) {
        self.buf.yields.push(Command { name: command.into(), tag, data });
    }

    /// Sets the status (replacing an earlier one of this step).
    #[inline]
    pub fn set_status(&mut self, status: Status) {
        match self.buf.status {
            // SAFETY: `None` owns nothing, so overwriting it without the drop glue (an out of
            // line call on every step otherwise) leaks nothing.
            None => unsafe { core::ptr::write(&mut self.buf.status, Some(status)) },
            Some(_) => self.buf.status = Some(status),
        }
    }

    /// Shorthand for [`Status::Continue`].
    #[inline]
    pub fn continue_(&mut self) {
        self.set_status(Status::Continue);
    }

    /// Shorthand for [`Status::WaitYields`].
    #[inline]
    pub fn wait_yields(&mut self) {
        self.set_status(Status::WaitYields);
    }

    /// Shorthand for [`Status::Idle`].
    #[inline]
    pub fn idle(&mut self) {
        self.set_status(Status::Idle);
    }

    /// Shorthand for [`Status::Complete`] with a result.
    #[inline]
    pub fn complete(&mut self, result: Payload) {
        self.set_status(Status::Complete(Ok(result)));
    }

    /// Shorthand for [`Status::Complete`] with an error.
    pub fn fail(&mut self, error: Error) {
        self.set_status(Status::Complete(Err(error)));
    }

    /// The status set so far in this step, if any.
    pub fn status(&self) -> Option<&Status> {
        self.buf.status.as_ref()
    }

    /// The yields made so far in this step.
    pub fn yields(&self) -> &[Command] {
        &self.buf.yields
    }
}

impl fmt::Debug for StepOutput<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepOutput")
            .field("machine", &self.id)
            .field("status", &self.buf.status)
            .field("yields", &self.buf.yields)
            .finish()
    }
}
