//! [`Parker`] / [`Unparker`]: per-thread park and unpark with std's token semantics, on one
//! futex word, with deadlines, and an `unpark` that says whether the thread was asleep.
//!
//! The word holds a token in one of three states (std's futex parker, `library/std/src/sys/
//! sync/thread_parking/futex.rs`):
//!
//! ```text
//! EMPTY = 0          no token, nobody parked
//! NOTIFIED = 1       a token is waiting to be consumed
//! PARKED = u32::MAX  the owner is (about to be) asleep
//! ```
//!
//! Transitions:
//!
//! - `park`: `EMPTY => PARKED` or `NOTIFIED => EMPTY` with one `fetch_sub(1)`; in the second
//!   case it returns at once (an unpark before park is not lost). Asleep, after every return
//!   of the futex wait: `NOTIFIED => EMPTY` (compare-and-swap) ends the park; anything else
//!   was spurious, wait again.
//! - `park_deadline` when the deadline passes: `PARKED => EMPTY` with a swap, which may find
//!   `NOTIFIED` instead (an unpark raced with the timeout): then the token is consumed and the
//!   call reports that it was unparked.
//! - `unpark`: `* => NOTIFIED` with a swap; only if it replaced `PARKED` does it issue a futex
//!   wake (and return `true`). Unparking a running thread is one atomic swap, no syscall.
//!
//! # Memory ordering
//!
//! Guarantee: everything a thread wrote before `unpark()` is visible to the owner after the
//! `park*()` call that consumes that token returns.
//!
//! - (P1) `unpark`'s `swap(NOTIFIED, Release)` synchronises with the `Acquire` of whichever
//!   operation consumes the token: `park`'s `fetch_sub(1, Acquire)` (token already there), the
//!   `compare_exchange(NOTIFIED, EMPTY, Acquire)` after a wake, or the timed-out
//!   `swap(EMPTY, Acquire)`.
//! - Nothing else needs ordering: both sides write the one word with read-modify-writes, so
//!   the futex's compare-and-sleep closes the gap between `EMPTY => PARKED` and the sleep.

use core::cell::Cell;
use core::marker::PhantomData;
use std::time::{Duration, Instant};

use crate::futex::{self, WaitResult};
use crate::stats::{self, Event};
use crate::sync::{Arc, AtomicU32, Ordering, Padded};

const EMPTY: u32 = 0;
const NOTIFIED: u32 = 1;
const PARKED: u32 = u32::MAX;

/// The shared part of a parker, padded: two parkers allocated back to back (a ping-pong pair,
/// or workers created together) would otherwise share a line that both sides write.
type Inner = Padded<Token>;

struct Token {
    /// The token: `EMPTY`, `NOTIFIED` or `PARKED`, see the [module docs](self).
    state: AtomicU32,
}

/// Blocks the thread that owns it until an [`Unparker`] hands it a token.
///
/// Token semantics are std's [`std::thread::park`]: an [`Unparker::unpark`] before `park`
/// makes the next `park` return at once; several unparks before a park leave one token.
/// `park` never returns spuriously (it loops over the OS's spurious returns); the timed forms
/// return at the deadline. Parking allocates nothing: the one allocation is in [`Parker::new`].
///
/// `Parker` is `Send` but not `Sync`: only one thread may park on it at a time. Give other
/// threads [`Unparker`]s.
///
/// # Examples
///
/// ```
/// use purloin_parking::Parker;
///
/// let parker = Parker::new();
/// let unparker = parker.unparker();
/// let t = std::thread::spawn(move || {
///     unparker.unpark();
/// });
/// parker.park(); // returns once the other thread unparked (before or after this call)
/// t.join().unwrap();
/// ```
pub struct Parker {
    inner: Arc<Inner>,
    /// `!Sync`: two threads parking on one token would break the three-state protocol.
    _not_sync: PhantomData<Cell<()>>,
}

/// Wakes the thread of a [`Parker`] (or leaves it a token). `Clone + Send + Sync`.
///
/// # Examples
///
/// ```
/// use purloin_parking::Parker;
///
/// let parker = Parker::new();
/// let unparker = parker.unparker();
/// assert!(!unparker.unpark()); // the owner is not parked: leaves a token, no syscall
/// parker.park(); // consumes the token, returns at once
/// ```
#[derive(Clone)]
pub struct Unparker {
    inner: Arc<Inner>,
}

