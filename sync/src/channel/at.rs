//! The timer flavor behind [`after`](super::after), [`at`](super::at) and
//! [`never()`](super::never): a channel without senders whose one message (its deadline) becomes
//! receivable when the deadline passes.
//!
//! Nothing is registered anywhere until a receiver waits: a blocking receive (or a
//! selection that parks) sleeps until the deadline with a timed park, whose scheduler timer
//! is deleted when the wait ends early (a selection woken by another channel). A `try_recv`
//! compares the deadline with the clock. So a timer channel that nobody waits on costs its
//! allocation only, and dropping it frees everything at once.
//!
//! # Memory ordering
//!
//! The message is made from the immutable deadline, so no data is published between
//! threads; the only shared state is `taken`. (T1) Receivers race to set it with a swap:
//! read-modify-writes of one atomic are totally ordered, so exactly one swap sees `false`
//! and takes the message (Relaxed suffices). Everyone else sees the channel disconnected.
//!
//! A selection reserves nothing: the swap happens when the selected receive completes, and
//! one that lost the race to another receiver completes as a receive on the disconnected
//! channel it found (which is what any receive would return at that moment).

use std::time::Instant;

use purloin_sched::WaitKind;

use super::error::{RecvTimeoutError, TryRecvError};
use crate::diagnostics::wait_info;
use crate::loom::{AtomicBool, Ordering};
use crate::waiter::{Gave, OnInterrupt, Waiter};

/// A timer channel's state.
pub(crate) struct Channel<T> {
    /// When the message becomes receivable; `None`: never.
    deadline: Option<Instant>,
    /// Whether a receiver took the message (T1).
    taken: AtomicBool,
    /// Makes the message from the deadline (the identity for `Instant`, the one message type
    /// a timer channel is made with; never called when there is no deadline).
    make: fn(Instant) -> T,
}

impl<T> Channel<T> {
    pub(crate) fn new(deadline: Option<Instant>, make: fn(Instant) -> T) -> Channel<T> {
        Channel { deadline, taken: AtomicBool::new(false), make }
    }

    /// Whether the message was taken (the channel is disconnected).
    fn is_taken(&self) -> bool {
        // Relaxed (T1): a stale `false` only sends the caller to the swap.
        self.taken.load(Ordering::Relaxed)
    }

    /// Whether the deadline has passed.
    fn is_due(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether a receive would complete now: the message is due, or was taken (the receive
    /// then fails: disconnected).
    pub(crate) fn is_ready(&self) -> bool {
        self.is_taken() || self.is_due()
    }

    /// Completes a receive found ready: the message, or `Err` if another receiver took it
    /// (disconnected).
    pub(crate) fn read(&self) -> Result<T, ()> {
        match self.deadline {
            // Relaxed (T1): one swap wins.
            Some(d) if !self.taken.swap(true, Ordering::Relaxed) => Ok((self.make)(d)),
            _ => Err(()),
        }
    }

    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        if self.is_ready() {
            self.read().map_err(|()| TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    /// Receives, sleeping until the deadline (or `timeout`, whichever is first).
    pub(crate) fn recv(&self, timeout: Option<Instant>) -> Result<T, RecvTimeoutError> {
        loop {
            if self.is_ready() {
                return self.read().map_err(|()| RecvTimeoutError::Disconnected);
            }
            if timeout.is_some_and(|t| Instant::now() >= t) {
                return Err(RecvTimeoutError::Timeout);
            }
            let until = match (self.deadline, timeout) {
                (Some(d), Some(t)) => Some(d.min(t)),
                (d, t) => d.or(t),
            };
            // Nobody can claim this waiter: it returns once `until` passed (never without
            // one: `never()`), recorded for deadlock reports meanwhile.
            let info = wait_info(WaitKind::ChannelRecv, self, None);
            if Waiter::new().wait(until, info, OnInterrupt::Report) == Err(Gave::Interrupted) {
                return Err(RecvTimeoutError::Interrupted);
            }
        }
    }

    /// The instant a selection must wake up by to take the message, if any.
    pub(crate) fn wake_at(&self) -> Option<Instant> {
        if self.is_taken() { None } else { self.deadline }
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(!self.is_taken() && self.is_due())
    }
}
