//! Once / OnceLock behaviour: std's promises (runs once, waiters block until done, poisoning,
//! force, OnceLock set/get/init/take) with green and OS threads.
#![cfg(not(loom))]

mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use purloin::sync::{Butex, Once, OnceLock};
use sync_util::{runtime, wait_until, watchdog};

#[test]
fn runs_exactly_once_and_waiters_see_the_result() {
    let _w = watchdog("once", Duration::from_secs(60));
    let rt = runtime(2);
    let once = Arc::new(Once::new());
    let value = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    // A gate keeps the initialiser running until everyone has arrived.
    let gate = Arc::new(Butex::new(0));
    let mk =
        |once: Arc<Once>, value: Arc<AtomicUsize>, runs: Arc<AtomicUsize>, gate: Arc<Butex>| {
            move || {
                once.call_once(|| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    while gate.value().load(Ordering::Acquire) == 0 {
                        gate.wait(0, None);
                    }
                    value.store(42, Ordering::Relaxed);
                });
                // Whoever returns sees the initialiser's write.
                value.load(Ordering::Relaxed)
            }
        };
    let green: Vec<_> = (0..6)
        .map(|_| rt.spawn(mk(once.clone(), value.clone(), runs.clone(), gate.clone())))
        .collect();
    let os: Vec<_> = (0..2)
        .map(|_| thread::spawn(mk(once.clone(), value.clone(), runs.clone(), gate.clone())))
        .collect();
    wait_until(|| runs.load(Ordering::SeqCst) == 1);
    assert!(!once.is_completed());
    gate.value().store(1, Ordering::Release);
    gate.wake_all();
    for h in green {
        assert_eq!(h.join().unwrap(), 42);
    }
    for h in os {
        assert_eq!(h.join().unwrap(), 42);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(once.is_completed());
    once.wait();
}

#[test]
fn panicking_initialiser_poisons() {
    let once = Once::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        once.call_once(|| panic!("init fails (expected by the test)"));
    }));
    assert!(r.is_err());
    assert!(!once.is_completed());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| once.call_once(|| {})));
    assert!(r.is_err(), "call_once on a poisoned Once panics");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| once.wait()));
    assert!(r.is_err(), "wait on a poisoned Once panics");
    let mut saw_poison = false;
    once.call_once_force(|s| saw_poison = s.is_poisoned());
    assert!(saw_poison);
    assert!(once.is_completed());
    once.call_once(|| unreachable!());
    once.wait();
}

#[test]
fn wait_blocks_until_some_thread_completes() {
    let _w = watchdog("once wait", Duration::from_secs(60));
    let rt = runtime(2);
    let once = Arc::new(Once::new());
    let o = once.clone();
    let waiter = rt.spawn(move || o.wait());
    let o = once.clone();
    let os_waiter = thread::spawn(move || o.wait_force());
    wait_until(|| rt.scheduler().parked().len() == 1);
    once.call_once(|| {});
    waiter.join().unwrap();
    os_waiter.join().unwrap();
}

#[test]
fn once_lock_api() {
    let c: OnceLock<String> = OnceLock::new();
    assert!(c.get().is_none());
    assert_eq!(format!("{c:?}"), "OnceLock(<uninit>)");
    assert_eq!(c.set("a".into()), Ok(()));
    assert_eq!(c.set("b".into()), Err("b".to_string()));
    assert_eq!(c.get().unwrap(), "a");
    assert_eq!(c.get_or_init(|| unreachable!()), "a");
    let mut c2 = c.clone();
    assert_eq!(c2, c);
    c2.get_mut().unwrap().push('!');
    assert_eq!(c2.take().unwrap(), "a!");
    assert!(c2.get().is_none());
    assert_eq!(c2.get_or_init(|| "again".into()), "again");
    assert_eq!(OnceLock::from(3).into_inner(), Some(3));
    let empty = OnceLock::<u8>::new();
    assert_eq!(empty.get_or_try_init(|| Err("nope")), Err("nope"));
}

/// A failed or panicking initialisation leaves the cell empty and the next caller retries.
#[test]
fn once_lock_retries_after_failure_or_panic() {
    let c: OnceLock<u32> = OnceLock::new();
    assert_eq!(c.get_or_try_init(|| Err::<u32, _>("first fails")), Err("first fails"));
    assert!(c.get().is_none());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.get_or_init(|| panic!("second panics (expected by the test)"));
    }));
    assert!(r.is_err());
    assert_eq!(*c.get_or_init(|| 3), 3);
}

/// Many green threads race to initialise one cell: one initialiser runs, everyone gets its
/// value, and the value is dropped once.
#[test]
fn once_lock_races_and_drops_once() {
    let _w = watchdog("once_lock race", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    struct D(Arc<AtomicUsize>, usize);
    impl Drop for D {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let rt = runtime(2);
    for _ in 0..50 {
        let cell = Arc::new(OnceLock::new());
        let inits = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let (cell, inits, drops) = (cell.clone(), inits.clone(), drops.clone());
                rt.spawn(move || {
                    let v: &D = cell.get_or_init(|| {
                        inits.fetch_add(1, Ordering::SeqCst);
                        purloin::yield_now();
                        D(drops, i)
                    });
                    v.1
                })
            })
            .collect();
        let vals: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(vals.iter().all(|v| *v == vals[0]));
        assert_eq!(inits.load(Ordering::SeqCst), 1);
        assert_eq!(cell.wait().1, vals[0]);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 50);
}
