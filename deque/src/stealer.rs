//! [`Stealer`]: the thieves' handle, built on the claim of [`queue`](crate::queue).
//!
//! # Memory ordering
//!
//! A steal is one claim: the Acquire side of **P1** (`push_count`), **P2** (`packed`) and
//! **P4** (`buffer`), then the Release side of **P3** (`done`) once the claimed slots are read.
//! In a growable queue the thief holds an epoch guard from before its `buffer` load until after
//! its last slot read, so the ring cannot be freed under it. Moving items into the thief's own
//! `Worker` is that worker's owner publishing a batch (P1 of the destination queue).

use core::fmt;

use crate::queue::{Claim, MAX_CAPACITY, Queue};
use crate::steal::Steal;
use crate::sync::Arc;
use crate::worker::Worker;

/// The most items [`Stealer::steal_half_into`] moves in one call (Go's run queue steals at most
/// half of 256).
const STEAL_HALF_LIMIT: usize = 128;

/// The most items the crossbeam-named batch steals move when no limit is given (crossbeam's
/// `MAX_BATCH`).
pub(crate) const DEFAULT_BATCH: usize = 32;

/// A handle that steals the oldest items of a [`Worker`]'s queue, from any thread.
///
/// Stealers are `Clone + Send + Sync`. Every steal, single or batch, is one CAS on the victim
/// followed by moving the claimed items out.
///
/// # When a steal returns `Retry`
///
/// Exactly one case: another steal from the same queue (by any thief, or by the owner moving
/// half of a full bounded queue to an injector) has claimed its items and not yet finished
/// moving them out, as seen by this call when it looked. The call returns at once instead of
/// waiting; nothing was taken. The window is the copy of at most one batch (a few hundred
/// words at most; one word for a single steal), so trying another queue and coming back
/// later finds it closed. The owner's pushes and pops never cause `Retry` (a steal that loses
/// a race to them simply retries its CAS internally, which is lock-free: it fails only
/// because the owner made progress), and a queue with no other thief never returns it.
///
/// crossbeam-deque's steals return `Retry` in more cases (any lost CAS, including one lost to
/// the owner's pop), but not this one: there, overlapping steals both read the slots before
/// claiming them, which is a data race on the item for any `T` that crossbeam documents as
/// technically undefined behaviour.
///
/// Why this one case stays: a claim ends with one plain store of `done`, which tells the owner
/// which slots it may reuse. Letting a second claim (even of one item) start while a first is
/// copying means the two can finish in either order, so the finishing step would have to
/// become a read-modify-write that merges them (or per-slot state the owner checks on every
/// push): a second locked instruction on every steal, including every steal-half, whose only
/// locked instruction today is its claim CAS. The window is one batch copy long, and a
/// scheduler has other victims to try meanwhile.
///
/// # Examples
///
/// ```
/// use purloin_deque::{Steal, Worker};
///
/// let w = Worker::bounded(8);
/// for i in 0..6 {
///     w.push(i).unwrap();
/// }
/// let s = w.stealer();
/// let mine = Worker::bounded(8);
/// // Half of the 6 items: 0, 1, 2. Item 2 is returned, 0 and 1 land in `mine`.
/// assert_eq!(s.steal_half_into(&mine), Steal::Success(2));
/// assert_eq!(mine.len(), 2);
/// assert_eq!(w.len(), 3);
/// ```
pub struct Stealer<T> {
    pub(crate) queue: Arc<Queue<T>>,
}

impl<T> Stealer<T> {
    /// Pins the epoch if the queue's ring can be replaced (growable mode).
    #[inline]
    fn guard(&self) -> Option<crossbeam_epoch::Guard> {
        self.queue.growable.then(crossbeam_epoch::pin)
    }

    /// Steals the oldest item.
    ///
    /// Returns [`Steal::Retry`] only if another steal from this queue is in flight (see
    /// ["When a steal returns `Retry`"](Stealer#when-a-steal-returns-retry)); `Empty` only if
    /// the queue was empty at an instant during the call.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let w = Worker::new();
    /// w.push(1).unwrap();
    /// w.push(2).unwrap();
    /// assert_eq!(w.stealer().steal(), Steal::Success(1));
    /// ```
    pub fn steal(&self) -> Steal<T> {
        let _guard = self.guard();
        // SAFETY: a growable queue is read under `_guard`, held until the end of this function;
        // we read exactly the one claimed slot and then complete the claim.
        match unsafe { self.queue.claim(|_| 1) } {
            Claim::Empty => Steal::Empty,
            Claim::Busy => Steal::Retry,
            Claim::Claimed { head, buffer, .. } => {
                // SAFETY: the ring is alive (queue alive; retired rings are kept by our
                // guard), and slot `head` is claimed by us, its write visible through P1/P4.
                let item = unsafe { buffer.as_ref().read(head) };
                // SAFETY: our claim is `head..head+1` and its one slot was read.
                unsafe { self.queue.complete(head.wrapping_add(1)) };
                Steal::Success(item)
            }
        }
    }

