//! The state one [`Worker`](crate::Worker) shares with its [`Stealer`](crate::Stealer)s, and
//! the *claim*: the one-CAS operation with which a thief (or the owner, when it overflows)
//! books a range of the oldest items before it reads any of them.
//!
//! # The protocol
//!
//! Positions are wrapping `u32` counters; a position maps to a slot of the ring with
//! `position & mask`. Four words are shared. This section describes a LIFO queue (the owner
//! pops the tail); "FIFO owners" below gives the one change for a FIFO queue, whose owner pops
//! the head.
//!
//! * `push_count`: pushes made so far. Written only by the owner.
//! * `packed`: `pop_count << 32 | head`. The owner adds to the high half when it pops (an
//!   atomic read-modify-write); a claimer compare-and-swaps the low half forward. Both sides
//!   modify **the same word**, which is what makes a one-CAS range claim correct against a LIFO
//!   owner (see "Why one CAS is enough" below).
//! * `done`: the head as of the last *completed* claim. `done != head` means one claim is in
//!   flight: its claimer is copying the slots `done..head` out.
//! * `buffer`: the ring. Constant in bounded mode; the owner replaces it when a growable queue
//!   grows or shrinks.
//!
//! `tail = push_count - pop_count`. Invariants (wrapping distances):
//! `done <= head <= tail <= done + capacity`. Live items are `head..tail`; `done..head` belongs
//! to the one claimer in flight; slots outside `done..tail` are free and only the owner writes
//! them. Every slot is written only by the owner's thread (pushes, and items stolen *into* this
//! worker, which its owner does), and read as an item only by the thread that claimed it: the
//! owner after its pop's read-modify-write, a claimer after its CAS. No thread ever reads a slot
//! it has not claimed as an item, so there is no data race on any slot for any `T` (the
//! owner's bulk copy during a resize is the one exception, and it is a byte copy on the only
//! thread that writes slots; see [`Buffer::copy_to`](crate::buffer::Buffer::copy_to)).
//!
//! **Owner.** `push` writes the slot at `tail`, then stores `push_count + 1`. It first checks
//! `tail - done < capacity` against a cached lower bound of `done`, reloading `done` only when
//! the cache says full. `pop` returns `None` without touching shared memory when its cached
//! lower bound of `head` equals `tail`; otherwise it does `packed.fetch_add(1 << 32)` (one
//! wait-free RMW, no fence), which returns the head as of that instant: if `head < tail` the slot
//! `tail - 1` is the owner's, else the queue was empty and it undoes the add.
//!
//! **Claimer.** Load `packed` (pop_count, head); if `done != head` another claim is in flight:
//! give up with `Busy` (one claimer at a time, see below). Load `push_count`;
//! `avail = push_count - pop_count - head`. Pick `n` in `1..=avail`, load `buffer`, and
//! `CAS(packed, (pop_count, head) -> (pop_count, head + n))`. On success the slots
//! `head..head+n` are the claimer's: it moves the items out, then stores `done = head + n`.
//! On failure (the owner popped, or another claimer won) it retries with the fresh value.
//!
//! ## Why one CAS is enough (the crossbeam#148 race)
//!
//! In plain Chase-Lev the owner pops by *storing* `bottom`; a thief that read `bottom` before
//! several such pops and then CASes `top` forward by `k` takes items the owner already popped.
//! Here every pop changes `pop_count` inside `packed`, so a claim CAS that succeeds proves that
//! no pop happened between the claimer's load of `packed` and its CAS: the `pop_count` it used
//! to compute `tail` is exact at the CAS. `push_count` may be stale, but a stale value is only
//! ever *smaller* than the truth (pushes only add to it), so the claimed range lies inside
//! `head..tail` at the instant of the CAS. Conversely the owner's next pop is
//! ordered after the CAS in `packed`'s modification order and sees the new head, so it never
//! pops a claimed item. Every item is therefore taken exactly once, with one CAS per claim and
//! one RMW per pop.
//!
//! A subtle point: an occupant of a slot below the claimer's `tail` may have been pushed *after*
//! the claimer's `push_count` load if the slot was popped and pushed again. That cannot happen
//! for a claim that succeeds: such a re-push follows a pop, and that pop changed `pop_count`.
//!
//! ## Pop batches
//!
//! With [`Worker::with_pop_batch`](crate::Worker::with_pop_batch)`(n)` a pop that has to touch
//! `packed` adds `k * POP_ONE` instead of `POP_ONE`, with `k = min(n, estimate / 2)` (at least
//! 1; `estimate = tail - head_seen`, never below the real count). The argument above is
//! unchanged for that RMW: it moves the published tail down by `k` at one instant, so the `k`
//! newest items are out of every claim's reach. The owner returns one and *keeps* `k - 1`:
//! they sit just above the published tail, and the next pops hand them out with no atomic
//! operation. The owner counts kept items in its own copy of `push_count` (it adds `k - 1`
//! after the RMW) but not in the published one, so its tail is `own push_count - pop_count`
//! and `kept = own push_count - published push_count`. The next push publishes its own count
//! plus one, as always: that puts the kept items back in thieves' range with the same Release
//! store (they were published once, and no thread but the owner touched them since), so the
//! push path is unchanged.
//!
//! If the RMW finds fewer than `k` items (thieves took some since the owner last looked), the
//! published tail is now below the head by `k - got`; the owner keeps the `got` items it found
//! and stores `push_count + (k - got)`, which makes the published tail equal to the head again.
//! In between, claimers compute a "negative" length and report `Empty`, which is true: the
//! owner holds every item left. A claimer that mixes an old `pop_count` with the new
//! `push_count` computes too large a range, but its CAS fails on the changed `pop_count`: the
//! CAS validates `pop_count` exactly, and `push_count` only ever counts items that are in the
//! published range once the store is made, which is all the claim argument needs.
//!
//! ## FIFO owners
//!
//! A FIFO worker ([`Worker::new_fifo`](crate::Worker::new_fifo)) pops at the head, the end
//! thieves claim from, so the owner's pop is itself a claim of one item. Making it a full claim
//! (check `done`, CAS, store `done`) would make the owner wait for, or give up on, a thief that is
//! copying a batch out. Instead `packed` means something else in a FIFO queue:
//!
//! * `packed = head << 32 | base`, where `head` is the oldest unclaimed item and `base` is where
//!   the last claim ended (a claim CASes `(head, base) => (head + n, head + n)`). The owner's
//!   pops move only `head`; a claim in flight is `done != base` (its claimer stores
//!   `done = base` when it finishes).
//! * `tail = push_count`. The owner's pop is the same wait-free `packed.fetch_add(POP_ONE)` as a
//!   LIFO pop (head is the high half, so wrapping it carries nothing into `base`), and it returns
//!   the head at that instant: if `head < tail` the slot `head` is the owner's; otherwise the
//!   queue was empty and the owner counts one phantom push, exactly as a LIFO pop of an empty
//!   queue does (the phantom slot lies below the head, where nobody reads).
//! * A claimer that loaded `packed` before an owner's pop fails its CAS on the changed head; an
//!   owner's pop after a claim sees the claimed head. Every item is taken once, and the owner
//!   never waits for a thief and never gets `Busy`: a pop during a claim simply takes the next
//!   item after the claimed range.
//! * Slots below `base` are free once `done == base`; slots between `base` and `head` were
//!   popped by the owner itself (it read them, program order). So the owner's bound for reusing
//!   slots is `head` when no claim is in flight and `done` otherwise
//!   ([`Queue::free_bound`]).
//!
//! Pop batches are not offered in FIFO mode: kept items would sit below the head, where no later
//! push could give them back to thieves.
//!
//! ## One claimer at a time
//!
//! Claims complete by storing `done = head + n`; the owner reuses a slot only once `done` has
//! passed it. With two claims in flight, the later one could complete first and move `done` over
//! slots the earlier one is still copying. Tracking several in-flight ranges would put per-slot
//! or per-claim state on the owner's push path; instead a second claimer gets `Busy`, which
//! [`Stealer`](crate::Stealer) reports as [`Steal::Retry`](crate::Steal::Retry), and a scheduler
//! moves on to another victim. The copy under a claim is at most a few hundred words, so the
//! window is short. tokio's and st3's run queues make the same choice.
//!
//! ## Growth and reclamation
//!
//! A resize (owner only) allocates a ring, byte-copies `head..tail` (head read at that time),
//! publishes the ring, and retires the old ring through `crossbeam-epoch`. A claimer in a
//! growable queue is pinned from before its `buffer` load until after its last slot read, so a
//! retired ring is never freed under it. The claimer loads `buffer` *after* `push_count` and
//! *before* its CAS; that is what guarantees the ring it reads holds every item it claims:
//! each claimed item was pushed before the `push_count` it saw (P1), into the ring current at
//! that push or copied forward by every later resize it can observe (P4), and every such resize
//! read a head no greater than the claimer's (the resize's load of `packed` happens-before the
//! claimer's CAS, so the CAS comes later in `packed`'s modification order).
//!
//! # Memory ordering
//!
//! The guarantee: an item is read only after its write happens-before the read, by exactly one
//! thread, and a slot is overwritten only after the read of its previous item happens-before
//! the write. The pairs:
//!
//! * **P1** (publish an item): owner writes the slot, then `push_count.store(Release)`;
//!   a claimer's `push_count.load(Acquire)` makes every item below the count it sees visible.
//!   (The stores that give kept items back or correct a short pop batch are P1 stores too.)
//! * **P2** (consistent snapshots): the owner's pop RMW on `packed` (LIFO or FIFO) is
//!   `Release`; claimers load
//!   `packed` with `Acquire` (loads and failed CASes). A claimer that sees `pop_count = p`
//!   therefore sees a `push_count` at least as large as when pop `p` happened, so
//!   `push_count - pop_count` is never below the real head: a computed `avail` is never
//!   negative except in the owner's own transient "popped an empty queue" state, which is
//!   reported as `Empty` (correctly: the queue is empty then). This is what makes `Empty`
//!   trustworthy: it is only returned if the queue was empty at an instant during the call.
//!   Claimers' own CASes continue the release sequence.
//! * **P3** (free a slot): a claimer reads its slots, then `done.store(Release)`; the owner
//!   loads `done` with `Acquire` before it writes a slot one lap (`capacity`) later. Each
//!   claimer also loads `done` with `Acquire` before its CAS, so the completions form one
//!   happens-before chain: an owner that acquires the latest `done` is ordered after the reads
//!   of every earlier claim, not only the last one. (A FIFO owner's own pops need no pair: it
//!   reads and later rewrites those slots itself.)
//! * **P4** (publish a ring): the owner copies the live slots into the new ring, then
//!   `buffer.store(Release)`; claimers `buffer.load(Acquire)`.
//!
//! Deliberately `Relaxed`: the claim CAS on success (the data it needs comes through P1 and P4), the owner's loads of
//! `packed` (it reads its own pops; thieves' heads it needs only as bounds) and of `buffer`
//! (it is the only writer). No store→load ordering is needed anywhere: both sides
//! synchronise through read-modify-writes of one word, so there is no `fence(SeqCst)` in the
//! deque (contrast Chase-Lev, whose pop needs one; Lê et al.'s orderings apply to a protocol
//! this one does not use).
//!
//! ABA: `packed` only grows (mod 2^32 per half), so a claimer's CAS can succeed on a stale
//! value only after 2^32 pops or 2^32 claimed items between its load and its CAS.

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::buffer::Buffer;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, CachePadded, IS_LOOM, Ordering};

