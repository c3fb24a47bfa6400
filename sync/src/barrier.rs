//! [`Barrier`]: `n` threads meet; the last to arrive releases the others. One butex holds the
//! generation (the word waiters sleep on), a counter the arrivals.
//!
//! # Memory ordering
//!
//! The guarantee: everything each participant did before `wait` happens before every
//! participant's return from that `wait`.
//!
//! - (BA1) Arrivals `fetch_add` the counter with AcqRel: the last arrival's Acquire sees every
//!   earlier arrival's writes (their Release, in the counter's modification order).
//! - (BA2) The leader bumps the generation with Release; the others' Acquire load of the new
//!   generation pairs with it, and through BA1 sees everyone's writes.

use core::fmt;

use purloin_sched::WaitKind;

use crate::butex::Butex;
use crate::diagnostics::wait_info;
use crate::loom::{AtomicUsize, Ordering};
use crate::waiter::OnInterrupt;

/// A rendezvous point for a fixed number of threads, like [`std::sync::Barrier`]: each
/// [`wait`](Barrier::wait) blocks (parks the green thread) until `n` threads have called it,
/// then all continue and the barrier is ready for the next round.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use purloin_sync::Barrier;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let barrier = Arc::new(Barrier::new(4));
/// let hs: Vec<_> = (0..4)
///     .map(|_| {
///         let b = barrier.clone();
///         sched.spawn(move || b.wait().is_leader())
///     })
///     .collect();
/// let leaders = hs.into_iter().map(|h| h.join().unwrap()).filter(|leader| *leader).count();
/// assert_eq!(leaders, 1);
/// ```
pub struct Barrier {
    generation: Butex,
    arrived: AtomicUsize,
    n: usize,
}

/// What [`Barrier::wait`] returns: whether this thread was the round's leader (exactly one
/// per round, the last to arrive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// Whether this thread was the leader of its round.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl Barrier {
    /// A barrier for `n` threads. With `n` of 0 or 1, `wait` returns at once (as leader).
    pub fn new(n: usize) -> Barrier {
        Barrier { generation: Butex::new(0), arrived: AtomicUsize::new(0), n }
    }

    /// Blocks until `n` threads have called `wait` in this round.
    pub fn wait(&self) -> BarrierWaitResult {
        if self.n <= 1 {
            return BarrierWaitResult(true);
        }
        // Read the generation before arriving: the round cannot end before we arrive.
        let generation = self.generation.value().load(Ordering::Relaxed);
        // BA1: AcqRel (see the module docs).
        let arrived = self.arrived.fetch_add(1, Ordering::AcqRel) + 1;
        if arrived == self.n {
            // Nobody arrives for the next round before this round's threads return, which
            // needs the bump below; so resetting first is safe.
            self.arrived.store(0, Ordering::Relaxed);
            // BA2: Release pairs with the others' Acquire.
            self.generation.value().fetch_add(1, Ordering::Release);
            self.generation.wake_all();
            return BarrierWaitResult(true);
        }
        loop {
            // BA2: Acquire pairs with the leader's Release.
            if self.generation.value().load(Ordering::Acquire) != generation {
                return BarrierWaitResult(false);
            }
            let info = wait_info(WaitKind::Group, self, None);
            self.generation.wait_with(generation, None, info, OnInterrupt::Ignore, |_| {});
        }
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").field("n", &self.n).finish_non_exhaustive()
    }
}
