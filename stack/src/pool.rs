//! One size class's shared pool: its arena chunks, the slots never handed out yet, and three
//! lock-free lists of returned slots.
//!
//! - `warm`: returned slots whose pages may still be resident (`RES_DIRTY`: returned as they
//!   were, at most `pool_cap` of them; `RES_KEPT`: only the top `keep_resident` bytes left,
//!   at most `kept_cap` of them).
//! - `excess`: slots returned beyond `pool_cap`, still resident (`RES_EXCESS`), waiting for
//!   the scavenger (`scavenger.rs`) or `trim` to give their memory back in bulk: sorted by
//!   address, adjacent slots coalesced into one `MADV_DONTNEED` (the guard markers between
//!   them survive it). So a return never makes a system call, and a burst of a million
//!   returns costs a few hundred `madvise` calls, off the returning threads, instead of a
//!   million TLB shootdowns on them. A lease takes from `excess` before `clean`: resident
//!   memory is reused instead of faulted in again.
//! - `clean`: slots with nothing resident (scavenged beyond both bounds, given back with
//!   `MADV_DONTNEED` by `trim` or [`Stack::release`](crate::Stack::release), or a fresh slot
//!   whose guard could not be installed).
//! - Fresh slots are carved from the newest chunk under the `growth` mutex; a full class maps
//!   a new chunk, twice as big as the last (up to 1 GiB), so a million 32 KiB stacks take a
//!   few dozen mappings. Their guards are installed a batch at a time, ahead of need and
//!   outside the `growth` mutex (under the `guarding` mutex: see `carve`).
//!
//! A lease takes from `warm`, then `excess`, then `clean`, then carves. Each list is a Treiber stack of
//! [`SlotRef`]s linked through the slots' metadata, with a 32-bit tag in the head word.
//!
//! # Memory ordering
//!
//! The guarantee: a thread that takes slot S from a list sees everything the thread that put
//! S there did before putting it: S's metadata (link, residency, label) and the contents of
//! S's stack memory. So a stack handed from one thread to another through the pool is never
//! used by two at once, and no write to it made before its return races with one made after
//! its next lease.
//!
//! - (P1) `push` publishes S with a Release CAS on the list head; `pop` reads the head with
//!   Acquire (its first load, and the reload on a failed CAS, which becomes the next
//!   snapshot). A head written by other pops in between still carries the push's release
//!   (the CASes are read-modify-writes, so they continue its release sequence).
//! - (P2) `carve` publishes a new chunk's pointer with a Release store after mapping (and,
//!   for the process-wide pool, registering) it; `chunk` loads it with Acquire. Every
//!   `SlotRef` reaching `chunk` was obtained through P1 or the growth mutex, which already
//!   order it; the explicit pair keeps `chunk` sound on its own.
//! - The tag: every successful CAS on a head adds one to its high 32 bits, so a `pop` whose
//!   snapshot (S, tag t) went stale (S popped, others popped or pushed, S pushed back) fails
//!   its CAS instead of installing S's stale `next` (the ABA problem). A false success needs
//!   exactly 2^32 successful operations on one list while a popper sits between its load and
//!   its CAS.
//! - `pop` reads `S.next` with Relaxed: the Acquire of the head snapshot makes the push's
//!   `next` write visible, and if S was taken and its `next` rewritten since, the head
//!   changed, so the CAS (tag) fails and the value is discarded.
//! - The counters (`carved`, `pooled`, `dirty`, `kept`, `excess_count`, `mapped`,
//!   `chunk_count`) are Relaxed statistics and policy heuristics. `dirty` (`kept`,
//!   `excess_count`) is incremented before the push that publishes a dirty (kept, excess)
//!   slot and decremented after the pop that takes it;
//!   read-modify-writes of one atomic follow happens-before, so it never wraps below zero.
//!   The bound checks in `give_back` are a load followed by an add, so concurrent returns may
//!   overshoot `pool_cap` or `kept_cap` by the number of returning threads.
//! - (P3) `scavenge` pops and gives back `excess` slots under the `scavenging` mutex, and
//!   `trim` drains `excess` under it too: a trim that finds `excess` empty because the
//!   scavenger holds a batch it has popped but not yet given back waits for that batch, so
//!   "when `trim` returns, no stack pooled when it was called holds resident memory" holds.

use std::io;
use std::ptr::NonNull;

use crate::arena::{
    Chunk, GUARDED, Geometry, MAX_SLOTS_PER_CHUNK, RES_CLEAN, RES_DIRTY, RES_EXCESS, RES_KEPT,
    RES_MASK, SlotMeta, SlotRef,
};
use crate::options::Options;
use crate::os::{self, GuardBackend};
use crate::size::DisplaySize;
use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Mutex, Ordering, lock, try_lock};

/// The most chunks one size class may map (a [`SlotRef`] has 10 bits for the chunk).
#[cfg(not(loom))]
pub(crate) const MAX_CHUNKS: usize = 1024;
/// Under loom, classes stay tiny so the models explore growth quickly.
#[cfg(loom)]
pub(crate) const MAX_CHUNKS: usize = 4;

/// Virtual size of a class's first chunk; each next chunk doubles it.
const FIRST_CHUNK_BYTES: usize = 4 << 20;
/// Virtual size at which chunk growth stops doubling.
const MAX_CHUNK_BYTES: usize = 1 << 30;

/// Slots `scavenge` sorts and gives back at once (adjacent ones coalesced): the capacity of
/// the batch buffer each class allocates up front.
const SCAVENGE_STEP: usize = if cfg!(loom) { 2 } else { 1024 };

/// One tag increment in a list head (`tag << 32 | SlotRef`).
const TAG_ONE: u64 = 1 << 32;
const EMPTY_LIST: u64 = SlotRef::NIL.0 as u64;

/// How many slots chunk number `k` of a class holds.
fn chunk_slots(geo: &Geometry, k: usize) -> usize {
    if cfg!(loom) {
        // 1, then 2 per chunk: two leases already need a second chunk.
        return if k == 0 { 1 } else { 2 };
    }
    let bytes = FIRST_CHUNK_BYTES.checked_shl(k.min(16) as u32).unwrap_or(MAX_CHUNK_BYTES);
    (bytes.min(MAX_CHUNK_BYTES) / geo.slot_size).clamp(1, MAX_SLOTS_PER_CHUNK)
}

