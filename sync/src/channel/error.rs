//! Channel error types, shaped like crossbeam-channel's (and std's `mpsc` where they overlap).

use core::fmt;

/// A [`send`](super::Sender::send) failed; the message is returned.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendError<T> {
    /// Every receiver was dropped.
    Disconnected(T),
    /// The sending green thread was interrupted while it waited
    /// ([`GreenThread::interrupt`](purloin_sched::GreenThread::interrupt), or a cancelled
    /// token it runs under).
    Interrupted(T),
}

/// A [`try_send`](super::Sender::try_send) failed.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The channel is full (or, for a rendezvous channel, no receiver is waiting).
    Full(T),
    /// Every receiver was dropped.
    Disconnected(T),
}

/// A [`send_timeout`](super::Sender::send_timeout) failed.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// The time ran out before the message could be sent.
    Timeout(T),
    /// Every receiver was dropped.
    Disconnected(T),
    /// The sending green thread was interrupted while it waited.
    Interrupted(T),
}

/// A [`recv`](super::Receiver::recv) failed.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum RecvError {
    /// The channel is empty and every sender was dropped.
    Disconnected,
    /// The receiving green thread was interrupted while it waited
    /// ([`GreenThread::interrupt`](purloin_sched::GreenThread::interrupt), or a cancelled
    /// token it runs under).
    Interrupted,
}

/// A [`try_recv`](super::Receiver::try_recv) failed.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum TryRecvError {
    /// The channel is empty (senders remain).
    Empty,
    /// The channel is empty and every sender was dropped.
    Disconnected,
}

/// A [`recv_timeout`](super::Receiver::recv_timeout) failed.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum RecvTimeoutError {
    /// The time ran out before a message arrived.
    Timeout,
    /// The channel is empty and every sender was dropped.
    Disconnected,
    /// The receiving green thread was interrupted while it waited.
    Interrupted,
}

/// [`Select::try_select`](super::Select::try_select) found no operation ready.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct TrySelectError;

/// [`Select::select_timeout`](super::Select::select_timeout) ran out of time.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct SelectTimeoutError;

const SEND_DISCONNECTED: &str = "sending on a disconnected channel (every receiver was dropped)";
const SEND_INTERRUPTED: &str = "the sending green thread was interrupted while it waited \
                                (GreenThread::interrupt or a cancelled token)";
const RECV_DISCONNECTED: &str =
    "receiving on an empty and disconnected channel (every sender was dropped)";
const RECV_INTERRUPTED: &str = "the receiving green thread was interrupted while it waited \
                                (GreenThread::interrupt or a cancelled token)";

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Disconnected(_) => f.write_str("Disconnected(..)"),
            SendError::Interrupted(_) => f.write_str("Interrupted(..)"),
        }
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SendError::Disconnected(_) => SEND_DISCONNECTED,
            SendError::Interrupted(_) => SEND_INTERRUPTED,
        })
    }
}

impl<T> std::error::Error for SendError<T> {}

impl<T> SendError<T> {
    /// The message that could not be sent.
    pub fn into_inner(self) -> T {
        match self {
            SendError::Disconnected(v) | SendError::Interrupted(v) => v,
        }
    }

    /// Whether the send failed because every receiver was dropped.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, SendError::Disconnected(_))
    }

    /// Whether the sending green thread was interrupted.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, SendError::Interrupted(_))
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str(
                "sending on a full channel (or a rendezvous channel with no receiver waiting)",
            ),
            TrySendError::Disconnected(_) => {
                f.write_str("sending on a disconnected channel (every receiver was dropped)")
            }
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}

impl<T> TrySendError<T> {
    /// The message that could not be sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }

    /// Whether the send failed because the channel was full.
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }

    /// Whether the send failed because every receiver was dropped.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, TrySendError::Disconnected(_))
    }
}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Disconnected(_) => f.write_str("Disconnected(..)"),
            SendTimeoutError::Interrupted(_) => f.write_str("Interrupted(..)"),
        }
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => {
                f.write_str("timed out waiting to send on a full channel")
            }
            SendTimeoutError::Disconnected(_) => f.write_str(SEND_DISCONNECTED),
            SendTimeoutError::Interrupted(_) => f.write_str(SEND_INTERRUPTED),
        }
    }
}

impl<T> std::error::Error for SendTimeoutError<T> {}

impl<T> From<SendError<T>> for SendTimeoutError<T> {
    fn from(err: SendError<T>) -> Self {
        match err {
            SendError::Disconnected(v) => SendTimeoutError::Disconnected(v),
            SendError::Interrupted(v) => SendTimeoutError::Interrupted(v),
        }
    }
}

impl<T> SendTimeoutError<T> {
    /// The message that could not be sent.
    pub fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(v)
            | SendTimeoutError::Disconnected(v)
            | SendTimeoutError::Interrupted(v) => v,
        }
    }

    /// Whether the send timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, SendTimeoutError::Timeout(_))
    }

    /// Whether the send failed because every receiver was dropped.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, SendTimeoutError::Disconnected(_))
    }

    /// Whether the sending green thread was interrupted.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, SendTimeoutError::Interrupted(_))
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecvError::Disconnected => RECV_DISCONNECTED,
            RecvError::Interrupted => RECV_INTERRUPTED,
        })
    }
}

impl std::error::Error for RecvError {}

impl RecvError {
    /// Whether the channel was empty and disconnected.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, RecvError::Disconnected)
    }

    /// Whether the receiving green thread was interrupted.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, RecvError::Interrupted)
    }
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => f.write_str(
                "receiving on an empty and disconnected channel (every sender was dropped)",
            ),
        }
    }
}

impl std::error::Error for TryRecvError {}

impl TryRecvError {
    /// Whether the channel was empty.
    pub fn is_empty(&self) -> bool {
        matches!(self, TryRecvError::Empty)
    }

    /// Whether the channel was empty and disconnected.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, TryRecvError::Disconnected)
    }
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => {
                f.write_str("timed out waiting to receive on an empty channel")
            }
            RecvTimeoutError::Disconnected => f.write_str(RECV_DISCONNECTED),
            RecvTimeoutError::Interrupted => f.write_str(RECV_INTERRUPTED),
        }
    }
}

impl std::error::Error for RecvTimeoutError {}

impl From<RecvError> for RecvTimeoutError {
    fn from(err: RecvError) -> Self {
        match err {
            RecvError::Disconnected => RecvTimeoutError::Disconnected,
            RecvError::Interrupted => RecvTimeoutError::Interrupted,
        }
    }
}

impl RecvTimeoutError {
    /// Whether the receive timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, RecvTimeoutError::Timeout)
    }

    /// Whether the channel was empty and disconnected.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, RecvTimeoutError::Disconnected)
    }

    /// Whether the receiving green thread was interrupted.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, RecvTimeoutError::Interrupted)
    }
}

impl fmt::Display for TrySelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no operation of the select is ready")
    }
}

impl std::error::Error for TrySelectError {}

impl fmt::Display for SelectTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out waiting for an operation of the select to become ready")
    }
}

impl std::error::Error for SelectTimeoutError {}
