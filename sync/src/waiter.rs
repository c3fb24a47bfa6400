//! The one waiting primitive under every blocking operation of this crate: a [`Waiter`]
//! (who waits and how to wake them) and its [`Node`]s (entries linked into the intrusive wait
//! lists of the objects it waits on), both on the waiting thread's stack.
//!
//! Go calls the node a *sudog*; brpc's butex calls it a `ButexWaiter`. A plain wait (a mutex,
//! a condition variable, a channel receive) links one node; a `select` links one per
//! operation, all pointing at the same waiter. Waiting never allocates.
//!
//! # The protocol
//!
//! A waker that holds the lock of a list in which a node is linked may *claim* the node's
//! waiter (`WAITING => CLAIMED(token)`, one CAS; the token tells the waiter what happened,
//! e.g. which `select` operation won). It then unlinks the node, releases the list's lock,
//! finishes whatever the claim promised (a rendezvous hand-off writes the message into the
//! waiter's packet), and *finishes* the waiter (`CLAIMED => DONE`): that store is its last
//! access to the waiter's memory; it wakes the waiter through a copied handle
//! ([`GreenThread::unpark`], which puts a green thread in the waker's `runnext`) or, for an OS
//! thread, a futex wake through a raw pointer that is never dereferenced.
//!
//! A waiter that gives up (deadline, or a forced unwind at scheduler shutdown) *aborts*
//! (`WAITING => ABORTED`, CAS). If the abort loses, a waker claimed it first, and the waiter
//! waits for `DONE` before it may return (the claim is consumed, or passed on by the caller).
//! Either way the waiter then unlinks every node it still has linked, under each list's lock.
//!
//! So a waker touches a waiter only (a) while holding the lock of a list in which one of its
//! nodes is linked, or (b) between its successful claim and its `DONE` store; and a waiter
//! leaves only when none of its nodes is linked and it is not `CLAIMED`. That is what makes
//! stack-allocated nodes sound, including when the waiting green thread is unwound while it
//! waits ([`Wait`]'s destructor runs the abort path).
//!
//! # Memory ordering
//!
//! The guarantee: everything a waker did before finishing a waiter (its hand-off writes, its
//! release of the list lock, the state changes it made to the object) happens before the
//! waiter's return from [`Waiter::wait`] with that claim.
//!
//! - (W1) The claim CAS (`WAITING => CLAIMED`, AcqRel) and the abort CAS (`WAITING =>
//!   ABORTED`, AcqRel) race on the same word; exactly one wins.
//! - (W2) `finish` stores `DONE` with Release; it pairs with the Acquire load in
//!   `Waiter::wait` / `wait_done` that sees `DONE`.
//! - (W3) Links (`prev`, `next`, `linked`) are read and written only under the list's lock,
//!   whose Acquire/Release (the [`Locked`](super::raw_lock::Locked) lock's L1) orders them.
//!
//! - (I2) An interruptible wait that sees its green thread's interrupt (the interrupter's
//!   Release flag, read with Acquire: sched's I1) aborts first and consumes a one-shot
//!   interrupt only if the abort won: an interrupt is consumed by exactly the wait that
//!   reports it.
//!
//! Wake-ups themselves are ordered by the scheduler (`GreenThread::unpark` before `park`
//! returning: sched's G3) or the futex word (W2 is the word).

use std::time::Instant;

use purloin_parking::futex;
use purloin_sched::{GreenThread, WaitInfo};

use crate::loom::{AtomicU32, Ordering, UnsafeCell};

/// State tags (the low two bits of [`Waiter::state`]); the rest is the claim token.
const WAITING: u32 = 0;
const ABORTED: u32 = 1;
const CLAIMED: u32 = 2;
const DONE: u32 = 3;
const TAG: u32 = 3;

/// The largest token a claim can carry.
pub(crate) const MAX_TOKEN: u32 = u32::MAX >> 2;

