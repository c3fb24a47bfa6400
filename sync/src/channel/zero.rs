//! The rendezvous flavor (capacity 0, Go's unbuffered channel): a send completes only when a
//! receiver takes the message, handed over directly from one waiter to the other (Go's
//! `hchan` with `sendq`/`recvq` of sudogs, under one lock).
//!
//! A waiting sender links a node whose *packet* holds its message; a waiting receiver links a
//! node with an empty packet. The other side, under the channel lock, claims a waiting node
//! (waiter protocol), unlocks, moves the message through the packet, and finishes the waiter —
//! so the woken side finds the transfer complete, and a sender that wakes a parked receiver
//! from a green thread puts it in its own `runnext` (the pair runs as a unit).
//!
//! Packets of plain sends and receives live on the waiter's stack. A `select` registers heap
//! packets (its operations are type-erased, and a selected send supplies its message only
//! after it is chosen): a receiver that claims a selecting sender finishes it first and then
//! waits for the message to be put in the packet (`ready`), then frees the packet.
//!
//! # Memory ordering
//!
//! The guarantee: a received message and everything its sender did before sending are
//! visible to the receiver; each message is taken exactly once.
//!
//! - (Z1) The channel lock (L1 of `raw_lock`) orders every list change and claim.
//! - (Z2) Hand-off into a waiter's packet happens before the claimer's `finish` (waiter
//!   protocol W2: Release `DONE`, Acquire on the waiter's side).
//! - (Z3) A selecting sender's packet: the sender's Release store of `ready` after writing the
//!   message pairs with the claiming receiver's Acquire load in `wait_ready`.

use core::marker::PhantomData;
use std::time::Instant;

use purloin_sched::WaitKind;
use purloin_sched::spin::Spin;

