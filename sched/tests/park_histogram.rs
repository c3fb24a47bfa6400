//! The park-duration histogram (`Builder::park_histogram`): off by default; on, it counts
//! exactly the parks a program makes and puts a long park in a long bucket.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use purloin_sched::{Builder, ParkHistogram};

/// Parks `N` times; each park is released only once it has happened (the waker sees the
/// green thread parked after announcing park number `i`), so each `park` call switches out
/// exactly once and the histogram counts `N`. Park number `LONG` is held for at least `HOLD`:
/// it must land in a bucket whose upper bound is above `HOLD`, and the sum covers it.
#[test]
fn counts_each_park_once_and_buckets_a_long_one() {
    const N: u32 = 100;
    const LONG: u32 = 37;
    const HOLD: Duration = Duration::from_millis(20);
    let _w = common::watchdog("park histogram", Duration::from_secs(120));
    let sched = Builder::new().workers(2).park_histogram(true).build().unwrap();
    let round = Arc::new(AtomicU32::new(u32::MAX));
    let r2 = round.clone();
    let h = sched.spawn(move || {
        for i in 0..N {
            r2.store(i, Ordering::Release);
            purloin_sched::park();
        }
    });
    let mut held = Duration::ZERO;
    for i in 0..N {
        while round.load(Ordering::Acquire) != i || sched.parked().is_empty() {
            std::thread::yield_now();
        }
        if i == LONG {
            let t = Instant::now();
            std::thread::sleep(HOLD); // the park to measure lasts at least this
            held = t.elapsed();
        }
        h.thread().unpark();
    }
    h.join().unwrap();
    let stats = sched.stats();
    assert_eq!(stats.park_durations.len(), 2, "one histogram per processor");
    let parks = stats.park_histogram().unwrap();
    assert_eq!(parks.count(), u64::from(N), "{parks:?}");
    assert!(parks.sum() >= held, "{:?} < {held:?}", parks.sum());
    // The long park is in a bucket whose bound is above what it lasted at least.
    let long = (0..ParkHistogram::BUCKETS)
        .filter(|&i| ParkHistogram::upper_bound(i).is_none_or(|b| b > held))
        .map(|i| parks.buckets[i])
        .sum::<u64>();
    assert!(long >= 1, "no park of at least {held:?}: {parks:?}");
}

/// Off by default: no histogram in the stats, and parks are not timed.
#[test]
fn off_by_default() {
    let _w = common::watchdog("park histogram off", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let h = sched.spawn(purloin_sched::park);
    while sched.parked().is_empty() {
        std::thread::yield_now();
    }
    h.thread().unpark();
    h.join().unwrap();
    let stats = sched.stats();
    assert!(stats.park_durations.is_empty());
    assert!(stats.park_histogram().is_none());
}

/// Bucket bounds are the powers of two from 1.024 µs, and the last bucket is unbounded.
#[test]
fn bucket_bounds() {
    assert_eq!(ParkHistogram::upper_bound(0), Some(Duration::from_nanos(1 << 10)));
    assert_eq!(ParkHistogram::upper_bound(26), Some(Duration::from_nanos(1 << 36)));
    assert_eq!(ParkHistogram::upper_bound(27), None);
    assert_eq!(ParkHistogram::BUCKETS, 28);
}
