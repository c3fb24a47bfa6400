//! A machine's event queue: lock-free, multi-producer (senders, handlers answering yields,
//! the host cancelling), single-consumer (the worker stepping the machine), closable.
//!
//! # Design
//!
//! A Treiber stack whose consumer never pops single nodes: it takes the whole list with one
//! `swap(null)` and reverses the links, which gives the events in arrival order without
//! copying them: the step reads them straight out of the nodes (`NodeList`). Producers only push
//! with a CAS on `head`; the consumer only swaps `head`. Because nobody ever CASes a *removed*
//! node back, there is no ABA hazard: a producer whose CAS succeeds links its node to whatever
//! `head` is at that moment, which is exactly what it must point to. Push is lock-free (a CAS
//! loop that fails only when another push or the consumer changed `head`), drain is wait-free
//! (one swap, then private work).
//!
//! `close` swaps in the `CLOSED` sentinel and returns what was left; a push that finds
//! `CLOSED` fails and gives its event back, so "sent to a finished machine" is an error value
//! with the message in it, never a silent drop.
//!
//! Compared with Vyukov's intrusive MPSC queue (push = one swap), this has no window in which
//! a producer preempted between its swap and its link hides the rest of the queue from the
//! consumer, and closing is one swap.
//!
//! # Memory ordering
//!
//! The guarantee: the consumer sees every field of every node it takes (the event and the
//! `next` link) as written by its producer.
//!
//! - (Q1) A producer's successful `head` CAS is Release, after it wrote the node; the
//!   consumer's `swap` in `take_all` / `close` is Acquire and reads that CAS (or a later one
//!   in `head`'s modification order: every later CAS is an RMW, so the release sequence
//!   carries each earlier producer's Release to the consumer).
//! - The producer's loads of `head` (to link its node and to retry) are Relaxed: it never
//!   dereferences the head it read, only stores it as `next`.

use super::Event;
use crate::loom::{AtomicPtr, Ordering, UnsafeCell};
use core::ptr;

struct Node {
    /// The event; written before the node is published (Q1), taken by the consumer.
    event: UnsafeCell<Option<Event>>,
    /// The node pushed before this one (or null). Written by the producer before publishing,
    /// rewritten by the consumer while reversing its private list.
    next: UnsafeCell<*mut Node>,
}

/// The sentinel stored in `head` by `close`: not a node address (nodes are 8-aligned).
fn closed() -> *mut Node {
    ptr::without_provenance_mut(1)
}

/// The MPSC event queue of one machine (see the module docs).
pub(crate) struct EventQueue {
    /// Newest node, null when empty, [`closed`] after `close`.
    head: AtomicPtr<Node>,
}

// SAFETY: the queue owns the nodes in `head`'s list; events are `Send`, nodes are handed from
// producers to the consumer through `head` with Release/Acquire (Q1).
unsafe impl Send for EventQueue {}
// SAFETY: producers only touch their own node before publishing it and `head` atomically;
// only the single consumer (the worker stepping the machine, as the host guarantees) takes
// nodes out (`take_all`, `close`).
unsafe impl Sync for EventQueue {}

impl EventQueue {
    pub(crate) fn new() -> EventQueue {
        EventQueue { head: AtomicPtr::new(ptr::null_mut()) }
    }

