//! loom models of the FIFO flavour (`Worker::new_fifo` / `bounded_fifo`: the owner pops the
//! head, where thieves claim) and of the chain of claim completions that both flavours rely
//! on, run by `cargo xtask loom -p purloin-deque fifo` (and with all models).
//!
//! As in `loom_deque.rs`, every model checks exactly-once delivery and, through loom `Arc`
//! tokens inside the items, that nothing leaks; loom checks every slot access for data races.
//!
//! Mutation checks (each applied to the crate source, run with
//! `cargo xtask loom -p purloin-deque fifo`, seen to fail, then reverted), with what loom
//! reported, are listed on each model.
#![cfg(loom)]

use std::collections::BTreeSet;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use purloin_deque::{Steal, Worker};

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

/// Pushes `pending` until a slot is free (a thief may still be copying the one it needs).
fn push_when_room(w: &Worker<Item>, mut pending: Item) {
    while let Err(back) = w.push(pending) {
        pending = back;
        thread::yield_now();
    }
}

/// The FIFO owner pushes and pops at the head while a thief steals single items from the same
/// end; once every thread is done, a steal never says `Retry` (no steal is in flight).
///
/// Mutation: a FIFO claim leaves `base` where it was (`claimed` packs `(head + n, base)`), so
/// `done != base` forever after the first steal -> fails: "a steal said Retry with no other
/// steal in flight".
#[test]
fn fifo_pop_vs_steal() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded_fifo(2);
        let s = w.stealer();
        w.push(item(0, &token)).ok().unwrap();
        let s2 = s.clone();
        let thief = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                if let Steal::Success(it) = s2.steal() {
                    got.push(it.id);
                }
            }
            got
        });
        push_when_room(&w, item(1, &token));
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        taken.extend(thief.join().unwrap());
        push_when_room(&w, item(2, &token));
        match s.steal() {
            Steal::Success(it) => taken.push(it.id),
            Steal::Empty => {}
            Steal::Retry => panic!("a steal said Retry with no other steal in flight"),
        }
        drain(&w, &mut taken);
        assert_exactly_once(taken, 3);
    });
}

/// The owner pops while a thief's batch claim is in flight: the pop takes the item after the
/// claimed range without waiting, and the owner's next push must not reuse a slot the thief
/// is still copying (the reuse bound is `done`, not the head, while a claim is in flight).
///
/// Mutations:
/// * `Queue::free_bound` returns the head even while a claim is in flight -> fails: "Causality
///   violation: Concurrent read and write accesses to `UnsafeCell`" (the push of item 4
///   rewrites slot 0 under the thief's read).
/// * `Queue::free_bound` loads `done` `Relaxed` instead of `Acquire` (P3) -> fails the same
///   way.
#[test]
fn fifo_pop_while_thief_copies_batch() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded_fifo(4);
        for id in 0..4 {
            w.push(item(id, &token)).ok().unwrap();
        }
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::bounded_fifo(4);
            let mut got: Vec<usize> =
                s.steal_half_into(&mine).success().map(|it| it.id).into_iter().collect();
            drain(&mine, &mut got);
            got
        });
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        push_when_room(&w, item(4, &token));
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 5);
    });
}

/// The thief takes the last item while the owner pops: the owner's pop finds the queue empty
/// and has moved the head one past the tail; its phantom push must bring them back together,
/// or the next pushed item lands below the head and is lost.
///
/// Mutation: `pop_fifo` returns `None` on an empty queue without the phantom push -> fails:
/// "Arc is already released" (the head stays one past the tail, item 1 is pushed below it,
/// and the queue's teardown, walking from the head round to the tail, drops a stale copy of
/// an item already delivered).
#[test]
fn fifo_pop_of_last_item_vs_steal() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded_fifo(2);
        w.push(item(0, &token)).ok().unwrap();
        let s = w.stealer();
        let s2 = s.clone();
        let thief = thread::spawn(move || s2.steal().success().map(|it| it.id));
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        push_when_room(&w, item(1, &token));
        taken.extend(thief.join().unwrap());
        taken.extend(s.steal().success().map(|it| it.id));
        drain(&w, &mut taken);
        assert_exactly_once(taken, 2);
        assert!(w.is_empty() && s.is_empty());
    });
}