/// How a waiter is woken.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Who {
    /// A green thread: `unpark` it.
    Green(GreenThread),
    /// An OS thread asleep in `futex::wait` on the waiter's state word.
    Os,
}

impl Who {
    /// The calling thread.
    #[inline]
    pub(crate) fn current() -> Who {
        match purloin_sched::current() {
            Some(g) => Who::Green(g),
            None => Who::Os,
        }
    }
}

/// One blocking call's waiter (see the module docs). Lives on the waiting thread's stack and
/// must not move while any of its nodes is linked.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// `token << 2 | tag`. Also the futex word an OS waiter sleeps on.
    state: AtomicU32,
    who: Who,
}

impl Waiter {
    /// A waiter for the calling thread.
    #[inline]
    pub(crate) fn new() -> Waiter {
        Waiter { state: AtomicU32::new(WAITING), who: Who::current() }
    }

    /// Claims this waiter with `token` (see the module docs). Returns false if it is no longer
    /// waiting (aborted, or claimed through another node).
    ///
    /// The caller holds the lock of a list in which a node of this waiter is linked, and if
    /// this returns true it must unlink that node before releasing the lock and call
    /// [`Waiter::finish`] after.
    #[inline]
    pub(crate) fn try_claim(&self, token: u32) -> bool {
        debug_assert!(token <= MAX_TOKEN);
        // W1: AcqRel; races the waiter's abort CAS on the same word.
        self.state
            .compare_exchange(WAITING, token << 2 | CLAIMED, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether a claim could still succeed (a racy hint for readiness checks).
    #[inline]
    pub(crate) fn is_waiting(&self) -> bool {
        self.state.load(Ordering::Relaxed) & TAG == WAITING
    }

    /// Completes a claim: publishes `DONE` and wakes the waiter. This is the claimer's last
    /// access to the waiter.
    ///
    /// # Safety
    ///
    /// - `this` points to a waiter that the caller claimed with [`Waiter::try_claim`] and has
    ///   not finished yet (so the waiter is alive: it waits for `DONE` before it leaves).
    /// - The caller no longer holds any lock of a list the waiter's nodes are linked in, and
    ///   does not touch the waiter or its nodes after this call.
    #[inline]
    pub(crate) unsafe fn finish(this: *const Waiter) {
        // SAFETY: by the first obligation the waiter is alive until the store below.
        let (who, word, claimed) = unsafe {
            let w = &*this;
            (w.who, &w.state as *const AtomicU32, w.state.load(Ordering::Relaxed))
        };
        debug_assert_eq!(claimed & TAG, CLAIMED);
        // SAFETY: still alive (the waiter only leaves after it sees DONE, which is this store).
        // W2: Release pairs with the waiter's Acquire load of DONE.
        unsafe { (*word).store(claimed | DONE, Ordering::Release) };
        match who {
            Who::Green(g) => {
                g.unpark();
            }
            Who::Os => {
                // Never dereferenced: the waiter may already be gone (parking's contract).
                futex::wake_one(word);
            }
        }
    }

    /// Blocks until a waker finishes this waiter (returns its token) or `deadline` passes and
    /// the abort wins (`Gave::TimedOut`). `info` is recorded for deadlock reports while a green
    /// thread is parked.
    ///
    /// Unless `on` is [`OnInterrupt::Ignore`], a green thread's pending or held interrupt (see
    /// `GreenThread::interrupt`) ends the wait too: the abort is tried, and if it wins the
    /// wait returns `Gave::Interrupted` and, for [`OnInterrupt::Report`], consumes a one-shot
    /// interrupt (I2); if a waker
    /// claimed the waiter first, the wait returns that claim and the interrupt stays pending
    /// for the next wait. So an interrupt racing a wake-up and a deadline has exactly one
    /// outcome (the abort CAS, W1, decides).
    ///
    /// Returns at once with the token if already claimed. May unwind (a forced unwind at
    /// scheduler shutdown comes out of `park`): callers keep their nodes in a guard that aborts
    /// and unlinks (see [`Wait`]).
    #[inline]
    pub(crate) fn wait(
        &self,
        deadline: Option<Instant>,
        info: Option<WaitInfo>,
        on: OnInterrupt,
    ) -> Result<u32, Gave> {
        let _info = WaitInfoGuard::set(&self.who, info);
        #[cfg(loom)]
        let mut yielded = false;
        loop {
            // W2: Acquire pairs with `finish`'s Release.
            let state = self.state.load(Ordering::Acquire);
            match state & TAG {
                DONE => return Ok(state >> 2),
                ABORTED => unreachable!("purloin_sync: waiting on an aborted waiter"),
                _ => {}
            }
            let waiting = state & TAG == WAITING;
            // Only a wait that can still be aborted reacts to an interrupt. Checked before
            // every park: an interrupt that arrives while parked wakes the park, and one that
            // came before it (its token possibly taken by an earlier park) is seen here.
            if on != OnInterrupt::Ignore
                && waiting
                && let Who::Green(g) = self.who
                && g.is_interrupted()
            {
                return self.abort_interrupted(&g, on);
            }
            let deadline = if waiting { deadline } else { None };
            match self.who {
                Who::Green(_) => match deadline {
                    None => purloin_sched::park(),
                    Some(d) => {
                        // Under loom a deadline may pass at any point: yield once (let others
                        // run), then treat it as passed.
                        #[cfg(loom)]
                        let passed = core::mem::replace(&mut yielded, true);
                        #[cfg(not(loom))]
                        let passed = Instant::now() >= d;
                        if passed {
                            return self.abort().ok_or(Gave::TimedOut);
                        }
                        #[cfg(loom)]
                        {
                            let _ = d;
                            purloin_sched::yield_now();
                        }
                        #[cfg(not(loom))]
                        purloin_sched::park_deadline(d);
                    }
                },
                Who::Os => {
                    if futex::wait(&self.state, state, deadline) == futex::WaitResult::TimedOut {
                        return self.abort().ok_or(Gave::TimedOut);
                    }
                }
            }
        }
    }

    /// An interrupt ended the wait of green thread `g`: aborts, and if the abort wins,
    /// consumes a one-shot interrupt (I2: after the abort, so an interrupt is consumed only
    /// by a wait that reports it; a claim that won keeps it pending for the next wait).
    #[cold]
    fn abort_interrupted(&self, g: &GreenThread, on: OnInterrupt) -> Result<u32, Gave> {
        match self.abort() {
            Some(token) => Ok(token),
            None => {
                if on == OnInterrupt::Report {
                    g.take_interrupt();
                }
                Err(Gave::Interrupted)
            }
        }
    }

    /// Gives up waiting: `None` if nobody had claimed this waiter (now nobody can; also if it
    /// had already given up), or the token of the claim that won (after waiting for its
    /// `DONE`).
    pub(crate) fn abort(&self) -> Option<u32> {
        // W1: AcqRel; races the claim CAS.
        match self.state.compare_exchange(WAITING, ABORTED, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => None,
            Err(s) if s & TAG == ABORTED => None,
            Err(_) => Some(self.wait_done()),
        }
    }

    /// Waits (without a deadline) for the claimer's `DONE`; the claimer is between its claim
    /// and its finish, a few instructions plus a hand-off copy.
    fn wait_done(&self) -> u32 {
        loop {
            // W2: Acquire pairs with `finish`'s Release.
            let state = self.state.load(Ordering::Acquire);
            if state & TAG == DONE {
                return state >> 2;
            }
            match self.who {
                // The claimer unparks us after DONE; a park that returns early just loops.
                Who::Green(_) => purloin_sched::park(),
                Who::Os => {
                    futex::wait(&self.state, state, None);
                }
            }
        }
    }
}

/// What an interrupt of the waiting green thread does to a [`Waiter::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnInterrupt {
    /// Nothing: the wait is not interruptible (locks, `Once`, barriers).
    Ignore,
    /// Ends the wait, which reports it (an error the caller returns) and consumes it.
    Report,
    /// Ends the wait early and leaves the interrupt pending: for waits whose std-shaped
    /// result cannot say "interrupted" (a condition variable's spurious wake-up).
    Leave,
}

/// Why [`Waiter::wait`] gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gave {
    /// The deadline passed first.
    TimedOut,
    /// The green thread was interrupted (an interruptible wait only).
    Interrupted,
}

