//! Multi-threaded stress tests: 10^6 items per test, every item delivered exactly once
//! (checksum + count + a per-id flag), nothing leaked or dropped twice, in both modes and
//! both flavours.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use common::{Item, LIMIT, Ledger, idle, with_watchdog};
use purloin_deque::{Injector, Steal, Worker};

const ITEMS: usize = 1_000_000;
const THIEVES: usize = 3;

/// One owner pushes `ITEMS` items and pops now and then; `THIEVES` thieves alternate single
/// steals and steal-halfs (into their own queue, which they then drain).
fn owner_vs_thieves(make: fn() -> Worker<Item>, name: &str) {
    with_watchdog(name, LIMIT, || {
        let ledger = Ledger::new(ITEMS);
        let owner = make();
        let finished = AtomicBool::new(false);
        thread::scope(|scope| {
            for t in 0..THIEVES {
                let stealer = owner.stealer();
                let (ledger, finished) = (&ledger, &finished);
                scope.spawn(move || {
                    let mine = match t % 3 {
                        0 => Worker::bounded(64),
                        1 => Worker::new(),
                        _ => Worker::bounded(64).with_pop_batch(8),
                    };
                    let mut spins = 0;
                    let mut round = 0usize;
                    loop {
                        let done = finished.load(Ordering::Acquire);
                        round += 1;
                        let got = if round.is_multiple_of(3) {
                            stealer.steal()
                        } else {
                            stealer.steal_half_into(&mine)
                        };
                        match got {
                            Steal::Success(item) => {
                                ledger.consume(item);
                                while let Some(item) = mine.pop() {
                                    ledger.consume(item);
                                }
                                spins = 0;
                            }
                            Steal::Retry => idle(&mut spins),
                            // `finished` was set before we looked: nothing more will come.
                            Steal::Empty if done => break,
                            Steal::Empty => idle(&mut spins),
                        }
                    }
                });
            }
            for id in 0..ITEMS {
                let mut item = Item::new(id, &ledger);
                loop {
                    match owner.push(item) {
                        Ok(()) => break,
                        Err(back) => {
                            item = back;
                            if let Some(popped) = owner.pop() {
                                ledger.consume(popped);
                            }
                        }
                    }
                }
                if id % 7 == 0
                    && let Some(popped) = owner.pop()
                {
                    ledger.consume(popped);
                }
            }
            while let Some(popped) = owner.pop() {
                ledger.consume(popped);
            }
            finished.store(true, Ordering::Release);
        });
        ledger.assert_all_delivered(ITEMS);
    });
}

#[test]
fn bounded_owner_vs_thieves() {
    owner_vs_thieves(|| Worker::bounded(256), "bounded_owner_vs_thieves");
}

#[test]
fn growable_owner_vs_thieves() {
    owner_vs_thieves(Worker::new, "growable_owner_vs_thieves");
}

#[test]
fn fifo_owner_vs_thieves() {
    owner_vs_thieves(|| Worker::bounded_fifo(256), "fifo_owner_vs_thieves (bounded)");
    owner_vs_thieves(Worker::new_fifo, "fifo_owner_vs_thieves (growable)");
}

#[test]
fn pop_batch_owner_vs_thieves() {
    owner_vs_thieves(|| Worker::bounded(256).with_pop_batch(16), "pop_batch_owner_vs_thieves");
    owner_vs_thieves(|| Worker::new().with_pop_batch(16), "pop_batch_owner_vs_thieves (growable)");
}

/// Growable queue in bursts: the owner pushes thousands of items (growing the ring), thieves
/// steal while it pops down, and the owner shrinks the ring after every burst.
#[test]
fn growable_bursts_with_shrink_vs_thieves() {
    bursts_with_shrink_vs_thieves(Worker::new_lifo, "growable_bursts_with_shrink_vs_thieves");
    bursts_with_shrink_vs_thieves(
        Worker::new_fifo,
        "growable_bursts_with_shrink_vs_thieves (fifo)",
    );
}

