//! Fork-join: results, borrowing, panics from either side, and stealing under load.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use purloin_sched::Builder;

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = purloin_sched::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

#[test]
fn fib_is_right_and_work_is_stolen() {
    let _w = common::watchdog("fork fib", Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    assert_eq!(sched.spawn(|| fib(25)).join().unwrap(), 75_025);
    let s = sched.stats().total;
    assert!(s.inline_joins > 0, "{s:?}");
}

#[test]
fn both_sides_may_borrow_and_mutate_disjoint_data() {
    let _w = common::watchdog("fork borrow", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let out = sched
        .spawn(|| {
            let mut v: Vec<u64> = (0..10_000).collect();
            let (left, right) = v.split_at_mut(5_000);
            purloin_sched::join(
                || left.iter_mut().for_each(|x| *x *= 2),
                || right.iter_mut().for_each(|x| *x += 1),
            );
            v.iter().sum::<u64>()
        })
        .join()
        .unwrap();
    let expected: u64 =
        (0..5_000u64).map(|x| 2 * x).sum::<u64>() + (5_000..10_000u64).map(|x| x + 1).sum::<u64>();
    assert_eq!(out, expected);
}

#[test]
fn a_panic_on_either_side_is_resumed_after_both_finished() {
    let _w = common::watchdog("fork panic", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let ran = std::sync::Arc::new(AtomicUsize::new(0));
    for side in 0..2 {
        let r = ran.clone();
        let res = sched
            .spawn(move || {
                purloin_sched::join(
                    || {
                        r.fetch_add(1, Ordering::SeqCst);
                        if side == 0 {
                            panic!("left");
                        }
                    },
                    || {
                        r.fetch_add(1, Ordering::SeqCst);
                        if side == 1 {
                            panic!("right");
                        }
                    },
                )
            })
            .join();
        let msg = *res.unwrap_err().downcast::<&str>().unwrap();
        assert_eq!(msg, if side == 0 { "left" } else { "right" });
    }
    assert_eq!(ran.load(Ordering::SeqCst), 4, "both sides ran both times");
}

#[test]
fn join_outside_a_green_thread_runs_sequentially() {
    assert_eq!(purloin_sched::join(|| 1, || 2), (1, 2));
}

/// Regression: thousands of small fork-join trees on two workers, where joiners migrate
/// between workers while running stolen or inline jobs (a stale worker reference after such a
/// migration once corrupted a free list and lost jobs: this test hung).
#[test]
fn many_small_trees_never_lose_a_job() {
    let _w = common::watchdog("fork stress", Duration::from_secs(240));
    let sched = Builder::new().workers(2).build().unwrap();
    for _ in 0..2000 {
        assert_eq!(sched.spawn(|| fib(14)).join().unwrap(), 377);
    }
}
