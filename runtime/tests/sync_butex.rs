//! Butex behaviour: the futex contract for green and OS waiters in one queue, FIFO wakes,
//! counts, timeouts, and unwinding waiters at runtime shutdown.
#![cfg(not(loom))]

mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use purloin::sync::{Butex, ButexWait};
use sync_util::{DropCounter, runtime, wait_until, watchdog};

#[test]
fn value_mismatch_returns_without_sleeping() {
    let b = Butex::new(3);
    assert_eq!(b.wait(4, None), ButexWait::ValueChanged);
    let rt = runtime(1);
    rt.block_on(|| assert_eq!(b.wait(4, None), ButexWait::ValueChanged));
}

#[test]
fn wake_with_nobody_waiting_returns_zero() {
    let b = Butex::new(0);
    assert_eq!(b.wake_one(), 0);
    assert_eq!(b.wake_all(), 0);
    assert_eq!(b.wake(0), 0);
    assert_eq!(b.waiters(), 0);
}

#[test]
fn timeouts_on_os_and_green_threads() {
    let _w = watchdog("butex timeouts", Duration::from_secs(30));
    let b = Butex::new(0);
    let start = Instant::now();
    assert_eq!(b.wait_timeout(0, Duration::from_millis(5)), ButexWait::TimedOut);
    assert!(start.elapsed() >= Duration::from_millis(5));
    let rt = runtime(2);
    rt.block_on(|| {
        let start = Instant::now();
        assert_eq!(b.wait_timeout(0, Duration::from_millis(5)), ButexWait::TimedOut);
        assert!(start.elapsed() >= Duration::from_millis(5));
    });
    // A deadline in the past times out at once (after the value check).
    assert_eq!(b.wait(0, Some(Instant::now())), ButexWait::TimedOut);
    assert_eq!(b.waiters(), 0, "timed-out waiters leave the queue");
}

