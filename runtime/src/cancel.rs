//! Cancellation: interrupt a green thread, cancel a tree of work, stop the siblings of a
//! failed child.
//!
//! Three tools, from the smallest:
//!
//! - **Interrupt one green thread** ([`JoinHandle::interrupt`](crate::JoinHandle::interrupt),
//!   [`GreenThread::interrupt`](crate::GreenThread::interrupt); brpc's `bthread_interrupt`).
//!   The wait it is in, or the next one it starts, ends with an "interrupted" outcome; the
//!   thread decides what to do, nothing unwinds. An interrupt is a flag consumed by the wait
//!   that reports it; a wait that was woken by its event first returns the event and leaves
//!   the interrupt for the next wait.
//! - **Cancel a tree** ([`CancelToken`]; Go's `context.Context`, tokio's
//!   `CancellationToken`): tokens with children and deadlines. [`CancelToken::run`] runs code in
//!   the token's scope: while the token is cancelled, every interruptible wait of that green
//!   thread ends at once as interrupted, so code deep in a call tree stops waiting without a
//!   token in every signature (the green thread's scope is its "current context").
//! - **Structured scopes** ([`try_scope`]; Trio's nursery, Kotlin's `coroutineScope`, Go's
//!   `errgroup.WithContext`): the first child to fail (return `Err` or panic) cancels its
//!   siblings, and the scope returns that error after every child has ended.
//!
//! # What each wait does when interrupted
//!
//! | wait | outcome |
//! |---|---|
//! | [`Receiver::recv`](crate::sync::channel::Receiver::recv), `recv_timeout`, `recv_deadline` (also [`time::after`](crate::time::after) channels) | `Err(RecvError::Interrupted)`, `Err(RecvTimeoutError::Interrupted)` |
//! | [`Sender::send`](crate::sync::channel::Sender::send), `send_timeout`, `send_deadline` | `Err(SendError::Interrupted(msg))`, `Err(SendTimeoutError::Interrupted(msg))` |
//! | [`Butex::wait`](crate::sync::Butex::wait) | `ButexWait::Interrupted` |
//! | [`net`](crate::net) and [`io::Async`](crate::io::Async) reads, writes, accepts, connects | `io::ErrorKind::Interrupted` |
//! | [`sleep`](crate::sleep), [`Condvar`](crate::sync::Condvar) waits, [`WaitGroup::wait`](crate::sync::WaitGroup::wait), [`Semaphore::acquire_timeout`](crate::sync::Semaphore::acquire_timeout) | end early; the interrupt stays pending (their std-shaped results cannot say it: `WaitTimeoutResult::interrupted`, `false`, `None`) |
//! | [`net`](crate::net) and [`io::Async`](crate::io::Async) waits of a thread in a cancelled token's scope | an `io::ErrorKind::Other` error naming the cancelled token (std's `read_exact` and `write_all` retry `Interrupted`, which would spin on a token's lasting interrupt) |
//! | [`process::Child::wait`](crate::process::Child::wait) (a pidfd wait) | as for I/O |
//! | [`JoinHandle::wait_timeout`](crate::JoinHandle::wait_timeout), [`Select::select_timeout`](crate::sync::channel::Select::select_timeout) and `select!` with `default(timeout)`, [`signal::Signals::recv_timeout`](crate::signal::Signals::recv_timeout) | end early (`false`, `Err`, the default arm, `None`); the interrupt stays pending |
//! | [`future::block_on_interruptible`](crate::future::block_on_interruptible), `tokio::block_on_interruptible` (feature `tokio`) | `Err(Interrupted)`; the future is dropped |
//! | [`Mutex::lock`](crate::sync::Mutex::lock), `RwLock`, `Once`, `Barrier`, `Semaphore::acquire`, `JoinHandle::join`, `Select::select`, `Signals::recv`, `future::block_on` | not interruptible: like std's locks, or they must return a value (each has an interruptible form above) |
//!
//! The outcomes of the first group consume a one-shot interrupt; a token's cancellation is
//! never consumed: it holds while the thread is in the token's scope. [`interrupted`] checks
//! without consuming, [`take_interrupt`] consumes. Interrupts reach green threads only: a
//! plain OS thread's waits are not interruptible.
//!
//! # Side by side
//!
//! | purloin | Go | brpc | tokio |
//! |---|---|---|---|
//! | `handle.interrupt()` | — | `bthread_interrupt(tid)` | `JoinHandle::abort()` (drops the future) |
//! | `CancelToken::new()`, `.child()` | `context.WithCancel(parent)` | — | `CancellationToken::new()`, `.child_token()` |
//! | `.with_timeout(d)`, `.with_deadline(t)` | `context.WithTimeout`, `WithDeadline` | — | `tokio::time::timeout` |
//! | `token.run(\|\| work())` | pass `ctx` to every call | — | `select!` on `token.cancelled()` |
//! | `token.cancel()`, `.reason()` | `cancel()`, `ctx.Err()` | `bthread_stop` | `.cancel()` |
//! | `try_scope(\|s\| ..)` | `errgroup.WithContext` | — | `JoinSet` + `abort_all` |
//!
//! # Examples
//!
//! A fan-out where one branch fails: the others are cancelled and the scope returns the error.
//!
//! ```
//! use std::time::Duration;
//! use purloin::sync::channel::unbounded;
//!
//! let (_tx, rx) = unbounded::<u32>(); // nobody ever sends
//! let r: Result<(), String> = purloin::cancel::try_scope(|s| {
//!     s.spawn(|| {
//!         rx.recv().map_err(|e| e.to_string())?; // interrupted when the sibling fails
//!         Ok(())
//!     });
//!     s.spawn(|| {
//!         purloin::sleep(Duration::from_secs(3600)); // ends early when cancelled
//!         Ok(())
//!     });
//!     s.spawn(|| Err("backend unavailable".to_string()));
//!     Ok(())
//! });
//! assert_eq!(r, Err("backend unavailable".to_string()));
//! ```