/// A leased slot as the pool and the per-thread caches pass it around: its identity, the
/// lowest usable address, and its metadata (so labelling it needs no chunk lookup).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawSlot {
    pub(crate) slot: SlotRef,
    pub(crate) limit: NonNull<u8>,
    meta: NonNull<SlotMeta>,
}

impl RawSlot {
    /// The slot's metadata.
    ///
    /// # Safety
    ///
    /// - The pool this slot came from is alive (the process-wide pools always are; pools of
    ///   tests and models outlive their slots).
    pub(crate) unsafe fn meta(&self) -> &SlotMeta {
        // SAFETY: `meta` points into the metadata of the slot's chunk (`ClassPool::raw`),
        // which lives as long as the pool (caller).
        unsafe { self.meta.as_ref() }
    }
}

/// Growth state, under `ClassPool::growth`.
struct Growth {
    /// Chunks mapped so far.
    chunks: usize,
    /// Slots of the newest chunk handed out so far.
    next_slot: usize,
    /// Slots of the newest chunk.
    cur_slots: usize,
    /// Slots of the newest chunk below this one have their guard (`guard_batch`); the
    /// uncarved ones at or above it have none, or are getting theirs from the holder of the
    /// `guarding` lock.
    guarded_to: usize,
}

/// Statistics of one class (Relaxed snapshots).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClassCounters {
    pub(crate) carved: usize,
    pub(crate) pooled: usize,
    pub(crate) chunks: usize,
    pub(crate) mapped: usize,
}

/// The shared pool of one size class.
///
/// The process-wide pools are leaked, so the `&'static ClassPool` every [`Stack`] holds
/// stays valid. Pools built in tests and loom models are dropped, which unmaps their chunks:
/// they must outlive every slot leased from them.
///
/// [`Stack`]: crate::Stack
pub(crate) struct ClassPool {
    /// Index in the process-wide class table (the per-thread caches are indexed by it).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) index: usize,
    pub(crate) geo: Geometry,
    pub(crate) backend: GuardBackend,
    /// Bytes (whole pages) at the top of a slot kept by `give_back` over the bound.
    keep_resident: usize,
    /// Most `RES_DIRTY` slots in `warm`.
    pool_cap: usize,
    /// Most `RES_KEPT` slots in `warm`.
    kept_cap: usize,
    /// Whether returns beyond `pool_cap` are left to the scavenger (`excess`); false for
    /// stacks above `Options::BIG_STACK_BYTES`, whose return gives their memory back at once.
    defer: bool,
    /// Per-thread cache capacity for this class.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) cache_cap: usize,
    /// Whether chunks are entered in the overflow registry (the process-wide pool only; such
    /// a pool must never be dropped).
    registered: bool,
    /// Published chunks (P2); `MAX_CHUNKS` entries, null until mapped.
    chunks: Box<[AtomicPtr<Chunk>]>,
    growth: Mutex<Growth>,
    /// Held while a batch of guards is installed without the growth lock (see `carve`).
    guarding: Mutex<()>,
    /// `tag << 32 | SlotRef` of the top of each list.
    warm: AtomicU64,
    excess: AtomicU64,
    clean: AtomicU64,
    /// Held while `excess` slots are popped and given back (P3); the batch buffer, allocated
    /// with the pool.
    scavenging: Mutex<Vec<SlotRef>>,
    /// Slots ever carved.
    carved: AtomicUsize,
    /// Slots in `warm` or `clean` (or being moved between them by `trim`).
    pooled: AtomicUsize,
    /// `RES_DIRTY` slots in `warm`.
    dirty: AtomicUsize,
    /// `RES_KEPT` slots in `warm`.
    kept: AtomicUsize,
    /// `RES_EXCESS` slots in `excess`.
    excess_count: AtomicUsize,
    /// Bytes mapped by the chunks.
    mapped: AtomicUsize,
    chunk_count: AtomicUsize,
}

impl ClassPool {
    /// A pool for stacks of `usable` bytes (a page multiple).
    pub(crate) fn new(
        index: usize,
        usable: usize,
        backend: GuardBackend,
        options: &Options,
        registered: bool,
    ) -> ClassPool {
        let geo = Geometry::new(usable);
        ClassPool {
            index,
            geo,
            backend,
            keep_resident: options.keep_resident_pages().min(usable),
            pool_cap: options.pool_capacity_for(usable),
            kept_cap: options.get_resident_capacity(),
            defer: usable <= Options::BIG_STACK_BYTES,
            cache_cap: options.thread_cache_for(usable),
            registered,
            chunks: (0..MAX_CHUNKS).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect(),
            growth: Mutex::new(Growth { chunks: 0, next_slot: 0, cur_slots: 0, guarded_to: 0 }),
            guarding: Mutex::new(()),
            warm: AtomicU64::new(EMPTY_LIST),
            excess: AtomicU64::new(EMPTY_LIST),
            clean: AtomicU64::new(EMPTY_LIST),
            scavenging: Mutex::new(Vec::with_capacity(SCAVENGE_STEP)),
            carved: AtomicUsize::new(0),
            pooled: AtomicUsize::new(0),
            dirty: AtomicUsize::new(0),
            kept: AtomicUsize::new(0),
            excess_count: AtomicUsize::new(0),
            mapped: AtomicUsize::new(0),
            chunk_count: AtomicUsize::new(0),
        }
    }

    /// Takes a slot: a returned one if any, else a fresh one (mapping a chunk if needed), with
    /// its guard installed.
    pub(crate) fn lease(&self) -> io::Result<RawSlot> {
        let r = match self
            .pop(&self.warm)
            .or_else(|| self.pop(&self.excess))
            .or_else(|| self.pop(&self.clean))
        {
            Some(r) => {
                // Relaxed: statistics and the pool-bound heuristic (module docs).
                self.pooled.fetch_sub(1, Ordering::Relaxed);
                self.uncount(self.meta(r).state.load(Ordering::Relaxed));
                r
            }
            None => self.carve()?,
        };
        if let Err(e) = self.ensure_guard(r) {
            // The slot stays unguarded and clean; a later lease retries its guard.
            self.pooled.fetch_add(1, Ordering::Relaxed);
            self.push(&self.clean, r);
            return Err(e);
        }
        Ok(self.raw(r))
    }