use super::error::{RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use super::select::{DISCONNECTED, Token};
use crate::diagnostics::wait_info;
use crate::loom::{AtomicBool, Ordering, UnsafeCell};
use crate::raw_lock::Locked;
use crate::waiter::{Claimed, Gave, List, Node, OnInterrupt, Waiter};

/// A message slot shared by a waiting node's owner and its claimer.
pub(crate) struct Packet<T> {
    /// The message (set by the side that has it, taken by the other).
    msg: UnsafeCell<Option<T>>,
    /// A selecting sender's packet: the message was put in after the claim (Z3).
    ready: AtomicBool,
    /// Allocated by a `select` (freed by whoever takes the message last; see the module docs).
    on_heap: bool,
}

impl<T> Packet<T> {
    fn on_stack(msg: Option<T>) -> Packet<T> {
        Packet { msg: UnsafeCell::new(msg), ready: AtomicBool::new(false), on_heap: false }
    }

    fn on_heap() -> *mut Packet<T> {
        Box::into_raw(Box::new(Packet {
            msg: UnsafeCell::new(None),
            ready: AtomicBool::new(false),
            on_heap: true,
        }))
    }

    /// Takes the message.
    ///
    /// # Safety
    ///
    /// - The caller is the only one accessing `msg` now (it owns the packet, or claimed its
    ///   node and the owner waits for `DONE`, or saw `ready`).
    unsafe fn take(&self) -> Option<T> {
        // SAFETY: the caller's obligation.
        self.msg.with_mut(|m| unsafe { (*m).take() })
    }

    /// Puts the message.
    ///
    /// # Safety
    ///
    /// - As for [`Packet::take`].
    unsafe fn put(&self, msg: T) {
        // SAFETY: the caller's obligation.
        self.msg.with_mut(|m| unsafe { *m = Some(msg) });
    }

    /// Waits until a selecting sender put its message (or gave up without one).
    fn wait_ready(&self) {
        let mut backoff = Spin::backoff();
        // Z3: Acquire pairs with the sender's Release store.
        while !self.ready.load(Ordering::Acquire) {
            backoff.step();
        }
    }
}

/// The claim a token carries for this flavor.
#[derive(Debug)]
pub(crate) struct ZeroToken {
    /// The packet to move the message through (null: disconnected).
    packet: *mut u8,
    /// The claimed waiter to finish after the transfer (null when we are the woken side).
    waiter: *const Waiter,
}

impl Default for ZeroToken {
    fn default() -> Self {
        ZeroToken { packet: core::ptr::null_mut(), waiter: core::ptr::null() }
    }
}

struct Inner {
    /// Waiting senders (their nodes' `data` point to their packets).
    senders: List,
    /// Waiting receivers.
    receivers: List,
    disconnected: bool,
}

/// A rendezvous channel's shared state.
pub(crate) struct Channel<T> {
    inner: Locked<Inner>,
    _marker: PhantomData<T>,
}

/// The token a claim of a waiting node carries: its own (`select` index) token.
fn node_token(n: &Node) -> u32 {
    n.token
}

impl<T> Channel<T> {
    pub(crate) fn new() -> Channel<T> {
        Channel {
            inner: Locked::new(Inner {
                senders: List::new(),
                receivers: List::new(),
                disconnected: false,
            }),
            _marker: PhantomData,
        }
    }

    /// Claims a waiting receiver to send to (or notes disconnection); false if none waits.
    pub(crate) fn start_send(&self, token: &mut Token) -> bool {
        let mut claimed = Claimed::new();
        let mut inner = self.inner.lock();
        // SAFETY: Z1: we hold the lock; the claimed node is finished by `write`.
        let node =
            unsafe { inner.receivers.claim_one(core::ptr::null(), node_token, &mut claimed) };
        let ok = match node {
            Some(node) => {
                let _ = claimed.pop();
                // SAFETY: claimed: alive until we finish its waiter.
                let node = unsafe { &*node };
                token.zero = ZeroToken { packet: node.data as *mut u8, waiter: node.waiter };
                true
            }
            None if inner.disconnected => {
                token.zero = ZeroToken::default();
                true
            }
            None => false,
        };
        drop(inner);
        ok
    }

    /// Hands `msg` to the receiver claimed by `start_send`.
    ///
    /// # Safety
    ///
    /// - `token` was filled by a successful [`Channel::start_send`] on this channel, or by
    ///   [`Channel::accept`] for a selecting sender's own packet, and not used since.
    pub(crate) unsafe fn write(&self, token: &mut Token, msg: T) -> Result<(), T> {
        let t = core::mem::take(&mut token.zero);
        if t.packet.is_null() {
            return Err(msg);
        }
        // SAFETY: the packet belongs to a claimed waiter (alive until finished) or is our
        // own selected packet (freed by the receiver after `ready`).
        let packet = unsafe { &*t.packet.cast::<Packet<T>>() };
        if t.waiter.is_null() {
            // Our own packet as a selected sender: the claiming receiver waits for `ready`.
            // SAFETY: until `ready` only we touch the message.
            unsafe { packet.put(msg) };
            // Z3: Release publishes the message; the receiver frees the packet after.
            packet.ready.store(true, Ordering::Release);
        } else {
            // SAFETY: the receiver waits for DONE before touching its packet.
            unsafe { packet.put(msg) };
            // SAFETY: claimed by us in `start_send`, lock released, last access. Z2.
            unsafe { Waiter::finish(t.waiter) };
        }
        Ok(())
    }

    /// Claims a waiting sender to receive from (or notes disconnection); false if none waits.
    pub(crate) fn start_recv(&self, token: &mut Token) -> bool {
        let mut claimed = Claimed::new();
        let mut inner = self.inner.lock();
        // SAFETY: Z1: we hold the lock; the claimed node is finished by `read`.
        let node = unsafe { inner.senders.claim_one(core::ptr::null(), node_token, &mut claimed) };
        let ok = match node {
            Some(node) => {
                let _ = claimed.pop();
                // SAFETY: claimed: alive until we finish its waiter.
                let node = unsafe { &*node };
                token.zero = ZeroToken { packet: node.data as *mut u8, waiter: node.waiter };
                true
            }
            None if inner.disconnected => {
                token.zero = ZeroToken::default();
                true
            }
            None => false,
        };
        drop(inner);
        ok
    }

    /// Takes the message of the sender claimed by `start_recv`. `Ok(None)` means the claimed
    /// sender gave up without a message (it was unwound while selected): try again.
    ///
    /// # Safety
    ///
    /// - `token` was filled by a successful [`Channel::start_recv`] on this channel, or by
    ///   [`Channel::accept`] for a selecting receiver's own packet, and not used since.
    pub(crate) unsafe fn read(&self, token: &mut Token) -> Result<Option<T>, ()> {
        let t = core::mem::take(&mut token.zero);
        if t.packet.is_null() {
            return Err(());
        }
        let packet_ptr = t.packet.cast::<Packet<T>>();
        // SAFETY: the packet is alive: a claimed waiter's (until finished), a selecting
        // sender's heap packet (freed by us below), or our own selected packet.
        let packet = unsafe { &*packet_ptr };
        if t.waiter.is_null() {
            // Our own heap packet as a selected receiver: the sender put the message in before
            // finishing us (Z2). We free the packet.
            // SAFETY: ours alone now.
            let msg = unsafe { packet.take() };
            // SAFETY: allocated by `Packet::on_heap`; nobody else holds it any more.
            drop(unsafe { Box::from_raw(packet_ptr) });
            Ok(msg)
        } else if packet.on_heap {
            // A selecting sender: wake it so it supplies the message, then wait for it.
            // SAFETY: claimed by us, lock released; its packet outlives the finish.
            unsafe { Waiter::finish(t.waiter) };
            packet.wait_ready();
            // SAFETY: after `ready` the sender no longer touches the packet.
            let msg = unsafe { packet.take() };
            // SAFETY: allocated by `Packet::on_heap`; we are its last user and free it.
            drop(unsafe { Box::from_raw(packet_ptr) });
            Ok(msg)
        } else {
            // A plain sender waiting with its message on its stack.
            // SAFETY: it waits for DONE before touching the packet.
            let msg = unsafe { packet.take() };
            // SAFETY: claimed by us, lock released, last access. Z2.
            unsafe { Waiter::finish(t.waiter) };
            Ok(msg)
        }
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
        let mut msg = msg;
        loop {
            let mut claimed = Claimed::new();
            let mut inner = self.inner.lock();
            // SAFETY: Z1: we hold the lock; the claimed node is finished by `write`.
            let receiver =
                unsafe { inner.receivers.claim_one(core::ptr::null(), node_token, &mut claimed) };
            if let Some(r) = receiver {
                let _ = claimed.pop();
                drop(inner);
                // SAFETY: claimed: the node and its waiter stay alive until finished.
                let zero =
                    unsafe { ZeroToken { packet: (*r).data as *mut u8, waiter: (*r).waiter } };
                let mut token = Token { zero, ..Token::default() };
                // SAFETY: `token` was filled from our claim just now.
                return unsafe { self.write(&mut token, msg) }
                    .map_err(SendTimeoutError::Disconnected);
            }
            if inner.disconnected {
                return Err(SendTimeoutError::Disconnected(msg));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(SendTimeoutError::Timeout(msg));
            }
            // Wait with the message in a packet on our stack.
            let waiter = Waiter::new();
            let packet = Packet::on_stack(Some(msg));
            let node = Node::new(&waiter, 0, &packet as *const Packet<T> as usize);
            // SAFETY: Z1: under the lock; `guard` below unlinks the node on every path, and
            // the node, packet and waiter stay in this frame until then.
            unsafe { inner.senders.push_back(&node) };
            drop(inner);
            let guard = Linked { chan: self, node: &node, waiter: &waiter, sender: true };
            let info = wait_info(WaitKind::ChannelSend, self, None);
            match waiter.wait(deadline, info, OnInterrupt::Report) {
                Ok(token) => {
                    // The claimer unlinked the node.
                    core::mem::forget(guard);
                    // SAFETY: DONE seen: the claimer no longer touches our packet.
                    match unsafe { packet.take() } {
                        None => return Ok(()),
                        Some(m) if token & DISCONNECTED != 0 => {
                            return Err(SendTimeoutError::Disconnected(m));
                        }
                        // Finished without taking (an abandoned claim): try again.
                        Some(m) => msg = m,
                    }
                }
                Err(gave) => {
                    drop(guard);
                    // SAFETY: unlinked and never claimed: ours.
                    let m = unsafe { packet.take() }.expect("not taken");
                    return Err(match gave {
                        Gave::TimedOut => SendTimeoutError::Timeout(m),
                        Gave::Interrupted => SendTimeoutError::Interrupted(m),
                    });
                }
            }
        }
    }

    pub(crate) fn try_recv(&self) -> Result<T, TryRecvError> {
        loop {
            let mut token = Token::default();
            if !self.start_recv(&mut token) {
                return Err(TryRecvError::Empty);
            }
            // SAFETY: filled by `start_recv` just now.
            match unsafe { self.read(&mut token) } {
                Ok(Some(m)) => return Ok(m),
                Ok(None) => continue,
                Err(()) => return Err(TryRecvError::Disconnected),
            }
        }
    }

    pub(crate) fn recv(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        loop {
            let mut claimed = Claimed::new();
            let mut inner = self.inner.lock();
            // SAFETY: Z1: we hold the lock; the claimed node is finished by `read`.
            let sender =
                unsafe { inner.senders.claim_one(core::ptr::null(), node_token, &mut claimed) };
            if let Some(s) = sender {
                let _ = claimed.pop();
                drop(inner);
                // SAFETY: claimed: the node and its waiter stay alive until finished.
                let zero =
                    unsafe { ZeroToken { packet: (*s).data as *mut u8, waiter: (*s).waiter } };
                let mut token = Token { zero, ..Token::default() };
                // SAFETY: `token` was filled from our claim just now.
                match unsafe { self.read(&mut token) } {
                    Ok(Some(m)) => return Ok(m),
                    Ok(None) => continue,
                    Err(()) => return Err(RecvTimeoutError::Disconnected),
                }
            }
            if inner.disconnected {
                return Err(RecvTimeoutError::Disconnected);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(RecvTimeoutError::Timeout);
            }
            // Wait with an empty packet on our stack.
            let waiter = Waiter::new();
            let packet = Packet::<T>::on_stack(None);
            let node = Node::new(&waiter, 0, &packet as *const Packet<T> as usize);
            // SAFETY: Z1: under the lock; `guard` below unlinks the node on every path, and
            // the node, packet and waiter stay in this frame until then.
            unsafe { inner.receivers.push_back(&node) };
            drop(inner);
            let guard = Linked { chan: self, node: &node, waiter: &waiter, sender: false };
            let info = wait_info(WaitKind::ChannelRecv, self, None);
            match waiter.wait(deadline, info, OnInterrupt::Report) {
                Ok(token) => {
                    core::mem::forget(guard);
                    // SAFETY: DONE seen: the sender put the message before finishing us (Z2).
                    match unsafe { packet.take() } {
                        Some(m) => return Ok(m),
                        None if token & DISCONNECTED != 0 => {
                            return Err(RecvTimeoutError::Disconnected);
                        }
                        None => continue,
                    }
                }
                Err(gave) => {
                    drop(guard);
                    return Err(match gave {
                        Gave::TimedOut => RecvTimeoutError::Timeout,
                        Gave::Interrupted => RecvTimeoutError::Interrupted,
                    });
                }
            }
        }
    }

    /// Disconnects (last sender or last receiver gone): wakes every waiter with
    /// [`DISCONNECTED`]. Returns whether this call disconnected it.
    pub(crate) fn disconnect(&self) -> bool {
        let mut claimed = Claimed::new();
        {
            let mut inner = self.inner.lock();
            if inner.disconnected {
                return false;
            }
            inner.disconnected = true;
            let token = |n: &Node| n.token | DISCONNECTED;
            // SAFETY: Z1: under the lock; finished after it is released.
            unsafe {
                while inner.senders.claim_one(core::ptr::null(), token, &mut claimed).is_some() {}
                while inner.receivers.claim_one(core::ptr::null(), token, &mut claimed).is_some() {}
            }
        }
        // SAFETY: claimed above; lock released.
        unsafe { claimed.finish_all() };
        true
    }

    // --- select support -------------------------------------------------------------------

    /// Registers a selecting thread's node for a send (`sender`) or receive, with a fresh heap
    /// packet; returns whether the operation is ready now (a counterpart other than `me` waits,
    /// or the channel is disconnected).
    ///
    /// # Safety
    ///
    /// - `node` is not linked, stays at its address until unregistered, and its waiter is
    ///   `me`.
    pub(crate) unsafe fn register(&self, node: &mut Node, sender: bool, me: *const Waiter) -> bool {
        node.data = Packet::<T>::on_heap() as usize;
        let mut inner = self.inner.lock();
        let ready = inner.disconnected
            || if sender { inner.receivers.has_waiting(me) } else { inner.senders.has_waiting(me) };
        // SAFETY: Z1: under the lock; the caller's obligations.
        unsafe {
            if sender {
                inner.senders.push_back(node);
            } else {
                inner.receivers.push_back(node);
            }
        }
        ready
    }

    /// Unregisters a selecting thread's node; frees its heap packet unless the selection was
    /// won through this node (`won`), in which case [`Channel::accept`] took it over.
    pub(crate) fn unregister(&self, node: &Node, sender: bool, won: bool) {
        {
            let mut inner = self.inner.lock();
            // SAFETY: Z1: under the lock; the node was registered in this list.
            unsafe {
                if sender {
                    inner.senders.remove(node);
                } else {
                    inner.receivers.remove(node);
                }
            }
        }
        if !won && node.data != 0 {
            // SAFETY: not claimed through this node (or the claim was abandoned), so nobody
            // else holds the packet; allocated by `Packet::on_heap`.
            drop(unsafe { Box::from_raw(node.data as *mut Packet<T>) });
        }
    }

    /// After a selecting thread was claimed through `node` with `claim`: fills `token` to
    /// complete the operation; false (freeing the packet) if the claim was a disconnection
    /// or carried no message: the select tries again.
    ///
    /// # Safety
    ///
    /// - The selecting thread was claimed through `node` (registered here) and saw `DONE`.
    pub(crate) unsafe fn accept(
        &self,
        token: &mut Token,
        node: &Node,
        sender: bool,
        claim: u32,
    ) -> bool {
        let packet = node.data as *mut Packet<T>;
        if claim & DISCONNECTED != 0 {
            // SAFETY: a disconnection claim leaves the packet with us.
            drop(unsafe { Box::from_raw(packet) });
            return false;
        }
        if !sender {
            // SAFETY: the sender put the message before finishing us (Z2); nobody else holds
            // the packet now.
            if unsafe { (*packet).msg.with(|m| (*m).is_none()) } {
                // SAFETY: as above.
                drop(unsafe { Box::from_raw(packet) });
                return false;
            }
        }
        token.zero = ZeroToken { packet: packet.cast(), waiter: core::ptr::null() };
        true
    }

    /// A selecting thread claimed through `node` cannot complete (it is unwinding, or dropped
    /// its `SelectedOperation`): release the counterpart.
    ///
    /// # Safety
    ///
    /// - As for [`Channel::accept`], and `accept` was not called for this claim.
    pub(crate) unsafe fn abandon(&self, node: &Node, sender: bool, claim: u32) {
        let packet = node.data as *mut Packet<T>;
        if sender && claim & DISCONNECTED == 0 {
            // A receiver waits for our message: release it empty-handed (it retries) and let
            // it free the packet.
            // SAFETY: the packet is alive until the receiver sees `ready`.
            unsafe { (*packet).ready.store(true, Ordering::Release) };
        } else {
            // SAFETY: nobody else holds the packet (a receive's message is dropped with it).
            drop(unsafe { Box::from_raw(packet) });
        }
    }

    /// Releases a reservation that will not be completed (a dropped `SelectedOperation`,
    /// e.g. because a `select!` send arm's message expression panicked). `sender` says which
    /// end reserved it.
    ///
    /// # Safety
    ///
    /// - `token` came from a successful `start_*` or `accept` on this channel for that end and
    ///   was not used since.
    pub(crate) unsafe fn abandon_token(&self, token: &mut Token, sender: bool) {
        let t = core::mem::take(&mut token.zero);
        if t.packet.is_null() {
            return; // disconnected: nothing reserved
        }
        let packet_ptr = t.packet.cast::<Packet<T>>();
        if t.waiter.is_null() {
            // Our own heap packet, claimed through our registration (`accept`).
            if sender {
                // The claiming receiver waits for `ready`: release it empty-handed (it retries
                // and frees the packet).
                // SAFETY: the packet is alive until the receiver sees `ready`.
                unsafe { (*packet_ptr).ready.store(true, Ordering::Release) };
            } else {
                // SAFETY: ours alone (the sender finished us); its message is dropped with it.
                drop(unsafe { Box::from_raw(packet_ptr) });
            }
            return;
        }
        // A counterpart we claimed (`start_*`): finishing it without a transfer makes it retry.
        // SAFETY: the packet is alive: the claimed waiter's (until finished) or a selecting
        // sender's heap packet (freed below).
        let on_heap = unsafe { (*packet_ptr).on_heap };
        // SAFETY: claimed by us, no lock held, last access to the waiter.
        unsafe { Waiter::finish(t.waiter) };
        if on_heap && !sender {
            // A selecting sender puts its message and sets `ready`; the message cannot be
            // delivered any more and is dropped with the packet.
            // SAFETY: the packet is alive until we free it after `ready`.
            unsafe { (*packet_ptr).wait_ready() };
            // SAFETY: allocated by `Packet::on_heap`; we are its last user.
            drop(unsafe { Box::from_raw(packet_ptr) });
        }
    }
}

/// Unlinks a plain send's or receive's node when its wait ends without a claim, or unwinds.
struct Linked<'a, T> {
    chan: &'a Channel<T>,
    node: &'a Node,
    waiter: &'a Waiter,
    sender: bool,
}

impl<T> Drop for Linked<'_, T> {
    fn drop(&mut self) {
        // Normal path: already aborted (no-op). Unwinding: abort now, or learn of a claim.
        let claimed = self.waiter.abort();
        {
            let mut inner = self.chan.inner.lock();
            // SAFETY: Z1: under the lock; the node is ours and was linked in that list.
            unsafe {
                if self.sender {
                    inner.senders.remove(self.node);
                } else {
                    inner.receivers.remove(self.node);
                }
            }
        }
        // A claim consumed while unwinding: a receiver took our message (fine), or a sender
        // gave us one that is dropped with the packet (the receiving green thread is being
        // torn down at shutdown).
        let _ = claimed;
    }
}
