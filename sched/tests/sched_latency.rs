//! The scheduling-latency histogram (`Stats::sched_latency`): always on, sampled at the
//! documented rate, and a green thread that waits behind a busy worker lands in a long bucket.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use purloin_sched::{Builder, DurationHistogram, GreenThread, SCHED_LATENCY_PERIOD};

/// Green threads queued behind a worker that runs a busy green thread wait at least as long as
/// the test keeps it busy after queueing them (`held`, measured): the samples among them are
/// in buckets whose bound is above `held`. They are spawned from this plain thread, which
/// times one in `SCHED_LATENCY_PERIOD` of such queueings (counted process-wide, so the other
/// test of this file may take two of the numbers): `VICTIMS` of them give at least 8 samples.
#[test]
fn a_wait_behind_a_busy_worker_is_a_long_sample() {
    const VICTIMS: usize = 10 * SCHED_LATENCY_PERIOD as usize;
    let _w = common::watchdog("sched latency", Duration::from_secs(120));
    // No spare worker may take the queued green threads while the only worker is busy.
    let sched = Builder::new()
        .workers(1)
        .max_spare_workers(0)
        .long_run_threshold(Duration::from_secs(3600))
        .build()
        .unwrap();
    let busy = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let (b2, r2) = (busy.clone(), release.clone());
    let hog = sched.spawn(move || {
        b2.store(true, Ordering::Release);
        while !r2.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    });
    while !busy.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let before = sched.stats().sched_latency();
    let victims: Vec<_> = (0..VICTIMS).map(|_| sched.spawn(|| ())).collect();
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(5) {
        std::hint::spin_loop();
    }
    let held = t.elapsed();
    release.store(true, Ordering::Release);
    hog.join().unwrap();
    victims.into_iter().for_each(|h| h.join().unwrap());
    let after = sched.stats().sched_latency();
    let long = |h: &DurationHistogram| {
        (0..DurationHistogram::BUCKETS)
            .filter(|&i| DurationHistogram::upper_bound(i).is_none_or(|b| b > held))
            .map(|i| h.buckets[i])
            .sum::<u64>()
    };
    let new_long = long(&after) - long(&before);
    assert!(new_long >= 8, "{new_long} long samples (held {held:?}): {after:?}");
    assert!(after.sum() - before.sum() >= held * 8, "{after:?}");
    assert_eq!(sched.stats().sched_latencies.len(), 1, "one histogram per processor");
}

/// Two green threads on one worker pass a turn back and forth `ROUNDS` times, each waking the
/// other, which is parked: every switch-in but the two first runs follows exactly one
/// queueing by the worker. The worker times one of every 32 to 95 of its queueings (a draw in
/// `[P/2, 3P/2)`), so the samples are within those bounds (give or take the first draw and
/// the two spawns from this thread, which may be timed too).
#[test]
fn about_one_in_the_period_is_timed() {
    const ROUNDS: usize = 3200;
    let _w = common::watchdog("sched latency rate", Duration::from_secs(120));
    let sched = Builder::new().workers(1).max_spare_workers(0).build().unwrap();
    let turn = Arc::new(AtomicUsize::new(0));
    let others: Arc<[OnceLock<GreenThread>; 2]> = Arc::new([OnceLock::new(), OnceLock::new()]);
    let player = |me: usize| {
        let (turn, others) = (turn.clone(), others.clone());
        sched.spawn(move || {
            for _ in 0..ROUNDS {
                while turn.load(Ordering::Acquire) != me {
                    purloin_sched::park();
                }
                turn.store(1 - me, Ordering::Release);
                others[1 - me].wait().unpark();
            }
        })
    };
    let (a, b) = (player(0), player(1));
    for (i, h) in [&a, &b].into_iter().enumerate() {
        others[i].set(*h.thread()).unwrap();
    }
    a.join().unwrap();
    b.join().unwrap();
    let stats = sched.stats();
    let samples = stats.sched_latency().count();
    let queued = stats.total.switches - 2;
    let period = u64::from(SCHED_LATENCY_PERIOD);
    assert!(queued >= 2 * ROUNDS as u64 - 2, "{queued} queueings");
    let (lo, hi) = (queued / (3 * period / 2) - 1, queued / (period / 2) + 4);
    assert!((lo..=hi).contains(&samples), "{samples} samples of {queued}: not in {lo}..={hi}");
}
