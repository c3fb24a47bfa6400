//! The unbounded flavor: a linked list of blocks of slots (the segmented queue of
//! crossbeam-channel's `list` flavor and Vyukov's unbounded queues), lock-free on both sides,
//! with the green-aware waiter list of `waiters.rs` for receivers.
//!
//! Positions count slots: `index >> SHIFT` is the position, `position % LAP` the offset in the
//! current block. Offsets `0..BLOCK_CAP` are slots; offset `BLOCK_CAP` is a sentinel meaning
//! "the next block is being installed" (the thread that took the last slot installs it, and
//! the others wait). The low bit of `tail.index` marks disconnection; the low bit of
//! `head.index` records that the head block is known to have a successor (so the receiver
//! does not have to check `tail` for emptiness).
//!
//! A slot's `state` has `WRITE` (the message is there), `READ` (it was taken) and `DESTROY`
//! (the block is being freed and this slot's reader must finish freeing it). The reader of a
//! block's last slot starts freeing the block; a reader still busy with an earlier slot takes
//! over when it finishes, so a block is freed exactly once, after its last read.
//!
//! # Memory ordering
//!
//! The guarantee: each message is received exactly once, the receiver sees everything its
//! sender did before the send, and a block is freed only after every access to it.
//!
//! - (L1) A sender's Release `fetch_or(WRITE)` pairs with the reader's Acquire load that sees
//!   `WRITE` (`wait_write`): the message is written before it is read.
//! - (L2) Installing a block: the installer's Release stores of `tail.block`, `tail.index`,
//!   `head.block` (first block) and the previous block's `next` pair with the Acquire loads of
//!   senders and receivers that then dereference the new block.
//! - (L3) Freeing: `fetch_or(READ)` and `fetch_or(DESTROY)` are AcqRel on the same slot word,
//!   so exactly one of the reader and the destroyer sees the other's bit, and whoever frees
//!   the block has acquired every earlier reader's accesses.
//! - (L4) The CASes on the indices only pick slot owners (AcqRel). The emptiness check loads
//!   `tail` after a `fence(SeqCst)`; a stale answer is tolerated by the blocking protocol (N1
//!   in `waiters.rs`).

use core::marker::PhantomData;
use core::mem::MaybeUninit;
use std::time::Instant;

use purloin_sched::WaitKind;
use purloin_sched::spin::{Padded, Spin};

