//! [`Injector`]: the global FIFO queue, multi-producer multi-consumer, lock-free.
//!
//! # Design
//!
//! A linked list of blocks of `BLOCK_CAP` slots (127; 2 under loom). `tail` and `head` are each
//! **one tagged pointer**: the block's address with the offset of the next slot in the low
//! seven bits (blocks are 128-byte aligned). One word per end means an end is always read
//! consistently and moved with one CAS, including across a block boundary. A block keeps its
//! `ready` flags in one array and its items in another, so word-sized items fill whole cache
//! lines.
//!
//! **Push.** CAS `tail` from `(B, o)` to `(B, o + n)` to reserve `n` slots (`n = 1` for
//! `push`, up to the rest of the block for batches), write the items, set each slot's `ready`
//! flag. At `(B, BLOCK_CAP)` the block is full: any pusher takes a block `N` (from the block
//! cache, or newly allocated) and CASes `tail` to `(N, 0)`; the winner links `B.next = N`,
//! losers put theirs back. A pusher never waits for another pusher.
//!
//! **Pop** (`steal`, `steal_batch_and_pop`). Load `head = (B, o)`; count the set `ready` flags
//! from `o` on (up to the batch size and the end of the block); CAS `head` forward by that
//! many; read them. A run of set flags is always safe to claim, so `tail` is only read when
//! the flag at `o` is clear, to tell `Empty` (nothing reserved) from `Retry` (slot `o` is
//! reserved but its pusher has not written it yet, e.g. it was preempted mid-push). Likewise at
//! the end of a block whose successor is not linked yet: `Retry`. Consumers never claim a slot
//! before it is written, so they never wait on one.
//!
//! **Pace.** A consumer whose take came back short (fewer items than it asked for because it
//! reached slots not written yet, or `Empty`/`Retry`) raises a shared pace, and every take
//! starts with that many spin-loop pauses (at most `PACE_MAX`, about 0.8 us); full takes
//! lower it again. Without it a consumer that caught up with a pusher stays on its heels
//! ("chase mode"): each take finds only the few items pushed since the last one, and polling
//! the lines the pusher is writing (its `ready` flags, and `tail` on every empty or mid-push
//! attempt) makes the pusher's stores and `tail` CAS wait for those lines to come back, which
//! keeps the consumer caught up. The pace is a hint only: it decides nothing.
//!
//! Progress: every push completes in a bounded number of its own steps plus one CAS retry per
//! concurrent push (lock-free); every pop completes or returns `Retry`/`Empty` without waiting.
//! The price of never waiting is that a pusher stalled between its reservation and its write
//! delays the items behind it (consumers see `Retry` until it resumes); they are not lost.
//!
//! **Reclamation.** A block is retired only by the consumer that moves `head` off it, which
//! needs its `next` link, which its installer writes after moving `tail` off it: so the tail
//! block is never retired, and by then every slot has been written and claimed. Pushers touch
//! a block only after a successful CAS of `tail` within it (which proves it is the tail block)
//! and before writing their last `ready` flag (which it cannot be retired without). Consumers
//! read blocks before claiming (flags, `next`), so they are pinned (`crossbeam-epoch`) for
//! their whole operation; so is a pusher installing a block (it reads the full block's
//! position before its CAS). Pushers otherwise do not pin. A retired block goes through the
//! epoch collector into a small per-injector cache (32 blocks, about 40 KiB for word items)
//! from which installers take blocks: retirements reach the collector in bursts, and sending
//! those straight back to the allocator made glibc return pages to the OS and fault them back
//! in, which cost more than the queue protocol itself. The cache is only ever `try_lock`ed; a
//! thread that finds it busy allocates or frees instead of waiting.
//!
//! # Memory ordering
//!
//! The guarantee: an item is read once, by the consumer whose CAS on `head` covered it, after
//! its write; a block is initialised before anyone uses it and reused or freed after everyone
//! is done with it.
//!
//! * **J1** (publish a block to pushers): the installer initialises (or resets) `N`, then
//!   CASes `tail` to `(N, 0)` with `Release`; pushers load `tail` (and fail CASes) with
//!   `Acquire`. Their own claim CASes are `Relaxed` on success: RMWs continue the installer's
//!   release sequence.
//! * **J2** (publish a block to consumers): the installer stores `B.next = N` with `Release`;
//!   the consumer moving `head` loads `B.next` with `Acquire` and CASes `head` to `(N, 0)`
//!   with `Release`; consumers load `head` with `Acquire`.
//! * **J3** (publish an item): the pusher writes the slot, then `ready.store(true, Release)`;
//!   the consumer loads `ready` with `Acquire` before it claims and reads the slot.
//! * **J4** (`head` never outruns `tail`): head CASes are `Release` and head loads `Acquire`,
//!   so a consumer that sees `head = (B, o)` sees `tail` at least as far as the reservations of
//!   the slots below `o` (their `ready` flags were acquired by the consumer that moved `head`
//!   past them). Hence `tail == head` means nothing is reserved after `head`, and `Empty`
//!   means the queue was empty at an instant during the call.
//! * Reuse: the epoch collector runs a retirement only after every pin that could see the
//!   block has ended (its own SeqCst fences order those pins' accesses before it); the cache's
//!   mutex then orders the recycling before the reuse, and J1 orders the reset before the
//!   new pushes.
//!
//! * **P** (`pace`): `Relaxed` loads and stores, no pair. It only sets how many spin-loop
//!   pauses a consumer takes before it starts; nothing is decided on its value, so a stale or
//!   lost update costs time, never correctness.
//!
//! No store→load ordering is needed (every decision is an RMW on the word it is about, or a
//! read of a flag that only goes from clear to set), so there is no `fence(SeqCst)` here; the
//! epoch `pin` brings its own.

