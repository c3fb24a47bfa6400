//! The crate's one synchronisation shim: the only module that names `core::sync::atomic`,
//! `std::sync`, `std::thread` or `loom`. Under plain `cfg(loom)` every atomic, lock and `Arc`
//! below is loom's, so the loom models run the crate's real code (and a dependent crate's
//! models, built with the same `--cfg loom`, run this crate's real code too).
#![allow(unused_imports, dead_code)]

#[cfg(not(loom))]
mod imp {
    pub use core::sync::atomic::AtomicU32;
    pub(crate) use core::sync::atomic::{AtomicUsize, Ordering, fence};
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
    pub(crate) use std::thread;
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::lazy_static;
    pub use loom::sync::atomic::AtomicU32;
    pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering, fence};
    pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
    pub(crate) use loom::thread;
}

/// Public (re-exported as `futex::AtomicU32`): the word type of the futex API.
pub use imp::AtomicU32;
pub(crate) use imp::*;

/// Pads and aligns `T` to 128 bytes, the crate's one rule against false sharing: two values
/// written by different threads must not share a 128-byte pair of lines (x86_64 prefetches
/// 64-byte lines in adjacent pairs; some ARM cores have 128-byte lines). Used for each lot of
/// `ParkingLots`, each parker's token word and each statistics counter.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> core::ops::Deref for Padded<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A diagnostic counter cell. Always a real `core` atomic, also under loom: counters are
/// written with `Relaxed` increments and never read by the code they count, so they cannot
/// change what a model explores, and keeping them out of loom's view keeps models small.
pub(crate) type CounterCell = core::sync::atomic::AtomicU64;

/// Locks `mutex`, ignoring poisoning. The crate's critical sections run no user code and do
/// not panic, so a poisoned lock can only be left by a panic elsewhere in an unwinding thread;
/// the protected data is still consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
