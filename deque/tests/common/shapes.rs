//! crossbeam-deque's test shapes for a worker and its stealers (smoke, is_empty, spsc,
//! stampede, stress, no_starvation, destructors), written once for both flavours and run
//! from `tests/fifo.rs` and `tests/lifo.rs`.
//!
//! Differences from crossbeam's versions, all deliberate: fewer threads (the CI machine has
//! two cores), every multi-threaded shape under a watchdog instead of a hang, items that count
//! their own drops and an exactly-once ledger instead of bare integers where delivery is the
//! point, and thieves that alternate between a LIFO and a FIFO destination so each batch steal
//! also crosses flavours.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use purloin_deque::{Steal, Worker};

use super::{DropLog, Item, LIMIT, Ledger, consume_increasing, idle, with_watchdog};

/// Which end the owner pops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    Lifo,
    Fifo,
}

impl Flavour {
    /// A growable worker of this flavour (crossbeam's workers are growable).
    pub fn worker<T>(self) -> Worker<T> {
        match self {
            Flavour::Lifo => Worker::new_lifo(),
            Flavour::Fifo => Worker::new_fifo(),
        }
    }

    /// The flavour of thief `index`'s own queue: alternating, so batches cross flavours.
    fn thief_queue<T>(self, index: usize) -> Worker<T> {
        if index.is_multiple_of(2) { self.worker() } else { self.other().worker() }
    }

    fn other(self) -> Flavour {
        match self {
            Flavour::Lifo => Flavour::Fifo,
            Flavour::Fifo => Flavour::Lifo,
        }
    }
}

/// Thieves per shape (crossbeam runs 8; two cores are shared here).
const THIEVES: usize = 4;

/// Items per multi-threaded shape.
const COUNT: usize = 50_000;

/// A tiny xorshift generator: the shapes need variety, not quality.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One thread's scripted walk through push, pop and steal, including popping an empty queue
/// and interleaving the owner with a thief.
pub fn smoke(flavour: Flavour) {
    let w = flavour.worker();
    let s = w.stealer();
    assert_eq!(w.pop(), None);
    assert_eq!(s.steal(), Steal::Empty);

    w.push(10).unwrap();
    assert_eq!(w.pop(), Some(10));
    assert_eq!((w.pop(), s.steal()), (None, Steal::Empty));

    w.push(20).unwrap();
    assert_eq!(s.steal(), Steal::Success(20));
    assert_eq!((w.pop(), s.steal()), (None, Steal::Empty));

    // Thieves always take the oldest.
    for i in 30..33 {
        w.push(i).unwrap();
    }
    for i in 30..33 {
        assert_eq!(s.steal(), Steal::Success(i));
    }
    assert_eq!(s.steal(), Steal::Empty);

    // The owner and a thief take turns on four items.
    for i in 40..44 {
        w.push(i).unwrap();
    }
    let expected = match flavour {
        // Owner from the head too: 40, then the thief 41, then 42, 43.
        Flavour::Fifo => [Some(40), Some(42), Some(43)],
        // Owner from the tail: 43, the thief 40, then 42, 41.
        Flavour::Lifo => [Some(43), Some(42), Some(41)],
    };
    assert_eq!(w.pop(), expected[0]);
    let stolen = if flavour == Flavour::Fifo { 41 } else { 40 };
    assert_eq!(s.steal(), Steal::Success(stolen));
    assert_eq!(w.pop(), expected[1]);
    assert_eq!(w.pop(), expected[2]);
    assert_eq!(w.pop(), None);
}

/// `is_empty` of the worker and of a stealer follows pushes, pops and steals.
pub fn is_empty(flavour: Flavour) {
    let w = flavour.worker();
    let s = w.stealer();
    assert!(w.is_empty() && s.is_empty());
    w.push(1).unwrap();
    assert!(!w.is_empty() && !s.is_empty());
    w.push(2).unwrap();
    let _ = w.pop();
    assert!(!w.is_empty() && !s.is_empty());
    let _ = w.pop();
    assert!(w.is_empty() && s.is_empty());

    w.push(3).unwrap();
    w.push(4).unwrap();
    let _ = s.steal();
    assert!(!w.is_empty() && !s.is_empty());
    let _ = s.steal();
    assert!(w.is_empty() && s.is_empty());
}

/// One owner pushes, one thief steals: the thief sees every item, in push order.
pub fn spsc(flavour: Flavour) {
    with_watchdog("spsc", LIMIT, || {
        let w = flavour.worker();
        let s = w.stealer();
        thread::scope(|scope| {
            scope.spawn(|| {
                let mut spins = 0;
                for expected in 0..COUNT {
                    loop {
                        match s.steal() {
                            Steal::Success(got) => {
                                assert_eq!(got, expected, "the thief sees push order");
                                break;
                            }
                            Steal::Empty | Steal::Retry => idle(&mut spins),
                        }
                    }
                }
                assert_eq!(s.steal(), Steal::Empty);
            });
            for i in 0..COUNT {
                w.push(i).unwrap();
            }
        });
    });
}

