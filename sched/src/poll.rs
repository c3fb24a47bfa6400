//! The hook through which an I/O poller (the runtime's netpoller) plugs into the scheduler
//! (seed 000's find-work order: local, global, **network poller**, steal).
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

use std::time::Instant;

use crate::GreenThread;
use std::sync::Arc;

use crate::sync::{AtomicUsize, Mutex, Ordering, fence, lock};
use crate::worker::{M, NO_P};

/// An I/O readiness source the scheduler polls.
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
}

impl Default for PollerSlot {
    fn default() -> Self {
        PollerSlot { poller: Mutex::new(None), blocked: AtomicUsize::new(NO_P) }
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
pub(crate) fn poll_nonblocking(m: &M) -> usize {
    let Some(poller) = m.shared.poller.get() else { return 0 };
    let mut ready = Vec::new();
    poller.poll(Some(Instant::now()), &mut ready);
    let n = ready.len();
    for g in ready {
        g.unpark();
    }
    n
}

/// Called by a worker about to park: if a poller is installed and no other worker blocks in
/// it, block in it (until `deadline`, a wake, or readiness) instead of on the lot. Returns
/// false if the caller should park on its lot as usual.
pub(crate) fn poll_blocking(
    m: &M,
    deadline: Option<Instant>,
    snapshot: &purloin_parking::State,
) -> bool {
    let slot = &m.shared.poller;
    let Some(poller) = slot.get() else { return false };
    let me = m.p.get();
    if slot.blocked.compare_exchange(NO_P, me, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        return false;
    }
    // F3: publish `blocked` before re-reading the lot (pairs with F4).
    fence(Ordering::SeqCst);
    let lot = m.shared.lots.lot(me);
    let moved = lot.state() != *snapshot;
    let mut ready = Vec::new();
    poller.poll(if moved { Some(Instant::now()) } else { deadline }, &mut ready);
    slot.blocked.store(NO_P, Ordering::Relaxed);
    for g in ready {
        g.unpark();
    }
    true
}
