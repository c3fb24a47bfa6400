//! Timers: each P's heap of sleeping green threads, fired by its holder or by a searching
//! worker on its last pass.
//!
//! A timer is `(deadline, sequence, green thread)`; firing it is an ordinary unpark, so a
//! timer that fires after its green thread was woken some other way only leaves a token (or
//! finds a newer generation and does nothing). Deadlines are kept as nanoseconds since the
//! scheduler's [`Epoch`] in one atomic word per heap, so the search loop and the idle re-check
//! read "is anything due?" without taking the lock.
//!
//! # Locking
//!
//! The heap is behind a mutex: its holder adds and fires (`lock`), a searching worker fires
//! another P's due timers only with `try_lock` (never waits on another worker's heap). The
//! next-deadline word is a Relaxed hint written under that lock: a reader that sees a stale
//! value either takes the lock and finds nothing due, or looks again on its next round (a
//! parking worker sleeps at most until the deadline it read).

use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::GreenThread;
use crate::sync::{AtomicU64, Mutex, Ordering, lock};

/// The scheduler's time origin: deadlines are stored as nanoseconds since it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Epoch(Instant);

impl Epoch {
    pub(crate) fn now() -> Epoch {
        Epoch(Instant::now())
    }

    /// `at` as nanoseconds since the epoch (0 before it; never `u64::MAX`, which means "none").
    pub(crate) fn nanos(self, at: Instant) -> u64 {
        at.saturating_duration_since(self.0).as_nanos().min(u64::MAX as u128 - 1) as u64
    }

    /// The instant `nanos` after the epoch.
    fn instant(self, nanos: u64) -> Instant {
        self.0 + Duration::from_nanos(nanos)
    }
}

/// "No timer" in [`Timers::next`].
const NONE: u64 = u64::MAX;

/// A timer: wake `g` at `at`. Ordered by deadline (earliest first), then by sequence.
#[derive(Clone, Copy)]
struct Timer {
    at: Instant,
    seq: u64,
    g: GreenThread,
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.seq == other.seq
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timer {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest deadline on top.
        other.at.cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

struct Heap {
    heap: BinaryHeap<Timer>,
    seq: u64,
}

impl Heap {
    fn push(&mut self, at: Instant, g: GreenThread) {
        self.seq += 1;
        let seq = self.seq;
        self.heap.push(Timer { at, seq, g });
    }

    /// The earliest deadline as nanoseconds since `epoch`, or [`NONE`].
    fn first(&self, epoch: Epoch) -> u64 {
        self.heap.peek().map_or(NONE, |t| epoch.nanos(t.at))
    }
}

/// One P's timers.
pub(crate) struct Timers {
    heap: Mutex<Heap>,
    /// Earliest deadline as nanoseconds since the epoch ([`NONE`] = none), readable without
    /// the lock (a hint, written under it).
    next: AtomicU64,
}

impl Timers {
    pub(crate) fn new() -> Timers {
        Timers {
            heap: Mutex::new(Heap { heap: BinaryHeap::new(), seq: 0 }),
            next: AtomicU64::new(NONE),
        }
    }

    /// Adds a timer waking `g` at `at`.
    pub(crate) fn add(&self, epoch: Epoch, at: Instant, g: GreenThread) {
        let mut h = lock(&self.heap);
        h.push(at, g);
        self.next.store(h.first(epoch), Ordering::Relaxed);
    }

    /// The earliest deadline, if any.
    pub(crate) fn next_deadline(&self, epoch: Epoch) -> Option<Instant> {
        let n = self.next.load(Ordering::Relaxed);
        (n != NONE).then(|| epoch.instant(n))
    }

    /// Fires the due timers (never waits for the lock: a holder firing them now makes this
    /// caller's look unnecessary). The woken green threads go where an unpark from the calling
    /// thread puts them. Returns how many were fired.
    pub(crate) fn fire_due(&self, epoch: Epoch) -> usize {
        let next = self.next.load(Ordering::Relaxed);
        if next == NONE {
            return 0;
        }
        let now = Instant::now();
        if next > epoch.nanos(now) {
            return 0;
        }
        let Ok(mut h) = self.heap.try_lock() else { return 0 };
        let mut due: Vec<GreenThread> = Vec::new();
        while let Some(top) = h.heap.peek() {
            if top.at > now {
                break;
            }
            due.push(h.heap.pop().map(|t| t.g).expect("peeked"));
        }
        self.next.store(h.first(epoch), Ordering::Relaxed);
        drop(h);
        let n = due.len();
        for g in due {
            g.unpark();
        }
        n
    }

    /// Moves every timer to `to` (the P is being removed).
    pub(crate) fn move_to(&self, to: &Timers, epoch: Epoch) {
        let moved: Vec<Timer> = lock(&self.heap).heap.drain().collect();
        self.next.store(NONE, Ordering::Relaxed);
        if moved.is_empty() {
            return;
        }
        let mut h = lock(&to.heap);
        for timer in moved {
            h.push(timer.at, timer.g);
        }
        to.next.store(h.first(epoch), Ordering::Relaxed);
    }
}
