//! loom models of the `Injector`, run by `cargo xtask loom -p purloin-deque`. Under loom a
//! block holds 2 slots, so three items already cross a block boundary (block installation,
//! linking, and retirement through the epoch collector are all inside the models).
//!
//! Mutation checks (each made on a scratch copy, run with `cargo xtask loom`, then reverted),
//! with what loom reported:
//! * J3: the pusher's `ready` store `Relaxed` instead of `Release` -> `push_vs_batch_steal`
//!   fails: "Causality violation: Concurrent read and write accesses."
//! * J2: the installer's `next` link stored `Relaxed` instead of `Release` ->
//!   `push_vs_batch_steal` fails: "Causality violation: Concurrent load and mut accesses."
//! * Reclamation: a consumer frees the block it moved `head` off at once instead of deferring
//!   it to the epoch collector -> `two_consumers_across_blocks` fails: "Causality violation:
//!   Concurrent read and write accesses to `UnsafeCell`".
//! * Recycling: a retired block goes into the block cache at once instead of after the epoch
//!   grace period -> `recycled_block_vs_slow_consumer` fails: "Causality violation: Concurrent
//!   read and write accesses to `UnsafeCell`".
//! * J4 / emptiness: a consumer that finds the `ready` flag at `head` clear returns `Empty`
//!   without reading `tail` (the cheaper check the chase-mode work considered) ->
//!   `empty_only_when_empty` fails: "Empty after a push completed". The pace that was added
//!   instead only delays a take (and is off under loom), so it has no mutation of its own.
#![cfg(loom)]

use std::collections::BTreeSet;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use purloin_deque::{Injector, Steal, Worker};

struct Item {
    id: usize,
    _token: Arc<()>,
}

fn assert_exactly_once(taken: impl IntoIterator<Item = usize>, n: usize) {
    let mut seen = BTreeSet::new();
    for id in taken {
        assert!(seen.insert(id), "item {id} delivered twice");
    }
    assert_eq!(seen, (0..n).collect::<BTreeSet<_>>(), "an item was lost");
}

/// Takes items (in batches of up to 1 + 1) until `n` were taken, yielding on Retry/Empty: the
/// producer is running concurrently.
fn take_n(q: &Injector<Item>, n: usize) -> Vec<usize> {
    let local = Worker::bounded(2);
    let mut got = Vec::new();
    while got.len() < n {
        match q.steal_batch_with_limit_and_pop(&local, 2) {
            Steal::Success(it) => {
                got.push(it.id);
                while let Some(it) = local.pop() {
                    got.push(it.id);
                }
            }
            Steal::Empty | Steal::Retry => thread::yield_now(),
        }
    }
    got
}

/// One producer pushes three items (crossing into a second block) while one consumer takes
/// them in batches: FIFO order per producer, exactly once.
#[test]
fn push_vs_batch_steal() {
    loom::model(|| {
        let token = Arc::new(());
        let q = Arc::new(Injector::new());
        let producer = {
            let (q, token) = (q.clone(), token.clone());
            thread::spawn(move || {
                for id in 0..3 {
                    q.push(Item { id, _token: token.clone() });
                }
            })
        };
        let got = take_n(&q, 3);
        producer.join().unwrap();
        assert_eq!(got, vec![0, 1, 2], "FIFO order");
        assert!(q.is_empty());
    });
}

/// Two producers race to fill the first block and install the second (one `push`, one
/// `push_batch`), while a consumer takes items.
#[test]
fn two_producers_race_for_the_next_block() {
    loom::model(|| {
        let token = Arc::new(());
        let q = Arc::new(Injector::new());
        let single = {
            let (q, token) = (q.clone(), token.clone());
            thread::spawn(move || q.push(Item { id: 0, _token: token }))
        };
        let batch = {
            let (q, token) = (q.clone(), token.clone());
            thread::spawn(move || {
                q.push_batch((1..3).map(|id| Item { id, _token: token.clone() }));
            })
        };
        let mut got = match q.steal() {
            Steal::Success(it) => vec![it.id],
            _ => Vec::new(),
        };
        single.join().unwrap();
        batch.join().unwrap();
        let rest = 3 - got.len();
        got.extend(take_n(&q, rest));
        assert_exactly_once(got, 3);
        assert_eq!(q.len(), 0);
    });
}

