//! `scope` and `join`: borrowing green threads, panics, fork-join results.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[test]
fn scoped_green_threads_borrow_and_mutate() {
    let _w = common::watchdog("scope", Duration::from_secs(60));
    let mut counts = vec![0u32; 8];
    let total = AtomicUsize::new(0);
    purloin::scope(|s| {
        for (i, c) in counts.iter_mut().enumerate() {
            let total = &total;
            s.spawn(move || {
                *c = i as u32 * 10;
                total.fetch_add(i, Ordering::Relaxed);
            });
        }
    });
    assert_eq!(counts, [0, 10, 20, 30, 40, 50, 60, 70]);
    assert_eq!(total.load(Ordering::Relaxed), 28);
}

#[test]
fn scope_inside_a_green_thread_uses_that_runtime() {
    let _w = common::watchdog("scope in green", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let data = [1, 2, 3, 4];
    let sum = rt.block_on(|| {
        purloin::scope(|s| {
            let a = s.spawn(|| data[..2].iter().sum::<i32>());
            let b = s.spawn(|| data[2..].iter().sum::<i32>());
            a.join().unwrap() + b.join().unwrap()
        })
    });
    assert_eq!(sum, 10);
}

#[test]
fn an_unjoined_panicking_scoped_thread_makes_scope_panic() {
    let _w = common::watchdog("scope panic", Duration::from_secs(60));
    let r = std::panic::catch_unwind(|| {
        purloin::scope(|s| {
            s.spawn(|| panic!("inside"));
        })
    });
    assert!(r.is_err());
    // A joined panic is the joiner's business: no panic from scope.
    let joined = purloin::scope(|s| s.spawn(|| panic!("seen")).join().is_err());
    assert!(joined);
}

#[test]
fn fork_join_fib() {
    let _w = common::watchdog("fork join", Duration::from_secs(60));
    fn fib(n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = purloin::join(|| fib(n - 1), || fib(n - 2));
        a + b
    }
    assert_eq!(purloin::spawn(|| fib(22)).join().unwrap(), 17_711);
    // From a plain thread, join runs on the global runtime: both sides on green threads.
    assert_eq!(purloin::join(|| fib(10), || fib(11)), (55, 89));
    assert_eq!(
        purloin::join(purloin::in_green_thread, purloin::in_green_thread),
        (true, true),
        "join from a plain thread runs both sides on the runtime"
    );
}

#[test]
fn block_on_borrows_and_returns() {
    let _w = common::watchdog("block_on", Duration::from_secs(60));
    let rt = purloin::Runtime::new().unwrap();
    let mut v = vec![1, 2, 3];
    let n = rt.block_on(|| {
        v.push(4);
        v.len()
    });
    assert_eq!(n, 4);
    assert_eq!(v, [1, 2, 3, 4]);
    let r =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(|| panic!("root"))));
    assert!(r.is_err());
}

/// A scoped spawn the runtime refuses (an impossible stack size) returns the error, counts
/// nothing, and the scope still ends (no hang on a miscounted scope).
#[test]
fn a_refused_scoped_spawn_returns_its_error_and_the_scope_ends() {
    let _w = common::watchdog("refused scoped spawn", std::time::Duration::from_secs(60));
    let mut ran = false;
    let n = purloin::scope(|s| {
        let refused = purloin::Builder::new()
            .stack_size(purloin::StackSize::Bytes(0))
            .spawn_scoped(s, || ran = true);
        assert!(refused.is_err());
        s.spawn(|| 7).join().unwrap()
    });
    assert_eq!(n, 7);
    assert!(!ran);
}
