//! The crate's one synchronisation shim (named `loom`, not `sync`, because `purloin::sync` is
//! a public module): the only module that names `core::sync::atomic`, `std::thread` or the
//! `loom` crate. Under plain `cfg(loom)` everything below is loom's, so the loom models run the
//! runtime's real code.
#![allow(unused_imports, dead_code)]

#[cfg(not(loom))]
mod imp {
    pub(crate) use core::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    };
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
    pub(crate) use std::thread;

    /// `core::cell::UnsafeCell` with loom's closure-based API, so call sites are identical.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    };
    pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
    pub(crate) use loom::thread;
    pub(crate) use loom::thread_local;
}

pub(crate) use imp::*;

/// A plain `core` atomic for statistics and diagnostics (not part of any protocol, so not
/// modelled under loom).
pub(crate) type StatCounter = core::sync::atomic::AtomicU64;

/// A process-wide flag kept in a `static` (loom's atomics cannot be), for a fact that needs no
/// model: each reader relies only on its own earlier store (see `local`'s `MAPS_MADE`).
pub(crate) type ProcessFlag = core::sync::atomic::AtomicBool;

/// Locks a mutex, ignoring poisoning (the runtime's own critical sections do not panic).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}
