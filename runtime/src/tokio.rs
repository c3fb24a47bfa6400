//! Running tokio-based futures from green threads (the `tokio` cargo feature).
//!
//! [`block_on`] spawns the future on a tokio runtime and parks the calling green thread until
//! the tokio task completes: the future's I/O and timers are driven by tokio's threads, and the
//! green thread's worker runs other green threads meanwhile. See the
//! [`future` module](crate::future) for the whole picture and the pitfalls.
//!
//! # Design
//!
//! - **No tokio context on a worker.** The future is handed to tokio with `Handle::spawn`,
//!   which enters no runtime context on the calling thread; the green thread then waits for the
//!   task's `JoinHandle` with [`future::block_on`](crate::future::block_on), whose waker (called
//!   by a tokio thread when the task completes) unparks the green thread. So a worker never
//!   carries a tokio context across a park, and never blocks.
//! - **Which runtime.** The handle given to [`set_handle`] before first use, or else a
//!   multi-threaded tokio runtime that purloin starts on first use (threads named
//!   `purloin-tokio`, as many as CPUs up to 4, I/O and time drivers enabled), which lives as
//!   long as the process. [`block_on_with`] takes a handle per call.
//! - **Panics and cancellation.** A panic in the future is caught by tokio and resumed on the
//!   green thread, with the original payload. If the green thread stops waiting (it panicked,
//!   or its runtime shut down and unwound it), the tokio task is aborted: tokio drops the
//!   future on one of its threads, at once if it is idle, else when its current poll returns.
//!
//! # Make tokio futures inside the task
//!
//! Many tokio constructors look up the current tokio runtime when called: `sleep`, `timeout`,
//! `interval`, `TcpStream::from_std`, `tokio::spawn`. A green thread is not in a tokio runtime,
//! so `block_on(tokio::time::sleep(d))` panics in `sleep` ("there is no reactor running"),
//! before `block_on` is even called. Write `block_on(async move { tokio::time::sleep(d).await
//! })`: the `async` block's body runs in the tokio task, where they find the runtime.
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
use std::sync::OnceLock;

use ::tokio::runtime::{Handle, Runtime};
use ::tokio::task::JoinHandle;

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
                let threads =
                    std::thread::available_parallelism().map_or(1, usize::from).clamp(1, 4);
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

/// Runs `future` on the tokio runtime of [`handle`] and parks the calling green thread until
/// it completes; returns its output. On a plain OS thread it blocks that thread.
///
/// # Panics
/// If the future panics (with its payload), or if the tokio runtime shut down before the
/// future completed.
pub fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    block_on_with(handle(), future)
}

/// [`block_on`] on the runtime of `handle`.
///
/// # Panics
/// As [`block_on`].
pub fn block_on_with<F>(handle: &Handle, future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut task = AbortOnDrop(handle.spawn(future));
    match crate::future::block_on(&mut task.0) {
        Ok(out) => out,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!(
            "purloin::tokio::block_on: the future did not complete: {e} (its tokio runtime \
             shut down)"
        ),
    }
}

/// Aborts the tokio task when the waiting green thread stops waiting (a no-op once it
/// completed).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
