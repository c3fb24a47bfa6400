//! A FIFO `Worker` (the owner takes the oldest item, like its thieves): order, capacity,
//! growth and batch steals on one thread, then crossbeam-deque's concurrent test shapes
//! (`tests/common/shapes.rs`) run against the FIFO flavour.
#![cfg(not(loom))]

mod common;

use common::shapes::{self, Flavour};
use purloin_deque::{Injector, Steal, Worker};

fn both_modes() -> Vec<(&'static str, Worker<u64>)> {
    vec![("bounded", Worker::bounded_fifo(64)), ("growable", Worker::new_fifo())]
}

#[test]
fn owner_and_thieves_both_take_the_oldest() {
    for (mode, w) in both_modes() {
        assert!(w.is_fifo(), "{mode}");
        let s = w.stealer();
        for i in 0..10 {
            w.push(i).unwrap();
        }
        for i in 0..10 {
            if i % 3 == 0 {
                assert_eq!(s.steal(), Steal::Success(i), "{mode}");
            } else {
                assert_eq!(w.pop(), Some(i), "{mode}");
            }
        }
        assert_eq!(w.pop(), None, "{mode}");
        assert_eq!(s.steal(), Steal::Empty, "{mode}");
        assert!(w.is_empty() && s.is_empty(), "{mode}");
    }
}

#[test]
fn ring_is_reused_after_many_laps() {
    for (mode, w) in both_modes() {
        let s = w.stealer();
        let cap = w.capacity() as u64;
        for round in 0..(cap * 50) {
            w.push(2 * round).unwrap();
            w.push(2 * round + 1).unwrap();
            assert_eq!(w.pop(), Some(2 * round), "{mode}");
            assert_eq!(s.steal(), Steal::Success(2 * round + 1), "{mode}");
            // Popping an empty queue must leave it consistent.
            assert_eq!(w.pop(), None, "{mode}");
            assert_eq!(s.steal(), Steal::Empty, "{mode}");
        }
        assert_eq!(w.capacity() as u64, cap, "{mode}: no growth for two items at a time");
    }
}

#[test]
fn bounded_fifo_refuses_when_full_and_frees_room_on_pop() {
    let w = Worker::bounded_fifo(4);
    for i in 0..4 {
        w.push(i).unwrap();
    }
    assert_eq!(w.push(4), Err(4));
    assert_eq!(w.pop(), Some(0));
    assert_eq!(w.push(4), Ok(()));
    assert_eq!(w.push(5), Err(5));
    assert_eq!(w.stealer().steal(), Steal::Success(1));
    assert_eq!(w.push(5), Ok(()));
    assert_eq!((2..6).map(|_| w.pop().unwrap()).collect::<Vec<_>>(), vec![2, 3, 4, 5]);
}

#[test]
fn growable_fifo_grows_and_shrinks_keeping_order() {
    let w = Worker::new_fifo();
    for i in 0..10_000u64 {
        w.push(i).unwrap();
    }
    assert!(w.capacity() >= 10_000);
    for i in 0..9_990 {
        assert_eq!(w.pop(), Some(i));
    }
    w.shrink_to_fit();
    assert_eq!(w.capacity(), 64);
    let s = w.stealer();
    assert_eq!(s.steal(), Steal::Success(9_990));
    for i in 9_991..10_000 {
        assert_eq!(w.pop(), Some(i));
    }
    assert_eq!(w.pop(), None);

    let capped = Worker::builder().fifo().max_capacity(100).build();
    for i in 0..128 {
        capped.push(i).unwrap();
    }
    assert_eq!(capped.push(128), Err(128));
    assert_eq!(capped.pop(), Some(0));
}

#[test]
fn pop_batch_is_ignored_by_a_fifo_worker() {
    let w = Worker::builder().fifo().bounded(16).pop_batch(4).build();
    for i in 0..8 {
        w.push(i).unwrap();
    }
    assert_eq!(w.pop(), Some(0));
    // Nothing was kept out of thieves' reach.
    assert_eq!(w.stealer().len(), 7);
    assert_eq!(w.stealer().steal(), Steal::Success(1));
}

#[test]
fn steal_half_from_fifo_returns_the_oldest() {
    for (mode, victim) in both_modes() {
        for i in 0..10 {
            victim.push(i).unwrap();
        }
        let s = victim.stealer();
        // Half of 10 is 5: 0 runs now, 1..5 go to the thief, popped oldest first by a FIFO
        // thief and (reversed on the way in) by a LIFO one too.
        let fifo_thief = Worker::new_fifo();
        assert_eq!(s.steal_half_into(&fifo_thief), Steal::Success(0), "{mode}");
        assert_eq!(fifo_thief.pop(), Some(1), "{mode}");
        // 5 left (5..10): take 3 of them.
        let lifo_thief = Worker::new_lifo();
        assert_eq!(s.steal_half_into(&lifo_thief), Steal::Success(5), "{mode}");
        assert_eq!(lifo_thief.pop(), Some(6), "{mode}");
        assert_eq!(lifo_thief.pop(), Some(7), "{mode}");
        assert_eq!(victim.pop(), Some(8), "{mode}");
    }
}

#[test]
fn overflow_keeps_push_order_for_a_fifo_worker() {
    let global = Injector::new();
    let w = Worker::bounded_fifo(4);
    for i in 0..9 {
        w.push_or_overflow(i, &global);
    }
    // Everything in the injector is older than everything left in the worker.
    let mut order = Vec::new();
    while let Steal::Success(i) = global.steal() {
        order.push(i);
    }
    while let Some(i) = w.pop() {
        order.push(i);
    }
    assert_eq!(order, (0..9).collect::<Vec<_>>());
}

#[test]
fn builder_defaults_and_debug() {
    let w: Worker<u8> = Worker::builder().fifo().build();
    assert_eq!(format!("{w:?}"), "Worker { len: 0, capacity: 64, growable: true, fifo: true, .. }");
    let l: Worker<u8> = Worker::builder().fifo().lifo().build();
    assert!(!l.is_fifo());
}

#[test]
fn smoke() {
    shapes::smoke(Flavour::Fifo);
}

#[test]
fn is_empty() {
    shapes::is_empty(Flavour::Fifo);
}

#[test]
fn spsc() {
    shapes::spsc(Flavour::Fifo);
}

#[test]
fn stampede() {
    shapes::stampede(Flavour::Fifo);
}

#[test]
fn stress() {
    shapes::stress(Flavour::Fifo);
}

#[test]
fn no_starvation() {
    shapes::no_starvation(Flavour::Fifo);
}

#[test]
fn destructors() {
    shapes::destructors(Flavour::Fifo);
}
