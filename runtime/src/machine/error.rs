//! Errors: a machine's [`Error`], and the error values of [`send`](super::HostHandle::send)
//! and [`complete_yield`](super::HostHandle::complete_yield).

use core::fmt;
use std::sync::Arc;

use super::{MachineId, Payload};

/// What went wrong, for code that reacts to the cause (the message is for people).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The machine (or a handler) reported a failure of its own ([`Error::new`]).
    Failed,
    /// [`Machine::init`](super::Machine::init) does not know the requested entry point.
    UnknownMethod,
    /// [`Machine::step`](super::Machine::step) panicked; the message is the panic's.
    Panicked,
    /// The machine gave up after a [`Cancel`](super::EventKind::Cancel) event.
    Cancelled,
    /// The host closed the machine at shutdown because it did not finish in time.
    Closed,
    /// A yield named a command that has no registered handler.
    NoHandler,
    /// A handler let go of a yield without answering it.
    HandlerLost,
    /// The machine broke the host's rules (for example it waited for yields it never made,
    /// or reused a tag that is still in flight).
    Protocol,
    /// A blocking call was made where it would block a worker thread (inside a step).
    WouldBlock,
    /// No machine with this id is known to the host (never spawned, its result was already
    /// taken, or the host shut down).
    UnknownMachine,
    /// A timed wait ended before the machine finished.
    TimedOut,
}

impl ErrorKind {
    /// The former name of [`UnknownMachine`](ErrorKind::UnknownMachine).
    #[deprecated(note = "renamed to `UnknownMachine`")]
    #[allow(non_upper_case_globals)]
    pub const UnknownPid: ErrorKind = ErrorKind::UnknownMachine;
}

/// The error of a machine: why it failed, why a yield failed, or why waiting for it failed.
///
/// Cheap to clone (the message is shared).
///
/// ```
/// use purloin::machine::{Error, ErrorKind};
///
/// let e = Error::new("the upstream returned 503; retry later");
/// assert_eq!(e.kind(), ErrorKind::Failed);
/// assert_eq!(e.to_string(), "the upstream returned 503; retry later");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: Arc<str>,
}

impl Error {
    /// A failure reported by a machine or a handler ([`ErrorKind::Failed`]). Say what failed
    /// and what to do about it.
    pub fn new(message: impl Into<String>) -> Error {
        Error::with_kind(ErrorKind::Failed, message)
    }