    /// Appends `event`; gives it back if the queue is closed.
    pub(crate) fn push(&self, event: Event) -> Result<(), Event> {
        let node = Box::into_raw(Box::new(Node {
            event: UnsafeCell::new(Some(event)),
            next: UnsafeCell::new(ptr::null_mut()),
        }));
        // Relaxed: we only store the value we read as our `next` (module docs).
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            if head == closed() {
                // SAFETY: `node` came from `Box::into_raw` above and was never published.
                let node = unsafe { Box::from_raw(node) };
                // SAFETY: unpublished node: only this thread has seen it.
                let event = unsafe { node.event.with_mut(|e| (*e).take()) };
                return Err(event.expect("an unpublished node still holds its event"));
            }
            // SAFETY: the node is not yet published; only this thread touches it.
            unsafe { node.as_ref().expect("from Box::into_raw").next.with_mut(|n| *n = head) };
            // Release publishes the node's fields to the consumer's Acquire swap (Q1).
            match self.head.compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(actual) => head = actual,
            }
        }
    }

    /// Takes every queued event, oldest first, without copying them: the list owns the
    /// nodes and hands the events out one by one.
    ///
    /// Only the consumer may call this, and not after `close`.
    pub(crate) fn take_all(&self) -> NodeList {
        // Acquire pairs with the producers' Release CAS (Q1).
        let list = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        debug_assert!(list != closed(), "take_all after close");
        // SAFETY: `list` was taken out of `head` by our swap: the nodes are ours, fully
        // written (Q1), and were made by `Box::into_raw` in `push`.
        unsafe { NodeList::from_stack(list) }
    }

    /// [`take_all`](EventQueue::take_all), without the swap when the queue is empty.
    ///
    /// The Relaxed load may skip pushes that are still racing the caller, never one that
    /// happens before it: the caller relies on it only for pushes ordered before its own
    /// Acquire on the machine's `state` (P1 in `cell.rs`), and later pushes wake it again.
    pub(crate) fn take_if_any(&self) -> NodeList {
        if self.head.load(Ordering::Relaxed).is_null() {
            return NodeList::default();
        }
        self.take_all()
    }

    /// Closes the queue: later pushes fail. Returns the events that were still queued
    /// (oldest first) so the caller decides when their payloads are dropped.
    ///
    /// Only the consumer may call this (once).
    pub(crate) fn close(&self) -> NodeList {
        // Acquire pairs with the producers' Release CAS (Q1).
        let list = self.head.swap(closed(), Ordering::Acquire);
        if list == closed() {
            return NodeList::default();
        }
        // SAFETY: as in `take_all`.
        unsafe { NodeList::from_stack(list) }
    }
}

impl Drop for EventQueue {
    fn drop(&mut self) {
        let list = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        if list != closed() {
            // SAFETY: `&mut self`: no producer or consumer is left; the list is ours (Q1).
            drop(unsafe { NodeList::from_stack(list) });
        }
    }
}

/// Events taken out of an [`EventQueue`], oldest first. Owns its nodes (frees each as its
/// event is taken, the rest on drop). Only the consumer that took them touches them.
pub(crate) struct NodeList {
    /// Oldest node (null when empty).
    head: *mut Node,
    len: usize,
}

// SAFETY: the list exclusively owns its nodes (taken out of the queue by the consumer's swap,
// Q1); the events in them are `Send`.
unsafe impl Send for NodeList {}

impl Default for NodeList {
    fn default() -> NodeList {
        NodeList { head: ptr::null_mut(), len: 0 }
    }
}

impl NodeList {
    /// Turns a newest-first stack of nodes into an oldest-first list (reverses the links).
    ///
    /// # Safety
    /// - `stack` is null or the head of a list of nodes made by `push`, owned by the caller
    ///   (taken out of `head` by a swap) and fully published to it (Q1).
    unsafe fn from_stack(mut stack: *mut Node) -> NodeList {
        let mut reversed: *mut Node = ptr::null_mut();
        let mut len = 0;
        while !stack.is_null() {
            // SAFETY: caller contract: `stack` is a live node we own.
            let node = unsafe { &*stack };
            // SAFETY: we own the node (caller contract); its `next` was published (Q1).
            let next = unsafe { node.next.with_mut(|p| core::mem::replace(&mut *p, reversed)) };
            reversed = stack;
            stack = next;
            len += 1;
        }
        NodeList { head: reversed, len }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The events, oldest first, without taking them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Event> {
        let mut node = self.head;
        core::iter::from_fn(move || {
            if node.is_null() {
                return None;
            }
            // SAFETY: the list owns its live nodes (from_stack's contract) and they stay
            // alive while `self` is borrowed; nobody writes them meanwhile.
            let n = unsafe { &*node };
            // SAFETY: as above.
            node = unsafe { n.next.with(|p| *p) };
            // SAFETY: as above; every node in the list still holds its event.
            let event = unsafe { n.event.with(|e| (*e).as_ref()) };
            Some(event.expect("a node in the list holds its event"))
        })
    }
}

impl Iterator for NodeList {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if self.head.is_null() {
            return None;
        }
        // SAFETY: the list owns its nodes, each made by `Box::into_raw` in `push`; this one
        // leaves the list here and is freed exactly once (when `node` drops).
        let node = unsafe { Box::from_raw(self.head) };
        // SAFETY: we own the node.
        self.head = unsafe { node.next.with(|p| *p) };
        self.len -= 1;
        // SAFETY: we own the node.
        let event = unsafe { node.event.with_mut(|e| (*e).take()) };
        Some(event.expect("a node in the list holds its event"))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }
}

