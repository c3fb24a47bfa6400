//! [`Condvar`]: a condition variable for [`Mutex`], on one butex holding a notification
//! counter (the futex condition variable of std and Linux).
//!
//! `wait` reads the counter while it still holds the mutex, unlocks, and sleeps only if the
//! counter has not moved; `notify_*` bump the counter and wake. A notification sent after the
//! waiter read the counter therefore either changes the word before the waiter's check (it does
//! not sleep) or finds the waiter queued (butex B1/B2): none is lost.
//!
//! `notify_all` wakes every waiter rather than requeueing them onto the mutex (std and Go do
//! the same): woken green threads that find the mutex taken park on it again at the cost of a
//! context switch each, and a requeue would tie the condition variable's waiters to a mutex
//! whose lifetime the condition variable cannot check.
//!
//! # Memory ordering
//!
//! The counter carries no data: the mutex orders the predicate. Its `fetch_add` is Relaxed;
//! butex B1 orders it before the waker reads the queue length.

use core::fmt;
use std::sync::LockResult;
use std::time::{Duration, Instant};

use purloin_sched::WaitKind;

use crate::butex::{Butex, ButexWait};
use crate::diagnostics::wait_info;
use crate::loom::Ordering;
use crate::mutex::{Mutex, MutexGuard};
use crate::poison;
use crate::waiter::OnInterrupt;

/// Whether a timed wait on a [`Condvar`] ended because its time ran out (or because the
/// waiting green thread was interrupted).
#[derive(Debug, PartialEq, Eq, Copy, Clone)]
pub struct WaitTimeoutResult {
    timed_out: bool,
    interrupted: bool,
}

impl WaitTimeoutResult {
    /// True if the wait ended because the timeout elapsed (the condition may still have
    /// become true meanwhile: check it).
    #[must_use]
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// True if the wait ended early because the waiting green thread was interrupted
    /// ([`GreenThread::interrupt`](purloin_sched::GreenThread::interrupt), or a cancelled
    /// token it runs under). The interrupt stays pending.
    #[must_use]
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }
}

/// A condition variable, shaped like [`std::sync::Condvar`], for [`Mutex`].
///
/// Waiting parks the calling green thread (its worker runs others); OS threads can wait and
/// notify too. Spurious wake-ups are possible, as with std: wait in a loop, or use
/// [`wait_while`](Condvar::wait_while).
///
/// Waits end early when the waiting green thread is interrupted
/// ([`GreenThread::interrupt`](purloin_sched::GreenThread::interrupt), or a cancelled token
/// it runs under): [`wait`](Condvar::wait) returns as for a spurious wake-up,
/// [`wait_while`](Condvar::wait_while) returns with the condition possibly still true, and the
/// timed forms say so in [`WaitTimeoutResult::interrupted`]. The interrupt stays pending, so
/// a loop around them ends at its next check of [`interrupted`](purloin_sched::interrupted)
/// or its next interruptible wait that reports it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use purloin_sync::{Condvar, Mutex};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let p = pair.clone();
/// sched.spawn(move || {
///     let (lock, cvar) = &*p;
///     *lock.lock().unwrap() = true;
///     cvar.notify_one();
/// });
/// let (lock, cvar) = &*pair;
/// let ready = cvar.wait_while(lock.lock().unwrap(), |ready| !*ready).unwrap();
/// assert!(*ready);
/// ```
pub struct Condvar {
    seq: Butex,
}

impl Condvar {
    loom_const_fn! {
        /// A condition variable with no waiters.
        pub fn new() -> Condvar {
            Condvar { seq: Butex::new(0) }
        }
    }

