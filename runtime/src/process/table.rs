//! The `Pid → process` table: sharded slabs. A pid names its shard and slot directly, so a
//! lookup is one index into a vector under a shard lock (no hashing, one cache line), and a
//! reused slot's bumped generation makes stale pids unknown.

use std::sync::Arc as StdArc;

use super::Pid;
use super::cell::ProcCell;
use crate::loom::{AtomicUsize, Mutex, MutexGuard, Ordering, lock};

/// Shards (a power of two): the low bits of a slot number.
#[cfg(not(loom))]
const SHARDS: usize = 64;
#[cfg(loom)]
const SHARDS: usize = 2;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

struct Entry {
    /// Bumped when the slot's process is removed (never 0).
    generation: u32,
    cell: Option<StdArc<ProcCell>>,
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
    /// Round-robin shard choice for new processes.
    next: AtomicUsize,
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
        }
    }

    pub(crate) fn host(&self) -> u64 {
        self.host
    }

    /// The shard and entry index of `pid`, if it belongs to this host.
    fn locate(&self, pid: Pid) -> Option<(&Mutex<Shard>, usize)> {
        if pid.host() != self.host {
            return None;
        }
        let slot = pid.slot() as usize;
        Some((&self.shards[slot & (SHARDS - 1)], slot >> SHARD_BITS))
    }

    /// Runs `f` on the process of `pid` under its shard lock (keep `f` short).
    pub(crate) fn with<R>(&self, pid: Pid, f: impl FnOnce(&StdArc<ProcCell>) -> R) -> Option<R> {
        let (shard, i) = self.locate(pid)?;
        let shard = lock(shard);
        match shard.entries.get(i) {
            Some(Entry { generation, cell: Some(cell) }) if *generation == pid.generation() => {
                Some(f(cell))
            }
            _ => None,
        }
    }

    pub(crate) fn get(&self, pid: Pid) -> Option<StdArc<ProcCell>> {
        self.with(pid, StdArc::clone)
    }

    /// Reserves a slot, makes the process for its pid with `make` and enters it, all under
    /// the shard lock, after `admit` (also under the lock) agreed.
    pub(crate) fn insert(
        &self,
        admit: impl FnOnce() -> bool,
        make: impl FnOnce(Pid) -> StdArc<ProcCell>,
    ) -> Result<StdArc<ProcCell>, InsertError> {
        let s = self.next.fetch_add(1, Ordering::Relaxed) & (SHARDS - 1);
        let mut shard = lock(&self.shards[s]);
        if !admit() {
            return Err(InsertError::Refused);
        }
        let i = match shard.free.pop() {
            Some(i) => i as usize,
            None => {
                let i = shard.entries.len();
                if ((i << SHARD_BITS) | s) >> Pid::SLOT_BITS != 0 {
                    return Err(InsertError::Full);
                }
                shard.entries.push(Entry { generation: 1, cell: None });
                i
            }
        };
        let slot = ((i << SHARD_BITS) | s) as u32;
        let pid = Pid::new(self.host, shard.entries[i].generation, slot);
        let cell = make(pid);
        shard.entries[i].cell = Some(cell.clone());
        Ok(cell)
    }

    /// Removes the process of `pid` (if the pid is still current: the generation names
    /// exactly one process); the slot's generation moves on.
    pub(crate) fn remove(&self, pid: Pid) {
        let Some((shard, i)) = self.locate(pid) else { return };
        let removed = {
            let mut shard = lock(shard);
            let entry = match shard.entries.get_mut(i) {
                Some(e) if e.generation == pid.generation() && e.cell.is_some() => e,
                _ => return,
            };
            let removed = entry.cell.take();
            entry.generation = next_generation(entry.generation);
            shard.free.push(i as u32);
            removed
        };
        drop(removed);
    }

    /// Every process for which `keep` is true.
    pub(crate) fn collect(&self, keep: impl Fn(&ProcCell) -> bool) -> Vec<StdArc<ProcCell>> {
        let mut v = Vec::new();
        for shard in self.shards.iter() {
            let shard: MutexGuard<'_, Shard> = lock(shard);
            v.extend(
                shard.entries.iter().filter_map(|e| e.cell.as_ref()).filter(|c| keep(c)).cloned(),
            );
        }
        v
    }

    /// Forgets every process (the cells are dropped outside the locks).
    pub(crate) fn clear(&self) {
        for shard in self.shards.iter() {
            let taken = core::mem::take(&mut *lock(shard));
            drop(taken);
        }
    }
}

fn next_generation(g: u32) -> u32 {
    let n = (g + 1) & ((1 << Pid::GEN_BITS) - 1);
    if n == 0 { 1 } else { n }
}
