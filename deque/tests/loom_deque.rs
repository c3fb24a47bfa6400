//! loom models of the work-stealing queue (`Worker` / `Stealer`), run by
//! `cargo xtask loom -p purloin-deque` (capacities shrink under loom: growable rings start at
//! 2 slots, injector blocks hold 2).
//!
//! Every model checks exactly-once delivery (each id taken once, none lost) and, through
//! loom's `Arc` tokens inside the items, that nothing leaks. loom itself checks every slot
//! access for data races, which is how "no thread reads a slot it has not claimed" and "no
//! slot is overwritten while being read" are verified.
//!
//! Mutation checks (each made on a scratch copy, run with `cargo xtask loom`, then reverted),
//! with what loom reported:
//! * P1: `push` stores `push_count` `Relaxed` instead of `Release` -> `push_pop_vs_one_thief`
//!   fails: "Causality violation: Concurrent read and write accesses."
//! * P2: the pop RMW and the claimer's loads of `packed` all `Relaxed` ->
//!   `steal_never_reports_empty_while_items_exist` fails: "steal reported Empty while item 0
//!   was queued".
//! * P3: the claimer's `done` store `Relaxed` instead of `Release` ->
//!   `thief_read_vs_owner_wrapping_push` fails: "Causality violation: Concurrent read and write
//!   accesses to `UnsafeCell`". (Before its push loop yielded, loom's bounded search never ran
//!   the whole steal between two owner steps and missed this; the loop fixed that.)
//! * The crossbeam#148 race: `pop` rewritten as textbook Chase-Lev (store the decremented
//!   bottom, `fence(SeqCst)`, load head, CAS only for the last item) ->
//!   `owner_pops_while_thief_steals_half_from_stale_view` fails: "Arc is already released"
//!   (an item delivered to both the owner and the thief, so dropped twice).
//! * Reclamation: the thief drops its epoch guard right after claiming, before reading ->
//!   `growth_while_thief_reads` fails: "Causality violation: Concurrent read and write
//!   accesses to `UnsafeCell`" (the freed ring's teardown vs the thief's read).
//! * Pop batches: the batch not counting the items it keeps in the owner's push count (so
//!   they are neither handed out nor given back) -> both `pop_batch_*` models fail: "an item
//!   was lost". A short pop batch not giving back the count it over-took ->
//!   `pop_batch_larger_than_what_thieves_left` fails: "Arc is already released" (a thief's
//!   later claim, computed from the too-low published tail plus the owner's next push, takes
//!   an item the owner also took).
//! * `pop_if`: a rejected item not given back (returning `None` without the `push_count`
//!   store) -> `pop_if_vs_thief` fails: "an item was lost". The give-back's store `Relaxed`
//!   instead of `Release` is *not* caught, and need not be: a claimer that loads the given-back
//!   count has loaded `packed` after the owner's pop RMW (else its CAS fails on the old
//!   `pop_count`), and that Acquire load already orders the slot's write before its read
//!   (P2). The store stays `Release`, as every `push_count` store is (P1).
#![cfg(loom)]

use std::collections::BTreeSet;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use purloin_deque::{Injector, Steal, Worker};

/// An item that holds a loom `Arc`: if a model leaks an item, loom reports the leaked `Arc`.
struct Item {
    id: usize,
    _token: Arc<()>,
}

fn item(id: usize, token: &Arc<()>) -> Item {
    Item { id, _token: token.clone() }
}

/// Asserts that `taken` holds each of `0..n` exactly once.
fn assert_exactly_once(taken: impl IntoIterator<Item = usize>, n: usize) {
    let mut seen = BTreeSet::new();
    for id in taken {
        assert!(seen.insert(id), "item {id} delivered twice");
    }
    assert_eq!(seen, (0..n).collect::<BTreeSet<_>>(), "an item was lost");
}

fn drain(worker: &Worker<Item>, into: &mut Vec<usize>) {
    while let Some(it) = worker.pop() {
        into.push(it.id);
    }
}

/// Owner pushes and pops while one thief steals single items.
#[test]
fn push_pop_vs_one_thief() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded(2);
        let s = w.stealer();
        w.push(item(0, &token)).ok().unwrap();
        let thief = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                if let Steal::Success(it) = s.steal() {
                    got.push(it.id);
                }
            }
            got
        });
        w.push(item(1, &token)).ok().unwrap();
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 2);
    });
}

