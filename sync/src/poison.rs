//! Lock poisoning like std's: a lock whose guard is dropped while its thread (or green thread)
//! unwinds is marked poisoned, and later `lock` calls return `Err(PoisonError)` carrying the
//! guard (the data is still reachable with [`PoisonError::into_inner`](std::sync::PoisonError)).

use crate::loom::{AtomicBool, Ordering};

/// The poisoned flag of a lock.
#[derive(Debug)]
pub(crate) struct Flag {
    failed: AtomicBool,
}

/// Taken when a guard is created: whether the thread was already unwinding then (a guard
/// created during an unwind does not poison when dropped during that same unwind).
#[derive(Debug)]
pub(crate) struct Guard {
    panicking: bool,
}

impl Flag {
    loom_const_fn! {
        pub(crate) fn new() -> Flag {
            Flag { failed: AtomicBool::new(false) }
        }
    }

    /// A guard for a new lock holder.
    #[inline]
    pub(crate) fn guard(&self) -> Guard {
        Guard { panicking: crate::loom::thread::panicking() }
    }

    /// Called when a holder releases the lock: poisons it if the holder is unwinding now but
    /// was not when it took the lock. The flag needs no ordering of its own: it is read and
    /// written while the lock is held (the lock's Acquire/Release orders it).
    #[inline]
    pub(crate) fn done(&self, guard: &Guard) {
        if !guard.panicking && crate::loom::thread::panicking() {
            self.failed.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the lock is poisoned.
    #[inline]
    pub(crate) fn get(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Clears the poison.
    #[inline]
    pub(crate) fn clear(&self) {
        self.failed.store(false, Ordering::Relaxed);
    }
}

/// `Ok(guard)` or `Err(PoisonError(guard))` depending on `flag`.
#[inline]
pub(crate) fn map_result<G>(flag: &Flag, guard: G) -> std::sync::LockResult<G> {
    if flag.get() { Err(std::sync::PoisonError::new(guard)) } else { Ok(guard) }
}
