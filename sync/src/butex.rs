//! [`Butex`]: brpc's butex — a 32-bit word that green threads and OS threads can both wait
//! on — and the [`WaitQueue`] under it, which the other primitives of this crate also use
//! directly.
//!
//! # Memory ordering
//!
//! The guarantee is the futex contract: a waiter that found the word equal to `expected` and
//! went to sleep is found by any wake issued after a later change of the word. Nothing else is
//! ordered by the butex itself; publish data through the word (Release store, Acquire load) or
//! through the claim (W2 of the waiter protocol).
//!
//! - (B1) `wait` links its node and publishes the queue length (`len`), then runs a
//!   `fence(SeqCst)`, then reads the word; `wake` runs a `fence(SeqCst)` after the caller's
//!   change of the word and before reading `len`. Either the waiter's fence comes first in the
//!   SeqCst order and the waker sees `len > 0` (and takes the lock, which orders everything
//!   else), or the waker's fence comes first and the waiter reads the changed word and does
//!   not sleep. This is what lets a wake with nobody waiting skip the lock.
//! - (B2) The link and the check happen under the queue's lock; a waker that takes the lock
//!   after a waiter linked finds the node (L1 of the lock).

use core::fmt;
use std::time::{Duration, Instant};

use purloin_sched::{WaitInfo, WaitKind};

use crate::loom::{AtomicU32, AtomicUsize, Ordering, fence};
use crate::raw_lock::{Locked, LockedGuard};
use crate::waiter::{Claimed, Gave, List, Node, OnInterrupt, Waiter};

/// A list of waiting threads with a lock-free "anyone waiting?" hint (see the module docs).
pub(crate) struct WaitQueue {
    list: Locked<List>,
    /// The number of linked nodes, written under the lock after every change (B1).
    len: AtomicUsize,
}

/// How a [`WaitQueue::wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waited {
    /// A waker claimed this waiter with the token.
    Claimed(u32),
    /// The deadline passed first.
    TimedOut,
    /// The green thread was interrupted first (see [`OnInterrupt`]).
    Interrupted,
    /// `validate` returned false: the waiter did not sleep.
    Invalid,
}

impl WaitQueue {
    loom_const_fn! {
        pub(crate) fn new() -> WaitQueue {
            WaitQueue { list: Locked::new(List::new()), len: AtomicUsize::new(0) }
        }
    }

    /// Links a node carrying `data` for the calling thread (at the front if `front`), runs
    /// `validate` (under the lock, after B1's fence), and if it returns true waits until a
    /// waker claims the node, `deadline` passes, or (as `on` says) the green thread is
    /// interrupted.
    ///
    /// `validate` must not take this queue's lock. If the waiter is unwound (a forced unwind at
    /// scheduler shutdown) while it waits, `on_unwind` runs during the unwind after the node is
    /// unlinked, with the token if a waker had claimed it, so the caller can pass the claim on
    /// (wake someone else, release a handed-off lock).
    pub(crate) fn wait(
        &self,
        data: usize,
        front: bool,
        validate: impl FnOnce() -> bool,
        (deadline, on): (Option<Instant>, OnInterrupt),
        info: Option<WaitInfo>,
        on_unwind: impl FnOnce(Option<u32>),
    ) -> Waited {
        let waiter = Waiter::new();
        let node = Node::new(&waiter, 0, data);
        {
            let mut list = self.list.lock();
            // SAFETY: the node is fresh and stays in this frame until unlinked (the guard
            // below unlinks it on every exit path); we hold the lock.
            unsafe {
                if front {
                    list.push_front(&node);
                } else {
                    list.push_back(&node);
                }
            }
            self.len.store(list.len(), Ordering::Relaxed);
            // B1: orders the `len` store before `validate`'s loads; pairs with the fence in
            // `has_waiters`.
            fence(Ordering::SeqCst);
            if !validate() {
                // SAFETY: linked here just above; we hold the lock.
                unsafe { list.remove(&node) };
                self.len.store(list.len(), Ordering::Relaxed);
                return Waited::Invalid;
            }
        }
        let guard = UnlinkOnUnwind {
            queue: self,
            node: &node,
            waiter: &waiter,
            on_unwind: Some(on_unwind),
        };
        let result = waiter.wait(deadline, info, on);
        guard.disarm();
        match result {
            // The claimer unlinked the node.
            Ok(token) => Waited::Claimed(token),
            Err(gave) => {
                self.unlink(&node);
                match gave {
                    Gave::TimedOut => Waited::TimedOut,
                    Gave::Interrupted => Waited::Interrupted,
                }
            }
        }
    }

