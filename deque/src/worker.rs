//! [`Worker`]: the owner's handle, with the push, pop, overflow and resize halves of the
//! protocol described in [`queue`](crate::queue).
//!
//! # Memory ordering
//!
//! The owner takes part in the pairs of [`queue`](crate::queue): it is the Release side of
//! **P1** (`push_count` store after writing a slot), **P2** (the pop RMW on `packed`) and
//! **P4** (`buffer` store after copying a ring), and the Acquire side of **P3** (`done` load
//! before reusing a slot). When it overflows it is also a claimer (P1–P3 as in `claim`). The
//! owner caches what only it writes (`push_count`, `pop_count`, the ring) and lower bounds of
//! what thieves advance (`head`, `done`) in plain `Cell`s: `head` and `done` only grow, so a
//! stale cached value under-estimates the room and the length, never over-estimates them.

use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::buffer::Buffer;
use crate::injector::Injector;
use crate::queue::{Claim, MAX_CAPACITY, MIN_GROWABLE_CAPACITY, POP_ONE, Queue};
use crate::stealer::Stealer;
use crate::sync::{Arc, Ordering};

/// Rings of at least this many bytes are handed to the epoch collector with a `flush`, so that a
/// big retired ring (after a burst) is freed promptly instead of waiting in a thread-local bag.
const FLUSH_BYTES: usize = 1 << 10;

/// The owner's handle of a work-stealing queue: it pushes at the *tail*, while [`Stealer`]s
/// take the oldest items from the *head*.
///
/// Two flavours, as in crossbeam-deque:
///
/// * **LIFO** ([`Worker::new_lifo`], also [`Worker::new`] and [`Worker::bounded`]): the owner
///   pops the newest item (cache-warm, the usual choice for fork-join work).
/// * **FIFO** ([`Worker::new_fifo`], [`Worker::bounded_fifo`]): the owner pops the oldest item,
///   from the same end as thieves (fairer, for schedulers that want rough arrival order).
///
/// and two modes, chosen at construction:
///
/// * **bounded** ([`Worker::bounded`], [`Worker::bounded_fifo`]): a fixed power-of-two ring;
///   [`push`](Worker::push) returns `Err(item)` when full, and
///   [`push_or_overflow`](Worker::push_or_overflow) moves the older half of the queue to an
///   [`Injector`] instead (as Go and tokio do). No epoch reclamation cost anywhere.
/// * **growable** ([`Worker::new_lifo`], [`Worker::new_fifo`], [`Worker::with_max_capacity`]):
///   the ring doubles when full (up to an optional maximum), can be shrunk after a burst with
///   [`shrink_to_fit`](Worker::shrink_to_fit), and retired rings are reclaimed with
///   `crossbeam-epoch` (thieves pin; the owner's push and pop do not).
///
/// [`Worker::builder`] combines any flavour, mode and [pop batch](Worker::with_pop_batch).
/// Every pop is one wait-free read-modify-write in both flavours; no owner operation ever waits
/// for a thief.
///
/// A `Worker` is `Send` but not `Sync`: exactly one thread owns it at a time.
///
/// # Examples
///
/// ```
/// use purloin_deque::{Steal, Worker};
///
/// let w = Worker::bounded(8);
/// w.push(1).unwrap();
/// w.push(2).unwrap();
/// w.push(3).unwrap();
/// let s = w.stealer();
/// assert_eq!(s.steal(), Steal::Success(1)); // thieves take the oldest
/// assert_eq!(w.pop(), Some(3)); // the owner takes the newest
/// assert_eq!(w.pop(), Some(2));
/// assert_eq!(w.pop(), None);
/// ```
pub struct Worker<T> {
    pub(crate) queue: Arc<Queue<T>>,
    /// The ring in use: always equal to `queue.buffer`, which only this handle replaces.
    buffer: Cell<NonNull<Buffer<T>>>,
    /// The owner's push count: `queue.push_count` (which only the owner writes) plus the items
    /// kept by a pop batch, if any (see "Pop batches" in `queue`).
    push_count: Cell<u32>,
    /// Mirror of the high half of `queue.packed` (only the owner changes it).
    pop_count: Cell<u32>,
    /// A lower bound of the head in `queue.packed` (heads only grow).
    head_seen: Cell<u32>,
    /// A lower bound of `queue.done` (it only grows).
    done_seen: Cell<u32>,
    /// How the owner pops: `FIFO_POP` (0) at the head; otherwise at the tail, with this many
    /// items per read-modify-write at most (1: every pop is its own RMW).
    pop_batch: Cell<u32>,
    /// Where the head sits in `queue.packed`: `packed >> head_shift` (0 LIFO, 32 FIFO; as
    /// `Queue::view`, with one shift instead of decoding the flavour flag on every check).
    head_shift: u32,
    /// Not `Sync`: the cells above are the owner's alone.
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: `Worker` may move to another thread with its `T`s (hence `T: Send`); the fields that
// are not `Send` by themselves are the `buffer` cell (a pointer to the ring that `queue` keeps
// alive) and the counter cells, which only the one thread holding the `Worker` touches.
unsafe impl<T: Send> Send for Worker<T> {}

/// `Worker::pop_batch` of a FIFO worker.
const FIFO_POP: u32 = 0;

/// What [`Worker::builder`] starts from: growable, LIFO, one RMW per pop.
const DEFAULT_BUILDER: Builder =
    Builder { fifo: false, bounded: None, max_capacity: None, pop_batch: 1 };

/// Not generic, so `Worker::builder()` needs no type annotation: the item type is chosen by
/// [`Builder::build`]. (Hence `Worker::builder()`, not `Worker::<T>::builder()`;
/// `Builder::default()` is the same thing.)
impl Worker<()> {
    /// Starts a [`Builder`] for a worker with any combination of flavour (LIFO or FIFO), mode
    /// (growable, growable up to a maximum, bounded) and pop batch.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w: Worker<u32> = Worker::builder().bounded(256).pop_batch(8).build();
    /// assert_eq!(w.capacity(), 256);
    /// let f: Worker<u32> = Worker::builder().fifo().max_capacity(1000).build();
    /// assert_eq!(f.max_capacity(), 1024);
    /// ```
    pub fn builder() -> Builder {
        DEFAULT_BUILDER
    }
}

impl<T> Worker<T> {
    /// Creates a growable LIFO queue: the owner pops the newest item; the ring starts at 64
    /// slots and doubles whenever a push finds it full, up to 2^30 items. Crossbeam's name for
    /// [`Worker::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::new_lifo();
    /// for i in 0..1000 {
    ///     w.push(i).unwrap(); // never fails below 2^30 items
    /// }
    /// assert_eq!(w.len(), 1000);
    /// assert_eq!(w.pop(), Some(999));
    /// ```
    pub fn new_lifo() -> Worker<T> {
        DEFAULT_BUILDER.build()
    }

