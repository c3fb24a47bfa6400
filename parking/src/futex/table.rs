//! Address-keyed wait queues on a mutex and a condition variable: the loom emulation of the
//! futex (`cfg(loom)`), and the fallback on platforms without a native word wait (also used for
//! timed waits on the atomic-wait platforms).
//!
//! Each word address hashes to a bucket holding a mutex-protected list of waiter entries
//! `(address, ticket)` and one condvar. A waiter compares the word and appends its entry under
//! the mutex (that is the futex guarantee: the check and the enqueue are one step with respect
//! to wakes, which take the same mutex). A wake removes up to `n` entries of its address,
//! oldest first, and notifies the condvar; a waiter returns once its entry is gone, so condvar
//! spurious wake-ups never surface as futex spurious returns, and the wake count is exact.
//!
//! Under loom there is one bucket (capacities shrink under loom) and a timed wait never blocks:
//! it releases the mutex, re-takes it and reports `Woken` if a wake took its entry meanwhile,
//! `TimedOut` otherwise, which lets the model explore the deadline expiring at every point.
//! The deadline's value is not read under loom, so models stay deterministic.

use std::time::Instant;

use super::WaitResult;
use crate::stats::{self, Event};
use crate::sync::{AtomicU32, Condvar, Mutex, MutexGuard, Ordering, lock};

pub(super) const WAKE_COUNT_IS_EXACT: bool = true;

/// Buckets in the table: a few dozen keep unrelated words from sharing a lock in the fallback;
/// one keeps loom models small.
const BUCKETS: usize = if cfg!(loom) { 1 } else { 64 };

struct Bucket {
    queue: Mutex<Queue>,
    cond: Condvar,
}

struct Queue {
    /// Sleeping waiters: (word address, ticket), oldest first.
    waiters: Vec<(usize, u64)>,
    next_ticket: u64,
}

impl Queue {
    fn enqueue(&mut self, addr: usize) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiters.push((addr, ticket));
        ticket
    }

    fn contains(&self, ticket: u64) -> bool {
        self.waiters.iter().any(|&(_, t)| t == ticket)
    }

    /// Removes `ticket`'s entry; `true` if it was still there (nobody woke it).
    fn remove(&mut self, ticket: u64) -> bool {
        match self.waiters.iter().position(|&(_, t)| t == ticket) {
            Some(i) => {
                self.waiters.remove(i);
                true
            }
            None => false,
        }
    }
}

impl Bucket {
    #[cfg(not(loom))]
    const fn new() -> Self {
        Bucket {
            queue: Mutex::new(Queue { waiters: Vec::new(), next_ticket: 0 }),
            cond: Condvar::new(),
        }
    }

    #[cfg(loom)]
    fn new() -> Self {
        Bucket {
            queue: Mutex::new(Queue { waiters: Vec::new(), next_ticket: 0 }),
            cond: Condvar::new(),
        }
    }
}

#[cfg(not(loom))]
fn buckets() -> &'static [Bucket; BUCKETS] {
    static TABLE: [Bucket; BUCKETS] = [const { Bucket::new() }; BUCKETS];
    &TABLE
}

#[cfg(loom)]
fn buckets() -> &'static [Bucket; BUCKETS] {
    crate::sync::lazy_static! {
        // Per loom execution: every explored interleaving starts with empty queues.
        static ref TABLE: [Bucket; BUCKETS] = std::array::from_fn(|_| Bucket::new());
    }
    &TABLE
}

fn bucket(addr: usize) -> &'static Bucket {
    // Fibonacci hashing of the address; words are 4-byte aligned, so drop the low bits.
    let h = ((addr >> 2) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    &buckets()[(h >> 32) as usize % BUCKETS]
}

fn wait_cond<'a>(cond: &Condvar, guard: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
    match cond.wait(guard) {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

pub(super) fn wait(atomic: &AtomicU32, expected: u32, deadline: Option<Instant>) -> WaitResult {
    let addr = atomic as *const AtomicU32 as usize;
    let bucket = bucket(addr);
    let mut queue = lock(&bucket.queue);
    // Compare-and-enqueue under the bucket mutex. Relaxed is enough: a waker that changed the
    // word before calling `wake` takes this mutex after us (then it finds our entry) or before
    // us (then its unlock happens-before our lock, and coherence makes this load see its change
    // or a later one).
    if atomic.load(Ordering::Relaxed) != expected {
        return WaitResult::ValueChanged;
    }
    let ticket = queue.enqueue(addr);
    stats::record(Event::FutexWait);
    match deadline {
        None => loop {
            queue = wait_cond(&bucket.cond, queue);
            if !queue.contains(ticket) {
                return WaitResult::Woken;
            }
        },
        Some(deadline) => timed(bucket, queue, ticket, deadline),
    }
}

#[cfg(not(loom))]
fn timed(
    bucket: &Bucket,
    mut queue: MutexGuard<'_, Queue>,
    ticket: u64,
    deadline: Instant,
) -> WaitResult {
    loop {
        if !queue.contains(ticket) {
            return WaitResult::Woken;
        }
        let now = Instant::now();
        if now >= deadline {
            queue.remove(ticket);
            return WaitResult::TimedOut;
        }
        queue = match bucket.cond.wait_timeout(queue, deadline - now) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
}

#[cfg(loom)]
fn timed(
    bucket: &Bucket,
    queue: MutexGuard<'_, Queue>,
    ticket: u64,
    _deadline: Instant,
) -> WaitResult {
    // "Asleep": any thread may run (and wake us) between this unlock and the relock.
    drop(queue);
    let mut queue = lock(&bucket.queue);
    if queue.remove(ticket) { WaitResult::TimedOut } else { WaitResult::Woken }
}

pub(super) fn wake(atomic: *const AtomicU32, n: u32) -> usize {
    let addr = atomic as usize;
    let bucket = bucket(addr);
    let mut queue = lock(&bucket.queue);
    let mut woken = 0usize;
    queue.waiters.retain(|&(a, _)| {
        if a == addr && woken < n as usize {
            woken += 1;
            false
        } else {
            true
        }
    });
    if woken > 0 {
        bucket.cond.notify_all();
    }
    woken
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::thread;
    use std::time::Duration;

    #[test]
    fn value_changed_does_not_enqueue() {
        let word = AtomicU32::new(1);
        assert_eq!(wait(&word, 0, None), WaitResult::ValueChanged);
        assert_eq!(wake(&word, u32::MAX), 0);
    }

    #[test]
    fn timed_wait_times_out_after_deadline() {
        let word = AtomicU32::new(0);
        let deadline = Instant::now() + Duration::from_millis(20);
        assert_eq!(wait(&word, 0, Some(deadline)), WaitResult::TimedOut);
        assert!(Instant::now() >= deadline);
        // The timed-out entry is gone: a wake finds nobody.
        assert_eq!(wake(&word, 1), 0);
    }

    #[test]
    fn wake_counts_exactly_and_ends_waits() {
        let word = AtomicU32::new(0);
        let returned = AtomicU32::new(0);
        thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    // Wait until a wake takes our entry (the word never changes).
                    while wait(&word, 0, None) != WaitResult::Woken {}
                    returned.fetch_add(1, Ordering::Relaxed);
                });
            }
            let mut woken = 0;
            let give_up = Instant::now() + Duration::from_secs(60);
            while woken < 3 {
                assert!(Instant::now() < give_up, "waiters never reached the table");
                woken += wake(&word, 2);
                thread::yield_now();
            }
            assert_eq!(woken, 3);
        });
        assert_eq!(returned.load(Ordering::Relaxed), 3);
    }
}