fn bursts_with_shrink_vs_thieves(make: fn() -> Worker<Item>, name: &str) {
    with_watchdog(name, LIMIT, || {
        let ledger = Ledger::new(ITEMS);
        let owner = make();
        let finished = AtomicBool::new(false);
        thread::scope(|scope| {
            for _ in 0..2 {
                let stealer = owner.stealer();
                let (ledger, finished) = (&ledger, &finished);
                scope.spawn(move || {
                    let mine = Worker::new();
                    let mut spins = 0;
                    loop {
                        let done = finished.load(Ordering::Acquire);
                        match stealer.steal_half_into(&mine) {
                            Steal::Success(item) => {
                                ledger.consume(item);
                                while let Some(item) = mine.pop() {
                                    ledger.consume(item);
                                }
                                spins = 0;
                            }
                            Steal::Empty if done => break,
                            _ => idle(&mut spins),
                        }
                    }
                });
            }
            let mut id = 0;
            let mut burst = 1;
            while id < ITEMS {
                let end = (id + burst * 997).min(ITEMS);
                while id < end {
                    owner.push(Item::new(id, &ledger)).ok().expect("growable push cannot fail");
                    id += 1;
                }
                while owner.len() > 8 {
                    if let Some(item) = owner.pop() {
                        ledger.consume(item);
                    }
                }
                owner.shrink_to_fit();
                burst = burst % 40 + 1;
            }
            while let Some(item) = owner.pop() {
                ledger.consume(item);
            }
            finished.store(true, Ordering::Release);
        });
        ledger.assert_all_delivered(ITEMS);
    });
}

/// A bounded worker that overflows into the injector while thieves steal from both the worker
/// and the injector.
#[test]
fn overflow_to_injector_vs_thieves() {
    overflow_vs_thieves(|| Worker::bounded(16), "overflow_to_injector_vs_thieves");
    overflow_vs_thieves(|| Worker::bounded_fifo(16), "overflow_to_injector_vs_thieves (fifo)");
}

fn overflow_vs_thieves(make: fn() -> Worker<Item>, name: &str) {
    with_watchdog(name, LIMIT, || {
        let ledger = Ledger::new(ITEMS);
        let owner = make();
        let global = Injector::new();
        let finished = AtomicBool::new(false);
        thread::scope(|scope| {
            for t in 0..THIEVES {
                let stealer = owner.stealer();
                let (ledger, finished, global) = (&ledger, &finished, &global);
                scope.spawn(move || {
                    // Thief 2 takes into a FIFO queue: batches cross flavours.
                    let mine = if t == 2 { Worker::bounded_fifo(32) } else { Worker::bounded(32) };
                    let mut spins = 0;
                    loop {
                        let done = finished.load(Ordering::Acquire);
                        let got = if t == 0 {
                            stealer.steal_half_into(&mine)
                        } else {
                            global
                                .steal_batch_with_limit_and_pop(&mine, 17)
                                .or_else(|| stealer.steal())
                        };
                        match got {
                            Steal::Success(item) => {
                                ledger.consume(item);
                                while let Some(item) = mine.pop() {
                                    ledger.consume(item);
                                }
                                spins = 0;
                            }
                            Steal::Empty if done && global.is_empty() => break,
                            _ => idle(&mut spins),
                        }
                    }
                });
            }
            for id in 0..ITEMS {
                owner.push_or_overflow(Item::new(id, &ledger), &global);
                if id % 5 == 0
                    && let Some(item) = owner.pop()
                {
                    ledger.consume(item);
                }
            }
            while let Some(item) = owner.pop() {
                ledger.consume(item);
            }
            finished.store(true, Ordering::Release);
        });
        // Thief 1 and 2 only stop once the injector is empty, but thief 0 only steals from the
        // worker: drain whatever the injector still holds (none, normally).
        while let Some(item) = global.steal().success() {
            ledger.consume(item);
        }
        ledger.assert_all_delivered(ITEMS);
    });
}

