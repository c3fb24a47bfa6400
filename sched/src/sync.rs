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

    /// A spin-loop hint (a plain `spin_loop` outside loom, a yield to the model inside). See
    /// [`Spin`](super::Spin) for the crate's spinning policy.
    pub(crate) fn spin_hint() {
        core::hint::spin_loop();
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

    pub(crate) fn spin_hint() {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::*;

/// Pads and aligns `T` to 128 bytes, the crate's one rule against false sharing: on x86_64 the
/// adjacent-line prefetcher pulls 64-byte lines in pairs, so two values written by different
/// cores must not share a 128-byte pair (crossbeam's `CachePadded` uses the same size there,
/// as does Go's `cpu.CacheLinePad` on its largest targets). Used for the P's, which sit side by
/// side in one allocation (`Shared::ps`).
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> core::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// # Spinning and yielding
///
/// The crate's one policy for waiting on another thread without sleeping, chosen by how long
/// the wait may last:
///
/// - a few instructions of another thread (a lock-free retry, a binder's few stores): one
///   [`spin_hint`] per look;
/// - possibly longer: a [`Spin`] — rounds of spin hints, then OS-thread yields, then (for a
///   caller that can sleep) the caller parks;
/// - a grace period measured in time: [`spin_for`].
///
/// Under loom a spin hint is a yield to the model and spinning rounds are cut short: spinning
/// adds nothing to a protocol and multiplies the interleavings.
pub(crate) struct Spin {
    round: u32,
    /// Rounds below this spin; rounds from it up to `yield_below` yield the OS thread.
    spin_below: u32,
    /// Rounds from this on end the spinning ([`Step::Sleep`]); `u32::MAX` never ends it.
    yield_below: u32,
    /// Spin `2^round` hints per round (else one).
    doubling: bool,
}

/// What a [`Spin`] round did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Spun or yielded: look again.
    Spun,
    /// Done spinning: the caller sleeps (the count starts over).
    Sleep,
}

impl Spin {
    /// A worker searching for work: rounds 1–3 spin 2, 4 and 8 hints, rounds 4–15 yield the
    /// OS thread, round 16 sleeps (seed 003's adaptive spinning). Under loom it sleeps after
    /// one round.
    pub(crate) const fn searching() -> Spin {
        #[cfg(not(loom))]
        let (spin_below, yield_below) = (4, 16);
        #[cfg(loom)]
        let (spin_below, yield_below) = (0, 1);
        Spin { round: 0, spin_below, yield_below, doubling: true }
    }

    /// A wait that another thread ends in a few stores and never blocks: one hint per round
    /// for 63 rounds, then OS-thread yields; never sleeps. Under loom, hints only.
    pub(crate) const fn settling() -> Spin {
        let spin_below = if cfg!(loom) { u32::MAX } else { 64 };
        Spin { round: 0, spin_below, yield_below: u32::MAX, doubling: false }
    }

    /// One round of waiting.
    pub(crate) fn step(&mut self) -> Step {
        self.round = self.round.saturating_add(1);
        if self.round < self.spin_below {
            let hints = if self.doubling { 1u32 << self.round } else { 1 };
            for _ in 0..hints {
                spin_hint();
            }
            Step::Spun
        } else if self.round < self.yield_below {
            thread::yield_now();
            Step::Spun
        } else {
            self.round = 0;
            Step::Sleep
        }
    }
}

/// Spins for `d` (a grace period; under loom one yield to the model).
pub(crate) fn spin_for(d: core::time::Duration) {
    #[cfg(not(loom))]
    {
        let start = std::time::Instant::now();
        while start.elapsed() < d {
            core::hint::spin_loop();
        }
    }
    #[cfg(loom)]
    {
        let _ = d;
        spin_hint();
    }
}

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

/// The worker (`M`) running on this OS thread, type-erased, or null. The scheduler's
/// `current_m` wraps it in a never-inlined accessor.
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
pub(crate) type DiagU32 = core::sync::atomic::AtomicU32;
pub(crate) type DiagUsize = core::sync::atomic::AtomicUsize;
pub(crate) type DiagU64 = core::sync::atomic::AtomicU64;
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
