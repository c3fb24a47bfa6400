//! Multi-producer multi-consumer channels for green threads and OS threads, shaped like
//! crossbeam-channel: [`bounded`] (capacity 0 is a rendezvous, Go's unbuffered channel),
//! [`unbounded`], blocking / `try_*` / `*_timeout` / `*_deadline` operations, iterators,
//! disconnection, and [`Select`] / [`select!`](crate::select).
//!
//! Blocking parks the calling green thread (its worker runs other green threads) or, outside
//! a green thread, sleeps the OS thread; both kinds can share a channel. A send that makes a
//! parked green receiver runnable puts it in the sender's `runnext`, so two green threads
//! passing messages back and forth run as a unit on one worker (Go's rule).
//!
//! # Flavors
//!
//! - `bounded(n)`, `n ≥ 1`: a lock-free ring of `n` slots (Vyukov's bounded MPMC queue).
//! - `bounded(0)`: a rendezvous: each send waits for a receiver and hands the message over
//!   directly (Go's `hchan` with waiter queues under one short lock).
//! - `unbounded()`: a lock-free linked list of blocks of 31 slots; sends never block.
//! - timer channels ([`after`], [`at`], [`never()`]; `purloin::time` re-exports them): no
//!   sender; one message, receivable from a deadline on, with no timer registered until a
//!   receiver waits. A receiver holds them apart from the other flavors, so a timer channel
//!   is a small allocation rather than the size of the largest flavor.
//!
//! # Disconnection
//!
//! When every [`Sender`] is dropped, receivers get the messages still queued and then
//! [`RecvError`] (nothing sent before the disconnection is lost). When every [`Receiver`] is
//! dropped, sends fail with [`SendError`] carrying the message back, and queued messages are
//! dropped.
//!
//! # Examples
//!
//! ```
//! use purloin_sync::channel::bounded;
//!
//! let sched = purloin_sched::Scheduler::new().unwrap();
//! let (tx, rx) = bounded(4);
//! let producers: Vec<_> = (0..4u64)
//!     .map(|p| {
//!         let tx = tx.clone();
//!         sched.spawn(move || {
//!             for i in 0..100 {
//!                 tx.send(p * 1000 + i).unwrap();
//!             }
//!         })
//!     })
//!     .collect();
//! drop(tx); // the channel disconnects when the producers' clones are gone
//! let sum: u64 = rx.iter().sum(); // ends at disconnection, after every message
//! for p in producers {
//!     p.join().unwrap();
//! }
//! assert_eq!(sum, (0..4u64).map(|p| p * 100_000 + 4950).sum());
//! ```

mod array;
mod at;
mod error;
mod list;
mod select;
mod waiters;
mod zero;

use core::fmt;
use std::time::{Duration, Instant};

pub use crate::select;
pub use error::{
    RecvError, RecvTimeoutError, SelectTimeoutError, SendError, SendTimeoutError, TryRecvError,
    TrySelectError, TrySendError,
};
pub use select::{Select, SelectedOperation};

use crate::loom::{Arc, AtomicUsize, Ordering};
use crate::waiter::{Node, Waiter};
use select::{SelectHandle, Token};

enum Flavor<T> {
    Array(array::Channel<T>),
    List(list::Channel<T>),
    Zero(zero::Channel<T>),
}

/// The shared part of a channel: the flavor and the numbers of senders and receivers.
struct Shared<T> {
    senders: AtomicUsize,
    receivers: AtomicUsize,
    flavor: Flavor<T>,
}

// SAFETY: the flavors move `T`s between threads (through slots and packets whose accesses are
// ordered by their protocols, see each flavor's docs); that needs only `T: Send`, like
// crossbeam-channel and std's `mpsc`.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as for `Send`: shared access never hands out `&T`, only moves `T`s.
unsafe impl<T: Send> Sync for Shared<T> {}

