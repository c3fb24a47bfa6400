//! [`Injector`]: the global FIFO queue, multi-producer multi-consumer, lock-free.
//!
//! # Design
//!
//! A linked list of blocks of `BLOCK_CAP` slots (63; 2 under loom). `tail` and `head` are each
//! **one tagged pointer**: the block's address with the offset of the next slot in the low six
//! bits (blocks are 64-byte aligned). One word per end means an end is always read
//! consistently and moved with one CAS, including across a block boundary.
//!
//! **Push.** CAS `tail` from `(B, o)` to `(B, o + n)` to reserve `n` slots (`n = 1` for
//! `push`, up to the rest of the block for batches), write the items, set each slot's `ready`
//! flag. At `(B, BLOCK_CAP)` the block is full: any pusher allocates a block `N` and CASes
//! `tail` to `(N, 0)`; the winner links `B.next = N`, losers free theirs. Nobody waits for
//! anybody: a pusher never spins on another pusher.
//!
//! **Pop** (`steal`, `steal_batch_and_pop`). Load `head = (B, o)` and `tail`; the slots between
//! are reserved by pushers. Count how many of them, from `o` on, are `ready` (up to the batch
//! size); CAS `head` forward by that many; read them. If slot `o` is reserved but not yet
//! written (its pusher was preempted mid-push) the consumer returns [`Steal::Retry`] at once
//! instead of spinning; likewise at the end of a block whose successor is not linked yet.
//! Consumers never claim a slot before it is written, so they never wait on one.
//!
//! Progress: every push completes in a bounded number of its own steps plus one CAS retry per
//! concurrent push (lock-free); every pop completes or returns `Retry`/`Empty` without waiting.
//! The price of never waiting is that a pusher stalled between its reservation and its write
//! delays the items behind it (consumers see `Retry` until it resumes); they are not lost.
//!
//! **Reclamation.** A block is retired (through `crossbeam-epoch`) only by the consumer that
//! moves `head` off it, which needs its `next` link, which its installer writes after moving
//! `tail` off it: so the tail block is never retired, and by then every slot has been written
//! and claimed. Pushers touch a block only after a successful CAS of `tail` within it (which
//! proves it is the tail block) and before writing their last `ready` flag (which it cannot be
//! retired without). Consumers read blocks before claiming (flags, `next`), so they are pinned
//! for their whole operation; so is a pusher installing a block (it reads the full block's
//! position before its CAS). Pushers otherwise do not pin.
//!
//! # Memory ordering
//!
//! The guarantee: an item is read once, by the consumer whose CAS on `head` covered it, after
//! its write; a block is initialised before anyone uses it and freed after everyone is done.
//!
//! * **J1** (publish a block to pushers): the installer initialises `N`, then CASes `tail` to
//!   `(N, 0)` with `Release`; pushers load `tail` (and fail CASes) with `Acquire`. Their own
//!   claim CASes are `Relaxed` on success: RMWs continue the installer's release sequence.
//! * **J2** (publish a block to consumers): the installer stores `B.next = N` with `Release`;
//!   the consumer moving `head` loads `B.next` with `Acquire` and CASes `head` to `(N, 0)`
//!   with `Release`; consumers load `head` with `Acquire`.
//! * **J3** (publish an item): the pusher writes the slot, then `ready.store(true, Release)`;
//!   the consumer loads `ready` with `Acquire` before it claims and reads the slot.
//! * **J4** (`head` never outruns `tail`): head CASes are `Release` and head loads `Acquire`,
//!   so a consumer that sees `head = (B, o)` sees `tail` at least as far as the reservations of
//!   the slots below `o` (their `ready` flags were acquired by the consumer that moved `head`
//!   past them). Hence "`tail` is in another block" implies "`B` is full", and `Empty` means
//!   the queue was empty at an instant during the call.
//!
//! No store→load ordering is needed (every decision is an RMW on the word it is about), so
//! there is no `fence(SeqCst)` here; the epoch `pin` brings its own.

use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::{self, addr_of_mut};

use crate::steal::Steal;
use crate::sync::{AtomicBool, AtomicPtr, CachePadded, IS_LOOM, Ordering, UnsafeCell};
use crate::worker::Worker;

/// Slots per block.
const BLOCK_CAP: usize = if IS_LOOM { 2 } else { 63 };
/// The low bits of a tagged pointer that hold the offset (blocks are 64-byte aligned).
const OFFSET_MASK: usize = 63;
const _: () = assert!(BLOCK_CAP <= OFFSET_MASK, "offsets 0..=BLOCK_CAP must fit in the tag");