use super::array::StoreOnDrop;
use super::error::{RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use super::select::Token;
use super::waiters::{Blocked, Waiters, block};
use crate::diagnostics::wait_info;
use crate::loom::{AtomicPtr, AtomicUsize, Ordering, UnsafeCell, fence};

// Slot states.
const WRITE: usize = 1;
const READ: usize = 2;
const DESTROY: usize = 4;

/// Positions per block, including the sentinel offset (smaller under loom so models cross
/// block boundaries).
const LAP: usize = if cfg!(loom) { 3 } else { 32 };
/// Messages per block.
const BLOCK_CAP: usize = LAP - 1;
/// Index bits used for flags.
const SHIFT: usize = 1;
/// `tail.index`: disconnected. `head.index`: the head block has a successor.
const MARK_BIT: usize = 1;

struct Slot<T> {
    msg: UnsafeCell<MaybeUninit<T>>,
    state: AtomicUsize,
}

impl<T> Slot<T> {
    /// Waits until the slot's message is written (its sender claimed it and is copying).
    fn wait_write(&self) {
        let mut backoff = Spin::backoff();
        // L1: Acquire pairs with the sender's Release `fetch_or(WRITE)`.
        while self.state.load(Ordering::Acquire) & WRITE == 0 {
            backoff.step();
        }
    }
}

struct Block<T> {
    next: AtomicPtr<Block<T>>,
    slots: [Slot<T>; BLOCK_CAP],
}

impl<T> Block<T> {
    /// A new empty block, allocated directly on the heap (it can be large).
    fn new() -> Box<Block<T>> {
        #[cfg(not(loom))]
        {
            let layout = std::alloc::Layout::new::<Block<T>>();
            // SAFETY: the layout is not zero-sized (a block holds at least its `next` pointer).
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Block<T>>();
            if ptr.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            // SAFETY: allocated with `Block`'s layout by the global allocator, as `Box` does;
            // an all-zero `Block` is valid (null `next`, slot states 0, uninitialised messages:
            // core's atomics are plain integers).
            unsafe { Box::from_raw(ptr) }
        }
        #[cfg(loom)]
        {
            Box::new(Block {
                next: AtomicPtr::new(core::ptr::null_mut()),
                slots: core::array::from_fn(|_| Slot {
                    msg: UnsafeCell::new(MaybeUninit::uninit()),
                    state: AtomicUsize::new(0),
                }),
            })
        }
    }

    /// Waits until the next block is installed.
    fn wait_next(&self) -> *mut Block<T> {
        let mut backoff = Spin::backoff();
        loop {
            // L2: Acquire pairs with the installer's Release store.
            let next = self.next.load(Ordering::Acquire);
            if !next.is_null() {
                return next;
            }
            backoff.step();
        }
    }

    /// Frees the block once every slot from `start` on has been read (L3); if a reader is
    /// still busy with one, marks it `DESTROY` and leaves the freeing to that reader.
    ///
    /// # Safety
    ///
    /// - `this` is a block of the list whose slots before `start` were all read, and the
    ///   caller is the reader of the last slot or of slot `start - 1` (which saw `DESTROY`).
    unsafe fn destroy(this: *mut Block<T>, start: usize) {
        // The last slot's reader started the destruction, so it needs no READ mark.
        for i in start..BLOCK_CAP - 1 {
            // SAFETY: the block is alive until freed below (only one thread frees it, L3).
            let slot = unsafe { (*this).slots.get_unchecked(i) };
            // L3: Acquire/AcqRel; if the reader has not set READ yet, it will see DESTROY.
            if slot.state.load(Ordering::Acquire) & READ == 0
                && slot.state.fetch_or(DESTROY, Ordering::AcqRel) & READ == 0
            {
                return;
            }
        }
        // SAFETY: every slot was read and no reader touches the block any more (L3); it was
        // allocated by `Block::new` as a Box.
        drop(unsafe { Box::from_raw(this) });
    }
}

/// A position in the list.
struct Position<T> {
    index: AtomicUsize,
    block: AtomicPtr<Block<T>>,
}

/// The claim a token carries for this flavor (a null block means disconnected).
#[derive(Debug)]
pub(crate) struct ListToken {
    block: *const u8,
    offset: usize,
}

impl Default for ListToken {
    fn default() -> Self {
        ListToken { block: core::ptr::null(), offset: 0 }
    }
}

/// An unbounded channel's shared state.
pub(crate) struct Channel<T> {
    head: Padded<Position<T>>,
    tail: Padded<Position<T>>,
    /// Receivers waiting for a message.
    receivers: Waiters,
    _marker: PhantomData<T>,
}

impl<T> Channel<T> {
    pub(crate) fn new() -> Channel<T> {
        Channel {
            head: Padded(Position {
                index: AtomicUsize::new(0),
                block: AtomicPtr::new(core::ptr::null_mut()),
            }),
            tail: Padded(Position {
                index: AtomicUsize::new(0),
                block: AtomicPtr::new(core::ptr::null_mut()),
            }),
            receivers: Waiters::new(),
            _marker: PhantomData,
        }
    }

    /// Claims a slot to send into. Never fails for lack of room; a disconnected channel
    /// "succeeds" with a null block (the write then fails).
    pub(crate) fn start_send(&self, token: &mut Token) -> bool {
        let mut backoff = Spin::backoff();
        // L2: Acquire, to dereference the block.
        let mut tail = self.tail.index.load(Ordering::Acquire);
        let mut block = self.tail.block.load(Ordering::Acquire);
        let mut next_block: Option<Box<Block<T>>> = None;
        loop {
            if tail & MARK_BIT != 0 {
                token.list = ListToken::default();
                return true;
            }
            let offset = (tail >> SHIFT) % LAP;
            if offset == BLOCK_CAP {
                // Another sender is installing the next block.
                backoff.step();
                tail = self.tail.index.load(Ordering::Acquire);
                block = self.tail.block.load(Ordering::Acquire);
                continue;
            }
            // Taking the last slot obliges us to install the next block: allocate it before
            // claiming, so others wait for as short a time as possible.
            if offset + 1 == BLOCK_CAP && next_block.is_none() {
                next_block = Some(Block::new());
            }
            if block.is_null() {
                // The very first send installs the first block.
                let new = Box::into_raw(Block::<T>::new());
                // L2: Release publishes the block.
                if self
                    .tail
                    .block
                    .compare_exchange(block, new, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    self.head.block.store(new, Ordering::Release);
                    block = new;
                } else {
                    // SAFETY: `new` is ours (the CAS failed, so it was never published).
                    next_block = Some(unsafe { Box::from_raw(new) });
                    tail = self.tail.index.load(Ordering::Acquire);
                    block = self.tail.block.load(Ordering::Acquire);
                    continue;
                }
            }
            let new_tail = tail + (1 << SHIFT);
            // L4: the CAS picks the owner of the slot.
            match self.tail.index.compare_exchange_weak(
                tail,
                new_tail,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if offset + 1 == BLOCK_CAP {
                        // We took the last slot: install the next block and skip the sentinel
                        // (`fetch_add`, not a store: a disconnection may have set MARK_BIT).
                        let next = Box::into_raw(next_block.take().expect("allocated above"));
                        // L2: Release publishes the new block to senders and receivers.
                        self.tail.block.store(next, Ordering::Release);
                        self.tail.index.fetch_add(1 << SHIFT, Ordering::Release);
                        // SAFETY: `block` is alive: its last slot (ours) is not read yet.
                        unsafe { (*block).next.store(next, Ordering::Release) };
                    }
                    token.list = ListToken { block: block.cast_const().cast(), offset };
                    return true;
                }
                Err(t) => {
                    tail = t;
                    block = self.tail.block.load(Ordering::Acquire);
                    backoff.retry();
                }
            }
        }
    }

    /// Writes into a slot claimed by `start_send`.
    ///
    /// # Safety
    ///
    /// - `token` was filled by a successful [`Channel::start_send`] on this channel and not
    ///   used since.
    pub(crate) unsafe fn write(&self, token: &mut Token, msg: T) -> Result<(), T> {
        if token.list.block.is_null() {
            return Err(msg);
        }
        let block = token.list.block.cast::<Block<T>>();
        // SAFETY: the block stays alive until our slot is read, which needs our WRITE.
        let slot = unsafe { (*block).slots.get_unchecked(token.list.offset) };
        // SAFETY: we own the slot (won the tail CAS for it).
        slot.msg.with_mut(|m| unsafe { (*m).write(msg) });
        // L1: Release publishes the message.
        slot.state.fetch_or(WRITE, Ordering::Release);
        self.receivers.notify();
        Ok(())
    }

    /// Claims a message to receive; false if empty. An empty disconnected channel "succeeds"
    /// with a null block (the read then fails).
    pub(crate) fn start_recv(&self, token: &mut Token) -> bool {
        let mut backoff = Spin::backoff();
        // L2: Acquire, to dereference the block.
        let mut head = self.head.index.load(Ordering::Acquire);
        let mut block = self.head.block.load(Ordering::Acquire);
        loop {
            let offset = (head >> SHIFT) % LAP;
            if offset == BLOCK_CAP {
                // The reader of the last slot is moving `head` to the next block.
                backoff.step();
                head = self.head.index.load(Ordering::Acquire);
                block = self.head.block.load(Ordering::Acquire);
                continue;
            }
            let mut new_head = head + (1 << SHIFT);
            if new_head & MARK_BIT == 0 {
                // Not known to have a successor: check against `tail` (L4).
                fence(Ordering::SeqCst);
                let tail = self.tail.index.load(Ordering::Relaxed);
                if head >> SHIFT == tail >> SHIFT {
                    if tail & MARK_BIT != 0 {
                        token.list = ListToken::default();
                        return true;
                    }
                    return false;
                }
                if (head >> SHIFT) / LAP != (tail >> SHIFT) / LAP {
                    new_head |= MARK_BIT;
                }
            }
            if block.is_null() {
                // The first block is being installed by the first sender.
                backoff.step();
                head = self.head.index.load(Ordering::Acquire);
                block = self.head.block.load(Ordering::Acquire);
                continue;
            }
            // L4: the CAS picks the owner of the message.
            match self.head.index.compare_exchange_weak(
                head,
                new_head,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if offset + 1 == BLOCK_CAP {
                        // We took the last slot: move `head` to the next block.
                        // SAFETY: the block is alive until its last slot (ours) is read.
                        let next = unsafe { (*block).wait_next() };
                        let mut next_index = (new_head & !MARK_BIT).wrapping_add(1 << SHIFT);
                        // SAFETY: `next` was published (L2) and is not freed before its slots
                        // are read, which needs `head` to reach it first.
                        if !unsafe { (*next).next.load(Ordering::Relaxed) }.is_null() {
                            next_index |= MARK_BIT;
                        }
                        // L2: Release publishes the move to other receivers.
                        self.head.block.store(next, Ordering::Release);
                        self.head.index.store(next_index, Ordering::Release);
                    }
                    token.list = ListToken { block: block.cast_const().cast(), offset };
                    return true;
                }
                Err(h) => {
                    head = h;
                    block = self.head.block.load(Ordering::Acquire);
                    backoff.retry();
                }
            }
        }
    }

    /// Reads the message claimed by `start_recv`.
    ///
    /// # Safety
    ///
    /// - `token` was filled by a successful [`Channel::start_recv`] on this channel and not
    ///   used since.
    pub(crate) unsafe fn read(&self, token: &mut Token) -> Result<T, ()> {
        if token.list.block.is_null() {
            return Err(());
        }
        let block = token.list.block.cast::<Block<T>>().cast_mut();
        let offset = token.list.offset;
        // SAFETY: the block is alive until our slot is marked READ (L3).
        let slot = unsafe { (*block).slots.get_unchecked(offset) };
        slot.wait_write();
        // SAFETY: L1 made the message visible; the head CAS made it ours alone.
        let msg = slot.msg.with(|m| unsafe { (*m).assume_init_read() });
        if offset + 1 == BLOCK_CAP {
            // SAFETY: we read the last slot: start freeing the block.
            unsafe { Block::destroy(block, 0) };
        } else if slot.state.fetch_or(READ, Ordering::AcqRel) & DESTROY != 0 {
            // L3: the destroyer stopped at our slot; continue after it.
            // SAFETY: every slot before ours is read, and we saw DESTROY.
            unsafe { Block::destroy(block, offset + 1) };
        }
        Ok(msg)
    }

    pub(crate) fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        self.send(msg, None).map_err(|e| match e {
            SendTimeoutError::Disconnected(m) => TrySendError::Disconnected(m),
            SendTimeoutError::Timeout(_) | SendTimeoutError::Interrupted(_) => {
                unreachable!("an unbounded send never waits")
            }
        })
    }

    pub(crate) fn send(
        &self,
        msg: T,
        _deadline: Option<Instant>,
    ) -> Result<(), SendTimeoutError<T>> {
        let mut token = Token::default();
        let claimed = self.start_send(&mut token);
        debug_assert!(claimed);
        // SAFETY: filled by `start_send` just now.
        unsafe { self.write(&mut token, msg) }.map_err(SendTimeoutError::Disconnected)
    }

    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut token = Token::default();
        if self.start_recv(&mut token) {
            // SAFETY: filled by `start_recv` just now.
            unsafe { self.read(&mut token) }.map_err(|()| TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    pub(crate) fn recv(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        let mut token = Token::default();
        loop {
            if self.start_recv(&mut token) {
                // SAFETY: filled by `start_recv` just now.
                return unsafe { self.read(&mut token) }
                    .map_err(|()| RecvTimeoutError::Disconnected);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(RecvTimeoutError::Timeout);
            }
            let info = wait_info(WaitKind::ChannelRecv, self, None);
            let ready = || !self.is_empty() || self.is_disconnected();
            let blocked = block(&self.receivers, ready, deadline, info);
            if blocked == Blocked::Interrupted {
                return Err(RecvTimeoutError::Interrupted);
            }
            if blocked == Blocked::TimedOut {
                if self.start_recv(&mut token) {
                    // SAFETY: as above.
                    return unsafe { self.read(&mut token) }
                        .map_err(|()| RecvTimeoutError::Disconnected);
                }
                return Err(RecvTimeoutError::Timeout);
            }
        }
    }

    /// Number of messages (a snapshot).
    pub(crate) fn len(&self) -> usize {
        loop {
            let mut tail = self.tail.index.load(Ordering::Acquire);
            let mut head = self.head.index.load(Ordering::Acquire);
            if self.tail.index.load(Ordering::Acquire) == tail {
                tail &= !((1 << SHIFT) - 1);
                head &= !((1 << SHIFT) - 1);
                // An index at the sentinel offset counts as the next block's first slot.
                if (tail >> SHIFT) & (LAP - 1) == LAP - 1 {
                    tail = tail.wrapping_add(1 << SHIFT);
                }
                if (head >> SHIFT) & (LAP - 1) == LAP - 1 {
                    head = head.wrapping_add(1 << SHIFT);
                }
                // Rebase both on the head block, then drop the sentinel positions between.
                let lap = (head >> SHIFT) / LAP;
                tail = tail.wrapping_sub((lap * LAP) << SHIFT);
                head = head.wrapping_sub((lap * LAP) << SHIFT);
                tail >>= SHIFT;
                head >>= SHIFT;
                return tail - head - tail / LAP;
            }
        }
    }

    /// Whether empty (loads after the caller's fence are fresh enough for N1's re-check).
    pub(crate) fn is_empty(&self) -> bool {
        let head = self.head.index.load(Ordering::Relaxed);
        let tail = self.tail.index.load(Ordering::Relaxed);
        head >> SHIFT == tail >> SHIFT
    }

    pub(crate) fn is_disconnected(&self) -> bool {
        self.tail.index.load(Ordering::Relaxed) & MARK_BIT != 0
    }

    /// The last sender left: mark and wake the receivers. Returns whether this call
    /// disconnected it.
    pub(crate) fn disconnect_senders(&self) -> bool {
        let tail = self.tail.index.fetch_or(MARK_BIT, Ordering::AcqRel);
        if tail & MARK_BIT == 0 {
            self.receivers.notify_all();
            true
        } else {
            false
        }
    }

    /// The last receiver left: mark (sends fail from now on) and drop the queued messages
    /// now rather than when the last sender leaves. Returns whether this call disconnected it.
    pub(crate) fn disconnect_receivers(&self) -> bool {
        let tail = self.tail.index.fetch_or(MARK_BIT, Ordering::AcqRel);
        if tail & MARK_BIT == 0 {
            self.discard_all_messages();
            true
        } else {
            false
        }
    }

    /// Drops every queued message and frees the blocks. Only called by the last receiver
    /// after marking the channel disconnected, so no receiver runs concurrently and no new
    /// send can start; sends that already claimed a slot are waited for.
    ///
    /// If a message's destructor panics, the panic propagates and the messages after it are
    /// leaked with their blocks, never dropped (crossbeam-channel's rule): the head block was
    /// taken out and `head` ends at `tail` either way, so the channel's destructor, which may
    /// run while that panic unwinds, finds no message (dropping them there would drop the
    /// panicking one twice, and a second panicking destructor during an unwind aborts).
    fn discard_all_messages(&self) {
        let mut backoff = Spin::backoff();
        let mut tail = self.tail.index.load(Ordering::Acquire);
        // Wait until no block is being installed (`tail` off the sentinel).
        loop {
            if (tail >> SHIFT) % LAP != BLOCK_CAP {
                break;
            }
            backoff.step();
            tail = self.tail.index.load(Ordering::Acquire);
        }
        // Release (when dropped): a later receive on the disconnected channel, or the
        // channel's destructor, sees it empty (`tail` is final: see the wait above).
        let _empty = StoreOnDrop { word: &self.head.index, value: tail & !MARK_BIT };
        let mut head = self.head.index.load(Ordering::Acquire);
        // `swap`: take the block chain out (a concurrent first send may still be installing
        // the first block if `head` and `tail` are both at 0).
        let mut block = self.head.block.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if head >> SHIFT != tail >> SHIFT {
            // The first block may not be visible yet though messages are claimed.
            while block.is_null() {
                backoff.step();
                block = self.head.block.swap(core::ptr::null_mut(), Ordering::AcqRel);
            }
        }
        // SAFETY: no other receiver exists and senders only write into their claimed slots,
        // which we wait for; we own every block from `head` on.
        unsafe {
            while head >> SHIFT != tail >> SHIFT {
                let offset = (head >> SHIFT) % LAP;
                if offset < BLOCK_CAP {
                    let slot = (*block).slots.get_unchecked(offset);
                    slot.wait_write();
                    slot.msg.with_mut(|m| (*m).assume_init_drop());
                } else {
                    let next = (*block).wait_next();
                    drop(Box::from_raw(block));
                    block = next;
                }
                head = head.wrapping_add(1 << SHIFT);
            }
            if !block.is_null() {
                drop(Box::from_raw(block));
            }
        }
    }

    pub(crate) fn receivers(&self) -> &Waiters {
        &self.receivers
    }
}

impl<T> Drop for Channel<T> {
    fn drop(&mut self) {
        // `&mut self`: no other thread touches the channel.
        let mut head = self.head.index.load(Ordering::Relaxed) & !MARK_BIT;
        let tail = self.tail.index.load(Ordering::Relaxed) & !MARK_BIT;
        let mut block = self.head.block.load(Ordering::Relaxed);
        // SAFETY: exclusive access; messages between head and tail were written (every
        // claimed send completed before its handle was dropped); each block freed once.
        unsafe {
            while head != tail {
                let offset = (head >> SHIFT) % LAP;
                if offset < BLOCK_CAP {
                    let slot = (*block).slots.get_unchecked(offset);
                    slot.msg.with_mut(|m| (*m).assume_init_drop());
                } else {
                    let next = (*block).next.load(Ordering::Relaxed);
                    drop(Box::from_raw(block));
                    block = next;
                }
                head = head.wrapping_add(1 << SHIFT);
            }
            if !block.is_null() {
                drop(Box::from_raw(block));
            }
        }
    }
}
