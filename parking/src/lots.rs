//! [`ParkingLots`]: a sharded set of [`ParkingLot`]s whose size follows the number of workers.
//!
//! Each worker sleeps on one lot; a producer wakes at most two workers by walking the lots
//! round-robin from its own (brpc's `TaskControl::signal_task`). brpc uses a fixed 4 lots, which
//! users with 64+ workers found too few (brpc#2849: every lot had many sleepers, so each signal
//! and each registration contended on one word, and `futex` showed up as ~25% of CPU in
//! brpc#1727). Here the default is one lot per [`WORKERS_PER_LOT`] workers.

use crate::lot::ParkingLot;
use crate::sync::Padded;

/// Workers per lot chosen by [`ParkingLots::for_workers`]: small enough that a lot's word is
/// shared by few threads, large enough that a signal usually finds a sleeper in the first lot.
pub const WORKERS_PER_LOT: usize = 4;

/// The most workers [`ParkingLots::signal_task`] wakes per call (brpc's cap: waking more costs
/// the producer syscalls, and each woken worker wakes another if it finds more work).
pub const MAX_SIGNAL: u32 = 2;

/// A fixed set of [`ParkingLot`]s shared by a pool of workers.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_parking::ParkingLots;
///
/// let lots = ParkingLots::for_workers(8);
/// assert_eq!(lots.len(), 2);
/// let work = AtomicUsize::new(0);
/// std::thread::scope(|s| {
///     for worker in 0..8 {
///         let (lots, work) = (&lots, &work);
///         s.spawn(move || {
///             let lot = lots.lot(lots.lot_for_worker(worker));
///             loop {
///                 let state = lot.state();
///                 if state.is_stopped() {
///                     break;
///                 }
///                 if work.load(Ordering::Acquire) > 0 {
///                     break; // found work
///                 }
///                 lot.wait(state);
///             }
///         });
///     }
///     work.store(1, Ordering::Release);
///     lots.signal_task(1, 0);
///     lots.stop(); // and then let every worker exit
/// });
/// ```
#[derive(Debug)]
pub struct ParkingLots {
    /// Each lot padded, so signals on one lot do not slow waiters on another.
    lots: Box<[Padded<ParkingLot>]>,
}

impl ParkingLots {
    /// A set of `lots` lots.
    ///
    /// # Panics
    ///
    /// If `lots` is 0.
    ///
    /// # Examples
    ///
    /// ```
    /// let lots = purloin_parking::ParkingLots::new(4); // brpc's configuration
    /// assert_eq!(lots.len(), 4);
    /// ```
    #[must_use]
    pub fn new(lots: usize) -> Self {
        assert!(
            lots > 0,
            "ParkingLots::new(0): a set needs at least one lot; pass lots >= 1, or use \
             ParkingLots::for_workers(workers) to size it from the worker count"
        );
        ParkingLots { lots: (0..lots).map(|_| Padded::default()).collect() }
    }

    /// The default size for `workers` workers: one lot per [`WORKERS_PER_LOT`] workers,
    /// rounded up, at least one (so 1–4 workers share one lot, 64 workers get 16 lots).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_parking::ParkingLots;
    ///
    /// assert_eq!(ParkingLots::for_workers(0).len(), 1);
    /// assert_eq!(ParkingLots::for_workers(4).len(), 1);
    /// assert_eq!(ParkingLots::for_workers(5).len(), 2);
    /// assert_eq!(ParkingLots::for_workers(64).len(), 16);
    /// ```
    #[must_use]
    pub fn for_workers(workers: usize) -> Self {
        Self::new(workers.div_ceil(WORKERS_PER_LOT).max(1))
    }

    /// The number of lots (at least 1).
    #[must_use]
    pub fn len(&self) -> usize {
        self.lots.len()
    }

    /// Always `false`: a set has at least one lot. (Present because `len` is.)
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lots.is_empty()
    }

    /// The lot at `index`.
    ///
    /// # Panics
    ///
    /// If `index >= self.len()`.
    #[must_use]
    pub fn lot(&self, index: usize) -> &ParkingLot {
        match self.lots.get(index) {
            Some(padded) => &padded.0,
            None => panic!(
                "ParkingLots::lot({index}): only {} lots exist; use lot_for_worker(worker) to \
                 map a worker index to a lot",
                self.lots.len()
            ),
        }
    }

    /// The lot a worker sleeps on: `worker_index % len()`, so consecutive workers spread over
    /// the lots and each lot gets at most `ceil(workers / len)` of them.
    ///
    /// # Examples
    ///
    /// ```
    /// let lots = purloin_parking::ParkingLots::new(2);
    /// assert_eq!(lots.lot_for_worker(0), 0);
    /// assert_eq!(lots.lot_for_worker(3), 1);
    /// ```
    #[must_use]
    pub fn lot_for_worker(&self, worker_index: usize) -> usize {
        worker_index % self.lots.len()
    }

    /// Wakes up to `min(n, MAX_SIGNAL)` workers for newly published tasks: signals one worker
    /// on lot `from_lot`, then on the next lot, round-robin, until that many were woken or every
    /// lot was signalled once. Returns how many were woken (see [`ParkingLot::signal`] for what
    /// the count means), so the caller can start another worker if it is short.
    ///
    /// Every lot visited gets its epoch bumped, so workers of that lot that are between their
    /// snapshot and their wait look again even when nobody sleeps there; lots after the walk
    /// stopped are left alone. `from_lot` is taken modulo [`len`](Self::len), so a worker index
    /// works too. `n = 0` does nothing and returns 0.
    ///
    /// Cost: one `fetch_add` per lot visited and one wake syscall per lot that has a sleeper.
    /// When nobody sleeps anywhere the walk visits every lot (each bump is still needed: a
    /// worker of that lot may be between its snapshot and its wait), so a scheduler should
    /// call this only when its own idle count says some worker may be asleep (Go's
    /// `npidle > 0 && nmspinning == 0` check, with its StoreLoad fence), not on every spawn.
    ///
    /// # Examples
    ///
    /// ```
    /// let lots = purloin_parking::ParkingLots::new(4);
    /// assert_eq!(lots.signal_task(2, 1), 0); // nobody sleeps: four fetch_adds, no syscall
    /// ```
    pub fn signal_task(&self, n: u32, from_lot: usize) -> u32 {
        let want = n.min(MAX_SIGNAL);
        let len = self.lots.len();
        let mut woken = 0;
        let mut index = from_lot % len;
        for _ in 0..len {
            if woken >= want {
                break;
            }
            woken += self.lots[index].0.signal(1);
            index += 1;
            if index == len {
                index = 0;
            }
        }
        woken
    }

    /// Stops every lot: all waiters wake and later waits return at once.
    pub fn stop(&self) {
        for padded in self.lots.iter() {
            padded.0.stop();
        }
    }

    /// Whether [`stop`](Self::stop) has been called.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.lots[0].0.is_stopped()
    }

    /// Registered waiters over all lots (a racy sum, for diagnostics).
    #[must_use]
    pub fn waiters(&self) -> u32 {
        self.lots.iter().map(|padded| padded.0.waiters()).sum()
    }
}
