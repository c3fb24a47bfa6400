//! The bounded flavor (capacity ≥ 1): Dmitry Vyukov's bounded MPMC queue — a ring of slots,
//! each with a *stamp* saying which lap may use it next — with the green-aware waiter lists of
//! `waiters.rs` for blocking.
//!
//! `head` and `tail` hold `lap | index` (the index in the low bits, below `mark_bit`; `tail`'s
//! `mark_bit` means disconnected). A slot whose stamp equals `tail` is free for that lap; a
//! sender claims it by advancing `tail` (CAS), writes the message, and stores stamp `tail + 1`.
//! A slot whose stamp is `head + 1` holds a message; a receiver claims it by advancing `head`,
//! reads, and stores stamp `head + one_lap` (free for the next lap). Claiming and completing
//! are separate steps (a [`Token`] carries the claim), which is what `select` needs.
//!
//! # Memory ordering
//!
//! The guarantee: each message is received exactly once, and a receiver sees everything its
//! sender did before the send.
//!
//! - (A1) A receiver's Release store of the next-lap stamp pairs with the Acquire stamp load of
//!   the sender that reuses the slot: the old message was read before the new one is written.
//! - (A2) A sender's Release store of stamp `tail + 1` pairs with the receiver's Acquire stamp
//!   load: the message is written before it is read.
//! - (A3) The CASes on `head`/`tail` only decide who owns a slot (AcqRel; the data is ordered by
//!   A1/A2). "Full"/"empty" answers load the other index after a `fence(SeqCst)`; they may be
//!   stale, which the blocking protocol tolerates: waiters re-check after registering (N1 in
//!   `waiters.rs`), and every completed send or receive notifies after its stamp store.
//! - (A4) `mark_bit` is set with an AcqRel `fetch_or`; a stale view of it only delays an error.

use core::marker::PhantomData;
use core::mem::MaybeUninit;
use std::time::Instant;

use purloin_sched::WaitKind;
use purloin_sched::spin::{Padded, Spin};

