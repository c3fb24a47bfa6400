//! Time: sleeping green threads on the scheduler's timers, and timer channels for
//! [`select!`](crate::select).
//!
//! [`sleep`] and [`sleep_until`] park only the green thread (its worker runs others
//! meanwhile); on a plain OS thread they sleep the OS thread.
//!
//! [`after`] and [`tick`] / [`Ticker`] are channels that receive the time, Go's `time.After`
//! and `time.Ticker` (crossbeam-channel's `after` and `tick`), so a deadline or a period can
//! sit in a `select!` next to other channels:
//!
//! ```
//! use std::time::Duration;
//! use purloin::sync::channel;
//!
//! let (_tx, jobs) = channel::unbounded::<u32>();
//! let timeout = purloin::time::after(Duration::from_millis(10));
//! purloin::select! {
//!     recv(jobs) -> job => panic!("no job was sent: {job:?}"),
//!     recv(timeout) -> at => assert!(at.is_ok()), // gave up waiting
//! }
//! ```
//!
//! An [`after`] / [`at`] channel holds only its deadline: no timer exists until a receiver
//! waits on it (see [`after`] for the rule and the reason), so one that nobody waits on is
//! freed as soon as its last receiver is dropped. A ticker is fed by a periodic callback timer
//! of the scheduler ([`purloin_sched::Timer`], of the current runtime; from a plain thread,
//! the global runtime's): one heap entry, not a green thread, dropped (its channel
//! disconnects) when its runtime shuts down, which does not wait for it. A timer of a worker
//! that is busy with a long CPU-bound green thread is fired by an idle worker or the
//! scheduler's monitor instead.
//!
//! # No `timeout(d, || ...)`
//!
//! There is deliberately no helper that runs a closure and gives up after a duration. Blocking
//! code cannot be interrupted at an arbitrary point: the helper could only abandon the closure
//! (which keeps running and holding what it holds, so nothing is freed) or unwind it at its
//! next scheduling point (which breaks code that is not unwind-safe: a message received but
//! not yet handled, half a request written to a socket). The sound form is a timeout per
//! blocking operation, which purloin has everywhere: `recv_timeout`, `send_timeout`,
//! `select_timeout`, `set_read_timeout`/`set_write_timeout` on sockets,
//! [`Async::wait_readable_timeout`](crate::io::Async::wait_readable_timeout),
//! [`Child::wait_timeout`](crate::process::Child::wait_timeout), [`after`] in a `select!`.

use std::fmt;
use std::time::{Duration, Instant};

use crate::loom::{Arc, AtomicBool, Ordering};
use crate::sync::channel::{self, Receiver, RecvError, TrySendError};

// The one-shot timer channels are purloin-sync's (they need no runtime).
pub use purloin_sync::channel::{after, at, never};

/// Sleeps for `duration`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let started = Instant::now();
/// let h = purloin::spawn(|| purloin::sleep(Duration::from_millis(5)));
/// h.join().unwrap();
/// assert!(started.elapsed() >= Duration::from_millis(5));
/// ```
pub fn sleep(duration: Duration) {
    purloin_sched::sleep(duration);
}

/// Sleeps until `deadline`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// // Ticks at a fixed rate: each deadline is set from the previous one, not from "now",
/// // so time spent working does not make the ticks drift.
/// let mut next = Instant::now();
/// for _ in 0..3 {
///     next += Duration::from_millis(2);
///     purloin::sleep_until(next);
/// }
/// assert!(Instant::now() >= next);
/// ```
pub fn sleep_until(deadline: Instant) {
    purloin_sched::sleep_until(deadline);
}

/// A channel that receives the time every `period`; dropping the receiver stops it at its
/// next tick. See [`Ticker`] for one that stops at once and for the delivery rules. A period
/// too long to represent never ticks (the receiver is a [`never()`]), as for [`after`].
///
/// # Panics
/// If `period` is zero (a ticker that fires continuously is a busy loop).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let ticks = purloin::time::tick(Duration::from_millis(1));
/// let a = ticks.recv().unwrap();
/// let b = ticks.recv().unwrap();
/// assert!(b > a);
/// ```
pub fn tick(period: Duration) -> Receiver<Instant> {
    let (rx, _stopped, _timer) = start_ticker(period);
    // Nobody stops this one: its timer ends when it finds the channel without receivers.
    rx
}

