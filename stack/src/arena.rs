//! Arena chunks: one mapping carved into fixed slots, each a guard at the low end plus the
//! usable stack above it, and the per-slot metadata.
//!
//! ```text
//!  chunk mapping (one mmap, MAP_NORESERVE, MADV_NOHUGEPAGE)
//!  +-----------+---------+----------------+---------+----------------+-- ... --+
//!  | metadata  |  guard  | usable stack 0 |  guard  | usable stack 1 |         |
//!  | (pages)   |  page   |  grows down <- |  page   |  grows down <- |         |
//!  +-----------+---------+----------------+---------+----------------+-- ... --+
//!              ^slots_base ^limit(0)      ^top(0)
//!              |<------- slot_size ------>|
//! ```
//!
//! Guards are installed lazily, the first time a slot is handed out, so mapping a chunk of
//! thousands of slots costs one `mmap`. Because slots have a fixed size, "is this fault
//! address in one of our guards, and whose?" is arithmetic (see `registry.rs`).
//!
//! The metadata of slot *i* (pool link, residency state, and the label the overflow handler
//! prints) lives in the chunk's first pages, which the kernel hands out zero-filled: an
//! all-zero `SlotMeta` is valid (no guard yet, not resident, no label) and costs no memory
//! until touched. Under loom the metadata is a boxed slice of loom atomics instead, since
//! loom's atomics must be constructed inside a model.
//!
//! # Memory ordering
//!
//! The guarantee: a reader of a slot's label (`Stack::label`, the overflow handler) that sees
//! a label sees the id and name written with it.
//!
//! - (P1) `set_label` writes the id and name (Relaxed), then the length with Release;
//!   `read_label` loads the length with Acquire first. A label rewritten concurrently with a
//!   read can come out mixed, which only happens if a green thread overflows while its
//!   label is being changed.
//! - Every other `SlotMeta` field is written only by the slot's owner and moves with the
//!   slot through the pool lists (`pool.rs`, P1).

use std::io;

use crate::os::{self, GuardBackend};
use crate::size::DisplaySize;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Bytes of a slot's label name that are kept; longer names are truncated at a character
/// boundary.
pub(crate) const NAME_CAP: usize = 32;
const NAME_WORDS: usize = NAME_CAP / 8;

/// Bits of a [`SlotRef`] that index the slot inside its chunk.
const SLOT_BITS: u32 = 22;
/// The most slots one chunk may hold.
pub(crate) const MAX_SLOTS_PER_CHUNK: usize = (1 << SLOT_BITS) - 1;

/// A slot's identity inside its size class: `chunk << SLOT_BITS | slot`. Fits the low half of
/// a tagged list head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SlotRef(pub(crate) u32);

impl SlotRef {
    /// The end-of-list marker (never a valid slot: chunks hold fewer than `2^22 - 1` slots).
    pub(crate) const NIL: SlotRef = SlotRef(u32::MAX);

    pub(crate) fn new(chunk: usize, slot: usize) -> SlotRef {
        debug_assert!(chunk < (1 << (32 - SLOT_BITS)) && slot < MAX_SLOTS_PER_CHUNK);
        SlotRef(((chunk as u32) << SLOT_BITS) | slot as u32)
    }

    pub(crate) fn chunk(self) -> usize {
        (self.0 >> SLOT_BITS) as usize
    }

    pub(crate) fn slot(self) -> usize {
        (self.0 & ((1 << SLOT_BITS) - 1)) as usize
    }
}

/// The shape of every slot of one size class.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Usable stack bytes (page multiple).
    pub(crate) usable: usize,
    /// Guard bytes at the low end (one page: Rust probes every page of frames larger than a
    /// page, so a frame cannot jump over it).
    pub(crate) guard: usize,
    /// `guard + usable`.
    pub(crate) slot_size: usize,
    pub(crate) page: usize,
}

impl Geometry {
    pub(crate) fn new(usable: usize) -> Geometry {
        let page = os::page_size();
        Geometry { usable, guard: page, slot_size: usable + page, page }
    }

    /// Bytes of metadata pages in front of `slots` slots.
    fn meta_bytes(&self, slots: usize) -> usize {
        if cfg!(loom) { 0 } else { (slots * size_of::<SlotMeta>()).div_ceil(self.page) * self.page }
    }
}

// Residency of a slot's usable pages, in `SlotMeta::state` bits 1..=2.
/// Nothing resident: fresh, or given back entirely.
pub(crate) const RES_CLEAN: u32 = 0;
/// At most the top `keep_resident` bytes resident.
pub(crate) const RES_KEPT: u32 = 1 << 1;
/// Anything may be resident.
pub(crate) const RES_DIRTY: u32 = 2 << 1;
/// Anything may be resident, and the slot waits in the pool's `excess` list for the
/// scavenger (or `trim`) to give its memory back.
pub(crate) const RES_EXCESS: u32 = 3 << 1;
pub(crate) const RES_MASK: u32 = 3 << 1;
/// `SlotMeta::state` bit 0: the slot's guard is installed.
pub(crate) const GUARDED: u32 = 1;

