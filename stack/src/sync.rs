//! The crate's one synchronisation shim: the only module that names `core::sync::atomic`,
//! `std::thread`, `std::sync` or `loom`.
//!
//! Under plain `cfg(loom)` every atomic, mutex, thread and process-wide lazily initialised
//! value below is loom's, so the loom models run the crate's real pool code. Two groups are
//! deliberately *not* swapped:
//!
//! - [`real`]: atomics and a mutex read by the SIGSEGV handler or holding process-wide
//!   constants (the probed guard backend, the chunk registry, the options set before first
//!   use). They live in `const`-initialised statics, loom does not model signals, and loom's
//!   atomics cannot be created outside a model.
//! - The per-thread stack cache (`cache.rs`) is compiled out under loom: it is single-threaded
//!   by construction, and loom's mock thread-locals are dropped after its per-execution
//!   statics, so lease and return go straight to the shared pool, which is the protocol the
//!   models check.
#![allow(unused_imports, dead_code)]

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
/// A mutex for the rare slow paths (growing an arena, registering a size class, a scavenger
/// round) and the condition variable the scavenger sleeps on.
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning: every critical section in this crate leaves the protected
/// state consistent before anything that can panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Atomics that are always the hardware's, never loom's: state read by the signal handler and
/// process-wide constants kept in `const`-initialised statics.
/// Locks `m` if nobody holds it (a poisoned lock counts as free, as in [`lock`]).
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

pub(crate) mod real {
    pub(crate) use core::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        compiler_fence,
    };
    pub(crate) use std::sync::{Mutex, Once};

    /// Locks `m`, ignoring poisoning (see [`super::lock`]).
    pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Declares `fn $name() -> &'static $ty`, a process-wide value created on first use.
///
/// Outside loom it is a `std::sync::OnceLock` (one Acquire load per call once initialised).
/// Under loom it is `loom::lazy_static!`: a fresh value per model execution, dropped when the
/// execution ends, so every execution starts from an empty pool.
macro_rules! process_global {
    ($(#[$attr:meta])* $vis:vis fn $name:ident() -> &'static $ty:ty = $init:expr;) => {
        $(#[$attr])*
        #[cfg(not(loom))]
        $vis fn $name() -> &'static $ty {
            static CELL: std::sync::OnceLock<$ty> = std::sync::OnceLock::new();
            CELL.get_or_init(|| $init)
        }
        $(#[$attr])*
        #[cfg(loom)]
        $vis fn $name() -> &'static $ty {
            loom::lazy_static! {
                static ref CELL: $ty = $init;
            }
            &CELL
        }
    };
}
pub(crate) use process_global;

/// Gives up the CPU while waiting for another thread (loom's scheduler under loom).
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

#[cfg(all(test, loom))]
pub(crate) use loom::{cell::UnsafeCell, model, sync::Arc, thread};
/// Threads for the unit tests and models.
#[cfg(all(test, not(loom)))]
pub(crate) use std::thread;
