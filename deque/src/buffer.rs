//! The ring of slots behind a [`Worker`](crate::Worker): a power-of-two array indexed by
//! wrapping `u32` positions. It knows nothing about who may touch which slot; the protocol in
//! [`queue`](crate::queue) decides that, and every accessor here is `unsafe` with the
//! obligation spelled out.

use core::mem::MaybeUninit;
use core::ptr;

use crate::sync::{UnsafeCell, mark_freed};

type Slot<T> = UnsafeCell<MaybeUninit<T>>;

/// A power-of-two ring of possibly-uninitialised slots. Dropping it frees the memory but never
/// drops an item: which slots hold live items is the queue's knowledge, not the buffer's.
pub(crate) struct Buffer<T> {
    slots: Box<[Slot<T>]>,
    /// `capacity - 1`; positions map to slots with `position & mask`.
    mask: u32,
}

impl<T> Buffer<T> {
    /// Allocates a ring of `capacity` slots, all uninitialised.
    ///
    /// # Panics
    ///
    /// Panics (a broken internal invariant) if `capacity` is not a power of two.
    pub(crate) fn new(capacity: u32) -> Buffer<T> {
        assert!(capacity.is_power_of_two(), "ring capacity {capacity} is not a power of two");
        let slots = (0..capacity).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
        Buffer { slots, mask: capacity - 1 }
    }

    /// The number of slots.
    #[inline(always)]
    pub(crate) fn capacity(&self) -> u32 {
        self.mask.wrapping_add(1)
    }

    /// `capacity - 1`.
    #[inline(always)]
    pub(crate) fn mask(&self) -> u32 {
        self.mask
    }

    #[inline(always)]
    fn slot(&self, position: u32) -> &Slot<T> {
        // SAFETY: `position & mask < capacity == slots.len()`: `mask` was set from the slice
        // length in `new` and neither changes afterwards.
        unsafe { self.slots.get_unchecked((position & self.mask) as usize) }
    }

    /// Moves `item` into the slot of `position`, overwriting (not dropping) what was there.
    ///
    /// # Safety
    ///
    /// * The caller has the exclusive right to this slot: no other thread reads or writes it
    ///   until the caller publishes it (with a Release store that the reader acquires).
    #[inline(always)]
    pub(crate) unsafe fn write(&self, position: u32, item: T) {
        self.slot(position).with_mut(|p| {
            // SAFETY: the caller has exclusive access to the slot (this function's contract),
            // and `p` points into the live allocation of `self.slots`.
            unsafe { ptr::write(p, MaybeUninit::new(item)) }
        });
    }

    /// Moves the item out of the slot of `position`, leaving the slot logically uninitialised.
    ///
    /// # Safety
    ///
    /// * The slot holds an initialised item whose write happens-before this call.
    /// * The caller has claimed that item: no other thread reads it as an item, and nobody
    ///   writes the slot until the caller releases it.
    #[inline(always)]
    pub(crate) unsafe fn read(&self, position: u32) -> T {
        self.slot(position).with(|p| {
            // SAFETY: initialised and claimed by the caller (this function's contract).
            unsafe { ptr::read(p).assume_init() }
        })
    }

    /// Calls `f` with a reference to the item in the slot of `position`, leaving it there.
    ///
    /// # Safety
    ///
    /// * The slot holds an initialised item whose write happens-before this call.
    /// * The caller has claimed that item: no other thread reads it as an item, and nobody
    ///   writes the slot, until `f` returns.
    #[inline(always)]
    pub(crate) unsafe fn peek<R>(&self, position: u32, f: impl FnOnce(&T) -> R) -> R {
        self.slot(position).with(|p| {
            // SAFETY: initialised and claimed by the caller (this function's contract), so
            // nothing moves or drops the item while `f` borrows it.
            f(unsafe { (*p).assume_init_ref() })
        })
    }

    /// Copies the bytes of the slots `from..to` (wrapping positions) into the same positions of
    /// `dest`, without moving ownership of anything: whichever copy is later read as an item is
    /// decided by the queue protocol, and the other copy is just bytes that are never used.
    ///
    /// # Safety
    ///
    /// * No thread writes these slots of `self` during the copy (readers are fine).
    /// * The caller has the exclusive right to these slots of `dest` until it publishes `dest`.
    /// * `to - from` (wrapping) is at most `dest.capacity()`.
    pub(crate) unsafe fn copy_to(&self, dest: &Buffer<T>, from: u32, to: u32) {
        let mut position = from;
        while position != to {
            self.slot(position).with(|src| {
                dest.slot(position).with_mut(|dst| {
                    // SAFETY: `src` is not written concurrently and `dst` is exclusively ours
                    // (this function's contract); the two are distinct allocations.
                    unsafe { ptr::copy_nonoverlapping(src, dst, 1) }
                })
            });
            position = position.wrapping_add(1);
        }
    }
}

impl<T> Drop for Buffer<T> {
    fn drop(&mut self) {
        // Items are never dropped here (see the type's docs). Under loom, touch every slot so a
        // thief still reading this buffer without a happens-before edge to its reclamation is
        // reported as a data race instead of going unnoticed.
        mark_freed(&self.slots);
    }
}