/// The largest capacity of any queue (growable or bounded): 2^30 items. Positions are `u32`,
/// and keeping capacities two bits below 2^32 lets a "negative" distance be told apart from a
/// real one.
pub(crate) const MAX_CAPACITY: u32 = 1 << 30;

/// The initial and minimum capacity of a growable queue (shrunk under loom so models reach
/// growth quickly).
pub(crate) const MIN_GROWABLE_CAPACITY: u32 = if IS_LOOM { 2 } else { 64 };

/// Adding this to `packed` adds one to `pop_count` (the high half).
pub(crate) const POP_ONE: u64 = 1 << 32;

#[inline(always)]
pub(crate) fn pack(pop_count: u32, head: u32) -> u64 {
    (u64::from(pop_count) << 32) | u64::from(head)
}

#[inline(always)]
pub(crate) fn unpack(packed: u64) -> (u32, u32) {
    ((packed >> 32) as u32, packed as u32)
}

/// The shared half of a work-stealing queue. See the module docs for the protocol.
pub(crate) struct Queue<T> {
    /// Owner-written words: `push_count` and `packed` share a line because the owner writes both
    /// on every push/pop pair; thieves read both to claim.
    pub(crate) owner_side: CachePadded<OwnerSide>,
    /// Written by the claimer in flight when it completes; read by the next claimer and (rarely,
    /// through a cache) by the owner.
    pub(crate) done: CachePadded<AtomicU32>,
    /// The current ring (a `Box<Buffer<T>>` turned into a raw pointer). Replaced only by the
    /// owner and only in growable mode; freed by `Drop` (current ring) or by the epoch collector
    /// (retired rings).
    pub(crate) buffer: AtomicPtr<Buffer<T>>,
    /// `true` for `Worker::new`/`with_max_capacity`, `false` for `Worker::bounded`.
    pub(crate) growable: bool,
    /// `true` if the owner pops at the head (FIFO): `packed` is then `head << 32 | base`
    /// (see "FIFO owners" above) instead of `pop_count << 32 | head`.
    pub(crate) fifo: bool,
    /// The capacity a growable ring may reach (a power of two); the capacity of a bounded one.
    pub(crate) max_capacity: u32,
    /// The queue owns `T`s and hands them between threads; `Send`/`Sync` are granted below.
    _items: PhantomData<*mut T>,
}