    /// Unlinks `node` (of this queue) if it is still linked.
    fn unlink(&self, node: &Node) {
        let mut list = self.list.lock();
        // SAFETY: nodes of this queue are only ever linked in this queue; we hold the lock.
        if unsafe { list.remove(node) } {
            self.len.store(list.len(), Ordering::Relaxed);
        }
    }

    /// Whether a thread may be waiting (B1: call after changing the state waiters check).
    #[inline]
    pub(crate) fn has_waiters(&self) -> bool {
        // B1: pairs with the waiter's fence in `wait`.
        fence(Ordering::SeqCst);
        self.len.load(Ordering::Relaxed) != 0
    }

    /// Claims up to `n` waiting threads (oldest first) with `token` and wakes them; returns how
    /// many. Does not consult the hint: callers that may have nobody waiting check
    /// [`WaitQueue::has_waiters`] first.
    pub(crate) fn wake(&self, n: usize, token: u32) -> usize {
        let mut claimed = Claimed::new();
        {
            let mut q = self.lock();
            for _ in 0..n {
                if q.claim_one(token, &mut claimed).is_none() {
                    break;
                }
            }
        }
        // SAFETY: claimed by us above; the lock is released.
        unsafe { claimed.finish_all() }
    }

    /// Locks the queue for a custom wake (the caller claims nodes and finishes them after the
    /// guard is dropped).
    #[inline]
    pub(crate) fn lock(&self) -> QueueGuard<'_> {
        QueueGuard { queue: self, list: self.list.lock() }
    }
}

/// A locked [`WaitQueue`].
pub(crate) struct QueueGuard<'a> {
    queue: &'a WaitQueue,
    list: LockedGuard<'a, List>,
}

impl QueueGuard<'_> {
    /// Claims the oldest waiting node with `token` and unlinks it into `claimed` (finish it
    /// after dropping this guard). Returns the node's `data`.
    #[inline]
    pub(crate) fn claim_one(&mut self, token: u32, claimed: &mut Claimed) -> Option<usize> {
        // SAFETY: we hold the lock; the caller finishes `claimed` after dropping the guard
        // (every caller declares `claimed` before the guard, so it is dropped — and finished —
        // after the guard even on a panic).
        let node = unsafe { self.list.claim_one(core::ptr::null(), |_| token, claimed) };
        self.queue.len.store(self.list.len(), Ordering::Relaxed);
        // SAFETY: the claimed node is alive until we finish it.
        node.map(|n| unsafe { (*n).data })
    }

    /// Claims the oldest waiting node if `accept(data)` returns `Some(token)` for it, and
    /// unlinks it into `claimed`; returns the node's data. Nodes whose waiters gave up are
    /// dropped on the way.
    pub(crate) fn claim_front_if(
        &mut self,
        claimed: &mut Claimed,
        mut accept: impl FnMut(usize) -> Option<u32>,
    ) -> Option<usize> {
        loop {
            let node: *const Node = self.list.front()?;
            // SAFETY: linked (the front) and we hold the lock, so it is alive.
            let node = unsafe { &*node };
            let data = node.data;
            if node.waiter().is_waiting() {
                let token = accept(data)?;
                // SAFETY: linked here; we hold the lock; `claimed` is finished after the
                // guard is dropped (see `claim_one`).
                if unsafe { self.list.claim_node(node, token, claimed) } {
                    self.queue.len.store(self.list.len(), Ordering::Relaxed);
                    return Some(data);
                }
                // It gave up between the check and the claim; `claim_node` unlinked it.
            } else {
                // SAFETY: linked here; we hold the lock.
                unsafe { self.list.remove(node) };
            }
            self.queue.len.store(self.list.len(), Ordering::Relaxed);
        }
    }

    /// Number of linked nodes (including ones whose waiters gave up).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether a waiting (not given up) thread is linked.
    #[inline]
    pub(crate) fn has_waiting(&self) -> bool {
        self.list.has_waiting(core::ptr::null())
    }
}