struct Slot<T> {
    item: UnsafeCell<MaybeUninit<T>>,
    /// Set (J3) once `item` is written.
    ready: AtomicBool,
}

#[repr(C, align(64))]
struct Block<T> {
    slots: [Slot<T>; BLOCK_CAP],
    /// The next block, once linked (J2).
    next: AtomicPtr<Block<T>>,
    /// The global position of slot 0 (for `len`); written before the block is published.
    start: u64,
}

impl<T> Block<T> {
    /// Allocates an empty block whose slot 0 has global position `start`.
    fn alloc(start: u64) -> *mut Block<T> {
        let mut boxed = Box::<Block<T>>::new_uninit();
        let block = boxed.as_mut_ptr();
        // SAFETY: `block` points to a live, uninitialised allocation of the right layout; every
        // field is initialised exactly once below (in place, so a block of large items is
        // never built on the stack) before `assume_init`.
        unsafe {
            for i in 0..BLOCK_CAP {
                let slot = addr_of_mut!((*block).slots[i]);
                ptr::write(addr_of_mut!((*slot).item), UnsafeCell::new(MaybeUninit::uninit()));
                ptr::write(addr_of_mut!((*slot).ready), AtomicBool::new(false));
            }
            ptr::write(addr_of_mut!((*block).next), AtomicPtr::new(ptr::null_mut()));
            ptr::write(addr_of_mut!((*block).start), start);
            Box::into_raw(boxed.assume_init())
        }
    }

    /// Frees a block without dropping any item.
    ///
    /// # Safety
    ///
    /// * `block` came from [`Block::alloc`], is unreachable from the injector, and no thread
    ///   can access it any more (or the caller is the epoch collector running the deferred
    ///   free, which guarantees that).
    unsafe fn free(block: *mut Block<T>) {
        // SAFETY: from `Box::into_raw` in `alloc`, and exclusively ours (contract).
        let block = unsafe { Box::from_raw(block) };
        for slot in &block.slots {
            // Under loom, a consumer still reading this block without a happens-before edge
            // to the free shows up as a data race.
            crate::sync::mark_freed(core::slice::from_ref(&slot.item));
        }
    }
}

#[inline(always)]
fn tag<T>(block: *mut Block<T>, offset: usize) -> *mut Block<T> {
    block.map_addr(|addr| addr | offset)
}

#[inline(always)]
fn untag<T>(tagged: *mut Block<T>) -> (*mut Block<T>, usize) {
    (tagged.map_addr(|addr| addr & !OFFSET_MASK), tagged.addr() & OFFSET_MASK)
}

/// The global FIFO queue of a work-stealing scheduler: any thread pushes, any thread steals,
/// and batches move into a [`Worker`] with one CAS.
///
/// Lock-free, and no consumer ever waits on a producer: if the next item's producer was
/// preempted between reserving its slot and writing it, consumers get [`Steal::Retry`] instead
/// of spinning (see the module docs for the exact progress guarantee).
///
/// # Examples
///
/// ```
/// use purloin_deque::{Injector, Steal, Worker};
///
/// let global = Injector::new();
/// global.push_batch(1..=20);
/// let local = Worker::bounded(256);
/// // Take the first item to run now and move up to 16 more into the local queue.
/// assert_eq!(global.steal_batch_and_pop(&local, 16), Steal::Success(1));
/// assert_eq!(local.len(), 16);
/// assert_eq!(local.pop(), Some(2)); // FIFO order is kept for the owner's pops
/// assert_eq!(global.len(), 3);
/// ```
pub struct Injector<T> {
    /// `(block, offset)` of the next slot to pop.
    head: CachePadded<AtomicPtr<Block<T>>>,
    /// `(block, offset)` of the next slot to reserve.
    tail: CachePadded<AtomicPtr<Block<T>>>,
    /// The injector owns `T`s and hands them between threads; `Send`/`Sync` are granted below.
    _items: PhantomData<*mut T>,
}

// SAFETY: items move between threads through the injector (hence `T: Send`); no `&T` is ever
// shared, so `T: Sync` is not needed. The non-atomic state reached through `head` and `tail`
// (the blocks' slots) is accessed under the protocol in the module docs: each slot is written
// by the one pusher that reserved it and read by the one consumer that claimed it.
unsafe impl<T: Send> Send for Injector<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send> Sync for Injector<T> {}