    /// Creates a growable FIFO queue: the owner pops the oldest item, from the same end as
    /// thieves steal. The ring starts at 64 slots and doubles whenever a push finds it full.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let w = Worker::new_fifo();
    /// for i in 0..4 {
    ///     w.push(i).unwrap();
    /// }
    /// assert_eq!(w.pop(), Some(0)); // the owner takes the oldest
    /// assert_eq!(w.stealer().steal(), Steal::Success(1)); // and so do thieves
    /// assert_eq!(w.pop(), Some(2));
    /// ```
    pub fn new_fifo() -> Worker<T> {
        DEFAULT_BUILDER.fifo().build()
    }

    /// The same as [`Worker::new_lifo`]: a growable LIFO queue.
    ///
    /// Kept because LIFO is this crate's default flavour (and `Default` builds it); crossbeam
    /// has no `new`, so code ported from it names a flavour anyway.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::new();
    /// w.push(1).unwrap();
    /// w.push(2).unwrap();
    /// assert_eq!(w.pop(), Some(2));
    /// ```
    pub fn new() -> Worker<T> {
        Worker::new_lifo()
    }

    /// Creates a growable queue that never holds more than `max_capacity` items (rounded up to a
    /// power of two): once there, [`push`](Worker::push) returns `Err(item)`.
    ///
    /// # Panics
    ///
    /// Panics if `max_capacity` is 0 or greater than 2^30.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::with_max_capacity(100); // rounded up to 128
    /// for i in 0..128 {
    ///     w.push(i).unwrap();
    /// }
    /// assert_eq!(w.push(128), Err(128));
    /// ```
    pub fn with_max_capacity(max_capacity: usize) -> Worker<T> {
        DEFAULT_BUILDER.max_capacity(max_capacity).build()
    }

    /// Creates a bounded queue of `capacity` slots, rounded up to a power of two.
    ///
    /// # Panics
    ///
    /// Panics if `capacity` is 0 or greater than 2^30.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::bounded(3); // rounded up to 4
    /// assert_eq!(w.capacity(), 4);
    /// for i in 0..4 {
    ///     w.push(i).unwrap();
    /// }
    /// assert_eq!(w.push(4), Err(4));
    /// ```
    pub fn bounded(capacity: usize) -> Worker<T> {
        DEFAULT_BUILDER.bounded(capacity).build()
    }

    /// Creates a bounded FIFO queue of `capacity` slots, rounded up to a power of two: as
    /// [`Worker::bounded`], but the owner pops the oldest item.
    ///
    /// # Panics
    ///
    /// Panics if `capacity` is 0 or greater than 2^30.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::bounded_fifo(2);
    /// w.push('a').unwrap();
    /// w.push('b').unwrap();
    /// assert_eq!(w.push('c'), Err('c'));
    /// assert_eq!(w.pop(), Some('a'));
    /// ```
    pub fn bounded_fifo(capacity: usize) -> Worker<T> {
        DEFAULT_BUILDER.fifo().bounded(capacity).build()
    }

    /// Returns `true` if the owner pops the oldest item (FIFO), `false` if the newest (LIFO).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// assert!(Worker::<u8>::new_fifo().is_fifo());
    /// assert!(!Worker::<u8>::bounded(4).is_fifo());
    /// ```
    #[inline]
    pub fn is_fifo(&self) -> bool {
        self.queue.fifo
    }

    fn from_queue(queue: Queue<T>) -> Worker<T> {
        // SAFETY: `Queue::new` stores a pointer from `Box::into_raw`, never null.
        let buffer = unsafe { NonNull::new_unchecked(queue.buffer.load(Ordering::Relaxed)) };
        let queue_fifo = queue.fifo;
        Worker {
            queue: Arc::new(queue),
            buffer: Cell::new(buffer),
            push_count: Cell::new(0),
            pop_count: Cell::new(0),
            head_seen: Cell::new(0),
            done_seen: Cell::new(0),
            pop_batch: Cell::new(if queue_fifo { FIFO_POP } else { 1 }),
            head_shift: if queue_fifo { 32 } else { 0 },
            _not_sync: PhantomData,
        }
    }

