//! What the lock-free channel flavors (bounded `array`, unbounded `list`) share: the waiter
//! lists with a lock-free "anyone waiting?" flag, the blocking step of a send or receive.
//! Their padding and backoff are the scheduler's (`purloin_sched::spin`: `Padded`,
//! `Spin::backoff`).
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

use std::time::Instant;

use purloin_sched::WaitInfo;

use crate::loom::{AtomicBool, Ordering, fence};
use crate::raw_lock::Locked;
use crate::waiter::{Claimed, Gave, List, Node, OnInterrupt, Waiter};

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
    /// The green thread was interrupted (nobody had claimed it): give up.
    Interrupted,
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
    let claimed = if ready() {
        waiter.abort().ok_or(None)
    } else {
        waiter.wait(deadline, info, OnInterrupt::Report).map_err(Some)
    };
    match claimed {
        Ok(_) => {
            // The notifier unlinked the node.
            core::mem::forget(guard);
            Blocked::Retry
        }
        Err(gave) => {
            drop(guard);
            match gave {
                None => Blocked::Retry,
                Some(Gave::TimedOut) => Blocked::TimedOut,
                Some(Gave::Interrupted) => Blocked::Interrupted,
            }
        }
    }
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
