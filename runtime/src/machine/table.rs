//! The `MachineId → machine` table: sharded slabs. An id names its shard and slot directly (no
//! hashing), and a reused slot's bumped generation makes stale ids unknown.
//!
//! Writers (spawn, forget, shutdown) take the slot's shard lock. Readers (every send and
//! answer) do not: each slot also has an atomic pointer to its machine, in chunks that never
//! move, and a reader follows it under a crossbeam-epoch guard, so a removed machine's cell
//! is freed only once no reader can still hold it. A machine step runs its whole chain of
//! hand-offs under one guard (`pin`), so a hop's lookup is two loads and an id compare. Under
//! loom the lookup takes the shard lock instead (the models are about the machine protocol,
//! and crossbeam-epoch's reclamation is not modelled with the crate's own atomics).
//!
//! # Memory ordering
//!
//! - (T1) A writer publishes a cell's pointer with a Release store after making the cell; a
//!   reader loads it with Acquire (pairs) and then reads the cell's immutable `id`.
//! - (T2) A chunk is installed with an AcqRel CAS (Release publishes its null slots; Acquire,
//!   on failure, pairs with the winner's) and loaded with Acquire by readers.
//! - (T3) A removal swaps the slot to null and hands the slot's reference to the epoch
//!   collector; crossbeam-epoch's own pin/defer protocol makes the drop wait for every
//!   guard that may have loaded the old pointer.

use std::sync::Arc as StdArc;

use super::MachineId;
use super::cell::MachineCell;
use crate::loom::{AtomicUsize, Mutex, MutexGuard, Ordering, lock};

/// Slots per chunk of the lock-free index.
#[cfg(not(loom))]
const CHUNK_BITS: u32 = 12;
#[cfg(not(loom))]
type Chunk = [core::sync::atomic::AtomicPtr<MachineCell>; 1 << CHUNK_BITS];

/// Keeps lookups on this thread cheap while it lives (one epoch pin for many lookups); a
/// machine step holds one for its whole chain of hand-offs.
#[cfg(not(loom))]
pub(crate) fn pin() -> crossbeam_epoch::Guard {
    crossbeam_epoch::pin()
}

#[cfg(loom)]
pub(crate) fn pin() {}

/// Shards (a power of two): the low bits of a slot number.
#[cfg(not(loom))]
const SHARDS: usize = 64;
#[cfg(loom)]
const SHARDS: usize = 2;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

struct Entry {
    /// Bumped when the slot's machine is removed (never 0).
    generation: u32,
    cell: Option<StdArc<MachineCell>>,
}

#[derive(Default)]
struct Shard {
    entries: Vec<Entry>,
    /// Indices of empty entries.
    free: Vec<u32>,
}

pub(crate) struct Table {
    host: u64,
    shards: Box<[Mutex<Shard>]>,
    /// Round-robin shard choice for new machines.
    next: AtomicUsize,
    /// The lock-free index: slot number → chunk → the machine's cell (holding one reference
    /// of its own), or null.
    #[cfg(not(loom))]
    index: Box<[core::sync::atomic::AtomicPtr<Chunk>]>,
}

/// Why an insert failed.
pub(crate) enum InsertError {
    /// The caller's check under the shard lock refused.
    Refused,
    /// Every slot number of the shard is taken.
    Full,
}