    /// Creates a [`Stealer`] for this queue. Stealers can be cloned and shared freely.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::<u32>::bounded(4);
    /// let s = w.stealer();
    /// std::thread::spawn(move || assert!(s.steal().is_empty())).join().unwrap();
    /// ```
    pub fn stealer(&self) -> Stealer<T> {
        Stealer { queue: self.queue.clone() }
    }

    #[inline(always)]
    fn ring(&self) -> &Buffer<T> {
        // SAFETY: the ring is the queue's current one (it is only replaced by `resize` on this
        // thread, which updates the cell), and the queue, held by `self.queue`, keeps it alive.
        unsafe { self.buffer.get().as_ref() }
    }

    /// The owner's tail: the published tail plus the items kept by a pop batch.
    #[inline(always)]
    fn tail(&self) -> u32 {
        self.push_count.get().wrapping_sub(self.pop_count.get())
    }

    /// The items kept by the last pop batch: the owner's push count minus the published one.
    #[inline(always)]
    fn kept(&self) -> u32 {
        // Relaxed: the owner is the only writer, so it reads its own last store.
        self.push_count.get().wrapping_sub(self.queue.owner_side.push_count.load(Ordering::Relaxed))
    }

    /// Lets each pop that has to touch shared memory take up to `n` of the newest items out of
    /// thieves' reach with its one read-modify-write; the following pops hand them out with no
    /// atomic operation at all, until the owner's next push gives the rest back to thieves.
    ///
    /// A pop batch is never more than half of the items the owner last knew of, so thieves can
    /// still take the older half; but while the owner runs an item it popped, up to `n - 1`
    /// newer items stay invisible to thieves (and to [`Stealer::len`]) until the owner pushes,
    /// pops again, or calls [`publish`](Worker::publish). That suits fork-join loops, where the
    /// owner pushes or pops constantly (the split deque of Lace and of Acar, Charguéraud and
    /// Rainey); it does not suit a pool whose tasks block their thread waiting for other tasks
    /// of the same queue, which is why the default is 1 (every pop is one RMW, as in st3 and
    /// crossbeam). [`Builder::pop_batch`] sets it at construction.
    ///
    /// A FIFO worker ignores it: its pops take the oldest items, below the head, where kept
    /// items could never be given back to thieves.
    ///
    /// # Panics
    ///
    /// Panics if `n` is 0 or greater than 2^30.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let w = Worker::bounded(64).with_pop_batch(4);
    /// for i in 0..8 {
    ///     w.push(i).unwrap();
    /// }
    /// let s = w.stealer();
    /// assert_eq!(w.pop(), Some(7)); // one RMW took 7, 6, 5, 4 out of thieves' reach
    /// assert_eq!(s.len(), 4);
    /// assert_eq!(w.len(), 7);
    /// w.publish(); // 6, 5, 4 are stealable again
    /// assert_eq!(s.len(), 7);
    /// assert_eq!(s.steal(), Steal::Success(0));
    /// ```
    pub fn with_pop_batch(self, n: usize) -> Worker<T> {
        assert!(
            n != 0 && n <= MAX_CAPACITY as usize,
            "Worker::with_pop_batch({n}): a pop batch is 1 to 2^30 items; pass 1 for one RMW \
             per pop"
        );
        if !self.queue.fifo {
            self.publish();
            self.pop_batch.set(n as u32);
        }
        self
    }

    /// Gives the items kept by the last pop batch back to thieves (see
    /// [`with_pop_batch`](Worker::with_pop_batch)). A push does this by itself; call it before
    /// running something long after a pop. Does nothing if no items are kept.
    #[inline]
    pub fn publish(&self) {
        if self.kept() != 0 {
            self.publish_count(self.push_count.get());
        }
    }

    /// Publishes `push_count` (it never counts an item that is not in the ring).
    #[inline]
    fn publish_count(&self, push_count: u32) {
        // P1: Release, as for any push.
        self.queue.owner_side.push_count.store(push_count, Ordering::Release);
        self.push_count.set(push_count);
    }

    /// Pushes an item at the tail.
    ///
    /// # Errors
    ///
    /// Returns `Err(item)` if the queue is full: a bounded queue at its capacity, or a growable
    /// queue at its maximum capacity. (Slots a thief is still copying out count as full.)
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::bounded(1);
    /// assert_eq!(w.push('a'), Ok(()));
    /// assert_eq!(w.push('b'), Err('b'));
    /// ```
    #[inline]
    pub fn push(&self, item: T) -> Result<(), T> {
        let tail = self.tail();
        let ring = self.ring();
        if tail.wrapping_sub(self.done_seen.get()) > ring.mask() {
            return self.push_slow(item);
        }
        // SAFETY: `tail - done < capacity`, so the slot of `tail` is outside `done..tail`: free,
        // and only the owner (this thread) writes free slots. The read of its previous item
        // happens-before this write (P3 through the cached `done`).
        unsafe { self.push_unchecked(ring, tail, item) };
        Ok(())
    }

