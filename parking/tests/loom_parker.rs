//! loom models of `Parker` / `Unparker` on the futex emulation.
//! `cargo xtask loom -p purloin-parking`.
//!
//! Mutation checks (scratch edits to the real code, each run, seen failing, reverted):
//! - M5 `unpark`'s swap weakened from Release to Relaxed: `an_unpark_is_never_lost_and_publishes`
//!   reports "Causality violation: Concurrent read and write accesses" on the cell.
//! - M6 `unpark` not waking when it replaces PARKED: `deadlock`.
//! - M7 the timed-out `swap(EMPTY)` replaced by `store(EMPTY)` (dropping a racing token):
//!   `a_token_racing_a_timeout_is_not_lost` reports `deadlock`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use purloin_parking::{Parker, stats};

/// One unpark, one park, in every order (unpark before park, during park, after the owner
/// went to sleep). The park must return, and what the unparker wrote must be visible.
#[test]
fn an_unpark_is_never_lost_and_publishes() {
    loom::model(|| {
        let parker = Parker::new();
        let unparker = parker.unparker();
        let data = Arc::new(UnsafeCell::new(0usize));
        let t = {
            let data = data.clone();
            thread::spawn(move || {
                // SAFETY: the owner reads `data` only after consuming this unpark's token.
                unsafe { data.with_mut(|p| *p = 7) };
                unparker.unpark()
            })
        };
        parker.park();
        // SAFETY: P1: unpark's Release swap synchronised with the Acquire that consumed it.
        assert_eq!(unsafe { data.with(|p| *p) }, 7);
        let was_parked = t.join().unwrap();
        let c = stats::snapshot();
        // unpark() == true exactly when it issued the one wake call.
        assert_eq!(c.futex_wakes, u64::from(was_parked));
        assert_eq!(c.wakes_skipped, u64::from(!was_parked));
    });
}

/// Unpark strictly before park (the unparking thread has finished): the park consumes the
/// token without sleeping, and no wake call was made.
#[test]
fn unpark_before_park_returns_at_once_without_syscalls() {
    loom::model(|| {
        let parker = Parker::new();
        let unparker = parker.unparker();
        let t = thread::spawn(move || unparker.unpark());
        let was_parked = t.join().unwrap();
        assert!(!was_parked, "the owner had not parked yet");
        parker.park();
        let c = stats::snapshot();
        assert_eq!((c.futex_waits, c.futex_wakes), (0, 0));
    });
}

/// An unpark racing a timed park: the emulated deadline may fire anywhere. Whatever happens,
/// the token is delivered once: to the timed park (it returns `true`) or to the next park.
#[test]
fn a_token_racing_a_timeout_is_not_lost() {
    loom::model(|| {
        let parker = Parker::new();
        let unparker = parker.unparker();
        let t = thread::spawn(move || {
            unparker.unpark();
        });
        let far = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        if !parker.park_deadline(far) {
            parker.park(); // the token must still be there (or arrive)
        }
        t.join().unwrap();
    });
}

/// Two parks, two unparks from two threads, each unpark after the owner consumed the previous
/// token (handed over through a second parker): tokens are not merged across rounds.
#[test]
fn repeated_park_unpark_rounds() {
    loom::model(|| {
        let owner = Parker::new();
        let helper = Parker::new();
        let wake_owner = owner.unparker();
        let wake_helper = helper.unparker();
        let t = thread::spawn(move || {
            wake_owner.unpark();
            helper.park();
            wake_owner.unpark();
        });
        owner.park();
        wake_helper.unpark();
        owner.park();
        t.join().unwrap();
    });
}