    /// Unlocks the guard's mutex, waits for a notification (or a spurious wake-up), and locks
    /// it again.
    ///
    /// # Errors
    ///
    /// If the mutex is poisoned when re-locked; the error carries the guard.
    pub fn wait<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
    ) -> LockResult<MutexGuard<'a, T>> {
        self.wait_inner(&mut guard, None);
        let mutex = guard.mutex();
        poison::map_result(mutex_poison(mutex), guard)
    }

    /// Waits while `condition` returns true (checked with the lock held, before each wait).
    ///
    /// # Errors
    ///
    /// If the mutex is poisoned; the error carries the guard.
    pub fn wait_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T>>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            let (_, interrupted) = self.wait_inner(&mut guard, None);
            if mutex_poison(guard.mutex()).get() {
                return Err(std::sync::PoisonError::new(guard));
            }
            if interrupted {
                break;
            }
        }
        Ok(guard)
    }

    /// [`wait`](Condvar::wait) for at most `dur`.
    ///
    /// # Errors
    ///
    /// If the mutex is poisoned; the error carries the guard and the result.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use purloin_sync::{Condvar, Mutex};
    ///
    /// let m = Mutex::new(());
    /// let c = Condvar::new();
    /// let (_g, r) = c.wait_timeout(m.lock().unwrap(), Duration::from_millis(1)).unwrap();
    /// assert!(r.timed_out());
    /// ```
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let deadline = Instant::now().checked_add(dur);
        let (timed_out, interrupted) = self.wait_inner(&mut guard, deadline);
        let mutex = guard.mutex();
        poison::map_result(
            mutex_poison(mutex),
            (guard, WaitTimeoutResult { timed_out, interrupted }),
        )
    }

    /// Waits while `condition` returns true, for at most `dur` in total.
    ///
    /// # Errors
    ///
    /// If the mutex is poisoned; the error carries the guard and the result.
    pub fn wait_timeout_while<'a, T: ?Sized, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        dur: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)>
    where
        F: FnMut(&mut T) -> bool,
    {
        let deadline = Instant::now().checked_add(dur);
        loop {
            if !condition(&mut *guard) {
                return Ok((guard, WaitTimeoutResult { timed_out: false, interrupted: false }));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok((guard, WaitTimeoutResult { timed_out: true, interrupted: false }));
            }
            let (_, interrupted) = self.wait_inner(&mut guard, deadline);
            if mutex_poison(guard.mutex()).get() {
                let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
                let r = WaitTimeoutResult { timed_out, interrupted };
                return Err(std::sync::PoisonError::new((guard, r)));
            }
            if interrupted {
                return Ok((guard, WaitTimeoutResult { timed_out: false, interrupted }));
            }
        }
    }

    /// Wakes one waiting thread (the longest-waiting one), if any.
    #[inline]
    pub fn notify_one(&self) {
        self.seq.value().fetch_add(1, Ordering::Relaxed);
        self.seq.wake_one();
    }

    /// Wakes every waiting thread.
    #[inline]
    pub fn notify_all(&self) {
        self.seq.value().fetch_add(1, Ordering::Relaxed);
        self.seq.wake_all();
    }

    /// Unlocks, waits on the counter, re-locks (also when unwound, so the caller's guard stays
    /// valid for its destructor). Returns whether the deadline passed and whether an interrupt
    /// ended the wait (left pending).
    fn wait_inner<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        deadline: Option<Instant>,
    ) -> (bool, bool) {
        let mutex = guard.mutex();
        // Read before unlocking: a notification after this changes the word.
        let seq = self.seq.value().load(Ordering::Relaxed);
        struct Relock<'m, T: ?Sized>(&'m Mutex<T>);
        impl<T: ?Sized> Drop for Relock<'_, T> {
            fn drop(&mut self) {
                self.0.raw_lock();
            }
        }
        // SAFETY: the guard proves we hold the lock; `Relock` re-takes it before the guard can
        // be used or dropped again (also during an unwind).
        unsafe { mutex.raw_unlock() };
        let _relock = Relock(mutex);
        let info = wait_info(WaitKind::Condvar, self, None);
        let r = self.seq.wait_with(seq, deadline, info, OnInterrupt::Leave, |claimed| {
            if claimed.is_some() {
                self.notify_one();
            }
        });
        (r == ButexWait::TimedOut, r == ButexWait::Interrupted)
    }
}

fn mutex_poison<T: ?Sized>(m: &Mutex<T>) -> &poison::Flag {
    m.poison_flag()
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}
