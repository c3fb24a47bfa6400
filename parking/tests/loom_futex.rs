//! loom models of the futex emulation itself: compare-and-enqueue against store-then-wake,
//! exact wake counts, timed waits. `cargo xtask loom -p purloin-parking`.
//!
//! Mutation check M8: the emulation's compare moved outside its mutex (unlock, compare,
//! relock, enqueue) makes `store_then_wake_never_loses_a_waiter` report `deadlock`.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::Ordering;
use loom::thread;
use purloin_parking::futex::{self, AtomicU32, WaitResult};

#[test]
fn store_then_wake_never_loses_a_waiter() {
    loom::model(|| {
        let word = Arc::new(AtomicU32::new(0));
        let waiter = {
            let word = word.clone();
            thread::spawn(move || {
                while word.load(Ordering::Acquire) == 0 {
                    futex::wait(&word, 0, None);
                }
            })
        };
        word.store(1, Ordering::Release);
        futex::wake_one(&*word);
        waiter.join().unwrap();
    });
}

/// A timed wait either is woken (and then the wake counted it), or did not sleep, or timed out
/// (and then the wake found nobody): the emulated count is exact.
#[test]
fn timed_wait_and_wake_agree_on_the_count() {
    loom::model(|| {
        let word = Arc::new(AtomicU32::new(0));
        let waiter = {
            let word = word.clone();
            thread::spawn(move || {
                let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
                futex::wait(&word, 0, Some(far))
            })
        };
        word.store(1, Ordering::Release);
        let woken = futex::wake_one(&*word);
        let result = waiter.join().unwrap();
        assert_eq!(result == WaitResult::Woken, woken == 1, "{result:?} vs woken {woken}");
        assert!(woken <= 1);
    });
}

/// A wake with no change of the word is a spurious wake-up for the waiter; its loop must
/// absorb it and still finish on the real change.
#[test]
fn injected_spurious_wake_is_absorbed() {
    loom::model(|| {
        let word = Arc::new(AtomicU32::new(0));
        let waiter = {
            let word = word.clone();
            thread::spawn(move || {
                while word.load(Ordering::Acquire) == 0 {
                    futex::wait(&word, 0, None);
                }
            })
        };
        let chaos = {
            let word = word.clone();
            thread::spawn(move || {
                futex::wake_all(&*word);
            })
        };
        word.store(1, Ordering::Release);
        futex::wake_all(&*word);
        chaos.join().unwrap();
        waiter.join().unwrap();
    });
}
