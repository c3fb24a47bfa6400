//! [`RwLock`]: a reader-writer lock on two butexes, writer-preferring (the futex design of
//! std's Linux `RwLock`): readers do not overtake a waiting writer, so writers are not starved.
//!
//! # State (`state`, the first butex)
//!
//! Bits 0..30: the number of readers, or `MASK` (all ones) for write-locked. Bit 30
//! `READERS_WAITING`, bit 31 `WRITERS_WAITING`. Readers sleep on `state`; writers on
//! `writer_notify`, a counter bumped by each writer wake-up (a condition variable's sequence,
//! so a wake between a writer's check and its sleep is not lost).
//!
//! Unlocking to zero with waiters: if writers wait, wake one writer (readers keep waiting); if
//! no writer was actually asleep, or only readers wait, wake every reader.
//!
//! # Memory ordering
//!
//! The guarantee is a reader-writer lock's: a write critical section happens before every later
//! critical section; a read section before every later write section.
//!
//! - (R1) Lock CASes are Acquire; they pair with the Release `fetch_sub` of read and write
//!   unlocks.
//! - (R2) `writer_notify`'s `fetch_add` is Release and a waiting writer's load of it Acquire,
//!   so a writer that re-reads `state` after loading `writer_notify` sees the unlocker's
//!   changes to `state` (it then sleeps only if the counter has not moved).
//! - Waiting-bit changes are Relaxed: sleepers re-validate under the butex lock (butex B1/B2).

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use std::sync::{LockResult, TryLockError, TryLockResult};

use purloin_sched::WaitKind;

use crate::butex::Butex;
use crate::poison;
use crate::waiter::OnInterrupt;
use purloin_sched::spin::spin_hint;

use crate::diagnostics::{Holder, wait_info};
use crate::loom::Ordering;

const READ_LOCKED: u32 = 1;
const MASK: u32 = (1 << 30) - 1;
const WRITE_LOCKED: u32 = MASK;
const MAX_READERS: u32 = MASK - 1;
const READERS_WAITING: u32 = 1 << 30;
const WRITERS_WAITING: u32 = 1 << 31;

const SPINS: u32 = if cfg!(loom) { 0 } else { 100 };

#[inline]
fn is_unlocked(state: u32) -> bool {
    state & MASK == 0
}
#[inline]
fn is_write_locked(state: u32) -> bool {
    state & MASK == WRITE_LOCKED
}
#[inline]
fn has_readers_waiting(state: u32) -> bool {
    state & READERS_WAITING != 0
}
#[inline]
fn has_writers_waiting(state: u32) -> bool {
    state & WRITERS_WAITING != 0
}
#[inline]
fn is_read_lockable(state: u32) -> bool {
    // Not while a writer (or a reader that yielded to one) waits: writer preference.
    state & MASK < MAX_READERS && !has_readers_waiting(state) && !has_writers_waiting(state)
}

/// A reader-writer lock for green threads and OS threads, shaped like [`std::sync::RwLock`].
///
/// Any number of readers or one writer. Writer-preferring: once a writer waits, new readers
/// queue behind it, so a stream of readers cannot starve writers. Waiting parks the green
/// thread. Poisoned (as std) when a writer panics while holding it.
///
/// # Examples
///
/// ```
/// use purloin_sync::RwLock;
///
/// let lock = RwLock::new(5);
/// {
///     let r1 = lock.read().unwrap();
///     let r2 = lock.read().unwrap();
///     assert_eq!(*r1 + *r2, 10);
/// }
/// *lock.write().unwrap() += 1;
/// assert_eq!(*lock.read().unwrap(), 6);
/// ```
pub struct RwLock<T: ?Sized> {
    state: Butex,
    writer_notify: Butex,
    poison: poison::Flag,
    writer: Holder,
    data: UnsafeCell<T>,
}

// SAFETY: the lock owns `data`.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: readers share `&T` (needs `T: Sync`), a writer gets `&mut T` from any thread (needs
// `T: Send`); guards exist only while `state` grants them (R1).
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// Shared access to a read-locked [`RwLock`]; unlocks when dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a read guard only gives `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}

/// Exclusive access to a write-locked [`RwLock`]; unlocks when dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized + 'a> {
    lock: &'a RwLock<T>,
    poison: poison::Guard,
    _not_send: PhantomData<*const ()>,
}

