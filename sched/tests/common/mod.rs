//! Shared helpers for the scheduler's behaviour tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Fails the test (by aborting the process with a message) if it is still running after
/// `limit`: a hang must fail CI, not block it. Disarmed when dropped.
pub struct Watchdog {
    done: Arc<AtomicBool>,
}

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
        if !d.load(Ordering::Acquire) {
            eprintln!("watchdog: '{what}' did not finish within {limit:?}: a hang; aborting");
            std::process::abort();
        }
    });
    Watchdog { done }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
    }
}

/// Process CPU time (user + system).
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Counts its drops in the shared counter (exactly-once checks: no leak, no double drop).
pub struct Counted(pub Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