use super::error::{RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use super::select::Token;
use super::waiters::{Blocked, Waiters, block};
use crate::diagnostics::wait_info;
use crate::loom::{AtomicUsize, Ordering, UnsafeCell, fence};

/// The claim a token carries for this flavor: the slot and the stamp to store when done (a
/// null slot means the channel is disconnected).
#[derive(Debug)]
pub(crate) struct ArrayToken {
    slot: *const u8,
    stamp: usize,
}

impl Default for ArrayToken {
    fn default() -> Self {
        ArrayToken { slot: core::ptr::null(), stamp: 0 }
    }
}

struct Slot<T> {
    /// The lap this slot is ready for (see the module docs).
    stamp: AtomicUsize,
    msg: UnsafeCell<MaybeUninit<T>>,
}

/// A bounded channel's shared state.
pub(crate) struct Channel<T> {
    head: Padded<AtomicUsize>,
    tail: Padded<AtomicUsize>,
    buffer: Box<[Slot<T>]>,
    cap: usize,
    /// Adding this to an index moves it one lap ahead: `2 * mark_bit`.
    one_lap: usize,
    /// The smallest power of two above the largest index; set in `tail` when disconnected.
    mark_bit: usize,
    /// Senders waiting for room.
    senders: Waiters,
    /// Receivers waiting for a message.
    receivers: Waiters,
    _marker: PhantomData<T>,
}

impl<T> Channel<T> {
    /// A channel with room for `cap` messages.
    ///
    /// # Panics
    ///
    /// If `cap` is 0 (that is the rendezvous flavor) or absurdly large (its lap arithmetic
    /// would overflow, or its ring cannot be allocated).
    pub(crate) fn with_capacity(cap: usize) -> Channel<T> {
        assert!(cap > 0, "the array flavor needs a capacity of at least 1");
        let mark_bit = cap
            .checked_add(1)
            .and_then(usize::checked_next_power_of_two)
            .filter(|m| m.checked_mul(4).is_some())
            .unwrap_or_else(|| {
                panic!(
                    "purloin_sync::channel::bounded({cap}): capacity too large; use a capacity \
                     below usize::MAX / 8, or unbounded()"
                )
            });
        let mut buffer = Vec::new();
        if let Err(e) = buffer.try_reserve_exact(cap) {
            panic!(
                "purloin_sync::channel::bounded({cap}): capacity overflow: the ring of {cap} \
                 slots of {} bytes cannot be allocated ({e}); use a smaller capacity, or \
                 unbounded()",
                size_of::<Slot<T>>()
            );
        }
        buffer.extend((0..cap).map(|i| Slot {
            stamp: AtomicUsize::new(i),
            msg: UnsafeCell::new(MaybeUninit::uninit()),
        }));
        let buffer = buffer.into_boxed_slice();
        Channel {
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            buffer,
            cap,
            one_lap: mark_bit * 2,
            mark_bit,
            senders: Waiters::new(),
            receivers: Waiters::new(),
            _marker: PhantomData,
        }
    }

    /// Claims a slot to send into; false if the channel is full. A disconnected channel
    /// "succeeds" with a null slot (the write then fails).
    pub(crate) fn start_send(&self, token: &mut Token) -> bool {
        let mut backoff = Spin::backoff();
        let mut tail = self.tail.load(Ordering::Relaxed);
        loop {
            if tail & self.mark_bit != 0 {
                token.array = ArrayToken::default();
                return true;
            }
            let index = tail & (self.mark_bit - 1);
            let lap = tail & !(self.one_lap - 1);
            // SAFETY: `index < cap`: indices wrap to the next lap at `cap`.
            let slot = unsafe { self.buffer.get_unchecked(index) };
            // A1: Acquire pairs with the last reader's Release stamp store.
            let stamp = slot.stamp.load(Ordering::Acquire);
            if tail == stamp {
                let new_tail =
                    if index + 1 < self.cap { tail + 1 } else { lap.wrapping_add(self.one_lap) };
                // A3: the CAS only picks the owner of the slot.
                match self.tail.compare_exchange_weak(
                    tail,
                    new_tail,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        token.array =
                            ArrayToken { slot: (slot as *const Slot<T>).cast(), stamp: tail + 1 };
                        return true;
                    }
                    Err(t) => {
                        tail = t;
                        backoff.retry();
                    }
                }
            } else if stamp.wrapping_add(self.one_lap) == tail + 1 {
                // The slot still holds last lap's message: full, unless a receiver just moved.
                // A3: the fence makes the head load at least as fresh as our stamp load.
                fence(Ordering::SeqCst);
                let head = self.head.load(Ordering::Relaxed);
                if head.wrapping_add(self.one_lap) == tail {
                    return false;
                }
                backoff.retry();
                tail = self.tail.load(Ordering::Relaxed);
            } else {
                // Another sender claimed this position and has not advanced `tail` past our
                // view yet: wait for it.
                backoff.step();
                tail = self.tail.load(Ordering::Relaxed);
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
        if token.array.slot.is_null() {
            return Err(msg);
        }
        // SAFETY: the token names a slot of this channel that we own until the stamp store.
        let slot = unsafe { &*token.array.slot.cast::<Slot<T>>() };
        // SAFETY: we own the slot (won the tail CAS for it; A1 ordered the last read).
        slot.msg.with_mut(|m| unsafe { (*m).write(msg) });
        // A2: Release publishes the message to the receiver that claims it.
        slot.stamp.store(token.array.stamp, Ordering::Release);
        self.receivers.notify();
        Ok(())
    }

    /// Claims a message to receive; false if the channel is empty. An empty disconnected
    /// channel "succeeds" with a null slot (the read then fails).
    pub(crate) fn start_recv(&self, token: &mut Token) -> bool {
        let mut backoff = Spin::backoff();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let index = head & (self.mark_bit - 1);
            let lap = head & !(self.one_lap - 1);
            // SAFETY: `index < cap`, as in `start_send`.
            let slot = unsafe { self.buffer.get_unchecked(index) };
            // A2: Acquire pairs with the sender's Release stamp store.
            let stamp = slot.stamp.load(Ordering::Acquire);
            if head + 1 == stamp {
                let new_head =
                    if index + 1 < self.cap { head + 1 } else { lap.wrapping_add(self.one_lap) };
                // A3: the CAS only picks the owner of the message.
                match self.head.compare_exchange_weak(
                    head,
                    new_head,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        token.array = ArrayToken {
                            slot: (slot as *const Slot<T>).cast(),
                            stamp: head.wrapping_add(self.one_lap),
                        };
                        return true;
                    }
                    Err(h) => {
                        head = h;
                        backoff.retry();
                    }
                }
            } else if stamp == head {
                // No message in this slot for this lap: empty, unless a sender just moved.
                // A3: as in `start_send`.
                fence(Ordering::SeqCst);
                let tail = self.tail.load(Ordering::Relaxed);
                if tail & !self.mark_bit == head {
                    if tail & self.mark_bit != 0 {
                        token.array = ArrayToken::default();
                        return true;
                    }
                    return false;
                }
                backoff.retry();
                head = self.head.load(Ordering::Relaxed);
            } else {
                // A sender claimed this slot and is still writing, or another receiver is
                // ahead of our view.
                backoff.step();
                head = self.head.load(Ordering::Relaxed);
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
        if token.array.slot.is_null() {
            return Err(());
        }
        // SAFETY: the token names a slot of this channel whose message we claimed.
        let slot = unsafe { &*token.array.slot.cast::<Slot<T>>() };
        // SAFETY: A2 made the message visible; the head CAS made it ours alone.
        let msg = slot.msg.with(|m| unsafe { (*m).assume_init_read() });
        // A1: Release frees the slot for the next lap's sender.
        slot.stamp.store(token.array.stamp, Ordering::Release);
        self.senders.notify();
        Ok(msg)
    }

    pub(crate) fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        let mut token = Token::default();
        if self.start_send(&mut token) {
            // SAFETY: filled by `start_send` just now.
            unsafe { self.write(&mut token, msg) }.map_err(TrySendError::Disconnected)
        } else {
            Err(TrySendError::Full(msg))
        }
    }

    pub(crate) fn send(
        &self,
        msg: T,
        deadline: Option<Instant>,
    ) -> Result<(), SendTimeoutError<T>> {
        let mut token = Token::default();
        loop {
            if self.start_send(&mut token) {
                // SAFETY: filled by `start_send` just now.
                return unsafe { self.write(&mut token, msg) }
                    .map_err(SendTimeoutError::Disconnected);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(SendTimeoutError::Timeout(msg));
            }
            let info = wait_info(WaitKind::ChannelSend, self, None);
            let ready = || !self.is_full() || self.is_disconnected();
            let blocked = block(&self.senders, ready, deadline, info);
            if blocked == Blocked::Interrupted {
                return Err(SendTimeoutError::Interrupted(msg));
            }
            if blocked == Blocked::TimedOut {
                if self.start_send(&mut token) {
                    // SAFETY: as above.
                    return unsafe { self.write(&mut token, msg) }
                        .map_err(SendTimeoutError::Disconnected);
                }
                return Err(SendTimeoutError::Timeout(msg));
            }
        }
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
            let tail = self.tail.load(Ordering::Acquire);
            let head = self.head.load(Ordering::Acquire);
            // A consistent pair: `tail` did not move while we read `head`.
            if self.tail.load(Ordering::Acquire) == tail {
                let hix = head & (self.mark_bit - 1);
                let tix = tail & (self.mark_bit - 1);
                return if hix < tix {
                    tix - hix
                } else if hix > tix {
                    self.cap - hix + tix
                } else if tail & !self.mark_bit == head {
                    0
                } else {
                    self.cap
                };
            }
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// Whether empty (loads after the caller's fence are fresh enough for N1's re-check).
    pub(crate) fn is_empty(&self) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        tail & !self.mark_bit == head
    }

    /// Whether full (as `is_empty`).
    pub(crate) fn is_full(&self) -> bool {
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Relaxed);
        head.wrapping_add(self.one_lap) == tail & !self.mark_bit
    }

    pub(crate) fn is_disconnected(&self) -> bool {
        self.tail.load(Ordering::Relaxed) & self.mark_bit != 0
    }

    /// Disconnects (the last sender or the last receiver left) and wakes every waiter.
    /// Returns whether this call disconnected it.
    pub(crate) fn disconnect(&self) -> bool {
        // A4.
        let tail = self.tail.fetch_or(self.mark_bit, Ordering::AcqRel);
        if tail & self.mark_bit == 0 {
            self.senders.notify_all();
            self.receivers.notify_all();
            true
        } else {
            false
        }
    }

    /// The last receiver left: disconnect (sends fail from now on) and drop the queued
    /// messages now rather than when the last sender leaves (a message may carry a reply
    /// sender whose requester waits for the disconnection). Returns whether this call
    /// disconnected it.
    pub(crate) fn disconnect_receivers(&self) -> bool {
        // A4.
        let tail = self.tail.fetch_or(self.mark_bit, Ordering::AcqRel);
        let first = tail & self.mark_bit == 0;
        if first {
            self.senders.notify_all();
            self.receivers.notify_all();
        }
        self.discard_all_messages(tail);
        first
    }

    /// Drops the messages from `head` up to `tail` (the tail when the channel was marked
    /// disconnected: no send can claim a slot after it). Only the last receiver calls this,
    /// so nobody else moves `head`; a slot claimed by a sender before the mark but not yet
    /// written is waited for (its stamp becomes `head + 1`).
    ///
    /// If a message's destructor panics, the panic propagates and the messages after it are
    /// leaked, never dropped (crossbeam-channel's rule): `head` ends at `tail` either way, so
    /// the channel's destructor, which may run while that panic unwinds, finds no message
    /// (dropping them there would drop the panicking one twice, and a second panicking
    /// destructor during an unwind aborts the process).
    fn discard_all_messages(&self, tail: usize) {
        let tail = tail & !self.mark_bit;
        // Release (when dropped): the channel's destructor (or a later receive on the
        // disconnected, empty channel) sees the slots as empty.
        let _empty = StoreOnDrop { word: &self.head, value: tail };
        let mut backoff = Spin::backoff();
        // Relaxed: only receivers move `head`, and we are the last one.
        let mut head = self.head.load(Ordering::Relaxed);
        while head != tail {
            let index = head & (self.mark_bit - 1);
            let lap = head & !(self.one_lap - 1);
            // SAFETY: `index < cap`, as in `start_send`.
            let slot = unsafe { self.buffer.get_unchecked(index) };
            // A2: Acquire pairs with the sender's Release stamp store.
            if slot.stamp.load(Ordering::Acquire) == head + 1 {
                // SAFETY: A2 made the message visible; no other receiver exists, so it is
                // ours alone, and moving `head` past it below means it is dropped once.
                slot.msg.with_mut(|m| unsafe { (*m).assume_init_drop() });
                head = if index + 1 < self.cap { head + 1 } else { lap.wrapping_add(self.one_lap) };
            } else {
                // A sender claimed this slot before the mark and is still writing.
                backoff.step();
            }
        }
    }

    pub(crate) fn senders(&self) -> &Waiters {
        &self.senders
    }

    pub(crate) fn receivers(&self) -> &Waiters {
        &self.receivers
    }
}