/// Unlinks a waiter's node if its wait unwinds (forced unwind at scheduler shutdown), passing on
/// a claim it can no longer use.
struct UnlinkOnUnwind<'a, F: FnOnce(Option<u32>)> {
    queue: &'a WaitQueue,
    node: &'a Node,
    waiter: &'a Waiter,
    on_unwind: Option<F>,
}

impl<F: FnOnce(Option<u32>)> UnlinkOnUnwind<'_, F> {
    fn disarm(mut self) {
        self.on_unwind = None;
        core::mem::forget(self);
    }
}

impl<F: FnOnce(Option<u32>)> Drop for UnlinkOnUnwind<'_, F> {
    fn drop(&mut self) {
        // Only reached while unwinding out of `Waiter::wait`.
        let claimed = self.waiter.abort();
        self.queue.unlink(self.node);
        if let Some(on_unwind) = self.on_unwind.take() {
            on_unwind(claimed);
        }
    }
}

/// How a [`Butex::wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ButexWait {
    /// A wake found this waiter. (Like a futex, a butex can be woken for a change that was
    /// undone since: re-read the word.)
    Woken,
    /// The deadline passed first.
    TimedOut,
    /// The word did not hold `expected`, so the caller did not sleep.
    ValueChanged,
    /// The waiting green thread was interrupted
    /// ([`GreenThread::interrupt`](purloin_sched::GreenThread::interrupt), or a cancelled
    /// token it runs under); a one-shot interrupt is consumed by this wait.
    Interrupted,
}

/// A futex-like word that both green threads and OS threads can wait on (brpc's *butex*).
///
/// [`wait`](Butex::wait) blocks while the word holds an expected value: a green thread parks
/// (its worker runs other green threads), an OS thread sleeps on a futex; both kinds wait in
/// the same FIFO queue. [`wake_one`](Butex::wake_one), [`wake`](Butex::wake) and
/// [`wake_all`](Butex::wake_all) wake them; a wake issued by a green thread puts the woken green
/// thread in the waker's `runnext`, so a pair that hands work back and forth runs as a unit.
/// Every other primitive of [this crate](crate) is built on this queue.
///
/// The contract is the futex's: the check "does the word hold `expected`?" and the enqueueing
/// happen atomically with respect to wakes, so a change of the word followed by a wake is never
/// lost. Waiting does not allocate (the waiter's queue entry lives on its stack).
///
/// # Examples
///
/// A one-shot event between a green thread and the main thread:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::Ordering;
/// use purloin_sync::Butex;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let event = Arc::new(Butex::new(0));
/// let e = event.clone();
/// let waiter = sched.spawn(move || {
///     while e.value().load(Ordering::Acquire) == 0 {
///         e.wait(0, None); // parks this green thread
///     }
/// });
/// event.value().store(1, Ordering::Release);
/// event.wake_all();
/// waiter.join().unwrap();
/// ```
pub struct Butex {
    value: AtomicU32,
    queue: WaitQueue,
}

impl Butex {
    loom_const_fn! {
        /// A butex holding `value`, with nobody waiting.
        pub fn new(value: u32) -> Butex {
            Butex { value: AtomicU32::new(value), queue: WaitQueue::new() }
        }
    }

    /// The word. Change it, then wake: a waiter that checked the old value before the change
    /// is found by the wake.
    #[inline]
    pub fn value(&self) -> &AtomicU32 {
        &self.value
    }