    /// Steals about half of the queue's items (rounded up, at most 128) with **one CAS on the
    /// victim**, moves all but one into `dest`, and returns one of them to run now.
    ///
    /// The batch is also bounded by `dest`'s free room plus one: a full bounded `dest` still
    /// gets one item, returned directly. A growable `dest` grows first if it needs to.
    ///
    /// Order, as in crossbeam: the returned item is the one the victim's owner would have
    /// popped first among the batch (the newest for a LIFO victim, the oldest for a FIFO one),
    /// and `dest`'s owner then pops the rest in that same order, whichever flavour `dest` is.
    ///
    /// Returns [`Steal::Retry`] if another steal from this queue is in flight. If `dest` is this
    /// stealer's own queue, this is [`steal`](Stealer::steal).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let victim = Worker::new();
    /// for i in 0..10 {
    ///     victim.push(i).unwrap();
    /// }
    /// let thief = Worker::bounded(16);
    /// let s = victim.stealer();
    /// assert_eq!(s.steal_half_into(&thief), Steal::Success(4));
    /// assert_eq!(thief.pop(), Some(3));
    /// assert_eq!(victim.len(), 5);
    /// ```
    pub fn steal_half_into(&self, dest: &Worker<T>) -> Steal<T> {
        self.steal_half_into_with_limit(dest, STEAL_HALF_LIMIT)
    }

    /// [`steal_half_into`](Stealer::steal_half_into) taking at most `limit` items (including
    /// the returned one); a `limit` of 0 is treated as 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let victim = Worker::new();
    /// for i in 0..100 {
    ///     victim.push(i).unwrap();
    /// }
    /// let thief = Worker::new();
    /// assert_eq!(victim.stealer().steal_half_into_with_limit(&thief, 4), Steal::Success(3));
    /// assert_eq!(thief.len(), 3);
    /// ```
    pub fn steal_half_into_with_limit(&self, dest: &Worker<T>, limit: usize) -> Steal<T> {
        if Arc::ptr_eq(&self.queue, &dest.queue) {
            return self.steal();
        }
        self.steal_into(dest, limit, true)
            .map(|item| item.expect("a batch-and-pop returns an item"))
    }

    /// Steals about half of the queue's items (rounded up, at most 32) with one CAS and moves
    /// them all into `dest` (crossbeam's `Stealer::steal_batch`).
    ///
    /// See [`steal_batch_with_limit`](Stealer::steal_batch_with_limit) for the details.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let victim = Worker::new_fifo();
    /// for i in 1..=4 {
    ///     victim.push(i).unwrap();
    /// }
    /// let mine = Worker::new_fifo();
    /// assert_eq!(victim.stealer().steal_batch(&mine), Steal::Success(()));
    /// assert_eq!(mine.pop(), Some(1));
    /// assert_eq!(mine.pop(), Some(2));
    /// assert_eq!(mine.pop(), None);
    /// ```
    pub fn steal_batch(&self, dest: &Worker<T>) -> Steal<()> {
        self.steal_batch_with_limit(dest, DEFAULT_BATCH)
    }