/// Records what a green thread waits on for deadlock reports, and clears it when
/// the wait ends (also when it unwinds).
struct WaitInfoGuard(Option<GreenThread>);

impl WaitInfoGuard {
    #[inline]
    fn set(who: &Who, info: Option<WaitInfo>) -> WaitInfoGuard {
        match (who, info) {
            (Who::Green(g), Some(info)) => {
                g.set_own_wait_info(Some(info));
                WaitInfoGuard(Some(*g))
            }
            _ => WaitInfoGuard(None),
        }
    }
}

impl Drop for WaitInfoGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(g) = self.0 {
            g.set_own_wait_info(None);
        }
    }
}

/// An entry of an intrusive wait list: one node per object a waiter waits on. Lives on the
/// waiting thread's stack; must not move while linked.
pub(crate) struct Node {
    /// Previous node in the list, null at the head (W3: under the list's lock).
    prev: UnsafeCell<*const Node>,
    /// Next node in the list, null at the tail (W3). Also chains claimed nodes between a
    /// waker's unlock and its finishes (owned by the waker then).
    next: UnsafeCell<*const Node>,
    /// Whether the node is in a list (W3).
    linked: UnsafeCell<bool>,
    /// The waiter this node belongs to.
    pub(crate) waiter: *const Waiter,
    /// The token a claim through this node carries (a `select` operation's index).
    pub(crate) token: u32,
    /// What the waiter asks for, for the list's owner (a packet pointer, a permit count).
    pub(crate) data: usize,
}