fn new_channel<T>(flavor: Flavor<T>) -> (Sender<T>, Receiver<T>) {
    let shared =
        Arc::new(Shared { senders: AtomicUsize::new(1), receivers: AtomicUsize::new(1), flavor });
    (Sender { shared: shared.clone() }, Receiver { inner: Inner::Chan(shared) })
}

/// A timer channel's receiver (it has no sender): its one message, `make(deadline)`, can be
/// received from `deadline` on (never without one), and then the channel is disconnected.
fn timer<T>(deadline: Option<Instant>, make: fn(Instant) -> T) -> Receiver<T> {
    Receiver { inner: Inner::Timer(Arc::new(at::Channel::new(deadline, make))) }
}

/// A channel with room for `cap` messages; `bounded(0)` is a rendezvous channel (each send
/// waits until a receiver takes the message, Go's unbuffered channel).
///
/// # Panics
///
/// If `cap` is absurdly large (above `usize::MAX / 8`).
///
/// # Examples
///
/// ```
/// use purloin_sync::channel::{bounded, TrySendError};
///
/// let (tx, rx) = bounded(1);
/// tx.send(1).unwrap();
/// assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
/// assert_eq!(rx.recv(), Ok(1));
/// ```
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    if cap == 0 {
        new_channel(Flavor::Zero(zero::Channel::new()))
    } else {
        new_channel(Flavor::Array(array::Channel::with_capacity(cap)))
    }
}

/// A channel without a capacity limit: sends never block.
///
/// # Examples
///
/// ```
/// use purloin_sync::channel::unbounded;
///
/// let (tx, rx) = unbounded();
/// for i in 0..1000 {
///     tx.send(i).unwrap();
/// }
/// drop(tx);
/// assert_eq!(rx.iter().count(), 1000);
/// ```
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    new_channel(Flavor::List(list::Channel::new()))
}

/// A channel that receives one message, `duration` from now (Go's `time.After`): the
/// deadline, `Instant::now() + duration`. Once it is received the channel is disconnected
/// (further receives fail; of several clones, one receives it). A duration too long to
/// represent never fires ([`never()`]).
///
/// # Cost: no timer until someone waits
///
/// The channel holds only its deadline. Nothing is registered with the scheduler until a
/// receiver waits: a `recv` (or a [`select!`](crate::select) that has to park) sleeps until
/// the deadline with a timed park, whose timer is deleted as soon as the wait ends early (a
/// `select!` woken by another channel); `try_recv` and a `select!` that does not park only
/// compare the deadline with the clock. So an `after` that nobody is waiting on costs one
/// small allocation, freed when its last receiver is dropped, and Go's timeout idiom,
/// `loop { select! { recv(rx) -> m => ..., recv(after(d)) -> _ => ... } }`, leaves no timers
/// behind however many messages it handles (Go 1.23's rule: a timer nobody can observe is
/// garbage at once).
///
/// Why lazy rather than a timer deleted when the receiver drops: deleting would put and take
/// an entry in a processor's timer heap (its lock, maybe another processor's) for every
/// `after`, including the many that never fire, and nothing observable would be gained; a
/// wait that sleeps already needs a timer of its own. For the same reason an `after` does not
/// belong to a scheduler: it fires at its deadline for any thread waiting on it, also after
/// the scheduler it was made on shut down, and it works from plain OS threads.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use purloin_sync::channel::after;
///
/// let start = Instant::now();
/// let at = after(Duration::from_millis(5)).recv().unwrap();
/// assert!(at >= start + Duration::from_millis(5));
/// ```
pub fn after(duration: Duration) -> Receiver<Instant> {
    match Instant::now().checked_add(duration) {
        Some(deadline) => at(deadline),
        // Beyond what `Instant` can represent: never fires.
        None => never(),
    }
}

