//! Running tokio-based futures from green threads (the `tokio` cargo feature).
//!
//! [`block_on`] polls the future on the calling green thread, with the tokio runtime's context
//! entered for the length of each poll, and parks the green thread between polls: tokio's
//! threads drive the I/O and timers the future registered, and their wake-ups unpark the green
//! thread. The worker runs other green threads meanwhile.
//!
//! # Design
//!
//! - **No tokio context on a worker across a park.** The context is a thread-local of the OS
//!   thread (tokio's `Handle::enter`). It is entered just before each poll and left just
//!   after, and each poll runs in a [`NoSwitch`] section: if the
//!   future's code tries to park, yield or block the green thread (a purloin lock or channel
//!   that has to wait, a sleep, a `join`, `purloin::blocking`), it panics with a message that
//!   says so, instead of leaving the context on the worker for the next green thread. Inside
//!   the future, await async APIs; do purloin's waits outside `block_on`.
//! - **Which runtime.** The handle given to [`set_handle`] before first use, or else a
//!   multi-threaded tokio runtime that purloin starts on first use (threads named
//!   `purloin-tokio`, half as many as CPUs, at least 1 and at most 4, I/O and time drivers
//!   enabled: tokio's threads only drive I/O and timers and run what the futures spawn, so more
//!   of them would take cores from purloin's workers), which lives as
//!   long as the process. [`block_on_with`] takes a handle per call.
//! - **Cost.** A future that is ready at once costs its poll and the context's entry; one that
//!   waits costs a park and an unpark, woken from tokio's driver thread. Nothing is spawned:
//!   the request/response of a client runs where `block_on` was called, as in a tokio task.
//! - **Panics and cancellation.** A panic in the future unwinds out of `block_on` on the green
//!   thread, with its payload. If the green thread stops waiting (it panicked, or its runtime
//!   shut down and unwound it), the future is dropped right there, like a dropped tokio
//!   `JoinHandle` of an aborted task.
//! - **Futures need not be `Send` or `'static`**: they never leave the green thread (which may
//!   move between workers between polls; pin the green thread if a future must stay on one OS
//!   thread). A future that must run on tokio's threads (CPU-heavy, or blocking inside), or
//!   outlive the caller, is spawned there: `block_on(async { tokio::spawn(fut).await })`.
//!
//! # Make tokio futures inside the task
//!
//! Many tokio constructors look up the current tokio runtime when called: `sleep`, `timeout`,
//! `interval`, `TcpStream::from_std`, `tokio::spawn`. A green thread is not in a tokio runtime,
//! so `block_on(tokio::time::sleep(d))` panics in `sleep` ("there is no reactor running"),
//! before `block_on` is even called. Write `block_on(async move { tokio::time::sleep(d).await
//! })`: the `async` block's body runs inside `block_on`'s polls, where the context is entered.
//!
//! ```
//! use std::time::Duration;
//!
//! let h = purloin::spawn(|| {
//!     // A tokio timer, from a green thread: parks only this green thread. Make tokio's
//!     // futures inside the `async` block (see "Make tokio futures inside the task" below).
//!     purloin::tokio::block_on(async {
//!         tokio::time::timeout(Duration::from_secs(60), async { 7 }).await
//!     })
//! });
//! assert_eq!(h.join().unwrap(), Ok(7));
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use ::tokio::runtime::{Handle, Runtime};
use purloin_sched::NoSwitch;

/// The handle [`block_on`] uses: set by [`set_handle`], or the owned runtime's.
static HANDLE: OnceLock<Handle> = OnceLock::new();
/// The runtime purloin starts when no handle was set (never dropped).
static OWNED: OnceLock<Runtime> = OnceLock::new();

/// Makes [`block_on`] spawn its futures on `handle`'s runtime instead of one purloin starts.
/// Call it before the first [`block_on`]; gives `handle` back if a handle is already in use.
///
/// The runtime must be one whose threads drive it (a multi-threaded runtime, or a
/// current-thread runtime that some OS thread keeps inside `block_on`), and it must outlive
/// the green threads that use it: a task of a runtime that shut down comes back as a panic.
pub fn set_handle(handle: Handle) -> Result<(), Handle> {
    let mut given = Some(handle);
    HANDLE.get_or_init(|| given.take().expect("taken once"));
    match given {
        None => Ok(()),
        Some(h) => Err(h),
    }
}

