//! Fairness: two green threads ping-ponging through `runnext` cannot starve a green thread
//! waiting in the global queue: it runs within a bounded number of scheduling ticks.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, GreenThread};

#[test]
fn a_global_queue_green_thread_runs_within_the_interval_during_a_runnext_ping_pong() {
    let _w = common::watchdog("fairness", Duration::from_secs(120));
    let interval = 61u32;
    let sched = Builder::new().workers(1).global_queue_interval(interval).build().unwrap();
    let switches = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let slot: Arc<[std::sync::Mutex<Option<GreenThread>>; 2]> =
        Arc::new([std::sync::Mutex::new(None), std::sync::Mutex::new(None)]);

    // The ping-pong pair: each wakes the other (runnext) and parks, forever, until `stop`.
    let started = Arc::new(AtomicU64::new(0));
    let mut pair = Vec::new();
    for me in 0..2usize {
        let (switches, stop, slot, started) =
            (switches.clone(), stop.clone(), slot.clone(), started.clone());
        pair.push(sched.spawn(move || {
            *slot[me].lock().unwrap() = purloin_sched::current();
            started.fetch_add(1, Ordering::AcqRel);
            while started.load(Ordering::Acquire) < 2 {
                purloin_sched::yield_now();
            }
            let other = slot[1 - me].lock().unwrap().unwrap();
            while !stop.load(Ordering::Acquire) {
                switches.fetch_add(1, Ordering::Relaxed);
                other.unpark();
                purloin_sched::park();
            }
            other.unpark();
        }));
    }
    // Wait until the pair is in full swing, then submit from outside (the global queue).
    while switches.load(Ordering::Relaxed) < 10_000 {
        std::thread::yield_now();
    }
    let at_submit = Arc::new(AtomicU64::new(0));
    let at_run = Arc::new(AtomicU64::new(0));
    let (sw, ar, st) = (switches.clone(), at_run.clone(), stop.clone());
    let outsider = sched.spawn(move || {
        ar.store(sw.load(Ordering::Relaxed), Ordering::Relaxed);
        st.store(true, Ordering::Release);
    });
    // Counted once the push is complete (visible): had this thread been descheduled in the
    // middle of the push, the pair's switches meanwhile would not be the scheduler's fault.
    at_submit.store(switches.load(Ordering::Relaxed), Ordering::Relaxed);
    outsider.join().unwrap();
    for h in pair {
        h.join().unwrap();
    }
    // Each switch of the pair is one scheduling tick; the global queue is checked first every
    // `interval` ticks, and the submission may land just after a check (plus slack for the
    // submission racing the count above).
    let waited = at_run.load(Ordering::Relaxed).saturating_sub(at_submit.load(Ordering::Relaxed));
    assert!(
        waited <= 2 * interval as u64 + 4,
        "the outsider waited {waited} ping-pong switches (bound {})",
        2 * interval + 4
    );
}

/// A green thread that only yields must not starve its worker's timers: a sleeper on the same
/// (only) worker wakes while the yielder spins waiting for it. (Go checks timers on every
/// scheduling round; a scheduler that looks at timers only when its queues are empty hangs.)
#[test]
fn a_yield_loop_does_not_starve_the_timers_of_its_worker() {
    let _w = common::watchdog("yield vs timers", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let woke = Arc::new(AtomicBool::new(false));
    let w = woke.clone();
    sched
        .spawn(move || {
            let w2 = w.clone();
            let sleeper = purloin_sched::spawn(move || {
                purloin_sched::sleep(Duration::from_millis(5));
                w2.store(true, Ordering::Release);
            })
            .unwrap();
            while !w.load(Ordering::Acquire) {
                purloin_sched::yield_now();
            }
            sleeper.join().unwrap();
        })
        .join()
        .unwrap();
    assert!(woke.load(Ordering::Acquire));
}

/// A green thread that loops on `preemption_point` and nothing else yields once the monitor
/// asks (after the long-run threshold), so the other green thread of its single worker runs.
/// Without the monitor's request (or the point's yield) the loop never ends: the watchdog
/// fails the test.
#[test]
fn a_preemption_point_yields_once_the_monitor_asks() {
    let _w = common::watchdog("preemption point", Duration::from_secs(30));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_millis(5)).build().unwrap();
    let spins = sched
        .spawn(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            // Queued on this worker behind the loop: it runs only if the loop yields.
            let other = purloin_sched::spawn(move || s.store(true, Ordering::Release)).unwrap();
            let mut spins = 0u64;
            while !stop.load(Ordering::Acquire) {
                spins += 1;
                purloin_sched::preemption_point();
            }
            other.join().unwrap();
            spins
        })
        .join()
        .unwrap();
    assert!(spins > 0);
}