use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::{self, addr_of_mut};
use std::alloc::{self, Layout};

use crate::steal::Steal;
use crate::stealer::{DEFAULT_BATCH, assert_limit};
use crate::sync::{
    Arc, AtomicBool, AtomicPtr, CachePadded, HintAtomicU32, IS_LOOM, Mutex, Ordering, UnsafeCell,
};
use crate::worker::Worker;

/// Slots per block.
const BLOCK_CAP: usize = if IS_LOOM { 2 } else { 127 };
/// The low bits of a tagged pointer that hold the offset (blocks are 128-byte aligned).
const OFFSET_MASK: usize = 127;
/// The most spin-loop pauses a consumer takes before looking at the queue (see [`Front::pace`]);
/// about 0.8 us where a pause takes 24 ns. None under loom: pausing changes no outcome.
const PACE_MAX: u32 = if IS_LOOM { 0 } else { 32 };
/// How much a short take raises the pace, and a full one lowers it.
const PACE_UP: u32 = 8;
const PACE_DOWN: u32 = 2;
/// Retired blocks kept for reuse (about 40 KiB for word-sized items).
const CACHED_BLOCKS: usize = if IS_LOOM { 1 } else { 32 };
const _: () = assert!(BLOCK_CAP <= OFFSET_MASK, "offsets 0..=BLOCK_CAP must fit in the tag");

#[repr(C, align(128))]
struct Block<T> {
    /// `ready[i]` is set (J3) once `items[i]` is written. Kept apart from the items so that
    /// word-sized items fill whole cache lines (8 per line instead of 4): a consumer on another
    /// core pulls half as many lines across per item.
    ready: [AtomicBool; BLOCK_CAP],
    items: [UnsafeCell<MaybeUninit<T>>; BLOCK_CAP],
    /// The next block, once linked (J2).
    next: AtomicPtr<Block<T>>,
    /// The global position of slot 0 (for `len`); written before the block is published.
    start: u64,
    /// The allocation this block lives in (see [`Block::alloc`]).
    raw: *mut u8,
}

impl<T> Block<T> {
    /// The layout actually requested from the allocator: the block's size plus room to align
    /// it by hand, at the allocator's natural alignment. Asking for the 128-byte alignment
    /// directly sends every block through the allocator's slow "memalign" path, whose chunks
    /// are reused poorly (glibc then keeps faulting fresh pages in).
    fn raw_layout() -> Layout {
        let block = Layout::new::<Block<T>>();
        Layout::from_size_align(block.size() + block.align(), 16)
            .expect("the size of a block is far below isize::MAX")
    }