impl<T> Injector<T> {
    /// Creates an empty injector (with one block allocated).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Injector;
    ///
    /// let q = Injector::<i32>::new();
    /// assert!(q.is_empty());
    /// ```
    pub fn new() -> Injector<T> {
        let block = Block::alloc(0);
        Injector {
            head: CachePadded(AtomicPtr::new(block)),
            tail: CachePadded(AtomicPtr::new(block)),
            _items: PhantomData,
        }
    }

    /// Pushes an item at the back.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Steal};
    ///
    /// let q = Injector::new();
    /// q.push(1);
    /// q.push(2);
    /// assert_eq!(q.steal(), Steal::Success(1));
    /// ```
    pub fn push(&self, item: T) {
        let mut item = Some(item);
        self.push_exact(1, || item.take().expect("push_exact asks for exactly one item"));
    }

    /// Pushes every item of `items` at the back, in order, reserving slots for many items with
    /// one CAS (one per block of 63 slots). Items of one batch stay contiguous unless the
    /// batch spans blocks.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Steal};
    ///
    /// let q = Injector::new();
    /// q.push_batch(vec!["a", "b", "c"]);
    /// assert_eq!(q.len(), 3);
    /// assert_eq!(q.steal(), Steal::Success("a"));
    /// ```
    pub fn push_batch<I>(&self, items: I)
    where
        I: IntoIterator<Item = T>,
    {
        // The number of items must be known before reserving slots (a reserved slot must be
        // written), and an iterator's size hint may lie, so collect first.
        let items: Vec<T> = items.into_iter().collect();
        let count = items.len();
        let mut items = items.into_iter();
        self.push_exact(count, || items.next().expect("the vector holds exactly count items"));
    }

