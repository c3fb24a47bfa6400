//! Callback timers: a closure the scheduler runs at a deadline, once or every period, kept as
//! one entry in a P's timer heap ([`crate::timer_heap`]) rather than a green thread.

use std::time::{Duration, Instant};

use crate::shared::Shared;
use crate::sync::{Arc, AtomicBool};
use crate::timer_heap::{Action, Periodic};

/// A cancellable callback timer: a closure the scheduler runs at a deadline (once, or every
/// period), made by [`Scheduler::call_at`](crate::Scheduler::call_at),
/// [`Scheduler::call_every`](crate::Scheduler::call_every), [`call_at`] or [`call_every`].
///
/// A pending timer costs one heap entry, not a green thread. The callback runs on whichever
/// scheduler thread fires it: a worker's scheduling context (between green threads) or the
/// monitor thread. It **must be short and must not block** (no `park`, no sleep, no lock held
/// for long, no blocking I/O): while it runs, that worker runs no green thread. Sending on a
/// channel with `try_send`, unparking a green thread or setting a flag are the intended uses.
/// A panic in a callback is reported on stderr and contained.
///
/// Dropping a `Timer` does not cancel it (like a detached thread); callbacks still pending
/// when the scheduler is dropped are dropped without running.
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
/// use std::time::{Duration, Instant};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let (tx, rx) = mpsc::channel();
/// let deadline = Instant::now() + Duration::from_millis(2);
/// let _timer = sched.call_at(deadline, move || {
///     let _ = tx.send(Instant::now());
/// });
/// assert!(rx.recv().unwrap() >= deadline);
///
/// let never = sched.call_at(Instant::now() + Duration::from_secs(3600), || unreachable!());
/// assert!(never.cancel()); // it had not fired: it never will
/// ```
pub struct Timer {
    shared: Arc<Shared>,
    /// The P whose heap holds it, and its sequence there.
    p: usize,
    seq: u64,
    /// Set by `cancel` (T1), for a periodic timer being fired at that moment.
    cancelled: Arc<AtomicBool>,
}

impl Timer {
    /// Cancels the timer: returns `true` if it was pending (a one-shot timer had not fired; a
    /// periodic one will not fire again), `false` if it had fired, was cancelled before, or
    /// ended itself. The callback is dropped here if it was pending. A periodic callback
    /// running on another thread at this moment finishes that run and is not re-armed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// // First due in an hour: still pending when cancelled (a timer that is firing at the
    /// // moment of `cancel` is not re-armed, but that run was not prevented: `false`).
    /// let first = Instant::now() + Duration::from_secs(3600);
    /// let t = sched.call_every(first, Duration::from_millis(1), |_| true);
    /// assert!(t.cancel());
    /// assert!(!t.cancel());
    /// ```
    pub fn cancel(&self) -> bool {
        self.shared.ps[self.p].timers.cancel(self.shared.epoch, self.seq, &self.cancelled)
    }
}

impl core::fmt::Debug for Timer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Timer").field("p", &self.p).field("seq", &self.seq).finish()
    }
}

/// Adds `action` to a heap of `shared`: the P the calling worker holds (if it is one of this
/// scheduler's), else P 0's, whose worker is woken so it parks again with the new deadline.
pub(crate) fn add_callback(shared: &Arc<Shared>, at: Instant, action: Action) -> (usize, u64) {
    if let Some(m) = crate::worker::current_worker()
        && Arc::ptr_eq(&m.shared, shared)
        && let Some(h) = m.held()
    {
        return (m.p.get(), h.p().timers.add(shared.epoch, at, action));
    }
    let seq = shared.ps[0].timers.add(shared.epoch, at, action);
    shared.wake_worker(0);
    (0, seq)
}

pub(crate) fn timer_at(
    shared: &Arc<Shared>,
    deadline: Instant,
    f: impl FnOnce() + Send + 'static,
) -> Timer {
    let (p, seq) = add_callback(shared, deadline, Action::Call(Box::new(f)));
    Timer { shared: shared.clone(), p, seq, cancelled: Arc::new(AtomicBool::new(false)) }
}

pub(crate) fn timer_every(
    shared: &Arc<Shared>,
    first: Instant,
    period: Duration,
    f: impl FnMut(Instant) -> bool + Send + 'static,
) -> Timer {
    assert!(
        !period.is_zero(),
        "purloin_sched: a periodic timer's period must be greater than zero"
    );
    let cancelled = Arc::new(AtomicBool::new(false));
    let every = Periodic::new(period, cancelled.clone(), Box::new(f));
    let (p, seq) = add_callback(shared, first, Action::Every(Box::new(every)));
    Timer { shared: shared.clone(), p, seq, cancelled }
}

