//! One direction (read or write) of a registered socket: a readiness counter the poller bumps
//! on every edge, and the green threads waiting for the next edge.
//!
//! Edge-triggered epoll reports a change once. A green thread that tried the syscall, got
//! `WouldBlock` and then parks must not sleep through an edge that arrived in between. So the
//! waiter takes a [`Snapshot`] of the counter *before* the syscall and registers with that
//! snapshot: if the counter moved since, registration fails and the caller retries the
//! syscall instead of parking (Go's `pollDesc.rg`, with a sequence number instead of the
//! `pdReady` token so any number of edges collapse into "something happened since").
//!
//! ```text
//!  waiter (green thread)                      poller (a worker in epoll_wait)
//!  ─────────────────────────────────────      ─────────────────────────────────────
//!  s = snapshot()                   (P1 acq)  edge for this fd
//!  syscall → WouldBlock                       old = state.fetch_add(SEQ)  (P1 rel)
//!  lock; push (s.seq, me);                    if old & WAITING:
//!  old = fetch_or(WAITING)                      lock; pop the oldest waiter if it
//!    if old.seq != s.seq or CLOSED:               registered before this edge;
//!      pop me; unlock; retry the syscall          clear WAITING if none left; unlock
//!  unlock                                       unpark it
//!  park until state.seq != s.seq or CLOSED
//!  deregister (lock; remove me if still there)
//!  retry the syscall
//! ```
//!
//! Every edge wakes at most one waiter (no thundering herd on a listener that many green
//! threads accept on), and only one that registered *before* the edge: a poller that was
//! slow to take the lock must not pop a registration made after its edge was counted (that
//! waiter saw the edge itself; popping it would leave it parked and unregistered). The woken waiter may consume only part of the readiness (one of five
//! pending connections), and no new edge will come for the rest; so whoever finishes an
//! operation (success or error, not `WouldBlock`) while others wait passes the baton: it
//! fires once more on their behalf ([`Readiness::pass_baton`]). A spurious edge costs one
//! retried syscall; a lost one would hang a green thread, so the protocol errs on the
//! spurious side everywhere.
//!
//! # Memory ordering
//!
//! The guarantee: a waiter that parks with snapshot `s` is woken by the first edge counted
//! after `s` (or by `close`), and an edge counted *in* `s` has its readiness visible to the
//! syscall the waiter makes after taking `s`.
//!
//! - (P1) `fire`'s `fetch_add` (Release) → `snapshot` / `changed_since` (Acquire): an edge
//!   the waiter sees counted happened after the readiness it reports (the poller learned of
//!   it from the kernel first), so the waiter's next syscall sees that readiness. Mutation
//!   check: with a Relaxed snapshot, the `snapshot_sees_edge_data` model fails (the waiter
//!   parks forever with a snapshot that already counts the only edge).
//! - (P2) `close`'s `fetch_or(CLOSED)` (Release) → the same loads (Acquire): a waiter that
//!   sees `CLOSED` sees everything the closer did before closing.
//! - No fence is needed between registering and firing: the waiter's `fetch_or(WAITING)` and
//!   the poller's `fetch_add` are read-modify-writes of one word, so they are totally ordered.
//!   If the `fetch_or` comes first, the poller sees `WAITING` and takes the lock, which it
//!   can only get after the waiter's critical section (the push) ends. If the `fetch_add`
//!   comes first, the waiter's `fetch_or` returns the new sequence number and the waiter
//!   retries. The waiter list and the `WAITING` bit change only under the list's lock, so
//!   `WAITING` set ⇔ list non-empty whenever the lock is free.
//! - Two checks stand between a waiter and a lost edge: `register` refuses a stale snapshot,
//!   and the waiter tests `changed_since` before every park. Either alone suffices (loom
//!   passes with either one removed); the first saves a park, the second covers a waiter
//!   that registered before the edge but had not parked yet. Removing both makes
//!   `waiter_vs_edge` fail with a deadlock.

use std::collections::VecDeque;

use crate::loom::{AtomicU64, Mutex, Ordering, lock};