    /// If the word holds `expected`, blocks the calling green thread (or OS thread) until a
    /// wake finds it or `deadline` passes.
    ///
    /// Returns [`ButexWait::ValueChanged`] without blocking if the word does not hold
    /// `expected`, and [`ButexWait::Interrupted`] if the calling green thread is interrupted
    /// before a wake finds it (brpc's `EINTR`). A wake may be for a change that was undone since, and a wait may end for a
    /// wake meant for another value (as with a futex): callers loop on their condition.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use purloin_sync::{Butex, ButexWait};
    ///
    /// let b = Butex::new(7);
    /// assert_eq!(b.wait(0, None), ButexWait::ValueChanged);
    /// let soon = Instant::now() + Duration::from_millis(5);
    /// assert_eq!(b.wait(7, Some(soon)), ButexWait::TimedOut);
    /// ```
    pub fn wait(&self, expected: u32, deadline: Option<Instant>) -> ButexWait {
        self.wait_as(expected, deadline, WaitKind::Park, OnInterrupt::Report)
    }

    /// [`wait`](Butex::wait) for at most `timeout`.
    pub fn wait_timeout(&self, expected: u32, timeout: Duration) -> ButexWait {
        self.wait(expected, Instant::now().checked_add(timeout))
    }

    /// `wait` recording `kind` for deadlock reports.
    pub(crate) fn wait_as(
        &self,
        expected: u32,
        deadline: Option<Instant>,
        kind: WaitKind,
        on: OnInterrupt,
    ) -> ButexWait {
        self.wait_with(
            expected,
            deadline,
            crate::diagnostics::wait_info(kind, self, None),
            on,
            |claimed| {
                if claimed.is_some() {
                    // Unwound after a wake chose us: give the wake to the next waiter.
                    self.wake_one();
                }
            },
        )
    }

    /// `wait` with explicit deadlock info and what to do when unwound while waiting (see
    /// [`WaitQueue::wait`]).
    pub(crate) fn wait_with(
        &self,
        expected: u32,
        deadline: Option<Instant>,
        info: Option<WaitInfo>,
        on: OnInterrupt,
        on_unwind: impl FnOnce(Option<u32>),
    ) -> ButexWait {
        if self.value.load(Ordering::Relaxed) != expected {
            return ButexWait::ValueChanged;
        }
        let validate = || self.value.load(Ordering::Relaxed) == expected;
        match self.queue.wait(0, false, validate, (deadline, on), info, on_unwind) {
            Waited::Claimed(_) => ButexWait::Woken,
            Waited::TimedOut => ButexWait::TimedOut,
            Waited::Interrupted => ButexWait::Interrupted,
            Waited::Invalid => ButexWait::ValueChanged,
        }
    }

    /// The number of threads queued right now (a racy snapshot, for diagnostics and tests;
    /// it may include a waiter that is just giving up).
    pub fn waiters(&self) -> usize {
        self.queue.len.load(Ordering::Relaxed)
    }

    /// Wakes the longest-waiting thread; returns how many were woken (0 or 1).
    #[inline]
    pub fn wake_one(&self) -> usize {
        self.wake(1)
    }

    /// Wakes every waiting thread; returns how many.
    #[inline]
    pub fn wake_all(&self) -> usize {
        self.wake(usize::MAX)
    }

    /// Wakes up to `n` waiting threads, oldest first; returns how many. Costs a fence and a
    /// load when nobody waits.
    pub fn wake(&self, n: usize) -> usize {
        if n == 0 || !self.queue.has_waiters() {
            return 0;
        }
        self.queue.wake(n, 0)
    }

    /// The queue (for primitives built on this butex).
    #[inline]
    pub(crate) fn queue(&self) -> &WaitQueue {
        &self.queue
    }
}

impl Default for Butex {
    fn default() -> Self {
        Butex::new(0)
    }
}

impl fmt::Debug for Butex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Butex")
            .field("value", &self.value.load(Ordering::Relaxed))
            .field("waiters", &self.queue.len.load(Ordering::Relaxed))
            .finish()
    }
}
