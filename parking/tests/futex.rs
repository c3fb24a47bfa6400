//! Real-thread behaviour of `futex::{wait, wake*}`: value checks, deadlines, wakes.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use common::{spin_until, with_watchdog};
use purloin_parking::futex::{self, AtomicU32, WaitResult};

/// Generous: a timed wait must return after its deadline, and "soon" on a busy 2-core machine
/// means seconds, not microseconds. This only catches waits that ignore their deadline.
const LATE_BOUND: Duration = Duration::from_secs(10);

#[test]
fn wait_on_a_different_value_returns_at_once() {
    let word = AtomicU32::new(7);
    assert_eq!(futex::wait(&word, 6, None), WaitResult::ValueChanged);
    assert_eq!(futex::wait(&word, 6, Some(Instant::now() + LATE_BOUND)), WaitResult::ValueChanged);
}

#[test]
fn timed_wait_returns_after_its_deadline_not_before() {
    with_watchdog("timed_wait_returns_after_its_deadline_not_before", || {
        let word = AtomicU32::new(0);
        for millis in [0u64, 1, 20, 50] {
            let deadline = Instant::now() + Duration::from_millis(millis);
            let mut result = futex::wait(&word, 0, Some(deadline));
            // Spurious returns are allowed; the deadline is absolute, so just wait again.
            while result == WaitResult::Woken {
                result = futex::wait(&word, 0, Some(deadline));
            }
            let returned = Instant::now();
            assert_eq!(result, WaitResult::TimedOut);
            assert!(returned >= deadline, "TimedOut reported before the deadline");
            assert!(
                returned - deadline < LATE_BOUND,
                "timed wait overslept by {:?}",
                returned - deadline
            );
        }
    });
}

#[test]
fn deadline_in_the_past_times_out_without_sleeping() {
    let word = AtomicU32::new(0);
    let past = Instant::now();
    assert_eq!(futex::wait(&word, 0, Some(past)), WaitResult::TimedOut);
}

#[test]
fn a_deadline_too_far_to_represent_still_waits_and_wakes() {
    with_watchdog("a_deadline_too_far_to_represent_still_waits_and_wakes", || {
        let word = AtomicU32::new(0);
        // About 30,000 years: overflows the timespec conversion, so it becomes an untimed wait.
        let far = Instant::now() + Duration::from_secs(1 << 40);
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                while word.load(Ordering::Acquire) == 0 {
                    assert_ne!(futex::wait(&word, 0, Some(far)), WaitResult::TimedOut);
                }
            });
            word.store(1, Ordering::Release);
            while !waiter.is_finished() {
                futex::wake_all(&word);
                thread::yield_now();
            }
        });
    });
}

/// Wakes `word` until the waiting thread `waiter` has returned, and returns the sum of the
/// counts the wakes reported. A wake sent before the waiter is asleep finds nobody, so one wake
/// is not enough; and where counts are upper bounds (Windows: `WAKE_COUNT_IS_EXACT` is
/// false) a non-zero count does not say the waiter was found, so the loop ends on the
/// waiter's return, not on a count.
fn wake_until_returned<T>(word: &AtomicU32, waiter: &thread::ScopedJoinHandle<'_, T>) -> usize {
    let mut woken = 0;
    while !waiter.is_finished() {
        woken += futex::wake_one(word);
        thread::yield_now();
    }
    woken
}

#[test]
fn a_wake_from_another_thread_ends_an_untimed_wait() {
    with_watchdog("a_wake_from_another_thread_ends_an_untimed_wait", || {
        let word = AtomicU32::new(0);
        thread::scope(|s| {
            // The word never changes, so only a wake can end this wait.
            let waiter = s.spawn(|| futex::wait(&word, 0, None));
            let woken = wake_until_returned(&word, &waiter);
            if futex::WAKE_COUNT_IS_EXACT {
                // One waiter, woken once: the counts of all wakes sum to exactly 1.
                assert_eq!(woken, 1);
            } else {
                assert!(woken >= 1, "every wake_one reports 1 where counts are upper bounds");
            }
            assert_eq!(waiter.join().unwrap(), WaitResult::Woken);
        });
    });
}

#[test]
fn a_wake_ends_a_timed_wait_before_its_deadline() {
    with_watchdog("a_wake_ends_a_timed_wait_before_its_deadline", || {
        let word = AtomicU32::new(0);
        let deadline = Instant::now() + Duration::from_secs(3600);
        thread::scope(|s| {
            let waiter = s.spawn(|| futex::wait(&word, 0, Some(deadline)));
            let woken = wake_until_returned(&word, &waiter);
            if futex::WAKE_COUNT_IS_EXACT {
                assert_eq!(woken, 1);
            }
            assert_eq!(waiter.join().unwrap(), WaitResult::Woken);
        });
    });
}

#[test]
fn wake_n_wakes_at_most_n_and_wake_all_the_rest() {
    with_watchdog("wake_n_wakes_at_most_n_and_wake_all_the_rest", || {
        const WAITERS: usize = 5;
        let word = AtomicU32::new(0);
        let returned = std::sync::atomic::AtomicUsize::new(0);
        thread::scope(|s| {
            for _ in 0..WAITERS {
                s.spawn(|| {
                    while futex::wait(&word, 0, None) != WaitResult::Woken {}
                    returned.fetch_add(1, Ordering::SeqCst);
                });
            }
            if futex::WAKE_COUNT_IS_EXACT {
                let mut woken = 0;
                while woken < 2 {
                    let n = futex::wake(&word, 2 - woken as u32);
                    assert!(n <= 2 - woken, "wake(n) woke more than n");
                    woken += n;
                    thread::yield_now();
                }
                spin_until(|| returned.load(Ordering::SeqCst) >= 2);
                while woken < WAITERS {
                    woken += futex::wake_all(&word);
                    thread::yield_now();
                }
                assert_eq!(woken, WAITERS);
            } else {
                // Counts are upper bounds: `wake(n)` reports `n` and `wake_all` `usize::MAX`
                // whether or not anybody was asleep, so wake until the waiters have returned.
                while returned.load(Ordering::SeqCst) < 2 {
                    assert_eq!(futex::wake(&word, 2), 2);
                    thread::yield_now();
                }
                while returned.load(Ordering::SeqCst) < WAITERS {
                    assert_eq!(futex::wake_all(&word), usize::MAX);
                    thread::yield_now();
                }
            }
        });
        assert_eq!(returned.into_inner(), WAITERS);
    });
}

#[test]
fn wake_with_nobody_waiting_counts_zero_or_an_upper_bound() {
    let word = AtomicU32::new(0);
    let counts = [
        futex::wake_one(&word),
        futex::wake(&word, 10),
        futex::wake_all(&word),
        futex::wake(&word, 0),
    ];
    if futex::WAKE_COUNT_IS_EXACT {
        assert_eq!(counts, [0, 0, 0, 0]);
    } else {
        // Where the OS reports no count, each call returns its bound (`wake(0)` makes no call).
        assert_eq!(counts, [1, 10, usize::MAX, 0]);
    }
}

#[test]
fn wake_through_dangling_or_null_pointers_is_harmless() {
    let dangling = {
        let word = AtomicU32::new(0);
        &word as *const AtomicU32
    };
    let counts = [futex::wake_one(dangling), futex::wake_all(std::ptr::null())];
    let expected = if futex::WAKE_COUNT_IS_EXACT { [0, 0] } else { [1, usize::MAX] };
    assert_eq!(counts, expected);
}
