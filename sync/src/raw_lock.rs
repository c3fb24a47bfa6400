//! The short internal lock that guards wait queues and the rendezvous channel: a
//! test-and-test-and-set spin lock whose holder never blocks or runs user code while holding
//! it (the critical sections are a few pointer updates and claims).
//!
//! A spin lock rather than a futex mutex: unlocking is a plain Release store (no atomic
//! read-modify-write), which matters on the hot paths (a channel ping-pong takes this lock four
//! times per round trip). A thread that finds it taken spins briefly and then yields its OS
//! thread: the holder is always running on another OS thread (a green thread holding it has
//! no scheduling point inside, so it cannot be switched out), or was preempted by the OS, which
//! the yield lets run. crossbeam-channel guards its waiter lists the same way.
//!
//! # Memory ordering
//!
//! The guarantee is a mutex's: everything written inside one critical section is visible to
//! the next one.
//!
//! - (L1) `lock`'s successful `false => true` CAS is Acquire; it pairs with the Release store of
//!   `false` in `unlock`.
//!
//! Under `cfg(loom)` [`Locked`] is loom's `Mutex` (the models check the protocols *around* the
//! lock; modelling a spin loop would multiply their size); [`SpinLock`] itself has its own model
//! in this file.

use core::ops::{Deref, DerefMut};

use purloin_sched::spin::Spin;

use crate::loom::{AtomicBool, Ordering};

/// A test-and-test-and-set lock word without data (see the module docs).
#[derive(Debug)]
#[cfg_attr(loom, allow(dead_code))]
pub(crate) struct SpinLock {
    locked: AtomicBool,
}

#[cfg_attr(loom, allow(dead_code))]
impl SpinLock {
    loom_const_fn! {
        pub(crate) fn new() -> SpinLock {
            SpinLock { locked: AtomicBool::new(false) }
        }
    }

    /// Takes the lock.
    #[inline]
    pub(crate) fn lock(&self) {
        // L1: Acquire pairs with the Release store of the previous `unlock`.
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        // The holder never blocks: spin with growing pauses, then yield the OS thread.
        let mut spin = Spin::locking();
        loop {
            // Test before test-and-set: wait on a shared copy of the line.
            while self.locked.load(Ordering::Relaxed) {
                spin.step();
            }
            // L1: as in `lock`.
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// - The calling thread holds the lock (took it with [`SpinLock::lock`] and has not
    ///   released it since).
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        // L1: Release publishes the critical section to the next `lock`.
        self.locked.store(false, Ordering::Release);
    }
}

/// Data guarded by a [`SpinLock`] (or by loom's `Mutex` under `cfg(loom)`).
pub(crate) struct Locked<T> {
    #[cfg(not(loom))]
    lock: SpinLock,
    #[cfg(not(loom))]
    data: core::cell::UnsafeCell<T>,
    #[cfg(loom)]
    inner: crate::loom::Mutex<T>,
}

// SAFETY: `data` is only reached through a guard, which exists only while `lock` is held, so
// at most one thread touches it at a time; moving the `T` between threads needs `T: Send`.
unsafe impl<T: Send> Sync for Locked<T> {}
// SAFETY: owning a `Locked<T>` owns the `T` in `data`.
unsafe impl<T: Send> Send for Locked<T> {}

impl<T> Locked<T> {
    loom_const_fn! {
        pub(crate) fn new(value: T) -> Locked<T> {
            #[cfg(not(loom))]
            {
                Locked { lock: SpinLock::new(), data: core::cell::UnsafeCell::new(value) }
            }
            #[cfg(loom)]
            {
                Locked { inner: crate::loom::Mutex::new(value) }
            }
        }
    }

    /// Locks and returns a guard that unlocks on drop.
    #[inline]
    pub(crate) fn lock(&self) -> LockedGuard<'_, T> {
        #[cfg(not(loom))]
        {
            self.lock.lock();
            LockedGuard { owner: self }
        }
        #[cfg(loom)]
        {
            LockedGuard { guard: crate::loom::lock(&self.inner) }
        }
    }
}

/// Access to the data of a [`Locked`] while its lock is held.
pub(crate) struct LockedGuard<'a, T> {
    #[cfg(not(loom))]
    owner: &'a Locked<T>,
    #[cfg(loom)]
    guard: crate::loom::MutexGuard<'a, T>,
}

impl<T> Deref for LockedGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        #[cfg(not(loom))]
        {
            // SAFETY: the guard exists only while the lock is held, so nobody else accesses
            // `data` (see `unsafe impl Sync for Locked`).
            unsafe { &*self.owner.data.get() }
        }
        #[cfg(loom)]
        {
            &self.guard
        }
    }
}

impl<T> DerefMut for LockedGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        {
            // SAFETY: as in `deref`, and `&mut self` makes this the only access path.
            unsafe { &mut *self.owner.data.get() }
        }
        #[cfg(loom)]
        {
            &mut self.guard
        }
    }
}

#[cfg(not(loom))]
impl<T> Drop for LockedGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this guard was created by `Locked::lock` after taking the lock, and is the
        // only guard of that acquisition.
        unsafe { self.owner.lock.unlock() };
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::SpinLock;
    use crate::loom::{Arc, UnsafeCell, thread};

    struct Shared {
        lock: SpinLock,
        counter: UnsafeCell<u32>,
    }
    // SAFETY: `counter` is only touched while `lock` is held.
    unsafe impl Sync for Shared {}

    /// Mutual exclusion of the spin lock, two lockers: loom checks every access to the counter
    /// for a data race. Mutation check: making the unlock store `Relaxed` makes loom report
    /// "Causality violation: Concurrent write accesses to `UnsafeCell`" on the counter.
    #[test]
    fn spin_lock_excludes() {
        loom::model(|| {
            let s = Arc::new(Shared { lock: SpinLock::new(), counter: UnsafeCell::new(0) });
            let hs: Vec<_> = (0..1)
                .map(|_| {
                    let s = s.clone();
                    thread::spawn(move || {
                        s.lock.lock();
                        // SAFETY: the lock is held.
                        s.counter.with_mut(|c| unsafe { *c += 1 });
                        // SAFETY: we hold the lock.
                        unsafe { s.lock.unlock() };
                    })
                })
                .collect();
            s.lock.lock();
            // SAFETY: the lock is held.
            s.counter.with_mut(|c| unsafe { *c += 1 });
            // SAFETY: we hold the lock.
            unsafe { s.lock.unlock() };
            for h in hs {
                h.join().unwrap();
            }
            s.lock.lock();
            // SAFETY: the lock is held.
            assert_eq!(s.counter.with(|c| unsafe { *c }), 2);
            // SAFETY: we hold the lock.
            unsafe { s.lock.unlock() };
        });
    }
}