/// The handle [`block_on`] spawns on: the one given to [`set_handle`], or that of the runtime
/// purloin starts on first use.
///
/// # Panics
/// If the runtime cannot start (the OS refused its threads or its I/O driver).
pub fn handle() -> &'static Handle {
    HANDLE.get_or_init(|| {
        OWNED
            .get_or_init(|| {
                // Half the CPUs: the futures are polled on green threads, so tokio's threads
                // only drive I/O and timers and run what the futures spawn; more of them
                // would compete with purloin's workers for the same cores.
                let threads =
                    (std::thread::available_parallelism().map_or(1, usize::from) / 2).clamp(1, 4);
                ::tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads)
                    .thread_name("purloin-tokio")
                    .enable_all()
                    .build()
                    .unwrap_or_else(|e| {
                        panic!("purloin::tokio: could not start the tokio runtime: {e}")
                    })
            })
            .handle()
            .clone()
    })
}

/// Runs `future` to completion on the calling green thread with the tokio runtime of
/// [`handle`] as its context, parking the green thread while it waits (see the module docs);
/// returns its output. On a plain OS thread it blocks that thread.
///
/// # Panics
/// If the future panics (with its payload), or if its code tries to park, yield or block the
/// green thread (with a message that says so; see the module docs).
///
/// # Examples
///
/// ```
/// let h = purloin::spawn(|| {
///     let local = String::from("borrowed");
///     // The future borrows from the green thread's stack: it is polled right here.
///     purloin::tokio::block_on(async {
///         tokio::task::yield_now().await;
///         local.len()
///     })
/// });
/// assert_eq!(h.join().unwrap(), 8);
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    block_on_with(handle(), future)
}

/// [`block_on`] with `handle`'s runtime as the context.
///
/// # Panics
/// As [`block_on`].
///
/// # Examples
///
/// ```
/// let tokio_rt = tokio::runtime::Builder::new_multi_thread()
///     .worker_threads(1)
///     .enable_all()
///     .build()
///     .unwrap();
/// let handle = tokio_rt.handle().clone();
/// let h = purloin::spawn(move || {
///     purloin::tokio::block_on_with(&handle, async {
///         tokio::time::sleep(std::time::Duration::from_millis(1)).await;
///         7
///     })
/// });
/// assert_eq!(h.join().unwrap(), 7);
/// ```
pub fn block_on_with<F: Future>(handle: &Handle, future: F) -> F::Output {
    crate::future::block_on(Entered { handle, future })
}

/// [`block_on`] that gives up when the calling green thread is interrupted, dropping the
/// future (see [`future::block_on_interruptible`](crate::future::block_on_interruptible)).
///
/// # Errors
///
/// [`Interrupted`](crate::cancel::Interrupted) if the green thread was interrupted first.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let h = purloin::spawn(|| {
///     // The sleep is made inside the future: tokio's timers need its context.
///     purloin::tokio::block_on_interruptible(async {
///         tokio::time::sleep(Duration::from_secs(3600)).await
///     })
/// });
/// h.interrupt();
/// assert!(h.join().unwrap().is_err());
/// ```
pub fn block_on_interruptible<F: Future>(
    future: F,
) -> Result<F::Output, crate::cancel::Interrupted> {
    crate::future::block_on_interruptible(Entered { handle: handle(), future })
}

/// Why a bridged poll may not switch (the panic message of [`NoSwitch`]).
const IN_POLL: &str = "a future polled by purloin::tokio::block_on (await async APIs inside it)";

/// A future polled with `handle`'s context entered, in a [`NoSwitch`] section.
struct Entered<'h, F> {
    handle: &'h Handle,
    future: F,
}

impl<F: Future> Future for Entered<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of `self`, and
        // `Entered` has no `Drop` and is `Unpin` only if `F` is.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above: `this.future` stays where it is until `this` is dropped.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        // The section ends after the context is left (drop order: reverse of declaration).
        let _no_switch = NoSwitch::new(IN_POLL);
        let _context = this.handle.enter();
        future.poll(cx)
    }
}