impl Table {
    pub(crate) fn new(host: u64) -> Table {
        Table {
            host,
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            next: AtomicUsize::new(0),
            #[cfg(not(loom))]
            index: (0..1usize << (MachineId::SLOT_BITS - CHUNK_BITS))
                .map(|_| core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()))
                .collect(),
        }
    }

    pub(crate) fn host(&self) -> u64 {
        self.host
    }

    /// The shard and entry index of `id`, if it belongs to this host.
    fn locate(&self, id: MachineId) -> Option<(&Mutex<Shard>, usize)> {
        if id.host() != self.host {
            return None;
        }
        let slot = id.slot() as usize;
        Some((&self.shards[slot & (SHARDS - 1)], slot >> SHARD_BITS))
    }

    /// Runs `f` on the machine of `id` (without a lock: see the module docs).
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn with<R>(&self, id: MachineId, f: impl FnOnce(&MachineCell) -> R) -> Option<R> {
        if id.host() != self.host {
            return None;
        }
        // Inside a chain of hand-offs, the step that started it holds a pin for us.
        let _guard = (!super::chain::pinned()).then(pin);
        let slot = self.slot(id.slot(), false)?;
        // T1: Acquire pairs with the writer's Release store.
        let cell = slot.load(Ordering::Acquire);
        // SAFETY: a non-null slot holds a reference to a live cell, and a removal defers
        // dropping it until every guard alive at the removal is gone (T3); ours (or the
        // chain's) is alive until `f` returns.
        let cell = unsafe { cell.as_ref() }?;
        (cell.id == id).then(|| f(cell))
    }

    /// Runs `f` on the machine of `id` under its shard lock (keep `f` short).
    #[cfg(loom)]
    pub(crate) fn with<R>(&self, id: MachineId, f: impl FnOnce(&MachineCell) -> R) -> Option<R> {
        let (shard, i) = self.locate(id)?;
        let shard = lock(shard);
        match shard.entries.get(i) {
            Some(Entry { generation, cell: Some(cell) }) if *generation == id.generation() => {
                Some(f(cell))
            }
            _ => None,
        }
    }

    /// The index slot of slot number `n`; its chunk is made if `make` (writers, under a
    /// shard lock).
    #[cfg(not(loom))]
    fn slot(&self, n: u32, make: bool) -> Option<&core::sync::atomic::AtomicPtr<MachineCell>> {
        use core::sync::atomic::AtomicPtr;
        let dir = &self.index[(n >> CHUNK_BITS) as usize];
        // T2: Acquire pairs with the installing CAS.
        let mut chunk = dir.load(Ordering::Acquire);
        if chunk.is_null() {
            if !make {
                return None;
            }
            let fresh: Box<Chunk> =
                Box::new(core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())));
            let fresh = Box::into_raw(fresh);
            // T2: AcqRel; another shard's writer may install the same chunk at once.
            chunk = match dir.compare_exchange(
                core::ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => fresh,
                Err(winner) => {
                    // SAFETY: ours was never published.
                    drop(unsafe { Box::from_raw(fresh) });
                    winner
                }
            };
        }
        // SAFETY: chunks are installed once and freed only when the table drops.
        let chunk = unsafe { &*chunk };
        Some(&chunk[(n & ((1 << CHUNK_BITS) - 1)) as usize])
    }

    /// Publishes (or, with `None`, unpublishes) the cell of slot number `n` in the lock-free
    /// index; the caller holds the slot's shard lock.
    #[cfg(not(loom))]
    fn publish(&self, n: u32, cell: Option<&StdArc<MachineCell>>) {
        let slot = self.slot(n, true).expect("made on demand");
        match cell {
            // T1: Release publishes the cell to readers.
            Some(c) => slot.store(StdArc::into_raw(c.clone()).cast_mut(), Ordering::Release),
            None => {
                let old = slot.swap(core::ptr::null_mut(), Ordering::AcqRel);
                if !old.is_null() {
                    let old = old.cast_const();
                    let guard = pin();
                    // SAFETY: (T3) the slot's reference is dropped once no guard that may
                    // have loaded `old` is alive; the cell is `Send + Sync`, so dropping it
                    // on whichever thread collects is fine.
                    unsafe { guard.defer_unchecked(move || drop(StdArc::from_raw(old))) };
                }
            }
        }
    }

    #[cfg(loom)]
    fn publish(&self, _n: u32, _cell: Option<&StdArc<MachineCell>>) {}

    pub(crate) fn get(&self, id: MachineId) -> Option<StdArc<MachineCell>> {
        self.with(id, |cell| {
            let cell: *const MachineCell = cell;
            // SAFETY: the cell is live for the lookup (guard or lock), and the table holds a
            // reference: take another one.
            unsafe {
                StdArc::increment_strong_count(cell);
                StdArc::from_raw(cell)
            }
        })
    }

    /// Reserves a slot, makes the machine for its id with `make` and enters it, all under
    /// the shard lock, after `admit` (also under the lock) agreed.
    pub(crate) fn insert(
        &self,
        admit: impl FnOnce() -> bool,
        make: impl FnOnce(MachineId) -> StdArc<MachineCell>,
    ) -> Result<StdArc<MachineCell>, InsertError> {
        let s = self.next.fetch_add(1, Ordering::Relaxed) & (SHARDS - 1);
        let mut shard = lock(&self.shards[s]);
        if !admit() {
            return Err(InsertError::Refused);
        }
        let i = match shard.free.pop() {
            Some(i) => i as usize,
            None => {
                let i = shard.entries.len();
                if ((i << SHARD_BITS) | s) >> MachineId::SLOT_BITS != 0 {
                    return Err(InsertError::Full);
                }
                shard.entries.push(Entry { generation: 1, cell: None });
                i
            }
        };
        let slot = ((i << SHARD_BITS) | s) as u32;
        let id = MachineId::new(self.host, shard.entries[i].generation, slot);
        let cell = make(id);
        self.publish(slot, Some(&cell));
        shard.entries[i].cell = Some(cell.clone());
        Ok(cell)
    }

    /// Removes the machine of `id` (if the id is still current: the generation names
    /// exactly one machine); the slot's generation moves on.
    pub(crate) fn remove(&self, id: MachineId) {
        let Some((shard, i)) = self.locate(id) else { return };
        let removed = {
            let mut shard = lock(shard);
            let entry = match shard.entries.get_mut(i) {
                Some(e) if e.generation == id.generation() && e.cell.is_some() => e,
                _ => return,
            };
            let removed = entry.cell.take();
            entry.generation = next_generation(entry.generation);
            shard.free.push(i as u32);
            self.publish(id.slot(), None);
            removed
        };
        drop(removed);
    }

    /// Every machine for which `keep` is true.
    pub(crate) fn collect(&self, keep: impl Fn(&MachineCell) -> bool) -> Vec<StdArc<MachineCell>> {
        let mut v = Vec::new();
        for shard in self.shards.iter() {
            let shard: MutexGuard<'_, Shard> = lock(shard);
            v.extend(
                shard.entries.iter().filter_map(|e| e.cell.as_ref()).filter(|c| keep(c)).cloned(),
            );
        }
        v
    }

    /// Forgets every machine (the cells are dropped outside the locks; results nobody took
    /// and nobody can still take are dropped now, not when the lock-free index's references
    /// are collected).
    pub(crate) fn clear(&self) {
        // References to a cell besides the entry's: the index's own (not under loom).
        const INDEX_REFS: usize = if cfg!(loom) { 0 } else { 1 };
        for (s, shard) in self.shards.iter().enumerate() {
            let mut unwanted = Vec::new();
            let taken = {
                let mut shard = lock(shard);
                for (i, e) in shard.entries.iter().enumerate() {
                    let Some(cell) = &e.cell else { continue };
                    // Counted before the index lets go of its reference: a waiter that looked
                    // the cell up holds one more and keeps the result it is about to take.
                    if StdArc::strong_count(cell) <= 1 + INDEX_REFS {
                        unwanted.push(cell.clone());
                    }
                    self.publish(((i << SHARD_BITS) | s) as u32, None);
                }
                core::mem::take(&mut *shard)
            };
            for cell in unwanted {
                drop(lock(&cell.exit).result.take());
            }
            drop(taken);
        }
    }
}

#[cfg(not(loom))]
impl Drop for Table {
    fn drop(&mut self) {
        for dir in self.index.iter() {
            let chunk = dir.load(Ordering::Acquire);
            if chunk.is_null() {
                continue;
            }
            // SAFETY: `&mut self`: no reader or writer is left; the chunk was made by
            // `Box::into_raw` in `slot` and is freed once, here, with the references it holds.
            let chunk = unsafe { Box::from_raw(chunk) };
            for slot in chunk.iter() {
                let cell = slot.load(Ordering::Acquire);
                if !cell.is_null() {
                    // SAFETY: the slot's own reference (T1), released once.
                    drop(unsafe { StdArc::from_raw(cell.cast_const()) });
                }
            }
        }
    }
}

fn next_generation(g: u32) -> u32 {
    let n = (g + 1) & ((1 << MachineId::GEN_BITS) - 1);
    if n == 0 { 1 } else { n }
}