// SAFETY: the raw pointers name nodes and waiters on other threads' stacks that are only
// dereferenced under the protocol of the module docs (list lock held, or claim held).
unsafe impl Send for Node {}
// SAFETY: as for `Send`; shared access goes through the list lock.
unsafe impl Sync for Node {}

impl Node {
    /// A node of `waiter` carrying `token` and `data`.
    #[inline]
    pub(crate) fn new(waiter: &Waiter, token: u32, data: usize) -> Node {
        Node {
            prev: UnsafeCell::new(core::ptr::null()),
            next: UnsafeCell::new(core::ptr::null()),
            linked: UnsafeCell::new(false),
            waiter,
            token,
            data,
        }
    }

    /// The node's waiter.
    #[inline]
    pub(crate) fn waiter(&self) -> &Waiter {
        // SAFETY: a node never outlives its waiter (both on the same stack frame, the node
        // declared after the waiter), and nodes are only reached while linked or claimed,
        // during which the waiter stays (module docs).
        unsafe { &*self.waiter }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nobody else can reach the node any more if it is unlinked; if
        // it is still linked this is a bug we report before memory goes bad.
        let linked = self.linked.with(|l| unsafe { *l });
        if linked {
            // A linked node freed would be a use-after-free for the next waker: stop here.
            eprintln!("purloin_sync: internal error: a wait node was dropped while linked");
            std::process::abort();
        }
    }
}

/// An intrusive doubly linked list of [`Node`]s, oldest first. Only touched under its owner's
/// lock (W3).
pub(crate) struct List {
    head: *const Node,
    tail: *const Node,
    len: usize,
}

// SAFETY: the list's pointers are only followed under the owning lock (W3), by whichever
// thread holds it.
unsafe impl Send for List {}

impl Default for List {
    fn default() -> Self {
        List::new()
    }
}

impl List {
    /// An empty list.
    pub(crate) const fn new() -> List {
        List { head: core::ptr::null(), tail: core::ptr::null(), len: 0 }
    }