/// Bit 0 of the state word: the waiter list is (or may be about to be) non-empty.
const WAITING: u64 = 1;
/// Bit 1: the socket was closed; every wait ends with an error.
const CLOSED: u64 = 2;
/// Bit 2: the kernel reported a final state for this direction (end-of-file, hang-up or an
/// error). Sticky until the record is reset: a partial transfer no longer means "drained"
/// (the end-of-file or the error is still to be read; no new edge will announce it).
const FINAL: u64 = 4;
/// The edge counter occupies bits 3..64.
const SEQ_ONE: u64 = 8;
const SEQ_MASK: u64 = !(SEQ_ONE - 1);

/// The state word as seen before a syscall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot(u64);

impl Snapshot {
    /// Whether the socket was already closed when the snapshot was taken.
    #[cfg(test)]
    pub(crate) fn is_closed(self) -> bool {
        self.0 & CLOSED != 0
    }
}

/// Why [`Readiness::register`] refused to register the waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// An edge arrived since the snapshot: retry the syscall.
    Changed,
    /// The socket was closed.
    Closed,
}

/// `Readiness::drained` when no short transfer has been seen since the last reset.
const NOT_DRAINED: u64 = u64::MAX;

/// Readiness of one direction of one socket, and its waiters (`W`: a green thread handle in
/// the runtime, a test handle in the models).
pub(crate) struct Readiness<W> {
    /// `seq << 3 | FINAL | CLOSED | WAITING` (see the constants).
    state: AtomicU64,
    /// The edge count (`state & SEQ_MASK`) of the snapshot taken before the last short read
    /// (or write) of a stream, or `NOT_DRAINED`. See [`Readiness::known_drained`].
    drained: AtomicU64,
    /// Registered waiters, oldest first, each with the edge count of its snapshot (counts
    /// never decrease along the list: a stale snapshot is refused). `WAITING` mirrors
    /// "non-empty" under this lock.
    waiters: Mutex<Waiters<W>>,
}

/// A FIFO list of waiters whose oldest entry lives inline, next to the state word: a socket
/// has one waiter per direction almost always (a connection's reader, its writer), and a
/// waiter that registers, is popped and deregisters then touches no separate allocation.
/// Later waiters (many green threads accepting on one listener) queue behind it.
struct Waiters<W> {
    oldest: Option<(u64, W)>,
    rest: VecDeque<(u64, W)>,
}

impl<W: PartialEq> Waiters<W> {
    const fn new() -> Self {
        Waiters { oldest: None, rest: VecDeque::new() }
    }

    fn is_empty(&self) -> bool {
        self.oldest.is_none()
    }

    fn push_back(&mut self, entry: (u64, W)) {
        if self.oldest.is_none() {
            self.oldest = Some(entry);
        } else {
            self.rest.push_back(entry);
        }
    }

    fn front(&self) -> Option<&(u64, W)> {
        self.oldest.as_ref()
    }

    fn pop_front(&mut self) -> Option<(u64, W)> {
        let first = self.oldest.take();
        self.oldest = self.rest.pop_front();
        first
    }

    /// Removes `w`; whether it was there.
    fn remove(&mut self, w: &W) -> bool {
        if self.oldest.as_ref().is_some_and(|(_, x)| x == w) {
            self.oldest = self.rest.pop_front();
            return true;
        }
        match self.rest.iter().position(|(_, x)| x == w) {
            Some(i) => {
                self.rest.remove(i);
                true
            }
            None => false,
        }
    }

    /// Empties the list, oldest first.
    fn drain(&mut self) -> Vec<W> {
        self.oldest.take().into_iter().chain(self.rest.drain(..)).map(|(_, w)| w).collect()
    }

    #[cfg(all(test, not(loom)))]
    fn len(&self) -> usize {
        usize::from(self.oldest.is_some()) + self.rest.len()
    }
}

impl<W: PartialEq> Readiness<W> {
    pub(crate) fn new() -> Self {
        Readiness {
            state: AtomicU64::new(0),
            drained: AtomicU64::new(NOT_DRAINED),
            waiters: Mutex::new(Waiters::new()),
        }
    }

