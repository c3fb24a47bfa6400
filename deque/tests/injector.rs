//! Single-threaded behaviour of `Injector`: FIFO order, batches, block boundaries, transfer
//! into workers.
#![cfg(not(loom))]

use purloin_deque::{Injector, Steal, Worker};

#[test]
fn fifo_order_across_many_blocks() {
    let q = Injector::new();
    for i in 0..1000 {
        q.push(i);
    }
    assert_eq!(q.len(), 1000);
    for i in 0..1000 {
        assert_eq!(q.steal(), Steal::Success(i));
    }
    assert_eq!(q.steal(), Steal::Empty);
    assert!(q.is_empty());
    // Still usable after draining across block boundaries.
    q.push(7);
    assert_eq!(q.len(), 1);
    assert_eq!(q.steal(), Steal::Success(7));
}

#[test]
fn push_batch_keeps_order_and_spans_blocks() {
    let q = Injector::new();
    q.push(0);
    q.push_batch(1..200);
    q.push_batch(Vec::<i32>::new());
    q.push(200);
    assert_eq!(q.len(), 201);
    for i in 0..=200 {
        assert_eq!(q.steal(), Steal::Success(i));
    }
    assert_eq!(q.steal(), Steal::Empty);
}

#[test]
fn steal_batch_and_pop_moves_fifo_into_worker() {
    let q = Injector::new();
    q.push_batch(0..100);
    let w = Worker::bounded(256);
    assert_eq!(q.steal_batch_with_limit_and_pop(&w, 17), Steal::Success(0));
    assert_eq!(w.len(), 16);
    assert_eq!(q.len(), 83);
    // The owner pops the moved items in FIFO order...
    assert_eq!(w.pop(), Some(1));
    assert_eq!(w.pop(), Some(2));
    // ...and thieves of the worker take the newest of the batch.
    assert_eq!(w.stealer().steal(), Steal::Success(16));
    // limit 1: a plain steal.
    assert_eq!(q.steal_batch_with_limit_and_pop(&w, 1), Steal::Success(17));
    assert_eq!(w.len(), 13);
}

#[test]
fn steal_batch_is_bounded_by_block_and_room() {
    let q = Injector::new();
    q.push_batch(0..300);
    // A huge limit stops at the end of the first block (127 slots): 1 + 126.
    let w = Worker::new();
    assert_eq!(q.steal_batch_with_limit_and_pop(&w, 1001), Steal::Success(0));
    assert_eq!(w.len(), 126);
    // Room for 2: three items.
    let small = Worker::bounded(4);
    small.push(-1).unwrap();
    small.push(-2).unwrap();
    assert_eq!(q.steal_batch_with_limit_and_pop(&small, 17), Steal::Success(127));
    assert_eq!(small.len(), 4);
    // Full destination: one item, returned.
    assert_eq!(q.steal_batch_with_limit_and_pop(&small, 17), Steal::Success(130));
    assert_eq!(small.len(), 4);
    // A growable destination grows to take the batch.
    let grow = Worker::new();
    for i in 0..64 {
        grow.push(1000 + i).unwrap();
    }
    assert_eq!(grow.capacity(), 64);
    assert_eq!(q.steal_batch_with_limit_and_pop(&grow, 17), Steal::Success(131));
    assert_eq!(grow.len(), 80);
}

/// A busy injector reuses retired blocks; items stay in order across many block lifetimes.
#[test]
fn blocks_are_reused_without_losing_order() {
    let q = Injector::new();
    let w = Worker::bounded(256);
    let mut next_in = 0u64;
    let mut next_out = 0u64;
    for round in 0..200 {
        for _ in 0..(round % 7 + 1) * 50 {
            q.push(next_in);
            next_in += 1;
        }
        while let Steal::Success(first) = q.steal_batch_with_limit_and_pop(&w, 17) {
            assert_eq!(first, next_out);
            next_out += 1;
            while let Some(x) = w.pop() {
                assert_eq!(x, next_out);
                next_out += 1;
            }
        }
        // Let the epoch collector hand retired blocks back to the cache.
        crossbeam_epoch::pin().flush();
    }
    assert_eq!(next_out, next_in);
}

#[test]
fn empty_injector_is_empty_everywhere() {
    let q = Injector::<u8>::new();
    let w = Worker::bounded(4);
    assert!(q.is_empty());
    assert_eq!(q.len(), 0);
    assert_eq!(q.steal(), Steal::Empty);
    assert_eq!(q.steal_batch_with_limit_and_pop(&w, 17), Steal::Empty);
    assert!(w.is_empty());
}

#[test]
fn drop_releases_items_left_inside() {
    use std::rc::Rc;
    let token = Rc::new(());
    {
        let q = Injector::new();
        for _ in 0..150 {
            q.push(token.clone());
        }
        for _ in 0..70 {
            drop(q.steal());
        }
        assert_eq!(Rc::strong_count(&token), 81);
    }
    assert_eq!(Rc::strong_count(&token), 1);
}
