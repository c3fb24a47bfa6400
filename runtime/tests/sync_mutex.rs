//! Mutex behaviour: std's promises (exclusion, try_lock, poisoning, into_inner, get_mut,
//! unsized data), mixed green/OS contention, starvation freedom, and unwinding at shutdown.
#![cfg(not(loom))]

mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use purloin::sync::{Mutex, TryLockError};
use sync_util::{DropCounter, runtime, wait_until, watchdog};

#[test]
fn lock_gives_exclusive_access() {
    let m = Mutex::new(5);
    {
        let mut g = m.lock().unwrap();
        *g += 1;
        assert!(matches!(m.try_lock(), Err(TryLockError::WouldBlock)));
    }
    assert_eq!(*m.lock().unwrap(), 6);
    assert_eq!(m.into_inner().unwrap(), 6);
}

#[test]
fn get_mut_and_default_and_from() {
    let mut m: Mutex<Vec<u8>> = Mutex::default();
    m.get_mut().unwrap().push(1);
    assert_eq!(*m.lock().unwrap(), vec![1]);
    let m = Mutex::from(7);
    assert_eq!(*m.lock().unwrap(), 7);
}

#[test]
fn unsized_data() {
    let m: &Mutex<[u32]> = &Mutex::new([1, 2, 3]);
    m.lock().unwrap()[1] = 20;
    assert_eq!(&*m.lock().unwrap(), &[1, 20, 3]);
}

#[test]
fn debug_shows_data_or_locked() {
    let m = Mutex::new(1);
    assert!(format!("{m:?}").contains("data: 1"));
    let _g = m.lock().unwrap();
    assert!(format!("{m:?}").contains("<locked>"));
}

#[test]
fn static_mutex_is_const() {
    static M: Mutex<u32> = Mutex::new(0);
    *M.lock().unwrap() += 1;
    assert_eq!(*M.lock().unwrap(), 1);
}

/// Green threads and OS threads increment under one mutex; every increment is counted once.
#[test]
fn contended_counter_green_and_os() {
    let _w = watchdog("mutex contention", Duration::from_secs(120));
    let rt = runtime(2);
    let m = Arc::new(Mutex::new(0u64));
    const PER: u64 = 20_000;
    let green: Vec<_> = (0..6)
        .map(|_| {
            let m = m.clone();
            rt.spawn(move || {
                for i in 0..PER {
                    let mut g = m.lock().unwrap();
                    *g += 1;
                    if i % 64 == 0 {
                        // Hold it across a scheduling point now and then.
                        purloin::yield_now();
                    }
                }
            })
        })
        .collect();
    let os: Vec<_> = (0..2)
        .map(|_| {
            let m = m.clone();
            thread::spawn(move || {
                for _ in 0..PER {
                    *m.lock().unwrap() += 1;
                }
            })
        })
        .collect();
    for h in green {
        h.join().unwrap();
    }
    for h in os {
        h.join().unwrap();
    }
    assert_eq!(*m.lock().unwrap(), 8 * PER);
}

/// A green thread waiting on a mutex held by another green thread of the same (single) worker
/// parks instead of blocking the worker, so the holder can run and release it (a std mutex
/// would deadlock here).
#[test]
fn waiting_green_thread_does_not_block_its_worker() {
    let _w = watchdog("single worker", Duration::from_secs(60));
    let rt = runtime(1);
    rt.block_on(|| {
        let m = Arc::new(Mutex::new(0));
        let g = m.lock().unwrap();
        let m2 = m.clone();
        let h = purloin::spawn(move || {
            *m2.lock().unwrap() += 1;
        });
        // Let the child run and park on the mutex.
        for _ in 0..10 {
            purloin::yield_now();
        }
        drop(g);
        h.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 1);
    });
}

