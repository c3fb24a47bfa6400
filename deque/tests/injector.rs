//! `Injector`: FIFO order, batches, block boundaries and transfer into workers on one thread,
//! then crossbeam-deque's concurrent injector shapes (spsc, mpmc, stampede, stress,
//! no_starvation, destructors, large items).
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use common::{DropLog, Item, LIMIT, Ledger, consume_increasing, idle, with_watchdog};
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

// crossbeam-deque's `tests/injector.rs` shapes, in this crate's words: many threads at once,
// every one under a watchdog, with exactly-once ledgers and drop counts.

const THREADS: usize = 4;
const COUNT: usize = 50_000;

/// Takes one item, waiting politely through `Empty` and `Retry`.
fn take<T>(q: &Injector<T>, spins: &mut u32) -> T {
    loop {
        match q.steal() {
            Steal::Success(item) => return item,
            Steal::Empty | Steal::Retry => idle(spins),
        }
    }
}

#[test]
fn smoke() {
    let q = Injector::new();
    assert_eq!(q.steal(), Steal::Empty);
    q.push(1);
    q.push(2);
    assert_eq!(q.steal(), Steal::Success(1));
    q.push(3);
    assert_eq!(q.steal(), Steal::Success(2));
    assert_eq!(q.steal(), Steal::Success(3));
    assert_eq!(q.steal(), Steal::Empty);
}

#[test]
fn is_empty_follows_pushes_and_steals() {
    let q = Injector::new();
    assert!(q.is_empty());
    q.push(1);
    q.push(2);
    assert!(!q.is_empty());
    let _ = q.steal();
    assert!(!q.is_empty());
    let _ = q.steal();
    assert!(q.is_empty());
}

/// One producer, one consumer: every item arrives, in order.
#[test]
fn spsc() {
    with_watchdog("injector spsc", LIMIT, || {
        let q = Injector::new();
        thread::scope(|scope| {
            scope.spawn(|| {
                let mut spins = 0;
                for expected in 0..COUNT {
                    assert_eq!(take(&q, &mut spins), expected);
                }
                assert_eq!(q.steal(), Steal::Empty);
            });
            for i in 0..COUNT {
                q.push(i);
            }
        });
    });
}

/// Several producers and consumers: each producer's items arrive exactly once.
#[test]
fn mpmc() {
    const PER_PRODUCER: usize = COUNT / THREADS;
    with_watchdog("injector mpmc", LIMIT, || {
        let ledger = Ledger::new(COUNT);
        let q = Injector::new();
        thread::scope(|scope| {
            for producer in 0..THREADS {
                let (q, ledger) = (&q, &ledger);
                scope.spawn(move || {
                    for i in 0..PER_PRODUCER {
                        q.push(Item::new(producer * PER_PRODUCER + i, ledger));
                    }
                });
            }
            for _ in 0..THREADS {
                let (q, ledger) = (&q, &ledger);
                scope.spawn(move || {
                    let mut spins = 0;
                    for _ in 0..PER_PRODUCER {
                        ledger.consume(take(q, &mut spins));
                    }
                });
            }
        });
        ledger.assert_all_delivered(COUNT);
    });
}

/// A full queue drained by many consumers at once: each sees increasing ids.
#[test]
fn stampede() {
    with_watchdog("injector stampede", LIMIT, || {
        let ledger = Ledger::new(COUNT);
        let q = Injector::new();
        q.push_batch((0..COUNT).map(|id| Item::new(id, &ledger)));
        let left = AtomicUsize::new(COUNT);
        thread::scope(|scope| {
            for _ in 0..THREADS {
                let (q, ledger, left) = (&q, &ledger, &left);
                scope.spawn(move || consume_increasing(|| q.steal(), left, ledger));
            }
        });
        ledger.assert_all_delivered(COUNT);
    });
}