    /// Records that a stream transfer that started after `snap` moved fewer bytes than asked:
    /// the kernel buffer was empty (read) or full (write) at that moment, so the next change
    /// comes with a new edge (tokio's "a partial read drains the socket" rule).
    pub(crate) fn mark_drained(&self, snap: Snapshot) {
        // Relaxed: a hint; see `known_drained`.
        self.drained.store(snap.0 & SEQ_MASK, Ordering::Relaxed);
    }

    /// Whether no edge was counted since a transfer found the buffer drained: trying the
    /// syscall would return `WouldBlock`, so the caller may wait for the next edge at once.
    ///
    /// Sound with any value read: a mark `m` was stored by a transfer that saw the buffer
    /// drained after its snapshot counted `m` edges. If the count is still `m`, anything the
    /// kernel did after that transfer is an edge not yet counted, and it will wake a waiter
    /// registered with this snapshot. (Data that arrived between the snapshot and the
    /// transfer was consumed by it, or its edge moved the count past `m`.)
    ///
    /// Not after a final state (`FINAL`): a read that returned the last bytes before an
    /// end-of-file is short, yet the end-of-file is still there to read.
    pub(crate) fn known_drained(&self, snap: Snapshot) -> bool {
        snap.0 & FINAL == 0 && self.drained.load(Ordering::Relaxed) == snap.0 & SEQ_MASK
    }