    /// Returns a slot to the shared pool: as it is while fewer than `pool_cap` returned slots
    /// are untrimmed; else, for classes that defer, as it is to `excess`, and returns `true`:
    /// the caller wakes the scavenger, which gives its memory back later ([`Self::scavenge`]).
    /// Big stacks instead give back at once all but their top `keep_resident` bytes while
    /// fewer than `kept_cap` returned slots keep theirs, else all of their memory.
    #[must_use = "a deferred return needs the scavenger woken"]
    pub(crate) fn give_back(&self, s: RawSlot) -> bool {
        let meta = self.meta(s.slot);
        meta.clear_label();
        let guarded = meta.state.load(Ordering::Relaxed) & GUARDED;
        // Relaxed: heuristic bounds (module docs).
        if self.dirty.load(Ordering::Relaxed) < self.pool_cap {
            self.dirty.fetch_add(1, Ordering::Relaxed);
            meta.state.store(guarded | RES_DIRTY, Ordering::Relaxed);
        } else if self.defer {
            self.excess_count.fetch_add(1, Ordering::Relaxed);
            meta.state.store(guarded | RES_EXCESS, Ordering::Relaxed);
            self.pooled.fetch_add(1, Ordering::Relaxed);
            self.push(&self.excess, s.slot);
            return true;
        } else if self.kept.load(Ordering::Relaxed) < self.kept_cap {
            let discard = self.geo.usable - self.keep_resident;
            // SAFETY: the low `usable - keep_resident` bytes of the slot's usable range; the
            // caller gave the slot back, so nothing uses its stack any more.
            unsafe { os::discard(s.limit.as_ptr(), discard) };
            self.kept.fetch_add(1, Ordering::Relaxed);
            meta.state.store(guarded | RES_KEPT, Ordering::Relaxed);
        } else {
            self.release(s);
            return false;
        }
        self.pooled.fetch_add(1, Ordering::Relaxed);
        self.push(&self.warm, s.slot);
        false
    }

    /// Un-counts a slot of residency `state` taken from `warm`.
    fn uncount(&self, state: u32) {
        // Relaxed: heuristic bounds (module docs).
        match state & RES_MASK {
            RES_DIRTY => self.dirty.fetch_sub(1, Ordering::Relaxed),
            RES_KEPT => self.kept.fetch_sub(1, Ordering::Relaxed),
            RES_EXCESS => self.excess_count.fetch_sub(1, Ordering::Relaxed),
            _ => 0,
        };
    }

    /// Returns a slot after giving all of its memory back.
    pub(crate) fn release(&self, s: RawSlot) {
        let meta = self.meta(s.slot);
        meta.clear_label();
        // SAFETY: the slot's whole usable range; the caller gave the slot back.
        unsafe { os::discard(s.limit.as_ptr(), self.geo.usable) };
        let guarded = meta.state.load(Ordering::Relaxed) & GUARDED;
        meta.state.store(guarded | RES_CLEAN, Ordering::Relaxed);
        self.pooled.fetch_add(1, Ordering::Relaxed);
        self.push(&self.clean, s.slot);
    }

    /// Returns slots waiting in `excess` (resident stacks returned beyond `pool_cap`): at most
    /// `max` of them, popped and given back [`SCAVENGE_STEP`] at a time. While fewer than `kept_cap` slots keep their top
    /// pages, each gives back all but its top `keep_resident` bytes and goes to `warm`; the
    /// others give back everything, sorted by address so that adjacent slots are given back
    /// with one `madvise` (guard markers between them survive it), and go to `clean`.
    /// Returns how many slots it took.
    pub(crate) fn scavenge(&self, max: usize) -> usize {
        let mut buf = lock(&self.scavenging);
        self.scavenge_locked(&mut buf, max, true)
    }

    /// Slots waiting for the scavenger.
    pub(crate) fn excess(&self) -> usize {
        // Relaxed: a policy heuristic (module docs).
        self.excess_count.load(Ordering::Relaxed)
    }

    /// [`Self::scavenge`] under the `scavenging` lock (P3); `keep` false gives everything
    /// back, as `trim` does.
    fn scavenge_locked(&self, buf: &mut Vec<SlotRef>, max: usize, keep: bool) -> usize {
        // `buf` was allocated with the pool: a round allocates nothing, whatever its size,
        // and `trim` cannot fail for want of memory.
        let step = buf.capacity().max(1);
        let mut taken = 0;
        while taken < max {
            buf.clear();
            while buf.len() < step.min(max - taken) {
                let Some(r) = self.pop(&self.excess) else { break };
                self.uncount(self.meta(r).state.load(Ordering::Relaxed));
                buf.push(r);
            }
            let popped = buf.len();
            taken += popped;
            self.give_back_batch(buf, keep);
            if popped < step {
                break;
            }
        }
        taken
    }

    /// Gives back the memory of the popped `excess` slots in `batch` (see [`Self::scavenge`]).
    fn give_back_batch(&self, batch: &mut Vec<SlotRef>, keep: bool) {
        batch.retain(|&r| {
            // Relaxed: heuristic bound (module docs).
            if !keep || self.kept.load(Ordering::Relaxed) >= self.kept_cap {
                return true;
            }
            let raw = self.raw(r);
            // SAFETY: the low `usable - keep_resident` bytes of a slot we popped from
            // `excess`: returned, so nothing uses it, and ours until we push it.
            unsafe { os::discard(raw.limit.as_ptr(), self.geo.usable - self.keep_resident) };
            self.kept.fetch_add(1, Ordering::Relaxed);
            let meta = self.meta(r);
            let guarded = meta.state.load(Ordering::Relaxed) & GUARDED;
            meta.state.store(guarded | RES_KEPT, Ordering::Relaxed);
            self.push(&self.warm, r);
            false
        });
        // `SlotRef` order is address order within a chunk: runs of consecutive slots of one
        // chunk are one range.
        batch.sort_unstable_by_key(|r| r.0);
        let coalesce = self.backend == GuardBackend::GuardMarkers;
        let mut i = 0;
        while i < batch.len() {
            let mut j = i + 1;
            while coalesce && j < batch.len() && batch[j].0 == batch[j - 1].0 + 1 {
                j += 1;
            }
            let first = self.raw(batch[i]);
            let len = (j - i - 1) * self.geo.slot_size + self.geo.usable;
            // SAFETY: from the lowest usable byte of `batch[i]` to the top of `batch[j - 1]`:
            // the usable ranges of slots we popped (returned, unused, ours until pushed) and
            // the guard pages between them, which hold nothing and whose markers survive
            // `MADV_DONTNEED` (with `mprotect` guards no run spans a guard: `coalesce`).
            unsafe { os::discard(first.limit.as_ptr(), len) };
            for &r in &batch[i..j] {
                let meta = self.meta(r);
                let guarded = meta.state.load(Ordering::Relaxed) & GUARDED;
                meta.state.store(guarded | RES_CLEAN, Ordering::Relaxed);
                self.push(&self.clean, r);
            }
            i = j;
        }
    }

