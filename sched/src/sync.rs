//! The crate's one synchronisation shim: the only module that names `core::sync::atomic`,
//! `std::thread` or `loom`. Under plain `cfg(loom)` every atomic, lock, cell, thread and
//! thread-local below is loom's, so the loom models run the scheduler's real code.
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
}

pub(crate) use imp::*;

/// The padding type and the spinning policy live in [`crate::spin`] (public: the facade uses
/// them too); the crate names them through this shim like everything else.
pub(crate) use crate::spin::{Padded, Spin, Step, spin_for, spin_hint};

/// A lock for process-wide diagnostic bookkeeping held in `static`s (`outside.rs`): always
/// std's, also under loom (loom's mutexes cannot be built in a `const`; the bookkeeping is not
/// part of any modelled protocol and the lock is never held across a park).
pub(crate) use std::sync::{Mutex as DiagMutex, MutexGuard as DiagMutexGuard};

#[cfg(not(loom))]
std::thread_local! {
    static CURRENT_WORKER: core::cell::Cell<*const ()> = const { core::cell::Cell::new(core::ptr::null()) };
}
#[cfg(loom)]
loom::thread_local! {
    static CURRENT_WORKER: core::cell::Cell<*const ()> = core::cell::Cell::new(core::ptr::null());
}

/// The worker (`M`) running on this OS thread, type-erased, or null (`worker::current_m` casts
/// it).
///
/// Never inlined: a G may resume on another OS thread, and an inlined thread-local access
/// could reuse a thread pointer computed before a switch. It lives next to the `thread_local!`
/// so that the access itself is inlined into it: from another module (another codegen unit)
/// the key's accessor is an opaque call, which made every lookup three calls deep.
#[inline(never)]
pub(crate) fn current_worker_ptr() -> *const () {
    CURRENT_WORKER.with(|c| c.get())
}

/// Sets (or clears, with null) the worker running on this OS thread.
pub(crate) fn set_current_worker_ptr(m: *const ()) {
    CURRENT_WORKER.with(|c| c.set(m));
}

/// A statistics counter. Always a plain `core` atomic, also under loom: counters are not part
/// of any protocol, and modelling them would only multiply the explored interleavings.
pub(crate) type StatCounter = core::sync::atomic::AtomicU64;
/// Diagnostic words (what a green thread waits on): plain `core` atomics for the same reason.
pub(crate) type DiagU8 = core::sync::atomic::AtomicU8;
pub(crate) type DiagU32 = core::sync::atomic::AtomicU32;
pub(crate) type DiagUsize = core::sync::atomic::AtomicUsize;
pub(crate) type DiagU64 = core::sync::atomic::AtomicU64;
pub(crate) type DiagPtr<T> = core::sync::atomic::AtomicPtr<T>;
/// The switch hook's "installed" flag (`hook`): a plain `core` atomic, also under loom (set
/// once per process, never by a model, and a `static`, which loom's atomics cannot be).
pub(crate) type HookFlag = core::sync::atomic::AtomicBool;
/// The ordering of the hook flag: Relaxed (the hook itself is published by its `OnceLock`).
pub(crate) const HOOK_FLAG: core::sync::atomic::Ordering = core::sync::atomic::Ordering::Relaxed;

/// The ordering for statistics counters (never used to synchronise anything).
pub(crate) const STAT: core::sync::atomic::Ordering = core::sync::atomic::Ordering::Relaxed;

/// Locks a mutex, ignoring poisoning: the scheduler's own critical sections never panic while
/// holding a lock, so a poisoned lock can only come from an abort-in-progress.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}
