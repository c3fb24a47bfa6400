//! Condvar behaviour: std's promises (notify_one/all, wait_while, timeouts, poisoning) with
//! green and OS waiters and notifiers, and unwinding at shutdown.
#![cfg(not(loom))]

mod sync_util;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use purloin::sync::{Condvar, Mutex};
use sync_util::{DropCounter, runtime, wait_until, watchdog};

#[test]
fn notify_one_wakes_a_green_waiter() {
    let _w = watchdog("notify_one", Duration::from_secs(60));
    let rt = runtime(2);
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let p = pair.clone();
    let h = rt.spawn(move || {
        let (m, c) = &*p;
        let mut ready = m.lock().unwrap();
        while !*ready {
            ready = c.wait(ready).unwrap();
        }
    });
    let (m, c) = &*pair;
    *m.lock().unwrap() = true;
    c.notify_one();
    h.join().unwrap();
}

#[test]
fn notify_all_wakes_green_and_os_waiters() {
    let _w = watchdog("notify_all", Duration::from_secs(60));
    let rt = runtime(2);
    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let woke = Arc::new(AtomicUsize::new(0));
    let waiting = Arc::new(AtomicUsize::new(0));
    let body = {
        let (pair, woke, waiting) = (pair.clone(), woke.clone(), waiting.clone());
        move || {
            let (m, c) = &*pair;
            let mut g = m.lock().unwrap();
            waiting.fetch_add(1, Ordering::SeqCst);
            g = c.wait_while(g, |go| *go == 0).unwrap();
            assert_eq!(*g, 1);
            woke.fetch_add(1, Ordering::SeqCst);
        }
    };
    let green: Vec<_> = (0..5).map(|_| rt.spawn(body.clone())).collect();
    let os: Vec<_> = (0..3).map(|_| thread::spawn(body.clone())).collect();
    wait_until(|| waiting.load(Ordering::SeqCst) == 8);
    {
        let (m, c) = &*pair;
        *m.lock().unwrap() = 1;
        c.notify_all();
    }
    for h in green {
        h.join().unwrap();
    }
    for h in os {
        h.join().unwrap();
    }
    assert_eq!(woke.load(Ordering::SeqCst), 8);
}

/// A bounded queue with two condition variables, producers and consumers of both kinds:
/// every item is consumed exactly once (sum check) and nobody hangs.
#[test]
fn producer_consumer_queue_exactly_once() {
    let _w = watchdog("condvar queue", Duration::from_secs(120));
    let rt = runtime(2);
    struct Q {
        items: Mutex<VecDeque<u64>>,
        not_empty: Condvar,
        not_full: Condvar,
    }
    let q = Arc::new(Q {
        items: Mutex::new(VecDeque::new()),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    });
    const PER: u64 = 20_000;
    const CAP: usize = 8;
    let produce = |q: Arc<Q>, base: u64| {
        move || {
            for i in 0..PER {
                let mut g =
                    q.not_full.wait_while(q.items.lock().unwrap(), |v| v.len() >= CAP).unwrap();
                g.push_back(base + i);
                drop(g);
                q.not_empty.notify_one();
            }
        }
    };
    let consume = |q: Arc<Q>| {
        move || {
            let mut sum = 0u64;
            for _ in 0..PER {
                let mut g =
                    q.not_empty.wait_while(q.items.lock().unwrap(), |v| v.is_empty()).unwrap();
                sum += g.pop_front().unwrap();
                drop(g);
                q.not_full.notify_one();
            }
            sum
        }
    };
    let p1 = rt.spawn(produce(q.clone(), 0));
    let p2 = thread::spawn(produce(q.clone(), 1_000_000));
    let c1 = rt.spawn(consume(q.clone()));
    let c2 = thread::spawn(consume(q.clone()));
    p1.join().unwrap();
    p2.join().unwrap();
    let total = c1.join().unwrap() + c2.join().unwrap();
    let expect: u64 = (0..PER).sum::<u64>() * 2 + 1_000_000 * PER;
    assert_eq!(total, expect);
}

