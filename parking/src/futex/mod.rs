//! Waiting on a 32-bit word: `futex` on Linux, `WaitOnAddress` on Windows, with absolute
//! deadlines everywhere, and a loom emulation so models above run the real code.
//!
//! [`wait`] blocks the calling OS thread while an [`AtomicU32`] holds an expected value;
//! [`wake_one`], [`wake`] and [`wake_all`] wake threads blocked on a word. This is the only
//! module of purloin that issues futex or `WaitOnAddress` calls.
//!
//! # Guarantee
//!
//! For one word, the check "does it still hold `expected`?" and the enqueueing of the waiter
//! happen as one step with respect to wakes of that word (the kernel's hash-bucket lock; a
//! mutex in the fallback and the loom emulation). So if a thread changes the word and *then*
//! calls `wake*`, a concurrent [`wait`] either sees the new value and returns
//! [`WaitResult::ValueChanged`] without sleeping, or it was already asleep and the wake finds
//! it. That is the whole contract: no lost wake-up between "check" and "sleep".
//!
//! The functions do not order the caller's other memory accesses. Publish data with a
//! `Release` write of the word (or a release write before it) and read it after the wait with
//! an `Acquire` load of the word, as [`ParkingLot`](crate::ParkingLot) and
//! [`Parker`](crate::Parker) do.
//!
//! # Spurious returns
//!
//! A wait can return [`WaitResult::Woken`] although nobody meant to wake it: the OS may return
//! early (Windows documents this), a wake meant for an earlier value of the word can land on a
//! later waiter, and a `wake` through a dangling pointer can hit a new word at the same address.
//! This is not an error. Callers loop: re-read the word and wait again if nothing they care
//! about changed. Spurious returns are counted in
//! [`stats::Counters::spurious_returns`](crate::stats::Counters::spurious_returns). A timed wait
//! never reports [`WaitResult::TimedOut`] before its deadline.
//!
//! # Platforms
//!
//! | platform | untimed wait | timed wait | wake count |
//! |---|---|---|---|
//! | Linux, Android | `futex(FUTEX_WAIT_BITSET \| FUTEX_PRIVATE_FLAG)` | same, absolute `CLOCK_MONOTONIC` deadline | exact |
//! | Windows | `atomic-wait` (`WaitOnAddress`, `INFINITE`) | `WaitOnAddress`, remaining milliseconds recomputed after every return | upper bound |
//! | macOS, iOS, watchOS, FreeBSD | `atomic-wait` | fallback table (mutex + condvar per address bucket) | upper bound |
//! | other `std` platforms | fallback table | fallback table | exact |
//! | `cfg(loom)` | emulation on loom `Mutex` + `Condvar` | may return at any point | exact |
//!
//! On Linux the crate issues its own syscall for untimed waits too (rather than calling
//! `atomic-wait`): the same `FUTEX_WAIT_BITSET` call serves both, and only the raw result tells
//! [`WaitResult::ValueChanged`] (`EAGAIN`) from [`WaitResult::Woken`], and the wake side
//! needs the count that only the raw syscall returns. This project's CI runs the tests on
//! x86_64 Linux, on aarch64 Linux under qemu-user, and on x86_64 Windows (gnu) under wine; the
//! atomic-wait paths are type-checked for macOS and in Linux test builds but not run (the
//! fallback table is tested on Linux).
//!
//! # Wake counts
//!
//! Where the OS reports how many threads a wake woke (Linux and Android futexes, the fallback
//! table, the loom emulation) the `wake*` functions return that count, and a count of 0 means
//! nobody was asleep on the word at that instant. `WakeByAddressSingle`/`All` and atomic-wait
//! report nothing, so there (Windows, macOS, iOS, watchOS, FreeBSD) `wake(n)` returns `n` and
//! `wake_all` `usize::MAX`, whether or not anybody waited: an upper bound, which says nothing
//! about whether a sleeper was found. [`WAKE_COUNT_IS_EXACT`] tells the two apart. Portable
//! code never retries "until a wake reports a thread": it changes the word first and lets the
//! waiter re-check it, or wakes until the waiter is seen to have returned.
//!
//! # Under loom
//!
//! loom has no futex (loom#306), so under `cfg(loom)` every word lives in one emulated wait
//! queue: a loom `Mutex` guarding a list of `(address, ticket)` entries and a loom `Condvar`.
//! [`wait`] compares and enqueues under the mutex; a `wake` removes up to `n` matching entries
//! (oldest first) and notifies the condvar; a waiter returns once its entry is gone. A timed
//! wait releases the mutex, lets other threads run, and re-takes it: if a wake removed its
//! entry meanwhile it returns [`WaitResult::Woken`], else [`WaitResult::TimedOut`]. That
//! explores "the deadline expires at any point", which is exactly what a caller must be ready
//! for (the deadline is wall-clock time that a model cannot see), so it is sound for callers:
//! every behaviour the emulation shows, the real OS can show. An untimed wait that nobody wakes
//! blocks forever, and loom reports the deadlock: that is how a lost wake-up fails a model.
//! Spurious wakes can be injected by calling [`wake_all`] without changing the word.
//! The emulation records [`crate::stats`] counters per execution, so a model can assert
//! how many wake calls were made.

