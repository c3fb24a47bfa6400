//! The coarse clock: one process-wide timestamp that slow paths refresh and hot paths only
//! read, so a [`Dump`](crate::Dump) can tell how long each green thread has been in its state
//! without an OS clock read where green threads change state.
//!
//! A green thread's record keeps the clock's value from its last change of state (`G::since`,
//! a stamp): spawn, switch-in, park, a wake-up that queues it, a yield that queues it, entering
//! and leaving a blocking section. A stamp is one Relaxed load of [`NOW`] and one Relaxed
//! store into the record, next to the state word those paths write anyway. Reading the OS
//! clock there instead (`Instant::now()`, a vDSO call, many times the cost of a load)
//! would be paid twice per park–unpark round trip.
//!
//! # Who refreshes it, and its resolution
//!
//! - every scheduler's monitor, at each of its rounds (`blocking::monitor_main`): every 20 µs
//!   while a worker is in a blocking section, backing off to every 10 ms while workers run
//!   green threads;
//! - a worker leaving its park when that ends the monitor's sleep with no deadline (every
//!   worker was parked, so the clock stood still), and every worker leaving its park when the
//!   scheduler has no monitor;
//! - a wake-up or spawn from a thread that is not a worker (it may find every worker parked
//!   and the clock standing still), which stamps the green thread with its fresh reading;
//! - every dump, which computes durations against a fresh reading;
//! - the start of every scheduler (before its first spawn: a stamp never predates the base).
//!
//! The clock never runs ahead of the real time, and while a worker runs green threads it lags
//! by at most one monitor nap: **10 ms** (20 µs while a worker is in a blocking section). So a
//! duration in a dump is never less than the true one and exceeds it by at most that lag.
//! Without the monitor ([`Builder::monitor(false)`](crate::Builder::monitor)) the clock
//! advances only when a worker wakes up or a dump runs, and busy workers stamp older times:
//! durations are still never under-estimated, but may be over-estimated by more.
//!
//! # Stamps that carry a precise reading
//!
//! The clock's values are even (the last nanosecond is dropped). An odd stamp in a record is
//! a precise reading ([`precise`], plus one) that a queueing point took to time the green
//! thread's wait for a worker (`Stats::sched_latency`); the switch-in that finds it records the
//! wait and stamps over it. Either kind reads as a time in the same unit (off by at most a
//! nanosecond), so a dump needs no test.
//!
//! # Memory ordering
//!
//! Relaxed everywhere: the clock orders nothing, and a stamp is a diagnostic read racily.
//! Refreshes are `fetch_max`, so the clock never goes back when several threads refresh it.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::sync::{DiagU64, STAT};

/// Nanoseconds since [`base`], as last refreshed.
static NOW: DiagU64 = DiagU64::new(0);

/// The instant the clock counts from (the first use in the process).
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// The clock's value: nanoseconds since its base, lagging the real time (module docs).
#[inline]
pub(crate) fn coarse() -> u64 {
    NOW.load(STAT)
}

/// `now` in the clock's unit: nanoseconds since [`base`], made even (module docs).
fn since_base(now: Instant) -> u64 {
    now.saturating_duration_since(base()).as_nanos() as u64 & !PRECISE
}

/// The low bit of a stamp that holds a [`precise`] reading (module docs).
pub(crate) const PRECISE: u64 = 1;

/// A precise reading of the OS clock in the clock's unit, without refreshing the clock (no
/// write to the shared word): for timing a wait whose both ends read it.
#[inline]
pub(crate) fn precise() -> u64 {
    since_base(Instant::now())
}

/// Sets the clock to `now` (unless another refresh went further) and returns it in the
/// clock's unit.
pub(crate) fn refresh_at(now: Instant) -> u64 {
    let n = since_base(now);
    NOW.fetch_max(n, STAT);
    n
}

/// Reads the OS clock and refreshes the clock with it; returns the precise reading.
pub(crate) fn refresh() -> u64 {
    refresh_at(Instant::now())
}

/// The time from stamp `since` to the precise reading `now` (both in the clock's unit).
#[cfg_attr(loom, allow(dead_code))] // dumps are not built under loom
pub(crate) fn elapsed(since: u64, now: u64) -> Duration {
    Duration::from_nanos(now.saturating_sub(since))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn never_ahead_and_never_back() {
        let a = refresh();
        assert!(coarse() >= a);
        // An older reading does not move it back.
        refresh_at(base());
        assert!(coarse() >= a);
        let b = refresh();
        assert!(b >= a && coarse() >= b);
        assert_eq!(elapsed(b, a), Duration::ZERO);
    }
}
