//! Per green thread run time and switch count (`GreenThread::cpu_time`, `switches`): every
//! switch-in counts once; a run is charged the coarse clock's advance during it, also while
//! it is still running, and nothing while parked. The lower bounds are made certain by the
//! test itself: it refreshes the coarse clock (a dump does) only after it measured the green
//! thread running for at least `HOLD`.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use purloin_sched::Builder;

const HOLD: Duration = Duration::from_millis(5);

/// Spins (on this plain thread) until at least `HOLD` has passed; returns what passed.
fn hold() -> Duration {
    let t = Instant::now();
    while t.elapsed() < HOLD {
        std::hint::spin_loop();
    }
    t.elapsed()
}

/// A green thread that parks `N` times, released only once parked each time: it is switched
/// in exactly `N + 1` times, which its handle reads while it is parked and it reads itself.
#[test]
fn each_switch_in_counts_once() {
    const N: u32 = 10;
    let _w = common::watchdog("switch count", Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    let round = Arc::new(AtomicU32::new(u32::MAX));
    let r2 = round.clone();
    let h = sched.spawn(move || {
        for i in 0..N {
            r2.store(i, Ordering::Release);
            purloin_sched::park();
        }
        purloin_sched::current().unwrap().switches().unwrap()
    });
    for i in 0..N {
        while round.load(Ordering::Acquire) != i || sched.parked().is_empty() {
            std::thread::yield_now();
        }
        assert_eq!(h.switches(), Some(u64::from(i) + 1), "parked after run {i}");
        let dump = sched.dump();
        let t = dump.threads.iter().find(|t| t.id == h.thread().id()).unwrap();
        assert_eq!(t.cpu.map(|c| c.1), Some(u64::from(i) + 1), "{dump}");
        h.thread().unpark();
    }
    let t = *h.thread();
    assert_eq!(h.join().unwrap(), u64::from(N) + 1);
    while !t.is_finished() {
        std::thread::yield_now();
    }
    assert_eq!(t.switches(), None, "ended");
    assert_eq!(t.cpu_time(), None, "ended");
}

/// A green thread that runs for at least `HOLD` (the test measures it, then refreshes the
/// coarse clock) has at least `HOLD` of run time, read from outside while it runs and by
/// itself; parking keeps it (the run is charged at the park); while it is parked nothing is
/// added.
#[test]
fn a_run_is_charged_while_running_and_at_its_park_and_parks_add_nothing() {
    let _w = common::watchdog("cpu time", Duration::from_secs(120));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_secs(3600)).build().unwrap();
    let running = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (r2, s2) = (running.clone(), stop.clone());
    let h = sched.spawn(move || {
        r2.store(true, Ordering::Release);
        while !s2.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let own = purloin_sched::current().unwrap().cpu_time().unwrap();
        purloin_sched::park();
        own
    });
    while !running.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    // The green thread was switched in before `running`: it has run at least `held` when the
    // dump refreshes the clock.
    let held = hold();
    drop(sched.dump());
    let outside = h.cpu_time().unwrap();
    assert!(outside >= held, "read while running: {outside:?} < {held:?}");
    stop.store(true, Ordering::Release);
    while sched.parked().is_empty() {
        std::thread::yield_now();
    }
    let at_park = h.cpu_time().unwrap();
    assert!(at_park >= held, "charged at the park: {at_park:?} < {held:?}");
    hold();
    drop(sched.dump());
    assert_eq!(h.cpu_time(), Some(at_park), "nothing is charged while parked");
    h.thread().unpark();
    let own = h.join().unwrap();
    assert!(own >= held, "read by itself: {own:?} < {held:?}");
}

/// A yield that queues the green thread (another one is runnable) charges the run before it;
/// entering and leaving a blocking section charge the runs before and in it. Each of the three
/// stretches lasts at least what the test holds it for, so the total is at least their sum.
#[test]
fn yields_and_blocking_sections_charge_the_run() {
    let _w = common::watchdog("cpu time at yields", Duration::from_secs(120));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_secs(3600)).build().unwrap();
    let phase = Arc::new(AtomicU32::new(0));
    let p2 = phase.clone();
    // Keeps the worker's queue non-empty, so the yield of `h` queues it behind this one.
    let other = sched.spawn(|| {
        for _ in 0..3 {
            purloin_sched::yield_now();
        }
    });
    let h = sched.spawn(move || {
        // Waits in phase `n` until the test moves it on.
        let stay = |n: u32| {
            p2.store(n, Ordering::Release);
            while p2.load(Ordering::Acquire) == n {
                std::hint::spin_loop();
            }
        };
        stay(1);
        purloin_sched::yield_now();
        let after_yield = purloin_sched::current().unwrap().cpu_time().unwrap();
        stay(3);
        purloin_sched::enter_blocking();
        stay(5);
        purloin_sched::exit_blocking();
        let after_blocking = purloin_sched::current().unwrap().cpu_time().unwrap();
        (after_yield, after_blocking)
    });
    let mut held = Vec::new();
    for n in [1, 3, 5] {
        while phase.load(Ordering::Acquire) != n {
            std::thread::yield_now();
        }
        held.push(hold());
        drop(sched.dump());
        phase.store(n + 1, Ordering::Release);
    }
    let (after_yield, after_blocking) = h.join().unwrap();
    other.join().unwrap();
    assert!(after_yield >= held[0], "{after_yield:?} < {:?}", held[0]);
    let all: Duration = held.iter().sum();
    assert!(after_blocking >= all, "{after_blocking:?} < {all:?}");
}