    /// Steals about half of the queue's items (rounded up), at most `limit`, with one CAS, and
    /// moves them all into `dest` (crossbeam's `Stealer::steal_batch_with_limit`).
    ///
    /// * **How many:** `min(ceil(len / 2), limit)` of the `len` items seen at the claim, as in
    ///   crossbeam; also at most `dest`'s free room (a growable `dest` grows first, a bounded
    ///   one may be full). crossbeam takes the batch one CAS per item from a LIFO victim and may
    ///   stop early; here it is always one CAS, for both flavours.
    /// * **Order:** `dest`'s owner pops the stolen items in the order the victim's owner would
    ///   have (oldest first from a FIFO victim, newest first from a LIFO one), as in crossbeam.
    /// * **`Retry`:** only while another steal from this queue is in flight (see
    ///   ["When a steal returns `Retry`"](Stealer#when-a-steal-returns-retry)), or if `dest` is
    ///   a full bounded worker (nothing can move until its owner pops; crossbeam's workers are
    ///   never full).
    /// * If `dest` is this stealer's own queue, nothing moves: `Success(())` if it holds items,
    ///   else `Empty` (as in crossbeam).
    ///
    /// # Panics
    ///
    /// Panics if `limit` is 0 (as crossbeam does).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let victim = Worker::new_lifo();
    /// for i in 1..=6 {
    ///     victim.push(i).unwrap();
    /// }
    /// let mine = Worker::new_lifo();
    /// assert_eq!(victim.stealer().steal_batch_with_limit(&mine, 2), Steal::Success(()));
    /// assert_eq!(mine.pop(), Some(2)); // newest first, as the victim's owner would
    /// assert_eq!(mine.pop(), Some(1));
    /// assert_eq!(mine.pop(), None);
    /// ```
    pub fn steal_batch_with_limit(&self, dest: &Worker<T>, limit: usize) -> Steal<()> {
        assert_limit(limit, "Stealer::steal_batch_with_limit");
        if Arc::ptr_eq(&self.queue, &dest.queue) {
            return if dest.is_empty() { Steal::Empty } else { Steal::Success(()) };
        }
        self.steal_into(dest, limit, false).map(|_| ())
    }