// SAFETY: the queue moves `T`s between threads (that needs `T: Send`) and never hands out a
// `&T`, so sharing it needs no `T: Sync`. Every field that is not an atomic (the ring behind
// `buffer`, reached through the `_items`-typed pointers) is accessed under the claim protocol
// in the module docs, which gives each slot one accessor at a time.
unsafe impl<T: Send> Send for Queue<T> {}
// SAFETY: as for `Send`: shared access to the ring is serialised per slot by the protocol.
unsafe impl<T: Send> Sync for Queue<T> {}

/// The two words the owner writes on its fast path.
#[derive(Default)]
pub(crate) struct OwnerSide {
    /// Pushes so far (wrapping).
    pub(crate) push_count: AtomicU32,
    /// `pop_count << 32 | head` (LIFO) or `head << 32 | base` (FIFO; see "FIFO owners").
    pub(crate) packed: AtomicU64,
}

/// One value of `packed`, decoded for the queue's flavour (see "FIFO owners").
#[derive(Clone, Copy)]
pub(crate) struct View {
    /// The oldest item nobody has claimed or popped.
    pub(crate) head: u32,
    /// The owner's pops at the tail: `pop_count` (LIFO); 0 (FIFO, whose owner pops the head).
    pub(crate) pops_at_tail: u32,
    /// Where `done` stands when no claim is in flight: `head` (LIFO); where the last claim
    /// ended (FIFO).
    pub(crate) base: u32,
}

