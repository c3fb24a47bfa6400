//! Time: sleeping green threads on the scheduler's timers.
//!
//! On a green thread these park only the green thread (its worker runs others meanwhile); on a
//! plain OS thread they sleep the OS thread.

use std::time::{Duration, Instant};

/// Sleeps for `duration`.
pub fn sleep(duration: Duration) {
    purloin_sched::sleep(duration);
}

/// Sleeps until `deadline`.
pub fn sleep_until(deadline: Instant) {
    purloin_sched::sleep_until(deadline);
}