/// A full queue, then the owner and many thieves drain it at once. Each consumer sees its
/// items in the order of its end (thieves: oldest first; the owner: its flavour's order), and
/// every item is taken exactly once.
pub fn stampede(flavour: Flavour) {
    with_watchdog("stampede", LIMIT, || {
        let ledger = Ledger::new(COUNT);
        let w = flavour.worker();
        for id in 0..COUNT {
            w.push(Item::new(id, &ledger)).ok().unwrap();
        }
        let left = AtomicUsize::new(COUNT);
        thread::scope(|scope| {
            for _ in 0..THIEVES {
                let (s, ledger, left) = (w.stealer(), &ledger, &left);
                scope.spawn(move || consume_increasing(|| s.steal(), left, ledger));
            }
            let mut last: Option<usize> = None;
            while left.load(Ordering::Relaxed) > 0 {
                if let Some(item) = w.pop() {
                    if let Some(last) = last {
                        match flavour {
                            Flavour::Fifo => assert!(last < item.id, "FIFO owner went backwards"),
                            Flavour::Lifo => assert!(last > item.id, "LIFO owner went forwards"),
                        }
                    }
                    last = Some(item.id);
                    left.fetch_sub(1, Ordering::Relaxed);
                    ledger.consume(item);
                }
            }
        });
        drop(w);
        ledger.assert_all_delivered(COUNT);
    });
}

/// Everything at once: the owner pushes with random bursts of pops; thieves mix single
/// steals, batch steals and batch-and-pop steals into their own queues and drain those.
pub fn stress(flavour: Flavour) {
    with_watchdog("stress", LIMIT, || {
        let ledger = Ledger::new(COUNT);
        let w = flavour.worker();
        let done = AtomicBool::new(false);
        thread::scope(|scope| {
            for index in 0..THIEVES {
                let (s, ledger, done) = (w.stealer(), &ledger, &done);
                scope.spawn(move || {
                    let mine = flavour.thief_queue(index);
                    while !done.load(Ordering::Relaxed) {
                        if let Steal::Success(item) = s.steal() {
                            ledger.consume(item);
                        }
                        let _ = s.steal_batch(&mine);
                        if let Steal::Success(item) = s.steal_batch_and_pop(&mine) {
                            ledger.consume(item);
                        }
                        if let Steal::Success(item) = s.steal_batch_with_limit_and_pop(&mine, 3) {
                            ledger.consume(item);
                        }
                        while let Some(item) = mine.pop() {
                            ledger.consume(item);
                        }
                    }
                });
            }
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let mut next = 0;
            while next < COUNT {
                if rng.below(3) == 0 {
                    while let Some(item) = w.pop() {
                        ledger.consume(item);
                    }
                } else {
                    w.push(Item::new(next, &ledger)).ok().unwrap();
                    next += 1;
                }
            }
            let mut spins = 0;
            while ledger.consumed.load(Ordering::Relaxed) < COUNT {
                match w.pop() {
                    Some(item) => ledger.consume(item),
                    None => idle(&mut spins),
                }
            }
            done.store(true, Ordering::Relaxed);
        });
        drop(w);
        ledger.assert_all_delivered(COUNT);
    });
}

/// Neither side starves the other: the owner keeps pushing (and popping until it has had
/// something) until it and every thief have taken at least one item.
pub fn no_starvation(flavour: Flavour) {
    with_watchdog("no_starvation", LIMIT, || {
        let w = flavour.worker();
        let done = AtomicBool::new(false);
        let hits: Vec<AtomicUsize> = (0..THIEVES).map(|_| AtomicUsize::new(0)).collect();
        thread::scope(|scope| {
            for (index, hits) in hits.iter().enumerate() {
                let (s, done) = (w.stealer(), &done);
                scope.spawn(move || {
                    let mine = flavour.thief_queue(index);
                    while !done.load(Ordering::Relaxed) {
                        let mut got = usize::from(s.steal().is_success());
                        let _ = s.steal_batch(&mine);
                        got += usize::from(s.steal_batch_and_pop(&mine).is_success());
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
            let mut rng = Rng(0x2545_f491_4f6c_dd1d);
            let mut mine = 0;
            loop {
                for i in 0..rng.below(2_000) {
                    if mine == 0 && rng.below(3) == 0 {
                        while w.pop().is_some() {
                            mine += 1;
                        }
                    } else {
                        w.push(i).unwrap();
                    }
                }
                if mine > 0 && hits.iter().all(|h| h.load(Ordering::Relaxed) > 0) {
                    break;
                }
                thread::yield_now();
            }
            done.store(true, Ordering::Relaxed);
        });
    });
}

/// Items are dropped exactly once: the ones taken when their taker is done with them, the
/// rest when the worker goes, and those are one contiguous run of ids (both ends were
/// consumed in order).
pub fn destructors(flavour: Flavour) {
    const STEPS: usize = 1_000;
    with_watchdog("destructors", LIMIT, || {
        let log = DropLog::default();
        let w = flavour.worker();
        for i in 0..COUNT {
            w.push(log.item(i)).ok().unwrap();
        }
        let taken = AtomicUsize::new(0);
        thread::scope(|scope| {
            for index in 0..THIEVES {
                let (s, taken) = (w.stealer(), &taken);
                scope.spawn(move || {
                    let mine = flavour.thief_queue(index);
                    let mut count = 0;
                    while count < STEPS {
                        count += usize::from(s.steal().is_success());
                        let _ = s.steal_batch(&mine);
                        count += usize::from(s.steal_batch_and_pop(&mine).is_success());
                        while mine.pop().is_some() {
                            count += 1;
                        }
                    }
                    taken.fetch_add(count, Ordering::Relaxed);
                });
            }
            for _ in 0..STEPS {
                if w.pop().is_some() {
                    taken.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let taken = taken.into_inner();
        assert!(taken < COUNT, "the shape needs items left over");
        assert_eq!(log.take_count(), taken, "every taken item was dropped once");
        drop(w);
        log.assert_contiguous_rest(COUNT - taken);
    });
}
