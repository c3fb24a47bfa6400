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

/// A handle that steals the oldest items of a [`Worker`]'s queue, from any thread.
///
/// Stealers are `Clone + Send + Sync`. One steal at a time copies out of a given queue; a thief
/// that arrives while another is copying gets [`Steal::Retry`] at once (it never waits) and
/// should try another queue.
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
    /// Returns [`Steal::Retry`] if another steal from this queue is in flight.
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
    /// victim**, moves all but one into `dest`, and returns the newest of them to run now.
    ///
    /// The batch is also bounded by `dest`'s free room plus one: a full bounded `dest` still
    /// gets one item, returned directly. A growable `dest` grows first if it needs to. Items
    /// keep their order: the oldest stolen item lands deepest in `dest`.
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
        let limit = limit.clamp(1, MAX_CAPACITY as usize) as u32;
        // Size the batch from a snapshot and make room in `dest` before claiming, so nothing
        // slow (an allocation) happens while other thieves are held off.
        let len = self.queue.len();
        let want = (len - len / 2).min(limit);
        let room = dest.reserve(want.saturating_sub(1));
        let _guard = self.guard();
        // SAFETY: a growable victim is read under `_guard`, held until the end of this
        // function; we read exactly the claimed slots below, then complete the claim.
        let claim = unsafe {
            self.queue.claim(|avail| (avail - avail / 2).min(limit).min(room.saturating_add(1)))
        };
        match claim {
            Claim::Empty => Steal::Empty,
            Claim::Busy => Steal::Retry,
            Claim::Claimed { head, count, buffer } => {
                // SAFETY: the ring is alive (queue alive; retired rings kept by our guard).
                let ring = unsafe { buffer.as_ref() };
                let mut position = head;
                let next = || {
                    // SAFETY: `head..head+count-1` are claimed by us; each is read once, in
                    // order (`receive_batch` calls this exactly `count - 1` times).
                    let item = unsafe { ring.read(position) };
                    position = position.wrapping_add(1);
                    item
                };
                // SAFETY: `count - 1 <= room` free slots are reserved in `dest` (no push in
                // between: `dest` is ours); `next` yields exactly `count - 1` items.
                unsafe { dest.receive_batch(count - 1, false, next) };
                // SAFETY: the last claimed slot is ours and not read yet.
                let item = unsafe { ring.read(position) };
                // SAFETY: our claim ends at `head + count`, and every slot of it was read.
                unsafe { self.queue.complete(head.wrapping_add(count)) };
                Steal::Success(item)
            }
        }
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