    /// The state before a syscall (P1/P2: Acquire, pairs with `fire` and `close`).
    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot(self.state.load(Ordering::Acquire))
    }

    /// Whether an edge arrived (or the socket was closed) since `snap` (P1/P2: Acquire).
    pub(crate) fn changed_since(&self, snap: Snapshot) -> bool {
        let now = self.state.load(Ordering::Acquire);
        now & CLOSED != 0 || (now & SEQ_MASK) != (snap.0 & SEQ_MASK)
    }

    /// Registers `w` to be woken by the first edge after `snap`. Refused if that edge (or a
    /// close) already happened: the caller retries its syscall instead of parking.
    pub(crate) fn register(&self, snap: Snapshot, w: W) -> Result<(), Refused> {
        let mut list = lock(&self.waiters);
        // Relaxed: the read-modify-write is ordered against `fire`'s by the word itself, and
        // against the list by the lock (see the module docs).
        let old = self.state.fetch_or(WAITING, Ordering::Relaxed);
        let refused = if old & CLOSED != 0 {
            Some(Refused::Closed)
        } else if (old & SEQ_MASK) != (snap.0 & SEQ_MASK) {
            Some(Refused::Changed)
        } else {
            None
        };
        match refused {
            Some(why) => {
                if list.is_empty() {
                    self.state.fetch_and(!WAITING, Ordering::Relaxed);
                }
                Err(why)
            }
            None => {
                list.push_back((snap.0 & SEQ_MASK, w));
                Ok(())
            }
        }
    }

    /// Removes `w` after its wait ended. Returns true if it was still registered (it was not
    /// woken by an edge: a timeout, a spurious wake-up or an unwind ended the wait).
    pub(crate) fn deregister(&self, w: &W) -> bool {
        let mut list = lock(&self.waiters);
        if !list.remove(w) {
            return false;
        }
        if list.is_empty() {
            self.state.fetch_and(!WAITING, Ordering::Relaxed);
        }
        true
    }

    /// The poller saw an edge: counts it and returns the oldest waiter to unpark, if any
    /// (P1: Release, pairs with `snapshot`/`changed_since`).
    pub(crate) fn fire(&self) -> Option<W> {
        self.fire_with(false)
    }

    /// [`Readiness::fire`] for an edge that reports a final state (end-of-file, hang-up,
    /// error) when `final_state`. The `FINAL` bit is set before the count moves, so a
    /// snapshot that counts this edge also sees the bit (both live in one word).
    pub(crate) fn fire_with(&self, final_state: bool) -> Option<W> {
        if final_state {
            self.state.fetch_or(FINAL, Ordering::Relaxed);
        }
        let old = self.state.fetch_add(SEQ_ONE, Ordering::Release);
        if old & WAITING == 0 {
            return None;
        }
        self.pop_registered_before((old & SEQ_MASK) + SEQ_ONE)
    }

    /// After an operation that did not end in `WouldBlock`: if others wait, wake one of them
    /// (there may be readiness left that no new edge will report).
    pub(crate) fn pass_baton(&self) -> Option<W> {
        if self.state.load(Ordering::Relaxed) & WAITING == 0 {
            return None;
        }
        self.fire()
    }

    /// Pops the oldest waiter whose snapshot predates the edge that made the count `seq`.
    /// A waiter that registered after that edge (its snapshot already counts it: it saw the
    /// edge itself, retried and registered again) is left for the next edge: popping it
    /// would wake it for nothing, it would park again, and the next edge would find it gone.
    fn pop_registered_before(&self, seq: u64) -> Option<W> {
        let mut list = lock(&self.waiters);
        if list.front().is_none_or(|(registered, _)| *registered >= seq) {
            return None;
        }
        let w = list.pop_front().map(|(_, w)| w);
        if list.is_empty() {
            self.state.fetch_and(!WAITING, Ordering::Relaxed);
        }
        w
    }

    /// Marks the direction closed (P2: Release) and returns every waiter to unpark; their
    /// waits and every later registration end with `Refused::Closed`.
    pub(crate) fn close(&self) -> Vec<W> {
        self.state.fetch_or(CLOSED, Ordering::Release);
        let mut list = lock(&self.waiters);
        let all = list.drain();
        self.state.fetch_and(!WAITING, Ordering::Relaxed);
        all
    }

    /// Prepares the record for another socket (its previous socket deregistered and has no
    /// waiters: waiters borrow the socket).
    pub(crate) fn reset(&self) {
        let list = lock(&self.waiters);
        debug_assert!(list.is_empty(), "a socket was released with green threads waiting on it");
        self.drained.store(NOT_DRAINED, Ordering::Relaxed);
        // Bump the sequence so a snapshot of the previous socket never matches the new one.
        let _ = self.state.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
            Some(((s & SEQ_MASK) + SEQ_ONE) & SEQ_MASK)
        });
        drop(list);
    }

    /// Number of registered waiters (diagnostics).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn waiter_count(&self) -> usize {
        lock(&self.waiters).len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn register_refused_after_an_edge() {
        let r = Readiness::<u32>::new();
        let s = r.snapshot();
        assert_eq!(r.fire(), None);
        assert_eq!(r.register(s, 1), Err(Refused::Changed));
        assert_eq!(r.waiter_count(), 0);
        assert!(r.changed_since(s));
    }

    #[test]
    fn one_edge_wakes_one_waiter_fifo() {
        let r = Readiness::<u32>::new();
        let s = r.snapshot();
        r.register(s, 1).unwrap();
        r.register(s, 2).unwrap();
        assert_eq!(r.fire(), Some(1));
        assert_eq!(r.waiter_count(), 1);
        // Waiter 1 finished its operation: baton to 2.
        assert_eq!(r.pass_baton(), Some(2));
        assert_eq!(r.pass_baton(), None);
        assert_eq!(r.fire(), None);
    }

    #[test]
    fn waiters_keep_fifo_order_across_the_inline_slot() {
        let r = Readiness::<u32>::new();
        let s = r.snapshot();
        for w in 1..=4 {
            r.register(s, w).unwrap();
        }
        // The oldest (inline) leaves: the next one takes its place; a middle one leaves.
        assert!(r.deregister(&1));
        assert!(r.deregister(&3));
        assert!(!r.deregister(&3));
        assert_eq!(r.waiter_count(), 2);
        assert_eq!(r.fire(), Some(2));
        assert_eq!(r.pass_baton(), Some(4));
        assert_eq!(r.pass_baton(), None);
        // Empty again: the next waiter goes inline, and close returns everyone in order.
        let s = r.snapshot();
        r.register(s, 5).unwrap();
        r.register(s, 6).unwrap();
        assert_eq!(r.close(), vec![5, 6]);
        assert_eq!(r.waiter_count(), 0);
    }

    #[test]
    fn an_edge_never_pops_a_waiter_registered_after_it() {
        let r = Readiness::<u32>::new();
        let s = r.snapshot();
        r.register(s, 1).unwrap();
        // An edge is counted; before its poller pops, waiter 1 sees it, leaves and registers
        // again with a fresh snapshot.
        let old = r.state.fetch_add(SEQ_ONE, Ordering::Release);
        assert!(r.deregister(&1));
        r.register(r.snapshot(), 1).unwrap();
        // The slow poller now pops: nothing (waiter 1's snapshot already counts this edge).
        assert_eq!(r.pop_registered_before((old & SEQ_MASK) + SEQ_ONE), None);
        assert_eq!(r.waiter_count(), 1);
        // The next edge wakes it.
        assert_eq!(r.fire(), Some(1));
    }

    #[test]
    fn drained_only_until_an_edge_or_a_final_state() {
        let r = Readiness::<u32>::new();
        let s = r.snapshot();
        assert!(!r.known_drained(s));
        r.mark_drained(s);
        assert!(r.known_drained(r.snapshot()));
        r.fire();
        assert!(!r.known_drained(r.snapshot()));
        // A final state (end-of-file after the last bytes) is never "drained".
        let s = r.snapshot();
        r.fire_with(true);
        r.mark_drained(s);
        let s = r.snapshot();
        r.mark_drained(s);
        assert!(!r.known_drained(s));
        r.reset();
        let s = r.snapshot();
        r.mark_drained(s);
        assert!(r.known_drained(s), "reset clears the final state");
    }

    #[test]
    fn deregister_reports_whether_still_registered() {
        let r = Readiness::<u32>::new();
        let s = r.snapshot();
        r.register(s, 7).unwrap();
        assert!(r.deregister(&7));
        assert!(!r.deregister(&7));
        assert_eq!(r.fire(), None);
    }

    #[test]
    fn close_wakes_everyone_and_refuses_later_waiters() {
        let r = Readiness::<u32>::new();
        let s = r.snapshot();
        r.register(s, 1).unwrap();
        r.register(s, 2).unwrap();
        assert_eq!(r.close(), vec![1, 2]);
        assert!(r.changed_since(s));
        assert!(r.snapshot().is_closed());
        assert_eq!(r.register(r.snapshot(), 3), Err(Refused::Closed));
        r.reset();
        assert!(!r.snapshot().is_closed());
        let s = r.snapshot();
        r.register(s, 4).unwrap();
        assert_eq!(r.fire(), Some(4));
    }
}

