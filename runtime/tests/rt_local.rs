//! Green-local storage: per green thread, follows it across workers, dropped at its end.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

purloin::green_local! {
    static ID: Cell<u64> = Cell::new(0);
}

struct Drops(Arc<AtomicUsize>);
impl Drop for Drops {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

purloin::green_local! {
    static GUARD: std::cell::RefCell<Option<Drops>> = std::cell::RefCell::new(None);
}

#[test]
fn each_green_thread_sees_its_own_value_across_yields() {
    let _w = common::watchdog("locals", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let hs: Vec<_> = (1..=50u64)
        .map(|i| {
            rt.spawn(move || {
                ID.with(|c| c.set(i));
                for _ in 0..20 {
                    purloin::yield_now();
                    assert_eq!(ID.with(|c| c.get()), i);
                }
                i
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn values_are_dropped_when_the_green_thread_ends() {
    let _w = common::watchdog("locals drop", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..10)
        .map(|_| {
            let d = drops.clone();
            purloin::spawn(move || GUARD.with(|g| *g.borrow_mut() = Some(Drops(d))))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(drops.load(Ordering::SeqCst), 10);
}

/// A scope's handle-less children that its owner runs inline (one worker) drop their
/// green-locals at their end, before the scope returns. Alone in its process (`cargo test
/// --test rt_local scope_children`) it is the first green thread to make a green-locals map.
#[test]
fn scope_children_run_inline_drop_their_locals_before_the_scope_returns() {
    let _w = common::watchdog("scope locals drop", Duration::from_secs(60));
    // No spare worker: it would take children and change the inline count.
    let rt = purloin::runtime::Builder::new().workers(1).max_spare_workers(0).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let seen = rt.block_on(|| {
        purloin::scope(|s| {
            for _ in 0..10 {
                let d = drops.clone();
                s.spawn_detached(move || GUARD.with(|g| *g.borrow_mut() = Some(Drops(d))));
            }
        });
        drops.load(Ordering::SeqCst)
    });
    assert_eq!(seen, 10, "every child's green-local was dropped before the scope returned");
    assert_eq!(rt.stats().total.inline_joins, 10, "the owner ran its children inline");
}

#[test]
fn outside_a_green_thread_access_is_an_error() {
    assert!(ID.try_with(|_| ()).is_err());
}

/// The second half of a `join` that another worker stole runs as a green thread of its own:
/// its green-locals are its own and are dropped before the joiner sees its result. Run by the
/// joiner itself, it shares the joiner's. Exactly once either way (drop counters).
#[test]
fn a_stolen_join_half_drops_its_own_locals_before_the_join_returns() {
    let _w = common::watchdog("locals join", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let (stolen, inline) = rt.block_on(move || {
        let joiner = purloin::current().unwrap().id();
        let (mut stolen, mut inline) = (0usize, 0usize);
        // Until both paths were seen a few times (the other worker steals while `a` spins).
        for round in 0u64.. {
            if (stolen >= 20 && inline >= 20) || round >= 1_000_000 {
                break;
            }
            let before = d.load(Ordering::SeqCst);
            let d2 = d.clone();
            let ((), was_stolen) = purloin::join(
                || {
                    for _ in 0..(round % 64) * 50 {
                        std::hint::spin_loop();
                    }
                },
                move || {
                    let mine = purloin::current().unwrap().id() != joiner;
                    if mine {
                        GUARD.with(|g| *g.borrow_mut() = Some(Drops(d2)));
                    }
                    mine
                },
            );
            if was_stolen {
                stolen += 1;
                assert_eq!(d.load(Ordering::SeqCst), before + 1, "stolen half's locals dropped");
            } else {
                inline += 1;
                assert_eq!(d.load(Ordering::SeqCst), before);
            }
        }
        (stolen, inline)
    });
    assert!(stolen > 0 && inline > 0, "saw stolen {stolen}, inline {inline}");
    assert_eq!(drops.load(Ordering::SeqCst), stolen);
}
