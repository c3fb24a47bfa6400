//! The crate's one synchronisation shim: the only module that names `core::sync::atomic`,
//! `std::thread` or `loom`. Under plain `cfg(loom)` every atomic, cell and `Arc` below is
//! loom's, so the loom models run the crate's real code.
//!
//! Epoch reclamation comes from `crossbeam-epoch`, which switches to loom's atomics by itself
//! under `cfg(crossbeam_loom)` (set together with `cfg(loom)` by `cargo xtask loom`).
#![allow(unused_imports, dead_code)]

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};

/// An atomic that carries a heuristic hint and no synchronisation (no decision that matters for
/// correctness depends on its value, only how long a thread pauses): the plain one even under
/// loom, so it adds no interleavings to the models.
pub(crate) use core::sync::atomic::AtomicU32 as HintAtomicU32;

#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex};

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `core::cell::UnsafeCell` with loom's closure-based API, so the queue code is identical in
/// both builds and loom can check every access to a slot for data races.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    #[inline(always)]
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a shared raw pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with an exclusive raw pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Capacities shrink under loom so the models stay small (tokio does the same: 256 -> 4).
#[cfg(not(loom))]
pub(crate) const IS_LOOM: bool = false;
#[cfg(loom)]
pub(crate) const IS_LOOM: bool = true;

/// Tells loom a value is being torn down: under loom this writes every cell, so a reader that
/// is not ordered before the teardown (a use-after-free in the real build) is reported as a
/// data race. Without loom it does nothing.
#[inline(always)]
pub(crate) fn mark_freed<T>(cells: &[UnsafeCell<T>]) {
    #[cfg(loom)]
    for cell in cells {
        cell.with_mut(|_| ());
    }
    #[cfg(not(loom))]
    let _ = cells;
}

/// Pads and aligns a value to 128 bytes so that two of them never share a cache line (two
/// 64-byte lines: modern x86 prefetches lines in adjacent pairs, Apple M-series lines are 128
/// bytes), keeping the owner's words and the thieves' words apart.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}