    /// An error of a given kind.
    pub fn with_kind(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: Arc::from(message.into()) }
    }

    /// The error [`Machine::init`](super::Machine::init) should return for a method it does
    /// not have: names the method and the entry points that exist.
    ///
    /// ```
    /// use purloin::machine::{Error, ErrorKind};
    ///
    /// let e = Error::unknown_method("compile", &["build", "test"]);
    /// assert_eq!(e.kind(), ErrorKind::UnknownMethod);
    /// assert_eq!(
    ///     e.to_string(),
    ///     "unknown method `compile`: this machine has the entry points `build`, `test`"
    /// );
    /// ```
    pub fn unknown_method(method: &str, known: &[&str]) -> Error {
        let list = known.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
        Error::with_kind(
            ErrorKind::UnknownMethod,
            format!("unknown method `{method}`: this machine has the entry points {list}"),
        )
    }

    /// The error a machine completes with when it stops because of a
    /// [`Cancel`](super::EventKind::Cancel) event.
    pub fn cancelled(message: impl Into<String>) -> Error {
        Error::with_kind(ErrorKind::Cancelled, message)
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Makes the error of a panic from its payload (a `&str` or `String` message).
    pub(crate) fn from_panic(what: &str, payload: &(dyn core::any::Any + Send)) -> Error {
        let msg = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string panic payload");
        Error::with_kind(ErrorKind::Panicked, format!("{what} panicked: {msg}"))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("kind", &self.kind).field("message", &self.message).finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Why a [`send`](super::HostHandle::send) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// No machine with this id on this host: never spawned here, its result was already
    /// taken, or the host shut down.
    UnknownMachine,
    /// The machine has completed; it takes no more messages.
    Finished,
}

impl SendErrorKind {
    /// The former name of [`UnknownMachine`](SendErrorKind::UnknownMachine).
    #[deprecated(note = "renamed to `UnknownMachine`")]
    #[allow(non_upper_case_globals)]
    pub const UnknownPid: SendErrorKind = SendErrorKind::UnknownMachine;
}

/// A message that could not be delivered, with the message itself (nothing is lost).
pub struct SendError {
    kind: SendErrorKind,
    id: MachineId,
    payload: Payload,
}

impl SendError {
    pub(crate) fn new(kind: SendErrorKind, id: MachineId, payload: Payload) -> SendError {
        SendError { kind, id, payload }
    }

    /// Why.
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// The machine it was sent to.
    pub fn machine_id(&self) -> MachineId {
        self.id
    }

    /// The former name of [`machine_id`](SendError::machine_id).
    #[deprecated(note = "renamed to `machine_id`")]
    pub fn pid(&self) -> MachineId {
        self.id
    }

    /// The undelivered message.
    pub fn into_payload(self) -> Payload {
        self.payload
    }
}

impl fmt::Debug for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("kind", &self.kind)
            .field("machine", &self.id)
            .field("payload", &self.payload)
            .finish()
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            SendErrorKind::UnknownMachine => write!(
                f,
                "cannot send to {}: no such machine on this host (never spawned here, already \
                 waited for, or the host shut down); check the machine id and the host",
                self.id
            ),
            SendErrorKind::Finished => write!(
                f,
                "cannot send to {}: the machine has completed and takes no more messages; \
                 wait() for its result instead",
                self.id
            ),
        }
    }
}

impl std::error::Error for SendError {}

/// Why a [`complete_yield`](super::HostHandle::complete_yield) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompleteErrorKind {
    /// No machine with this id on this host.
    UnknownMachine,
    /// The machine has completed (or was closed); the answer is no longer needed.
    Finished,
    /// The machine has no yield with this tag in flight (never yielded, or already answered).
    NotInFlight,
}

impl CompleteErrorKind {
    /// The former name of [`UnknownMachine`](CompleteErrorKind::UnknownMachine).
    #[deprecated(note = "renamed to `UnknownMachine`")]
    #[allow(non_upper_case_globals)]
    pub const UnknownPid: CompleteErrorKind = CompleteErrorKind::UnknownMachine;
}

/// An answer to a yield that could not be delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompleteError {
    kind: CompleteErrorKind,
    id: MachineId,
    tag: u64,
}

impl CompleteError {
    pub(crate) fn new(kind: CompleteErrorKind, id: MachineId, tag: u64) -> CompleteError {
        CompleteError { kind, id, tag }
    }

    /// Why.
    pub fn kind(&self) -> CompleteErrorKind {
        self.kind
    }

    /// The machine the answer was for.
    pub fn machine_id(&self) -> MachineId {
        self.id
    }

    /// The former name of [`machine_id`](CompleteError::machine_id).
    #[deprecated(note = "renamed to `machine_id`")]
    pub fn pid(&self) -> MachineId {
        self.id
    }

    /// The tag the answer was for.
    pub fn tag(&self) -> u64 {
        self.tag
    }
}

impl fmt::Display for CompleteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (id, tag) = (self.id, self.tag);
        match self.kind {
            CompleteErrorKind::UnknownMachine => write!(
                f,
                "cannot complete yield {tag} of {id}: no such machine on this host; answer \
                 with the machine id and tag the handler received"
            ),
            CompleteErrorKind::Finished => write!(
                f,
                "cannot complete yield {tag} of {id}: the machine has already completed, so \
                 the answer is not needed"
            ),
            CompleteErrorKind::NotInFlight => write!(
                f,
                "cannot complete yield {tag} of {id}: no yield with this tag is in flight \
                 (never yielded, or already answered: each yield is answered exactly once)"
            ),
        }
    }
}

impl std::error::Error for CompleteError {}
