//! Awaiting a green thread from async code: [`JoinHandle`] is [`IntoFuture`], so
//! `purloin::spawn(..).await` works in any executor (tokio, smol, `futures::executor`, or
//! purloin's own green-aware `block_on`).
//!
//! # Design
//!
//! The join packet already has a waiter slot that its completer takes and wakes exactly once
//! (`task`'s T2); a [`Waiter::Waker`] in that slot wakes an async task instead of a thread. The
//! packet's protocol is unchanged: the first poll of an unfinished handle registers once
//! (`EMPTY => WAITING`), as a blocking join does.
//!
//! An executor may poll again with a different waker (a task that moved), and the packet's
//! slot is written only once. So what is registered is a waker of a small shared [`Forward`]
//! cell, which holds the latest task waker under a lock and passes the completion on to it.
//! Cost of an await that has to wait: one allocation and one CAS to register, one lock and one
//! wake at completion; a handle that is already finished costs one Acquire load.
//!
//! The alternative that needs no waiter variant at all, handing the join to a helper green
//! thread that joins the child and then wakes a waker cell, costs a spawn, a green thread
//! parked (with a stack) for every outstanding await, and an unpark on top of the wake; it
//! also cannot serve scoped handles, whose result type is not `'static`.
//!
//! # Memory ordering
//!
//! The guarantee: a poll that returns `Ready` sees the result; a completion after a poll that
//! returned `Pending` wakes the waker of the latest poll.
//!
//! - The result is ordered by the packet (T1: the completer's Release CAS to `DONE`, the poll's
//!   Acquire load in `is_done`).
//! - (J1) A later poll stores its waker in [`Forward::waker`] under the lock, then loads the
//!   packet state; the completer publishes `DONE`, then takes the waker under the same lock.
//!   If the completer's lock comes second it takes the new waker; if first, its `DONE` happened
//!   before its unlock, which happens before the poll's lock, so the poll's load sees `DONE`.
//!
//! The loom model `completion_racing_a_second_poll_with_a_new_waker` (below; run with
//! `cargo xtask loom -p purloin-sched completion_racing`) checks J1 on the real code; the
//! facade's `loom_future.rs` checks an await through `block_on` on the real scheduler.

use core::future::{Future, IntoFuture};
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::sync::Arc;
use std::thread::Result as ThreadResult;

use crate::join::JoinHandle;
use crate::sync::Mutex;
use crate::task::{PacketRef, Waiter};

/// The future of a [`JoinHandle`] (from `handle.into_future()` or `.await`): resolves to what
/// [`JoinHandle::join`] returns, `Err` with the panic payload if the green thread panicked.
///
/// Polling never runs the green thread inline (a join from a green thread may): an async task
/// does not own a stack to run it on. Dropping the future detaches the green thread, as
/// dropping the handle does. A handle whose [`wait_timeout`](JoinHandle::wait_timeout) was
/// called already holds the packet's one waiter slot: its future wakes itself on every poll
/// until the green thread finishes (correct, but a busy wait; avoid mixing the two).
///
/// # Examples
///
/// ```
/// use std::future::{Future, IntoFuture};
/// use std::sync::Arc;
/// use std::task::{Context, Poll, Wake, Waker};
///
/// // The smallest executor: poll, park the OS thread until woken.
/// struct Unpark(std::thread::Thread);
/// impl Wake for Unpark {
///     fn wake(self: Arc<Self>) {
///         self.0.unpark();
///     }
/// }
///
/// let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
/// let mut fut = std::pin::pin!(sched.spawn(|| 6 * 7).into_future());
/// let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
/// let out = loop {
///     if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&waker)) {
///         break v;
///     }
///     std::thread::park();
/// };
/// assert_eq!(out.unwrap(), 42);
/// ```
#[must_use = "futures do nothing unless polled; dropping it detaches the green thread"]
pub struct JoinFuture<T> {
    /// `None` once the result was taken.
    task: Option<PacketRef<T>>,
    /// Set once the packet's waiter slot holds a waker of this cell.
    forward: Option<Arc<Forward>>,
    /// The handle's caller registered as the packet's waiter already (`wait_timeout`): no
    /// waker can be registered, so polls re-schedule themselves.
    registered: bool,
    /// The scheduler's address (only compared: `outside::note_future_wait`).
    sched: usize,
}

/// The cell whose waker sits in the packet's waiter slot: passes the completion on to the
/// waker of the latest poll (J1).
struct Forward {
    waker: Mutex<Option<Waker>>,
}