    /// Gives back the memory of every slot in `excess` and `warm` (of `warm`, at most as many
    /// as were pooled when it started, so concurrent returns cannot keep it running), moving
    /// them to `clean`; waits for a scavenger batch in progress (P3). Returns how many slots
    /// it trimmed.
    pub(crate) fn trim(&self) -> usize {
        let budget = self.pooled.load(Ordering::Relaxed);
        let mut trimmed = {
            let mut buf = lock(&self.scavenging);
            self.scavenge_locked(&mut buf, budget, false)
        };
        while trimmed < budget {
            let Some(r) = self.pop(&self.warm) else { break };
            let meta = self.meta(r);
            let state = meta.state.load(Ordering::Relaxed);
            self.uncount(state);
            let raw = self.raw(r);
            // SAFETY: the slot's whole usable range; it was in the pool, so nobody uses it,
            // and we popped it, so nobody else can lease it until we push it.
            unsafe { os::discard(raw.limit.as_ptr(), self.geo.usable) };
            meta.state.store((state & GUARDED) | RES_CLEAN, Ordering::Relaxed);
            self.push(&self.clean, r);
            trimmed += 1;
        }
        trimmed
    }

    /// Takes a never-used slot, mapping a new chunk when the newest is full.
    ///
    /// Guards are installed in batches (`guard_batch`) without the growth lock: a lease that
    /// finds no guarded slot ready installs the guards of its own slot and the next ones, and
    /// a lease that finds fewer than half a batch ready installs the next batch (reading
    /// ahead), so the other workers' carves go on meanwhile instead of sleeping on the growth
    /// lock for the length of the system call. The `guarding` lock says a batch is under way:
    /// taken with `try_lock` under the growth lock (never waited for while holding it), held
    /// through the system call, released after `guarded_to` moved past the batch. A carve
    /// that reaches `guarded_to` while a batch is under way waits on `guarding`, then looks
    /// again.
    fn carve(&self) -> io::Result<SlotRef> {
        loop {
            let mut g = lock(&self.growth);
            if g.next_slot == g.cur_slots {
                self.grow(&mut g)?;
            }
            let k = g.chunks - 1;
            let slot = g.next_slot;
            let batching = self.backend == GuardBackend::GuardMarkers && os::guard_batching();
            // The guards this carve installs once the growth lock is released:
            // `[from, to)` of chunk `k`, under the `guarding` lock.
            let mut batch = None;
            if batching && slot >= g.guarded_to {
                let Some(guarding) = try_lock(&self.guarding) else {
                    // Another lease installs the guards from `guarded_to` on.
                    drop(g);
                    drop(lock(&self.guarding));
                    continue;
                };
                batch = Some((guarding, slot, g.cur_slots.min(slot + os::GUARD_BATCH)));
            } else if batching
                && g.guarded_to < g.cur_slots
                && g.guarded_to - slot <= os::GUARD_BATCH / 2
                && let Some(guarding) = try_lock(&self.guarding)
            {
                let from = g.guarded_to;
                batch = Some((guarding, from, g.cur_slots.min(from + os::GUARD_BATCH)));
            }
            let r = SlotRef::new(k, slot);
            g.next_slot += 1;
            // Carving is the first access to a fresh slot's metadata (slots are carved in
            // address order), and it must be a write: metadata pages start untouched, and a
            // first read would map the shared zero page, which the next write must replace,
            // flushing the TLBs of every CPU running this process (an IPI each). So the guard
            // state comes from `guarded_to`, not from reading the slot's `state`.
            if slot >= g.guarded_to && batch.is_none() {
                // Relaxed: the slot is ours (the growth lock owns uncarved slots). An uncarved
                // slot at or above `guarded_to` has no guard: its state is still the zero it
                // was mapped with. `ensure_guard` installs it.
                self.meta(r).state.store(0, Ordering::Relaxed);
            }
            if self.registered {
                // Under the growth lock, so `for_each_carved_slot` sees each slot exactly once
                // unless the hook was installed during this carve.
                let raw = self.raw(r);
                crate::valgrind::new_stack(raw.limit.as_ptr(), self.geo.usable);
            }
            self.carved.fetch_add(1, Ordering::Relaxed);
            drop(g);
            if let Some((guarding, from, to)) = batch {
                let done = self.guard_batch(k, from, to);
                if from == slot && done == 0 {
                    // Relaxed: as above; `ensure_guard` installs this one's guard.
                    self.meta(r).state.store(0, Ordering::Relaxed);
                }
                let mut g = lock(&self.growth);
                // The chunk is still `k` unless this batch was the chunk's last slot alone.
                if g.chunks - 1 == k {
                    g.guarded_to = g.guarded_to.max(from + done);
                }
                drop(g);
                drop(guarding);
            }
            return Ok(r);
        }
    }

