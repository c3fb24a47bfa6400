//! macOS, iOS, watchOS and FreeBSD: `atomic-wait` for untimed waits and for wakes (libc++'s
//! `__libcpp_atomic_wait` on Apple platforms, `_umtx_op` on FreeBSD), the fallback table for
//! timed waits (atomic-wait has no timeouts: on Apple platforms the only timed word wait is the
//! private `__ulock_wait` or, since macOS 14.4, `os_sync_wait_on_address_with_timeout`, which
//! is not used yet).
//!
//! A wake must reach both kinds of waiter. Waking the table costs a bucket lock, so it is only
//! done when a timed waiter exists, which needs a store-buffering handshake:
//!
//! # Memory ordering
//!
//! Guarantee: a `wake` that follows a change of the word cannot miss a timed waiter that read
//! the old value.
//!
//! - (F1) The timed waiter increments `TIMED_WAITERS`, then `fence(SeqCst)`, then (in the table,
//!   under the bucket lock) reads the word.
//! - (F2) The waker's caller changed the word; `wake` runs `fence(SeqCst)`, then reads
//!   `TIMED_WAITERS`.
//!
//! F1 and F2 are SeqCst fences around a store-buffering pattern, so at least one side sees the
//! other: the waker sees the count and wakes the table (the waiter is enqueued, or about to be
//! under the same lock, then sees the new value), or the waiter sees the new value and does not
//! sleep.
//!
//! Not run on this project's CI (Linux only); Linux test builds type-check this file.

use std::time::Instant;

use super::{WaitResult, table};
use crate::stats::{self, Event};
use crate::sync::{AtomicU32, AtomicUsize, Ordering, fence};

pub(super) const WAKE_COUNT_IS_EXACT: bool = false;

/// Threads currently inside a timed (table) wait, process-wide.
static TIMED_WAITERS: AtomicUsize = AtomicUsize::new(0);

pub(super) fn wait(atomic: &AtomicU32, expected: u32, deadline: Option<Instant>) -> WaitResult {
    match deadline {
        None => {
            stats::record(Event::FutexWait);
            atomic_wait::wait(atomic, expected);
            WaitResult::Woken
        }
        Some(deadline) => {
            TIMED_WAITERS.fetch_add(1, Ordering::Relaxed);
            // F1: orders the increment before the table's read of the word; pairs with F2.
            fence(Ordering::SeqCst);
            let result = table::wait(atomic, expected, Some(deadline));
            TIMED_WAITERS.fetch_sub(1, Ordering::Relaxed);
            result
        }
    }
}

pub(super) fn wake(atomic: *const AtomicU32, n: u32) -> usize {
    let woken = wake_via_atomic_wait(atomic, n);
    // F2: orders the caller's change of the word before the read of the count; pairs with F1.
    fence(Ordering::SeqCst);
    if TIMED_WAITERS.load(Ordering::Relaxed) > 0 {
        table::wake(atomic, n);
    }
    woken
}

/// Up to 16 single wakes, else one wake-all (extra wakes are spurious wake-ups, which waiters
/// tolerate); returns `n`, an upper bound, since atomic-wait reports no count.
fn wake_via_atomic_wait(atomic: *const AtomicU32, n: u32) -> usize {
    if n <= 16 {
        for _ in 0..n {
            atomic_wait::wake_one(atomic);
        }
        n as usize
    } else {
        atomic_wait::wake_all(atomic);
        if n == u32::MAX { usize::MAX } else { n as usize }
    }
}