    /// Writes `item` at `tail` and publishes it.
    ///
    /// # Safety
    ///
    /// * The slot of `tail` in `ring` is free (`tail - done < capacity` for an acquired `done`).
    /// * `ring` is the current ring and `tail` the current tail.
    #[inline(always)]
    unsafe fn push_unchecked(&self, ring: &Buffer<T>, tail: u32, item: T) {
        // Read before the slot's write, which the compiler cannot tell apart from a write to
        // these cells (it would load them again after it).
        let count = self.push_count.get().wrapping_add(1);
        let shared = &self.queue.owner_side.push_count;
        // SAFETY: the slot is free and ours (this function's contract).
        unsafe { ring.write(tail, item) };
        // P1: Release; pairs with the Acquire load in `Queue::claim` (and `Queue::len`). The
        // item goes above any kept items (LIFO), and publishing the owner's count gives those
        // back to thieves too.
        shared.store(count, Ordering::Release);
        self.push_count.set(count);
    }

    #[cold]
    #[inline(never)]
    fn push_slow(&self, item: T) -> Result<(), T> {
        // Resizing and overflow work on published items: give kept ones back first.
        self.publish();
        // The cached bound says full: refresh it (P3, in `free_bound`).
        let done = self.queue.free_bound();
        self.done_seen.set(done);
        let tail = self.tail();
        let mut ring = self.ring();
        if tail.wrapping_sub(done) > ring.mask() {
            let cap = ring.capacity();
            if !self.queue.growable || cap >= self.queue.max_capacity {
                return Err(item);
            }
            self.resize(cap * 2);
            ring = self.ring();
        }
        // SAFETY: `tail - done < capacity` now holds for the acquired `done` and current ring.
        unsafe { self.push_unchecked(ring, tail, item) };
        Ok(())
    }

    /// Pushes an item and reports whether the queue was empty just before, which is what a
    /// scheduler needs to decide whether to wake a sleeping worker.
    ///
    /// "Empty" is a snapshot taken at the push: a thief may have been taking the last item at
    /// that very moment, so treat `false` as "someone had work to steal already".
    ///
    /// # Errors
    ///
    /// As [`push`](Worker::push): `Err(item)` when full.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::bounded(4);
    /// assert_eq!(w.push_was_empty(1), Ok(true));
    /// assert_eq!(w.push_was_empty(2), Ok(false));
    /// ```
    #[inline]
    pub fn push_was_empty(&self, item: T) -> Result<bool, T> {
        let was_empty = self.is_empty();
        self.push(item).map(|()| was_empty)
    }

    /// Pushes an item; if the queue is full, first moves the older half of its items to
    /// `injector` in one batch (like Go's `runqputslow` and tokio's `push_overflow`), so a
    /// scheduler's local queue never refuses work.
    ///
    /// Unlike those, `item` itself stays in the local queue: everything in the injector from
    /// this queue is older than everything left here, so a consumer that takes the injector's
    /// head and then this queue's top sees the items in push order (a parent joining its
    /// children in spawn order finds each one where it looks first).
    ///
    /// If a thief is copying items out at that moment (so room is about to appear), only `item`
    /// goes to the injector.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Injector, Worker};
    ///
    /// let global = Injector::new();
    /// let w = Worker::bounded(4);
    /// for i in 0..5 {
    ///     w.push_or_overflow(i, &global);
    /// }
    /// // The oldest half (0, 1) went to the injector; the new item (4) stayed.
    /// assert_eq!(global.len(), 2);
    /// assert_eq!(w.len(), 3);
    /// ```
    #[inline]
    pub fn push_or_overflow(&self, item: T, injector: &Injector<T>) {
        if let Err(item) = self.push(item) {
            self.overflow(item, injector);
        }
    }

    #[cold]
    #[inline(never)]
    fn overflow(&self, item: T, injector: &Injector<T>) {
        // The owner claims the oldest half like a thief would. It needs no epoch guard for a
        // growable ring: only the owner retires rings.
        // SAFETY: we read exactly the claimed slots below and then call `complete`.
        match unsafe { self.queue.claim(|avail| avail.div_ceil(2)) } {
            Claim::Claimed { head, count, buffer } => {
                // P3 for the slots thieves freed before our claim: the claim's Acquire load of
                // `done` saw the last thief's completion, so the pushes below (and later ones,
                // through `done_seen`) write those slots after the thieves' reads.
                // SAFETY: the owner's claim returns the current ring, which the queue keeps
                // alive.
                let ring = unsafe { buffer.as_ref() };
                let end = head.wrapping_add(count);
                let mut position = head;
                injector.push_exact(count as usize, || {
                    // SAFETY: `head..end` is our claim; each slot is read once, in order.
                    let claimed = unsafe { ring.read(position) };
                    position = position.wrapping_add(1);
                    claimed
                });
                // SAFETY: our claim ends at `end` and every claimed slot was read above.
                unsafe { self.queue.complete(end) };
                self.head_seen.set(end);
                self.done_seen.set(end);
                // The claim made room (count >= 1); only the owner pushes.
                if let Err(item) = self.push(item) {
                    injector.push(item);
                }
            }
            Claim::Busy => injector.push(item),
            Claim::Empty => {
                // Thieves emptied the queue since `push` failed; room appears once they finish.
                if let Err(item) = self.push(item) {
                    injector.push(item);
                }
            }
        }
    }