/// Two thieves steal halves concurrently (one claim at a time; the other gets Retry), while
/// the owner pops.
#[test]
fn two_thieves() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded(4);
        for id in 0..3 {
            w.push(item(id, &token)).ok().unwrap();
        }
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let s = w.stealer();
                thread::spawn(move || {
                    let mine = Worker::bounded(4);
                    let mut got = Vec::new();
                    if let Steal::Success(it) = s.steal_half_into(&mine) {
                        got.push(it.id);
                    }
                    drain(&mine, &mut got);
                    got
                })
            })
            .collect();
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        for t in thieves {
            taken.extend(t.join().unwrap());
        }
        drain(&w, &mut taken);
        assert_exactly_once(taken, 3);
    });
}

/// The crossbeam#148 race: the owner pops several items while a thief that may have read an
/// old view of the queue claims half of it with one CAS.
#[test]
fn owner_pops_while_thief_steals_half_from_stale_view() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded(4);
        for id in 0..4 {
            w.push(item(id, &token)).ok().unwrap();
        }
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::bounded(4);
            let mut got = Vec::new();
            if let Steal::Success(it) = s.steal_half_into(&mine) {
                got.push(it.id);
            }
            drain(&mine, &mut got);
            got
        });
        let mut taken = Vec::new();
        for _ in 0..3 {
            if let Some(it) = w.pop() {
                taken.push(it.id);
            }
        }
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 4);
    });
}

/// Steal-half against the owner's pop of the last item: exactly one of them gets it.
#[test]
fn steal_half_vs_pop_of_last_item() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded(2);
        w.push(item(0, &token)).ok().unwrap();
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::bounded(2);
            let got = s.steal_half_into(&mine).success().map(|it| it.id);
            assert!(mine.is_empty());
            got
        });
        let popped = w.pop().map(|it| it.id);
        let stolen = thief.join().unwrap();
        assert_exactly_once(popped.into_iter().chain(stolen), 1);
        assert!(w.pop().is_none());
    });
}

/// A thief completes a steal while the owner wraps around the ring and reuses the slot the
/// thief read: the reuse must happen after the read (P3).
#[test]
fn thief_read_vs_owner_wrapping_push() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded(2);
        w.push(item(0, &token)).ok().unwrap();
        w.push(item(1, &token)).ok().unwrap();
        let s = w.stealer();
        let thief = thread::spawn(move || s.steal().success().map(|it| it.id));
        // The ring is full: the push succeeds only once the thief has released slot 0, and
        // then it writes that very slot.
        let mut pending = item(2, &token);
        while let Err(back) = w.push(pending) {
            pending = back;
            thread::yield_now();
        }
        let mut taken: Vec<usize> = thief.join().unwrap().into_iter().collect();
        drain(&w, &mut taken);
        assert_exactly_once(taken, 3);
    });
}

/// `Empty` is trustworthy: once the thief knows (through `ready`) that item 0 was pushed, a
/// steal never says Empty, even while the owner pushes and pops item 1 (P2).
#[test]
fn steal_never_reports_empty_while_items_exist() {
    loom::model(|| {
        let token = Arc::new(());
        let w: Worker<Item> = Worker::bounded(2);
        let s = w.stealer();
        let ready = Arc::new(AtomicBool::new(false));
        let ready2 = ready.clone();
        let thief = thread::spawn(move || {
            if ready2.load(Ordering::Acquire) {
                // Item 0 is in the queue and only this thread takes from the head.
                match s.steal() {
                    Steal::Empty => panic!("steal reported Empty while item 0 was queued"),
                    Steal::Success(it) => Some(it.id),
                    Steal::Retry => None,
                }
            } else {
                None
            }
        });
        w.push(item(0, &token)).ok().unwrap();
        ready.store(true, Ordering::Release);
        w.push(item(1, &token)).ok().unwrap();
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 2);
    });
}

/// The growable ring grows (and is retired through the epoch, with explicit flushes so the
/// retired ring is really freed inside the model) while a thief reads from it.
#[test]
fn growth_while_thief_reads() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::new();
        w.push(item(0, &token)).ok().unwrap();
        w.push(item(1, &token)).ok().unwrap();
        assert_eq!(w.capacity(), 2);
        let s = w.stealer();
        let thief = thread::spawn(move || s.steal().success().map(|it| it.id));
        // The ring is full (unless the thief already took an item): this grows it to 4 and
        // retires the 2-slot ring.
        w.push(item(2, &token)).ok().unwrap();
        // Two flushes advance the global epoch twice, which is what it takes for the retired
        // ring to be freed while the thief may still be running (if it is not pinned).
        crossbeam_epoch::pin().flush();
        crossbeam_epoch::pin().flush();
        let mut taken = Vec::new();
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 3);
    });
}