/// `Empty` is trustworthy in a FIFO queue too: the thief knows (through `ready`) that item 0
/// was pushed; the owner pushes item 1 and pops one item; so whatever the thief sees, an item
/// is left for it. A thief that sees the owner's pop (the head moved) must also see the push
/// before it (P2), or it computes a "negative" length and reports `Empty`.
///
/// Mutation: `pop_fifo`'s `fetch_add` `Relaxed` instead of `Release` (P2) -> fails: "steal
/// reported Empty while an item was queued".
#[test]
fn fifo_steal_never_reports_empty_while_items_exist() {
    loom::model(|| {
        let token = Arc::new(());
        let w: Worker<Item> = Worker::bounded_fifo(2);
        let s = w.stealer();
        let ready = Arc::new(AtomicBool::new(false));
        let ready2 = ready.clone();
        let thief = thread::spawn(move || {
            if !ready2.load(Ordering::Acquire) {
                return None;
            }
            match s.steal() {
                Steal::Empty => panic!("steal reported Empty while an item was queued"),
                Steal::Success(it) => Some(it.id),
                Steal::Retry => None,
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

/// Two thieves' claims complete one after the other, and the owner then reuses the slot the
/// *first* one read, having acquired only the second one's `done`. The owner's write must
/// still come after the first thief's read: each claimer acquires the previous completion
/// before its CAS, so completions form one happens-before chain (P3). Both flavours.
///
/// Mutation: the claimer's load of `done` in `Queue::claim` `Relaxed` instead of `Acquire`
/// -> fails: "Causality violation: Concurrent read and write accesses to `UnsafeCell`".
#[test]
fn claim_completions_chain_before_slot_reuse() {
    for fifo in [false, true] {
        loom::model(move || {
            let token = Arc::new(());
            let w = if fifo { Worker::bounded_fifo(2) } else { Worker::bounded(2) };
            w.push(item(0, &token)).ok().unwrap();
            w.push(item(1, &token)).ok().unwrap();
            let thieves: Vec<_> = (0..2)
                .map(|_| {
                    let s = w.stealer();
                    thread::spawn(move || s.steal().success().map(|it| it.id))
                })
                .collect();
            // Full ring: item 2 goes to slot 0 once a completion says slot 0 is free.
            push_when_room(&w, item(2, &token));
            let mut taken = Vec::new();
            for t in thieves {
                taken.extend(t.join().unwrap());
            }
            drain(&w, &mut taken);
            assert_exactly_once(taken, 3);
        });
    }
}

/// crossbeam's batch-and-pop from a FIFO victim into a LIFO thief queue (the batch goes in
/// reversed, so the thief pops it oldest first) while the victim's owner pops at the same
/// end: the returned item, the moved ones and the owner's are each taken once.
///
/// Mutation: `Stealer::steal_into` moves the batch starting at the claim's head for a FIFO
/// victim (so the returned item is also moved) -> fails: "item 1 delivered twice".
#[test]
fn fifo_batch_and_pop_into_lifo_vs_owner_pop() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::bounded_fifo(4);
        for id in 0..4 {
            w.push(item(id, &token)).ok().unwrap();
        }
        let s = w.stealer();
        let thief = thread::spawn(move || {
            let mine = Worker::bounded(4);
            let mut got: Vec<usize> =
                s.steal_batch_and_pop(&mine).success().map(|it| it.id).into_iter().collect();
            let mut last = None;
            while let Some(it) = mine.pop() {
                assert!(last < Some(it.id), "the thief's LIFO queue pops the batch oldest first");
                last = Some(it.id);
                got.push(it.id);
            }
            got
        });
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 4);
    });
}

/// A growable FIFO ring grows while a thief reads from the old one and the owner pops at the
/// head (the resize copies from the FIFO head, the high half of the shared word); two flushes
/// let the epoch collector really free the retired ring inside the model.
///
/// Mutation: `Stealer::steal` drops its epoch guard right after claiming, before reading ->
/// fails: "Causality violation: Concurrent read and write accesses to `UnsafeCell`" (the
/// freed ring's teardown against the thief's read), as the LIFO `growth_while_thief_reads`.
#[test]
fn fifo_growth_while_thief_reads() {
    loom::model(|| {
        let token = Arc::new(());
        let w = Worker::new_fifo();
        w.push(item(0, &token)).ok().unwrap();
        w.push(item(1, &token)).ok().unwrap();
        assert_eq!(w.capacity(), 2);
        let s = w.stealer();
        let thief = thread::spawn(move || s.steal().success().map(|it| it.id));
        let mut taken: Vec<usize> = w.pop().map(|it| it.id).into_iter().collect();
        // Two more items: whatever the thief did, the second push needs a bigger ring (or
        // the first does, if the thief's claim is still in flight).
        w.push(item(2, &token)).ok().unwrap();
        w.push(item(3, &token)).ok().unwrap();
        crossbeam_epoch::pin().flush();
        crossbeam_epoch::pin().flush();
        taken.extend(thief.join().unwrap());
        drain(&w, &mut taken);
        assert_exactly_once(taken, 4);
    });
}
