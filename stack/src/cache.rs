//! The per-thread stack cache: a few stacks per size class that the thread leases and returns
//! without a system call and without touching the shared pool.
//!
//! Each thread's cache is a `ThreadRecord`: per class, a LIFO vector of slots (the most
//! recently returned, warmest stack is leased first). When it is full a return goes to the
//! shared pool; when it is empty a lease goes there. When the thread exits, its cache is
//! flushed to the shared pool. A stack returned while the thread's cache is being destroyed
//! (another thread-local's destructor dropping a stack) goes straight to the shared pool.
//!
//! Records are kept in a global list (leaked; reused by later threads) so that
//! [`trim`](crate::trim) can empty every thread's cache, not only its caller's. The lists are
//! guarded by the record's [`Gate`]: the owner enters with one compare-and-swap and bypasses
//! the cache if a trim is in it; a trim waits for the owner's (short) turn to end.
//!
//! Not compiled under loom (see `sync.rs`); the gate is modelled on its own (`gate.rs`).

use std::cell::{Cell, UnsafeCell};

use crate::gate::Gate;
use crate::pool::{ClassPool, RawSlot};
use crate::size::StackSize;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, lock};

/// One thread's cache.
struct ThreadRecord {
    /// Whether a live thread owns this record.
    in_use: AtomicBool,
    /// Stacks of each class in the cache (for `stats`; written by the gate's holder).
    cached: [AtomicUsize; StackSize::MAX_CLASSES],
    /// Who may touch `classes` now: the owner or a trim.
    gate: Gate,
    /// Per class index: the cached stacks. Touched only by the gate's holder.
    classes: UnsafeCell<Vec<ClassCache>>,
}

// SAFETY: `classes` is touched only by the holder of `gate` (whose enter and leave order the
// holders' accesses, C1); the other fields are atomics. `RawSlot`s are owned stack slots,
// free to move between threads.
unsafe impl Sync for ThreadRecord {}

/// Every record ever created (leaked; reused after their thread exits).
static RECORDS: Mutex<Vec<&'static ThreadRecord>> = Mutex::new(Vec::new());

fn claim_record() -> &'static ThreadRecord {
    let mut records = lock(&RECORDS);
    for r in records.iter() {
        // Relaxed: the RECORDS mutex orders claims and releases.
        if !r.in_use.load(Ordering::Relaxed) {
            r.in_use.store(true, Ordering::Relaxed);
            return r;
        }
    }
    let r: &'static ThreadRecord = Box::leak(Box::new(ThreadRecord {
        in_use: AtomicBool::new(true),
        cached: std::array::from_fn(|_| AtomicUsize::new(0)),
        gate: Gate::new(),
        classes: UnsafeCell::new(Vec::new()),
    }));
    records.push(r);
    r
}

struct ClassCache {
    /// LIFO: the warmest stack on top.
    slots: Vec<RawSlot>,
    /// Capacity for this class (0 until the class is known).
    cap: usize,
    class: Option<&'static ClassPool>,
}

impl ThreadRecord {
    /// Runs `f` on the lists as their owner; `None` if a trim holds them.
    #[inline]
    fn as_owner<R>(&self, f: impl FnOnce(&mut Vec<ClassCache>) -> R) -> Option<R> {
        if !self.gate.owner_enter() {
            return None;
        }
        // SAFETY: we hold the gate: nobody else touches the lists until we leave it.
        let r = f(unsafe { &mut *self.classes.get() });
        self.gate.owner_leave();
        Some(r)
    }

