//! Timers: a timer of a worker busy with a CPU-bound green thread still fires.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use purloin_sched::Builder;

/// Releases the spinner when dropped (so a failed assertion does not leave it spinning).
struct Release(Arc<AtomicBool>);
impl Drop for Release {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A green thread sleeps 100 ms, then a green thread that never yields (it spins until the
/// test releases it) runs on the same worker; the other worker is idle. The sleeper must
/// finish while the spinner still spins: an idle worker (or the monitor) fires the busy
/// worker's timer. On the old code the sleep ended only when the spinner was released.
/// No timing assert: the order is checked with the `release` flag (the 20 s bound only turns
/// a failure into an assertion instead of a hang).
#[test]
fn a_busy_workers_timer_fires_while_its_green_thread_spins() {
    let _w = common::watchdog("busy worker's timer", Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    for _attempt in 0..20 {
        let release = Arc::new(AtomicBool::new(false));
        let _guard = Release(release.clone());
        let slept = Arc::new(AtomicBool::new(false));
        let spinner_os: Arc<Mutex<Option<ThreadId>>> = Arc::new(Mutex::new(None));
        let (r, s, so) = (release.clone(), slept.clone(), spinner_os.clone());
        let host = sched.spawn(move || {
            let me = std::thread::current().id();
            let r2 = r.clone();
            // Spawned into this worker's runnext: it runs here once the host parks.
            let _spinner = purloin_sched::spawn(move || {
                *so.lock().unwrap() = Some(std::thread::current().id());
                while !r2.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
            });
            purloin_sched::sleep(Duration::from_millis(100));
            // Acquire: pairs with the test's Release store of `release`.
            let before_release = !r.load(Ordering::Acquire);
            s.store(true, Ordering::Release);
            (me, before_release)
        });
        let limit = Instant::now() + Duration::from_secs(20);
        while !slept.load(Ordering::Acquire) && Instant::now() < limit {
            std::thread::sleep(Duration::from_millis(1));
        }
        release.store(true, Ordering::Release);
        let (host_os, before_release) = host.join().unwrap();
        let spinner_os = spinner_os.lock().unwrap().expect("the spinner ran");
        if spinner_os != host_os {
            // The idle worker stole the spinner: this attempt did not test a busy worker.
            continue;
        }
        assert!(before_release, "the sleep ended only after the spinner was released");
        return;
    }
    panic!("in 20 attempts the spinner never ran on the sleeper's worker");
}
