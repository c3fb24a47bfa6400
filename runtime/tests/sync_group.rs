//! Barrier, WaitGroup and Semaphore behaviour with green and OS threads: rounds and leaders,
//! Go's WaitGroup contract, FIFO permits, timeouts, and unwinding at shutdown.
#![cfg(not(loom))]

mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use purloin::sync::{Barrier, Mutex, Semaphore, WaitGroup};
use sync_util::{DropCounter, runtime, wait_until, watchdog};

#[test]
fn barrier_rounds_have_one_leader_and_release_together() {
    let _w = watchdog("barrier", Duration::from_secs(60));
    let rt = runtime(2);
    const N: usize = 6;
    const ROUNDS: usize = 200;
    let b = Arc::new(Barrier::new(N));
    let arrived = Arc::new(AtomicUsize::new(0));
    let leaders = Arc::new(AtomicUsize::new(0));
    let body = |b: Arc<Barrier>, arrived: Arc<AtomicUsize>, leaders: Arc<AtomicUsize>| {
        move || {
            for round in 0..ROUNDS {
                arrived.fetch_add(1, Ordering::SeqCst);
                if b.wait().is_leader() {
                    leaders.fetch_add(1, Ordering::SeqCst);
                }
                // Nobody leaves a round before everyone arrived in it.
                assert!(arrived.load(Ordering::SeqCst) >= (round + 1) * N);
            }
        }
    };
    let green: Vec<_> =
        (0..N - 2).map(|_| rt.spawn(body(b.clone(), arrived.clone(), leaders.clone()))).collect();
    let os: Vec<_> =
        (0..2).map(|_| thread::spawn(body(b.clone(), arrived.clone(), leaders.clone()))).collect();
    for h in green {
        h.join().unwrap();
    }
    for h in os {
        h.join().unwrap();
    }
    assert_eq!(leaders.load(Ordering::SeqCst), ROUNDS);
}

#[test]
fn barrier_of_zero_or_one_never_blocks() {
    assert!(Barrier::new(0).wait().is_leader());
    assert!(Barrier::new(1).wait().is_leader());
}

#[test]
fn wait_group_waits_for_every_done() {
    let _w = watchdog("waitgroup", Duration::from_secs(60));
    let rt = runtime(2);
    for _ in 0..50 {
        let wg = Arc::new(WaitGroup::new());
        let sum = Arc::new(AtomicUsize::new(0));
        wg.add(20);
        for i in 0..20 {
            let (wg, sum) = (wg.clone(), sum.clone());
            let body = move || {
                sum.fetch_add(i, Ordering::Relaxed);
                wg.done();
            };
            if i % 5 == 0 {
                thread::spawn(body);
            } else {
                drop(rt.spawn(body));
            }
        }
        // Waiters of both kinds.
        let (wg2, sum2) = (wg.clone(), sum.clone());
        let green_waiter = rt.spawn(move || {
            wg2.wait();
            sum2.load(Ordering::Relaxed)
        });
        wg.wait();
        assert_eq!(sum.load(Ordering::Relaxed), 190);
        assert_eq!(green_waiter.join().unwrap(), 190);
        assert_eq!(wg.count(), 0);
    }
}

#[test]
fn wait_group_timeout_and_reuse() {
    let wg = WaitGroup::new();
    assert!(wg.wait_timeout(Duration::from_millis(1)), "zero count: no wait");
    wg.add(1);
    assert!(!wg.wait_timeout(Duration::from_millis(2)));
    wg.done();
    assert!(wg.wait_timeout(Duration::from_millis(1)));
    wg.add(2);
    wg.done();
    wg.done();
    wg.wait();
}

#[test]
#[should_panic(expected = "already zero")]
fn wait_group_done_below_zero_panics() {
    WaitGroup::new().done();
}