    /// Allocates an empty block whose slot 0 has global position `start`.
    fn alloc(start: u64) -> *mut Block<T> {
        let layout = Self::raw_layout();
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc::alloc(layout) };
        if raw.is_null() {
            alloc::handle_alloc_error(layout);
        }
        let block = raw.wrapping_add(raw.align_offset(align_of::<Block<T>>())).cast::<Block<T>>();
        // SAFETY: `block` is aligned for `Block<T>` and `size_of::<Block<T>>()` bytes fit
        // between it and the end of the allocation (`raw_layout` reserved `align` extra bytes).
        // Every field is initialised exactly once below, in place (so a block of large items
        // is never built on the stack).
        unsafe {
            for i in 0..BLOCK_CAP {
                ptr::write(addr_of_mut!((*block).ready[i]), AtomicBool::new(false));
                ptr::write(addr_of_mut!((*block).items[i]), UnsafeCell::new(MaybeUninit::uninit()));
            }
            ptr::write(addr_of_mut!((*block).next), AtomicPtr::new(ptr::null_mut()));
            ptr::write(addr_of_mut!((*block).start), start);
            ptr::write(addr_of_mut!((*block).raw), raw);
        }
        block
    }

    /// Makes a recycled block look freshly allocated, with slot 0 at global position `start`.
    ///
    /// # Safety
    ///
    /// * `block` came from [`Block::alloc`], holds no item, and no other thread can access it
    ///   (it came out of the [`BlockCache`], which only holds blocks past their grace period).
    unsafe fn reset(block: *mut Block<T>, start: u64) {
        // SAFETY: exclusively ours (contract), so the plain write of `start` races with nothing.
        // Relaxed stores: the installer's Release CAS of `tail` (J1) publishes all of this.
        unsafe {
            for ready in &(*block).ready {
                ready.store(false, Ordering::Relaxed);
            }
            (*block).next.store(ptr::null_mut(), Ordering::Relaxed);
            ptr::write(addr_of_mut!((*block).start), start);
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
        // SAFETY: `block` is a live, initialised block from `alloc`, exclusively ours
        // (contract).
        let raw = unsafe {
            // Under loom, a consumer still reading this block without a happens-before edge to
            // the free shows up as a data race.
            crate::sync::mark_freed(&(*block).items);
            let raw = (*block).raw;
            // Drop the fields that own loom state (no-ops otherwise); items are never dropped
            // here, as slots are `MaybeUninit`.
            ptr::drop_in_place(block);
            raw
        };
        // SAFETY: `raw` was allocated in `alloc` with exactly this layout.
        unsafe { alloc::dealloc(raw, Self::raw_layout()) };
    }
}

/// Retired blocks waiting to be reused, so a busy injector does not send every block through
/// the allocator (retirement comes in bursts from the epoch collector; freeing those bursts
/// made the allocator return pages to the OS and fault them back in, which cost more than the
/// whole queue protocol). Only `try_lock` is used: a thread that finds it busy allocates or
/// frees instead of waiting, so the injector stays lock-free.
struct BlockCache<T> {
    blocks: Mutex<Vec<*mut Block<T>>>,
}

// SAFETY: the cache holds empty blocks (no `T` inside); the raw pointers (the only field, behind
// the mutex) are owned exclusively by the cache until taken out.
unsafe impl<T> Send for BlockCache<T> {}
// SAFETY: as for `Send`; all access goes through the mutex.
unsafe impl<T> Sync for BlockCache<T> {}

impl<T> BlockCache<T> {
    fn new() -> BlockCache<T> {
        BlockCache { blocks: Mutex::new(Vec::with_capacity(CACHED_BLOCKS)) }
    }

    /// A reset block with slot 0 at `start`: a cached one if available, else a new one.
    fn take(&self, start: u64) -> *mut Block<T> {
        let cached = match self.blocks.try_lock() {
            Ok(mut blocks) => blocks.pop(),
            Err(_) => None,
        };
        match cached {
            Some(block) => {
                // SAFETY: cached blocks are empty and past their grace period (see `recycle`),
                // and popping it made it ours alone.
                unsafe { Block::reset(block, start) };
                block
            }
            None => Block::alloc(start),
        }
    }

