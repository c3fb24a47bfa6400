//! Helpers shared by the net tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A runtime with `workers` workers and deadlock detection on (a test that deadlocks fails
/// with a report instead of hanging).
pub fn rt(workers: usize) -> purloin::Runtime {
    purloin::runtime::Builder::new().workers(workers).build().expect("runtime")
}

/// Aborts the process if the test is still running after `secs` (a hang fails CI instead of
/// blocking it). Disarmed on drop.
pub struct Watchdog(Arc<AtomicBool>);

pub fn watchdog(name: &'static str, secs: u64) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(secs) {
            if d.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("watchdog: test `{name}` still running after {secs} s; aborting");
        std::process::abort();
    });
    Watchdog(done)
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
