//! The hook through which an I/O poller (the runtime's netpoller) plugs into the scheduler
//! (Go's find-work order: local, global, **network poller**, steal).
//!
//! A poller reports green threads whose I/O became ready. Workers call it non-blocking in
//! every search; when a worker would otherwise park, at most one worker blocks in the poller
//! (with a deadline = its next timer) while the others park on their lots.
//!
//! # Memory ordering
//!
//! A waker that picks the worker blocked in the poller must wake the poller, not only its lot.
//! The worker publishes "I block in the poller" (`blocked = p`), then F3, then checks that its
//! lot did not move since its snapshot; the waker signals the lot (moving it), then F4, then
//! reads `blocked`. F3 and F4 are SeqCst fences, so either the worker sees the lot move and
//! does not block, or the waker sees `blocked == p` and wakes the poller.
//!
//! `last_poll` (Relaxed, a hint) only decides when the monitor polls for busy workers (Go's
//! sysmon): workers poll only when their queues are empty, so green threads that never leave
//! the queues (yield loops) would otherwise starve I/O waiters. A stale read costs at most one
//! extra or one late poll; the readied green threads go through the queues as usual.

use std::time::Instant;

use crate::GreenThread;
use std::sync::Arc;

use crate::shared::Shared;
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering, fence, lock};
use crate::worker::{M, NO_P};

/// An I/O readiness source the scheduler polls.
///
/// # Examples
///
/// ```
/// use std::time::Instant;
/// use purloin_sched::{GreenThread, Poller, Scheduler};
///
/// /// A poller with nothing to wait on.
/// struct Idle;
///
/// impl Poller for Idle {
///     fn poll(&self, _deadline: Option<Instant>, _ready: &mut Vec<GreenThread>) {}
///     fn wake(&self) {}
///     fn has_waiters(&self) -> bool {
///         false
///     }
/// }
///
/// let sched = Scheduler::new().unwrap();
/// sched.set_poller(std::sync::Arc::new(Idle));
/// assert_eq!(sched.spawn(|| 1).join().unwrap(), 1);
/// ```
pub trait Poller: Send + Sync {
    /// Appends the green threads whose I/O is ready to `ready`, waiting at most until
    /// `deadline`: a deadline at or before now means "do not wait", `None` means "wait until
    /// readiness or [`Poller::wake`]".
    fn poll(&self, deadline: Option<Instant>, ready: &mut Vec<GreenThread>);
    /// Makes a concurrent (or the next) blocking `poll` return promptly.
    fn wake(&self);
    /// Whether some green thread waits for I/O through this poller (a scheduler with parked
    /// green threads and I/O waiters is not deadlocked: readiness may wake them).
    fn has_waiters(&self) -> bool;
}

/// The installed poller (if any) and which P's worker blocks in it.
pub(crate) struct PollerSlot {
    poller: Mutex<Option<Arc<dyn Poller>>>,
    /// P index of the worker blocked in `poll`, or `NO_P`.
    blocked: AtomicUsize,
    /// When a worker last polled (nanoseconds since the scheduler's epoch; a hint).
    last_poll: AtomicU64,
}

impl Default for PollerSlot {
    fn default() -> Self {
        PollerSlot {
            poller: Mutex::new(None),
            blocked: AtomicUsize::new(NO_P),
            last_poll: AtomicU64::new(0),
        }
    }
}

impl PollerSlot {
    pub(crate) fn install(&self, p: Arc<dyn Poller>) {
        *lock(&self.poller) = Some(p);
    }

    pub(crate) fn has_waiters(&self) -> bool {
        self.get().is_some_and(|p| p.has_waiters())
    }

    fn get(&self) -> Option<Arc<dyn Poller>> {
        lock(&self.poller).clone()
    }

    /// Wakes whichever worker blocks in the poller (shutdown).
    pub(crate) fn wake_blocked(&self) {
        fence(Ordering::SeqCst);
        if self.blocked.load(Ordering::Relaxed) != NO_P
            && let Some(poller) = self.get()
        {
            poller.wake();
        }
    }

