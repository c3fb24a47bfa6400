//! What the lock-free channel flavors (bounded `array`, unbounded `list`) share: the waiter
//! lists with a lock-free "anyone waiting?" flag, the blocking step of a send or receive, a
//! spin/yield backoff, and cache-line padding.
//!
//! # Memory ordering
//!
//! The guarantee: a waiter that registered and then found the channel not ready is woken by
//! any operation that makes it ready afterwards (no lost wake-up), while an operation with
//! nobody registered pays one fence and one relaxed load.
//!
//! - (N1) `register` links the node and clears `is_empty` (under the list lock), then runs a
//!   `fence(SeqCst)` before the caller re-checks the channel; `notify` runs a `fence(SeqCst)`
//!   after the caller's publishing write (a slot's stamp or state) and before reading
//!   `is_empty`. Either the registering side's fence is first (the notifier sees
//!   `is_empty == false` and takes the lock, which finds the node) or the notifier's is (the
//!   re-check sees the publishing write and does not sleep).
//! - Claims and finishes follow the waiter protocol (W1/W2 in `sync::waiter`); the list lock's
//!   L1 orders links and `is_empty` updates made under it.

use core::cell::Cell;
use core::ops::Deref;
use std::time::Instant;

use purloin_sched::WaitInfo;

use crate::loom::{AtomicBool, Ordering, fence};
use crate::sync::raw_lock::Locked;
use crate::sync::spin_hint;
use crate::sync::waiter::{Claimed, List, Node, Waiter};

/// Pads and aligns a value to 128 bytes (two cache lines: x86_64's adjacent-line prefetcher
/// pairs lines), so the head and tail indices of a channel do not share one.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Exponential spin, then yield (a green thread yields to its worker's other green threads).
pub(crate) struct Backoff {
    step: Cell<u32>,
}

/// Spin rounds grow to 2^SPIN_LIMIT pauses (one yield per round under loom, where a pause is a
/// yield to the model).
const SPIN_LIMIT: u32 = if cfg!(loom) { 0 } else { 6 };
const YIELD_LIMIT: u32 = if cfg!(loom) { 1 } else { 10 };

impl Backoff {
    #[inline]
    pub(crate) fn new() -> Backoff {
        Backoff { step: Cell::new(0) }
    }

    /// Backs off in a lock-free retry loop (another thread changed the word we CAS).
    #[inline]
    pub(crate) fn spin(&self) {
        let step = self.step.get().min(SPIN_LIMIT);
        for _ in 0..1u32 << step {
            spin_hint();
        }
        if self.step.get() <= SPIN_LIMIT {
            self.step.set(self.step.get() + 1);
        }
    }

    /// Backs off while waiting for another thread to finish a step (a slot being written).
    pub(crate) fn snooze(&self) {
        if self.step.get() <= SPIN_LIMIT {
            for _ in 0..1u32 << self.step.get() {
                spin_hint();
            }
        } else {
            yield_now();
        }
        if self.step.get() <= YIELD_LIMIT {
            self.step.set(self.step.get() + 1);
        }
    }
}

/// Yields the green thread (to its worker's other green threads) or the OS thread.
pub(crate) fn yield_now() {
    // `purloin_sched::yield_now` yields the OS thread outside a green thread (loom's under
    // loom).
    purloin_sched::yield_now();
}

/// Threads waiting for a channel to become ready in one direction (receivers waiting for a
/// message, or senders waiting for room).
pub(crate) struct Waiters {
    list: Locked<List>,
    /// True when no node is linked (N1).
    is_empty: AtomicBool,
}

impl Waiters {
    pub(crate) fn new() -> Waiters {
        Waiters { list: Locked::new(List::new()), is_empty: AtomicBool::new(true) }
    }

