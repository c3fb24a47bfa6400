//! The registry of G records: the owner of their memory and the global free list (per-P
//! caches sit in front of it: `held`).

use crate::g::{self, GRef};
use crate::shared::Shared;
use crate::sync::{AtomicU32, Ordering};

/// All G records of the process: the owner of their memory, and the global free list.
///
/// Records are shared by every scheduler in the process and never freed (except under loom,
/// where the registry lives for one model execution), so a handle to a green thread stays safe
/// to use after its runtime is gone: it just finds a newer generation.
pub(crate) struct Registry {
    all: crate::sync::Mutex<Vec<GRef>>,
    free: crate::sync::Mutex<Vec<GRef>>,
    next_slot: AtomicU32,
    /// Memory for the next records: records are carved from leaked slabs of [`SLAB`] instead
    /// of one heap block each, so a record costs its size and no allocator header or
    /// rounding (a million parked green threads hold a million records).
    #[cfg(not(loom))]
    spare: crate::sync::Mutex<&'static mut [core::mem::MaybeUninit<crate::g::G>]>,
}

/// Records per slab (about 52 KiB): few enough to stay in the allocator's heap (below
/// glibc's 128 KiB `mmap` threshold, so slabs add no mappings), many enough that a spawn
/// burst grows the heap (an `mprotect` each time, under the address space's write lock)
/// once per 256 records instead of once per 64.
#[cfg(not(loom))]
const SLAB: usize = 256;

impl Registry {
    #[cfg(not(loom))]
    const fn new() -> Registry {
        Registry {
            all: crate::sync::Mutex::new(Vec::new()),
            free: crate::sync::Mutex::new(Vec::new()),
            next_slot: AtomicU32::new(0),
            spare: crate::sync::Mutex::new(&mut []),
        }
    }

    #[cfg(loom)]
    fn new() -> Registry {
        Registry {
            all: crate::sync::Mutex::new(Vec::new()),
            free: crate::sync::Mutex::new(Vec::new()),
            next_slot: AtomicU32::new(0),
        }
    }

    /// A FREE record: from the global free list or newly allocated.
    pub(crate) fn alloc(&self) -> GRef {
        if let Some(g) = crate::sync::lock(&self.free).pop() {
            return g;
        }
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        let g = self.new_record(slot);
        crate::sync::lock(&self.all).push(g);
        g
    }

    #[cfg(loom)]
    fn new_record(&self, slot: u32) -> GRef {
        GRef::new_record(slot)
    }

    #[cfg(not(loom))]
    fn new_record(&self, slot: u32) -> GRef {
        let mut spare = crate::sync::lock(&self.spare);
        if spare.is_empty() {
            *spare = Box::leak(Box::new_uninit_slice(SLAB));
        }
        let (mem, rest) = core::mem::take(&mut *spare).split_first_mut().expect("refilled above");
        *spare = rest;
        GRef::new_record_in(mem, slot)
    }

    /// Appends `n` new FREE records to `into` (a P's cache refill when the global free list
    /// is empty too): one turn of each lock for the batch instead of three per record, so
    /// the workers of a spawn burst do not queue on these locks (and sleep on their futexes)
    /// once per green thread. The records a P's cache holds unused are kept for its next
    /// spawns, or given to the global list when the P goes away.
    pub(crate) fn alloc_into(&self, into: &mut Vec<GRef>, n: usize) {
        let first = into.len();
        let slot = self.next_slot.fetch_add(n as u32, Ordering::Relaxed);
        self.new_records(slot, n, into);
        crate::sync::lock(&self.all).extend_from_slice(&into[first..]);
    }

    #[cfg(loom)]
    fn new_records(&self, slot: u32, n: usize, into: &mut Vec<GRef>) {
        into.extend((slot..slot + n as u32).map(GRef::new_record));
    }

    #[cfg(not(loom))]
    fn new_records(&self, slot: u32, n: usize, into: &mut Vec<GRef>) {
        let mut spare = crate::sync::lock(&self.spare);
        for s in slot..slot + n as u32 {
            if spare.is_empty() {
                *spare = Box::leak(Box::new_uninit_slice(SLAB));
            }
            let (mem, rest) =
                core::mem::take(&mut *spare).split_first_mut().expect("refilled above");
            *spare = rest;
            into.push(GRef::new_record_in(mem, s));
        }
    }