impl View {
    /// The items between `head` and the tail, given a `push_count` loaded after this view.
    /// A "negative" distance (above `MAX_CAPACITY`) is the owner's transient state after a pop
    /// of an empty queue, reported as 0.
    #[inline(always)]
    pub(crate) fn avail(self, push_count: u32) -> u32 {
        let avail = push_count.wrapping_sub(self.pops_at_tail).wrapping_sub(self.head);
        if avail > MAX_CAPACITY { 0 } else { avail }
    }
}

/// The result of [`Queue::claim`].
pub(crate) enum Claim<T> {
    /// Nothing to claim (the queue was empty at the instant of the `push_count` load).
    Empty,
    /// Another claim is in flight.
    Busy,
    /// The slots `head..head+count` are the caller's; read them from `buffer`, then call
    /// [`Queue::complete`] with `head + count`.
    Claimed { head: u32, count: u32, buffer: NonNull<Buffer<T>> },
}

impl<T> Queue<T> {
    /// A queue with a ring of `capacity` slots that may grow to `max_capacity` if `growable`.
    pub(crate) fn new(capacity: u32, max_capacity: u32, growable: bool, fifo: bool) -> Queue<T> {
        let buffer = Box::into_raw(Box::new(Buffer::new(capacity)));
        Queue {
            owner_side: CachePadded(OwnerSide::default()),
            done: CachePadded(AtomicU32::new(0)),
            buffer: AtomicPtr::new(buffer),
            growable,
            fifo,
            max_capacity,
            _items: PhantomData,
        }
    }

    /// A racy count of the items available to steal (excludes a claim in flight).
    pub(crate) fn len(&self) -> u32 {
        // P2: Acquire, so the push_count below is at least as new as the pops seen here.
        let view = self.view(self.owner_side.packed.load(Ordering::Acquire));
        // P1 partner (only a count is computed from it here).
        let push_count = self.owner_side.push_count.load(Ordering::Acquire);
        view.avail(push_count)
    }

    /// Decodes a value of `packed` for this queue's flavour.
    #[inline(always)]
    pub(crate) fn view(&self, packed: u64) -> View {
        let (high, low) = unpack(packed);
        if self.fifo {
            View { head: high, pops_at_tail: 0, base: low }
        } else {
            View { head: low, pops_at_tail: high, base: low }
        }
    }

    /// The value of `packed` after a claim of `count` items from `view`.
    #[inline(always)]
    fn claimed(&self, view: View, count: u32) -> u64 {
        let head = view.head.wrapping_add(count);
        if self.fifo { pack(head, head) } else { pack(view.pops_at_tail, head) }
    }

