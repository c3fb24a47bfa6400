//! Using async crates from green threads.
//!
//! Most of Rust's network clients (HTTP, databases, cloud SDKs, gRPC) are async. A green
//! thread can use them without porting them, in one of three ways, and async code can wait for
//! green threads. None of them blocks a worker: a green thread that waits for a future is
//! parked, and its worker runs other green threads meanwhile.
//!
//! # 1. A future that needs no reactor: [`block_on`]
//!
//! A future that is woken by other threads (channels, locks, `JoinHandle`s, `futures`
//! combinators, async code that only computes) runs on the green thread itself: [`block_on`]
//! polls it there and parks the green thread until its waker is called. On a plain OS thread it
//! parks the OS thread, like `futures::executor::block_on`.
//!
//! ```
//! let h = purloin::spawn(|| {
//!     // Awaiting a green thread is one such future.
//!     let child = purloin::spawn(|| 20);
//!     purloin::future::block_on(async move { child.await.unwrap() + 22 })
//! });
//! assert_eq!(h.join().unwrap(), 42);
//! ```
//!
//! # 2. A future that needs tokio's reactor or timers: `purloin::tokio::block_on`
//!
//! `tokio::net`, hyper, reqwest-style clients and `tokio::time` need a tokio runtime to drive
//! their I/O and timers. With the `tokio` cargo feature, `purloin::tokio::block_on` polls the
//! future on the green thread with a tokio runtime's context entered during each poll (one
//! purloin starts on first use, or one you supply with `purloin::tokio::set_handle`), and parks
//! the green thread in between; tokio's threads drive the I/O and timers and wake it. A panic in
//! the future is the green thread's panic; a green thread that unwinds while it waits (a panic,
//! or its runtime shutting down) drops the future. Inside the future, await async APIs: a
//! purloin wait there (a lock or channel that has to wait, a sleep, a join) panics, because the
//! tokio context must not stay on the worker across a park.
//!
//! ```
//! # #[cfg(feature = "tokio")] {
//! use std::time::Duration;
//!
//! let h = purloin::spawn(|| {
//!     purloin::tokio::block_on(async {
//!         tokio::time::sleep(Duration::from_millis(1)).await;
//!         let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//!         listener.local_addr().unwrap().ip().is_loopback()
//!     })
//! });
//! assert!(h.join().unwrap());
//! # }
//! ```
//!
//! # 3. Awaiting a green thread from async code
//!
//! [`JoinHandle`](crate::JoinHandle) and [`ScopedJoinHandle`](crate::ScopedJoinHandle) are
//! [`IntoFuture`]: `purloin::spawn(..).await` works in any executor and resolves to what
//! `join` returns (`Err` with the panic payload if the green thread panicked). Spawning from a
//! tokio task is as cheap as from any OS thread: the green thread goes to the global queue.
//!
//! ```
//! let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! let sum = rt.block_on(async {
//!     let heavy = purloin::spawn(|| (1..=100u64).sum::<u64>());
//!     heavy.await.unwrap()
//! });
//! assert_eq!(sum, 5050);
//! ```
//!
//! # And a blocking library call: [`blocking`](crate::blocking)
//!
//! A synchronous library call that blocks its OS thread (a C client library, `std::fs`, DNS
//! through `getaddrinfo`) goes inside [`blocking`](crate::blocking): if it blocks for long, the
//! worker's other green threads move to another OS thread. Unwrapped, they move too, but later
//! (after 1 ms, onto a spare worker thread the runtime adds): wrapping pays for calls known to
//! block often or long. The monitor points here when it sees a green thread block its worker.
//!
//! ```
//! let h = purloin::spawn(|| {
//!     purloin::blocking(|| std::fs::metadata(".").map(|m| m.is_dir()).unwrap_or(false))
//! });
//! assert!(h.join().unwrap());
//! ```
//!
//! # Pitfalls: what must never be held across a park
//!
//! A green thread parks in `block_on` (and in every purloin wait), and may continue on another
//! OS thread. So across a `block_on`, never hold:
//!
//! - a **tokio runtime context**: do not call `tokio::runtime::Handle::block_on` or
//!   `Runtime::block_on` on a green thread (it blocks the worker and every green thread queued
//!   on it), and do not keep a `Handle::enter()` guard across a park (it is a thread-local of
//!   the worker, which another green thread then runs under). `purloin::tokio::block_on`
//!   enters it only for the length of each poll, and refuses a park inside one.
//! - a **`std::sync::MutexGuard`** or any OS-thread lock: the green thread may park holding it
//!   while another green thread on the same worker blocks on it (use [`sync`](crate::sync)).
//! - a **`thread_local!` reference** or a `RefCell` borrow of one: after the park it may belong
//!   to another OS thread (use [`green_local!`](crate::green_local)).
//! - a **`!Send` future's thread affinity**: a future polled by [`block_on`] may be polled on
//!   several OS threads in turn; if it must stay on one, spawn the green thread
//!   [`pinned`](crate::Builder::pinned).
//!
//! And the reverse: calling `purloin::tokio::block_on` (or [`block_on`]) from a thread of a
//! current-thread tokio runtime, or on the tokio runtime's only worker, blocks the thread that
//! would drive the future. Call them from green threads; from async code, `.await` instead.
//!
//! # Wake-ups
//!
//! The waker [`block_on`] gives the future may be cloned, sent anywhere and called any number
//! of times, before or after the green thread parks and after it moved to another worker; a
//! wake-up before the park is never lost (it makes the park return at once). A wake after
//! `block_on` returned does nothing, except in a narrow window that leaves the green thread one
//! spurious wake-up token, which every purloin wait tolerates. Everything the waking thread did
//! before `wake` happens before the poll that follows.
//!
//! # Memory ordering
//!
//! The guarantee: the writes a waker made before `wake` are visible to the next poll, and a
//! wake after the future returned `Pending` is followed by a poll.
//!
//! - (F1) The waker sets `notified` with an AcqRel swap; only the swap that changes it from
//!   `false` unparks. The waiter consumes it with an AcqRel swap back to `false` before each
//!   re-poll: a swap that reads `true` reads from the waker's (Release), so the re-poll sees
//!   the waker's writes.
//! - (F2) A waker whose swap reads `true` does not unpark: the waiter's consuming swap comes
//!   later in the word's modification order (both are read-modify-writes), so it reads this
//!   waker's `true` and re-polls. A waker whose swap reads `false` unparks; the unpark leaves
//!   a token if the waiter has not parked yet (sched's G3 orders the unpark before the park's
//!   return).