impl crate::Scheduler {
    /// Runs `f` once at `deadline` (at once if it has passed) on this scheduler: a callback
    /// [`Timer`], which says where it runs and what it may do (short, never blocking).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::{Duration, Instant};
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// let deadline = Instant::now() + Duration::from_millis(1);
    /// sched.call_at(deadline, move || tx.send(()).unwrap());
    /// rx.recv().unwrap();
    /// assert!(Instant::now() >= deadline);
    /// ```
    pub fn call_at(&self, deadline: Instant, f: impl FnOnce() + Send + 'static) -> Timer {
        timer_at(&self.shared, deadline, f)
    }

    /// Runs `f(now)` at `first` and then every `period` while it returns `true` and the
    /// [`Timer`] is not cancelled; missed periods are skipped (the phase is kept).
    ///
    /// # Panics
    /// If `period` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::{Duration, Instant};
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// let t = sched.call_every(Instant::now(), Duration::from_millis(1), move |now| {
    ///     tx.send(now).is_ok()
    /// });
    /// let (a, b) = (rx.recv().unwrap(), rx.recv().unwrap());
    /// assert!(b > a);
    /// t.cancel();
    /// ```
    pub fn call_every(
        &self,
        first: Instant,
        period: Duration,
        f: impl FnMut(Instant) -> bool + Send + 'static,
    ) -> Timer {
        timer_every(&self.shared, first, period, f)
    }
}

/// Runs `f` at `deadline` on the scheduler of the calling green thread or worker (see
/// [`Timer`] for where it runs and what it may do); `Err(f)` if the caller is not on a
/// scheduler (use [`Scheduler::call_at`](crate::Scheduler::call_at)).
///
/// # Errors
/// `Err(f)`, the closure back, off a scheduler.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::time::{Duration, Instant};
///
/// assert!(purloin_sched::call_at(Instant::now(), || ()).is_err()); // not on a scheduler
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let me = purloin_sched::current().unwrap();
///     let done = Arc::new(AtomicBool::new(false));
///     let d = done.clone();
///     let deadline = Instant::now() + Duration::from_millis(1);
///     let _t = purloin_sched::call_at(deadline, move || {
///         d.store(true, Ordering::Release);
///         me.unpark();
///     })
///     .unwrap_or_else(|_| unreachable!());
///     while !done.load(Ordering::Acquire) {
///         purloin_sched::park();
///     }
/// });
/// h.join().unwrap();
/// ```
pub fn call_at<F>(deadline: Instant, f: F) -> Result<Timer, F>
where
    F: FnOnce() + Send + 'static,
{
    match crate::worker::current_worker() {
        Some(m) => Ok(timer_at(&m.shared, deadline, f)),
        None => Err(f),
    }
}

/// Runs `f(now)` at `first` and then every `period` while it returns `true` (a periodic
/// [`Timer`]; missed periods are skipped, keeping the phase), on the scheduler of the calling
/// green thread or worker; `Err(f)` off a scheduler.
///
/// # Errors
/// `Err(f)`, the closure back, off a scheduler.
///
/// # Panics
/// If `period` is zero.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::{Duration, Instant};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let n = sched
///     .spawn(|| {
///         let me = purloin_sched::current().unwrap();
///         let n = Arc::new(AtomicU32::new(0));
///         let n2 = n.clone();
///         let every = Duration::from_millis(1);
///         let _t = purloin_sched::call_every(Instant::now(), every, move |_now| {
///             let k = n2.fetch_add(1, Ordering::AcqRel) + 1;
///             me.unpark();
///             k < 3 // three ticks, then it ends itself
///         })
///         .unwrap_or_else(|_| unreachable!());
///         while n.load(Ordering::Acquire) < 3 {
///             purloin_sched::park();
///         }
///         n.load(Ordering::Acquire)
///     })
///     .join()
///     .unwrap();
/// assert_eq!(n, 3);
/// ```
pub fn call_every<F>(first: Instant, period: Duration, f: F) -> Result<Timer, F>
where
    F: FnMut(Instant) -> bool + Send + 'static,
{
    match crate::worker::current_worker() {
        Some(m) => Ok(timer_every(&m.shared, first, period, f)),
        None => Err(f),
    }
}
