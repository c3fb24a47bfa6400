//! [`Mutex`]: a mutual-exclusion lock that parks the waiting green thread, built the way Go's
//! `sync.Mutex` is: barging with a short spin, and a starvation mode that hands the lock over.
//!
//! # Barging, then hand-off
//!
//! In normal mode `unlock` releases the lock and wakes the oldest waiter, which then
//! *competes* with green threads that arrive meanwhile (they may take the lock first: barging).
//! That is the fast choice: the running green thread keeps going on a warm cache instead of
//! waiting for a wake-up and a context switch, and a lock released and retaken in a loop costs
//! two uncontended CASes. Pure hand-off (give the lock to the oldest waiter) would cost a
//! context switch per acquisition under contention; measured on the contended bench it is
//! several times slower.
//!
//! Barging can starve a waiter, so — like Go — a woken waiter that still cannot get the lock
//! after waiting more than [`STARVATION`] (1 ms) switches the mutex to *starvation mode*:
//! `unlock` then hands the lock directly to the oldest waiter (it never becomes free), and
//! newcomers neither barge nor spin but queue at the back. The mode ends when a waiter that
//! got the lock by hand-off waited less than 1 ms or was the last one. Waiters that were woken
//! and lost a race re-queue at the *front*. So the longest a waiter can be overtaken is about
//! 1 ms plus the critical sections already queued before it.
//!
//! # State (`state`, the butex word)
//!
//! `LOCKED` (bit 0): held. `PARKED` (bit 1): the queue may hold waiters; `unlock` must wake
//! one. `STARVING` (bit 2): hand-off mode; only set while `LOCKED`.
//!
//! # Memory ordering
//!
//! The guarantee is a mutex's: a critical section happens before the next one.
//!
//! - (M1) Acquisition CASes setting `LOCKED` are Acquire and pair with the Release CAS or
//!   `fetch_and` that clears `LOCKED` in `unlock`.
//! - (M2) A hand-off never clears `LOCKED`: the unlocker's claim and `DONE` store (waiter
//!   protocol W1/W2, Release) pair with the new owner's Acquire load of `DONE`.
//! - The `PARKED` / `STARVING` transitions need no ordering of their own: waiters re-validate
//!   the whole word under the queue lock before sleeping (butex B1/B2), so a stale view only
//!   causes a retry.

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use std::sync::{LockResult, TryLockError, TryLockResult};
use std::time::{Duration, Instant};

use purloin_sched::WaitKind;

use crate::butex::{Butex, Waited};
use crate::poison;
use crate::waiter::{Claimed, OnInterrupt};
use purloin_sched::spin::spin_hint;

use crate::diagnostics::{Holder, wait_info};
use crate::loom::Ordering;

const LOCKED: u32 = 1;
const PARKED: u32 = 2;
const STARVING: u32 = 4;

/// Wake tokens: the woken waiter competes again, or it owns the lock (hand-off).
const RETRY: u32 = 0;
const HANDOFF: u32 = 1;

/// How long a waiter may wait before the mutex switches to hand-off (Go's 1 ms).
pub(crate) const STARVATION: Duration = Duration::from_millis(1);

/// Spin rounds before parking, each `SPIN_PAUSES` pauses (Go: 4 × 30), only while nobody is
/// queued (then the holder is likely running and about to release).
const SPIN_ROUNDS: u32 = if cfg!(loom) { 0 } else { 4 };
const SPIN_PAUSES: u32 = 30;