    /// Keeps `block` for reuse, or frees it if the cache is full or busy.
    ///
    /// # Safety
    ///
    /// * `block` came from [`Block::alloc`], holds no item, is unreachable from the injector,
    ///   and no thread can access it any more (the caller is the epoch collector running the
    ///   deferred retirement, or owns the block exclusively).
    unsafe fn recycle(&self, block: *mut Block<T>) {
        if let Ok(mut blocks) = self.blocks.try_lock()
            && blocks.len() < CACHED_BLOCKS
        {
            // Under loom, make reuse of a block still being read show up as a race.
            // SAFETY: nobody else can access `block` (contract).
            crate::sync::mark_freed(unsafe { &(*block).items });
            blocks.push(block);
            return;
        }
        // SAFETY: exclusively ours (contract).
        unsafe { Block::free(block) };
    }
}

impl<T> Drop for BlockCache<T> {
    fn drop(&mut self) {
        let blocks = match self.blocks.get_mut() {
            Ok(blocks) => blocks,
            Err(poisoned) => poisoned.into_inner(),
        };
        for block in blocks.drain(..) {
            // SAFETY: cached blocks are owned by the cache alone, and the cache is dying.
            unsafe { Block::free(block) };
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
/// assert_eq!(global.steal_batch_with_limit_and_pop(&local, 17), Steal::Success(1));
/// assert_eq!(local.len(), 16);
/// assert_eq!(local.pop(), Some(2)); // FIFO order is kept for the owner's pops
/// assert_eq!(global.len(), 3);
/// ```
pub struct Injector<T> {
    /// The consumers' words.
    front: CachePadded<Front<T>>,
    /// `(block, offset)` of the next slot to reserve.
    tail: CachePadded<AtomicPtr<Block<T>>>,
    /// Spare blocks; shared with the retirements still pending in the epoch collector, which
    /// may run after the injector is gone.
    cache: Arc<BlockCache<T>>,
    /// The injector owns `T`s and hands them between threads; `Send`/`Sync` are granted below.
    _items: PhantomData<*mut T>,
}

/// The consumers' cache line (pushers never touch it).
struct Front<T> {
    /// `(block, offset)` of the next slot to pop.
    head: AtomicPtr<Block<T>>,
    /// How many spin-loop pauses a consumer takes before its next look at the queue (module
    /// docs, "Pace"). On a 2-core VM, one pusher of single items and one batch consumer ran a
    /// million items in ~7 ms, or in 50-140 ms when stuck in chase mode without it.
    pace: HintAtomicU32,
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
            front: CachePadded(Front { head: AtomicPtr::new(block), pace: HintAtomicU32::new(0) }),
            tail: CachePadded(AtomicPtr::new(block)),
            cache: Arc::new(BlockCache::new()),
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
        // The one-item case of `push_exact`, without its batch bookkeeping.
        // J1: Acquire; pairs with the installer's Release CAS.
        let mut tail = self.tail.load(Ordering::Acquire);
        loop {
            let (block, offset) = untag(tail);
            if offset == BLOCK_CAP {
                tail = self.install_next(tail);
                continue;
            }
            match self.tail.compare_exchange_weak(
                tail,
                tag(block, offset + 1),
                // Relaxed on success: continues the release sequence of J1.
                Ordering::Relaxed,
                // J1: Acquire, as for the load.
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: as in `push_exact`: our CAS reserved slot `offset` of the tail
                    // block for us alone, and the block cannot be retired before it is written.
                    let (ready, slot) =
                        unsafe { (&(*block).ready[offset], &(*block).items[offset]) };
                    slot.with_mut(|p| {
                        // SAFETY: the slot is reserved for us and unwritten.
                        unsafe { ptr::write(p, MaybeUninit::new(item)) }
                    });
                    // J3: Release; pairs with the consumers' Acquire load of `ready`.
                    ready.store(true, Ordering::Release);
                    return;
                }
                Err(actual) => tail = actual,
            }
        }
    }

    /// Pushes every item of `items` at the back, in order, reserving slots for many items with
    /// one CAS (one per block of 127 slots). Items of one batch stay contiguous unless the
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
                        let (ready, slot) = unsafe { (&(*block).ready[i], &(*block).items[i]) };
                        let item = next();
                        slot.with_mut(|p| {
                            // SAFETY: the slot is reserved for us and unwritten.
                            unsafe { ptr::write(p, MaybeUninit::new(item)) }
                        });
                        // J3: Release; pairs with the consumers' Acquire load of `ready`.
                        ready.store(true, Ordering::Release);
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
        let new = self.cache.take(start);
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
                // SAFETY: `new` was never published, so it is ours alone and empty.
                unsafe { self.cache.recycle(new) };
                actual
            }
        }
    }

    /// Steals the item at the front.
    ///
    /// Returns [`Steal::Retry`] only if the front item's producer has reserved its slot but
    /// not yet written it (it was preempted mid-push), or the block after a full one is being
    /// linked; never because of another consumer (a lost CAS to one is retried internally).
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
        self.pop_into(None, 1, true).map(|item| item.expect("a pop returns an item"))
    }

    /// Moves up to 32 items from the front into `dest` with one CAS (crossbeam's
    /// `Injector::steal_batch`). See
    /// [`steal_batch_with_limit`](Injector::steal_batch_with_limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Steal, Worker};
    ///
    /// let q = Injector::new();
    /// q.push_batch(1..=4);
    /// let w = Worker::new_fifo();
    /// assert_eq!(q.steal_batch(&w), Steal::Success(()));
    /// assert_eq!(w.pop(), Some(1));
    /// assert_eq!(w.pop(), Some(2));
    /// ```
    pub fn steal_batch(&self, dest: &Worker<T>) -> Steal<()> {
        self.steal_batch_with_limit(dest, DEFAULT_BATCH)
    }

    /// Moves up to `limit` items from the front into `dest` with one CAS (crossbeam's
    /// `Injector::steal_batch_with_limit`).
    ///
    /// * **How many:** every written item from the front, up to `limit`, `dest`'s free room
    ///   and the end of the current block of 127 slots. crossbeam takes half of the queue
    ///   when it ends in the current block; this injector does not read the producers' `tail`
    ///   while items are ready (see the module docs), so it cannot know the half. Pass a
    ///   `limit` that shares the queue out (Go's `globrunqget` takes `len / P + 1`).
    /// * **Order:** `dest`'s owner pops them oldest first, LIFO or FIFO `dest` alike, as in
    ///   crossbeam.
    /// * **`Retry`:** the front item's producer has reserved its slot but not written it yet,
    ///   or the next block is being linked (crossbeam waits in both cases), or `dest` is a
    ///   full bounded worker. Never because of another consumer.
    ///
    /// # Panics
    ///
    /// Panics if `limit` is 0 (as crossbeam does).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Steal, Worker};
    ///
    /// let q = Injector::new();
    /// q.push_batch(1..=6);
    /// let w = Worker::new_lifo();
    /// assert_eq!(q.steal_batch_with_limit(&w, 2), Steal::Success(()));
    /// assert_eq!(w.pop(), Some(1)); // oldest first, even from a LIFO worker
    /// assert_eq!(w.pop(), Some(2));
    /// assert_eq!(w.pop(), None);
    /// ```
    pub fn steal_batch_with_limit(&self, dest: &Worker<T>, limit: usize) -> Steal<()> {
        assert_limit(limit, "Injector::steal_batch_with_limit");
        self.pop_into(Some(dest), limit, false).map(|_| ())
    }

    /// Steals the item at the front and moves up to 31 more into `dest`, with one CAS
    /// (crossbeam's `Injector::steal_batch_and_pop`). See
    /// [`steal_batch_with_limit_and_pop`](Injector::steal_batch_with_limit_and_pop).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Steal, Worker};
    ///
    /// let q = Injector::new();
    /// q.push_batch(1..=6);
    /// let w = Worker::new_fifo();
    /// assert_eq!(q.steal_batch_and_pop(&w), Steal::Success(1));
    /// assert_eq!(w.pop(), Some(2));
    /// assert_eq!(w.pop(), Some(3));
    /// ```
    pub fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
        self.steal_batch_with_limit_and_pop(dest, DEFAULT_BATCH)
    }

    /// Steals the item at the front to run now and moves more into `dest`, at most `limit`
    /// items in all, with one CAS (crossbeam's `Injector::steal_batch_with_limit_and_pop`).
    ///
    /// How many, order and `Retry` are as for
    /// [`steal_batch_with_limit`](Injector::steal_batch_with_limit), with `limit` counting the
    /// item returned; a full bounded `dest` still gets that one.
    ///
    /// A scheduler with `P` workers typically passes `min(17, len / P + 1)` (Go's
    /// `globrunqget`), so one worker does not drain the global queue.
    ///
    /// # Panics
    ///
    /// Panics if `limit` is 0 (as crossbeam does).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Steal, Worker};
    ///
    /// let q = Injector::new();
    /// q.push_batch(0..10);
    /// let w = Worker::new();
    /// assert_eq!(q.steal_batch_with_limit_and_pop(&w, 5), Steal::Success(0));
    /// assert_eq!(w.pop(), Some(1));
    /// assert_eq!(w.len(), 3);
    /// assert_eq!(q.len(), 5);
    /// ```
    pub fn steal_batch_with_limit_and_pop(&self, dest: &Worker<T>, limit: usize) -> Steal<T> {
        assert_limit(limit, "Injector::steal_batch_with_limit_and_pop");
        self.pop_into(Some(dest), limit, true).map(|item| item.expect("a pop returns an item"))
    }

    /// The body of every take: claims up to `limit` written items from the front with one
    /// CAS; returns the first one if `pop_one`, and moves the rest into `dest` (oldest popped
    /// first). Inlined so that `steal` gets its own copy with the batch code folded away (the
    /// single-item steal is a hot path of its own; its numbers are in BENCHMARKS.md).
    #[inline(always)]
    fn pop_into(&self, dest: Option<&Worker<T>>, limit: usize, pop_one: bool) -> Steal<Option<T>> {
        let limit = limit.min(BLOCK_CAP);
        let kept = usize::from(pop_one);
        // Make room first (a growable `dest` may allocate), outside the critical part.
        let room = match dest {
            Some(dest) if limit > kept => dest.reserve((limit - kept) as u32) as usize,
            _ => 0,
        };
        let want_max = kept + (limit - kept).min(room);
        if want_max == 0 {
            // A batch into a full bounded `dest`: nothing can move until its owner pops.
            return if self.is_empty() { Steal::Empty } else { Steal::Retry };
        }
        // Pause first if the last takes came back short (see `Front::pace`). P: a hint.
        let pace = self.front.pace.load(Ordering::Relaxed);
        for _ in 0..pace {
            core::hint::spin_loop();
        }
        let guard = crossbeam_epoch::pin();
        // J2/J4: Acquire; pairs with the Release head CAS of the consumer that set it.
        let mut head = self.front.head.load(Ordering::Acquire);
        loop {
            let (block, offset) = untag(head);
            if offset == BLOCK_CAP {
                // SAFETY: we are pinned and loaded `head` while pinned; `block` is retired only
                // after `head` moves off it, so it is allocated until our guard drops.
                let next = unsafe { (*block).next.load(Ordering::Acquire) }; // J2
                if next.is_null() {
                    // J4: Acquire (only compared here).
                    let tail = self.tail.load(Ordering::Acquire);
                    self.set_pace(pace, true);
                    // `tail == head`: the block is full and nothing was pushed after it.
                    // Otherwise a pusher installed the next block and is about to link it.
                    return if tail == head { Steal::Empty } else { Steal::Retry };
                }
                match self.front.head.compare_exchange(
                    head,
                    tag(next, 0),
                    Ordering::Release, // J2: passes `next`'s initialisation on.
                    Ordering::Acquire, // J2/J4 as for the load.
                ) {
                    Ok(_) => {
                        head = tag(next, 0);
                        let cache = self.cache.clone();
                        let retire = move || {
                            // SAFETY: `block` is empty and unreachable now (head moved off it;
                            // tail did before, as `next` is linked); the collector runs this
                            // once, after every pin that could still see the block has ended.
                            unsafe { cache.recycle(block) }
                        };
                        // SAFETY: `retire` captures only the cache handle and the `block`
                        // pointer and touches nothing on our stack. It may run on another
                        // thread: recycling a block reads and drops no `T`.
                        unsafe { guard.defer_unchecked(retire) };
                    }
                    Err(actual) => head = actual,
                }
                continue;
            }

            // Count the written slots from `offset` on, up to the batch size and the end of the
            // block. A flag is set only after its slot was reserved and written, so a run of
            // set flags is safe to claim without looking at `tail`: a consumer working through
            // a backlog never pulls the producers' `tail` line away from them.
            let want = want_max.min(BLOCK_CAP - offset);
            let mut ready = 0;
            while ready < want {
                // SAFETY: `block` is allocated while we are pinned (see above), and
                // `offset + ready < BLOCK_CAP`.
                let flag = unsafe { &(*block).ready[offset + ready] };
                // J3: Acquire; pairs with the pusher's Release store.
                if !flag.load(Ordering::Acquire) {
                    break;
                }
                ready += 1;
            }
            if ready == 0 {
                // J4: Acquire; `tail` is at or after `head`.
                let tail = self.tail.load(Ordering::Acquire);
                self.set_pace(pace, true);
                // Nothing reserved after `head`: empty. Otherwise the slot at `head` is
                // reserved but not written yet (its pusher is mid-push): do not wait for it.
                return if tail == head { Steal::Empty } else { Steal::Retry };
            }
            match self.front.head.compare_exchange_weak(
                head,
                tag(block, offset + ready),
                Ordering::Release, // J4
                Ordering::Acquire, // J2/J4
            ) {
                Ok(_) => {
                    // Short: the run of written slots ended before the batch did.
                    self.set_pace(pace, ready < want);
                    let read = |i: usize| {
                        // SAFETY: slot `i` of `block` is written (J3, acquired above) and
                        // claimed by our CAS; `block` stays allocated while we are pinned.
                        let slot = unsafe { &(*block).items[i] };
                        // SAFETY: claimed and initialised, read exactly once.
                        slot.with(|p| unsafe { ptr::read(p).assume_init() })
                    };
                    let first = pop_one.then(|| read(offset));
                    let batch = ready - kept;
                    if batch > 0 {
                        let dest = dest.expect("only a batch steal has a destination");
                        let mut i = offset + kept;
                        // SAFETY: `batch <= room` slots were reserved in `dest` (no push in
                        // between: `dest` is ours); the closure yields exactly that many.
                        // Reversed for a LIFO `dest`, so its owner pops them oldest first.
                        unsafe {
                            dest.receive_batch(batch as u32, !dest.is_fifo(), || {
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

    /// Raises the pace after a `short` take (one that reached the slots not yet written),
    /// lowers it after a full one; `pace` is the value this take started with.
    #[inline(always)]
    fn set_pace(&self, pace: u32, short: bool) {
        let new =
            if short { (pace + PACE_UP).min(PACE_MAX) } else { pace.saturating_sub(PACE_DOWN) };
        if new != pace {
            // P: Relaxed, a hint.
            self.front.pace.store(new, Ordering::Relaxed);
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
        let (head_block, head_offset) = untag(self.front.head.load(Ordering::Acquire));
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
        let (mut block, mut offset) = untag(self.front.head.load(Ordering::Relaxed));
        let (tail_block, tail_offset) = untag(self.tail.load(Ordering::Relaxed));
        loop {
            let end = if block == tail_block { tail_offset } else { BLOCK_CAP };
            for i in offset..end {
                // SAFETY: `block` is reachable from `head`, hence allocated and ours.
                let (ready, slot) = unsafe { (&(*block).ready[i], &(*block).items[i]) };
                // A slot whose pusher panicked before writing stays unready; skip it.
                if ready.load(Ordering::Relaxed) {
                    // SAFETY: written (ready) and never claimed (at or after head).
                    drop(slot.with(|p| unsafe { ptr::read(p).assume_init() }));
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

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::mpsc;
    use std::thread;

    use super::*;

    /// A pusher stalled between reserving its slot and writing it (here: blocked inside the
    /// item closure until the consumer has seen it) makes `steal` return `Retry`, over and
    /// over, instead of waiting; once the pusher resumes, the item arrives.
    #[test]
    fn stalled_pusher_gives_retry_not_a_wait() {
        let q = Injector::new();
        let (reserved_tx, reserved_rx) = mpsc::channel();
        let (resume_tx, resume_rx) = mpsc::channel::<()>();
        thread::scope(|s| {
            let q = &q;
            s.spawn(move || {
                q.push_exact(1, || {
                    reserved_tx.send(()).unwrap();
                    resume_rx.recv().unwrap();
                    7
                });
            });
            reserved_rx.recv().unwrap();
            // Many takes while the slot is reserved but unwritten: each one returns.
            for _ in 0..100 {
                assert_eq!(q.steal(), Steal::Retry);
            }
            let local = Worker::new();
            assert_eq!(q.steal_batch_with_limit_and_pop(&local, 17), Steal::Retry);
            resume_tx.send(()).unwrap();
        });
        assert_eq!(q.steal(), Steal::Success(7));
        assert_eq!(q.steal(), Steal::Empty);
    }
}