/// A channel that receives `deadline` once, from `deadline` on (at once if it has passed);
/// [`after`] describes the rules and what a pending one costs (nothing but its memory).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use purloin_sync::channel::at;
///
/// let deadline = Instant::now() + Duration::from_millis(5);
/// assert!(at(deadline).recv().unwrap() >= deadline);
/// ```
pub fn at(deadline: Instant) -> Receiver<Instant> {
    timer(Some(deadline), core::convert::identity)
}

/// A receiver that never receives (and is never disconnected): the arm of a `select!` that
/// must not fire, e.g. a disabled timeout.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use purloin_sync::channel::never;
///
/// let never = never::<()>();
/// assert!(never.recv_timeout(Duration::from_millis(1)).is_err());
/// ```
pub fn never<T>() -> Receiver<T> {
    timer(None, never_made::<T>)
}

/// The message maker of a timer channel without a deadline (never called).
fn never_made<T>(_: Instant) -> T {
    unreachable!("purloin_sync::channel: a channel without a deadline never makes its message")
}

/// The sending end of a channel. Clone it for more producers; the channel disconnects for
/// receivers when the last clone is dropped.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The receiving end of a channel. Clone it for more consumers (each message goes to one of
/// them); the channel disconnects for senders when the last clone is dropped.
pub struct Receiver<T> {
    inner: Inner<T>,
}

/// What a [`Receiver`] receives from.
enum Inner<T> {
    /// A channel with senders (the bounded, rendezvous and unbounded flavors).
    Chan(Arc<Shared<T>>),
    /// A timer channel (no sender, no count of receivers: dropping the last one is all).
    Timer(Arc<at::Channel<T>>),
}

fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

