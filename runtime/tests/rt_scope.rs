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

/// A capture that yields a few times in its `Drop` before it counts itself dropped: a scope
/// that lets its owner go on before this drop ends (its count decremented too early) is seen
/// by the owner, which runs during the yields.
struct SlowDrop<'a> {
    dropped: &'a AtomicUsize,
    panic_in_drop: bool,
}

impl Drop for SlowDrop<'_> {
    fn drop(&mut self) {
        for _ in 0..20 {
            purloin::yield_now();
        }
        self.dropped.fetch_add(1, Ordering::SeqCst);
        if self.panic_in_drop {
            panic!("a capture's drop panics");
        }
    }
}

/// Handle-less scoped spawns run exactly once, and every capture is dropped before `scope`
/// returns, with panics inside (some closures panic, some captures' drops do): the scope then
/// panics after all ended. One worker, so a green thread's yield lets the owner run.
#[test]
fn detached_scoped_threads_run_once_and_drop_captures_before_the_scope_ends() {
    let _w = common::watchdog("detached scope", Duration::from_secs(60));
    const N: usize = 300;
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    for panics in [false, true] {
        let runs: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
        let dropped = AtomicUsize::new(0);
        let r = rt.block_on(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                purloin::scope(|s| {
                    for (i, run) in runs.iter().enumerate() {
                        let capture = SlowDrop {
                            dropped: &dropped,
                            panic_in_drop: panics && i % 7 == 3 && i % 5 != 0,
                        };
                        s.spawn_detached(move || {
                            let _c = capture;
                            run.fetch_add(1, Ordering::SeqCst);
                            assert!(!(panics && i % 5 == 0), "closure {i} panics");
                        });
                    }
                })
            }))
        });
        // Read before anything else: every drop happened before `scope` returned.
        assert_eq!(dropped.load(Ordering::SeqCst), N, "captures dropped before the scope ended");
        assert!(runs.iter().all(|r| r.load(Ordering::SeqCst) == 1), "each ran exactly once");
        assert_eq!(r.is_err(), panics, "the scope panics if (and only if) one of them did");
    }
}

/// From a plain thread (the global runtime, several workers), handle-less spawns that borrow
/// mutably write their parts before `scope` returns; nested scopes work too.
#[test]
fn detached_scoped_threads_borrow_from_a_plain_thread_and_nest() {
    let _w = common::watchdog("detached scope nest", Duration::from_secs(60));
    let mut parts = vec![0u64; 64];
    purloin::scope(|s| {
        for (i, p) in parts.iter_mut().enumerate() {
            s.spawn_detached(move || {
                let mut inner = [0u64; 4];
                purloin::scope(|s| {
                    for (j, q) in inner.iter_mut().enumerate() {
                        s.spawn_detached(move || *q = j as u64 + 1);
                    }
                });
                *p = i as u64 * inner.iter().sum::<u64>();
            });
        }
    });
    assert!(parts.iter().enumerate().all(|(i, &p)| p == i as u64 * 10));
}

/// A scope's owner runs its unstarted handle-less children inline while it waits: such a
/// child has its own identity, and one that parks (here on a rendezvous channel whose sender
/// is a sibling that runs as a green thread of its own) parks its host and is resumed there.
#[test]
fn a_scope_runs_its_detached_children_inline_and_they_may_park() {
    let _w = common::watchdog("detached inline", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let before = rt.stats().total.inline_joins;
    let (owner, child, got) = rt.block_on(|| {
        let owner = purloin::current().expect("a green thread").id();
        let (tx, rx) = purloin::sync::channel::bounded::<u32>(0);
        let mut child = None;
        let mut got = None;
        purloin::scope(|s| {
            // Spawned first: in runnext, which a worker takes before the local queue.
            s.spawn_detached(move || tx.send(7).unwrap());
            // Spawned last: on top of the local queue, where the owner's wait looks first.
            s.spawn_detached(|| {
                child = Some(purloin::current().expect("a green thread").id());
                got = Some(rx.recv().unwrap());
            });
        });
        (owner, child, got)
    });
    assert_eq!(got, Some(7));
    let child = child.expect("the child ran");
    assert_ne!(child, owner, "an inline child has an identity of its own");
    assert!(rt.stats().total.inline_joins > before, "the owner ran a child inline");
}

/// `Scope::spawn` in std's shape (the handle dropped unjoined) costs what a handle-less spawn
/// does: the scope's owner runs such children inline while it waits, and they still run once
/// each.
#[test]
fn a_scope_runs_children_whose_handles_were_dropped_inline() {
    let _w = common::watchdog("dropped handles inline", Duration::from_secs(60));
    const N: usize = 1_000;
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let before = rt.stats().total;
    let ran: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
    rt.block_on(|| {
        purloin::scope(|s| {
            for r in &ran {
                s.spawn(move || r.fetch_add(1, Ordering::Relaxed));
            }
        });
    });
    assert!(ran.iter().all(|r| r.load(Ordering::Relaxed) == 1));
    let after = rt.stats().total;
    let inline = after.inline_joins - before.inline_joins;
    assert_eq!(inline, N as u64, "children run inline by their scope's owner");
}

/// A scoped handle of the cheap kind (a result with nothing to drop) keeps std's semantics:
/// `thread()` names the child (also when asked before it started, and the owner's inline run
/// of it after the handle was dropped keeps that identity), `is_finished`, a join for the
/// value, awaiting it, and an unjoined panic that makes the scope panic.
#[test]
fn scoped_handles_whose_results_need_no_drop_keep_their_semantics() {
    let _w = common::watchdog("cheap scoped handles", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    rt.block_on(|| {
        let mut seen = None;
        let named = purloin::scope(|s| {
            let h = s.spawn(|| purloin::current().expect("a green thread").id());
            let id = h.thread().id();
            assert!(!h.is_finished(), "one worker, and it runs us: not started yet");
            let seen = &mut seen;
            // Identity bound before the handle is dropped, then run inline by the owner.
            let dropped = s.spawn(move || *seen = Some(purloin::current().unwrap().id()));
            let dropped_id = dropped.thread().id();
            drop(dropped);
            assert_eq!(h.join().unwrap(), id);
            dropped_id
        });
        assert_eq!(seen, Some(named));
        let v = purloin::scope(|s| purloin::future::block_on(s.spawn(|| 41u8 + 1)).unwrap());
        assert_eq!(v, 42);
    });
    let unjoined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(|| {
            purloin::scope(|s| {
                s.spawn(|| -> u32 { panic!("boom") });
            })
        })
    }));
    assert!(unjoined.is_err(), "an unjoined panic makes the scope panic");
    let joined = rt.block_on(|| purloin::scope(|s| s.spawn(|| -> u32 { panic!("boom") }).join()));
    assert!(joined.is_err(), "a joined panic is the joiner's");
}
