//! The short internal lock that guards wait queues and the rendezvous channel: a futex word
//! (Drepper's three-state mutex) that spins briefly and then sleeps the OS thread.
//!
//! Critical sections under this lock are a few pointer updates long and never park or run
//! user code, so a green thread that finds it taken may block its worker for that long (Go's
//! runtime `lock` does the same for its channel and semaphore locks). It is *not* a user-facing
//! lock: [`Mutex`](super::Mutex) parks the green thread instead.
//!
//! # Memory ordering
//!
//! The guarantee is a mutex's: everything written inside one critical section is visible to
//! the next one.
//!
//! - (L1) `lock`'s successful `UNLOCKED => LOCKED` CAS and `swap(CONTENDED)` are Acquire;
//!   they pair with the Release `swap(UNLOCKED)` in `unlock`.
//!
//! Under `cfg(loom)` [`Locked`] is loom's `Mutex` (the models check the protocols *around* the
//! lock, and a modelled futex would multiply their size); [`FutexLock`] itself has its own
//! model in this file.

use core::ops::{Deref, DerefMut};

use purloin_parking::futex;

use crate::loom::{AtomicU32, Ordering};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
/// Locked, and a thread may be asleep in `futex::wait`: `unlock` must wake one.
const CONTENDED: u32 = 2;

/// Spin iterations before sleeping (none under loom: a spin is a state explosion there).
const SPINS: u32 = if cfg!(loom) { 0 } else { 100 };

/// A spin-then-futex lock word without data (see the module docs).
#[derive(Debug)]
pub(crate) struct FutexLock {
    state: AtomicU32,
}

impl FutexLock {
    loom_const_fn! {
        pub(crate) fn new() -> FutexLock {
            FutexLock { state: AtomicU32::new(UNLOCKED) }
        }
    }

    /// Takes the lock.
    #[inline]
    pub(crate) fn lock(&self) {
        // L1: Acquire pairs with the Release swap of the previous `unlock`.
        if self
            .state
            .compare_exchange_weak(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut state = self.state.load(Ordering::Relaxed);
        let mut spins = 0;
        // The holder runs on another OS thread (or was preempted): its section is short.
        while state == LOCKED && spins < SPINS {
            core::hint::spin_loop();
            spins += 1;
            state = self.state.load(Ordering::Relaxed);
        }
        if state == UNLOCKED
            // L1: as in `lock`.
            && self
                .state
                .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return;
        }
        loop {
            // L1: Acquire pairs with `unlock`'s Release. Marking CONTENDED before sleeping
            // makes the holder's `unlock` wake us; we may keep CONTENDED after taking the lock
            // (one spare wake at worst).
            if self.state.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                return;
            }
            futex::wait(&self.state, CONTENDED, None);
        }
    }

    /// Releases the lock.
    ///
    /// # Safety
    ///
    /// - The calling thread holds the lock (took it with [`FutexLock::lock`] and has not
    ///   released it since).
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        // L1: Release publishes the critical section to the next `lock`.
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            // A raw pointer: the lock may be freed by its next holder at once; a stale wake is
            // harmless (purloin_parking's contract).
            futex::wake_one(&self.state);
        }
    }
}

/// Data guarded by a [`FutexLock`] (or by loom's `Mutex` under `cfg(loom)`).
pub(crate) struct Locked<T> {
    #[cfg(not(loom))]
    lock: FutexLock,
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
                Locked { lock: FutexLock::new(), data: core::cell::UnsafeCell::new(value) }
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
    use super::FutexLock;
    use crate::loom::{Arc, UnsafeCell, thread};

    struct Shared {
        lock: FutexLock,
        counter: UnsafeCell<u32>,
    }
    // SAFETY: `counter` is only touched while `lock` is held.
    unsafe impl Sync for Shared {}

    /// Mutual exclusion and no lost wake-up for the three-state futex lock (three lockers, so
    /// one of them sleeps in `futex::wait` on CONTENDED). Mutation check: making the unlock
    /// `store(UNLOCKED)` without the CONTENDED wake leaves a sleeper forever (loom: deadlock).
    #[test]
    fn futex_lock_excludes_and_wakes() {
        loom::model(|| {
            let s = Arc::new(Shared { lock: FutexLock::new(), counter: UnsafeCell::new(0) });
            let hs: Vec<_> = (0..2)
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
            assert_eq!(s.counter.with(|c| unsafe { *c }), 3);
            // SAFETY: we hold the lock.
            unsafe { s.lock.unlock() };
        });
    }
}