#[test]
fn semaphore_limits_concurrency() {
    let _w = watchdog("semaphore", Duration::from_secs(60));
    let rt = runtime(2);
    let sem = Arc::new(Semaphore::new(3));
    let inside = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let body = |sem: Arc<Semaphore>, inside: Arc<AtomicUsize>, max: Arc<AtomicUsize>| {
        move || {
            for _ in 0..500 {
                let _p = sem.acquire();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                if purloin::in_green_thread() {
                    purloin::yield_now();
                }
                inside.fetch_sub(1, Ordering::SeqCst);
            }
        }
    };
    let green: Vec<_> =
        (0..8).map(|_| rt.spawn(body(sem.clone(), inside.clone(), max.clone()))).collect();
    let os: Vec<_> =
        (0..2).map(|_| thread::spawn(body(sem.clone(), inside.clone(), max.clone()))).collect();
    for h in green {
        h.join().unwrap();
    }
    for h in os {
        h.join().unwrap();
    }
    assert!(max.load(Ordering::SeqCst) <= 3);
    assert_eq!(sem.available_permits(), 3);
}

/// Requests are served in FIFO order: a big request queued first is not overtaken by smaller
/// ones that arrive later (even when their permits are available).
#[test]
fn semaphore_is_fifo_for_big_requests() {
    let _w = watchdog("semaphore fifo", Duration::from_secs(60));
    let rt = runtime(2);
    let sem = Arc::new(Semaphore::new(0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let (s, o) = (sem.clone(), order.clone());
    let big = rt.spawn(move || {
        let p = s.acquire_many(3);
        o.lock().unwrap().push("big");
        drop(p);
    });
    wait_until(|| rt.scheduler().parked().len() == 1);
    let (s, o) = (sem.clone(), order.clone());
    let small = rt.spawn(move || {
        let _p = s.acquire();
        o.lock().unwrap().push("small");
    });
    wait_until(|| rt.scheduler().parked().len() == 2);
    sem.add_permits(1);
    // One permit is there, but the small request queued behind the big one.
    assert!(sem.try_acquire().is_none());
    sem.add_permits(2);
    big.join().unwrap();
    small.join().unwrap();
    assert_eq!(*order.lock().unwrap(), vec!["big", "small"]);
    assert_eq!(sem.available_permits(), 3);
}

/// A timed-out request at the head of the queue lets the requests behind it through.
#[test]
fn semaphore_timeout_unblocks_the_queue() {
    let _w = watchdog("semaphore timeout", Duration::from_secs(60));
    let rt = runtime(2);
    let sem = Arc::new(Semaphore::new(1));
    let s = sem.clone();
    let big = rt.spawn(move || {
        s.acquire_deadline(5, Some(std::time::Instant::now() + Duration::from_millis(20))).is_none()
    });
    // Either `big` is parked in the queue, or (on a loaded machine) its 20 ms already ran out:
    // waiting only for "parked" could wait forever after it timed out.
    wait_until(|| rt.scheduler().parked().len() == 1 || big.is_finished());
    let s = sem.clone();
    let small = rt.spawn(move || s.acquire().forget());
    assert!(big.join().unwrap(), "the big request times out");
    assert_eq!(small.join().unwrap(), 1, "and the small one then gets the free permit");
    assert_eq!(sem.available_permits(), 0);
    assert!(sem.try_acquire().is_none());
    sem.add_permits(2);
    let p = sem.try_acquire_many(2).unwrap();
    assert_eq!(p.num_permits(), 2);
    assert!(sem.acquire_timeout(Duration::from_millis(1)).is_none());
}

#[test]
fn shutdown_unwinds_group_waiters() {
    let _w = watchdog("group shutdown", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let sem = Arc::new(Semaphore::new(0));
    let wg = Arc::new(WaitGroup::new());
    wg.add(1);
    let barrier = Arc::new(Barrier::new(10));
    {
        let rt = runtime(2);
        for i in 0..9 {
            let (sem, wg, barrier, d) = (sem.clone(), wg.clone(), barrier.clone(), drops.clone());
            drop(rt.spawn(move || {
                let _c = DropCounter(d);
                match i % 3 {
                    0 => drop(sem.acquire_many(2)),
                    1 => wg.wait(),
                    _ => drop(barrier.wait()),
                }
            }));
        }
        wait_until(|| rt.scheduler().parked().len() == 9);
        rt.shutdown_timeout(Duration::from_millis(100));
    }
    assert_eq!(drops.load(Ordering::SeqCst), 9);
    // The semaphore's queue is empty again: permits flow to new requests.
    sem.add_permits(2);
    assert_eq!(sem.try_acquire_many(2).map(|p| p.forget()), Some(2));
}