    /// Pushes `count` items produced by `next`, in order.
    ///
    /// `next` is called exactly `count` times, each time after a slot has been reserved for the
    /// item it returns. If it panicked, the reserved slot would stay unwritten: consumers would
    /// see `Retry` there forever (memory-safe, but stuck), so callers pass closures that cannot
    /// panic.
    pub(crate) fn push_exact(&self, mut count: usize, mut next: impl FnMut() -> T) {
        // J1: Acquire; pairs with the installer's Release CAS.
        let mut tail = self.tail.load(Ordering::Acquire);
        while count > 0 {
            let (block, offset) = untag(tail);
            if offset == BLOCK_CAP {
                tail = self.install_next(tail);
                continue;
            }
            let n = count.min(BLOCK_CAP - offset);
            match self.tail.compare_exchange_weak(
                tail,
                tag(block, offset + n),
                // Relaxed on success: continues the release sequence of J1.
                Ordering::Relaxed,
                // J1: Acquire, as for the load.
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    for i in offset..offset + n {
                        // SAFETY: our CAS succeeded, so `block` was the tail block then and
                        // slots `offset..offset+n` are reserved for us alone; the block cannot
                        // be retired before all its slots are written and claimed (module
                        // docs), and its initialisation is visible through J1.
                        let slot = unsafe { &(*block).slots[i] };
                        let item = next();
                        slot.item.with_mut(|p| {
                            // SAFETY: the slot is reserved for us and unwritten.
                            unsafe { ptr::write(p, MaybeUninit::new(item)) }
                        });
                        // J3: Release; pairs with the consumers' Acquire load of `ready`.
                        slot.ready.store(true, Ordering::Release);
                    }
                    count -= n;
                    if count > 0 {
                        tail = self.tail.load(Ordering::Acquire);
                    }
                }
                Err(actual) => tail = actual,
            }
        }
    }

    /// The tail block is full (`tail` is `(B, BLOCK_CAP)`): install a next block, or observe
    /// that someone else did. Returns a fresh value of `tail`.
    #[cold]
    #[inline(never)]
    fn install_next(&self, seen: *mut Block<T>) -> *mut Block<T> {
        let _guard = crossbeam_epoch::pin();
        // Re-read under the pin: if `tail` still is `(B, BLOCK_CAP)`, `B` is the tail block,
        // which is never retired, and our pin keeps it allocated even if it is retired later.
        // J1: Acquire.
        let current = self.tail.load(Ordering::Acquire);
        if current != seen {
            return current;
        }
        let (block, _) = untag(current);
        // SAFETY: `block` is alive (see above); `start` is immutable after publication (J1).
        let start = unsafe { (*block).start } + BLOCK_CAP as u64;
        let new = Block::alloc(start);
        // J1: Release publishes `new`'s initialisation to pushers; failure Acquire as above.
        match self.tail.compare_exchange(current, tag(new, 0), Ordering::Release, Ordering::Acquire)
        {
            Ok(_) => {
                // J2: Release publishes `new` to the consumer that moves `head` past `block`.
                // SAFETY: `block` cannot be retired before this link exists (module docs).
                unsafe { (*block).next.store(new, Ordering::Release) };
                tag(new, 0)
            }
            Err(actual) => {
                // SAFETY: `new` was never published.
                unsafe { Block::free(new) };
                actual
            }
        }
    }

    /// Steals the item at the front.
    ///
    /// Returns [`Steal::Retry`] if the front item's producer has reserved its slot but not yet
    /// written it.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Steal};
    ///
    /// let q = Injector::new();
    /// assert_eq!(q.steal(), Steal::Empty);
    /// q.push('x');
    /// assert_eq!(q.steal(), Steal::Success('x'));
    /// ```
    pub fn steal(&self) -> Steal<T> {
        self.pop_into(None, 0)
    }

    /// Steals the item at the front to run now, and moves up to `limit` more (in FIFO order,
    /// bounded by `dest`'s free room and by the end of the current block of 63 slots) into
    /// `dest`, all with one CAS. `dest`'s owner then pops them in FIFO order.
    ///
    /// A scheduler with `P` workers typically passes `min(16, len / P + 1)` (Go's
    /// `globrunqget`), so one worker does not drain the global queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Steal, Worker};
    ///
    /// let q = Injector::new();
    /// q.push_batch(0..10);
    /// let w = Worker::new();
    /// assert_eq!(q.steal_batch_and_pop(&w, 4), Steal::Success(0));
    /// assert_eq!(w.pop(), Some(1));
    /// assert_eq!(w.len(), 3);
    /// assert_eq!(q.len(), 5);
    /// ```
    pub fn steal_batch_and_pop(&self, dest: &Worker<T>, limit: usize) -> Steal<T> {
        self.pop_into(Some(dest), limit)
    }

    fn pop_into(&self, dest: Option<&Worker<T>>, limit: usize) -> Steal<T> {
        let limit = limit.min(BLOCK_CAP);
        // Make room first (a growable `dest` may allocate), outside the critical part.
        let room = match dest {
            Some(dest) if limit > 0 => dest.reserve(limit as u32) as usize,
            _ => 0,
        };
        let want_max = 1 + limit.min(room);
        let guard = crossbeam_epoch::pin();
        // J2/J4: Acquire; pairs with the Release head CAS of the consumer that set it.
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            let (block, offset) = untag(head);
            if offset == BLOCK_CAP {
                // SAFETY: we are pinned and loaded `head` while pinned; `block` is retired only
                // after `head` moves off it, so it is allocated until our guard drops.
                let next = unsafe { (*block).next.load(Ordering::Acquire) }; // J2
                if next.is_null() {
                    // J4: Acquire (only compared here).
                    let tail = self.tail.load(Ordering::Acquire);
                    // `tail == head`: the block is full and nothing was pushed after it.
                    // Otherwise a pusher installed the next block and is about to link it.
                    return if tail == head { Steal::Empty } else { Steal::Retry };
                }
                match self.head.compare_exchange(
                    head,
                    tag(next, 0),
                    Ordering::Release, // J2: passes `next`'s initialisation on.
                    Ordering::Acquire, // J2/J4 as for the load.
                ) {
                    Ok(_) => {
                        head = tag(next, 0);
                        let free_block = move || {
                            // SAFETY: `block` is unreachable now (head moved off it; tail did
                            // before, as `next` is linked); the collector runs this once, after
                            // every pin that could still see the block has ended.
                            unsafe { Block::free(block) }
                        };
                        // SAFETY: `free_block` captures only the `block` pointer and touches
                        // nothing on our stack. It may run on another thread: freeing a block
                        // reads and drops no `T` (every item was moved out).
                        unsafe { guard.defer_unchecked(free_block) };
                    }
                    Err(actual) => head = actual,
                }
                continue;
            }

            // Count the written slots from `offset` on, up to the batch size and the end of the
            // block. Only `ready` flags are read (never `tail`), so a polling consumer does
            // not pull the producers' `tail` line away from them. A flag is set only after its
            // slot was reserved and written, so a run of set flags is safe to claim.
            let want = want_max.min(BLOCK_CAP - offset);
            let mut ready = 0;
            while ready < want {
                // SAFETY: `block` is allocated while we are pinned (see above), and
                // `offset + ready < BLOCK_CAP`.
                let slot = unsafe { &(*block).slots[offset + ready] };
                // J3: Acquire; pairs with the pusher's Release store.
                if !slot.ready.load(Ordering::Acquire) {
                    break;
                }
                ready += 1;
            }
            if ready == 0 {
                // J4: Acquire; `tail` is at or after `head`.
                let tail = self.tail.load(Ordering::Acquire);
                // Nothing reserved after `head`: empty. Otherwise the slot at `head` is
                // reserved but not written yet (its pusher is mid-push): do not wait for it.
                return if tail == head { Steal::Empty } else { Steal::Retry };
            }
            match self.head.compare_exchange_weak(
                head,
                tag(block, offset + ready),
                Ordering::Release, // J4
                Ordering::Acquire, // J2/J4
            ) {
                Ok(_) => {
                    let read = |i: usize| {
                        // SAFETY: slot `i` of `block` is written (J3, acquired above) and
                        // claimed by our CAS; `block` stays allocated while we are pinned.
                        let slot = unsafe { &(*block).slots[i] };
                        // SAFETY: claimed and initialised, read exactly once.
                        slot.item.with(|p| unsafe { ptr::read(p).assume_init() })
                    };
                    let first = read(offset);
                    if ready > 1 {
                        let dest = dest.expect("only a batch steal has a destination");
                        let mut i = offset + 1;
                        // SAFETY: `ready - 1 <= room` slots were reserved in `dest` (no push
                        // in between: `dest` is ours); the closure yields exactly that many.
                        // Reversed, so the owner's LIFO pops return them in FIFO order.
                        unsafe {
                            dest.receive_batch((ready - 1) as u32, true, || {
                                let item = read(i);
                                i += 1;
                                item
                            });
                        }
                    }
                    return Steal::Success(first);
                }
                Err(actual) => head = actual,
            }
        }
    }

    /// The number of items in the queue: a racy snapshot. Items whose slot is reserved but not
    /// yet written are counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Injector;
    ///
    /// let q = Injector::new();
    /// q.push_batch(0..100);
    /// assert_eq!(q.len(), 100);
    /// ```
    pub fn len(&self) -> usize {
        let _guard = crossbeam_epoch::pin();
        // J4: head first, then tail, both Acquire: tail is at or after head.
        let (head_block, head_offset) = untag(self.head.load(Ordering::Acquire));
        let (tail_block, tail_offset) = untag(self.tail.load(Ordering::Acquire));
        // SAFETY: both blocks were loaded while pinned from `head`/`tail`, so neither is freed
        // before `_guard` drops; `start` is immutable after publication (J1/J2).
        let (head_start, tail_start) = unsafe { ((*head_block).start, (*tail_block).start) };
        let head = head_start + head_offset as u64;
        let tail = tail_start + tail_offset as u64;
        tail.saturating_sub(head) as usize
    }

    /// Returns `true` if the queue is empty (a racy snapshot, as [`len`](Injector::len)).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Injector;
    ///
    /// let q = Injector::new();
    /// assert!(q.is_empty());
    /// q.push(1);
    /// assert!(!q.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Default for Injector<T> {
    fn default() -> Injector<T> {
        Injector::new()
    }
}