impl std::task::Wake for Forward {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // J1: taken under the lock, after the completer published DONE.
        let waker = match self.waker.lock() {
            Ok(mut w) => w.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> IntoFuture for JoinHandle<T> {
    type Output = ThreadResult<T>;
    type IntoFuture = JoinFuture<T>;

    fn into_future(self) -> JoinFuture<T> {
        let JoinHandle { task, registered, sched, .. } = self;
        JoinFuture {
            task: Some(task),
            forward: None,
            registered: registered.is_some(),
            sched: sched as usize,
        }
    }
}

impl<T> JoinFuture<T> {
    /// Whether the green thread has finished (the next poll returns `Ready`).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(PacketRef::is_done)
    }

    /// Whether the result is ready, after making sure the completion wakes `waker`.
    fn ready_or_register(&mut self, task: &PacketRef<T>, waker: &Waker) -> bool {
        if task.is_done() {
            return true;
        }
        match &self.forward {
            Some(forward) => {
                {
                    let mut slot = match forward.waker.lock() {
                        Ok(g) => g,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    match &*slot {
                        Some(old) if old.will_wake(waker) => {}
                        _ => *slot = Some(waker.clone()),
                    }
                }
                // J1: after the store under the lock.
                task.is_done()
            }
            None if self.registered => {
                // A `wait_timeout` caller holds the packet's one waiter slot: poll again soon.
                waker.wake_by_ref();
                false
            }
            None => {
                let forward = Arc::new(Forward { waker: Mutex::new(Some(waker.clone())) });
                let registered = task.register(Waiter::Waker(Waker::from(forward.clone())));
                // Not registered: the packet was done meanwhile.
                if registered {
                    self.forward = Some(forward);
                }
                !registered
            }
        }
    }
}

impl<T> Future for JoinFuture<T> {
    type Output = ThreadResult<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ThreadResult<T>> {
        let this = self.get_mut();
        let task = this.task.take().expect("a JoinFuture polled after it returned Ready");
        if this.ready_or_register(&task, cx.waker()) {
            return Poll::Ready(task.into_result());
        }
        this.task = Some(task);
        crate::outside::note_future_wait(this.sched);
        Poll::Pending
    }
}

impl<T> core::fmt::Debug for JoinFuture<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JoinFuture").field("finished", &self.is_finished()).finish()
    }
}

/// Loom model of J1 on the real code: the packet, the forwarding cell and its lock are loom's.
#[cfg(all(test, loom))]
mod loom_join_future {
    use super::*;
    use crate::sync::thread;
    use crate::sync::{AtomicBool, Ordering};
    use crate::task::{TaskCell, TaskRef};

    /// Unparks a loom thread and records that it was woken.
    struct Flag {
        woken: AtomicBool,
        thread: thread::Thread,
    }

    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.woken.store(true, Ordering::Release);
            self.thread.unpark();
        }
    }

    /// The green thread completes while the future is polled twice, with two different
    /// wakers: a completion after the second poll returned `Pending` wakes the second waker.
    /// Mutation check: dropping the load of the packet state after the second poll stored its
    /// waker (returning `Pending` at once) fails this model with a loom deadlock: the
    /// completion came between the poll's first load and its store, woke the first waker, and
    /// nobody woke the second.
    #[test]
    fn completion_racing_a_second_poll_with_a_new_waker() {
        loom::model(|| {
            let (task, packet) = TaskCell::allocate(|| 7u32);
            let g_side = thread::spawn(move || TaskRef::Owned(task).run());
            let mut fut =
                JoinFuture { task: Some(packet), forward: None, registered: false, sched: 0 };
            let first = Waker::noop();
            let flag = Arc::new(Flag { woken: AtomicBool::new(false), thread: thread::current() });
            let second = Waker::from(flag.clone());
            let mut out = None;
            for waker in [first, &second] {
                if let Poll::Ready(v) = Pin::new(&mut fut).poll(&mut Context::from_waker(waker)) {
                    out = Some(v);
                    break;
                }
            }
            let out = match out {
                Some(v) => v,
                None => {
                    while !flag.woken.load(Ordering::Acquire) {
                        thread::park();
                    }
                    match Pin::new(&mut fut).poll(&mut Context::from_waker(&second)) {
                        Poll::Ready(v) => v,
                        Poll::Pending => panic!("woken, but not ready"),
                    }
                }
            };
            assert_eq!(out.unwrap(), 7);
            g_side.join().unwrap();
        });
    }
}