/// Metadata of one slot. All fields are atomics so that an all-zero value is valid (see the
/// module docs) and so the signal handler may read a label while another thread writes it.
///
/// Except `label`, every field is only written by the slot's current owner (the thread that
/// leased it, or the pool code that popped it), so `Relaxed` suffices; ownership moves
/// through the pool lists' Release/Acquire pairs (`pool.rs`, P1).
pub(crate) struct SlotMeta {
    /// The next slot (a [`SlotRef`]) in the pool list holding this slot.
    pub(crate) next: AtomicU32,
    /// Bit 0: [`GUARDED`]; bits 1..=2: residency ([`RES_CLEAN`], [`RES_KEPT`], [`RES_DIRTY`],
    /// [`RES_EXCESS`]).
    pub(crate) state: AtomicU32,
    /// 0: no label; `n + 1`: a label whose name is `n` bytes long. Written last (Release) by
    /// `set_label`, read first (Acquire) by `label` and the overflow handler, so the id and
    /// name bytes read after it are the ones written before it (on the same thread, which is
    /// where the handler runs when the labelled green thread overflows, or after the
    /// scheduler's own hand-off).
    pub(crate) label: AtomicU32,
    pub(crate) id: AtomicU64,
    pub(crate) name: [AtomicU64; NAME_WORDS],
    /// The id of a green thread its labelled owner runs inline on this stack (a joiner
    /// running its child), 0 for none, `u64::MAX` for one without an id yet. Relaxed: written
    /// and read by the thread running on the stack (the overflow handler runs there).
    pub(crate) inline: AtomicU64,
}

impl SlotMeta {
    #[cfg(loom)]
    pub(crate) fn new() -> SlotMeta {
        SlotMeta {
            next: AtomicU32::new(SlotRef::NIL.0),
            state: AtomicU32::new(0),
            label: AtomicU32::new(0),
            id: AtomicU64::new(0),
            name: std::array::from_fn(|_| AtomicU64::new(0)),
            inline: AtomicU64::new(0),
        }
    }

    /// Attaches a green-thread id and name (truncated to [`NAME_CAP`] bytes at a character
    /// boundary).
    pub(crate) fn set_label(&self, id: u64, name: &str) {
        let mut len = name.len().min(NAME_CAP);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        let mut words = [0u64; NAME_WORDS];
        for (i, b) in name.as_bytes()[..len].iter().enumerate() {
            words[i / 8] |= u64::from(*b) << (8 * (i % 8));
        }
        // Relaxed: the Release store of `label` below publishes these.
        self.label.store(0, Ordering::Relaxed);
        self.id.store(id, Ordering::Relaxed);
        for (w, v) in self.name.iter().zip(words) {
            w.store(v, Ordering::Relaxed);
        }
        // Release (P1): pairs with the Acquire load in `read_label` (also the handler's).
        self.label.store(len as u32 + 1, Ordering::Release);
    }

    pub(crate) fn clear_label(&self) {
        // Relaxed: clearing needs no payload published with it.
        self.label.store(0, Ordering::Relaxed);
        self.inline.store(0, Ordering::Relaxed);
    }

    /// The label as `(id, name bytes, name length)`, without allocating (the overflow handler
    /// calls this).
    pub(crate) fn read_label(&self) -> Option<(u64, [u8; NAME_CAP], usize)> {
        // Acquire (P1): pairs with the Release store in `set_label`.
        let n = self.label.load(Ordering::Acquire);
        if n == 0 {
            return None;
        }
        let len = (n as usize - 1).min(NAME_CAP);
        let mut bytes = [0u8; NAME_CAP];
        for (i, w) in self.name.iter().enumerate() {
            let v = w.load(Ordering::Relaxed);
            bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        Some((self.id.load(Ordering::Relaxed), bytes, len))
    }
}

/// One arena mapping of `slots` slots.
pub(crate) struct Chunk {
    /// Start of the mapping (the metadata pages come first).
    base: *mut u8,
    /// Length of the mapping.
    len: usize,
    /// Start of slot 0.
    pub(crate) slots_base: *mut u8,
    pub(crate) slots: usize,
    #[cfg(loom)]
    meta: Box<[SlotMeta]>,
}

// SAFETY: `Chunk` only holds the addresses of a mapping it owns (`base`, `slots_base`) and, in
// loom builds, a boxed slice of atomics; it never dereferences the stack memory itself, and
// the metadata it hands out is made of atomics, so sharing and sending it across threads is
// sound.
unsafe impl Send for Chunk {}
// SAFETY: see `Send` above; `&Chunk` only gives out `&SlotMeta` (atomics) and addresses.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Maps a chunk of `slots` slots of `geo`'s shape (no guards installed yet).
    pub(crate) fn map(geo: &Geometry, slots: usize) -> io::Result<Chunk> {
        let meta = geo.meta_bytes(slots);
        let len = meta + slots * geo.slot_size;
        let base = os::map_stack_memory(len, &|| {
            let stacks = if slots == 1 { "stack" } else { "stacks" };
            format!("an arena of {slots} {stacks} of {}", DisplaySize(geo.usable))
        })?;
        Ok(Chunk {
            base,
            len,
            // SAFETY-free arithmetic: `meta <= len`, inside the mapping just made.
            slots_base: base.wrapping_add(meta),
            slots,
            #[cfg(loom)]
            meta: (0..slots).map(|_| SlotMeta::new()).collect(),
        })
    }

