//! Process-wide counters of futex traffic: how often threads slept, how often wakes were
//! issued, skipped or wasted, and how often a wait returned for nothing.
//!
//! The counters answer the questions brpc users needed a profiler for (brpc#1727, #2849): is
//! the idle path making syscalls it does not need? They are **off by default** and cost nothing
//! then: every recording site compiles to nothing. Enable the `stats` cargo feature to turn them
//! on; each counted event then costs one `Relaxed` `fetch_add` on a process-wide cache line of
//! its own (contended if many threads hit the same event, so keep `stats` for diagnostics and
//! benchmarks, not production hot paths).
//!
//! Under `cfg(loom)` the counters are always on and belong to the current loom execution (they
//! start at zero in every explored interleaving), so a model can assert for example that a
//! `signal` with no waiter issued no wake call. (`spurious_returns` is not recorded under
//! loom: detecting one costs an extra load, which would enlarge every model above.)
//!
//! ```
//! use purloin_parking::{stats, ParkingLot};
//!
//! let before = stats::snapshot();
//! let lot = ParkingLot::new();
//! lot.signal(1); // nobody waits: no syscall
//! let delta = stats::snapshot().since(&before);
//! assert_eq!(delta.futex_wakes, 0);
//! if stats::ENABLED {
//!     assert!(delta.wakes_skipped >= 1); // other threads may add to process-wide counters
//! }
//! ```

use crate::sync::Ordering;

/// Whether counters are recorded in this build: `true` with the `stats` cargo feature (and
/// always under `cfg(loom)`), `false` otherwise, in which case [`snapshot`] returns zeros.
pub const ENABLED: bool = cfg!(any(feature = "stats", loom));

/// A snapshot of the counters, from [`snapshot`]. All counts are since process start (or,
/// under loom, since the start of the current execution); use [`Counters::since`] for a delta.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Blocking waits handed to the OS (`futex(FUTEX_WAIT_BITSET)`, `WaitOnAddress`, or the
    /// fallback table). A wait that returned before the call because the word had already
    /// changed, or because its deadline had passed, is not counted.
    pub futex_waits: u64,
    /// Wake calls handed to the OS (`futex(FUTEX_WAKE)`, `WakeByAddress*`, or the fallback).
    pub futex_wakes: u64,
    /// Wake calls that the OS reported as waking nobody: syscalls that were wasted. Only
    /// counted where the OS reports a count (Linux, Android, the fallback table, loom).
    pub wakes_empty: u64,
    /// Wakes that were never issued because the protocol knew nobody was asleep:
    /// [`ParkingLot::signal`](crate::ParkingLot::signal) with a waiter count of zero, and
    /// [`Unparker::unpark`](crate::Unparker::unpark) of a thread that was not parked.
    pub wakes_skipped: u64,
    /// Waits that returned as woken although the word still held the expected value: a wake
    /// meant for an earlier value, an interrupted call, or a platform's spurious return.
    pub spurious_returns: u64,
    /// Timed waits that returned because their deadline passed.
    pub timeouts: u64,
}

impl Counters {
    /// The change from `earlier` to `self`, counter by counter (saturating at zero).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_parking::stats;
    ///
    /// let before = stats::snapshot();
    /// let delta = stats::snapshot().since(&before);
    /// assert_eq!(delta.timeouts, 0);
    /// ```
    #[must_use]
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            futex_waits: self.futex_waits.saturating_sub(earlier.futex_waits),
            futex_wakes: self.futex_wakes.saturating_sub(earlier.futex_wakes),
            wakes_empty: self.wakes_empty.saturating_sub(earlier.wakes_empty),
            wakes_skipped: self.wakes_skipped.saturating_sub(earlier.wakes_skipped),
            spurious_returns: self.spurious_returns.saturating_sub(earlier.spurious_returns),
            timeouts: self.timeouts.saturating_sub(earlier.timeouts),
        }
    }

    /// Syscalls issued: `futex_waits + futex_wakes`.
    #[must_use]
    pub fn syscalls(&self) -> u64 {
        self.futex_waits + self.futex_wakes
    }
}

/// Reads every counter (each with a `Relaxed` load, so the snapshot is not atomic as a whole).
/// Returns all zeros when [`ENABLED`] is `false`.
///
/// # Examples
///
/// ```
/// let c = purloin_parking::stats::snapshot();
/// if !purloin_parking::stats::ENABLED {
///     assert_eq!(c, Default::default());
/// }
/// ```
#[must_use]
pub fn snapshot() -> Counters {
    if !ENABLED {
        return Counters::default();
    }
    let get = |event: Event| imp::cell(event).load(Ordering::Relaxed);
    Counters {
        futex_waits: get(Event::FutexWait),
        futex_wakes: get(Event::FutexWake),
        wakes_empty: get(Event::WakeEmpty),
        wakes_skipped: get(Event::WakeSkipped),
        spurious_returns: get(Event::Spurious),
        timeouts: get(Event::Timeout),
    }
}

/// A counted event; the discriminant indexes the counter table.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    FutexWait,
    FutexWake,
    WakeEmpty,
    WakeSkipped,
    Spurious,
    Timeout,
}

/// Counts one `event`. Compiles to nothing unless [`ENABLED`].
#[inline(always)]
pub(crate) fn record(event: Event) {
    if ENABLED {
        imp::cell(event).fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(any(loom, feature = "stats"))]
mod table {
    use crate::sync::{CounterCell, Padded};

    pub(super) const EVENTS: usize = 6;

    /// One counter per 128-byte line, so events recorded by different threads do not share a
    /// line.
    pub(super) struct Table(pub(super) [Padded<CounterCell>; EVENTS]);

    impl Table {
        pub(super) const fn new() -> Self {
            Table([const { Padded(CounterCell::new(0)) }; EVENTS])
        }
    }
}

#[cfg(all(not(loom), feature = "stats"))]
mod imp {
    use super::Event;
    use super::table::Table;
    use crate::sync::CounterCell;

    static TABLE: Table = Table::new();

    pub(super) fn cell(event: Event) -> &'static CounterCell {
        &TABLE.0[event as usize].0
    }
}

#[cfg(all(not(loom), not(feature = "stats")))]
mod imp {
    use super::Event;
    use crate::sync::CounterCell;

    pub(super) fn cell(_event: Event) -> &'static CounterCell {
        unreachable!("stats::imp::cell is only called when stats::ENABLED is true")
    }
}

#[cfg(loom)]
mod imp {
    use super::Event;
    use super::table::Table;
    use crate::sync::CounterCell;

    crate::sync::lazy_static! {
        // Per loom execution: reset to zero for every explored interleaving.
        static ref TABLE: Table = Table::new();
    }

    pub(super) fn cell(event: Event) -> &'static CounterCell {
        &TABLE.0[event as usize].0
    }
}