/// A periodic timer channel (Go's `time.Ticker`): [`receiver`](Ticker::receiver) receives
/// the time every `period`, starting one period after creation.
///
/// Ticks do not pile up: the channel holds one tick, a tick that finds it full is dropped,
/// and a ticker that fell behind (a slow receiver, a busy worker) skips the missed periods
/// and keeps its phase instead of firing a burst to catch up. Dropping the ticker (or
/// [`stop`](Ticker::stop)) stops it at once. A period too long to represent never ticks, as
/// for [`after`].
///
/// The ticks come from a callback timer of the runtime the ticker was made on (the global
/// runtime's, from a plain thread). When that runtime shuts down its timers are dropped: the
/// channel disconnects, so [`recv`](Ticker::recv) then returns an error at once.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use purloin::sync::channel;
/// use purloin::time::Ticker;
///
/// let ticker = Ticker::new(Duration::from_millis(1));
/// let (_tx, work) = channel::unbounded::<()>();
/// let mut ticks = 0;
/// while ticks < 3 {
///     purloin::select! {
///         recv(work) -> _ => unreachable!(),
///         recv(ticker.receiver()) -> _ => ticks += 1,
///     }
/// }
/// ticker.stop();
/// ```
pub struct Ticker {
    rx: Receiver<Instant>,
    stopped: Arc<AtomicBool>,
    /// `None` for a period too long to represent (it never ticks).
    timer: Option<purloin_sched::Timer>,
}

impl Ticker {
    /// Starts a ticker with `period`.
    ///
    /// # Panics
    /// If `period` is zero.
    pub fn new(period: Duration) -> Ticker {
        let (rx, stopped, timer) = start_ticker(period);
        Ticker { rx, stopped, timer }
    }

    /// The channel the ticks arrive on (for `select!`, `recv`, `recv_timeout`, …).
    pub fn receiver(&self) -> &Receiver<Instant> {
        &self.rx
    }

    /// Waits for the next tick.
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the ticker was stopped (at once, also with a tick that was waiting in
    /// the channel) or its runtime shut down (the channel is disconnected).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use purloin::time::Ticker;
    ///
    /// let ticker = Ticker::new(Duration::from_millis(1));
    /// let first = ticker.recv().unwrap();
    /// assert!(ticker.recv().unwrap() > first);
    /// ticker.stop();
    /// assert!(ticker.recv().is_err());
    /// ```
    pub fn recv(&self) -> Result<Instant, RecvError> {
        // Acquire: pairs with the Release store in `stop` (only the flag is read).
        if self.stopped.load(Ordering::Acquire) {
            return Err(RecvError::Disconnected);
        }
        self.rx.recv()
    }

    /// Stops the ticker: no tick is sent after this returns, and a tick waiting in the channel
    /// is discarded (Go's rule: no stale tick after `Stop`), except one being sent at this
    /// very moment by the timer callback on another thread, which [`recv`](Ticker::recv)
    /// does not return either (it fails from now on).
    pub fn stop(&self) {
        // Release: pairs with the callback's Acquire load and `recv`'s (only the flag is
        // published).
        self.stopped.store(true, Ordering::Release);
        // Drops the callback (and its sender: the channel disconnects once drained), or
        // keeps a callback running right now from being re-armed.
        if let Some(timer) = &self.timer {
            timer.cancel();
        }
        while self.rx.try_recv().is_ok() {}
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for Ticker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticker").field("stopped", &self.stopped.load(Ordering::Relaxed)).finish()
    }
}

/// Starts a ticker's periodic callback timer: the channel, the stop flag, the timer (none
/// for a period too long to represent: such a ticker never ticks).
fn start_ticker(
    period: Duration,
) -> (Receiver<Instant>, Arc<AtomicBool>, Option<purloin_sched::Timer>) {
    assert!(
        !period.is_zero(),
        "purloin::time: a ticker's period must be greater than zero (a zero period would fire \
         continuously)"
    );
    let stopped = Arc::new(AtomicBool::new(false));
    let Some(first) = Instant::now().checked_add(period) else {
        return (never(), stopped, None);
    };
    let (tx, rx) = channel::bounded(1);
    let stop = stopped.clone();
    // Runs on the scheduler's timer path: a `try_send` never blocks. The scheduler skips
    // missed periods (a tick that fell behind keeps its phase).
    let feed = move |now: Instant| {
        // Acquire: pairs with the Release store in `Ticker::stop`.
        if stop.load(Ordering::Acquire) {
            return false;
        }
        match tx.try_send(now) {
            Ok(()) | Err(TrySendError::Full(_)) => true,
            Err(TrySendError::Disconnected(_)) => false,
        }
    };
    let timer = match purloin_sched::call_every(first, period, feed) {
        Ok(timer) => timer,
        Err(feed) => crate::rt::global().scheduler().call_every(first, period, feed),
    };
    (rx, stopped, Some(timer))
}
