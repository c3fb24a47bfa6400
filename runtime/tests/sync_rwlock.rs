//! RwLock behaviour: std's promises (shared readers, exclusive writer, try_*, poisoning by
//! writers only), writer preference, mixed green/OS contention, unwinding at shutdown.
#![cfg(not(loom))]

mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use purloin::sync::{RwLock, TryLockError};
use sync_util::{DropCounter, runtime, wait_until, watchdog};

#[test]
fn readers_share_writers_exclude() {
    let l = RwLock::new(1);
    let r1 = l.read().unwrap();
    let r2 = l.try_read().unwrap();
    assert_eq!(*r1 + *r2, 2);
    assert!(matches!(l.try_write(), Err(TryLockError::WouldBlock)));
    drop((r1, r2));
    let mut w = l.write().unwrap();
    *w = 5;
    assert!(matches!(l.try_read(), Err(TryLockError::WouldBlock)));
    assert!(matches!(l.try_write(), Err(TryLockError::WouldBlock)));
    drop(w);
    assert_eq!(*l.read().unwrap(), 5);
    assert_eq!(l.into_inner().unwrap(), 5);
}

#[test]
fn misc_api() {
    static L: RwLock<Vec<u8>> = RwLock::new(Vec::new());
    L.write().unwrap().push(1);
    assert_eq!(L.read().unwrap().len(), 1);
    let mut l = RwLock::from(3);
    *l.get_mut().unwrap() += 1;
    assert_eq!(*l.read().unwrap(), 4);
    assert!(format!("{l:?}").contains("data: 4"));
    let l: RwLock<u8> = RwLock::default();
    let _w = l.write().unwrap();
    assert!(format!("{l:?}").contains("<locked>"));
    let u: &RwLock<[u8]> = &RwLock::new([1, 2]);
    u.write().unwrap()[0] = 9;
    assert_eq!(&*u.read().unwrap(), &[9, 2]);
}

#[test]
fn writer_panic_poisons_reader_panic_does_not() {
    let l = Arc::new(RwLock::new(0));
    let l2 = l.clone();
    let _ = thread::spawn(move || {
        let _r = l2.read().unwrap();
        panic!("reader panics (expected by the test)");
    })
    .join();
    assert!(!l.is_poisoned());
    let rt = runtime(1);
    let l3 = l.clone();
    let r = rt
        .spawn(move || {
            let _w = l3.write().unwrap();
            panic!("writer panics (expected by the test)");
        })
        .join();
    assert!(r.is_err());
    assert!(l.is_poisoned());
    assert!(l.read().is_err());
    assert!(matches!(l.try_write(), Err(TryLockError::Poisoned(_))));
    l.clear_poison();
    assert_eq!(*l.read().unwrap(), 0);
}

/// Readers and writers of both kinds: a writer always sees a consistent pair (both fields
/// updated together), and the final count is exact.
#[test]
fn mixed_readers_and_writers_stay_consistent() {
    let _w = watchdog("rwlock mix", Duration::from_secs(120));
    let rt = runtime(2);
    let l = Arc::new(RwLock::new((0u64, 0u64)));
    const WRITES: u64 = 5_000;
    let mut hs = Vec::new();
    for _ in 0..3 {
        let l = l.clone();
        hs.push(rt.spawn(move || {
            for i in 0..WRITES {
                let mut g = l.write().unwrap();
                g.0 += 1;
                if i % 32 == 0 {
                    purloin::yield_now();
                }
                g.1 += 1;
            }
        }));
    }
    let readers: Vec<_> = (0..3)
        .map(|k| {
            let l = l.clone();
            let body = move || {
                let mut seen = 0;
                loop {
                    let g = l.read().unwrap();
                    assert_eq!(g.0, g.1, "a reader saw a half-done write");
                    seen += 1;
                    if g.0 == 4 * WRITES {
                        return seen;
                    }
                    drop(g);
                    if purloin::in_green_thread() {
                        purloin::yield_now();
                    }
                }
            };
            if k == 0 { Err(thread::spawn(body)) } else { Ok(rt.spawn(body)) }
        })
        .collect();
    let l2 = l.clone();
    let os_writer = thread::spawn(move || {
        for _ in 0..WRITES {
            let mut g = l2.write().unwrap();
            g.0 += 1;
            g.1 += 1;
        }
    });
    for h in hs {
        h.join().unwrap();
    }
    os_writer.join().unwrap();
    for r in readers {
        match r {
            Ok(h) => assert!(h.join().unwrap() > 0),
            Err(h) => assert!(h.join().unwrap() > 0),
        }
    }
    assert_eq!(*l.read().unwrap(), (4 * WRITES, 4 * WRITES));
}

/// Writer preference: once a writer waits, new readers queue behind it, so a writer gets the
/// lock even while readers keep re-locking in a loop (the watchdog is the only limit).
#[test]
fn a_waiting_writer_is_not_starved_by_readers() {
    let _w = watchdog("writer preference", Duration::from_secs(60));
    let rt = runtime(2);
    let l = Arc::new(RwLock::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (l, stop) = (l.clone(), stop.clone());
            rt.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let g = l.read().unwrap();
                    purloin::yield_now(); // hold the read lock across a scheduling point
                    drop(g);
                }
            })
        })
        .collect();
    for _ in 0..20 {
        *l.write().unwrap() += 1;
        let l2 = l.clone();
        rt.spawn(move || *l2.write().unwrap() += 1).join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(*l.read().unwrap(), 40);
}

#[test]
fn shutdown_unwinds_rwlock_waiters() {
    let _w = watchdog("rwlock shutdown", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let l = Arc::new(RwLock::new(0));
    {
        let rt = runtime(2);
        let held = Arc::new(AtomicBool::new(false));
        let (l2, h2, d) = (l.clone(), held.clone(), drops.clone());
        drop(rt.spawn(move || {
            let _c = DropCounter(d);
            let _w = l2.write().unwrap();
            h2.store(true, Ordering::SeqCst);
            loop {
                purloin::park();
            }
        }));
        wait_until(|| held.load(Ordering::SeqCst));
        for i in 0..6 {
            let (l, d) = (l.clone(), drops.clone());
            drop(rt.spawn(move || {
                let _c = DropCounter(d);
                if i % 2 == 0 {
                    let _r = l.read();
                } else {
                    let _w = l.write();
                }
                loop {
                    purloin::park();
                }
            }));
        }
        wait_until(|| rt.scheduler().parked().len() == 7);
        rt.shutdown_timeout(Duration::from_millis(100));
    }
    assert_eq!(drops.load(Ordering::SeqCst), 7);
    l.clear_poison();
    *l.write().unwrap() += 1;
    assert_eq!(*l.read().unwrap(), 1);
}
