//! The chunk registry: an append-only, lock-free table of every arena chunk of the process-wide
//! pool, which the SIGSEGV handler reads to decide, with arithmetic only, whether a fault
//! address is in one of our guards and whose stack it belongs to.
//!
//! # Memory ordering
//!
//! The guarantee: a handler that sees a record as ready sees all of its fields, and the
//! metadata it points to is mapped (zero-filled or written since).
//!
//! - (P1) `register` writes a record's fields (Relaxed), then sets `ready` with Release;
//!   `classify` loads `ready` with Acquire before reading the fields.
//! - `LEN` only reserves record indices (`fetch_add`, Relaxed): a reader that sees an index
//!   whose record is not yet ready skips it, which is right, since no stack of that chunk
//!   has been handed out yet (the chunk is registered before it is published to the pool).
//!
//! Records are never removed: chunks of the process-wide pool are never unmapped. The atomics
//! are the hardware's even under loom (`sync::real`): loom does not model signals.

use std::io;

use crate::arena::{Chunk, Geometry, SlotMeta};
use crate::sync::real::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// The most arena chunks the process-wide pool may map (all size classes together).
pub(crate) const CAPACITY: usize = 4096;

struct Record {
    /// First byte of slot 0.
    base: AtomicUsize,
    /// One past the last slot.
    end: AtomicUsize,
    slot_size: AtomicUsize,
    guard: AtomicUsize,
    usable: AtomicUsize,
    meta: AtomicPtr<SlotMeta>,
    ready: AtomicBool,
}

impl Record {
    const fn new() -> Record {
        Record {
            base: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            slot_size: AtomicUsize::new(0),
            guard: AtomicUsize::new(0),
            usable: AtomicUsize::new(0),
            meta: AtomicPtr::new(core::ptr::null_mut()),
            ready: AtomicBool::new(false),
        }
    }
}

static RECORDS: [Record; CAPACITY] = [const { Record::new() }; CAPACITY];
static LEN: AtomicUsize = AtomicUsize::new(0);

/// Adds `chunk` (of `geo`'s shape) to the registry.
///
/// The chunk must never be unmapped afterwards (it belongs to the process-wide pool).
pub(crate) fn register(chunk: &Chunk, geo: &Geometry) -> io::Result<()> {
    // Relaxed: only reserves an index; publication is `ready` (P1).
    let i = LEN.fetch_add(1, Ordering::Relaxed);
    let Some(r) = RECORDS.get(i) else {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!(
                "purloin-stack: the process-wide pool already has {CAPACITY} arena chunks, the \
                 most the overflow registry holds; use fewer distinct stack sizes or fewer \
                 stacks (arenas grow geometrically, so this means terabytes of stacks)"
            ),
        ));
    };
    let base = chunk.slots_base as usize;
    r.base.store(base, Ordering::Relaxed);
    r.end.store(base + chunk.slots * geo.slot_size, Ordering::Relaxed);
    r.slot_size.store(geo.slot_size, Ordering::Relaxed);
    r.guard.store(geo.guard, Ordering::Relaxed);
    r.usable.store(geo.usable, Ordering::Relaxed);
    r.meta.store(chunk.meta_ptr().cast_mut(), Ordering::Relaxed);
    // Release (P1): pairs with the Acquire load in `classify`.
    r.ready.store(true, Ordering::Release);
    Ok(())
}

/// A fault address that hit the guard of one of our slots.
pub(crate) struct GuardHit {
    /// The slot's metadata (its label).
    pub(crate) meta: &'static SlotMeta,
    /// Usable bytes of the slot's size class.
    pub(crate) usable: usize,
    /// The slot's index inside its chunk.
    pub(crate) slot: usize,
}

/// Whether `addr` lies in the guard of a registered slot. Async-signal-safe: atomic loads and
/// arithmetic over a static table, no locks, no allocation.
pub(crate) fn classify(addr: usize) -> Option<GuardHit> {
    // Relaxed: an index whose record is not ready is skipped (see the module docs).
    let n = LEN.load(Ordering::Relaxed).min(CAPACITY);
    for r in &RECORDS[..n] {
        // Acquire (P1): pairs with the Release store in `register`.
        if !r.ready.load(Ordering::Acquire) {
            continue;
        }
        let base = r.base.load(Ordering::Relaxed);
        let end = r.end.load(Ordering::Relaxed);
        if addr < base || addr >= end {
            continue;
        }
        let slot_size = r.slot_size.load(Ordering::Relaxed);
        let off = addr - base;
        if off % slot_size >= r.guard.load(Ordering::Relaxed) {
            // In our arena but in a slot's usable part: not an overflow.
            return None;
        }
        let slot = off / slot_size;
        let meta = r.meta.load(Ordering::Relaxed);
        // SAFETY: `meta` points at the chunk's metadata array of `(end - base) / slot_size`
        // entries (`register`), `slot` is below that count because `addr < end`, and the
        // chunk is never unmapped (registered chunks belong to the process-wide pool).
        let meta: &'static SlotMeta = unsafe { &*meta.add(slot) };
        return Some(GuardHit { meta, usable: r.usable.load(Ordering::Relaxed), slot });
    }
    None
}