    /// Empties every list through `f`, waiting for the owner's turn to end first.
    fn drain(&self, f: &mut impl FnMut(&'static ClassPool, RawSlot)) {
        self.gate.trim_enter();
        // SAFETY: we hold the gate: nobody else touches the lists until we leave it.
        let classes = unsafe { &mut *self.classes.get() };
        for (i, entry) in classes.iter_mut().enumerate() {
            let Some(class) = entry.class else { continue };
            for raw in entry.slots.drain(..) {
                f(class, raw);
            }
            self.publish(i, 0);
        }
        self.gate.trim_leave();
    }

    #[inline]
    fn publish(&self, index: usize, len: usize) {
        // Relaxed: a statistic, written by the gate's holder.
        self.cached[index].store(len, Ordering::Relaxed);
    }
}

/// The thread-local handle to this thread's record (claimed on its first return of a stack).
struct Local(Cell<Option<&'static ThreadRecord>>);

impl Drop for Local {
    fn drop(&mut self) {
        let Some(record) = self.0.take() else { return };
        record.drain(&mut crate::global::give_back_slow);
        let _records = lock(&RECORDS);
        // Relaxed: the RECORDS mutex orders claims and releases.
        record.in_use.store(false, Ordering::Relaxed);
    }
}

std::thread_local! {
    static CACHE: Local = const { Local(Cell::new(None)) };
}

/// Takes a cached stack of class `index`, if this thread has one.
#[inline]
pub(crate) fn take(index: usize) -> Option<(&'static ClassPool, RawSlot)> {
    let record = CACHE.try_with(|c| c.0.get()).ok().flatten()?;
    record
        .as_owner(|classes| {
            let entry = classes.get_mut(index)?;
            let raw = entry.slots.pop()?;
            record.publish(index, entry.slots.len());
            // A non-empty entry has its class (set by the first `put`).
            Some((entry.class?, raw))
        })
        .flatten()
}

/// Caches `raw` (of `class`) if this thread's cache has room; gives it back otherwise.
#[inline]
pub(crate) fn put(class: &'static ClassPool, raw: RawSlot) -> Result<(), RawSlot> {
    let index = class.index;
    let Ok(record) = CACHE.try_with(|c| match c.0.get() {
        Some(r) => Some(r),
        None if class.cache_cap == 0 => None,
        None => {
            let r = claim_record();
            c.0.set(Some(r));
            Some(r)
        }
    }) else {
        return Err(raw);
    };
    let Some(record) = record else { return Err(raw) };
    let mut raw = Some(raw);
    record.as_owner(|classes| {
        let entry = match classes.get_mut(index) {
            Some(entry) if entry.slots.len() < entry.cap => entry,
            Some(entry) if entry.class.is_some() => return, // full
            _ => match first_put(classes, class) {
                Some(entry) => entry,
                None => return,
            },
        };
        let raw = raw.take().expect("taken once");
        // Clear the label now, as the shared pool does, so a cached slot never shows a
        // finished green thread's name.
        // SAFETY: `class` is a process-wide pool, alive forever.
        unsafe { raw.meta() }.clear_label();
        entry.slots.push(raw);
        record.publish(index, entry.slots.len());
    });
    match raw {
        None => Ok(()),
        Some(raw) => Err(raw),
    }
}

/// The first return of a stack of `class` on this thread: sets up its cache entry. `None`
/// when the class is not cached (`Options::thread_cache(0)`).
#[cold]
fn first_put<'a>(
    classes: &'a mut Vec<ClassCache>,
    class: &'static ClassPool,
) -> Option<&'a mut ClassCache> {
    if class.cache_cap == 0 {
        return None;
    }
    let index = class.index;
    if classes.len() <= index {
        classes.resize_with(index + 1, || ClassCache { slots: Vec::new(), cap: 0, class: None });
    }
    let entry = &mut classes[index];
    entry.class = Some(class);
    entry.cap = class.cache_cap;
    entry.slots.reserve_exact(class.cache_cap);
    Some(entry)
}

/// Empties every thread's cache through `f` (for `trim`), the caller's and other threads',
/// including threads that are parked or blocked: each cache is taken between two of its
/// owner's leases or returns.
pub(crate) fn flush_all(mut f: impl FnMut(&'static ClassPool, RawSlot)) {
    let records: Vec<&'static ThreadRecord> = lock(&RECORDS).clone();
    for record in records {
        record.drain(&mut f);
    }
}

/// Stacks of class `index` in all threads' caches (for `stats`).
pub(crate) fn cached(index: usize) -> usize {
    lock(&RECORDS).iter().map(|r| r.cached[index].load(Ordering::Relaxed)).sum()
}