/// Injector MPMC: two producers (single pushes and batches) and two consumers (single steals
/// and batch steals into their own workers).
#[test]
fn injector_mpmc() {
    with_watchdog("injector_mpmc", LIMIT, || {
        let ledger = Ledger::new(ITEMS);
        let global = Injector::new();
        let producers_left = AtomicUsize::new(2);
        thread::scope(|scope| {
            for p in 0..2 {
                let (ledger, global, producers_left) = (&ledger, &global, &producers_left);
                scope.spawn(move || {
                    let ids = (p..ITEMS).step_by(2);
                    if p == 0 {
                        for id in ids {
                            global.push(Item::new(id, ledger));
                        }
                    } else {
                        let ids: Vec<usize> = ids.collect();
                        for chunk in ids.chunks(100) {
                            global.push_batch(chunk.iter().map(|&id| Item::new(id, ledger)));
                        }
                    }
                    producers_left.fetch_sub(1, Ordering::Release);
                });
            }
            for c in 0..2 {
                let (ledger, global, producers_left) = (&ledger, &global, &producers_left);
                scope.spawn(move || {
                    let mine = Worker::new();
                    let mut spins = 0;
                    loop {
                        let done = producers_left.load(Ordering::Acquire) == 0;
                        let got = if c == 0 {
                            global.steal()
                        } else {
                            global.steal_batch_with_limit_and_pop(&mine, 17)
                        };
                        match got {
                            Steal::Success(item) => {
                                ledger.consume(item);
                                while let Some(item) = mine.pop() {
                                    ledger.consume(item);
                                }
                                spins = 0;
                            }
                            Steal::Empty if done => break,
                            _ => idle(&mut spins),
                        }
                    }
                });
            }
        });
        ledger.assert_all_delivered(ITEMS);
    });
}

/// Items still queued when every handle is dropped are dropped exactly once, in both modes,
/// including after growth and with a steal in between.
#[test]
fn items_left_inside_are_dropped_once() {
    let ledger = Ledger::new(10_000);
    for make in [|| Worker::bounded(1024), Worker::new as fn() -> Worker<Item>] {
        let w = make();
        let stealers: Vec<_> = (0..3).map(|_| w.stealer()).collect();
        for id in 0..1000 {
            w.push(Item::new(id, &ledger)).ok().unwrap();
        }
        let dest = Worker::bounded(8);
        assert!(stealers[0].steal_half_into(&dest).is_success());
        let moved_elsewhere = thread::spawn(move || drop(dest));
        moved_elsewhere.join().unwrap();
        drop(w); // stealers still hold the queue
        assert!(ledger.live.load(Ordering::Relaxed) > 0);
        drop(stealers);
        ledger.assert_no_leak();
    }
    // Items kept by a pop batch when the owner's handle drops.
    let w = Worker::bounded(64).with_pop_batch(8);
    let stealer = w.stealer();
    for id in 0..32 {
        w.push(Item::new(id, &ledger)).ok().unwrap();
    }
    drop(w.pop());
    assert_eq!(stealer.len(), 24, "the pop batch keeps 7 items out of thieves' reach");
    drop(w);
    assert_eq!(stealer.len(), 31, "dropping the owner gives the kept items back");
    drop(stealer);
    ledger.assert_no_leak();
    let global = Injector::new();
    global.push_batch((0..500).map(|id| Item::new(id, &ledger)));
    let w = Worker::bounded(64);
    drop(global.steal_batch_with_limit_and_pop(&w, 17));
    drop(global);
    drop(w);
    ledger.assert_no_leak();
    assert_eq!(ledger.created.load(Ordering::Relaxed), 2532);
    let _ = Arc::strong_count(&ledger);
}