    /// Maps the class's next chunk and makes it the one slots are carved from.
    fn grow(&self, g: &mut Growth) -> io::Result<()> {
        let k = g.chunks;
        if k == self.chunks.len() {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "purloin-stack: the {} stack class already has {k} arena chunks, the most \
                     one class may have; keep fewer stacks of this size alive, or spread them \
                     over other sizes",
                    DisplaySize(self.geo.usable)
                ),
            ));
        }
        let slots = chunk_slots(&self.geo, k);
        let chunk = Chunk::map(&self.geo, slots)?;
        if self.registered {
            // On error the chunk is dropped (unmapped) and its record never becomes ready.
            crate::registry::register(&chunk, &self.geo)?;
        }
        self.mapped.fetch_add(chunk.mapped_bytes(), Ordering::Relaxed);
        let p = Box::into_raw(Box::new(chunk));
        // Release (P2): pairs with the Acquire load in `chunk`.
        self.chunks[k].store(p, Ordering::Release);
        self.chunk_count.store(k + 1, Ordering::Relaxed);
        *g = Growth { chunks: k + 1, next_slot: 0, cur_slots: slots, guarded_to: 0 };
        Ok(())
    }

    /// Installs the guards of slots `[from, to)` of chunk `k` with one batched system call,
    /// and marks them `GUARDED` (the first access to their metadata, a write). Returns how
    /// many got their guard (the leading ones). The caller holds the `guarding` lock and
    /// `from` is `guarded_to` or its own carved slot, so nobody else uses these slots.
    fn guard_batch(&self, k: usize, from: usize, to: usize) -> usize {
        let chunk = self.chunk(k);
        let mut starts = [std::ptr::null_mut(); os::GUARD_BATCH];
        for (i, s) in (from..to).enumerate() {
            starts[i] = chunk.slot_start(&self.geo, s);
        }
        // SAFETY: the guard pages of slots at or above `guarded_to` (or the caller's own
        // slot), which nobody uses (caller); all inside the chunk's mapping.
        let done = unsafe { os::install_guard_markers_batch(&starts[..to - from], self.geo.guard) };
        for s in from..from + done {
            // Relaxed: published to other carvers by the growth lock, under which
            // `guarded_to` moves past them.
            chunk.meta(s).state.store(GUARDED, Ordering::Relaxed);
        }
        done
    }

    /// Installs `r`'s guard if it has none yet. The caller owns `r`.
    fn ensure_guard(&self, r: SlotRef) -> io::Result<()> {
        let meta = self.meta(r);
        let state = meta.state.load(Ordering::Relaxed);
        if state & GUARDED != 0 {
            return Ok(());
        }
        let chunk = self.chunk(r.chunk());
        // SAFETY: the caller owns `r` (popped or carved, not yet handed out).
        unsafe { chunk.install_guard(&self.geo, r.slot(), self.backend) }?;
        meta.state.store(state | GUARDED, Ordering::Relaxed);
        Ok(())
    }

    /// Calls `f(limit)` for every slot handed out so far, under the growth lock (`valgrind`
    /// registers them).
    pub(crate) fn for_each_carved_slot(&self, mut f: impl FnMut(*mut u8)) {
        let g = lock(&self.growth);
        for k in 0..g.chunks {
            let chunk = self.chunk(k);
            let used = if k + 1 == g.chunks { g.next_slot } else { chunk.slots };
            for slot in 0..used {
                f(chunk.slot_start(&self.geo, slot).wrapping_add(self.geo.guard));
            }
        }
    }

    /// The published chunk `k`.
    ///
    /// # Panics
    ///
    /// If chunk `k` was never published (a broken `SlotRef`).
    fn chunk(&self, k: usize) -> &Chunk {
        // Acquire (P2): pairs with the Release store in `carve`.
        let p = self.chunks[k].load(Ordering::Acquire);
        assert!(!p.is_null(), "purloin-stack: slot of unmapped chunk {k} (a broken SlotRef)");
        // SAFETY: non-null entries point at chunks leaked by `carve` with `Box::into_raw`,
        // freed only in `Drop` (which has `&mut self`, so no `&Chunk` from `self` is alive).
        unsafe { &*p }
    }

    pub(crate) fn meta(&self, r: SlotRef) -> &SlotMeta {
        self.chunk(r.chunk()).meta(r.slot())
    }

    /// The leasable form of `r`.
    pub(crate) fn raw(&self, r: SlotRef) -> RawSlot {
        let chunk = self.chunk(r.chunk());
        let limit = chunk.slot_start(&self.geo, r.slot()).wrapping_add(self.geo.guard);
        RawSlot {
            slot: r,
            limit: NonNull::new(limit).expect("a slot inside a mapping"),
            meta: NonNull::from(chunk.meta(r.slot())),
        }
    }

    fn push(&self, list: &AtomicU64, r: SlotRef) {
        let meta = self.meta(r);
        // Relaxed: only a snapshot to link to; the CAS validates it.
        let mut head = list.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below (P1).
            meta.next.store(head as u32, Ordering::Relaxed);
            let new = (head & !u64::from(u32::MAX)).wrapping_add(TAG_ONE) | u64::from(r.0);
            // Release (P1): pairs with the Acquire loads in `pop`.
            match list.compare_exchange_weak(head, new, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    fn pop(&self, list: &AtomicU64) -> Option<SlotRef> {
        // Acquire (P1): pairs with the Release CAS in `push`.
        let mut head = list.load(Ordering::Acquire);
        loop {
            let r = SlotRef(head as u32);
            if r == SlotRef::NIL {
                return None;
            }
            // Relaxed: validated by the tag in the CAS below (module docs).
            let next = self.meta(r).next.load(Ordering::Relaxed);
            let new = (head & !u64::from(u32::MAX)).wrapping_add(TAG_ONE) | u64::from(next);
            // Acquire on failure (P1): the reloaded head is the next snapshot whose slot we
            // read. On success the snapshot's Acquire load already synchronised.
            match list.compare_exchange_weak(head, new, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Some(r),
                Err(h) => head = h,
            }
        }
    }

    pub(crate) fn counters(&self) -> ClassCounters {
        ClassCounters {
            carved: self.carved.load(Ordering::Relaxed),
            pooled: self.pooled.load(Ordering::Relaxed),
            chunks: self.chunk_count.load(Ordering::Relaxed),
            mapped: self.mapped.load(Ordering::Relaxed),
        }
    }
}

impl Drop for ClassPool {
    fn drop(&mut self) {
        if self.registered {
            // The overflow registry points into these chunks: keep them mapped. (The
            // process-wide pools are leaked, so this is only reached by mistake.)
            return;
        }
        for c in self.chunks.iter() {
            // Acquire (P2): pairs with the Release store in `carve` (`&mut self` makes it
            // unnecessary, but it is not a hot path).
            let p = c.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: leaked by `carve` with `Box::into_raw`, freed exactly once here.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn pool(opts: &Options) -> ClassPool {
        let backend = if opts.get_force_mprotect_guards() {
            GuardBackend::Mprotect
        } else {
            os::probe_backend().unwrap()
        };
        ClassPool::new(0, 4 * os::page_size(), backend, opts, false)
    }

    #[test]
    fn lease_carves_distinct_slots_across_chunks() {
        let p = pool(&Options::new());
        let first = chunk_slots(&p.geo, 0);
        let n = first + 5;
        let slots: Vec<RawSlot> = (0..n).map(|_| p.lease().unwrap()).collect();
        let distinct: HashSet<usize> = slots.iter().map(|s| s.limit.as_ptr() as usize).collect();
        assert_eq!(distinct.len(), n);
        assert_eq!(p.counters().chunks, 2);
        for s in &slots {
            // The stack is usable from limit to top.
            // SAFETY: leased slots are ours; [limit, limit + usable) is read/write memory.
            unsafe {
                s.limit.as_ptr().write(1);
                s.limit.as_ptr().add(p.geo.usable - 1).write(2);
            }
        }
        for s in slots {
            assert!(!p.give_back(s), "under the bound: nothing deferred");
        }
        let c = p.counters();
        assert_eq!((c.carved, c.pooled), (n, n));
        // LIFO reuse, no new slot carved.
        let again = p.lease().unwrap();
        assert_eq!(p.counters().carved, n);
        let _ = p.give_back(again);
    }

    #[test]
    fn returns_over_the_bounds_are_scavenged() {
        let page = os::page_size();
        let p = pool(&Options::new().pool_capacity(1).resident_capacity(1).keep_resident(page));
        let [a, b, c] = [(); 3].map(|_| p.lease().unwrap());
        for s in [a, b, c] {
            // SAFETY: leased slots are ours; the whole usable range is read/write.
            unsafe { std::ptr::write_bytes(s.limit.as_ptr(), 0xAB, p.geo.usable) };
        }
        let low_top = |s: RawSlot| {
            // SAFETY: called on leased slots only; both reads are inside the usable range.
            unsafe { (*s.limit.as_ptr(), *s.limit.as_ptr().add(p.geo.usable - 1)) }
        };
        assert!(!p.give_back(a), "under pool_capacity: kept as is");
        assert!(p.give_back(b), "over it: deferred to the scavenger, still resident");
        assert!(p.give_back(c), "deferred too");
        assert_eq!(p.excess(), 2);
        // The scavenger's step: the first popped (c, LIFO) keeps its top page (under
        // resident_capacity), the other gives back everything.
        assert_eq!(p.scavenge(BATCH_FOR_TESTS), 2);
        assert_eq!(p.excess(), 0);
        let c2 = p.lease().unwrap();
        assert_eq!(c2.slot, c.slot, "kept slots go to warm, LIFO");
        assert_eq!(low_top(c2), (0, 0xAB), "low pages given back, top page kept");
        let a2 = p.lease().unwrap();
        assert_eq!(low_top(a2), (0xAB, 0xAB), "untouched under the bound");
        let b2 = p.lease().unwrap();
        assert_eq!(b2.slot, b.slot, "clean after warm");
        assert_eq!(low_top(b2), (0, 0), "all given back");
        // A deferred slot is leased again before a clean one, still resident.
        assert!(!p.give_back(a2));
        assert!(p.give_back(b2));
        let b3 = p.lease().unwrap();
        assert_eq!(b3.slot, a2.slot, "warm first");
        let b4 = p.lease().unwrap();
        assert_eq!(b4.slot, b2.slot, "then excess");
        for s in [b3, b4, c2] {
            let _ = p.give_back(s);
        }
        assert_eq!(p.trim(), 3, "trim empties warm and excess");
        let d = p.lease().unwrap();
        assert_eq!(low_top(d), (0, 0), "trim gives back everything");
        p.release(d);
        assert_eq!(p.counters().pooled, 3);
        assert_eq!(p.counters().carved, 3);
    }

    /// Adjacent slots are given back with one `madvise` over them and the guards between
    /// them, and the guard markers survive it.
    #[test]
    fn scavenging_coalesces_adjacent_slots_and_keeps_their_guards() {
        let p = pool(&Options::new().pool_capacity(0).resident_capacity(0));
        let slots: Vec<RawSlot> = (0..40).map(|_| p.lease().unwrap()).collect();
        for s in &slots {
            // SAFETY: leased slots are ours; the whole usable range is read/write.
            unsafe { std::ptr::write_bytes(s.limit.as_ptr(), 0xCD, p.geo.usable) };
        }
        let lo = slots[0].limit.as_ptr() as usize - p.geo.guard;
        let hi = slots[39].limit.as_ptr() as usize + p.geo.usable;
        let pages = |bit: u32| pagemap_count(lo, hi, bit);
        let guards = pages(58);
        assert_eq!(pages(63), 40 * p.geo.usable / p.geo.page, "all touched");
        // Every other slot first (no two adjacent), then the rest in reverse.
        for s in slots.iter().step_by(2).chain(slots.iter().skip(1).step_by(2).rev()) {
            assert!(p.give_back(*s), "deferred");
        }
        assert_eq!(pages(63), 40 * p.geo.usable / p.geo.page, "returns leave memory resident");
        assert_eq!(p.scavenge(BATCH_FOR_TESTS), 40);
        assert_eq!(pages(63), 0, "all given back");
        if p.backend == GuardBackend::GuardMarkers {
            assert_eq!(guards, 40, "one guard marker per slot");
            assert_eq!(pages(58), 40, "guard markers survive the coalesced MADV_DONTNEED");
        }
    }

    /// Carving reaches each metadata page first with a write: one page fault per page. A
    /// first read would map the zero page and the next write fault again (and flush the TLBs
    /// of every CPU running the process).
    #[test]
    fn carving_faults_each_metadata_page_once() {
        fn faults() -> i64 {
            // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_THREAD counts
            // this thread only, so other tests running in parallel do not disturb it.
            unsafe {
                let mut u: libc::rusage = std::mem::zeroed();
                assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut u), 0);
                u.ru_minflt
            }
        }
        let page = os::page_size();
        let p = ClassPool::new(0, page, os::probe_backend().unwrap(), &Options::new(), false);
        let per_page = page / size_of::<SlotMeta>();
        let pages = 6;
        assert!(chunk_slots(&p.geo, 0) > (pages + 1) * per_page, "one chunk holds them all");
        let mut slots = Vec::with_capacity((pages + 1) * per_page);
        // The first page (and the chunk's mapping, and this thread's deeper stack frames).
        slots.extend((0..per_page).map(|_| p.lease().unwrap()));
        let before = faults();
        for _ in 0..pages * per_page {
            slots.push(p.lease().unwrap());
        }
        let faulted = faults() - before;
        assert!(
            faulted <= pages as i64 + 1,
            "carving {pages} metadata pages' slots took {faulted} page faults (one per page \
             expected; two each means a read reached the fresh page first)"
        );
        for s in slots {
            let _ = p.give_back(s);
        }
    }

    /// Slots carved by threads racing each other (batches of guards installed by one while
    /// the other carves, reading ahead, across chunks) all have their guard when leased.
    #[test]
    fn concurrently_carved_slots_all_have_guards() {
        let p = std::sync::Arc::new(pool(&Options::new()));
        if p.backend != GuardBackend::GuardMarkers {
            return;
        }
        let per_thread = chunk_slots(&p.geo, 0) + 3 * os::GUARD_BATCH;
        let lease = || (0..per_thread).map(|_| p.lease().unwrap().slot).collect::<Vec<_>>();
        let leased: Vec<RawSlot> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..2).map(|_| s.spawn(lease)).collect();
            threads.into_iter().flat_map(|t| t.join().unwrap()).map(|r| p.raw(r)).collect()
        });
        for raw in &leased {
            let guard = raw.limit.as_ptr() as usize - p.geo.guard;
            assert_eq!(pagemap_count(guard, guard + p.geo.guard, 58), 1, "slot {:?}", raw.slot);
            // SAFETY: the pool is alive.
            let state = unsafe { raw.meta() }.state.load(Ordering::Relaxed);
            assert_ne!(state & GUARDED, 0, "slot {:?} not marked guarded", raw.slot);
        }
        assert_eq!(p.counters().carved, 2 * per_thread);
        for raw in leased {
            let _ = p.give_back(raw);
        }
    }

    /// Pages of `[lo, hi)` with pagemap bit `bit` set (63: present; 58: guard marker).
    fn pagemap_count(lo: usize, hi: usize, bit: u32) -> usize {
        use std::io::{Read, Seek, SeekFrom};
        let page = os::page_size();
        let mut f = std::fs::File::open("/proc/self/pagemap").unwrap();
        f.seek(SeekFrom::Start((lo / page * 8) as u64)).unwrap();
        let mut buf = vec![0u8; (hi - lo) / page * 8];
        f.read_exact(&mut buf).unwrap();
        buf.chunks_exact(8)
            .filter(|e| u64::from_le_bytes((*e).try_into().unwrap()) >> bit & 1 != 0)
            .count()
    }

    const BATCH_FOR_TESTS: usize = 4096;

    #[test]
    fn threads_share_the_pool_exactly_once() {
        let p = std::sync::Arc::new(pool(&Options::new()));
        let owners: std::sync::Arc<Vec<crate::sync::AtomicBool>> = std::sync::Arc::new(
            (0..8 * 32768).map(|_| crate::sync::AtomicBool::new(false)).collect(),
        );
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (p, owners) = (p.clone(), owners.clone());
                crate::sync::thread::spawn(move || {
                    let mut held = Vec::new();
                    for i in 0..20_000usize {
                        if i % 3 == t % 3 || held.is_empty() {
                            let s = p.lease().unwrap();
                            let key = s.slot.chunk() * 32768 + s.slot.slot();
                            assert!(!owners[key].swap(true, Ordering::Relaxed), "leased twice");
                            held.push((s, key));
                        } else {
                            let (s, key) = held.swap_remove(i % held.len());
                            owners[key].store(false, Ordering::Relaxed);
                            if i % 7 == 0 {
                                p.release(s)
                            } else if p.give_back(s) && i % 11 == 0 {
                                p.scavenge(64);
                            }
                        }
                        if i % 5000 == 0 {
                            p.trim();
                        }
                    }
                    for (s, key) in held {
                        owners[key].store(false, Ordering::Relaxed);
                        let _ = p.give_back(s);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let c = p.counters();
        assert_eq!(c.carved, c.pooled, "every carved slot is back in the pool");
        let mut seen = HashSet::new();
        while let Some(s) = p.pop(&p.warm).or_else(|| p.pop(&p.excess)).or_else(|| p.pop(&p.clean))
        {
            assert!(seen.insert(s), "slot {s:?} pooled twice");
        }
        assert_eq!(seen.len(), c.carved, "no slot lost");
    }
}

/// Loom models of the shared pool: leases and returns racing across threads, `trim` racing
/// with them, two threads growing the arena at once, three contending on one list, and the
/// ABA case the tag exists for.
///
/// Each slot has a loom `UnsafeCell` standing for its stack memory, written by every lessee:
/// loom reports a causality violation if two lessees of one slot are not ordered by
/// happens-before, and an `owned` flag catches a slot handed to two lessees at once. At the
/// end every carved slot must be in exactly one list, once.
///
/// Mutations checked (each made, run, seen to fail, reverted):
/// - `push`'s CAS Release -> Relaxed: all five fail (causality violation on a slot's memory,
///   "slot of unmapped chunk", "dirty count drifted").
/// - `pop`'s load and CAS Acquire -> Relaxed: all five fail (same reports).
/// - `pop`'s CAS failure ordering Acquire -> Relaxed only: all five fail ("a slot was lost").
/// - no tag increment in `push` and `pop`: `aba_is_caught` and `three_way_contention` fail
///   ("a slot was lost"); the others never pop twice while another thread is mid-pop.
/// - the chunk pointer's Release (P2) -> Relaxed: nothing fails, as the module docs say: P1
///   and the growth mutex already order every use of a chunk.
#[cfg(all(test, loom))]
mod models {
    use super::*;
    use crate::sync::{Arc, AtomicBool, UnsafeCell, model, thread};

    /// Slots a model can carve: chunks of 1, 2, 2, 2 slots.
    const KEYS: usize = MAX_CHUNKS * 2;

    struct Harness {
        pool: ClassPool,
        owned: Vec<AtomicBool>,
        memory: Vec<UnsafeCell<usize>>,
    }

    impl Harness {
        fn new() -> Arc<Harness> {
            let page = os::page_size();
            let opts = Options::new().pool_capacity(1).resident_capacity(1).keep_resident(0);
            let backend = os::probe_backend().unwrap();
            Arc::new(Harness {
                pool: ClassPool::new(0, page, backend, &opts, false),
                owned: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
                memory: (0..KEYS).map(|_| UnsafeCell::new(0)).collect(),
            })
        }

        fn key(s: SlotRef) -> usize {
            s.chunk() * 2 + s.slot()
        }

        fn lease(&self, who: usize) -> RawSlot {
            let s = self.pool.lease().unwrap();
            let k = Self::key(s.slot);
            assert!(!self.owned[k].swap(true, Ordering::Relaxed), "slot {k} leased twice");
            // SAFETY: loom checks this access; exclusive if the pool is right.
            self.memory[k].with_mut(|m| unsafe { *m = who });
            s
        }

        fn give_back(&self, s: RawSlot, who: usize) {
            let k = Self::key(s.slot);
            // SAFETY: loom checks this access; we are the lessee.
            self.memory[k].with(|m| assert_eq!(unsafe { *m }, who, "stack overwritten"));
            self.owned[k].store(false, Ordering::Relaxed);
            // A deferred return stays in `excess` (no scavenger here): leases take it back.
            let _ = self.pool.give_back(s);
        }

        /// Every carved slot is pooled exactly once; the dirty count matches the lists.
        fn check_drained(&self) {
            let c = self.pool.counters();
            assert_eq!(c.carved, c.pooled, "a slot was lost");
            let mut seen = [false; KEYS];
            let (mut dirty, mut kept, mut excess) = (0, 0, 0);
            while let Some(r) = self
                .pool
                .pop(&self.pool.warm)
                .or_else(|| self.pool.pop(&self.pool.excess))
                .or_else(|| self.pool.pop(&self.pool.clean))
            {
                assert!(!std::mem::replace(&mut seen[Self::key(r)], true), "pooled twice");
                match self.pool.meta(r).state.load(Ordering::Relaxed) & RES_MASK {
                    RES_DIRTY => dirty += 1,
                    RES_KEPT => kept += 1,
                    RES_EXCESS => excess += 1,
                    _ => {}
                }
            }
            assert_eq!(seen.iter().filter(|&&s| s).count(), c.carved, "a slot was lost");
            assert_eq!(self.pool.dirty.load(Ordering::Relaxed), dirty, "dirty count drifted");
            assert_eq!(self.pool.kept.load(Ordering::Relaxed), kept, "kept count drifted");
            assert_eq!(self.pool.excess(), excess, "excess count drifted");
        }
    }

    /// A stack leased on one thread is returned on another while a third leases and returns.
    #[test]
    fn return_on_another_thread() {
        model(|| {
            let h = Harness::new();
            let handoff = Arc::new(crate::sync::Mutex::new(None::<RawSlotSend>));
            let h1 = h.clone();
            let hand1 = handoff.clone();
            let t1 = thread::spawn(move || {
                let s = h1.lease(1);
                *lock(&hand1) = Some(RawSlotSend(s));
            });
            let h2 = h.clone();
            let t2 = thread::spawn(move || {
                let s = h2.lease(2);
                h2.give_back(s, 2);
            });
            t1.join().unwrap();
            let s = lock(&handoff).take().unwrap().0;
            // Main takes over the stack leased by t1 (ordered by the mutex and the join).
            h.give_back(s, 1);
            let again = h.lease(3);
            h.give_back(again, 3);
            t2.join().unwrap();
            h.check_drained();
        });
    }

    /// Two threads lease and return concurrently, growing the class from nothing.
    #[test]
    fn concurrent_growth_and_reuse() {
        model(|| {
            let h = Harness::new();
            let threads: Vec<_> = (1..=2)
                .map(|who| {
                    let h = h.clone();
                    thread::spawn(move || {
                        let a = h.lease(who);
                        h.give_back(a, who);
                        let b = h.lease(who);
                        h.give_back(b, who);
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            h.check_drained();
        });
    }

    /// `trim` moves slots from `warm` to `clean` while another thread leases and returns.
    #[test]
    fn trim_against_lease_and_return() {
        model(|| {
            let h = Harness::new();
            let a = h.lease(9);
            let b = h.lease(9);
            h.give_back(a, 9);
            h.give_back(b, 9);
            let h1 = h.clone();
            let t = thread::spawn(move || {
                let s = h1.lease(1);
                h1.give_back(s, 1);
            });
            h.pool.trim();
            t.join().unwrap();
            h.check_drained();
        });
    }

    /// The ABA case: while t1 sits between reading the top slot's `next` and its CAS, t2 pops
    /// both slots and pushes the first back. Without the tag t1's CAS would succeed and put
    /// t2's second slot back on the list while t2 still holds it.
    #[test]
    fn aba_is_caught() {
        model(|| {
            let h = Harness::new();
            let a = h.lease(9);
            let b = h.lease(9);
            h.give_back(b, 9);
            h.give_back(a, 9); // list: a -> b
            let h1 = h.clone();
            let t1 = thread::spawn(move || {
                let x = h1.lease(1);
                let y = h1.lease(1);
                h1.give_back(x, 1);
                h1.give_back(y, 1);
            });
            let x = h.lease(2);
            let y = h.lease(2);
            h.give_back(x, 2);
            h.give_back(y, 2);
            t1.join().unwrap();
            h.check_drained();
        });
    }

    /// Three threads take from one list holding two slots at once: two pop (their CASes
    /// race), the third finds it empty, falls through to `clean`, and carves.
    #[test]
    fn three_way_contention() {
        model(|| {
            let h = Harness::new();
            let a = h.lease(9);
            let b = h.lease(9);
            h.give_back(a, 9);
            h.give_back(b, 9);
            let threads: Vec<_> = (1..=3)
                .map(|who| {
                    let h = h.clone();
                    thread::spawn(move || RawSlotSend(h.lease(who)))
                })
                .collect();
            for (who, t) in (1..=3).zip(threads) {
                let s = t.join().unwrap().0;
                h.give_back(s, who);
            }
            h.check_drained();
        });
    }

    /// `RawSlot` holds a `NonNull`; the models move one between threads on purpose.
    struct RawSlotSend(RawSlot);
    // SAFETY: the slot is exclusively owned by whoever holds the wrapper; `NonNull` is only
    // an address here.
    unsafe impl Send for RawSlotSend {}
}
