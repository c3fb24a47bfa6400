//! What a green thread runs, and the one-shot packet its joiner waits on.
//!
//! A spawn allocates one [`TaskCell`]: the entry closure and the packet that will hold its
//! result, shared by the G (which runs it) and the [`JoinHandle`](crate::JoinHandle) (which
//! waits for it). The packet's state word is a tiny one-shot:
//!
//! ```text
//!   EMPTY ──(joiner registers its waiter)──▶ WAITING ──(completion)──▶ DONE
//!     └──────────────────(completion)──────────────────────────────────▶ DONE
//! ```
//!
//! # Memory ordering
//!
//! The guarantee: a joiner that observes `DONE` sees the result.
//!
//! - (T1) The completer writes the result, then `swap(DONE, AcqRel)`; the joiner's Acquire
//!   load of `DONE` pairs with it.
//! - (T2) The joiner writes its waiter, then CASes `EMPTY => WAITING` with Release; the
//!   completer's swap (Acquire) that returns `WAITING` pairs with it before reading the waiter.

use core::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::thread::Result as ThreadResult;

use crate::sync::{AtomicU32, Ordering, UnsafeCell};

const EMPTY: u32 = 0;
const WAITING: u32 = 1;
const DONE: u32 = 2;

/// What a G record holds to run: a shared task (a spawn), or a job borrowed from its joiner's
/// stack (fork-join; the joiner does not return before the job is done).
pub(crate) enum TaskRef {
    Shared(std::sync::Arc<dyn Runnable>),
    Borrowed(core::ptr::NonNull<dyn Runnable>),
}

// SAFETY: a `Borrowed` job is `Sync` (Runnable: Sync) and outlives the G (the joiner waits for
// it); `Shared` is an `Arc` of a `Send + Sync` task.
unsafe impl Send for TaskRef {}

impl TaskRef {
    pub(crate) fn run(&self) {
        match self {
            TaskRef::Shared(t) => t.run(),
            // SAFETY: the joiner keeps the job alive until it is done (see `fork`).
            TaskRef::Borrowed(t) => unsafe { t.as_ref() }.run(),
        }
    }

    pub(crate) fn fail(&self, payload: Box<dyn Any + Send>) {
        match self {
            TaskRef::Shared(t) => t.fail(payload),
            // SAFETY: as in `run`.
            TaskRef::Borrowed(t) => unsafe { t.as_ref() }.fail(payload),
        }
    }
}

/// Type-erased "run me" for the G record.
pub(crate) trait Runnable: Send + Sync {
    /// Runs the entry (catching panics) and completes the packet. Called at most once.
    fn run(&self);
    /// Drops the entry without running it and completes the packet with `Err(payload)` (the
    /// G could not start: no stack, or the runtime shut down first).
    fn fail(&self, payload: Box<dyn Any + Send>);
}

/// The payload a joiner receives (as `Err`) when its green thread was never started because
/// the runtime shut down.
#[derive(Debug, Clone, Copy)]
pub struct Cancelled;

impl core::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the green thread was cancelled before it ran: its runtime shut down")
    }
}

/// Who waits for a packet.
pub(crate) enum Waiter {
    /// A green thread, woken with the scheduler's unpark.
    Green(crate::GreenThread),
    /// An OS thread, woken with its own unpark.
    Thread(crate::sync::thread::Thread),
}

impl Waiter {
    /// The calling context as a waiter: the current green thread, else the OS thread.
    pub(crate) fn current() -> Waiter {
        match crate::current() {
            Some(g) => Waiter::Green(g),
            None => Waiter::Thread(crate::sync::thread::current()),
        }
    }

    pub(crate) fn wake(self) {
        match self {
            Waiter::Green(g) => {
                g.unpark();
            }
            Waiter::Thread(t) => t.unpark(),
        }
    }
}