impl<T> Sender<T> {
    /// Sends `msg`, blocking (parking the green thread) while the channel is full — for a
    /// rendezvous channel, until a receiver takes it.
    ///
    /// # Errors
    ///
    /// [`SendError::Disconnected`] with the message if every receiver was dropped;
    /// [`SendError::Interrupted`] with the message if the calling green thread was interrupted
    /// while it waited ([`GreenThread::interrupt`](purloin_sched::GreenThread::interrupt), or
    /// a cancelled token it runs under; a send that did not have to wait is not interrupted).
    #[inline]
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        let r = match &self.shared.flavor {
            Flavor::Array(c) => c.send(msg, None),
            Flavor::List(c) => c.send(msg, None),
            Flavor::Zero(c) => c.send(msg, None),
        };
        r.map_err(|e| match e {
            SendTimeoutError::Disconnected(m) => SendError::Disconnected(m),
            SendTimeoutError::Interrupted(m) => SendError::Interrupted(m),
            SendTimeoutError::Timeout(_) => unreachable!("a send without a deadline waits"),
        })
    }

    /// Sends `msg` if that is possible without blocking.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] if the channel is full (a rendezvous channel: no receiver is
    /// waiting), [`TrySendError::Disconnected`] if every receiver was dropped; both return
    /// the message.
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        match &self.shared.flavor {
            Flavor::Array(c) => c.try_send(msg),
            Flavor::List(c) => c.try_send(msg),
            Flavor::Zero(c) => c.try_send(msg),
        }
    }

    /// [`send`](Sender::send), blocking at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`], [`SendTimeoutError::Disconnected`] or
    /// [`SendTimeoutError::Interrupted`], with the message.
    pub fn send_timeout(&self, msg: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        match deadline_after(timeout) {
            Some(d) => self.send_deadline(msg, d),
            None => self.send(msg).map_err(SendTimeoutError::from),
        }
    }

    /// [`send`](Sender::send), blocking until `deadline` at most.
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`], [`SendTimeoutError::Disconnected`] or
    /// [`SendTimeoutError::Interrupted`], with the message.
    pub fn send_deadline(&self, msg: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        match &self.shared.flavor {
            Flavor::Array(c) => c.send(msg, Some(deadline)),
            Flavor::List(c) => c.send(msg, Some(deadline)),
            Flavor::Zero(c) => c.send(msg, Some(deadline)),
        }
    }

    /// Whether the channel holds no message (always true for a rendezvous channel).
    pub fn is_empty(&self) -> bool {
        self.shared.flavor.is_empty()
    }

    /// Whether the channel is full (always true for a rendezvous channel, never for an
    /// unbounded one).
    pub fn is_full(&self) -> bool {
        self.shared.flavor.is_full()
    }

    /// The number of queued messages (a snapshot).
    pub fn len(&self) -> usize {
        self.shared.flavor.len()
    }

    /// The capacity: `Some(n)` for `bounded(n)`, `None` for unbounded.
    pub fn capacity(&self) -> Option<usize> {
        self.shared.flavor.capacity()
    }

    /// Whether `self` and `other` are ends of the same channel.
    pub fn same_channel(&self, other: &Sender<T>) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Completes a send reserved by a selection.
    ///
    /// # Safety
    ///
    /// - `token` holds a reservation made for this sender (by `try_select` or `accept`).
    unsafe fn complete(&self, token: &mut Token, msg: T) -> Result<(), SendError<T>> {
        // SAFETY: the caller's obligation.
        let r = unsafe {
            match &self.shared.flavor {
                Flavor::Array(c) => c.write(token, msg),
                Flavor::List(c) => c.write(token, msg),
                Flavor::Zero(c) => c.write(token, msg),
            }
        };
        r.map_err(SendError::Disconnected)
    }
}

impl<T> Receiver<T> {
    /// Receives a message, blocking (parking the green thread) while the channel is empty.
    ///
    /// # Errors
    ///
    /// [`RecvError::Disconnected`] once the channel is empty and every sender was dropped
    /// (messages sent before that are received first); [`RecvError::Interrupted`] if the
    /// calling green thread was interrupted while it waited
    /// ([`GreenThread::interrupt`](purloin_sched::GreenThread::interrupt), or a cancelled token
    /// it runs under; a receive that finds a message does not wait and is not interrupted).
    #[inline]
    pub fn recv(&self) -> Result<T, RecvError> {
        let r = match &self.inner {
            Inner::Chan(shared) => match &shared.flavor {
                Flavor::Array(c) => c.recv(None),
                Flavor::List(c) => c.recv(None),
                Flavor::Zero(c) => c.recv(None),
            },
            Inner::Timer(c) => c.recv(None),
        };
        r.map_err(|e| match e {
            RecvTimeoutError::Disconnected => RecvError::Disconnected,
            RecvTimeoutError::Interrupted => RecvError::Interrupted,
            RecvTimeoutError::Timeout => unreachable!("a receive without a deadline waits"),
        })
    }

    /// Receives a message if one is there now.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`], or [`TryRecvError::Disconnected`] if empty and every sender
    /// was dropped.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        match &self.inner {
            Inner::Chan(shared) => match &shared.flavor {
                Flavor::Array(c) => c.try_recv(),
                Flavor::List(c) => c.try_recv(),
                Flavor::Zero(c) => c.try_recv(),
            },
            Inner::Timer(c) => c.try_recv(),
        }
    }

    /// [`recv`](Receiver::recv), blocking at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`], [`RecvTimeoutError::Disconnected`] or
    /// [`RecvTimeoutError::Interrupted`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        match deadline_after(timeout) {
            Some(d) => self.recv_deadline(d),
            None => self.recv().map_err(RecvTimeoutError::from),
        }
    }

    /// [`recv`](Receiver::recv), blocking until `deadline` at most.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`], [`RecvTimeoutError::Disconnected`] or
    /// [`RecvTimeoutError::Interrupted`].
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        match &self.inner {
            Inner::Chan(shared) => match &shared.flavor {
                Flavor::Array(c) => c.recv(Some(deadline)),
                Flavor::List(c) => c.recv(Some(deadline)),
                Flavor::Zero(c) => c.recv(Some(deadline)),
            },
            Inner::Timer(c) => c.recv(Some(deadline)),
        }
    }

    /// A blocking iterator: yields messages until the channel is empty and disconnected.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { receiver: self }
    }

    /// A non-blocking iterator over the messages queued now.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { receiver: self }
    }

    /// Whether the channel holds no message (always true for a rendezvous channel).
    pub fn is_empty(&self) -> bool {
        match &self.inner {
            Inner::Chan(shared) => shared.flavor.is_empty(),
            Inner::Timer(c) => c.len() == 0,
        }
    }

    /// Whether the channel is full (always true for a rendezvous channel, never for an
    /// unbounded one; a timer channel, of capacity 1, is full while its message waits).
    pub fn is_full(&self) -> bool {
        match &self.inner {
            Inner::Chan(shared) => shared.flavor.is_full(),
            Inner::Timer(c) => c.len() == 1,
        }
    }

    /// The number of queued messages (a snapshot).
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Chan(shared) => shared.flavor.len(),
            Inner::Timer(c) => c.len(),
        }
    }

    /// The capacity: `Some(n)` for `bounded(n)`, `None` for unbounded, `Some(1)` for a timer
    /// channel.
    pub fn capacity(&self) -> Option<usize> {
        match &self.inner {
            Inner::Chan(shared) => shared.flavor.capacity(),
            Inner::Timer(_) => Some(1),
        }
    }

    /// Whether `self` and `other` are ends of the same channel.
    pub fn same_channel(&self, other: &Receiver<T>) -> bool {
        match (&self.inner, &other.inner) {
            (Inner::Chan(a), Inner::Chan(b)) => Arc::ptr_eq(a, b),
            (Inner::Timer(a), Inner::Timer(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Completes a receive reserved by a selection.
    ///
    /// # Safety
    ///
    /// - `token` holds a reservation made for this receiver (by `try_select` or `accept`).
    unsafe fn complete(&self, token: &mut Token) -> Result<T, RecvError> {
        let shared = match &self.inner {
            Inner::Chan(shared) => shared,
            Inner::Timer(c) => return c.read().map_err(|()| RecvError::Disconnected),
        };
        // SAFETY: the caller's obligation.
        unsafe {
            match &shared.flavor {
                Flavor::Array(c) => c.read(token).map_err(|()| RecvError::Disconnected),
                Flavor::List(c) => c.read(token).map_err(|()| RecvError::Disconnected),
                Flavor::Zero(c) => match c.read(token) {
                    Ok(Some(m)) => Ok(m),
                    // The selected counterpart was unwound before handing over its message
                    // (scheduler shutdown): receive normally instead.
                    Ok(None) => self.recv(),
                    Err(()) => Err(RecvError::Disconnected),
                },
            }
        }
    }
}

impl<T> Flavor<T> {
    fn is_empty(&self) -> bool {
        match self {
            Flavor::Array(c) => c.is_empty(),
            Flavor::List(c) => c.is_empty(),
            Flavor::Zero(_) => true,
        }
    }

    fn is_full(&self) -> bool {
        match self {
            Flavor::Array(c) => c.is_full(),
            Flavor::List(_) => false,
            Flavor::Zero(_) => true,
        }
    }

    fn len(&self) -> usize {
        match self {
            Flavor::Array(c) => c.len(),
            Flavor::List(c) => c.len(),
            Flavor::Zero(_) => 0,
        }
    }

    fn capacity(&self) -> Option<usize> {
        match self {
            Flavor::Array(c) => Some(c.capacity()),
            Flavor::List(_) => None,
            Flavor::Zero(_) => Some(0),
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        // Relaxed: a new handle is made from an existing one, which keeps the count above 0.
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Sender { shared: self.shared.clone() }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        let inner = match &self.inner {
            Inner::Chan(shared) => {
                // Relaxed: as for `Sender::clone`.
                shared.receivers.fetch_add(1, Ordering::Relaxed);
                Inner::Chan(shared.clone())
            }
            Inner::Timer(c) => Inner::Timer(c.clone()),
        };
        Receiver { inner }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // AcqRel: the last sender's disconnection happens after every sender's last send
        // (each decrement releases, the last acquires).
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            match &self.shared.flavor {
                Flavor::Array(c) => {
                    c.disconnect();
                }
                Flavor::List(c) => {
                    c.disconnect_senders();
                }
                Flavor::Zero(c) => {
                    c.disconnect();
                }
            }
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // A timer channel has nobody to tell (no sender, no timer unless a receiver waits).
        let Inner::Chan(shared) = &self.inner else { return };
        // AcqRel: as in `Sender::drop`.
        if shared.receivers.fetch_sub(1, Ordering::AcqRel) == 1 {
            match &shared.flavor {
                Flavor::Array(c) => {
                    c.disconnect_receivers();
                }
                Flavor::List(c) => {
                    c.disconnect_receivers();
                }
                Flavor::Zero(c) => {
                    c.disconnect();
                }
            }
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Sender { .. }")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Receiver { .. }")
    }
}

impl<T> std::panic::UnwindSafe for Sender<T> {}
impl<T> std::panic::RefUnwindSafe for Sender<T> {}
impl<T> std::panic::UnwindSafe for Receiver<T> {}
impl<T> std::panic::RefUnwindSafe for Receiver<T> {}

/// A blocking iterator over a [`Receiver`]'s messages (see [`Receiver::iter`]).
#[derive(Debug)]
pub struct Iter<'a, T> {
    receiver: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.receiver.recv().ok()
    }
}

/// A non-blocking iterator over a [`Receiver`]'s queued messages (see
/// [`Receiver::try_iter`]).
#[derive(Debug)]
pub struct TryIter<'a, T> {
    receiver: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.receiver.try_recv().ok()
    }
}

