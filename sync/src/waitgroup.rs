//! [`WaitGroup`]: Go's `sync.WaitGroup` — a counter that [`wait`](WaitGroup::wait) blocks on
//! until it reaches zero. One butex holds the counter.
//!
//! # Memory ordering
//!
//! The guarantee (Go's): everything done before a `done` happens before the return of a
//! `wait` that observed the counter reach zero.
//!
//! - (G1) `done` decrements with Release (AcqRel); `wait`'s Acquire load of 0 pairs with the
//!   last decrement, which (being in the same modification order after every earlier
//!   decrement, each a release sequence member) carries all of them.

use core::fmt;
use std::time::{Duration, Instant};

use purloin_sched::WaitKind;

use crate::butex::{Butex, ButexWait};
use crate::diagnostics::wait_info;
use crate::loom::Ordering;
use crate::waiter::OnInterrupt;

/// Waits for a collection of tasks to finish, like Go's `sync.WaitGroup`: [`add`] before
/// starting work, [`done`] when a piece finishes, [`wait`] to block (park the green thread)
/// until the count is back to zero.
///
/// Share it by reference (scoped green threads) or in an `Arc`. Unlike Go's, `wait` may be
/// called again after the group was reused.
///
/// [`add`]: WaitGroup::add
/// [`done`]: WaitGroup::done
/// [`wait`]: WaitGroup::wait
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_sync::WaitGroup;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let wg = Arc::new(WaitGroup::new());
/// let sum = Arc::new(AtomicUsize::new(0));
/// for i in 0..10 {
///     wg.add(1);
///     let (wg, sum) = (wg.clone(), sum.clone());
///     sched.spawn(move || {
///         sum.fetch_add(i, Ordering::Relaxed);
///         wg.done();
///     });
/// }
/// wg.wait();
/// assert_eq!(sum.load(Ordering::Relaxed), 45);
/// ```
pub struct WaitGroup {
    count: Butex,
}

impl WaitGroup {
    loom_const_fn! {
        /// A group with a count of zero.
        pub fn new() -> WaitGroup {
            WaitGroup { count: Butex::new(0) }
        }
    }

    /// Adds `n` to the count.
    ///
    /// # Panics
    ///
    /// If the count would exceed `u32::MAX`.
    pub fn add(&self, n: usize) {
        let n = u32::try_from(n).ok();
        let r = n.and_then(|n| {
            self.count
                .value()
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_add(n))
                .ok()
        });
        if r.is_none() {
            panic!(
                "purloin_sync::WaitGroup::add: the count would exceed u32::MAX; split the work \
                 into several groups"
            );
        }
    }

    /// Marks one unit of work done (subtracts one), waking the waiters when the count reaches
    /// zero.
    ///
    /// # Panics
    ///
    /// If the count is already zero (more `done`s than `add`s: Go's "negative WaitGroup
    /// counter").
    pub fn done(&self) {
        // G1: AcqRel (see the module docs).
        let r = self
            .count
            .value()
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |c| c.checked_sub(1));
        match r {
            Ok(1) => {
                self.count.wake_all();
            }
            Ok(_) => {}
            Err(_) => panic!(
                "purloin_sync::WaitGroup::done: the count is already zero (more done() calls \
                 than add()ed); call add(n) before starting the work"
            ),
        }
    }

    /// The current count (a snapshot).
    pub fn count(&self) -> usize {
        self.count.value().load(Ordering::Relaxed) as usize
    }

    /// Blocks (parks the green thread) until the count is zero, or until the calling green
    /// thread is interrupted ([`GreenThread::interrupt`](purloin_sched::GreenThread::interrupt),
    /// or a cancelled token it runs under): then it returns early and leaves the interrupt
    /// pending (check [`count`](WaitGroup::count) or
    /// [`interrupted`](purloin_sched::interrupted)).
    pub fn wait(&self) {
        self.wait_deadline(None);
    }

    /// [`wait`](WaitGroup::wait) for at most `timeout`; returns whether the count reached zero
    /// (`false` also when interrupted, the interrupt left pending).
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.wait_deadline(Instant::now().checked_add(timeout))
    }

    /// [`wait`](WaitGroup::wait) until `deadline`; returns whether the count reached zero.
    pub fn wait_deadline(&self, deadline: Option<Instant>) -> bool {
        loop {
            // G1: Acquire pairs with the last `done`.
            let c = self.count.value().load(Ordering::Acquire);
            if c == 0 {
                return true;
            }
            let info = wait_info(WaitKind::Group, self, None);
            // Woken all at once: nothing to pass on when unwound.
            match self.count.wait_with(c, deadline, info, OnInterrupt::Leave, |_| {}) {
                ButexWait::TimedOut | ButexWait::Interrupted => {
                    return self.count.value().load(Ordering::Acquire) == 0;
                }
                ButexWait::Woken | ButexWait::ValueChanged => {}
            }
        }
    }
}

impl Default for WaitGroup {
    fn default() -> Self {
        WaitGroup::new()
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup").field("count", &self.count()).finish()
    }
}