    /// Takes up to `n` records from the global free list into `into` (per-P refill).
    pub(crate) fn take_free(&self, into: &mut Vec<GRef>, n: usize) {
        let mut free = crate::sync::lock(&self.free);
        let k = free.len().saturating_sub(n);
        into.extend(free.drain(k..));
    }

    /// Returns FREE records to the global list (per-P overflow, or a P going away).
    pub(crate) fn give_free(&self, records: impl IntoIterator<Item = GRef>) {
        crate::sync::lock(&self.free).extend(records);
    }

    /// Calls `f` on every record (shutdown's cancel sweep, deadlock reports, stats).
    pub(crate) fn for_each(&self, mut f: impl FnMut(GRef)) {
        let all: Vec<GRef> = crate::sync::lock(&self.all).clone();
        for g in all {
            f(g);
        }
    }

    /// Number of records ever allocated.
    pub(crate) fn allocated(&self) -> usize {
        crate::sync::lock(&self.all).len()
    }
}

/// Recycles a record whose last reference the caller dropped, from any thread.
pub(crate) fn recycle_anywhere(g: GRef) {
    match crate::worker::current_worker() {
        Some(m) => m.recycle(g),
        None => {
            g.recycle();
            registry().give_free([g]);
        }
    }
}

/// The process-wide registry.
#[cfg(not(loom))]
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: Registry = Registry::new();
    &REGISTRY
}

#[cfg(loom)]
pub(crate) fn registry() -> &'static Registry {
    loom::lazy_static! {
        static ref REGISTRY: Registry = Registry::new();
    }
    &REGISTRY
}

// Under loom the registry is dropped at the end of each model execution; its records hold
// loom atomics of that execution and must go with it.
#[cfg(loom)]
impl Drop for Registry {
    fn drop(&mut self) {
        let all = core::mem::take(&mut *crate::sync::lock(&self.all));
        for g in all {
            // SAFETY: the execution is over: no thread of it runs, nothing dereferences the
            // records any more; each record was leaked from a Box in `alloc`.
            drop(unsafe { Box::from_raw(g.as_ptr()) });
        }
    }
}

/// Calls `f` with each green thread of the scheduler `sched` that is parked now, and its
/// generation (a racy snapshot: shutdown's cancel sweep, `Scheduler::parked`). The record is
/// held by a reference during the call, so it is not recycled under `f`.
pub(crate) fn for_each_parked(sched: *const Shared, mut f: impl FnMut(GRef, u32)) {
    registry().for_each(|gref| {
        if !gref.try_ref() {
            return;
        }
        let w = gref.state.load(Ordering::Acquire);
        // SAFETY: we hold a reference, so the record is not recycled under us; `sched` is
        // written only at spawn, before the G is published.
        let ours = unsafe { gref.sched.with(|s| *s) } == sched;
        // INSPECTED is parked too (a dump is walking its stack; an unpark or cancel of it is
        // honoured when the dump ends).
        if ours && matches!(g::status_of(w), g::PARKED | g::INSPECTED) {
            f(gref, g::generation_of(w));
        }
        if gref.drop_ref() {
            recycle_anywhere(gref);
        }
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A batch is `n` distinct FREE records with their own slots, all known to `for_each`
    /// (the shutdown sweep and the dumps must see records a P's cache holds unused).
    #[test]
    fn alloc_into_appends_distinct_free_records() {
        let mut v = vec![registry().alloc()];
        registry().alloc_into(&mut v, 3 * SLAB / 2);
        assert_eq!(v.len(), 1 + 3 * SLAB / 2, "appended after what was there");
        let ptrs: std::collections::HashSet<_> = v.iter().map(|g| g.as_ptr()).collect();
        let slots: std::collections::HashSet<_> = v.iter().map(|g| g.slot).collect();
        assert_eq!((ptrs.len(), slots.len()), (v.len(), v.len()), "records and slots distinct");
        for g in &v {
            assert_eq!(g::status_of(g.state.load(Ordering::Relaxed)), g::FREE);
        }
        let mut known = 0;
        registry().for_each(|g| known += usize::from(ptrs.contains(&g.as_ptr())));
        assert_eq!(known, v.len(), "every record is registered");
        registry().give_free(v);
    }
}
