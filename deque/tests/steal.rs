//! Which items each kind of steal takes and in what order the thief's own queue hands them
//! out, for every pair of victim (FIFO worker, LIFO worker, injector) and destination (FIFO
//! or LIFO worker): the cases of crossbeam-deque's `tests/steal.rs`, as one table.
//!
//! The rule, crossbeam's: a single steal takes the oldest item; a batch leaves the thief's
//! queue popping the stolen items in the order the victim's owner would have popped them
//! (oldest first from a FIFO worker or the injector, newest first from a LIFO worker), and a
//! batch-and-pop returns the first of that order.
#![cfg(not(loom))]

use purloin_deque::{Injector, Steal, Worker};

/// Where items are stolen from.
#[derive(Clone, Copy, Debug)]
enum Victim {
    Fifo,
    Lifo,
    Injector,
}

const VICTIMS: [Victim; 3] = [Victim::Fifo, Victim::Lifo, Victim::Injector];

/// A victim holding `1..=n`, and the steals a thief can make from it.
enum Source {
    Worker(Worker<u32>),
    Injector(Box<Injector<u32>>),
}

impl Source {
    fn filled(victim: Victim, n: u32) -> Source {
        let worker = |w: Worker<u32>| {
            for i in 1..=n {
                w.push(i).unwrap();
            }
            Source::Worker(w)
        };
        match victim {
            Victim::Fifo => worker(Worker::new_fifo()),
            Victim::Lifo => worker(Worker::new_lifo()),
            Victim::Injector => {
                let q = Injector::new();
                q.push_batch(1..=n);
                Source::Injector(Box::new(q))
            }
        }
    }

    /// Repeats `f` while it says `Retry` (the injector's `Retry` means a push is half done;
    /// on one thread it never is, so this returns at once).
    fn settle<T>(mut f: impl FnMut() -> Steal<T>) -> Steal<T> {
        loop {
            let outcome = f();
            if !outcome.is_retry() {
                return outcome;
            }
        }
    }

    fn steal(&self) -> Steal<u32> {
        match self {
            Source::Worker(w) => w.stealer().steal(),
            Source::Injector(q) => Source::settle(|| q.steal()),
        }
    }

    fn steal_batch(&self, dest: &Worker<u32>) -> Steal<()> {
        match self {
            Source::Worker(w) => w.stealer().steal_batch(dest),
            Source::Injector(q) => Source::settle(|| q.steal_batch(dest)),
        }
    }

    fn steal_batch_and_pop(&self, dest: &Worker<u32>) -> Steal<u32> {
        match self {
            Source::Worker(w) => w.stealer().steal_batch_and_pop(dest),
            Source::Injector(q) => Source::settle(|| q.steal_batch_and_pop(dest)),
        }
    }
}

fn destinations() -> [Worker<u32>; 2] {
    [Worker::new_fifo(), Worker::new_lifo()]
}

#[test]
fn single_steals_take_the_oldest() {
    for victim in VICTIMS {
        let source = Source::filled(victim, 3);
        for i in 1..=3 {
            assert_eq!(source.steal(), Steal::Success(i), "{victim:?}");
        }
        assert_eq!(source.steal(), Steal::Empty, "{victim:?}");
    }
}

#[test]
fn steal_batch_follows_the_victim_owners_order() {
    for victim in VICTIMS {
        for dest in destinations() {
            let source = Source::filled(victim, 4);
            assert_eq!(source.steal_batch(&dest), Steal::Success(()), "{victim:?}");
            // Half of four from a worker is {1, 2}; the injector may take all four.
            let expected = match victim {
                Victim::Lifo => [2, 1],
                Victim::Fifo | Victim::Injector => [1, 2],
            };
            let got = [dest.pop().unwrap(), dest.pop().unwrap()];
            assert_eq!(got, expected, "{victim:?} into fifo={}", dest.is_fifo());
        }
    }
}

