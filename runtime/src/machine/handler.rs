//! Command handlers: what runs a machine's yields, and the [`Yield`] a handler answers.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::{CompleteError, Error, ErrorKind, HostHandle, MachineId, Payload};

/// The function type of a handler.
pub(crate) type HandlerFn = dyn Fn(Yield) + Send + Sync + 'static;

/// Where a handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// On a new green thread per yield: the handler may block (sleep, lock, do I/O, wait).
    Green,
    /// On the worker, right after the step that yielded: the handler must not block.
    Inline,
}

/// A registered handler.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) mode: Mode,
    pub(crate) f: Arc<HandlerFn>,
    /// The name its green threads get (`handler:<command>`), made once.
    pub(crate) thread_name: Arc<str>,
}

/// One yield, given to the handler registered for its command. Answer it exactly once with
/// [`complete`](Yield::complete) — from the handler, or later from any thread.
///
/// A `Yield` dropped without an answer (the handler returned or panicked without completing
/// it) answers itself with an [`ErrorKind::HandlerLost`] error, so a machine never waits for
/// an answer that cannot come. To answer through
/// [`HostHandle::complete_yield`] instead, take the parts out with
/// [`into_parts`](Yield::into_parts).
pub struct Yield {
    id: MachineId,
    tag: u64,
    command: Cow<'static, str>,
    data: Payload,
    host: HostHandle,
    answered: bool,
}

impl Yield {
    pub(crate) fn new(
        id: MachineId,
        tag: u64,
        command: Cow<'static, str>,
        data: Payload,
        host: HostHandle,
    ) -> Yield {
        Yield { id, tag, command, data, host, answered: false }
    }

    /// The machine that yielded.
    pub fn machine_id(&self) -> MachineId {
        self.id
    }

    /// The former name of [`machine_id`](Yield::machine_id).
    #[deprecated(note = "renamed to `machine_id`")]
    pub fn pid(&self) -> MachineId {
        self.id
    }

    /// The yield's correlation tag.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// The command's name.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The command's argument.
    pub fn data(&self) -> &Payload {
        &self.data
    }

    /// Takes the command's argument (leaving the empty payload).
    pub fn take_data(&mut self) -> Payload {
        core::mem::take(&mut self.data)
    }

    /// The host (to send messages or spawn machines from a handler).
    pub fn host(&self) -> &HostHandle {
        &self.host
    }

    /// Answers the yield: the machine receives a
    /// [`YieldComplete`](super::EventKind::YieldComplete) event with this tag and `result`.
    ///
    /// # Errors
    /// The machine has already completed ([`CompleteErrorKind::Finished`](super::CompleteErrorKind::Finished)):
    /// the answer is not needed and is dropped.
    pub fn complete(mut self, result: Result<Payload, Error>) -> Result<(), CompleteError> {
        self.answered = true;
        self.host.complete_yield(self.id, self.tag, result)
    }

    /// Takes the id, tag and argument out, to answer later with
    /// [`HostHandle::complete_yield`]. The caller is then responsible for answering (the
    /// automatic error answer on drop is disarmed).
    pub fn into_parts(mut self) -> (MachineId, u64, Payload) {
        self.answered = true;
        (self.id, self.tag, core::mem::take(&mut self.data))
    }
}

impl Drop for Yield {
    fn drop(&mut self) {
        if !self.answered {
            let why = Error::with_kind(
                ErrorKind::HandlerLost,
                format!(
                    "the handler for command `{}` dropped yield {} of {} without answering it \
                     (it returned or panicked); call Yield::complete on every path",
                    self.command, self.tag, self.id
                ),
            );
            let _ = self.host.complete_yield(self.id, self.tag, Err(why));
        }
    }
}

impl fmt::Debug for Yield {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Yield")
            .field("machine", &self.id)
            .field("tag", &self.tag)
            .field("command", &self.command)
            .field("data", &self.data)
            .finish()
    }
}