    /// The bytes this chunk maps.
    pub(crate) fn mapped_bytes(&self) -> usize {
        self.len
    }

    /// The metadata of `slot`.
    ///
    /// # Panics
    ///
    /// If `slot >= self.slots` (a broken `SlotRef`).
    pub(crate) fn meta(&self, slot: usize) -> &SlotMeta {
        assert!(slot < self.slots, "slot {slot} out of range ({} slots)", self.slots);
        #[cfg(not(loom))]
        {
            // SAFETY: the first `meta_bytes(slots)` bytes of the mapping hold `slots`
            // `SlotMeta`s (established in `map`); the mapping is zero-filled by the kernel and
            // an all-zero `SlotMeta` is valid (it is made of `core` atomics); it lives as long
            // as `self` (unmapped only in `Drop`), and `base` is page-aligned, so suitably
            // aligned for `SlotMeta`.
            unsafe { &*self.base.cast::<SlotMeta>().add(slot) }
        }
        #[cfg(loom)]
        {
            &self.meta[slot]
        }
    }

    /// Start of the metadata array (for the overflow registry).
    pub(crate) fn meta_ptr(&self) -> *const SlotMeta {
        self.base.cast()
    }

    /// Start of `slot` (its guard).
    pub(crate) fn slot_start(&self, geo: &Geometry, slot: usize) -> *mut u8 {
        debug_assert!(slot < self.slots);
        // In bounds: `slot < slots`, and the mapping holds `slots` slots after the metadata.
        self.slots_base.wrapping_add(slot * geo.slot_size)
    }

    /// Installs `slot`'s guard with `backend`.
    ///
    /// # Safety
    ///
    /// - The caller owns `slot` (it is leased by nobody and in no pool list), so nothing
    ///   uses its guard page.
    pub(crate) unsafe fn install_guard(
        &self,
        geo: &Geometry,
        slot: usize,
        backend: GuardBackend,
    ) -> io::Result<()> {
        let start = self.slot_start(geo, slot);
        // SAFETY: the guard page of a slot inside our mapping; the caller owns the slot.
        unsafe {
            os::install_guard(backend, start, geo.guard, &|| {
                format!("the guard page of a {} stack", DisplaySize(geo.usable))
            })
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: `base..base + len` is the whole mapping made in `map`; a chunk is dropped
        // only with its pool, after every stack leased from it was returned (their `&'static`
        // pool references are gone: see `ClassPool`'s docs).
        unsafe { os::unmap(self.base, self.len) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn slot_ref_round_trips() {
        let r = SlotRef::new(1023, MAX_SLOTS_PER_CHUNK - 1);
        assert_eq!((r.chunk(), r.slot()), (1023, MAX_SLOTS_PER_CHUNK - 1));
        assert_ne!(r, SlotRef::NIL);
        assert_eq!(SlotRef::new(0, 0).0, 0);
    }

    #[test]
    fn labels_truncate_at_char_boundaries() {
        let geo = Geometry::new(4 * os::page_size());
        let chunk = Chunk::map(&geo, 2).unwrap();
        let meta = chunk.meta(1);
        assert!(meta.read_label().is_none());
        meta.set_label(7, "worker");
        let (id, bytes, len) = meta.read_label().unwrap();
        assert_eq!((id, &bytes[..len]), (7, &b"worker"[..]));
        // 31 ASCII bytes then a 2-byte character: truncated before it.
        let long = format!("{}é and more", "x".repeat(31));
        meta.set_label(8, &long);
        let (_, bytes, len) = meta.read_label().unwrap();
        assert_eq!(len, 31);
        assert!(std::str::from_utf8(&bytes[..len]).is_ok());
        meta.clear_label();
        assert!(meta.read_label().is_none());
        // Slot 0's metadata is untouched (zero is "no label").
        assert!(chunk.meta(0).read_label().is_none());
    }
}
