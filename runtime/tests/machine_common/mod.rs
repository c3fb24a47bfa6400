//! Helpers shared by the machine tests: a watchdog, drop counters, a runtime.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use purloin::machine::Host;
use purloin::runtime::Runtime;

/// Aborts the test process if it is still alive after `limit` (a hang fails instead of
/// blocking CI). Disarmed when dropped.
pub struct Watchdog(Option<mpsc::Sender<()>>);

pub fn watchdog(what: &'static str, limit: Duration) -> Watchdog {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
            eprintln!("watchdog: `{what}` still running after {limit:?}: aborting");
            std::process::abort();
        }
    });
    Watchdog(Some(tx))
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.0.take());
    }
}

/// A host on a fresh runtime with `workers` workers.
pub fn host(workers: usize) -> Host {
    Host::new(Runtime::builder().workers(workers).build().expect("runtime"))
}

/// Counts how many times values made from it were dropped.
#[derive(Clone, Default)]
pub struct DropCounter(Arc<AtomicUsize>);

impl DropCounter {
    pub fn token(&self) -> Counted {
        Counted(self.0.clone())
    }
    pub fn drops(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A value whose drop is counted.
pub struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