/// Models of the readiness protocol alone (no runtime): loom threads stand for the waiting
/// green thread, the poller and the kernel.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::loom::{Arc, AtomicBool, thread};

    /// A waiter handle: a loom thread to unpark, compared by an id.
    #[derive(Clone)]
    struct Waiter(usize, thread::Thread);
    impl PartialEq for Waiter {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    /// A socket: `available` counts pending items (bytes, connections) the "kernel" put
    /// there; `take` is the non-blocking syscall.
    struct Sock {
        available: crate::loom::AtomicUsize,
        dir: Readiness<Waiter>,
    }

    impl Sock {
        fn new() -> Self {
            Sock { available: crate::loom::AtomicUsize::new(0), dir: Readiness::new() }
        }
        /// The non-blocking syscall: take one item or "WouldBlock".
        fn take(&self) -> bool {
            self.available
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
        }
        /// What a green thread's blocking-style operation does (source.rs): returns when it
        /// took an item, or `false` if the socket was closed.
        fn blocking_take(&self, id: usize) -> bool {
            loop {
                let snap = self.dir.snapshot();
                if snap.is_closed() {
                    return false;
                }
                if self.take() {
                    if let Some(w) = self.dir.pass_baton() {
                        w.1.unpark();
                    }
                    return true;
                }
                let me = Waiter(id, thread::current());
                match self.dir.register(snap, me.clone()) {
                    Err(Refused::Changed) => continue,
                    Err(Refused::Closed) => return false,
                    Ok(()) => {}
                }
                while !self.dir.changed_since(snap) {
                    thread::park();
                }
                self.dir.deregister(&me);
            }
        }
        /// The kernel makes one item available and the poller delivers the edge.
        fn arrive(&self) {
            // The kernel's readiness is visible to anyone who sees the edge counted (the
            // poller learns of it from epoll after the kernel stored it).
            self.available.fetch_add(1, Ordering::Release);
            if let Some(w) = self.dir.fire() {
                w.1.unpark();
            }
        }
    }

    /// A waiter racing one edge never sleeps through it (a lost wake-up is reported by loom
    /// as a deadlock). Mutation check: making `register` skip the sequence comparison *and*
    /// parking once before testing `changed_since` fails this model with "deadlock"; either
    /// change alone is covered by the other check (see the module docs).
    #[test]
    fn waiter_vs_edge() {
        loom::model(|| {
            let s = Arc::new(Sock::new());
            let s2 = s.clone();
            let t = thread::spawn(move || assert!(s2.blocking_take(1)));
            s.arrive();
            t.join().unwrap();
        });
    }

    /// One reader takes two items that arrive one after the other (two edges). The first
    /// edge's poller can be slow to take the lock: by then the reader saw the edge by itself,
    /// consumed the item and registered again for the second one. That stale `fire` must not
    /// pop the new registration (it would leave the reader parked, unregistered, and the
    /// second edge would find nobody to wake). Mutation check: popping the oldest waiter
    /// without comparing its snapshot with the edge fails this model with a deadlock (the
    /// bug an echo benchmark hit once in a few million requests).
    ///
    /// It runs at preemption bound 3 whatever `LOOM_MAX_PREEMPTIONS` says (the failing
    /// interleaving needs 3; the model is small).
    #[test]
    fn stale_fire_does_not_pop_a_newer_registration() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let s = Arc::new(Sock::new());
            let s2 = s.clone();
            let t = thread::spawn(move || {
                assert!(s2.blocking_take(1));
                assert!(s2.blocking_take(1));
            });
            s.arrive();
            s.arrive();
            t.join().unwrap();
        });
    }

    /// The readiness behind an edge counted in a snapshot is visible to the syscall after
    /// the snapshot (P1). The edge carries data written with a plain Relaxed store, so only
    /// the Release/Acquire pair on the state word publishes it. Mutation check: a Relaxed
    /// load in `snapshot` fails this model (the waiter sees the edge counted, misses the
    /// data, registers with the new sequence and parks forever: loom reports a deadlock).
    #[test]
    fn snapshot_sees_edge_data() {
        loom::model(|| {
            let s = Arc::new(Sock::new());
            let s2 = s.clone();
            let t = thread::spawn(move || assert!(s2.blocking_take(1)));
            s.available.store(1, Ordering::Relaxed);
            if let Some(w) = s.dir.fire() {
                w.1.unpark();
            }
            t.join().unwrap();
        });
    }

    /// Two green threads accept on one listener; two connections arrive in one burst that
    /// the kernel reports as a single edge. The baton makes the second waiter try again.
    /// Mutation check: removing `pass_baton` from `blocking_take` fails this model with a
    /// deadlock (the second waiter sleeps while an item is available).
    #[test]
    fn two_waiters_one_edge_for_two_items() {
        loom::model(|| {
            let s = Arc::new(Sock::new());
            let (a, b) = (s.clone(), s.clone());
            let ta = thread::spawn(move || assert!(a.blocking_take(1)));
            let tb = thread::spawn(move || assert!(b.blocking_take(2)));
            s.available.fetch_add(2, Ordering::Release);
            if let Some(w) = s.dir.fire() {
                w.1.unpark();
            }
            ta.join().unwrap();
            tb.join().unwrap();
            assert_eq!(s.available.load(Ordering::Relaxed), 0);
        });
    }

    /// Closing while a green thread waits wakes it with "closed"; a waiter that registers
    /// after the close is refused. Mutation check: `close` returning no waiters (setting
    /// `CLOSED` without waking anyone) fails this model with a deadlock.
    #[test]
    fn close_while_waiting() {
        loom::model(|| {
            let s = Arc::new(Sock::new());
            let s2 = s.clone();
            let done = Arc::new(AtomicBool::new(false));
            let d2 = done.clone();
            let t = thread::spawn(move || {
                assert!(!s2.blocking_take(1));
                d2.store(true, Ordering::Relaxed);
            });
            for w in s.dir.close() {
                w.1.unpark();
            }
            t.join().unwrap();
            assert!(done.load(Ordering::Relaxed));
        });
    }
}