    /// Steals about half of the queue's items (rounded up, at most 32) with one CAS, moves all
    /// but one into `dest` and returns that one (crossbeam's `Stealer::steal_batch_and_pop`).
    ///
    /// See [`steal_batch_with_limit_and_pop`](Stealer::steal_batch_with_limit_and_pop).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let victim = Worker::new_fifo();
    /// for i in 1..=6 {
    ///     victim.push(i).unwrap();
    /// }
    /// let mine = Worker::new_fifo();
    /// assert_eq!(victim.stealer().steal_batch_and_pop(&mine), Steal::Success(1));
    /// assert_eq!(mine.pop(), Some(2));
    /// assert_eq!(mine.pop(), Some(3));
    /// assert_eq!(mine.pop(), None);
    /// ```
    pub fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
        self.steal_batch_with_limit_and_pop(dest, DEFAULT_BATCH)
    }

    /// Steals about half of the queue's items (rounded up), at most `limit` including the one
    /// returned, with one CAS; moves all but one into `dest` and returns that one (crossbeam's
    /// `Stealer::steal_batch_with_limit_and_pop`).
    ///
    /// * **How many:** `1 + min((len - 1) / 2, limit - 1)` of the `len` items seen at the claim
    ///   (that is `min(ceil(len / 2), limit)`), as in crossbeam; the part that goes into `dest`
    ///   is also bounded by its free room, so a full bounded `dest` still gets the one item
    ///   returned.
    /// * **Which one is returned, and order:** the item the victim's owner would have popped
    ///   first (the oldest from a FIFO victim, the newest from a LIFO one), and `dest`'s owner
    ///   pops the rest in that same order, as in crossbeam.
    /// * **`Retry`:** only while another steal from this queue is in flight (see
    ///   ["When a steal returns `Retry`"](Stealer#when-a-steal-returns-retry)).
    /// * If `dest` is this stealer's own queue, this is `dest.pop()` (as in crossbeam).
    ///
    /// [`steal_half_into_with_limit`](Stealer::steal_half_into_with_limit) is the same steal
    /// with a default limit of 128, a `limit` of 0 read as 1, and a plain `steal` when `dest`
    /// is the victim.
    ///
    /// # Panics
    ///
    /// Panics if `limit` is 0 (as crossbeam does).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::{Steal, Worker};
    ///
    /// let victim = Worker::new_lifo();
    /// for i in 1..=6 {
    ///     victim.push(i).unwrap();
    /// }
    /// let mine = Worker::new_fifo();
    /// let s = victim.stealer();
    /// assert_eq!(s.steal_batch_with_limit_and_pop(&mine, 2), Steal::Success(2));
    /// assert_eq!(mine.pop(), Some(1));
    /// assert_eq!(mine.pop(), None);
    /// ```
    pub fn steal_batch_with_limit_and_pop(&self, dest: &Worker<T>, limit: usize) -> Steal<T> {
        assert_limit(limit, "Stealer::steal_batch_with_limit_and_pop");
        if Arc::ptr_eq(&self.queue, &dest.queue) {
            return dest.pop().map_or(Steal::Empty, Steal::Success);
        }
        self.steal_half_into_with_limit(dest, limit)
    }

    /// The one batch steal behind every `steal_batch*` and `steal_half*`: claims
    /// `min(ceil(avail / 2), limit)` items (and no more than fit) with one CAS, moves them into
    /// `dest` in the victim owner's pop order and, if `pop_one`, keeps the first of that order
    /// out and returns it. `dest` is not this stealer's queue.
    #[inline]
    fn steal_into(&self, dest: &Worker<T>, limit: usize, pop_one: bool) -> Steal<Option<T>> {
        let limit = limit.clamp(1, MAX_CAPACITY as usize) as u32;
        // Size the batch from a snapshot and make room in `dest` before claiming, so nothing
        // slow (an allocation) happens while other thieves are held off.
        let len = self.queue.len();
        let want = (len - len / 2).min(limit);
        let kept = u32::from(pop_one);
        let room = dest.reserve(want.saturating_sub(kept));
        if room == 0 && !pop_one {
            // A full bounded `dest`: nothing can move until its owner pops.
            return if len == 0 { Steal::Empty } else { Steal::Retry };
        }
        let fit = room.saturating_add(kept);
        let _guard = self.guard();
        // SAFETY: a growable victim is read under `_guard`, held until the end of this
        // function; we read exactly the claimed slots below, then complete the claim.
        let claim = unsafe { self.queue.claim(|avail| (avail - avail / 2).min(limit).min(fit)) };
        let Claim::Claimed { head, count, buffer } = claim else {
            return if matches!(claim, Claim::Busy) { Steal::Retry } else { Steal::Empty };
        };
        // SAFETY: the ring is alive (queue alive; retired rings kept by our guard).
        let ring = unsafe { buffer.as_ref() };
        let end = head.wrapping_add(count);
        // The victim owner's pop order starts at the head (FIFO) or the end (LIFO) of the
        // claimed range; `first` is the position of the item returned, if any, and the batch
        // is the rest, read from `from` upwards in claim order.
        let victim_fifo = self.queue.fifo;
        let (first, from, batch) = match (pop_one, victim_fifo) {
            (false, _) => (None, head, count),
            (true, true) => (Some(head), head.wrapping_add(1), count - 1),
            (true, false) => (Some(end.wrapping_sub(1)), head, count - 1),
        };
        let mut position = from;
        let next = || {
            // SAFETY: `from..from+batch` lie inside our claim and exclude `first`; each is
            // read once, in order (`receive_batch` calls this exactly `batch` times).
            let item = unsafe { ring.read(position) };
            position = position.wrapping_add(1);
            item
        };
        // Claim order is oldest first. `dest` must pop them in the victim owner's order:
        // claim order if the victim is FIFO, newest first if it is LIFO. A FIFO `dest` pops in
        // position order and a LIFO one in reverse, hence the reversal when they differ.
        let reversed = victim_fifo != dest.is_fifo();
        // SAFETY: `batch <= room` free slots are reserved in `dest` (no push in between:
        // `dest` is ours); `next` yields exactly `batch` items.
        unsafe { dest.receive_batch(batch, reversed, next) };
        // SAFETY: `first` is inside our claim and was not read by the batch above.
        let item = first.map(|position| unsafe { ring.read(position) });
        // SAFETY: our claim ends at `end`, and every slot of it was read.
        unsafe { self.queue.complete(end) };
        Steal::Success(item)
    }

    /// The number of items available to steal: a racy snapshot (the owner and other thieves
    /// change it at any time). Items a thief is copying out right now are not counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::bounded(4);
    /// w.push(1).unwrap();
    /// assert_eq!(w.stealer().len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.queue.len() as usize
    }

    /// Returns `true` if there is nothing to steal (a racy snapshot, as [`len`](Stealer::len)).
    ///
    /// A `true` is reliable in one sense a scheduler needs: the queue was empty at some instant
    /// during the call, after everything that happened-before the call (so a push followed by
    /// a `fence(SeqCst)` on one thread and a `fence(SeqCst)` then `is_empty` on another cannot
    /// both miss each other).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_deque::Worker;
    ///
    /// let w = Worker::<u8>::bounded(4);
    /// assert!(w.stealer().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Panics with crossbeam's condition on a batch limit, naming the fix.
pub(crate) fn assert_limit(limit: usize, what: &str) {
    assert!(
        limit != 0,
        "{what}(dest, 0): a batch takes at least one item; pass a limit of 1 or more"
    );
}

impl<T> Clone for Stealer<T> {
    fn clone(&self) -> Stealer<T> {
        Stealer { queue: self.queue.clone() }
    }
}

impl<T> fmt::Debug for Stealer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stealer").field("len", &self.len()).finish_non_exhaustive()
    }
}
