//! Time: sleeping green threads on the scheduler's timers.
//!
//! On a green thread these park only the green thread (its worker runs others meanwhile); on a
//! plain OS thread they sleep the OS thread.

use std::time::{Duration, Instant};

/// Sleeps for `duration`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let started = Instant::now();
/// let h = purloin::spawn(|| purloin::sleep(Duration::from_millis(5)));
/// h.join().unwrap();
/// assert!(started.elapsed() >= Duration::from_millis(5));
/// ```
pub fn sleep(duration: Duration) {
    purloin_sched::sleep(duration);
}

/// Sleeps until `deadline`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// // Ticks at a fixed rate: each deadline is set from the previous one, not from "now",
/// // so time spent working does not make the ticks drift.
/// let mut next = Instant::now();
/// for _ in 0..3 {
///     next += Duration::from_millis(2);
///     purloin::sleep_until(next);
/// }
/// assert!(Instant::now() >= next);
/// ```
pub fn sleep_until(deadline: Instant) {
    purloin_sched::sleep_until(deadline);
}