impl<T> Drop for Injector<T> {
    fn drop(&mut self) {
        // `&mut self`: no push or pop is in flight, so every link is in place.
        let (mut block, mut offset) = untag(self.head.load(Ordering::Relaxed));
        let (tail_block, tail_offset) = untag(self.tail.load(Ordering::Relaxed));
        loop {
            let end = if block == tail_block { tail_offset } else { BLOCK_CAP };
            for i in offset..end {
                // SAFETY: `block` is reachable from `head`, hence allocated and ours.
                let slot = unsafe { &(*block).slots[i] };
                // A slot whose pusher panicked before writing stays unready; skip it.
                if slot.ready.load(Ordering::Relaxed) {
                    // SAFETY: written (ready) and never claimed (at or after head).
                    drop(slot.item.with(|p| unsafe { ptr::read(p).assume_init() }));
                }
            }
            // SAFETY: as above; `next` is read before the block is freed.
            let next = unsafe { (*block).next.load(Ordering::Relaxed) };
            // SAFETY: reachable only from `head` (and `tail`), both dying with `self`.
            unsafe { Block::free(block) };
            if block == tail_block || next.is_null() {
                break;
            }
            block = next;
            offset = 0;
        }
    }
}

impl<T> fmt::Debug for Injector<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injector").field("len", &self.len()).finish_non_exhaustive()
    }
}
