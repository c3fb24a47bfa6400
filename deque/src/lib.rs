//! Work-stealing queues for schedulers: a per-worker deque (LIFO or FIFO owner) whose thieves
//! take the oldest half **with one CAS**, and a lock-free global FIFO injector, with
//! crossbeam-deque's API.
//!
//! # The pieces
//!
//! * [`Worker`]: the owner's handle (`Send`, not `Sync`). [`push`](Worker::push) adds at the
//!   tail; [`pop`](Worker::pop) takes the newest item ([`Worker::new_lifo`], the default) or
//!   the oldest ([`Worker::new_fifo`]). Two modes: bounded ([`Worker::bounded`],
//!   [`Worker::bounded_fifo`]: a fixed power-of-two ring; a full queue can move its older
//!   half to the injector with [`push_or_overflow`](Worker::push_or_overflow), as Go and
//!   tokio do) and growable (a ring that grows, with an optional maximum and
//!   [`shrink_to_fit`](Worker::shrink_to_fit), reclaimed with `crossbeam-epoch`).
//!   [`Worker::builder`] combines flavour, mode and pop batch.
//! * [`Stealer`]: `Clone + Send + Sync`. [`steal`](Stealer::steal) takes the oldest item;
//!   crossbeam's [`steal_batch`](Stealer::steal_batch) family and
//!   [`steal_half_into`](Stealer::steal_half_into) move about half of the queue into the
//!   thief's own `Worker` with one compare-and-swap on the victim, whatever its flavour.
//! * [`Injector`]: the global queue, MPMC and lock-free: [`push`](Injector::push),
//!   [`push_batch`](Injector::push_batch), [`steal`](Injector::steal),
//!   and crossbeam's batch family ([`steal_batch`](Injector::steal_batch),
//!   [`steal_batch_with_limit_and_pop`](Injector::steal_batch_with_limit_and_pop), ...) into a
//!   `Worker`.
//! * [`Steal`]: `Empty`, `Success(item)` or `Retry`, with crossbeam's helpers.
//!
//! If you know crossbeam-deque: the names are the same, and `push` returns a `Result` (a
//! bounded queue can be full); the additions are a real one-CAS batch steal from a LIFO
//! owner, a bounded mode with overflow, pop batches, `pop_if`, `push_was_empty`, `push_batch`,
//! `shrink_to_fit`, a maximum capacity, and loom models. The README has a migration table
//! for crossbeam-deque and st3 users.
//!
//! # Example: a tiny work-stealing pool
//!
//! Each thread owns a `Worker`; tasks fork into the local queue; idle threads take a batch from
//! the injector, then steal half of another thread's queue.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
//! use std::thread;
//!
//! use purloin_deque::{Injector, Steal, Stealer, Worker};
//!
//! /// A task: add up `start..end`.
//! struct Task(u64, u64);
//!
//! let threads = 4;
//! let workers: Vec<Worker<Task>> = (0..threads).map(|_| Worker::bounded(256)).collect();
//! let stealers: Vec<Stealer<Task>> = workers.iter().map(Worker::stealer).collect();
//! let injector = Injector::new();
//! let pending = AtomicUsize::new(1); // tasks queued or running
//! let total = AtomicU64::new(0);
//! injector.push(Task(0, 100_000));
//!
//! thread::scope(|scope| {
//!     for (me, local) in workers.into_iter().enumerate() {
//!         let (injector, stealers, pending, total) = (&injector, &stealers, &pending, &total);
//!         scope.spawn(move || {
//!             while pending.load(Ordering::Acquire) > 0 {
//!                 // Local queue first, then a batch from the injector, then steal half of a
//!                 // victim's queue.
//!                 let task = local.pop().map(Steal::Success).unwrap_or_else(|| {
//!                     injector.steal_batch_with_limit_and_pop(&local, 17).or_else(|| {
//!                         (1..threads)
//!                             .map(|i| &stealers[(me + i) % threads])
//!                             .map(|victim| victim.steal_half_into(&local))
//!                             .collect()
//!                     })
//!                 });
//!                 let Steal::Success(Task(start, end)) = task else {
//!                     thread::yield_now(); // a real scheduler would park here
//!                     continue;
//!                 };
//!                 if end - start > 1_000 {
//!                     let mid = start + (end - start) / 2;
//!                     pending.fetch_add(2, Ordering::Relaxed);
//!                     local.push_or_overflow(Task(start, mid), injector);
//!                     local.push_or_overflow(Task(mid, end), injector);
//!                 } else {
//!                     total.fetch_add((start..end).sum::<u64>(), Ordering::Relaxed);
//!                 }
//!                 pending.fetch_sub(1, Ordering::Release);
//!             }
//!         });
//!     }
//! });
//! assert_eq!(total.into_inner(), 99_999 * 100_000 / 2);
//! ```
//!
//! `examples/pool.rs` is the same pool with random victims and statistics.
//!
//! # How the steal-half stays correct against a LIFO owner
//!
//! In plain Chase-Lev the owner pops by storing `bottom`, without a read-modify-write unless
//! one item is left; a thief that claims a *range* with one CAS from a stale `bottom` can take
//! items the owner already popped (the race raised on crossbeam#148, which is why crossbeam
//! steals from LIFO deques one CAS per item). Here the owner's pop is one wait-free `fetch_add`
//! on the same word the thieves CAS (`pop_count << 32 | head`), so a claim that succeeds proves
//! no pop happened since the thief looked, and every later pop sees the claim. The owner's push
//! is a plain store; its pop is one RMW with no fence (Chase-Lev's pop needs a `SeqCst`
//! fence). One claim is in flight per queue at a time: a second thief gets
//! [`Steal::Retry`] and moves on, which is what lets the owner reuse slots with no per-slot
//! state. The full argument, with every ordering, is in the source of `queue.rs`.
//!
//! A FIFO owner pops from the head, where the claims are: its pop is the same wait-free
//! `fetch_add` on the shared word (which then holds the head and where the last claim ended),
//! so it never waits for a thief either; `queue.rs` has the argument.
//!
//! For fork-join loops, [`Worker::with_pop_batch`] lets one pop RMW take up to `n` of the
//! newest items out of thieves' reach; the next pops hand them out with no atomic operation and
//! the next push gives the rest back (a split deque, as in Lace). Off by default: while the
//! owner runs an item, the kept ones are invisible to thieves.
//!
//! # Safety model
//!
//! * Works for any `T`: items are moved, never copied as values or shared by reference;
//!   `T: Send` is what makes the handles `Send`/`Sync` (no `T: Sync` needed).
//! * **No slot is read by a thread that has not claimed it**, and no slot is overwritten while
//!   being read: the code is free of data races for every `T`. (crossbeam-deque reads slots
//!   before claiming them and documents it as technically UB; this crate does not.) loom checks
//!   every slot access of the models for races.
//! * Every item is dropped exactly once: taken by one consumer, or dropped when the last handle
//!   of its queue goes away (stress tests count drops).
//! * Retired rings (growable mode) and injector blocks are reclaimed with `crossbeam-epoch`;
//!   a thief or consumer reading one is pinned.
//! * Misuse is reported, not undefined: a zero or too-large capacity panics with a message
//!   naming the fix.
//!
//! # Cargo features
//!
//! None. Under `--cfg loom` (and `--cfg crossbeam_loom`, for the epoch collector) the crate's
//! atomics, cells and `Arc` become loom's, capacities shrink (growable rings start at 2 slots,
//! injector blocks hold 2), and the models in `tests/loom_*.rs` run the real code.
//!
//! # Running the loom models
//!
//! ```text
//! cargo xtask loom -p purloin-deque            # all models, LOOM_MAX_PREEMPTIONS=2
//! cargo xtask loom -p purloin-deque growth     # one model, by name filter
//! ```
//!
//! which runs `cargo test --release -p purloin-deque --lib --tests` with
//! `RUSTFLAGS="--cfg loom --cfg crossbeam_loom -C debug-assertions"`. The model files list the
//! mutations each model was checked to catch.

#![warn(missing_docs)]

mod buffer;
mod injector;
mod queue;
mod steal;
mod stealer;
mod sync;
mod worker;

pub use injector::Injector;
pub use steal::Steal;
pub use stealer::Stealer;
pub use worker::{Builder, Worker};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