impl Drop for NodeList {
    fn drop(&mut self) {
        while !self.head.is_null() {
            drop(self.next());
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::machine::{EventKind, Payload};

    fn msg(v: u64) -> Event {
        Event::message(Payload::new(v))
    }

    fn values(q: NodeList) -> Vec<u64> {
        q.map(|e| *e.data.downcast_ref::<u64>().unwrap()).collect()
    }

    #[test]
    fn drains_in_arrival_order_and_closes() {
        let q = EventQueue::new();
        for i in 0..5 {
            q.push(msg(i)).unwrap();
        }
        let all = q.take_all();
        assert_eq!(all.len(), 5);
        let peek: Vec<u64> = all.iter().map(|e| *e.data.downcast_ref::<u64>().unwrap()).collect();
        assert_eq!(peek, [0, 1, 2, 3, 4]);
        assert_eq!(values(all), [0, 1, 2, 3, 4]);
        q.push(msg(7)).unwrap();
        let rest = q.close();
        assert_eq!(values(rest), [7]);
        let back = q.push(msg(9)).unwrap_err();
        assert_eq!(back.kind, EventKind::Message);
        assert_eq!(back.data.downcast::<u64>().unwrap(), 9);
    }

    #[test]
    fn many_producers_each_fifo_exactly_once() {
        let q = std::sync::Arc::new(EventQueue::new());
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let q = q.clone();
                crate::loom::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        q.push(msg(p << 32 | i)).unwrap();
                    }
                })
            })
            .collect();
        let mut seen = vec![0u64; 4];
        let mut total = 0;
        while total < 40_000 {
            let batch = q.take_all();
            total += batch.len();
            for v in values(batch) {
                let (p, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                assert_eq!(seen[p], i, "producer {p} out of order");
                seen[p] += 1;
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(seen, [10_000; 4]);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    //! Models of the queue alone (cheap). Mutation checks (each made, run, seen to fail,
    //! reverted):
    //! - push CAS `Release` → `Relaxed`: loom reports a causality violation on the node's
    //!   `UnsafeCell` (the consumer reads the event without happening-after its write);
    //! - drain swap `Acquire` → `Relaxed`: the same report.
    use super::*;
    use crate::loom::{Arc, thread};
    use crate::machine::Payload;

    fn event(v: u64) -> Event {
        Event::message(Payload::new(v))
    }

    fn value(e: &Event) -> u64 {
        *e.data.downcast_ref::<u64>().unwrap()
    }

    /// Two producers race the consumer's drains: each event is taken exactly once, in each
    /// producer's order.
    #[test]
    fn two_producers_and_a_draining_consumer() {
        loom::model(|| {
            let q = Arc::new(EventQueue::new());
            let ps: Vec<_> = (0..2u64)
                .map(|p| {
                    let q = q.clone();
                    thread::spawn(move || {
                        q.push(event(p * 10)).unwrap();
                        q.push(event(p * 10 + 1)).unwrap();
                    })
                })
                .collect();
            let mut vals: Vec<u64> = q.take_all().map(|e| value(&e)).collect();
            for p in ps {
                p.join().unwrap();
            }
            vals.extend(q.take_all().map(|e| value(&e)));
            assert_eq!(vals.len(), 4);
            for p in 0..2u64 {
                let mine: Vec<u64> = vals.iter().copied().filter(|v| v / 10 == p).collect();
                assert_eq!(mine, [p * 10, p * 10 + 1]);
            }
        });
    }

    /// A push racing `close`: the event is either returned to the producer or handed to the
    /// closer, never both and never lost.
    #[test]
    fn push_racing_close() {
        loom::model(|| {
            let q = Arc::new(EventQueue::new());
            let q2 = q.clone();
            let producer = thread::spawn(move || q2.push(event(1)).map_err(|e| value(&e)));
            let rest = q.close();
            match producer.join().unwrap() {
                Ok(()) => assert_eq!(rest.map(|e| value(&e)).collect::<Vec<_>>(), [1]),
                Err(v) => {
                    assert_eq!(v, 1);
                    assert_eq!(rest.len(), 0);
                }
            }
        });
    }
}