/// Producers push while consumers mix single steals with every batch steal, into LIFO and
/// FIFO workers of their own.
#[test]
fn stress() {
    with_watchdog("injector stress", LIMIT, || {
        let ledger = Ledger::new(COUNT);
        let q = Injector::new();
        thread::scope(|scope| {
            for producer in 0..2 {
                let (q, ledger) = (&q, &ledger);
                scope.spawn(move || {
                    for id in (producer..COUNT).step_by(2) {
                        q.push(Item::new(id, ledger));
                    }
                });
            }
            for consumer in 0..THREADS {
                let (q, ledger) = (&q, &ledger);
                scope.spawn(move || {
                    let mine = if consumer.is_multiple_of(2) {
                        Worker::new_fifo()
                    } else {
                        Worker::new_lifo()
                    };
                    let mut spins = 0;
                    while ledger.consumed.load(Ordering::Relaxed) < COUNT {
                        let mut got = false;
                        if let Steal::Success(item) = q.steal() {
                            ledger.consume(item);
                            got = true;
                        }
                        let _ = q.steal_batch(&mine);
                        if let Steal::Success(item) = q.steal_batch_with_limit_and_pop(&mine, 32) {
                            ledger.consume(item);
                            got = true;
                        }
                        let _ = q.steal_batch_with_limit(&mine, 3);
                        while let Some(item) = mine.pop() {
                            ledger.consume(item);
                            got = true;
                        }
                        if !got {
                            idle(&mut spins);
                        }
                    }
                });
            }
        });
        ledger.assert_all_delivered(COUNT);
    });
}

/// The pushing thread and every consumer each get items: nobody is starved.
#[test]
fn no_starvation() {
    with_watchdog("injector no_starvation", LIMIT, || {
        let q = Injector::new();
        let hits: Vec<AtomicUsize> = (0..THREADS).map(|_| AtomicUsize::new(0)).collect();
        let stop = AtomicBool::new(false);
        thread::scope(|scope| {
            for hits in &hits {
                let (q, stop) = (&q, &stop);
                scope.spawn(move || {
                    let mine = Worker::new_fifo();
                    while !stop.load(Ordering::Relaxed) {
                        let mut got = usize::from(q.steal().is_success());
                        let _ = q.steal_batch(&mine);
                        got +=
                            usize::from(q.steal_batch_with_limit_and_pop(&mine, 32).is_success());
                        while mine.pop().is_some() {
                            got += 1;
                        }
                        if got > 0 {
                            hits.fetch_add(got, Ordering::Relaxed);
                        } else {
                            thread::yield_now();
                        }
                    }
                });
            }
            let mut mine = 0;
            let mut round = 0u64;
            loop {
                round += 1;
                for i in 0..(round * 7919 % 2_000) {
                    q.push(i);
                }
                if mine == 0 {
                    while q.steal().is_success() {
                        mine += 1;
                    }
                }
                if mine > 0 && hits.iter().all(|h| h.load(Ordering::Relaxed) > 0) {
                    break;
                }
                thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
}

/// Items are dropped exactly once: the taken ones by their takers, the rest (one contiguous
/// run, since consumers take from the front) when the injector goes.
#[test]
fn destructors() {
    const STEPS: usize = 1_000;
    with_watchdog("injector destructors", LIMIT, || {
        let log = DropLog::default();
        let q = Injector::new();
        for i in 0..COUNT {
            q.push(log.item(i));
        }
        let taken = AtomicUsize::new(0);
        thread::scope(|scope| {
            for _ in 0..THREADS {
                let (q, taken) = (&q, &taken);
                scope.spawn(move || {
                    let mine = Worker::new_lifo();
                    let mut count = 0;
                    while count < STEPS {
                        count += usize::from(q.steal().is_success());
                        let _ = q.steal_batch(&mine);
                        let popped = q.steal_batch_with_limit_and_pop(&mine, 32);
                        count += usize::from(popped.is_success());
                        while mine.pop().is_some() {
                            count += 1;
                        }
                    }
                    taken.fetch_add(count, Ordering::Relaxed);
                });
            }
        });
        let taken = taken.into_inner();
        assert!(taken < COUNT, "the shape needs items left over");
        assert_eq!(log.take_count(), taken, "every taken item was dropped once");
        drop(q);
        log.assert_contiguous_rest(COUNT - taken);
    });
}

/// Blocks are built in place on the heap: an injector of very large items does not
/// overflow the stack.
#[test]
fn large_items_do_not_overflow_the_stack() {
    const N: usize = 32 * 1024;
    let q = Injector::new();
    q.push([7u8; N]);
    let Steal::Success(big) = q.steal() else { panic!("the item is there") };
    assert!(big.iter().all(|&b| b == 7));
    assert_eq!(q.steal(), Steal::Empty);
}