/// A mutual-exclusion lock for green threads and OS threads, shaped like
/// [`std::sync::Mutex`].
///
/// A green thread that finds the lock taken spins briefly, then parks: its worker runs other
/// green threads meanwhile (a `std::sync::Mutex` would block the worker's OS thread and, if
/// the holder is a green thread of the same worker, deadlock it). Plain OS threads can share
/// the same mutex; they sleep on a futex.
///
/// # Fairness: barging, then hand-off
///
/// Go's `sync.Mutex` policy. Normally `unlock` frees the lock and wakes the oldest waiter,
/// which competes with newcomers (*barging*): the running green thread keeps its warm cache
/// and the lock changes hands without a context switch, which is what makes a contended lock
/// fast (a strict hand-off costs a switch per acquisition). A waiter that has waited more than
/// 1 ms and still loses switches the mutex to *starvation mode*: unlocks hand the lock
/// directly to the oldest waiter and newcomers queue behind; the mode ends when a waiter that
/// got the lock waited less than 1 ms or was the last. So no waiter is overtaken for much
/// longer than 1 ms.
///
/// # Poisoning
///
/// As in std: if a holder panics (or is unwound at scheduler shutdown) the mutex is poisoned,
/// and later [`lock`](Mutex::lock) / [`try_lock`](Mutex::try_lock) calls return an error that
/// still carries the guard ([`PoisonError::into_inner`](std::sync::PoisonError::into_inner)).
/// [`clear_poison`](Mutex::clear_poison) resets it.
///
/// # Deadlock reports
///
/// In debug builds (or with the `deadlock-detection` feature) the holder's green-thread id is
/// recorded, so the `purloin` runtime's `detect_deadlock` can report a wait-for cycle of green
/// threads locking mutexes in opposite orders.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use purloin_sync::Mutex;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let counter = Arc::new(Mutex::new(0u64));
/// let handles: Vec<_> = (0..8)
///     .map(|_| {
///         let c = counter.clone();
///         sched.spawn(move || {
///             for _ in 0..1000 {
///                 *c.lock().unwrap() += 1;
///             }
///         })
///     })
///     .collect();
/// for h in handles {
///     h.join().unwrap();
/// }
/// assert_eq!(*counter.lock().unwrap(), 8000);
/// ```
pub struct Mutex<T: ?Sized> {
    state: Butex,
    poison: poison::Flag,
    holder: Holder,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex owns `data`; sending it sends the `T`.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: `data` is only reached through a guard, and guards exist only while `state` is
// LOCKED by their holder (M1/M2), so shared access hands out `&mut T` to one thread at a time
// — which needs `T: Send`, as std's `Mutex`.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// Access to a locked [`Mutex`]'s data; unlocks when dropped.
///
/// Like std's guard it is not `Send`. (It may still be held across a park: the green thread
/// that holds it may resume on another OS thread, which is fine for this mutex.)
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized + 'a> {
    lock: &'a Mutex<T>,
    poison: poison::Guard,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared guard only gives `&T`, like `&T` itself.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    loom_const_fn! {
        /// An unlocked mutex holding `value`.
        pub fn new(value: T) -> Mutex<T> {
            Mutex {
                state: Butex::new(0),
                poison: poison::Flag::new(),
                holder: Holder::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// Consumes the mutex and returns its data (an error if poisoned, still carrying it).
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poison.get();
        let data = self.data.into_inner();
        if poisoned { Err(std::sync::PoisonError::new(data)) } else { Ok(data) }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, parking the calling green thread (or blocking the OS thread) until it
    /// is available.
    ///
    /// # Errors
    ///
    /// If the mutex is poisoned (a holder panicked); the error carries the guard.
    ///
    /// # Panics
    ///
    /// Does not detect re-entrance: locking a mutex the caller already holds deadlocks (as
    /// std's may).
    #[inline]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        self.raw_lock();
        // SAFETY: we just locked it.
        unsafe { self.guard() }
    }

    /// Locks the mutex if it is free right now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] if it is held (or in hand-off mode, where the oldest
    /// waiter has priority), [`TryLockError::Poisoned`] if poisoned (carrying the guard).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sync::Mutex;
    ///
    /// let m = Mutex::new(1);
    /// let g = m.try_lock().unwrap();
    /// assert!(m.try_lock().is_err());
    /// drop(g);
    /// assert_eq!(*m.try_lock().unwrap(), 1);
    /// ```
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        if self.raw_try_lock() {
            // SAFETY: we just locked it.
            unsafe { self.guard() }.map_err(TryLockError::from)
        } else {
            Err(TryLockError::WouldBlock)
        }
    }

    /// Whether a holder panicked while holding the lock.
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poisoned state.
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// The data, through a unique borrow (no locking needed).
    ///
    /// # Errors
    ///
    /// If poisoned; the error carries the reference.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        let poisoned = self.poison.get();
        let data = self.data.get_mut();
        if poisoned { Err(std::sync::PoisonError::new(data)) } else { Ok(data) }
    }