#[test]
fn poisoned_by_a_panicking_green_thread() {
    let _w = watchdog("poison", Duration::from_secs(60));
    let rt = runtime(2);
    let m = Arc::new(Mutex::new(1));
    let m2 = m.clone();
    let r = rt
        .spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("boom (expected by the test)");
        })
        .join();
    assert!(r.is_err());
    assert!(m.is_poisoned());
    let err = m.lock().unwrap_err();
    assert_eq!(**err.get_ref(), 1);
    drop(err);
    assert!(matches!(m.try_lock(), Err(TryLockError::Poisoned(_))));
    m.clear_poison();
    assert!(!m.is_poisoned());
    assert_eq!(*m.lock().unwrap(), 1);
    let m = Arc::try_unwrap(m).unwrap();
    assert_eq!(m.into_inner().unwrap(), 1);
}

#[test]
fn into_inner_of_poisoned_mutex_is_err() {
    let m = Arc::new(Mutex::new(String::from("x")));
    let m2 = m.clone();
    let _ = thread::spawn(move || {
        let _g = m2.lock().unwrap();
        panic!("boom (expected by the test)");
    })
    .join();
    let m = Arc::try_unwrap(m).unwrap();
    assert_eq!(m.into_inner().unwrap_err().into_inner(), "x");
}

/// Starvation freedom: a green thread that wants the lock gets it while two others keep
/// re-locking it in tight loops (barging alone could starve it; the hand-off mode after 1 ms
/// bounds the wait). The watchdog is the only limit: no timing is asserted.
#[test]
fn a_waiter_is_not_starved_by_barging_lockers() {
    let _w = watchdog("starvation", Duration::from_secs(120));
    let rt = runtime(2);
    let m = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let hammers: Vec<_> = (0..2)
        .map(|_| {
            let (m, stop) = (m.clone(), stop.clone());
            rt.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut g = m.lock().unwrap();
                    *g += 1;
                    // A critical section long enough that others queue behind it.
                    for _ in 0..200 {
                        std::hint::spin_loop();
                    }
                    drop(g);
                }
            })
        })
        .collect();
    wait_until(|| *m.lock().unwrap() > 1000);
    for _ in 0..50 {
        let m2 = m.clone();
        rt.spawn(move || drop(m2.lock().unwrap())).join().unwrap();
        drop(m.lock().unwrap()); // and from an OS thread
    }
    stop.store(true, Ordering::Relaxed);
    for h in hammers {
        h.join().unwrap();
    }
}

/// Shutdown unwinds green threads parked on a mutex (whose holder is parked forever): their
/// destructors run, their queue entries are unlinked, and the mutex works afterwards.
#[test]
fn shutdown_unwinds_mutex_waiters() {
    let _w = watchdog("mutex shutdown", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let m = Arc::new(Mutex::new(0));
    {
        let rt = runtime(2);
        let (m2, d) = (m.clone(), drops.clone());
        let holding = Arc::new(AtomicBool::new(false));
        let h2 = holding.clone();
        drop(rt.spawn(move || {
            let _c = DropCounter(d);
            let _g = m2.lock().unwrap();
            h2.store(true, Ordering::SeqCst);
            loop {
                purloin::park();
            }
        }));
        wait_until(|| holding.load(Ordering::SeqCst));
        for _ in 0..8 {
            let (m, d) = (m.clone(), drops.clone());
            drop(rt.spawn(move || {
                let _c = DropCounter(d);
                let _g = m.lock();
                loop {
                    purloin::park();
                }
            }));
        }
        // All nine parked (the holder, and eight waiters on the mutex).
        wait_until(|| rt.scheduler().parked().len() == 9);
        rt.shutdown_timeout(Duration::from_millis(100));
    }
    assert_eq!(drops.load(Ordering::SeqCst), 9);
    // The holder was unwound while holding: poisoned, but unlocked and consistent.
    assert!(m.is_poisoned());
    m.clear_poison();
    *m.lock().unwrap() += 1;
    assert_eq!(*m.lock().unwrap(), 1);
}
