//! `HeldP`: the proof that the running worker holds its P, and the P's owner-only parts
//! (the owner end of the local queue, the free-record cache) as safe methods on it. The
//! methods that queue an entry on it (`HeldP::enqueue`, `push_spawn`, `push_fork`) are in
//! `ready.rs`.
//!
//! This file holds `impl M`'s part about the P it holds (`M::held`, `alloc_g`, `recycle`); the
//! rest of `impl M` is in `worker.rs` (its first lines say where).
//!
//! A P's owner-only parts may be used only by the worker that holds it, and only while it is
//! not in a blocking section (the monitor may retake the P then; see `p`, R2). That fact is
//! checked in one place, [`M::held`], and carried by a [`HeldP`] value instead of being
//! re-argued at every use. Like the `&M` it borrows, a `HeldP` is good only until the calling
//! green thread next switches (a park, yield, join, or anything that may do one) or enters a
//! blocking section: fetch it again after (tokio passes its `Box<Core>` the same way).

use purloin_deque::Worker;

use crate::entry::Entry;
use crate::g::GRef;
use crate::p::{FREE_CACHE, P};
use crate::registry::registry;
use crate::worker::{M, NO_P};

/// New records a P's cache takes at once when it and the global free list are empty (one
/// under loom, so models allocate no records they do not use).
const NEW_BATCH: usize = if cfg!(loom) { 1 } else { FREE_CACHE };

/// Proof that the worker `m` holds `p` and may use its owner-only parts (see the module docs).
/// Not `Send` (it borrows an `M`, which is not `Sync`): it never leaves the worker's thread.
#[derive(Clone, Copy)]
pub(crate) struct HeldP<'a> {
    m: &'a M,
    p: &'a P,
}

impl M {
    /// Proof that this worker holds its P right now, or `None` (no P: a spare, or its P was
    /// retired or retaken; or inside a blocking section, where the monitor may retake it).
    ///
    /// This is the one place the holding is checked: `M::p` is set only by the thread that won
    /// the P (`worker_main`, a spare handed a P), cleared when it loses it, and `in_blocking`
    /// covers the window in which the monitor may take it (`enter_blocking` ..
    /// `exit_blocking`). An `M` is reached only from its own OS thread (`current_worker`).
    ///
    /// The check is one load: `M::set_p` and `M::set_in_blocking` keep a pointer to the held
    /// P, null when either condition fails.
    #[inline]
    pub(crate) fn held(&self) -> Option<HeldP<'_>> {
        let p = self.held_p();
        debug_assert_eq!(
            p,
            {
                let pi = self.p.get();
                if pi != NO_P && !self.in_blocking.get() {
                    &*self.shared.ps[pi] as *const P
                } else {
                    core::ptr::null()
                }
            },
            "M::held's cache is stale: M::p or M::in_blocking set without M::set_p / \
             M::set_in_blocking"
        );
        // SAFETY: a non-null `held_p` points at `self.shared.ps[self.p]` (`refresh_held`), an
        // element of a boxed slice that is never reallocated and lives as long as `shared`,
        // which `self` keeps alive for the borrow's lifetime.
        (!p.is_null()).then(|| HeldP { m: self, p: unsafe { &*p } })
    }

    /// [`M::held`] on g0, where the worker always holds its P (`run` returns as soon as it
    /// loses it). Panics (a broken invariant) if it does not.
    #[inline]
    pub(crate) fn held_on_g0(&self) -> HeldP<'_> {
        self.held().expect("a worker's scheduling loop runs only while it holds its P")
    }

    /// A free record for a new G: the P's cache, else the global list, else a new one.
    pub(crate) fn alloc_g(&self) -> GRef {
        match self.held() {
            Some(h) => h.alloc_g(),
            None => registry().alloc(),
        }
    }

    /// Returns a record whose last reference was dropped to the free lists.
    pub(crate) fn recycle(&self, g: GRef) {
        g.recycle();
        self.recycle_cached(g);
    }

    /// Puts an already recycled (FREE) record in the P's cache, or the global list.
    pub(crate) fn recycle_cached(&self, g: GRef) {
        match self.held() {
            Some(h) => h.recycle_cached(g),
            None => registry().give_free([g]),
        }
    }
}

impl<'a> HeldP<'a> {
    /// The worker holding the P.
    #[inline]
    pub(crate) fn m(self) -> &'a M {
        self.m
    }

    /// The held P.
    #[inline]
    pub(crate) fn p(self) -> &'a P {
        self.p
    }

    /// The owner end of the local queue.
    #[inline]
    pub(crate) fn local(self) -> &'a Worker<Entry> {
        // SAFETY: a HeldP proves this worker holds `p` (see `M::held`), and it lives no longer
        // than the holding (module docs).
        unsafe { self.p.local() }
    }

    /// Runs `f` on the free-record cache.
    #[inline]
    fn with_cache<R>(self, f: impl FnOnce(&mut Vec<GRef>) -> R) -> R {
        // SAFETY: the cache is owner-only and we hold the P (as in `local`); `f` cannot reach
        // the cache again (it gets the only reference).
        self.p.free_gs.with_mut(|v| f(unsafe { &mut *v }))
    }

    /// A free record: the cache, refilled when empty from the global list, else with a
    /// batch of new records (see `Registry::alloc_into`).
    pub(crate) fn alloc_g(self) -> GRef {
        self.with_cache(|v| {
            if v.is_empty() {
                registry().take_free(v, FREE_CACHE);
            }
            if v.is_empty() {
                registry().alloc_into(v, NEW_BATCH);
            }
            v.pop().expect("refilled above")
        })
    }

    /// Caches a FREE record, spilling half to the global list when the cache is full.
    pub(crate) fn recycle_cached(self, g: GRef) {
        let spill = self.with_cache(|v| {
            v.push(g);
            (v.len() > 2 * FREE_CACHE).then(|| v.drain(FREE_CACHE..).collect::<Vec<GRef>>())
        });
        if let Some(spill) = spill {
            registry().give_free(spill);
        }
    }

    /// Empties the cache (the P is being retired).
    pub(crate) fn take_cache(self) -> Vec<GRef> {
        self.with_cache(core::mem::take)
    }
}