impl Parker {
    /// A parker with no token.
    #[must_use]
    pub fn new() -> Self {
        Parker {
            inner: Arc::new(Padded(Token { state: AtomicU32::new(EMPTY) })),
            _not_sync: PhantomData,
        }
    }

    /// Blocks until a token is available, then consumes it. Returns at once if a token was
    /// left by an earlier [`Unparker::unpark`]. Never returns spuriously.
    pub fn park(&self) {
        let state = &self.inner.state;
        // EMPTY => PARKED, or NOTIFIED => EMPTY. P1: Acquire, pairs with `unpark`'s swap.
        if state.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
            return;
        }
        loop {
            futex::wait(state, PARKED, None);
            // NOTIFIED => EMPTY. P1: Acquire, pairs with `unpark`'s swap.
            if state.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return;
            }
            // Still PARKED: a spurious return. Wait again.
        }
    }

    /// Like [`park`](Self::park), but gives up at `deadline`. Returns `true` if it consumed a
    /// token, `false` if the deadline passed first.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use purloin_parking::Parker;
    ///
    /// let parker = Parker::new();
    /// let deadline = Instant::now() + Duration::from_millis(5);
    /// assert!(!parker.park_deadline(deadline)); // nobody unparks
    /// assert!(Instant::now() >= deadline);
    /// ```
    pub fn park_deadline(&self, deadline: Instant) -> bool {
        let state = &self.inner.state;
        // EMPTY => PARKED, or NOTIFIED => EMPTY. P1: Acquire, pairs with `unpark`'s swap.
        if state.fetch_sub(1, Ordering::Acquire) == NOTIFIED {
            return true;
        }
        loop {
            let result = futex::wait(state, PARKED, Some(deadline));
            // NOTIFIED => EMPTY. P1: Acquire, pairs with `unpark`'s swap.
            if state.compare_exchange(NOTIFIED, EMPTY, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return true;
            }
            if result == WaitResult::TimedOut {
                break;
            }
            // Still PARKED and the deadline has not passed: spurious. Wait again.
        }
        // PARKED => EMPTY, or NOTIFIED => EMPTY if an unpark raced with the timeout.
        // P1: Acquire, pairs with `unpark`'s swap.
        state.swap(EMPTY, Ordering::Acquire) == NOTIFIED
    }

    /// Like [`park`](Self::park), but gives up after `timeout`. Returns `true` if it consumed
    /// a token, `false` if the time ran out first. A timeout too large to add to
    /// [`Instant::now`] parks without a deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use purloin_parking::Parker;
    ///
    /// let parker = Parker::new();
    /// parker.unparker().unpark();
    /// assert!(parker.park_timeout(Duration::from_secs(10))); // token was waiting
    /// assert!(!parker.park_timeout(Duration::ZERO)); // none left
    /// ```
    pub fn park_timeout(&self, timeout: Duration) -> bool {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.park_deadline(deadline),
            None => {
                self.park();
                true
            }
        }
    }

    /// A handle that unparks this parker's thread. Cheap to clone; may outlive the `Parker`
    /// (unparking then only sets a token nobody will consume).
    #[must_use]
    pub fn unparker(&self) -> Unparker {
        Unparker { inner: Arc::clone(&self.inner) }
    }
}

impl Unparker {
    /// Makes a token available to the parker: wakes its thread if it is parked, or makes its
    /// next park return at once. Returns `true` if the thread was parked (this call issued a
    /// wake), `false` if not (the token was just stored; if one was already there, nothing
    /// changes). With `false` no syscall was made.
    ///
    /// Everything written before `unpark` is visible to the parked thread after its park
    /// returns.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_parking::Parker;
    ///
    /// let parker = Parker::new();
    /// let u = parker.unparker();
    /// assert!(!u.unpark());
    /// assert!(!u.unpark()); // tokens do not accumulate
    /// parker.park();
    /// assert!(!parker.park_timeout(std::time::Duration::ZERO));
    /// ```
    pub fn unpark(&self) -> bool {
        let state = &self.inner.state;
        // * => NOTIFIED. P1: Release, pairs with the Acquire that consumes the token in
        // `park` / `park_deadline`.
        if state.swap(NOTIFIED, Ordering::Release) == PARKED {
            futex::wake_one(state);
            true
        } else {
            stats::record(Event::WakeSkipped);
            false
        }
    }
}

impl Default for Parker {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Parker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Parker").finish_non_exhaustive()
    }
}

impl core::fmt::Debug for Unparker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Unparker").finish_non_exhaustive()
    }
}