    /// The owner's bound for reusing slots: every slot below it (one lap back) has been read
    /// by whoever took its item, and that read happens-before the owner's next write of it.
    /// The owner's own pops in a FIFO queue count as read (program order).
    ///
    /// Owner only (it relies on no owner pop running concurrently).
    #[inline]
    pub(crate) fn free_bound(&self) -> u32 {
        // P3: Acquire; pairs with the Release store in `complete` (and, through the claimers'
        // Acquire loads of `done`, with every earlier completion).
        let done = self.done.load(Ordering::Acquire);
        if !self.fifo {
            return done;
        }
        // Relaxed: loaded after `done`, so at least as new as the CAS of the claim that stored
        // it (that CAS happens-before its completion). `done == base` then proves that claim
        // was the last one and has finished; the slots from `base` to `head` are the owner's
        // own pops.
        let view = self.view(self.owner_side.packed.load(Ordering::Relaxed));
        if done == view.base { view.head } else { done }
    }

    /// Books the `n` oldest items, where `n = choose(avail)` clamped to `1..=avail`, with one
    /// successful CAS on `packed`.
    ///
    /// # Safety
    ///
    /// * In a growable queue the caller is either the owner or holds an epoch guard that it
    ///   keeps until it has read the claimed slots from the returned ring.
    /// * After `Claimed`, the caller reads exactly the claimed slots (each once) and then calls
    ///   [`complete`](Self::complete) with `head + count`; until then every other claim is
    ///   refused with `Busy` and the owner cannot reuse those slots.
    #[inline]
    pub(crate) unsafe fn claim(&self, mut choose: impl FnMut(u32) -> u32) -> Claim<T> {
        let side = &*self.owner_side;
        // P2: Acquire; pairs with the owner's Release pop RMW (and its release sequence).
        let mut packed = side.packed.load(Ordering::Acquire);
        loop {
            let view = self.view(packed);
            // P3: Acquire; pairs with the previous claimer's Release store in `complete`, so
            // our own completion later carries its reads on to the owner. A stale value gives a
            // spurious `Busy`, never a wrong claim: the CAS validates `packed`.
            if self.done.load(Ordering::Acquire) != view.base {
                return Claim::Busy;
            }
            // P1: Acquire; pairs with the Release store in `Worker::push`.
            let push_count = side.push_count.load(Ordering::Acquire);
            let avail = view.avail(push_count);
            if avail == 0 {
                // Includes the "negative" case: the owner is undoing a pop of an empty queue
                // (P2 rules out a stale push_count), so the queue is empty.
                return Claim::Empty;
            }
            let count = choose(avail).clamp(1, avail);
            // P4: Acquire; pairs with the Release store in `Worker::resize`. Loaded after
            // push_count and before the CAS (see "Growth and reclamation").
            let buffer = self.buffer.load(Ordering::Acquire);
            let head = view.head;
            match side.packed.compare_exchange_weak(
                packed,
                self.claimed(view, count),
                // Success: Relaxed (the slot data comes through P1 and P4).
                Ordering::Relaxed,
                // Failure: P2, Acquire, as for the first load.
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: `buffer` comes from `Box::into_raw` and is never null.
                    let buffer = unsafe { NonNull::new_unchecked(buffer) };
                    return Claim::Claimed { head, count, buffer };
                }
                Err(actual) => packed = actual,
            }
        }
    }

    /// Ends the claim in flight: its slots are free again.
    ///
    /// # Safety
    ///
    /// * The caller made the claim in flight, its range ends at `new_done`, and it has read all
    ///   the claimed slots.
    #[inline]
    pub(crate) unsafe fn complete(&self, new_done: u32) {
        // P3: Release; pairs with the owner's Acquire load of `done` before it reuses a slot.
        self.done.store(new_done, Ordering::Release);
    }
}

impl<T> Drop for Queue<T> {
    fn drop(&mut self) {
        // `&mut self`: every handle is gone, so no claim is in flight and no push or pop runs.
        let buffer = self.buffer.load(Ordering::Relaxed);
        let View { head, pops_at_tail, .. } =
            self.view(self.owner_side.packed.load(Ordering::Relaxed));
        let tail = self.owner_side.push_count.load(Ordering::Relaxed).wrapping_sub(pops_at_tail);
        // SAFETY: `buffer` came from `Box::into_raw` in `new` or `Worker::resize` and is the
        // current ring, owned by this queue (retired rings are owned by the epoch collector).
        let buffer = unsafe { Box::from_raw(buffer) };
        let mut position = head;
        while position != tail {
            // SAFETY: `head..tail` are the live items (module invariant), all written by the
            // owner before the last handle dropped; `&mut self` excludes every other access.
            drop(unsafe { buffer.read(position) });
            position = position.wrapping_add(1);
        }
    }
}