/// Green waiters and OS-thread waiters share one queue; `wake_all` wakes both kinds, woken by a
/// green thread and by an OS thread.
#[test]
fn mixed_green_and_os_waiters_share_one_queue() {
    let _w = watchdog("mixed waiters", Duration::from_secs(60));
    let rt = runtime(2);
    for waker_is_green in [false, true] {
        let b = Arc::new(Butex::new(0));
        let woke = Arc::new(AtomicUsize::new(0));
        let mut green = Vec::new();
        for _ in 0..4 {
            let (b, woke) = (b.clone(), woke.clone());
            green.push(rt.spawn(move || {
                while b.value().load(Ordering::Acquire) == 0 {
                    b.wait(0, None);
                }
                woke.fetch_add(1, Ordering::SeqCst);
            }));
        }
        let os: Vec<_> = (0..3)
            .map(|_| {
                let (b, woke) = (b.clone(), woke.clone());
                thread::spawn(move || {
                    while b.value().load(Ordering::Acquire) == 0 {
                        b.wait(0, None);
                    }
                    woke.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        wait_until(|| b.waiters() == 7);
        let wake = {
            let b = b.clone();
            move || {
                b.value().store(1, Ordering::Release);
                b.wake_all()
            }
        };
        let n = if waker_is_green { rt.spawn(wake).join().unwrap() } else { wake() };
        assert_eq!(n, 7, "wake_all counts every waiter");
        for h in green {
            h.join().unwrap();
        }
        for h in os {
            h.join().unwrap();
        }
        assert_eq!(woke.load(Ordering::SeqCst), 7);
        assert_eq!(b.waiters(), 0);
    }
}

/// `wake_one` wakes the longest-waiting thread first, whatever its kind.
#[test]
fn wake_one_is_fifo_across_kinds() {
    let _w = watchdog("fifo", Duration::from_secs(60));
    let rt = runtime(2);
    let b = Arc::new(Butex::new(0));
    let order = Arc::new(purloin::sync::Mutex::new(Vec::new()));
    let mut green = Vec::new();
    let mut os = Vec::new();
    for i in 0..6usize {
        let (b2, order2) = (b.clone(), order.clone());
        let body = move || {
            // Wait for our own "ticket" value: each wake_one below is followed by a store.
            loop {
                if b2.wait(0, None) == ButexWait::Woken {
                    break;
                }
            }
            order2.lock().unwrap().push(i);
        };
        if i % 2 == 0 {
            green.push(rt.spawn(body));
        } else {
            os.push(thread::spawn(body));
        }
        wait_until(|| b.waiters() == i + 1);
    }
    for i in 0..6 {
        assert_eq!(b.wake_one(), 1);
        wait_until(|| order.lock().unwrap().len() == i + 1);
    }
    for h in green {
        h.join().unwrap();
    }
    for h in os {
        h.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn wake_n_wakes_at_most_n() {
    let _w = watchdog("wake n", Duration::from_secs(60));
    let rt = runtime(2);
    let b = Arc::new(Butex::new(0));
    let woke = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..5)
        .map(|_| {
            let (b, woke) = (b.clone(), woke.clone());
            rt.spawn(move || {
                while b.wait(0, None) != ButexWait::Woken {}
                woke.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    wait_until(|| b.waiters() == 5);
    assert_eq!(b.wake(2), 2);
    wait_until(|| woke.load(Ordering::SeqCst) == 2);
    assert_eq!(b.waiters(), 3);
    assert_eq!(b.wake(10), 3);
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(woke.load(Ordering::SeqCst), 5);
}

/// A change followed by a wake is never lost, over many rounds of a green/OS ping-pong on two
/// butexes (a lost wake-up hangs, and the watchdog fails the test).
#[test]
fn no_lost_wakeups_in_a_green_os_ping_pong() {
    let _w = watchdog("ping-pong", Duration::from_secs(120));
    let rt = runtime(2);
    let ping = Arc::new(Butex::new(0));
    let pong = Arc::new(Butex::new(0));
    const ROUNDS: u32 = 20_000;
    let (pi, po) = (ping.clone(), pong.clone());
    let green = rt.spawn(move || {
        for i in 1..=ROUNDS {
            while pi.value().load(Ordering::Acquire) < i {
                pi.wait(i - 1, None);
            }
            po.value().store(i, Ordering::Release);
            po.wake_one();
        }
    });
    for i in 1..=ROUNDS {
        ping.value().store(i, Ordering::Release);
        ping.wake_one();
        while pong.value().load(Ordering::Acquire) < i {
            pong.wait(i - 1, None);
        }
    }
    green.join().unwrap();
}

/// Timeouts racing wakes: every wait ends, and a waiter that reports `Woken` was really woken
/// (counted by the waker).
#[test]
fn timeouts_race_wakes_without_losing_counts() {
    let _w = watchdog("timeout vs wake", Duration::from_secs(120));
    let rt = runtime(2);
    let b = Arc::new(Butex::new(0));
    let woken_seen = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let (b, seen) = (b.clone(), woken_seen.clone());
            rt.spawn(move || {
                for i in 0..500u64 {
                    let d = Duration::from_micros(i % 50);
                    if b.wait_timeout(0, d) == ButexWait::Woken {
                        seen.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    let mut woken_total = 0;
    while !waiters.iter().all(|h| h.is_finished()) {
        woken_total += b.wake_one();
        thread::yield_now();
    }
    for h in waiters {
        h.join().unwrap();
    }
    assert_eq!(woken_seen.load(Ordering::SeqCst), woken_total);
    assert_eq!(b.waiters(), 0);
}

/// Shutdown unwinds green threads parked on a butex: their destructors run and their
/// on-stack queue entries are unlinked (the butex is usable afterwards, with no stale entry).
#[test]
fn shutdown_unwinds_butex_waiters() {
    let _w = watchdog("butex shutdown", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let b = Arc::new(Butex::new(0));
    {
        let rt = runtime(2);
        for _ in 0..10 {
            let (b, d) = (b.clone(), drops.clone());
            drop(rt.spawn(move || {
                let _c = DropCounter(d);
                loop {
                    b.wait(0, None);
                }
            }));
        }
        wait_until(|| b.waiters() == 10);
        rt.shutdown_timeout(Duration::from_millis(100));
    }
    assert_eq!(drops.load(Ordering::SeqCst), 10);
    assert_eq!(b.waiters(), 0);
    assert_eq!(b.wake_all(), 0);
}
