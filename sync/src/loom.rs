//! The crate's one synchronisation shim (named `loom`, not `sync`, in a crate that is itself
//! called `sync`): the only module that names `core::sync::atomic`, `std::thread` or the `loom`
//! crate. Under plain `cfg(loom)` everything below is loom's, so the loom models run the
//! primitives' real code.
#![allow(unused_imports, dead_code)]

/// Defines `$vis const fn` outside loom and a plain `fn` under `cfg(loom)` (loom's atomics
/// have no `const` constructors).
macro_rules! loom_const_fn {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($args:tt)*) -> $ret:ty $body:block) => {
        $(#[$m])*
        #[cfg(not(loom))]
        $vis const fn $name($($args)*) -> $ret $body
        $(#[$m])*
        #[cfg(loom)]
        $vis fn $name($($args)*) -> $ret $body
    };
}

#[cfg(not(loom))]
mod imp {
    pub(crate) use core::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering, fence,
    };
    pub(crate) use std::sync::{Arc, Mutex, MutexGuard};
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
        AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering, fence,
    };
    pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};
    pub(crate) use loom::thread;
}

pub(crate) use imp::*;

/// A plain `core` atomic for diagnostics (a lock's recorded holder: not part of any protocol,
/// so not modelled under loom).
pub(crate) type StatCounter = core::sync::atomic::AtomicU64;

/// Locks a mutex, ignoring poisoning (the crate's own critical sections do not panic).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}