    /// Pops the newest item (LIFO worker) or the oldest (FIFO worker).
    ///
    /// One wait-free read-modify-write on the queue's shared word when the queue may hold
    /// items (none when the owner already knows it is empty); it never waits for a thief, even
    /// one copying a batch out at that moment. That one locked instruction is most of the cost
    /// of a push+pop pair; a LIFO worker built with [`Builder::pop_batch`] (or
    /// [`with_pop_batch`](Worker::with_pop_batch)) pays it once per several pops.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::new_lifo();
    /// w.push(1).unwrap();
    /// w.push(2).unwrap();
    /// assert_eq!(w.pop(), Some(2));
    /// assert_eq!(w.pop(), Some(1));
    /// assert_eq!(w.pop(), None);
    ///
    /// let f = Worker::new_fifo();
    /// f.push(1).unwrap();
    /// f.push(2).unwrap();
    /// assert_eq!(f.pop(), Some(1));
    /// ```
    #[inline(always)]
    pub fn pop(&self) -> Option<T> {
        match self.pop_batch.get() {
            1 => self.pop_lifo(),
            FIFO_POP => self.pop_fifo(),
            _ => self.pop_batched(),
        }
    }

    /// Pops the newest item if `pred` accepts it; otherwise leaves it where it was (still the
    /// newest, still stealable) and returns `None`. Also `None` if the queue is empty.
    ///
    /// Made for an owner that takes back an item it pushed itself, which is usually still on
    /// top (a fork-join's job at its join): the same one read-modify-write as [`pop`], and no
    /// pop-and-push-back when the top is something else. `pred` sees the item only once the
    /// read-modify-write has taken it out of thieves' reach; a rejected item is given back
    /// with the Release store a push makes (**P1**), so thieves see it as before. Unlike
    /// [`pop`] it makes the read-modify-write even when the owner knows the queue is empty (a
    /// caller taking back its own item rarely finds it gone).
    ///
    /// A LIFO worker with a pop batch first gives its kept items back (as
    /// [`publish`](Worker::publish)), then takes the newest item alone.
    ///
    /// If `pred` panics, the item it was shown is leaked: neither returned, given back nor
    /// dropped. The worker stays consistent (the next push reuses the slot), so the panic
    /// costs that one item and nothing else.
    ///
    /// [`pop`]: Worker::pop
    ///
    /// # Panics
    ///
    /// On a FIFO worker: its owner takes the oldest item, and cannot put that back once taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::new_lifo();
    /// w.push(1).unwrap();
    /// w.push(2).unwrap();
    /// assert_eq!(w.pop_if(|top| *top == 1), None); // 2 is on top: it stays there
    /// assert_eq!(w.pop_if(|top| *top == 2), Some(2));
    /// assert_eq!(w.pop_if(|top| *top == 1), Some(1));
    /// assert_eq!(w.pop_if(|_| true), None);
    /// ```
    #[inline(always)]
    pub fn pop_if(&self, pred: impl FnOnce(&T) -> bool) -> Option<T> {
        if self.pop_batch.get() != 1 {
            self.pop_if_prepare();
        }
        let tail = self.tail();
        // P2: Release; pairs with the Acquire loads of `packed` in `Queue::claim`/`len`.
        let old = self.queue.owner_side.packed.fetch_add(POP_ONE, Ordering::Release);
        let (old_pops, head) = crate::queue::unpack(old);
        debug_assert_eq!(old_pops, self.pop_count.get(), "only the owner changes pop_count");
        self.head_seen.set(head);
        // From the owner's copy (equal, above): one increment in place, no decoding.
        self.pop_count.set(self.pop_count.get().wrapping_add(1));
        if head != tail {
            let ring = self.ring();
            let newest = tail.wrapping_sub(1);
            // SAFETY: `head < tail` at the instant of our RMW, and no claim can pass the new
            // tail (`tail - 1`): later claims see the new pop_count. So `tail - 1` is ours; the
            // owner wrote it (program order).
            if unsafe { ring.peek(newest, pred) } {
                // SAFETY: as above; read once, and the slot is not given back.
                return Some(unsafe { ring.read(newest) });
            }
        }
        // Empty (thieves took everything), or rejected: give the count back, which puts a
        // rejected item back in thieves' range as its push did (P1: Release, in
        // `publish_count`; the slot still holds it, written by the owner).
        self.publish_count(self.push_count.get().wrapping_add(1));
        None
    }

    /// `pop_if` on a worker other than the default LIFO one: gives kept items back, or
    /// panics on a FIFO worker.
    #[cold]
    #[inline(never)]
    fn pop_if_prepare(&self) {
        assert!(
            self.pop_batch.get() != FIFO_POP,
            "Worker::pop_if on a FIFO worker: its owner takes the oldest item, which it cannot \
             put back; use `pop`"
        );
        self.publish();
    }

    /// `pop` of a LIFO worker with one RMW per pop (the default).
    #[inline(always)]
    fn pop_lifo(&self) -> Option<T> {
        let tail = self.tail();
        if tail == self.head_seen.get() {
            // head_seen <= head <= tail: definitely empty, no shared access needed.
            return None;
        }
        // P2: Release; pairs with the Acquire loads of `packed` in `Queue::claim`/`len`.
        let old = self.queue.owner_side.packed.fetch_add(POP_ONE, Ordering::Release);
        let (old_pops, head) = crate::queue::unpack(old);
        debug_assert_eq!(old_pops, self.pop_count.get(), "only the owner changes pop_count");
        self.head_seen.set(head);
        // From the owner's copy (equal, above): one increment in place, no decoding.
        self.pop_count.set(self.pop_count.get().wrapping_add(1));
        if head == tail {
            // Thieves took everything: give the count back (see `pop_batched`).
            self.publish_count(self.push_count.get().wrapping_add(1));
            return None;
        }
        // SAFETY: `head < tail` at the instant of our RMW, and no claim can pass the new tail
        // (`tail - 1`): later claims see the new pop_count. So `tail - 1` is ours; the owner
        // wrote it (program order).
        Some(unsafe { self.ring().read(tail.wrapping_sub(1)) })
    }