    /// Number of linked nodes (including ones whose waiter already gave up).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The oldest node.
    #[inline]
    pub(crate) fn front(&self) -> Option<&Node> {
        // SAFETY: linked nodes are alive (their waiters unlink them before leaving), and we
        // are under the list's lock.
        unsafe { self.head.as_ref() }
    }

    /// The node after `node` (which must be linked in this list).
    #[inline]
    pub(crate) fn next_of(&self, node: &Node) -> Option<&Node> {
        // SAFETY: W3: under the list's lock; linked nodes are alive.
        unsafe { node.next.with(|n| (*n).as_ref()) }
    }

    /// Links `node` at the back.
    ///
    /// # Safety
    ///
    /// - `node` is not linked in any list, and stays at its address until it is unlinked.
    /// - The caller holds this list's lock.
    pub(crate) unsafe fn push_back(&mut self, node: &Node) {
        let ptr: *const Node = node;
        // SAFETY: W3: we hold the lock; the obligations make the pointers valid.
        unsafe {
            debug_assert!(!node.linked.with(|l| *l));
            node.prev.with_mut(|p| *p = self.tail);
            node.next.with_mut(|n| *n = core::ptr::null());
            node.linked.with_mut(|l| *l = true);
            match self.tail.as_ref() {
                Some(t) => t.next.with_mut(|n| *n = ptr),
                None => self.head = ptr,
            }
        }
        self.tail = ptr;
        self.len += 1;
    }

    /// Links `node` at the front (a waiter that already waited and lost a race: Go queues such
    /// mutex waiters first).
    ///
    /// # Safety
    ///
    /// - As for [`List::push_back`].
    pub(crate) unsafe fn push_front(&mut self, node: &Node) {
        let ptr: *const Node = node;
        // SAFETY: W3: we hold the lock; the obligations make the pointers valid.
        unsafe {
            debug_assert!(!node.linked.with(|l| *l));
            node.prev.with_mut(|p| *p = core::ptr::null());
            node.next.with_mut(|n| *n = self.head);
            node.linked.with_mut(|l| *l = true);
            match self.head.as_ref() {
                Some(h) => h.prev.with_mut(|p| *p = ptr),
                None => self.tail = ptr,
            }
        }
        self.head = ptr;
        self.len += 1;
    }

    /// Unlinks `node` if it is linked (in this list); returns whether it was.
    ///
    /// # Safety
    ///
    /// - If `node` is linked, it is linked in this list.
    /// - The caller holds this list's lock.
    pub(crate) unsafe fn remove(&mut self, node: &Node) -> bool {
        // SAFETY: W3: we hold the lock; linked neighbours are alive.
        unsafe {
            if !node.linked.with(|l| *l) {
                return false;
            }
            let prev = node.prev.with(|p| *p);
            let next = node.next.with(|n| *n);
            match prev.as_ref() {
                Some(p) => p.next.with_mut(|n| *n = next),
                None => self.head = next,
            }
            match next.as_ref() {
                Some(n) => n.prev.with_mut(|p| *p = prev),
                None => self.tail = prev,
            }
            node.linked.with_mut(|l| *l = false);
        }
        self.len -= 1;
        true
    }

    /// Claims the oldest node whose waiter is still waiting and is not `skip`, with the token
    /// `token_of(node)`, unlinks it, and adds it to `claimed`.
    /// Nodes of waiters that gave up are unlinked on the way (their owners find them gone).
    /// Returns the claimed node.
    ///
    /// # Safety
    ///
    /// - The caller holds this list's lock, and finishes `claimed` after releasing it.
    pub(crate) unsafe fn claim_one(
        &mut self,
        skip: *const Waiter,
        token_of: impl Fn(&Node) -> u32,
        claimed: &mut Claimed,
    ) -> Option<*const Node> {
        let mut at = self.head;
        // SAFETY: W3: under the lock; linked nodes are alive.
        while let Some(node) = unsafe { at.as_ref() } {
            // SAFETY: W3: under the lock.
            let next = node.next.with(|n| unsafe { *n });
            if node.waiter != skip {
                if node.waiter().try_claim(token_of(node)) {
                    // SAFETY: linked here; we hold the lock.
                    unsafe { self.remove(node) };
                    claimed.push(node);
                    return Some(node);
                }
                if !node.waiter().is_waiting() {
                    // Aborted or claimed elsewhere: dead here. Unlinking it is fine (its owner
                    // checks `linked` under this lock).
                    // SAFETY: linked here; we hold the lock.
                    unsafe { self.remove(node) };
                }
            }
            at = next;
        }
        None
    }