    /// Links `node` and runs N1's fence: the caller re-checks the channel afterwards.
    ///
    /// # Safety
    ///
    /// - `node` is not linked, stays at its address until unlinked, and is unlinked (by
    ///   [`Waiters::unregister`] or a claim) before it is dropped.
    pub(crate) unsafe fn register(&self, node: &Node) {
        {
            let mut list = self.list.lock();
            // SAFETY: the caller's obligation; we hold the lock.
            unsafe { list.push_back(node) };
            self.is_empty.store(false, Ordering::Relaxed);
        }
        // N1: orders `is_empty = false` before the caller's re-check; pairs with `notify`.
        fence(Ordering::SeqCst);
    }

    /// Unlinks `node` if it is still linked here.
    pub(crate) fn unregister(&self, node: &Node) {
        let mut list = self.list.lock();
        // SAFETY: nodes registered here are only ever linked here; we hold the lock.
        if unsafe { list.remove(node) } {
            self.is_empty.store(list.len() == 0, Ordering::Relaxed);
        }
    }

    /// Wakes one registered waiter (with its node's token), if any. Call after publishing
    /// the change that makes the channel ready (N1).
    #[inline]
    pub(crate) fn notify(&self) {
        // N1: pairs with the fence in `register`.
        fence(Ordering::SeqCst);
        if !self.is_empty.load(Ordering::Relaxed) {
            self.notify_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn notify_slow(&self) {
        let mut claimed = Claimed::new();
        {
            let mut list = self.list.lock();
            // SAFETY: we hold the lock; `claimed` is finished after the lock is released
            // (it is declared first, so it is dropped after the guard even on a panic).
            unsafe { list.claim_one(core::ptr::null(), |n| n.token, &mut claimed) };
            self.is_empty.store(list.len() == 0, Ordering::Relaxed);
        }
        // SAFETY: claimed above, lock released.
        unsafe { claimed.finish_all() };
    }

    /// Wakes every registered waiter (the channel was disconnected).
    pub(crate) fn notify_all(&self) {
        let mut claimed = Claimed::new();
        {
            let mut list = self.list.lock();
            // SAFETY: as in `notify_slow`.
            while unsafe { list.claim_one(core::ptr::null(), |n| n.token, &mut claimed) }.is_some()
            {
            }
            self.is_empty.store(list.len() == 0, Ordering::Relaxed);
        }
        // SAFETY: claimed above, lock released.
        unsafe { claimed.finish_all() };
    }
}

/// How one blocking round of a send or receive ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// Woken by an operation (or found ready on re-check): try again.
    Retry,
    /// The deadline passed: try once more, then give up.
    TimedOut,
}

/// One blocking round: registers in `waiters`, re-checks `ready` (N1), and parks until a
/// notification, `deadline`, or readiness. The node is unlinked when this returns or unwinds;
/// a notification consumed while unwinding is passed on to the next waiter.
pub(crate) fn block(
    waiters: &Waiters,
    ready: impl FnOnce() -> bool,
    deadline: Option<Instant>,
    info: Option<WaitInfo>,
) -> Blocked {
    let waiter = Waiter::new();
    let node = Node::new(&waiter, 0, 0);
    // SAFETY: `node` stays in this frame; `guard` unlinks it on every path (also unwinding).
    unsafe { waiters.register(&node) };
    let guard = Registered { waiters, node: &node, waiter: &waiter };
    let (claimed, timed_out) = if ready() {
        (waiter.abort(), false)
    } else {
        let claimed = waiter.wait(deadline, info);
        // Without a claim, `wait` only returns once the deadline passed.
        (claimed, claimed.is_none())
    };
    if claimed.is_some() {
        // The notifier unlinked the node.
        core::mem::forget(guard);
    } else {
        drop(guard);
    }
    if timed_out { Blocked::TimedOut } else { Blocked::Retry }
}

/// Unlinks a registered node when dropped; if the wait is unwinding and a notification had
/// claimed it, passes the notification on.
struct Registered<'a> {
    waiters: &'a Waiters,
    node: &'a Node,
    waiter: &'a Waiter,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        // On the normal path the waiter already gave up (aborted, so this is a no-op); while
        // unwinding this aborts now, or learns it was claimed.
        let claimed = self.waiter.abort();
        self.waiters.unregister(self.node);
        if claimed.is_some() {
            self.waiters.notify();
        }
    }
}