    /// `pop` of a FIFO worker: take the head (see "FIFO owners" in `queue`).
    #[inline(always)]
    fn pop_fifo(&self) -> Option<T> {
        // A FIFO owner's pop_count stays 0 and it keeps nothing: its tail is its push count.
        let tail = self.tail();
        if tail == self.head_seen.get() {
            // head_seen <= head <= tail: definitely empty, no shared access needed.
            return None;
        }
        // P2: Release; pairs with the Acquire loads of `packed` in `Queue::claim`/`len`. Adds
        // one to the head (the high half in a FIFO queue).
        let old = self.queue.owner_side.packed.fetch_add(POP_ONE, Ordering::Release);
        // The head is the high half of a FIFO queue's word (`Queue::view`, known flavour).
        let (head, _base) = crate::queue::unpack(old);
        self.head_seen.set(head.wrapping_add(1));
        if head == tail {
            // Thieves took everything: the head is now one past the tail. Count one phantom
            // push so they meet again; the phantom slot is below the head, where nobody reads.
            self.publish_count(self.push_count.get().wrapping_add(1));
            return None;
        }
        // SAFETY: `head < tail` at the instant of our RMW, which moved the head past it: every
        // claim after it starts above (it sees the new head), every claim before it ended at or
        // below `head` (we saw its head). So slot `head` is ours; the owner wrote it (program
        // order), and only the owner rewrites it, after this read.
        Some(unsafe { self.ring().read(head) })
    }

    /// `pop` with a pop batch above 1.
    #[inline]
    fn pop_batched(&self) -> Option<T> {
        if self.kept() != 0 {
            // A kept item: taken out of thieves' reach by an earlier pop's RMW. Handing it out
            // lowers the owner's push count, not the published one.
            self.push_count.set(self.push_count.get().wrapping_sub(1));
            // SAFETY: kept items lie above the published tail, which no claim can pass, and
            // only the owner reads them; the owner wrote them (program order). The new tail is
            // the position of the newest one.
            return Some(unsafe { self.ring().read(self.tail()) });
        }
        let tail = self.tail();
        let head_seen = self.head_seen.get();
        if tail == head_seen {
            return None;
        }
        // Take at most half of what we last knew of (at least one).
        let batch = (tail.wrapping_sub(head_seen) / 2).clamp(1, self.pop_batch.get());
        // P2: Release; pairs with the Acquire loads of `packed` in `Queue::claim`/`len`.
        let old =
            self.queue.owner_side.packed.fetch_add(u64::from(batch) * POP_ONE, Ordering::Release);
        let (old_pops, head) = crate::queue::unpack(old);
        debug_assert_eq!(old_pops, self.pop_count.get(), "only the owner changes pop_count");
        self.head_seen.set(head);
        self.pop_count.set(old_pops.wrapping_add(batch));
        // `head..tail` were the items at the instant of the RMW; the RMW moved the published
        // tail down by `batch`, and no claim can pass it: later claims see the new pop_count.
        let got = tail.wrapping_sub(head).min(batch);
        if got < batch {
            // Fewer items than the batch (thieves took the rest): the published tail is now
            // below the head, which claimers read as empty. Count the difference as pushes so
            // the published tail is the head again. (Until then claimers report Empty, which
            // is true: the owner holds every item left.)
            self.publish_count(self.push_count.get().wrapping_add(batch - got));
            if got == 0 {
                return None;
            }
        }
        // Keep `got - 1` items: the owner's count runs ahead of the published one by that much.
        self.push_count.set(self.push_count.get().wrapping_add(got - 1));
        // SAFETY: `tail - got..tail` are ours (above); the owner wrote them (program order).
        Some(unsafe { self.ring().read(tail.wrapping_sub(1)) })
    }

    /// The number of items in the queue (a snapshot: thieves may take some at any moment).
    /// Items a thief is copying out at this instant are not counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::bounded(4);
    /// w.push(()).unwrap();
    /// assert_eq!(w.len(), 1);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        // Relaxed: the owner only needs a snapshot of the head thieves moved.
        let head = self.queue.view(self.queue.owner_side.packed.load(Ordering::Relaxed)).head;
        let len = self.tail().wrapping_sub(head);
        // A FIFO owner's own pop of an empty queue is undone before `pop` returns, so the
        // head never passes the owner's tail here; the guard is for the reader's peace.
        if len > MAX_CAPACITY { 0 } else { len as usize }
    }

