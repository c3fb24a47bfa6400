//! Shared helpers for the facade's behaviour tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Aborts the test process with a message if still running after `limit` (a hang must fail
/// CI, not block it). Disarmed when dropped.
pub struct Watchdog(Arc<AtomicBool>);

pub fn watchdog(what: &'static str, limit: Duration) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        let step = Duration::from_millis(50);
        let mut waited = Duration::ZERO;
        while waited < limit {
            if d.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(step);
            waited += step;
        }
        eprintln!("watchdog: '{what}' did not finish within {limit:?}: a hang; aborting");
        std::process::abort();
    });
    Watchdog(done)
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Counts its drops in the shared counter (a green thread's destructors ran).
pub struct Drops(pub Arc<AtomicUsize>);

impl Drop for Drops {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
