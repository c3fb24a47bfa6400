//! [`Semaphore`]: a counting semaphore with a FIFO queue of requests (tokio's
//! `batch_semaphore` policy): a release hands permits to the oldest waiters in order, so a
//! request for many permits is not starved by a stream of small ones.
//!
//! # State (`state`)
//!
//! `permits << 1 | WAITERS`. `WAITERS` is set (under the queue lock) while requests may be
//! queued; without it, acquire and release are one CAS each. With it, newcomers queue behind
//! (FIFO) and releases go through the queue lock, which hands permits out.
//!
//! # Memory ordering
//!
//! The guarantee: a release happens before the acquire that gets (some of) its permits.
//!
//! - (S1) Fast-path acquire CASes are Acquire and pair with Release CASes / `fetch_add`s of
//!   releases.
//! - (S2) Hand-offs go through the claim (waiter protocol W1/W2: the releaser's `DONE` store is
//!   Release, the woken acquirer's load Acquire).
//! - `WAITERS` changes happen under the queue lock; the queue lock and the CAS on the same
//!   word order them against fast paths (a fast path that raced a change fails its CAS).

use core::fmt;
use std::time::{Duration, Instant};

use purloin_sched::WaitKind;

use crate::butex::{WaitQueue, Waited};
use crate::diagnostics::wait_info;
use crate::loom::{AtomicUsize, Ordering};
use crate::waiter::{Claimed, OnInterrupt};

const WAITERS: usize = 1;
/// Token of a hand-off: the waiter's request was granted.
const GRANTED: u32 = 1;

/// A counting semaphore for green threads and OS threads.
///
/// [`acquire`](Semaphore::acquire) takes a permit (parking the green thread until one is
/// available) and returns a [`SemaphorePermit`] that gives it back when dropped. Requests are
/// served in FIFO order: when permits are released they go to the oldest waiting request first,
/// and a newcomer does not overtake queued requests.
///
/// # Examples
///
/// At most two green threads in the critical section at once:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_sync::Semaphore;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let sem = Arc::new(Semaphore::new(2));
/// let inside = Arc::new(AtomicUsize::new(0));
/// let hs: Vec<_> = (0..8)
///     .map(|_| {
///         let (sem, inside) = (sem.clone(), inside.clone());
///         sched.spawn(move || {
///             let _permit = sem.acquire();
///             assert!(inside.fetch_add(1, Ordering::SeqCst) < 2);
///             purloin_sched::yield_now();
///             inside.fetch_sub(1, Ordering::SeqCst);
///         })
///     })
///     .collect();
/// for h in hs {
///     h.join().unwrap();
/// }
/// assert_eq!(sem.available_permits(), 2);
/// ```
pub struct Semaphore {
    state: AtomicUsize,
    queue: WaitQueue,
}

/// Permits taken from a [`Semaphore`]; released when dropped (or kept with
/// [`forget`](SemaphorePermit::forget)).
#[must_use = "the permits are released when the SemaphorePermit is dropped"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    permits: usize,
}

impl Semaphore {
    /// The largest number of permits a semaphore can hold.
    pub const MAX_PERMITS: usize = usize::MAX >> 2;

    /// A semaphore with `permits` permits.
    ///
    /// # Panics
    ///
    /// If `permits` exceeds [`Semaphore::MAX_PERMITS`].
    pub fn new(permits: usize) -> Semaphore {
        assert!(
            permits <= Self::MAX_PERMITS,
            "purloin_sync::Semaphore::new: {permits} permits exceed MAX_PERMITS ({})",
            Self::MAX_PERMITS
        );
        Semaphore { state: AtomicUsize::new(permits << 1), queue: WaitQueue::new() }
    }

    /// Permits available right now (a snapshot).
    pub fn available_permits(&self) -> usize {
        self.state.load(Ordering::Relaxed) >> 1
    }