#[test]
fn steal_batch_and_pop_returns_the_first_of_that_order() {
    for victim in VICTIMS {
        for dest in destinations() {
            let source = Source::filled(victim, 6);
            let (first, then) = match victim {
                // Half of six from a LIFO worker is {1, 2, 3}; its owner would pop 3 first.
                Victim::Lifo => (3, [2, 1]),
                Victim::Fifo | Victim::Injector => (1, [2, 3]),
            };
            assert_eq!(source.steal_batch_and_pop(&dest), Steal::Success(first), "{victim:?}");
            let got = [dest.pop().unwrap(), dest.pop().unwrap()];
            assert_eq!(got, then, "{victim:?} into fifo={}", dest.is_fifo());
        }
    }
}

#[test]
fn batch_sizes_match_crossbeam() {
    // steal_batch: ceil(len / 2), at most the limit (32 by default).
    for (len, expected) in [(1, 1), (2, 1), (5, 3), (100, 32)] {
        for victim in [Victim::Fifo, Victim::Lifo] {
            let source = Source::filled(victim, len);
            let dest = Worker::new_lifo();
            assert_eq!(source.steal_batch(&dest), Steal::Success(()));
            assert_eq!(dest.len(), expected, "{victim:?} len {len}");
        }
    }
    // steal_batch_with_limit_and_pop: 1 + min((len - 1) / 2, limit - 1) in all.
    for (len, limit, expected) in [(1, 5, 1), (6, 2, 2), (7, 10, 4), (100, 3, 3)] {
        let w = Worker::new_fifo();
        for i in 0..len {
            w.push(i).unwrap();
        }
        let dest = Worker::new_fifo();
        assert_eq!(w.stealer().steal_batch_with_limit_and_pop(&dest, limit), Steal::Success(0));
        assert_eq!(dest.len() + 1, expected, "len {len} limit {limit}");
    }
}

#[test]
fn batch_into_own_queue_moves_nothing() {
    let w = Worker::new_fifo();
    let s = w.stealer();
    assert_eq!(s.steal_batch(&w), Steal::Empty);
    assert_eq!(s.steal_batch_and_pop(&w), Steal::Empty);
    w.push(1).unwrap();
    w.push(2).unwrap();
    assert_eq!(s.steal_batch(&w), Steal::Success(()));
    assert_eq!(w.len(), 2);
    // As in crossbeam: batch-and-pop into the victim itself is the owner's pop.
    assert_eq!(s.steal_batch_and_pop(&w), Steal::Success(1));
}

#[test]
fn batch_into_a_full_bounded_worker() {
    let victim = Worker::new_lifo();
    for i in 0..8 {
        victim.push(i).unwrap();
    }
    let full = Worker::bounded(2);
    full.push(100).unwrap();
    full.push(101).unwrap();
    let s = victim.stealer();
    // Nothing can move: Retry (crossbeam's workers are never full), and nothing was taken.
    assert_eq!(s.steal_batch(&full), Steal::Retry);
    assert_eq!(victim.len(), 8);
    // With a pop, the one item still comes back.
    assert_eq!(s.steal_batch_and_pop(&full), Steal::Success(0));
    assert_eq!(victim.len(), 7);
    let empty = Worker::<u32>::new_lifo();
    assert_eq!(empty.stealer().steal_batch(&full), Steal::Empty);
}

#[test]
#[should_panic(expected = "pass a limit of 1 or more")]
fn zero_limit_panics_as_in_crossbeam() {
    let w = Worker::<u8>::new_fifo();
    let _ = w.stealer().steal_batch_with_limit(&Worker::new_fifo(), 0);
}

#[test]
fn no_retry_from_a_lone_thief() {
    // With no other steal in flight, a steal never says Retry, whatever the owner does
    // between steals.
    for victim in [Victim::Fifo, Victim::Lifo] {
        let Source::Worker(w) = Source::filled(victim, 0) else { unreachable!() };
        let s = w.stealer();
        let mine = Worker::new_lifo();
        for round in 0..1_000 {
            w.push(round).unwrap();
            w.push(round + 1).unwrap();
            let _ = w.pop();
            assert!(!s.steal().is_retry());
            w.push(round).unwrap();
            assert!(!s.steal_half_into(&mine).is_retry());
            while mine.pop().is_some() {}
            while w.pop().is_some() {}
        }
    }
}