    /// After signalling P `p`'s lot: if its worker blocks in the poller, wake the poller.
    pub(crate) fn wake_if_blocked(&self, p: usize) {
        // F4: orders the caller's lot signal before reading `blocked` (pairs with F3).
        fence(Ordering::SeqCst);
        if self.blocked.load(Ordering::Relaxed) == p
            && let Some(poller) = self.get()
        {
            poller.wake();
        }
    }
}

/// Non-blocking poll from the search loop. Returns how many green threads were readied.
///
/// They go to this worker's local queue, and it runs the first itself: the batch wakes
/// another worker only if there is more than one (see `M::poll_batch`).
pub(crate) fn poll_nonblocking(m: &M) -> usize {
    m.poll_batch.set(m.held().is_some());
    let n = poll_now(&m.shared);
    let batch = m.poll_batch.replace(false);
    if batch && n > 1 {
        m.shared.notify_work_from(m.p());
    }
    n
}

/// Non-blocking poll from any thread (a worker, or the monitor): readied green threads are
/// unparked (into the caller's queues on a worker, the global queue elsewhere).
pub(crate) fn poll_now(shared: &Shared) -> usize {
    let Some(poller) = shared.poller.get() else { return 0 };
    let now = Instant::now();
    shared.poller.last_poll.store(shared.nanos_since_epoch(now), Ordering::Relaxed);
    let mut ready = Vec::new();
    poller.poll(Some(now), &mut ready);
    let n = ready.len();
    for g in ready {
        g.unpark();
    }
    if n > 0 {
        crate::hook::emit(move || crate::hook::Event::PollerWake { readied: n });
    }
    n
}

/// The monitor's check (Go's sysmon): if green threads wait for I/O, nobody blocks in the
/// poller and no worker polled for `max_gap`, poll now. Returns how many were readied.
#[cfg(not(loom))]
pub(crate) fn poll_if_stale(shared: &Shared, now: Instant, max_gap: std::time::Duration) -> usize {
    let slot = &shared.poller;
    let last = slot.last_poll.load(Ordering::Relaxed);
    let gap = shared.nanos_since_epoch(now).saturating_sub(last);
    if gap < max_gap.as_nanos() as u64
        || slot.blocked.load(Ordering::Relaxed) != NO_P
        || !slot.has_waiters()
    {
        return 0;
    }
    poll_now(shared)
}

/// Called by a worker about to park: if a poller is installed and no other worker blocks in
/// it, block in it (until `deadline`, a wake, or readiness) instead of on the lot. Returns
/// how many green threads it readied (into this worker's queue, without waking anyone: the
/// caller notifies for a batch of more than one once it counts as running again), or `None`
/// if the caller should park on its lot as usual.
pub(crate) fn poll_blocking(
    m: &M,
    deadline: Option<Instant>,
    snapshot: &purloin_parking::State,
) -> Option<usize> {
    let slot = &m.shared.poller;
    let poller = slot.get()?;
    let me = m.p.get();
    if slot.blocked.compare_exchange(NO_P, me, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        return None;
    }
    // F3: publish `blocked` before re-reading the lot (pairs with F4).
    fence(Ordering::SeqCst);
    let lot = m.shared.lots.lot(me);
    let moved = lot.state() != *snapshot;
    let mut ready = Vec::new();
    poller.poll(if moved { Some(Instant::now()) } else { deadline }, &mut ready);
    slot.last_poll.store(m.shared.nanos_since_epoch(Instant::now()), Ordering::Relaxed);
    slot.blocked.store(NO_P, Ordering::Relaxed);
    let n = ready.len();
    m.poll_batch.set(m.held().is_some());
    for g in ready {
        g.unpark();
    }
    m.poll_batch.set(false);
    if n > 0 {
        crate::hook::emit(move || crate::hook::Event::PollerWake { readied: n });
    }
    Some(n)
}