    /// # Safety
    ///
    /// - The calling thread holds the lock and has no guard for this acquisition yet.
    #[inline]
    unsafe fn guard(&self) -> LockResult<MutexGuard<'_, T>> {
        let guard = MutexGuard { lock: self, poison: self.poison.guard(), _not_send: PhantomData };
        poison::map_result(&self.poison, guard)
    }

    #[inline]
    fn word(&self) -> &crate::loom::AtomicU32 {
        self.state.value()
    }

    /// Acquires the lock (no guard).
    #[inline]
    pub(crate) fn raw_lock(&self) {
        // M1: Acquire pairs with the Release that cleared LOCKED.
        if self
            .word()
            .compare_exchange_weak(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
        self.holder.set_current();
    }

    fn raw_try_lock(&self) -> bool {
        let mut state = self.word().load(Ordering::Relaxed);
        loop {
            if state & (LOCKED | STARVING) != 0 {
                return false;
            }
            // M1: Acquire, as in `raw_lock`.
            match self.word().compare_exchange_weak(
                state,
                state | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.holder.set_current();
                    return true;
                }
                Err(s) => state = s,
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        let word = self.word();
        let mut spins = 0;
        let mut wait_start: Option<Instant> = None;
        let mut starving = false;
        let mut state = word.load(Ordering::Relaxed);
        loop {
            // Free and not in hand-off mode: take it (barging).
            if state & (LOCKED | STARVING) == 0 {
                // M1: Acquire pairs with the unlocker's Release.
                match word.compare_exchange_weak(
                    state,
                    state | LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(s) => {
                        state = s;
                        continue;
                    }
                }
            }
            // Held, nobody queued: the holder is probably running; spin a little.
            if state & (PARKED | STARVING) == 0 && spins < SPIN_ROUNDS {
                spins += 1;
                for _ in 0..SPIN_PAUSES {
                    spin_hint();
                }
                state = word.load(Ordering::Relaxed);
                continue;
            }
            // Announce a sleeper (and hand-off mode if we have waited too long and the lock is
            // held: STARVING is only ever set while LOCKED).
            let mut want = state | PARKED;
            if starving && state & LOCKED != 0 {
                want |= STARVING;
            }
            if want != state {
                if let Err(s) =
                    word.compare_exchange_weak(state, want, Ordering::Relaxed, Ordering::Relaxed)
                {
                    state = s;
                    continue;
                }
                state = want;
            }
            let requeued = wait_start.is_some();
            let start = *wait_start.get_or_insert_with(Instant::now);
            let expected = state;
            let info = wait_info(WaitKind::Mutex, self, self.holder.get());
            let waited = self.state.queue().wait(
                0,
                requeued,
                || word.load(Ordering::Relaxed) == expected,
                (None, OnInterrupt::Ignore),
                info,
                |claimed| {
                    if let Some(token) = claimed {
                        self.pass_on(token);
                    }
                },
            );
            match waited {
                Waited::Claimed(HANDOFF) => {
                    // We own the lock (LOCKED was never cleared). Leave hand-off mode if we did
                    // not wait long, or nobody else is queued.
                    let now = word.load(Ordering::Relaxed);
                    debug_assert!(now & LOCKED != 0 && now & STARVING != 0);
                    if start.elapsed() < STARVATION || now & PARKED == 0 {
                        word.fetch_and(!STARVING, Ordering::Relaxed);
                    }
                    return;
                }
                Waited::Claimed(_) => {
                    starving = starving || start.elapsed() >= STARVATION;
                    spins = 0;
                }
                Waited::Invalid => {}
                Waited::TimedOut | Waited::Interrupted => {
                    unreachable!("mutex waits have no deadline and are not interruptible")
                }
            }
            state = word.load(Ordering::Relaxed);
        }
    }

    /// Releases the lock (no guard).
    ///
    /// # Safety
    ///
    /// - The calling thread (or green thread) holds the lock, acquired by `raw_lock` /
    ///   `raw_try_lock`, and releases it once.
    #[inline]
    pub(crate) unsafe fn raw_unlock(&self) {
        self.holder.clear();
        // M1: Release pairs with the next acquisition.
        if self.word().compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_err() {
            self.unlock_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn unlock_slow(&self) {
        let word = self.word();
        let mut state = word.load(Ordering::Relaxed);
        loop {
            debug_assert!(state & LOCKED != 0, "unlocking an unlocked purloin_sync::Mutex");
            if state & STARVING != 0 {
                self.hand_off();
                return;
            }
            // M1: Release publishes the critical section. A CAS (not fetch_and) so that a
            // waiter's concurrent `| STARVING` is never lost with the lock free.
            match word.compare_exchange_weak(
                state,
                state & !LOCKED,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(s) => state = s,
            }
        }
        if state & PARKED != 0 {
            self.wake_one(RETRY);
        }
    }

    /// Wakes the oldest waiter to compete for the lock; clears PARKED when the queue empties.
    fn wake_one(&self, token: u32) {
        let mut claimed = Claimed::new();
        {
            let mut q = self.state.queue().lock();
            q.claim_one(token, &mut claimed);
            if q.len() == 0 {
                // Under the queue lock: a thread that set PARKED and has not linked yet fails
                // its validation and retries.
                self.word().fetch_and(!PARKED, Ordering::Relaxed);
            }
        }
        // SAFETY: claimed above; the queue lock is released.
        unsafe { claimed.finish_all() };
    }

    /// Starvation mode: gives the (still LOCKED) lock to the oldest waiter, or unlocks and
    /// leaves the mode if nobody waits any more.
    fn hand_off(&self) {
        let mut claimed = Claimed::new();
        {
            let mut q = self.state.queue().lock();
            if q.claim_one(HANDOFF, &mut claimed).is_some() {
                if q.len() == 0 {
                    self.word().fetch_and(!PARKED, Ordering::Relaxed);
                }
            } else {
                // Every queued waiter gave up (they only do so when unwound). M1: Release.
                self.word().fetch_and(!(LOCKED | STARVING | PARKED), Ordering::Release);
            }
        }
        // SAFETY: claimed above; the queue lock is released. M2: the finish publishes our
        // critical section to the new owner.
        unsafe { claimed.finish_all() };
    }

    /// A waiter woken with `token` is being unwound (scheduler shutdown): pass the wake on.
    fn pass_on(&self, token: u32) {
        if token == HANDOFF {
            // We were given the lock; release it (hands it to the next waiter).
            // SAFETY: a hand-off made us the holder.
            unsafe { self.raw_unlock() };
        } else if self.word().load(Ordering::Relaxed) & PARKED != 0 {
            self.wake_one(RETRY);
        }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.poison.done(&self.poison);
        // SAFETY: a guard exists only while its acquisition holds the lock, and is dropped
        // once.
        unsafe { self.lock.raw_unlock() };
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// The mutex this guard locks (for the condition variable).
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.lock
    }
}

impl<T: ?Sized> Mutex<T> {
    /// The poison flag (for the condition variable).
    pub(crate) fn poison_flag(&self) -> &poison::Flag {
        &self.poison
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard's existence means the lock is held by it (M1/M2).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only path to the data.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(guard) => d.field("data", &&*guard),
            Err(TryLockError::Poisoned(err)) => d.field("data", &&**err.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get());
        d.finish_non_exhaustive()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}

impl<T: ?Sized> std::panic::UnwindSafe for Mutex<T> {}
impl<T: ?Sized> std::panic::RefUnwindSafe for Mutex<T> {}