// SAFETY: a shared write guard only gives `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<T> RwLock<T> {
    loom_const_fn! {
        /// An unlocked lock holding `value`.
        pub fn new(value: T) -> RwLock<T> {
            RwLock {
                state: Butex::new(0),
                writer_notify: Butex::new(0),
                poison: poison::Flag::new(),
                writer: Holder::new(),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// Consumes the lock and returns its data (an error if poisoned, still carrying it).
    pub fn into_inner(self) -> LockResult<T> {
        let poisoned = self.poison.get();
        let data = self.data.into_inner();
        if poisoned { Err(std::sync::PoisonError::new(data)) } else { Ok(data) }
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading, parking the caller while a writer holds or waits for the lock.
    ///
    /// # Errors
    ///
    /// If poisoned; the error carries the guard.
    ///
    /// # Panics
    ///
    /// If about a billion (2^30 − 2) read guards are alive at once.
    #[inline]
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        let state = self.word().load(Ordering::Relaxed);
        // R1: Acquire pairs with the Release of the last unlock.
        if !is_read_lockable(state)
            || self
                .word()
                .compare_exchange_weak(
                    state,
                    state + READ_LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            self.read_contended();
        }
        let guard = RwLockReadGuard { lock: self, _not_send: PhantomData };
        poison::map_result(&self.poison, guard)
    }

    /// Locks for reading if possible right now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] if a writer holds or waits for it;
    /// [`TryLockError::Poisoned`] if poisoned.
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        let mut state = self.word().load(Ordering::Relaxed);
        loop {
            if !is_read_lockable(state) {
                return Err(TryLockError::WouldBlock);
            }
            // R1: as in `read`.
            match self.word().compare_exchange_weak(
                state,
                state + READ_LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(s) => state = s,
            }
        }
        let guard = RwLockReadGuard { lock: self, _not_send: PhantomData };
        poison::map_result(&self.poison, guard).map_err(TryLockError::from)
    }

    /// Locks for writing, parking the caller until no reader or writer holds the lock.
    ///
    /// # Errors
    ///
    /// If poisoned; the error carries the guard.
    #[inline]
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        // R1: Acquire pairs with the Release of the last unlock.
        if self
            .word()
            .compare_exchange_weak(0, WRITE_LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.write_contended();
        }
        self.writer.set_current();
        let guard =
            RwLockWriteGuard { lock: self, poison: self.poison.guard(), _not_send: PhantomData };
        poison::map_result(&self.poison, guard)
    }

    /// Locks for writing if it is free right now.
    ///
    /// # Errors
    ///
    /// [`TryLockError::WouldBlock`] if held; [`TryLockError::Poisoned`] if poisoned.
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        let mut state = self.word().load(Ordering::Relaxed);
        loop {
            if !is_unlocked(state) {
                return Err(TryLockError::WouldBlock);
            }
            // R1: as in `write`.
            match self.word().compare_exchange_weak(
                state,
                state + WRITE_LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(s) => state = s,
            }
        }
        self.writer.set_current();
        let guard =
            RwLockWriteGuard { lock: self, poison: self.poison.guard(), _not_send: PhantomData };
        poison::map_result(&self.poison, guard).map_err(TryLockError::from)
    }

    /// Whether a writer panicked while holding the lock.
    pub fn is_poisoned(&self) -> bool {
        self.poison.get()
    }

    /// Clears the poisoned state.
    pub fn clear_poison(&self) {
        self.poison.clear();
    }

    /// The data, through a unique borrow (no locking needed).
    ///
    /// # Errors
    ///
    /// If poisoned; the error carries the reference.
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        let poisoned = self.poison.get();
        let data = self.data.get_mut();
        if poisoned { Err(std::sync::PoisonError::new(data)) } else { Ok(data) }
    }

    #[inline]
    fn word(&self) -> &crate::loom::AtomicU32 {
        self.state.value()
    }

    #[cold]
    #[inline(never)]
    fn read_contended(&self) {
        let mut state = self.spin_read();
        loop {
            if is_read_lockable(state) {
                // R1: Acquire pairs with the last unlock's Release.
                match self.word().compare_exchange_weak(
                    state,
                    state + READ_LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(s) => {
                        state = s;
                        continue;
                    }
                }
            }
            if state & MASK == MAX_READERS {
                panic!(
                    "purloin_sync::RwLock: too many read guards alive at once (2^30 - 2); \
                     drop read guards before taking more"
                );
            }
            if !has_readers_waiting(state)
                && let Err(s) = self.word().compare_exchange(
                    state,
                    state | READERS_WAITING,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
            {
                state = s;
                continue;
            }
            let info = wait_info(WaitKind::RwLockRead, self, self.writer.get());
            // Readers are woken all at once: nothing to pass on when unwound.
            self.state.wait_with(state | READERS_WAITING, None, info, OnInterrupt::Ignore, |_| {});
            state = self.spin_read();
        }
    }

    #[cold]
    #[inline(never)]
    fn write_contended(&self) {
        let mut state = self.spin_write();
        let mut other_writers_waiting = 0;
        loop {
            if is_unlocked(state) {
                // R1: Acquire. Keep WRITERS_WAITING if we ever waited: others may still wait.
                match self.word().compare_exchange_weak(
                    state,
                    state | WRITE_LOCKED | other_writers_waiting,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(s) => {
                        state = s;
                        continue;
                    }
                }
            }
            if !has_writers_waiting(state)
                && let Err(s) = self.word().compare_exchange(
                    state,
                    state | WRITERS_WAITING,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
            {
                state = s;
                continue;
            }
            other_writers_waiting = WRITERS_WAITING;
            // R2: Acquire pairs with `wake_writer`'s Release; read the counter before
            // re-checking the state, so a wake after the re-check moves the counter.
            let seq = self.writer_notify.value().load(Ordering::Acquire);
            state = self.word().load(Ordering::Relaxed);
            if is_unlocked(state) || !has_writers_waiting(state) {
                continue;
            }
            let info = wait_info(WaitKind::Mutex, self, self.writer.get());
            self.writer_notify.wait_with(seq, None, info, OnInterrupt::Ignore, |claimed| {
                if claimed.is_some() {
                    self.pass_on_writer_wake();
                }
            });
            state = self.spin_write();
        }
    }

    fn spin_until(&self, stop: impl Fn(u32) -> bool) -> u32 {
        let mut spins = 0;
        loop {
            let state = self.word().load(Ordering::Relaxed);
            if stop(state) || spins >= SPINS {
                return state;
            }
            spins += 1;
            spin_hint();
        }
    }

    fn spin_read(&self) -> u32 {
        // Stop when unlocked, read-locked, or anyone waits.
        self.spin_until(|s| !is_write_locked(s) || has_readers_waiting(s) || has_writers_waiting(s))
    }

    fn spin_write(&self) -> u32 {
        // Stop when unlocked or others wait.
        self.spin_until(|s| is_unlocked(s) || has_writers_waiting(s))
    }

    /// Releases a read lock.
    ///
    /// # Safety
    ///
    /// - The caller holds a read lock, released once.
    unsafe fn read_unlock(&self) {
        // R1: Release publishes the read section to the next writer.
        let state = self.word().fetch_sub(READ_LOCKED, Ordering::Release) - READ_LOCKED;
        // Readers only wait while a writer holds or waits, so a last reader with waiters sees
        // WRITERS_WAITING.
        debug_assert!(!has_readers_waiting(state) || has_writers_waiting(state));
        if is_unlocked(state) && has_writers_waiting(state) {
            self.wake_writer_or_readers(state);
        }
    }

    /// Releases the write lock.
    ///
    /// # Safety
    ///
    /// - The caller holds the write lock, released once.
    unsafe fn write_unlock(&self) {
        self.writer.clear();
        // R1: Release publishes the write section.
        let state = self.word().fetch_sub(WRITE_LOCKED, Ordering::Release) - WRITE_LOCKED;
        debug_assert!(is_unlocked(state));
        if has_writers_waiting(state) || has_readers_waiting(state) {
            self.wake_writer_or_readers(state);
        }
    }

    /// The lock just became free with waiters: wake a writer, or else all readers.
    #[cold]
    fn wake_writer_or_readers(&self, mut state: u32) {
        if state == WRITERS_WAITING {
            match self.word().compare_exchange(state, 0, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    self.wake_writer();
                    return;
                }
                Err(s) => state = s,
            }
        }
        if state == READERS_WAITING | WRITERS_WAITING {
            if self
                .word()
                .compare_exchange(state, READERS_WAITING, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                // Someone locked it meanwhile; their unlock handles the waiters.
                return;
            }
            if self.wake_writer() {
                return;
            }
            // No writer was asleep (they may all be about to re-check): wake the readers
            // instead, so nobody stays asleep on a free lock.
            state = READERS_WAITING;
        }
        if state == READERS_WAITING
            && self.word().compare_exchange(state, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            self.state.wake_all();
        }
    }

    /// Wakes one writer; returns whether one was asleep.
    fn wake_writer(&self) -> bool {
        // R2: Release pairs with the waiting writer's Acquire load of the counter.
        self.writer_notify.value().fetch_add(1, Ordering::Release);
        self.writer_notify.wake_one() > 0
    }

    /// A writer woken from `writer_notify` is being unwound: the unlocker cleared
    /// WRITERS_WAITING for it, so wake another writer, or else the readers.
    fn pass_on_writer_wake(&self) {
        if !self.wake_writer() {
            let state = self.word().load(Ordering::Relaxed);
            if state == READERS_WAITING {
                self.wake_writer_or_readers(state);
            }
        }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard holds a read lock, released once here.
        unsafe { self.lock.read_unlock() };
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.poison.done(&self.poison);
        // SAFETY: the guard holds the write lock, released once here.
        unsafe { self.lock.write_unlock() };
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a read lock is held: no writer has `&mut T` (R1).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the write lock is held by this guard (R1).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only path to the data.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(guard) => d.field("data", &&*guard),
            Err(TryLockError::Poisoned(err)) => d.field("data", &&**err.get_ref()),
            Err(TryLockError::WouldBlock) => d.field("data", &format_args!("<locked>")),
        };
        d.field("poisoned", &self.poison.get());
        d.finish_non_exhaustive()
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(value: T) -> Self {
        RwLock::new(value)
    }
}

impl<T: ?Sized> std::panic::UnwindSafe for RwLock<T> {}
impl<T: ?Sized> std::panic::RefUnwindSafe for RwLock<T> {}