/// Stores `value` into `word` (Release) when dropped, also while a panic unwinds: how the
/// last receiver's discard leaves a channel consistent when a message's destructor panics.
pub(super) struct StoreOnDrop<'a> {
    pub(super) word: &'a AtomicUsize,
    pub(super) value: usize,
}

impl Drop for StoreOnDrop<'_> {
    fn drop(&mut self) {
        self.word.store(self.value, Ordering::Release);
    }
}

impl<T> Drop for Channel<T> {
    fn drop(&mut self) {
        // `&mut self`: no other thread touches the channel any more. Only messages a discard
        // did not reach are left (none: the last receiver discards them all, or leaks the
        // rest when a destructor panics); a panicking destructor here propagates and leaks
        // the messages after it.
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        let hix = head & (self.mark_bit - 1);
        let tix = tail & (self.mark_bit - 1);
        let len = if hix < tix {
            tix - hix
        } else if hix > tix {
            self.cap - hix + tix
        } else if tail & !self.mark_bit == head {
            0
        } else {
            self.cap
        };
        for i in 0..len {
            let index = if hix + i < self.cap { hix + i } else { hix + i - self.cap };
            // SAFETY: the slots from head to tail hold written messages (every claimed send
            // completed before the last handle was dropped), dropped exactly once here.
            unsafe {
                let slot = self.buffer.get_unchecked(index);
                slot.msg.with_mut(|m| (*m).assume_init_drop());
            }
        }
    }
}