use std::time::Instant;

use crate::stats::{self, Event};
use crate::sync::Ordering;

/// The word type the waits operate on: `core::sync::atomic::AtomicU32`, or loom's under
/// `cfg(loom)` (the same type a dependent crate gets from its own loom shim).
pub use crate::sync::AtomicU32;

cfg_if::cfg_if! {
    if #[cfg(loom)] {
        mod table;
        use table as imp;
    } else if #[cfg(any(target_os = "linux", target_os = "android"))] {
        mod linux;
        use linux as imp;
    } else if #[cfg(windows)] {
        mod windows;
        use windows as imp;
    } else if #[cfg(any(
        target_os = "macos",
        target_os = "ios",
        target_os = "watchos",
        target_os = "freebsd"
    ))] {
        mod table;
        mod hybrid;
        use hybrid as imp;
    } else {
        mod table;
        use table as imp;
    }
}

// The modules of other platforms are type-checked (not run) in Linux test builds, and the
// fallback table is tested there, so a change here cannot silently break them.
#[cfg(all(test, not(loom), target_os = "linux"))]
#[allow(dead_code)]
mod hybrid;
#[cfg(all(test, not(loom), target_os = "linux"))]
#[allow(dead_code)]
mod table;
#[cfg(all(test, not(loom), target_os = "linux"))]
#[allow(dead_code)]
mod windows;

/// How a [`wait`] ended.
///
/// # Examples
///
/// ```
/// use purloin_parking::futex::{self, AtomicU32, WaitResult};
///
/// let word = AtomicU32::new(1);
/// // The word does not hold 0, so the call returns at once without sleeping.
/// assert_eq!(futex::wait(&word, 0, None), WaitResult::ValueChanged);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitResult {
    /// The thread slept and was woken, or returned spuriously (see the
    /// [module docs](self#spurious-returns)). Re-read the word.
    Woken,
    /// The deadline passed. Never reported before the deadline.
    TimedOut,
    /// The word did not hold `expected` when checked, so the thread did not sleep.
    ValueChanged,
}

/// If `atomic` holds `expected`, sleeps until woken, until `deadline` (if any) passes, or
/// spuriously.
///
/// `deadline` is absolute, so a caller that loops after spurious returns keeps one deadline
/// instead of recomputing a timeout. A deadline that already passed returns
/// [`WaitResult::TimedOut`] at once (after the value check). The comparison and the sleep are
/// atomic with respect to [`wake`]s of the same word (see the [module docs](self#guarantee)).
///
/// # Panics
///
/// If the OS rejects the wait for a reason other than a timeout, an interruption or a changed
/// value (for example `ENOSYS` when a seccomp filter forbids `futex`): that is an environment
/// this crate cannot work in, and returning would turn every caller's wait loop into a spin.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use purloin_parking::futex::{self, AtomicU32, WaitResult};
///
/// let word = AtomicU32::new(0);
/// let deadline = Instant::now() + Duration::from_millis(10);
/// // Nobody wakes us: the wait ends at the deadline (or earlier, spuriously).
/// loop {
///     match futex::wait(&word, 0, Some(deadline)) {
///         WaitResult::TimedOut => break,
///         WaitResult::Woken | WaitResult::ValueChanged => continue,
///     }
/// }
/// assert!(Instant::now() >= deadline);
/// ```
pub fn wait(atomic: &AtomicU32, expected: u32, deadline: Option<Instant>) -> WaitResult {
    // A plain load first: if the word already moved, no syscall. (Under loom the emulation's
    // own check under its mutex is the only one, to keep the models small.)
    if cfg!(not(loom)) && atomic.load(Ordering::Relaxed) != expected {
        return WaitResult::ValueChanged;
    }
    let result = imp::wait(atomic, expected, deadline);
    match result {
        WaitResult::TimedOut => stats::record(Event::Timeout),
        // Not under loom: the extra load would be one more modelled operation in every model
        // of every crate above, for a diagnostic.
        WaitResult::Woken
            if stats::ENABLED && cfg!(not(loom)) && atomic.load(Ordering::Relaxed) == expected =>
        {
            stats::record(Event::Spurious);
        }
        WaitResult::Woken | WaitResult::ValueChanged => {}
    }
    result
}