/// An owning blocking iterator over a [`Receiver`]'s messages.
#[derive(Debug)]
pub struct IntoIter<T> {
    receiver: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.receiver.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { receiver: self }
    }
}

impl<T> SelectHandle for Receiver<T> {
    fn try_select(&self, token: &mut Token) -> bool {
        let shared = match &self.inner {
            Inner::Chan(shared) => shared,
            // Nothing to reserve: the receive takes the message when it completes.
            Inner::Timer(c) => return c.is_ready(),
        };
        match &shared.flavor {
            Flavor::Array(c) => c.start_recv(token),
            Flavor::List(c) => c.start_recv(token),
            Flavor::Zero(c) => c.start_recv(token),
        }
    }

    unsafe fn register(&self, node: &mut Node, me: *const Waiter) -> bool {
        let shared = match &self.inner {
            Inner::Chan(shared) => shared,
            // Nothing to link (nobody sends): the selection wakes by `wake_at`.
            Inner::Timer(c) => return c.is_ready(),
        };
        match &shared.flavor {
            Flavor::Array(c) => {
                // SAFETY: forwarded from the caller's obligations.
                unsafe { c.receivers().register(node) };
                !c.is_empty() || c.is_disconnected()
            }
            Flavor::List(c) => {
                // SAFETY: forwarded from the caller's obligations.
                unsafe { c.receivers().register(node) };
                !c.is_empty() || c.is_disconnected()
            }
            // SAFETY: forwarded from the caller's obligations.
            Flavor::Zero(c) => unsafe { c.register(node, false, me) },
        }
    }