/// The result slot a joiner waits on.
pub(crate) struct Packet<T> {
    state: AtomicU32,
    waiter: UnsafeCell<Option<Waiter>>,
    result: UnsafeCell<Option<ThreadResult<T>>>,
}

// SAFETY: `waiter` is written by the joiner before T2's Release and read by the completer after
// it; `result` is written by the completer before T1's Release and read by the joiner after it.
// T crosses threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Packet<T> {}

impl<T> Packet<T> {
    fn new() -> Self {
        Packet {
            state: AtomicU32::new(EMPTY),
            waiter: UnsafeCell::new(None),
            result: UnsafeCell::new(None),
        }
    }

    /// Whether the result is ready (Acquire: pairs with T1).
    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }

    /// Registers the calling context as the waiter. Returns false if the packet is already
    /// done (nothing registered). May be called once per packet.
    pub(crate) fn register(&self, waiter: Waiter) -> bool {
        // SAFETY: only the (single) joiner writes `waiter`, before publishing WAITING (T2).
        unsafe { self.waiter.with_mut(|w| *w = Some(waiter)) };
        // Release pairs with the completer's swap (T2); Acquire pairs with T1 on failure.
        self.state.compare_exchange(EMPTY, WAITING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Takes the result. Must only be called after `is_done` returned true, once.
    pub(crate) fn take(&self) -> ThreadResult<T> {
        debug_assert!(self.is_done());
        // SAFETY: DONE was observed with Acquire (T1), the completer no longer touches
        // `result`, and the single joiner calls this once.
        unsafe { self.result.with_mut(|r| (*r).take()) }
            .expect("a green thread's result was taken twice")
    }

    fn complete(&self, result: ThreadResult<T>) {
        // SAFETY: only the completer writes `result`, before publishing DONE (T1).
        unsafe { self.result.with_mut(|r| *r = Some(result)) };
        // AcqRel: Release publishes the result (T1), Acquire sees the waiter (T2).
        if self.state.swap(DONE, Ordering::AcqRel) == WAITING {
            // SAFETY: WAITING was observed with Acquire (T2): the joiner wrote `waiter` and
            // does not touch it again.
            let waiter = unsafe { self.waiter.with_mut(|w| (*w).take()) };
            if let Some(w) = waiter {
                w.wake();
            }
        }
    }
}

/// The closure and the packet in one allocation.
pub(crate) struct TaskCell<F, T> {
    pub(crate) packet: Packet<T>,
    f: UnsafeCell<Option<F>>,
}

// SAFETY: `f` is taken exactly once by the thread that runs (or cancels) the task, which holds
// the G's scheduling reference; F: Send lets it move there.
unsafe impl<F: Send, T: Send> Sync for TaskCell<F, T> {}
// SAFETY: as above.
unsafe impl<F: Send, T: Send> Send for TaskCell<F, T> {}

impl<F, T> TaskCell<F, T> {
    pub(crate) fn new(f: F) -> Self {
        TaskCell { packet: Packet::new(), f: UnsafeCell::new(Some(f)) }
    }

    fn take_f(&self) -> Option<F> {
        // SAFETY: called once, by the holder of the G's scheduling reference.
        unsafe { self.f.with_mut(|f| (*f).take()) }
    }
}

impl<F, T> Runnable for TaskCell<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(&self) {
        let Some(f) = self.take_f() else { return };
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        self.packet.complete(result);
    }

    fn fail(&self, payload: Box<dyn Any + Send>) {
        if let Some(f) = self.take_f() {
            drop(f);
            self.packet.complete(Err(payload));
        }
    }
}

/// Gives a JoinHandle access to the packet without naming the closure type.
pub(crate) trait HasPacket<T>: Send + Sync {
    fn packet(&self) -> &Packet<T>;
}

impl<F, T> HasPacket<T> for TaskCell<F, T>
where
    F: Send,
    T: Send,
{
    fn packet(&self) -> &Packet<T> {
        &self.packet
    }
}