/// Wakes at most one thread blocked in [`wait`] on `atomic`; returns how many were woken
/// (see [`wake`] for what the count means on each platform).
///
/// Takes a pointer rather than a reference so that a thread can wake after the word might have
/// been freed (the last thing an unlocker does may be to wake, and the waiter may free the word
/// as soon as it sees the new value). The pointer is never dereferenced; a dangling or
/// reused address at worst causes a spurious wake-up of whoever waits there now.
///
/// # Examples
///
/// ```
/// use purloin_parking::futex::{self, AtomicU32};
///
/// let word = AtomicU32::new(0);
/// assert_eq!(futex::wake_one(&word), if futex::WAKE_COUNT_IS_EXACT { 0 } else { 1 });
/// ```
pub fn wake_one(atomic: *const AtomicU32) -> usize {
    wake(atomic, 1)
}

/// Wakes every thread blocked in [`wait`] on `atomic`; returns how many were woken (see
/// [`wake`]; where the OS does not report a count this is `usize::MAX`).
///
/// The pointer is never dereferenced (see [`wake_one`]).
///
/// # Examples
///
/// ```
/// use purloin_parking::futex::{self, AtomicU32};
///
/// let word = AtomicU32::new(0);
/// let woken = futex::wake_all(&word);
/// assert!(woken == 0 || !futex::WAKE_COUNT_IS_EXACT);
/// ```
pub fn wake_all(atomic: *const AtomicU32) -> usize {
    wake(atomic, u32::MAX)
}

/// Wakes at most `n` threads blocked in [`wait`] on `atomic`; `n = u32::MAX` wakes all.
///
/// Returns the number of threads woken where the OS reports it ([`WAKE_COUNT_IS_EXACT`]:
/// Linux, Android, the fallback table, the loom emulation). Elsewhere (Windows, the
/// atomic-wait platforms) it returns `n`, an upper bound (`usize::MAX` for "all").
/// `n = 0` wakes nobody, makes no call and returns 0.
///
/// A thread counted as woken may still find nothing changed and wait again (a wake can land on
/// a thread that started waiting after the change it announces); callers that need "at least
/// one thread will look" must make the waiter re-check the word, as every wait loop does.
///
/// The pointer is never dereferenced (see [`wake_one`]).
///
/// # Examples
///
/// ```
/// use std::sync::atomic::Ordering;
/// use purloin_parking::futex::{self, AtomicU32, WaitResult};
///
/// let word = AtomicU32::new(0);
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         while word.load(Ordering::Acquire) == 0 {
///             futex::wait(&word, 0, None);
///         }
///     });
///     word.store(1, Ordering::Release);
///     futex::wake(&word, 1);
/// });
/// ```
pub fn wake(atomic: *const AtomicU32, n: u32) -> usize {
    if n == 0 {
        return 0;
    }
    stats::record(Event::FutexWake);
    let woken = imp::wake(atomic, n);
    if WAKE_COUNT_IS_EXACT && woken == 0 {
        stats::record(Event::WakeEmpty);
    }
    woken
}

/// Whether [`wake`], [`wake_one`] and [`wake_all`] return the exact number of threads woken
/// (`true` on Linux, Android, the fallback table and under loom) or an upper bound (`false` on
/// Windows and the atomic-wait platforms, whose OS calls report no count).
pub const WAKE_COUNT_IS_EXACT: bool = imp::WAKE_COUNT_IS_EXACT;