    /// Takes one permit, parking until one is available. Like a lock, it is not
    /// interruptible; [`acquire_timeout`](Semaphore::acquire_timeout) and
    /// [`acquire_deadline`](Semaphore::acquire_deadline) are.
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        self.acquire_many(1)
    }

    /// Takes `n` permits at once, parking until they are available (FIFO with other requests).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`Semaphore::MAX_PERMITS`] (such a request could never be granted).
    pub fn acquire_many(&self, n: usize) -> SemaphorePermit<'_> {
        match self.acquire_inner(n, None, OnInterrupt::Ignore) {
            Some(p) => p,
            None => unreachable!("an acquire without a deadline only returns with permits"),
        }
    }

    /// Takes one permit if one is available right now (and no request is queued).
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        self.try_acquire_many(1)
    }

    /// Takes `n` permits if available right now (and no request is queued).
    pub fn try_acquire_many(&self, n: usize) -> Option<SemaphorePermit<'_>> {
        // Not `then_some`: it would build (and drop, releasing `n` permits) a permit on failure.
        self.try_fast(n).then(|| SemaphorePermit { sem: self, permits: n })
    }

    /// Takes one permit, parking at most `timeout`; `None` if it timed out or the calling
    /// green thread was interrupted (the interrupt stays pending: see
    /// [`interrupted`](purloin_sched::interrupted)).
    pub fn acquire_timeout(&self, timeout: Duration) -> Option<SemaphorePermit<'_>> {
        self.acquire_deadline(1, Instant::now().checked_add(timeout))
    }

    /// Takes `n` permits, parking until `deadline` at most (`None`: no deadline); `None` if
    /// the deadline passed first or the calling green thread was interrupted (the request
    /// leaves the queue, taking nothing; the interrupt stays pending).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`Semaphore::MAX_PERMITS`].
    pub fn acquire_deadline(
        &self,
        n: usize,
        deadline: Option<Instant>,
    ) -> Option<SemaphorePermit<'_>> {
        self.acquire_inner(n, deadline, OnInterrupt::Leave)
    }

    fn acquire_inner(
        &self,
        n: usize,
        deadline: Option<Instant>,
        on: OnInterrupt,
    ) -> Option<SemaphorePermit<'_>> {
        assert!(
            n <= Self::MAX_PERMITS,
            "purloin_sync::Semaphore: a request for {n} permits can never be granted (more \
             than MAX_PERMITS)"
        );
        if self.try_fast(n) {
            return Some(SemaphorePermit { sem: self, permits: n });
        }
        let mut took = false;
        loop {
            let validate = || loop {
                let s = self.state.load(Ordering::Relaxed);
                if s & WAITERS == 0 && s >> 1 >= n {
                    // S1: Acquire pairs with the release that added the permits.
                    if self
                        .state
                        .compare_exchange(s, s - (n << 1), Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                    {
                        took = true;
                        return false;
                    }
                } else if s & WAITERS != 0
                    || self
                        .state
                        .compare_exchange(s, s | WAITERS, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    return true;
                }
            };
            let info = wait_info(WaitKind::Group, self, None);
            let waited = self.queue.wait(n, false, validate, (deadline, on), info, |claimed| {
                // Unwound while queued: give back what was granted, and let the next
                // requests through if this one was blocking them.
                match claimed {
                    Some(_) => self.release(n),
                    None => self.release(0),
                }
            });
            match waited {
                // S2: the releaser subtracted our permits for us.
                Waited::Claimed(_) => return Some(SemaphorePermit { sem: self, permits: n }),
                Waited::Invalid if took => return Some(SemaphorePermit { sem: self, permits: n }),
                Waited::Invalid => {}
                Waited::TimedOut | Waited::Interrupted => {
                    // We may have been the head blocking smaller requests.
                    self.release(0);
                    return None;
                }
            }
        }
    }

    /// The uncontended path: one CAS if no request is queued and enough permits are there.
    fn try_fast(&self, n: usize) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & WAITERS != 0 || s >> 1 < n {
                return false;
            }
            // S1: Acquire.
            match self.state.compare_exchange_weak(
                s,
                s - (n << 1),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(x) => s = x,
            }
        }
    }

    /// Adds `n` permits (wakes queued requests that they satisfy, oldest first).
    ///
    /// # Panics
    ///
    /// If the total would exceed [`Semaphore::MAX_PERMITS`].
    pub fn add_permits(&self, n: usize) {
        self.release(n);
    }

    fn release(&self, n: usize) {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if (s >> 1).checked_add(n).is_none_or(|t| t > Self::MAX_PERMITS) {
                panic!(
                    "purloin_sync::Semaphore: adding {n} permits exceeds MAX_PERMITS ({}); \
                     more permits were released than taken?",
                    Self::MAX_PERMITS
                );
            }
            if s & WAITERS != 0 {
                break;
            }
            // S1: Release pairs with the acquirer's Acquire.
            match self.state.compare_exchange_weak(
                s,
                s + (n << 1),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(x) => s = x,
            }
        }
        self.release_slow(n);
    }

    /// Requests are queued: add the permits and hand them out under the queue lock.
    #[cold]
    fn release_slow(&self, n: usize) {
        let mut claimed = Claimed::new();
        {
            let mut q = self.queue.lock();
            // S1: Release (also for acquirers that later take them on the fast path).
            let mut avail = (self.state.fetch_add(n << 1, Ordering::Release) >> 1) + n;
            // While WAITERS is set nobody else takes permits outside this lock, so checking
            // and subtracting here is race-free.
            while let Some(need) =
                q.claim_front_if(&mut claimed, |need| (need <= avail).then_some(GRANTED))
            {
                self.state.fetch_sub(need << 1, Ordering::Relaxed);
                avail -= need;
            }
            if !q.has_waiting() {
                self.state.fetch_and(!WAITERS, Ordering::Relaxed);
            }
        }
        // SAFETY: claimed above; the queue lock is released. S2: publishes to the waiters.
        unsafe { claimed.finish_all() };
    }
}

impl SemaphorePermit<'_> {
    /// How many permits this holds.
    pub fn num_permits(&self) -> usize {
        self.permits
    }

    /// Keeps the permits taken (they are not released on drop); returns how many.
    pub fn forget(self) -> usize {
        let n = self.permits;
        core::mem::forget(self);
        n
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.release(self.permits);
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").field("permits", &self.permits).finish()
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.load(Ordering::Relaxed);
        f.debug_struct("Semaphore")
            .field("available_permits", &(s >> 1))
            .field("queued", &(s & WAITERS != 0))
            .finish()
    }
}