/// Two consumers race over three queued items that span two blocks: one of them moves `head`
/// to the second block and retires the first through the epoch collector (flushed so it is
/// really freed inside the model) while the other may still be reading it.
#[test]
fn two_consumers_across_blocks() {
    loom::model(|| {
        let token = Arc::new(());
        let q = Arc::new(Injector::new());
        for id in 0..3 {
            q.push(Item { id, _token: token.clone() });
        }
        let other = {
            let q = q.clone();
            thread::spawn(move || {
                let local = Worker::bounded(2);
                let mut got: Vec<usize> = q
                    .steal_batch_with_limit_and_pop(&local, 2)
                    .success()
                    .map(|it| it.id)
                    .into_iter()
                    .collect();
                while let Some(it) = local.pop() {
                    got.push(it.id);
                }
                got
            })
        };
        let mut got: Vec<usize> = q.steal().success().map(|it| it.id).into_iter().collect();
        got.extend(q.steal().success().map(|it| it.id));
        crossbeam_epoch::pin().flush();
        crossbeam_epoch::pin().flush();
        got.extend(other.join().unwrap());
        while let Steal::Success(it) = q.steal() {
            got.push(it.id);
        }
        assert_exactly_once(got, 3);
    });
}

/// A retired block comes back from the epoch collector into the injector's block cache and a
/// pusher reuses it, while another consumer may still be reading the item it claimed there.
#[test]
fn recycled_block_vs_slow_consumer() {
    loom::model(|| {
        let token = Arc::new(());
        let q = Arc::new(Injector::new());
        for id in 0..3 {
            q.push(Item { id, _token: token.clone() });
        }
        let slow = {
            let q = q.clone();
            thread::spawn(move || q.steal().success().map(|it| it.id))
        };
        let mut got = Vec::new();
        for _ in 0..2 {
            got.extend(q.steal().success().map(|it| it.id));
        }
        // If `head` moved off the first block, these hand it to the cache once no pinned
        // consumer can still see it...
        crossbeam_epoch::pin().flush();
        crossbeam_epoch::pin().flush();
        // ...and filling the second block makes this push install a block: the cached one.
        for id in 3..5 {
            q.push(Item { id, _token: token.clone() });
        }
        got.extend(slow.join().unwrap());
        while let Steal::Success(it) = q.steal() {
            got.push(it.id);
        }
        assert_exactly_once(got, 5);
    });
}

/// Overflow from a worker (a `push_batch` of its older half plus the new item) racing a
/// consumer of the injector.
#[test]
fn overflow_batch_vs_consumer() {
    loom::model(|| {
        let token = Arc::new(());
        let q: Arc<Injector<Item>> = Arc::new(Injector::new());
        let consumer = {
            let q = q.clone();
            thread::spawn(move || q.steal().success().map(|it| it.id))
        };
        let w = Worker::bounded(2);
        for id in 0..3 {
            w.push_or_overflow(Item { id, _token: token.clone() }, &q);
        }
        let mut got: Vec<usize> = consumer.join().unwrap().into_iter().collect();
        while let Some(it) = w.pop() {
            got.push(it.id);
        }
        while let Steal::Success(it) = q.steal() {
            got.push(it.id);
        }
        assert_exactly_once(got, 3);
    });
}

/// `Empty` means the queue was empty at an instant during the call (J4), even when the item at
/// `head` is still being pushed: one pusher reserves slot 0 and may be preempted before writing
/// it, a second pushes into slot 1 and raises a flag; a consumer that saw the flag must get
/// `Retry` or an item, never `Empty`. (A consumer deciding emptiness from the clear `ready`
/// flag at `head` alone, without reading `tail`, fails this.)
#[test]
fn empty_only_when_empty() {
    loom::model(|| {
        let token = Arc::new(());
        let q = Arc::new(Injector::new());
        let pushed = Arc::new(AtomicBool::new(false));
        let first = {
            let (q, token) = (q.clone(), token.clone());
            thread::spawn(move || q.push(Item { id: 0, _token: token }))
        };
        let second = {
            let (q, token, pushed) = (q.clone(), token.clone(), pushed.clone());
            thread::spawn(move || {
                q.push(Item { id: 1, _token: token });
                pushed.store(true, Ordering::Release);
            })
        };
        let mut got = Vec::new();
        if pushed.load(Ordering::Acquire) {
            match q.steal() {
                Steal::Success(it) => got.push(it.id),
                Steal::Retry => {}
                Steal::Empty => panic!("Empty after a push completed"),
            }
        }
        first.join().unwrap();
        second.join().unwrap();
        while let Steal::Success(it) = q.steal() {
            got.push(it.id);
        }
        assert_exactly_once(got, 2);
    });
}
