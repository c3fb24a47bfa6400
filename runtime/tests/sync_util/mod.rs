//! Helpers shared by the `sync_*` test files.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Aborts the test process if dropped later than `timeout` after creation (a hang fails the
/// test instead of blocking CI).
pub struct Watchdog {
    done: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

pub fn watchdog(name: &'static str, timeout: Duration) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let thread = thread::Builder::new()
        .name(format!("watchdog {name}"))
        .spawn(move || {
            let start = Instant::now();
            while !d.load(Ordering::Acquire) {
                let elapsed = start.elapsed();
                if elapsed >= timeout {
                    eprintln!("watchdog: test '{name}' still running after {timeout:?}: hung");
                    std::process::abort();
                }
                thread::park_timeout(timeout - elapsed);
            }
        })
        .unwrap();
    Watchdog { done, thread: Some(thread) }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// A runtime with `workers` workers and the monitor on.
pub fn runtime(workers: usize) -> purloin::Runtime {
    purloin::runtime::Builder::new().workers(workers).build().unwrap()
}

/// Counts drops.
pub struct DropCounter(pub Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Spins (yielding) until `cond` holds; the watchdog bounds it.
pub fn wait_until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        if purloin::in_green_thread() {
            purloin::yield_now();
        } else {
            thread::yield_now();
        }
    }
}