    /// Claims `node` with `token` and unlinks it into `claimed`; if its waiter no longer waits,
    /// unlinks it and returns false.
    ///
    /// # Safety
    ///
    /// - `node` is linked in this list, and the caller holds this list's lock and finishes
    ///   `claimed` after releasing it.
    pub(crate) unsafe fn claim_node(
        &mut self,
        node: &Node,
        token: u32,
        claimed: &mut Claimed,
    ) -> bool {
        let won = node.waiter().try_claim(token);
        // SAFETY: linked here (first obligation); we hold the lock.
        unsafe { self.remove(node) };
        if won {
            claimed.push(node);
        }
        won
    }

    /// Whether some node's waiter, other than `skip`, is still waiting (a claim could succeed).
    pub(crate) fn has_waiting(&self, skip: *const Waiter) -> bool {
        let mut at = self.front();
        while let Some(node) = at {
            if node.waiter != skip && node.waiter().is_waiting() {
                return true;
            }
            at = self.next_of(node);
        }
        false
    }
}

/// Nodes a waker claimed under a list's lock, to finish after releasing it.
pub(crate) struct Claimed {
    head: *const Node,
    tail: *const Node,
}

impl Default for Claimed {
    fn default() -> Self {
        Claimed::new()
    }
}

impl Claimed {
    /// Nothing claimed yet.
    #[inline]
    pub(crate) const fn new() -> Claimed {
        Claimed { head: core::ptr::null(), tail: core::ptr::null() }
    }

    fn push(&mut self, node: &Node) {
        let ptr: *const Node = node;
        // The claimer owns the claimed (unlinked) node's `next` until it finishes the waiter.
        // SAFETY: the node is claimed by us and unlinked; nobody else writes its links.
        node.next.with_mut(|n| unsafe { *n = core::ptr::null() });
        // SAFETY: as above for the previous tail, also claimed by us and not finished yet.
        match unsafe { self.tail.as_ref() } {
            // SAFETY: the tail is claimed by us too; only we touch its links.
            Some(t) => t.next.with_mut(|n| unsafe { *n = ptr }),
            None => self.head = ptr,
        }
        self.tail = ptr;
    }

    /// Takes the first claimed node (the caller must finish its waiter).
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<*const Node> {
        let node = self.head;
        // SAFETY: claimed nodes are alive until finished, and only we touch their links.
        let n = unsafe { node.as_ref() }?;
        // SAFETY: as above.
        self.head = n.next.with(|p| unsafe { *p });
        if self.head.is_null() {
            self.tail = core::ptr::null();
        }
        Some(node)
    }

    /// Finishes every claimed waiter (see [`Waiter::finish`]); returns how many.
    ///
    /// # Safety
    ///
    /// - Every node was claimed by the caller, which holds no list lock now.
    pub(crate) unsafe fn finish_all(&mut self) -> usize {
        let mut n = 0;
        while let Some(node) = self.pop() {
            // SAFETY: claimed and not finished, so the node and its waiter are alive; read the
            // waiter pointer before `finish`, after which neither may be touched.
            unsafe { Waiter::finish((*node).waiter) };
            n += 1;
        }
        n
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        // Claimed waiters must always be finished, or they would wait forever; finishing them
        // here also covers a panic between claim and finish (none is expected).
        // SAFETY: dropped outside any list lock (guards are declared after `Claimed`).
        unsafe { self.finish_all() };
    }
}