#[cfg(not(loom))]
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
#[cfg(not(loom))]
use std::sync::{Arc, Mutex};

pub use purloin_sched::{interrupted, take_interrupt};
// Tokens and scopes use the scheduler's timers and the facade's scopes, which the loom build
// (the models of the facade's own protocols) leaves out.
#[cfg(not(loom))]
pub use purloin_sync::{CancelReason, CancelScope, CancelToken};

#[cfg(not(loom))]
use crate::scope::{Scope, ScopedJoinHandle};

/// A wait gave up because the calling green thread was interrupted
/// ([`JoinHandle::interrupt`](crate::JoinHandle::interrupt), or a cancelled [`CancelToken`] it
/// runs under). Returned by waits that have no error type of their own, such as
/// [`future::block_on_interruptible`](crate::future::block_on_interruptible).
///
/// # Examples
///
/// ```
/// let e = purloin::cancel::Interrupted;
/// assert!(e.to_string().contains("interrupted"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the green thread was interrupted while it waited (JoinHandle::interrupt or a \
             cancelled purloin::cancel::CancelToken)",
        )
    }
}

impl std::error::Error for Interrupted {}

#[cfg(not(loom))]
/// The children of a [`try_scope`]: spawn work that may fail; the first failure cancels the
/// rest.
pub struct TryScope<'scope, 'env, E> {
    scope: &'scope Scope<'scope, 'env>,
    state: Arc<State<E>>,
}

#[cfg(not(loom))]
struct State<E> {
    token: CancelToken,
    first: Mutex<Option<E>>,
}

#[cfg(not(loom))]
impl<E> State<E> {
    fn fail(&self, e: E) {
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(e);
        }
        drop(first);
        self.token.cancel();
    }
}