    fn unregister(&self, node: &Node, won: bool) {
        let Inner::Chan(shared) = &self.inner else { return };
        match &shared.flavor {
            Flavor::Array(c) => c.receivers().unregister(node),
            Flavor::List(c) => c.receivers().unregister(node),
            Flavor::Zero(c) => c.unregister(node, false, won),
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match &self.inner {
            Inner::Chan(_) => None,
            Inner::Timer(c) => c.wake_at(),
        }
    }

    unsafe fn accept(&self, token: &mut Token, node: &Node, claim: u32) -> bool {
        let shared = match &self.inner {
            Inner::Chan(shared) => shared,
            // Never linked, so never claimed; a retry is always correct.
            Inner::Timer(c) => return c.is_ready(),
        };
        match &shared.flavor {
            // A claim is a hint: try again.
            Flavor::Array(c) => c.start_recv(token),
            Flavor::List(c) => c.start_recv(token),
            // SAFETY: forwarded from the caller's obligations.
            Flavor::Zero(c) => unsafe { c.accept(token, node, false, claim) },
        }
    }

    unsafe fn abandon(&self, node: &Node, claim: u32) {
        let Inner::Chan(shared) = &self.inner else { return };
        match &shared.flavor {
            // Pass the hint on to another receiver.
            Flavor::Array(c) => c.receivers().notify(),
            Flavor::List(c) => c.receivers().notify(),
            // SAFETY: forwarded from the caller's obligations.
            Flavor::Zero(c) => unsafe { c.abandon(node, false, claim) },
        }
    }

    unsafe fn abandon_token(&self, token: &mut Token) {
        // A timer channel reserves nothing.
        let Inner::Chan(shared) = &self.inner else { return };
        match &shared.flavor {
            // Release the slot: take the message and drop it.
            // SAFETY: `token` holds this receiver's uncompleted reservation.
            Flavor::Array(c) => drop(unsafe { c.read(token) }),
            // SAFETY: as above.
            Flavor::List(c) => drop(unsafe { c.read(token) }),
            // SAFETY: as above.
            Flavor::Zero(c) => unsafe { c.abandon_token(token, false) },
        }
    }
}

impl<T> SelectHandle for Sender<T> {
    fn try_select(&self, token: &mut Token) -> bool {
        match &self.shared.flavor {
            Flavor::Array(c) => c.start_send(token),
            Flavor::List(c) => c.start_send(token),
            Flavor::Zero(c) => c.start_send(token),
        }
    }