#[test]
fn wait_timeout_times_out_green_and_os() {
    let _w = watchdog("wait_timeout", Duration::from_secs(60));
    let m = Mutex::new(());
    let c = Condvar::new();
    let start = Instant::now();
    let (_g, r) = c.wait_timeout(m.lock().unwrap(), Duration::from_millis(5)).unwrap();
    assert!(r.timed_out());
    assert!(start.elapsed() >= Duration::from_millis(5));
    drop(_g);
    let rt = runtime(1);
    rt.block_on(|| {
        let start = Instant::now();
        let (_g, r) = c.wait_timeout(m.lock().unwrap(), Duration::from_millis(5)).unwrap();
        assert!(r.timed_out());
        assert!(start.elapsed() >= Duration::from_millis(5));
    });
}

#[test]
fn wait_timeout_while_returns_early_when_the_condition_holds() {
    let _w = watchdog("wait_timeout_while", Duration::from_secs(60));
    let rt = runtime(2);
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let p = pair.clone();
    let h = rt.spawn(move || {
        let (m, c) = &*p;
        let (g, r) =
            c.wait_timeout_while(m.lock().unwrap(), Duration::from_secs(3600), |x| !*x).unwrap();
        assert!(*g);
        assert!(!r.timed_out());
    });
    let (m, c) = &*pair;
    wait_until(|| {
        *m.lock().unwrap() = true;
        c.notify_all();
        h.is_finished()
    });
    h.join().unwrap();
    // And it times out when the condition never holds.
    let (g, r) =
        c.wait_timeout_while(m.lock().unwrap(), Duration::from_millis(2), |_| true).unwrap();
    assert!(r.timed_out());
    drop(g);
}

#[test]
fn wait_returns_poison_error_after_a_panicking_holder() {
    let _w = watchdog("condvar poison", Duration::from_secs(60));
    let pair = Arc::new((Mutex::new(0), Condvar::new()));
    let p = pair.clone();
    let rt = runtime(2);
    let waiter = rt.spawn(move || {
        let (m, c) = &*p;
        let g = m.lock().unwrap();
        let r = c.wait(g);
        r.is_err()
    });
    let (m, c) = &*pair;
    // Wait until the waiter released the mutex inside `wait`, then poison it.
    let p2 = pair.clone();
    wait_until(|| rt.scheduler().parked().len() == 1);
    let _ = thread::spawn(move || {
        let _g = p2.0.lock().unwrap();
        panic!("boom (expected by the test)");
    })
    .join();
    assert!(m.is_poisoned());
    c.notify_all();
    assert!(waiter.join().unwrap(), "the woken waiter sees the poison");
}

/// Shutdown unwinds green threads waiting on a condition variable: each re-takes the mutex
/// while unwinding (so its guard's destructor is valid), destructors run, nothing is left
/// queued.
#[test]
fn shutdown_unwinds_condvar_waiters() {
    let _w = watchdog("condvar shutdown", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let pair = Arc::new((Mutex::new(()), Condvar::new()));
    {
        let rt = runtime(2);
        for _ in 0..6 {
            let (p, d) = (pair.clone(), drops.clone());
            drop(rt.spawn(move || {
                let _c = DropCounter(d);
                let (m, c) = &*p;
                let mut g = m.lock().unwrap();
                loop {
                    g = c.wait(g).unwrap_or_else(|e| e.into_inner());
                }
            }));
        }
        wait_until(|| rt.scheduler().parked().len() == 6);
        rt.shutdown_timeout(Duration::from_millis(100));
    }
    assert_eq!(drops.load(Ordering::SeqCst), 6);
    let (m, c) = &*pair;
    // Unlocked and usable (poisoned by the unwinding holders' guards).
    m.clear_poison();
    drop(m.lock().unwrap());
    c.notify_all();
}