    /// Returns `true` if the queue holds no items (a snapshot, as [`len`](Worker::len)).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::<i32>::new();
    /// assert!(w.is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        // Relaxed, as in `len`. The owner's tail is never below the head here (`len`), so
        // equality is emptiness: no guard against a "negative" length is needed.
        let head = (self.queue.owner_side.packed.load(Ordering::Relaxed) >> self.head_shift) as u32;
        self.tail() == head
    }

    /// The number of slots of the current ring: fixed for a bounded queue; the current size
    /// for a growable one.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// assert_eq!(Worker::<u8>::bounded(256).capacity(), 256);
    /// ```
    #[inline]
    pub fn capacity(&self) -> usize {
        self.ring().capacity() as usize
    }

    /// The most items the queue will ever hold: the capacity of a bounded queue, the maximum of
    /// a growable one.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// assert_eq!(Worker::<u8>::with_max_capacity(1000).max_capacity(), 1024);
    /// ```
    #[inline]
    pub fn max_capacity(&self) -> usize {
        self.queue.max_capacity as usize
    }

    /// Shrinks a growable queue's ring to the smallest power of two (at least 64) that holds its
    /// items, returning the memory of a burst to the allocator (through the epoch collector:
    /// freed once no thief can still be reading the old ring). Does nothing for a bounded queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::new();
    /// for i in 0..10_000 {
    ///     w.push(i).unwrap();
    /// }
    /// while w.len() > 10 {
    ///     w.pop();
    /// }
    /// w.shrink_to_fit();
    /// assert_eq!(w.capacity(), 64);
    /// ```
    pub fn shrink_to_fit(&self) {
        if !self.queue.growable {
            return;
        }
        self.publish();
        // P3 (in `free_bound`): slots before `done` are free, the rest must fit in the new ring.
        let done = self.queue.free_bound();
        self.done_seen.set(done);
        let used = self.tail().wrapping_sub(done);
        let target = used.max(MIN_GROWABLE_CAPACITY).next_power_of_two();
        if target < self.ring().capacity() {
            self.resize(target);
        }
    }

    /// Makes sure `additional` more items fit without a push failing, growing a growable ring
    /// if needed. Returns the free room (which may be less than `additional` at the maximum
    /// capacity or for a bounded queue).
    pub(crate) fn reserve(&self, additional: u32) -> u32 {
        // Batches are received at the published tail.
        self.publish();
        // P3, as in `push_slow`.
        let done = self.queue.free_bound();
        self.done_seen.set(done);
        let used = self.tail().wrapping_sub(done);
        let cap = self.ring().capacity();
        if self.queue.growable && cap - used < additional {
            let wanted = used.saturating_add(additional).min(self.queue.max_capacity);
            let target = wanted.next_power_of_two();
            if target > cap {
                self.resize(target);
            }
        }
        self.ring().capacity() - used
    }

    /// Replaces the ring by one of `capacity` slots holding the same items.
    fn resize(&self, capacity: u32) {
        debug_assert_eq!(self.kept(), 0, "callers publish the kept items first");
        let old = self.buffer.get();
        let old_bytes = self.capacity().saturating_mul(size_of::<T>());
        let tail = self.tail();
        // Relaxed is enough. Every caller acquired `done` first (P3); the claim that stored that
        // `done` had set the head by its CAS before, so coherence gives `head >= done` here and
        // `tail - head <= tail - done <= capacity`. A head newer than that only means we also
        // copy the bytes of slots a thief has just claimed, which nobody reads from the new
        // ring.
        let head = self.queue.view(self.queue.owner_side.packed.load(Ordering::Relaxed)).head;
        debug_assert!(tail.wrapping_sub(head) <= capacity);
        let new = Box::new(Buffer::new(capacity));
        // SAFETY: only this thread writes slots of `old` (none is written during the copy);
        // `new` is not published yet; `tail - head <= tail - done <= capacity` (callers size
        // the ring from `done`).
        unsafe { old.as_ref().copy_to(&new, head, tail) };
        let new = NonNull::from(Box::leak(new));
        // P4: Release; pairs with the Acquire load of `buffer` in `Queue::claim`.
        self.queue.buffer.store(new.as_ptr(), Ordering::Release);
        self.buffer.set(new);

        // Retire the old ring. A thief pinned before the store above may still read it; the
        // collector frees it only after every such pin has ended.
        let free_old = move || {
            // SAFETY: `old` came from `Box::into_raw`/`Box::leak`, is no longer reachable from
            // the queue (replaced above), and the collector runs this exactly once.
            drop(unsafe { Box::from_raw(old.as_ptr()) });
        };
        let guard = crossbeam_epoch::pin();
        // SAFETY: `free_old` captures only `old` (by move) and touches nothing on our stack; it
        // may run on another thread, which is fine because dropping a ring frees memory
        // without reading or dropping any `T`.
        unsafe { guard.defer_unchecked(free_old) };
        if old_bytes >= FLUSH_BYTES {
            guard.flush();
        }
    }

    /// Receives `count` items from a batch source (a steal or the injector) into the tail, in
    /// the order `next` yields them, then publishes them all with one store.
    ///
    /// # Safety
    ///
    /// * `count` items fit: `count <= reserve(..)`'s answer, with no push in between.
    /// * `next` yields `count` items, the `i`-th item going to position `tail + order(i)`,
    ///   where `order` is the identity if `reversed` is false, and `count - 1 - i` otherwise.
    pub(crate) unsafe fn receive_batch(
        &self,
        count: u32,
        reversed: bool,
        mut next: impl FnMut() -> T,
    ) {
        if count == 0 {
            return;
        }
        debug_assert_eq!(self.kept(), 0, "reserve() publishes the kept items");
        let tail = self.tail();
        let ring = self.ring();
        for i in 0..count {
            let offset = if reversed { count - 1 - i } else { i };
            // SAFETY: the caller reserved `count` free slots after `tail` (contract); free
            // slots are written only by the owner, which we are.
            unsafe { ring.write(tail.wrapping_add(offset), next()) };
        }
        let push_count = self.push_count.get().wrapping_add(count);
        // P1: Release; publishes the whole batch.
        self.queue.owner_side.push_count.store(push_count, Ordering::Release);
        self.push_count.set(push_count);
    }
}

