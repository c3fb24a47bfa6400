//! What this crate tells purloin-sched's diagnostics: the [`WaitInfo`] a waiting green thread
//! stores in its own record for deadlock reports (read back through
//! `purloin_sched::Scheduler::parked`), the [`Holder`] of a lock that fills in its `holder`
//! field, and where the crate's code is, for stack dumps ([`note_runtime_code`]).

use purloin_sched::{GreenId, WaitInfo, WaitKind};

/// The wait info for a wait of `kind` on `object`, held by `holder`: recorded in every build,
/// by the waiter itself into its own record (`GreenThread::set_own_wait_info`: no
/// thread-local lookup, a few relaxed stores when the wait starts and ends; about 24
/// instructions, +1.3%, per channel round trip).
#[inline]
pub(crate) fn wait_info<T: ?Sized>(
    kind: WaitKind,
    object: &T,
    holder: Option<GreenId>,
) -> Option<WaitInfo> {
    Some(WaitInfo { kind, object: object as *const T as *const () as usize, holder })
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

/// Tells purloin-sched's stack dumps where this crate's code is, so that they count its frames
/// as the runtime's (optimized builds describe inlined frames by bare names and files only)
/// and start a parked green thread's backtrace at the call into this crate. The `purloin`
/// facade calls it when it builds a runtime; a program that uses this crate with its own
/// scheduler may call it once. (Not under loom: dumps are not built there.)
#[cfg(not(loom))]
#[doc(hidden)]
pub fn note_runtime_code() {
    purloin_sched::note_runtime_code("purloin_sync", note_runtime_code as fn() as usize);
}