/// The owner shrinks its ring while a thief steals half of it.
#[test]
fn shrink_while_thief_steals_half() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::new();
        for id in 0..3 {
            w.push(item(id, &token)).ok().unwrap();
        }
        assert_eq!(w.capacity(), 4);
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::bounded(2);
            let mut got: Vec<usize> =
                s.steal_half_into(&mine).success().map(|it| it.id).into_iter().collect();
            drain(&mine, &mut got);
            got
        });
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        w.shrink_to_fit();
        crossbeam_epoch::pin().flush();
        taken.extend(thief.join().unwrap());
        crossbeam_epoch::pin().flush();
        drain(&w, &mut taken);
        assert_exactly_once(taken, 3);
    });
}

/// A bounded worker overflows half of its items into the injector while a thief steals half.
#[test]
fn overflow_to_injector_vs_thief() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded(2);
        let global = Injector::new();
        w.push(item(0, &token)).ok().unwrap();
        w.push(item(1, &token)).ok().unwrap();
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::bounded(2);
            let mut got: Vec<usize> =
                s.steal_half_into(&mine).success().map(|it| it.id).into_iter().collect();
            drain(&mine, &mut got);
            got
        });
        w.push_or_overflow(item(2, &token), &global);
        let mut taken = thief.join().unwrap();
        drain(&w, &mut taken);
        while let Steal::Success(it) = global.steal() {
            taken.push(it.id);
        }
        assert_exactly_once(taken, 3);
    });
}

/// A worker of `capacity` slots with pop batches of 2, holding items 0..4, and the loom token
/// its items hold.
fn four_items_pop_batch_2(capacity: usize) -> (Arc<()>, Worker<Item>) {
    let token = Arc::new(());
    let w = Worker::bounded(capacity).with_pop_batch(2);
    for id in 0..4 {
        w.push(item(id, &token)).ok().unwrap();
    }
    (token, w)
}

/// Pop batches (`with_pop_batch`): the owner's one RMW takes two items out of thieves' reach,
/// hands out the kept one with no atomic, and its next push gives back what is still kept,
/// while a thief steals half from whatever view it has.
#[test]
fn pop_batch_kept_items_vs_thief_steal_half() {
    loom::model(|| {
        let (token, w) = four_items_pop_batch_2(4);
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::bounded(4);
            let mut got = Vec::new();
            if let Steal::Success(it) = s.steal_half_into(&mine) {
                got.push(it.id);
            }
            drain(&mine, &mut got);
            got
        });
        let mut taken = Vec::new();
        taken.extend(w.pop().map(|it| it.id));
        w.push(item(4, &token)).ok().unwrap();
        taken.extend(w.pop().map(|it| it.id));
        taken.extend(w.pop().map(|it| it.id));
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 5);
    });
}

/// A pop batch that finds fewer items than it took (thieves emptied the queue since the owner
/// last looked): the owner keeps only what was there and gives the rest of the count back, so
/// the queue stays consistent for the owner's later pushes and the thief's later steals.
/// (Capacity 8: in a full ring of 4 the push may fail, correctly, while the owner cannot yet
/// see a thief's completed claim.)
#[test]
fn pop_batch_larger_than_what_thieves_left() {
    loom::model(|| {
        let (token, w) = four_items_pop_batch_2(8);
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::bounded(4);
            let mut got: Vec<usize> =
                s.steal_half_into(&mine).success().map(|it| it.id).into_iter().collect();
            for _ in 0..2 {
                got.extend(s.steal().success().map(|it| it.id));
            }
            drain(&mine, &mut got);
            got
        });
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        w.push(item(4, &token)).ok().unwrap();
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 5);
        assert!(w.stealer().steal().is_empty());
    });
}

/// `pop_if` (the take-back of a fork-join's job): the owner takes its own item back while a
/// thief steals single items. A rejected top item is given back in place and stays stealable;
/// an accepted one is the owner's alone; and taking back from a queue the thief emptied gives
/// the count back, so the owner's next push and the thief's next steal still agree.
#[test]
fn pop_if_vs_thief() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded(4);
        w.push(item(0, &token)).ok().unwrap();
        w.push(item(1, &token)).ok().unwrap();
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                got.extend(s.steal().success().map(|it| it.id));
            }
            got
        });
        let mut taken = Vec::new();
        // Item 1 is on top unless stolen: rejected, it stays (and may be stolen after).
        taken.extend(w.pop_if(|it| it.id == 0).map(|it| it.id));
        // Takes 1 back if the thief did not get it.
        taken.extend(w.pop_if(|it| it.id == 1).map(|it| it.id));
        w.push(item(2, &token)).ok().unwrap();
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 3);
        assert!(w.stealer().steal().is_empty());
    });
}
