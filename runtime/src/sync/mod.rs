//! Green-thread-aware synchronisation: primitives that park the waiting green thread (never
//! its worker's OS thread) and also work from plain OS threads.
//!
//! (Module docs are completed with the public API.)

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

mod poison;
mod raw_lock;
mod waiter;

mod barrier;
mod butex;
pub mod channel;
mod condvar;
mod mutex;
mod once;
mod rwlock;
mod semaphore;
mod waitgroup;

pub use barrier::{Barrier, BarrierWaitResult};
pub use butex::{Butex, ButexWait};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use mutex::{Mutex, MutexGuard};
pub use once::{Once, OnceLock, OnceState};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};
pub use waitgroup::WaitGroup;

use purloin_sched::{GreenId, WaitInfo, WaitKind};

/// Whether waits record what they wait on (and lock holders) for the runtime's deadlock
/// report: in debug builds, or with the `deadlock-detection` feature. (A few thread-local
/// lookups and relaxed stores per park; off in plain release builds, where they cost about 5%
/// of a channel ping-pong.)
pub(crate) const RECORD_WAITS: bool = cfg!(any(debug_assertions, feature = "deadlock-detection"));

/// The wait info for a wait of `kind` on `object`, held by `holder` (if recorded).
#[inline]
pub(crate) fn wait_info<T: ?Sized>(
    kind: WaitKind,
    object: &T,
    holder: Option<GreenId>,
) -> Option<WaitInfo> {
    RECORD_WAITS.then_some(WaitInfo {
        kind,
        object: object as *const T as *const () as usize,
        holder,
    })
}

/// Who holds a lock, for deadlock reports: the holder's green-thread id (0 for none or an OS
/// thread). Compiled to nothing unless debug assertions or the `deadlock-detection` feature
/// are on.
#[derive(Debug, Default)]
pub(crate) struct Holder {
    #[cfg(any(debug_assertions, feature = "deadlock-detection"))]
    id: crate::loom::StatCounter,
}

impl Holder {
    loom_const_fn! {
        pub(crate) fn new() -> Holder {
            Holder {
                #[cfg(any(debug_assertions, feature = "deadlock-detection"))]
                id: crate::loom::StatCounter::new(0),
            }
        }
    }

    /// Records the calling green thread as the holder.
    #[inline]
    pub(crate) fn set_current(&self) {
        #[cfg(any(debug_assertions, feature = "deadlock-detection"))]
        {
            let id = purloin_sched::current().map_or(0, |g| g.id().0);
            self.id.store(id, crate::loom::Ordering::Relaxed);
        }
    }

    /// Clears the holder.
    #[inline]
    pub(crate) fn clear(&self) {
        #[cfg(any(debug_assertions, feature = "deadlock-detection"))]
        self.id.store(0, crate::loom::Ordering::Relaxed);
    }

    /// The recorded holder.
    #[inline]
    pub(crate) fn get(&self) -> Option<GreenId> {
        #[cfg(any(debug_assertions, feature = "deadlock-detection"))]
        {
            let id = self.id.load(crate::loom::Ordering::Relaxed);
            (id != 0).then_some(GreenId(id))
        }
        #[cfg(not(any(debug_assertions, feature = "deadlock-detection")))]
        None
    }
}

/// A spin-loop hint: the CPU's pause outside loom, a yield to the model under loom.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    crate::loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