use core::future::{Future, IntoFuture};
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use std::sync::Arc;

use crate::loom::{AtomicBool, Ordering};

/// Runs `future` to completion on the calling green thread, parking only the green thread while
/// it waits; on a plain OS thread, parks the OS thread. Returns the future's output.
///
/// A future that is ready at once costs one poll: no allocation, no atomic operation. One that
/// has to wait costs one allocation for its waker, and a wake from another thread costs one
/// unpark of this green thread.
///
/// Use it for futures that need no reactor (see the [module docs](self)); for tokio's I/O and
/// timers use `purloin::tokio::block_on` (the `tokio` feature). Panics in the future propagate.
///
/// ```
/// let h = purloin::spawn(|| purloin::future::block_on(async { 6 * 7 }));
/// assert_eq!(h.join().unwrap(), 42);
/// ```
pub fn block_on<F: IntoFuture>(future: F) -> F::Output {
    match block_on_inner(future, false) {
        Ok(out) => out,
        Err(_) => unreachable!("an uninterruptible block_on returns the output"),
    }
}

/// [`block_on`] that gives up when the calling green thread is interrupted
/// ([`JoinHandle::interrupt`](crate::JoinHandle::interrupt), or a cancelled
/// [`CancelToken`](crate::cancel::CancelToken) it runs under): the future is dropped
/// unfinished (as tokio drops an aborted task's future) and
/// [`Interrupted`](crate::cancel::Interrupted) returned, consuming a one-shot interrupt. A
/// future that is ready at its first poll is returned even if an interrupt is pending.
///
/// # Errors
///
/// [`Interrupted`](crate::cancel::Interrupted) if the green thread was interrupted before the
/// future completed.
///
/// # Examples
///
/// ```
/// let h = purloin::spawn(|| purloin::future::block_on_interruptible(std::future::pending::<()>()));
/// h.interrupt();
/// assert!(h.join().unwrap().is_err());
/// ```
pub fn block_on_interruptible<F: IntoFuture>(
    future: F,
) -> Result<F::Output, crate::cancel::Interrupted> {
    block_on_inner(future, true)
}

fn block_on_inner<F: IntoFuture>(
    future: F,
    interruptible: bool,
) -> Result<F::Output, crate::cancel::Interrupted> {
    let mut future = pin!(future.into_future());
    // A future that is ready at once never sees a waker it could keep: poll it with one that
    // does nothing. If it is not ready, it is polled again below with the real waker (a poll
    // with a new waker is one every future must allow), so no wake-up is lost.
    if let Poll::Ready(out) = future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        return Ok(out);
    }
    let me = if interruptible { purloin_sched::current() } else { None };
    // On an OS thread, a green thread this waits for counts it as an outside waiter (the
    // deadlock watch then reports a wait that can never end instead of leaving it hanging).
    let _outside = purloin_sched::blocking_on_futures();
    let signal = Arc::new(Signal { notified: AtomicBool::new(false), target: Target::current() });
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            // Later wakes find `true` and do not unpark (a stale waker kept by the future's
            // source would otherwise leave this green thread a spurious token).
            signal.notified.store(true, Ordering::Relaxed);
            return Ok(out);
        }
        // F1: consume the notification before the next poll; park until there is one.
        while !signal.notified.swap(false, Ordering::AcqRel) {
            if let Some(me) = me
                && me.is_interrupted()
            {
                signal.notified.store(true, Ordering::Relaxed);
                me.take_interrupt();
                return Err(crate::cancel::Interrupted);
            }
            purloin_sched::park();
        }
    }
}

/// What [`block_on`]'s waker points to: whether a wake is pending, and whom to unpark.
struct Signal {
    /// Set by a wake, consumed before each re-poll (F1, F2).
    notified: AtomicBool,
    target: Target,
}

/// Who waits in [`block_on`].
enum Target {
    /// A green thread: unparked through the scheduler, wherever it runs now.
    Green(purloin_sched::GreenThread),
    /// A plain OS thread.
    Os(crate::loom::thread::Thread),
}

impl Target {
    fn current() -> Target {
        match purloin_sched::current() {
            Some(g) => Target::Green(g),
            None => Target::Os(crate::loom::thread::current()),
        }
    }
}

impl std::task::Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // F1/F2: only the wake that sets the flag unparks; Release publishes our writes.
        if !self.notified.swap(true, Ordering::AcqRel) {
            match &self.target {
                Target::Green(g) => {
                    g.unpark();
                }
                Target::Os(t) => t.unpark(),
            }
        }
    }
}
