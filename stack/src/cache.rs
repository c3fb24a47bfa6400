//! The per-thread stack cache: a few stacks per size class that the thread leases and returns
//! with no atomic read-modify-write and no system call.
//!
//! A `thread_local!` holds, per class, a LIFO vector of slots (the most recently returned,
//! warmest stack is leased first). When it is full a return goes to the shared pool; when it
//! is empty a lease goes there. When the thread exits, its cache is flushed to the shared
//! pool. A stack returned while the thread's cache is being destroyed (another
//! thread-local's destructor dropping a stack) goes straight to the shared pool.
//!
//! For [`stats`](crate::stats), each thread mirrors its cache lengths into a `ThreadRecord`
//! (plain Relaxed stores to atomics only this thread writes); records are kept in a global
//! list and reused by later threads.
//!
//! Not compiled under loom (see `sync.rs`).

use std::cell::RefCell;

use crate::pool::{ClassPool, RawSlot};
use crate::size::StackSize;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, lock};

/// One thread's cached-stack counts, per class, for `stats`.
struct ThreadRecord {
    /// Whether a live thread owns this record.
    in_use: AtomicBool,
    /// Stacks of each class in the owner's cache (written only by the owner).
    cached: [AtomicUsize; StackSize::MAX_CLASSES],
}

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
    /// This thread's `ThreadRecord` counter for the class.
    counter: &'static AtomicUsize,
}

impl ClassCache {
    #[inline]
    fn publish(&self) {
        // Relaxed: a statistic written only by this thread.
        self.counter.store(self.slots.len(), Ordering::Relaxed);
    }
}

struct ThreadCache {
    classes: Vec<ClassCache>,
    record: Option<&'static ThreadRecord>,
}

impl Drop for ThreadCache {
    fn drop(&mut self) {
        for c in self.classes.iter_mut() {
            if let Some(class) = c.class {
                for raw in c.slots.drain(..) {
                    class.give_back(raw);
                }
            }
            c.publish();
        }
        if let Some(r) = self.record {
            let _records = lock(&RECORDS);
            // Relaxed: the RECORDS mutex orders claims and releases.
            r.in_use.store(false, Ordering::Relaxed);
        }
    }
}

std::thread_local! {
    static CACHE: RefCell<ThreadCache> =
        const { RefCell::new(ThreadCache { classes: Vec::new(), record: None }) };
}

/// Takes a cached stack of class `index`, if this thread has one.
#[inline]
pub(crate) fn take(index: usize) -> Option<(&'static ClassPool, RawSlot)> {
    CACHE
        .try_with(|cache| {
            let mut cache = cache.try_borrow_mut().ok()?;
            let entry = cache.classes.get_mut(index)?;
            let raw = entry.slots.pop()?;
            entry.publish();
            // A non-empty entry has its class (set by the first `put`).
            Some((entry.class?, raw))
        })
        .ok()
        .flatten()
}

/// Caches `raw` (of `class`) if this thread's cache has room; gives it back otherwise.
#[inline]
pub(crate) fn put(class: &'static ClassPool, raw: RawSlot) -> Result<(), RawSlot> {
    let index = class.index;
    CACHE
        .try_with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else { return Err(raw) };
            let entry = match cache.classes.get_mut(index) {
                Some(entry) if entry.slots.len() < entry.cap => entry,
                Some(entry) if entry.class.is_some() => return Err(raw), // full
                _ => match first_put(&mut cache, class) {
                    Some(entry) => entry,
                    None => return Err(raw),
                },
            };
            // Clear the label now, as the shared pool does, so a cached slot never shows a
            // finished green thread's name.
            // SAFETY: `class` is a process-wide pool, alive forever.
            unsafe { raw.meta() }.clear_label();
            entry.slots.push(raw);
            entry.publish();
            Ok(())
        })
        .unwrap_or(Err(raw))
}

/// The first return of a stack of `class` on this thread: sets up its cache entry. `None`
/// when the class is not cached (`Options::thread_cache(0)`).
#[cold]
fn first_put<'a>(
    cache: &'a mut ThreadCache,
    class: &'static ClassPool,
) -> Option<&'a mut ClassCache> {
    if class.cache_cap == 0 {
        return None;
    }
    let record = *cache.record.get_or_insert_with(claim_record);
    let index = class.index;
    if cache.classes.len() <= index {
        let start = cache.classes.len();
        cache.classes.extend((start..=index).map(|i| ClassCache {
            slots: Vec::new(),
            cap: 0,
            class: None,
            counter: &record.cached[i],
        }));
    }
    let entry = &mut cache.classes[index];
    entry.class = Some(class);
    entry.cap = class.cache_cap;
    entry.slots.reserve_exact(class.cache_cap);
    Some(entry)
}

/// Empties this thread's cache through `f` (for `trim`).
pub(crate) fn flush(mut f: impl FnMut(&'static ClassPool, RawSlot)) {
    let _ = CACHE.try_with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else { return };
        for entry in cache.classes.iter_mut() {
            let Some(class) = entry.class else { continue };
            for raw in entry.slots.drain(..) {
                f(class, raw);
            }
            entry.publish();
        }
    });
}

/// Stacks of class `index` in all threads' caches (for `stats`).
pub(crate) fn cached(index: usize) -> usize {
    lock(&RECORDS).iter().map(|r| r.cached[index].load(Ordering::Relaxed)).sum()
}
