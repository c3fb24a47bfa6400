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

/// `join_or_else` hands the closures to `outside` exactly when the caller is not a green
/// thread: on a plain thread `outside` runs them; on a green thread they fork (the job's side
/// runs inline here, no `outside`); in a blocking section, where the worker handed its P on,
/// they run in order on the caller, still without `outside`.
#[test]
fn join_or_else_calls_outside_only_off_green_threads() {
    let _w = common::watchdog("fork join_or_else", Duration::from_secs(60));
    let outside = |a: fn() -> u32, b: fn() -> u32| (a() + 100, b() + 100);
    assert_eq!(purloin_sched::join_or_else(|| 1, || 2, outside), (101, 102));
    // No spare worker: it would take the job and change the inline count.
    let sched = Builder::new().workers(1).max_spare_workers(0).build().unwrap();
    let on_green = sched
        .spawn(move || {
            let forked = purloin_sched::join_or_else(|| 1, || 2, outside);
            let blocking =
                purloin_sched::blocking(|| purloin_sched::join_or_else(|| 3, || 4, outside));
            (forked, blocking)
        })
        .join()
        .unwrap();
    assert_eq!(on_green, ((1, 2), (3, 4)), "`outside` runs only off green threads");
    let s = sched.stats().total;
    assert_eq!(s.inline_joins, 1, "the green thread forked once, not in the blocking section");
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

/// Lazy G: a fork-join job is only a queue entry until a worker dequeues it. When the first
/// closure leaves a spawned green thread on top of the job in the local queue, the joiner
/// cannot take the job back; it waits, and the worker later dequeues the job and gives it a
/// green thread (and a stack) of its own — which is observable: the job runs under another
/// id, may park, and its result still reaches the joiner. Deterministic on one worker.
#[test]
fn a_job_under_a_spawned_thread_gets_its_own_green_thread() {
    let _w = common::watchdog("fork lazy g", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let (joiner, in_a, in_b, sum) = sched
        .spawn(|| {
            let joiner = purloin_sched::current().map(|t| t.id());
            let mut kids = Vec::new();
            let (in_a, (in_b, x)) = purloin_sched::join(
                || {
                    // Two spawns: the first fills runnext, the second goes on the local queue,
                    // above the job's entry.
                    kids.push(purloin_sched::spawn(|| 1u64).unwrap());
                    kids.push(purloin_sched::spawn(|| 2u64).unwrap());
                    purloin_sched::current().map(|t| t.id())
                },
                || {
                    // The job parks (a yield is a switch on its own stack).
                    purloin_sched::yield_now();
                    (purloin_sched::current().map(|t| t.id()), 40u64)
                },
            );
            let kids: u64 = kids.into_iter().map(|h| h.join().unwrap()).sum();
            (joiner, in_a, in_b, x + kids)
        })
        .join()
        .unwrap();
    assert_eq!(sum, 43);
    assert_eq!(in_a, joiner, "the first closure runs on the joiner");
    assert!(in_b.is_some() && in_b != joiner, "the job got a green thread of its own");
    let s = sched.stats().total;
    assert_eq!(s.inline_joins, 0, "nothing ran inline: {s:?}");
}

/// A value that counts its drops, to check that each join result is dropped exactly once.
struct Counted(&'static AtomicUsize);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted_tree(n: u32, made: &'static AtomicUsize, dropped: &'static AtomicUsize) -> Vec<Counted> {
    made.fetch_add(1, Ordering::SeqCst);
    let mine = Counted(dropped);
    if n == 0 {
        return vec![mine];
    }
    let (mut a, b) = purloin_sched::join(
        || counted_tree(n - 1, made, dropped),
        || counted_tree(n - 1, made, dropped),
    );
    a.extend(b);
    a.push(mine);
    a
}

/// Results with a destructor, on both paths (taken back and run inline, or stolen and run
/// as a green thread of its own, then read from the job's result slot): each is moved to the
/// joiner once and dropped once, none leaked, none dropped twice.
#[test]
fn results_are_dropped_exactly_once_inline_or_stolen() {
    static MADE: AtomicUsize = AtomicUsize::new(0);
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    let _w = common::watchdog("fork result drops", Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    for _ in 0..50 {
        let len = sched.spawn(|| counted_tree(10, &MADE, &DROPPED).len()).join().unwrap();
        assert_eq!(len, 2047);
    }
    assert_eq!(MADE.load(Ordering::SeqCst), 50 * 2047);
    assert_eq!(DROPPED.load(Ordering::SeqCst), 50 * 2047);
    let s = sched.stats().total;
    assert!(s.inline_joins > 0, "some jobs were taken back: {s:?}");
}