#[cfg(not(loom))]
impl<'scope, 'env, E: Send + 'env> TryScope<'scope, 'env, E> {
    /// Spawns a child that runs in the scope's token (Go's `errgroup.Group.Go`): if it
    /// returns `Err` (and is the first to fail) the scope returns that error; `Err` or a panic
    /// cancels the token, so the siblings' interruptible waits end. The scope waits for every
    /// child; a child that produces a value writes it where the body can read it after the
    /// scope (children may borrow), or sends it on a channel.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Mutex;
    ///
    /// let sum = Mutex::new(0);
    /// let r: Result<(), &str> = purloin::cancel::try_scope(|s| {
    ///     for i in 1..=3 {
    ///         let sum = &sum;
    ///         s.spawn(move || {
    ///             *sum.lock().unwrap() += i;
    ///             Ok(())
    ///         });
    ///     }
    ///     Ok(())
    /// });
    /// assert_eq!((r, sum.into_inner().unwrap()), (Ok(()), 6));
    /// ```
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce() -> Result<(), E> + Send + 'scope,
    {
        let state = self.state.clone();
        let _detached: ScopedJoinHandle<'scope, ()> =
            self.scope.spawn(move || match catch_unwind(AssertUnwindSafe(|| state.token.run(f))) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => state.fail(e),
                Err(panic) => {
                    state.token.cancel();
                    resume_unwind(panic)
                }
            });
    }

    /// The scope's token: cancelled when a child fails, when [`cancel`](TryScope::cancel) is
    /// called, or when the token it was made from is. Hand it (or a child of it) to work the
    /// scope does not spawn.
    ///
    /// # Examples
    ///
    /// ```
    /// let r: Result<(), ()> = purloin::cancel::try_scope(|s| {
    ///     assert!(!s.token().is_cancelled());
    ///     Ok(())
    /// });
    /// assert!(r.is_ok());
    /// ```
    pub fn token(&self) -> &CancelToken {
        &self.state.token
    }

    /// Cancels the scope's token (the children stop waiting); the scope still waits for them.
    ///
    /// # Examples
    ///
    /// ```
    /// let r: Result<(), ()> = purloin::cancel::try_scope(|s| {
    ///     s.spawn(|| {
    ///         purloin::sleep(std::time::Duration::from_secs(3600));
    ///         Ok(())
    ///     });
    ///     s.cancel(); // e.g. enough results arrived
    ///     Ok(())
    /// });
    /// assert!(r.is_ok());
    /// ```
    pub fn cancel(&self) {
        self.state.token.cancel();
    }
}

#[cfg(not(loom))]
/// A scope whose children may fail: the first child to return `Err` or panic cancels the
/// scope's token (its siblings' interruptible waits end, see the [module docs](self)), and
/// after every child has ended the scope returns that first error (or resumes that panic).
/// The body runs in the token too, and its own `Err` cancels the children the same way.
/// Otherwise it returns the body's result. Like [`scope`](crate::scope), children may borrow.
///
/// # Examples
///
/// ```
/// let r: Result<(), &str> = purloin::cancel::try_scope(|s| {
///     s.spawn(|| Err("first"));
///     Ok(())
/// });
/// assert_eq!(r, Err("first"));
/// ```
pub fn try_scope<'env, T, E, F>(f: F) -> Result<T, E>
where
    F: for<'scope> FnOnce(&TryScope<'scope, 'env, E>) -> Result<T, E>,
    E: Send + 'env,
{
    try_scope_in(&CancelToken::new(), f)
}

#[cfg(not(loom))]
/// [`try_scope`] under `parent`: the scope's token is a child of `parent`, so cancelling
/// `parent` (or its deadline) cancels the scope's children too.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use purloin::cancel::{CancelToken, try_scope_in};
///
/// let request = CancelToken::new().with_timeout(Duration::from_millis(5));
/// let r: Result<(), String> = try_scope_in(&request, |s| {
///     s.spawn(|| {
///         purloin::sleep(Duration::from_secs(3600)); // ends at the deadline
///         if purloin::cancel::interrupted() { Err("timed out".into()) } else { Ok(()) }
///     });
///     Ok(())
/// });
/// assert_eq!(r, Err("timed out".to_string()));
/// ```
pub fn try_scope_in<'env, T, E, F>(parent: &CancelToken, f: F) -> Result<T, E>
where
    F: for<'scope> FnOnce(&TryScope<'scope, 'env, E>) -> Result<T, E>,
    E: Send + 'env,
{
    let state = Arc::new(State { token: parent.child(), first: Mutex::new(None) });
    let body = crate::scope(|s| {
        let ts = TryScope { scope: s, state: state.clone() };
        let r = state.token.run(|| f(&ts));
        if let Err(e) = r {
            state.fail(e);
            return None;
        }
        r.ok()
    });
    let first = state.first.lock().unwrap_or_else(|p| p.into_inner()).take();
    match (first, body) {
        (Some(e), _) => Err(e),
        (None, Some(v)) => Ok(v),
        (None, None) => unreachable!("a failed body records its error"),
    }
}

#[cfg(not(loom))]
impl<E> std::fmt::Debug for TryScope<'_, '_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TryScope").field("token", &self.state.token).finish_non_exhaustive()
    }
}