    unsafe fn register(&self, node: &mut Node, me: *const Waiter) -> bool {
        match &self.shared.flavor {
            Flavor::Array(c) => {
                // SAFETY: forwarded from the caller's obligations.
                unsafe { c.senders().register(node) };
                !c.is_full() || c.is_disconnected()
            }
            // An unbounded send is always ready (never linked).
            Flavor::List(_) => true,
            // SAFETY: forwarded from the caller's obligations.
            Flavor::Zero(c) => unsafe { c.register(node, true, me) },
        }
    }

    fn unregister(&self, node: &Node, won: bool) {
        match &self.shared.flavor {
            Flavor::Array(c) => c.senders().unregister(node),
            Flavor::List(_) => {}
            Flavor::Zero(c) => c.unregister(node, true, won),
        }
    }

    unsafe fn accept(&self, token: &mut Token, node: &Node, claim: u32) -> bool {
        match &self.shared.flavor {
            Flavor::Array(c) => c.start_send(token),
            Flavor::List(c) => c.start_send(token),
            // SAFETY: forwarded from the caller's obligations.
            Flavor::Zero(c) => unsafe { c.accept(token, node, true, claim) },
        }
    }

    unsafe fn abandon(&self, node: &Node, claim: u32) {
        match &self.shared.flavor {
            Flavor::Array(c) => c.senders().notify(),
            Flavor::List(_) => {}
            // SAFETY: forwarded from the caller's obligations.
            Flavor::Zero(c) => unsafe { c.abandon(node, true, claim) },
        }
    }

    unsafe fn abandon_token(&self, token: &mut Token) {
        match &self.shared.flavor {
            // A claimed slot cannot be given back without a message (see
            // `SelectedOperation`'s panics section).
            Flavor::Array(_) | Flavor::List(_) => {}
            // SAFETY: `token` holds this sender's uncompleted reservation.
            Flavor::Zero(c) => unsafe { c.abandon_token(token, true) },
        }
    }
}