impl<T> Drop for Worker<T> {
    fn drop(&mut self) {
        // The queue drops the items in its published range when its last handle goes.
        self.publish();
    }
}

impl<T> Default for Worker<T> {
    fn default() -> Worker<T> {
        Worker::new()
    }
}

impl<T> fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("growable", &self.queue.growable)
            .field("fifo", &self.queue.fifo)
            .finish_non_exhaustive()
    }
}

/// Options for a [`Worker`]: flavour, mode and pop batch, from [`Worker::builder`].
///
/// The default is a growable LIFO worker with one read-modify-write per pop, which is what
/// [`Worker::new_lifo`] builds.
///
/// # Examples
///
/// ```
/// use purloin_deque::Worker;
///
/// // A scheduler's local run queue: bounded, LIFO, and up to 4 items per pop RMW.
/// let local: Worker<usize> = Worker::builder().bounded(256).pop_batch(4).build();
/// for i in 0..8 {
///     local.push(i).unwrap();
/// }
/// assert_eq!(local.pop(), Some(7));
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder {
    fifo: bool,
    bounded: Option<usize>,
    max_capacity: Option<usize>,
    pop_batch: usize,
}

impl Default for Builder {
    /// The same as [`Worker::builder`]: growable, LIFO, one read-modify-write per pop.
    fn default() -> Builder {
        DEFAULT_BUILDER
    }
}

impl Builder {
    /// The owner pops the oldest item (crossbeam's `new_fifo`).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::builder().fifo().bounded(8).build();
    /// w.push(1).unwrap();
    /// w.push(2).unwrap();
    /// assert_eq!(w.pop(), Some(1));
    /// ```
    pub fn fifo(mut self) -> Builder {
        self.fifo = true;
        self
    }

    /// The owner pops the newest item (the default; crossbeam's `new_lifo`).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::builder().lifo().build();
    /// w.push(1).unwrap();
    /// w.push(2).unwrap();
    /// assert_eq!(w.pop(), Some(2));
    /// ```
    pub fn lifo(mut self) -> Builder {
        self.fifo = false;
        self
    }

    /// A fixed ring of `capacity` slots (rounded up to a power of two), as
    /// [`Worker::bounded`]. Overrides [`max_capacity`](Builder::max_capacity).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w: Worker<u8> = Worker::builder().bounded(100).build();
    /// assert_eq!(w.capacity(), 128);
    /// ```
    pub fn bounded(mut self, capacity: usize) -> Builder {
        self.bounded = Some(capacity);
        self
    }

    /// A growable ring that never holds more than `max_capacity` items (rounded up to a power
    /// of two), as [`Worker::with_max_capacity`].
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w: Worker<u8> = Worker::builder().max_capacity(3).build();
    /// assert_eq!(w.max_capacity(), 4);
    /// ```
    pub fn max_capacity(mut self, max_capacity: usize) -> Builder {
        self.max_capacity = Some(max_capacity);
        self
    }

    /// Up to `n` items per pop read-modify-write, as [`Worker::with_pop_batch`] (LIFO only;
    /// a FIFO worker ignores it).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::builder().bounded(64).pop_batch(4).build();
    /// for i in 0..8 {
    ///     w.push(i).unwrap();
    /// }
    /// assert_eq!(w.pop(), Some(7)); // 6, 5, 4 are now the owner's, out of thieves' reach
    /// assert_eq!(w.stealer().len(), 4);
    /// ```
    pub fn pop_batch(mut self, n: usize) -> Builder {
        self.pop_batch = n;
        self
    }

    /// Creates the worker.
    ///
    /// # Panics
    ///
    /// Panics if a capacity is 0 or greater than 2^30, or the pop batch is 0 or greater than
    /// 2^30.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w: Worker<String> = Worker::builder().build();
    /// assert!(!w.is_fifo());
    /// ```
    pub fn build<T>(self) -> Worker<T> {
        let queue = match (self.bounded, self.max_capacity) {
            (Some(capacity), _) => {
                let cap = checked_capacity(capacity, "Worker::bounded");
                Queue::new(cap, cap, false, self.fifo)
            }
            (None, Some(max)) => {
                let max = checked_capacity(max, "Worker::with_max_capacity");
                Queue::new(MIN_GROWABLE_CAPACITY.min(max), max, true, self.fifo)
            }
            (None, None) => Queue::new(MIN_GROWABLE_CAPACITY, MAX_CAPACITY, true, self.fifo),
        };
        let worker = Worker::from_queue(queue);
        if self.pop_batch == 1 { worker } else { worker.with_pop_batch(self.pop_batch) }
    }
}

/// Validates a requested capacity and rounds it up to a power of two.
fn checked_capacity(requested: usize, what: &str) -> u32 {
    assert!(
        requested != 0,
        "{what}(0): a queue needs room for at least one item; pass a capacity of 1 or more"
    );
    assert!(
        requested <= MAX_CAPACITY as usize,
        "{what}({requested}): the largest supported capacity is 2^30 ({MAX_CAPACITY}); \
         pass a smaller capacity, or use Worker::new() and let the ring grow"
    );
    (requested as u32).next_power_of_two()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::queue::{pack, unpack};

    #[test]
    fn pack_round_trips() {
        assert_eq!(unpack(pack(7, 9)), (7, 9));
        assert_eq!(unpack(pack(u32::MAX, 0).wrapping_add(POP_ONE)), (0, 0));
    }
}
