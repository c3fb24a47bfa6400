//! The process-wide pool: the table of size classes, the options, and the free functions
//! [`lease`], [`trim`], [`stats`], [`configure`] and [`guard_backend`].
//!
//! # Memory ordering
//!
//! The guarantee: a thread that finds a size class in the table sees it fully constructed.
//!
//! - (P1) `create_class` (under `class_lock`) publishes a leaked `ClassPool` with a Release
//!   store into its table entry; `class` loads entries with Acquire.
//! - The options are read once, under the `CONFIG` mutex, which also orders `FROZEN`
//!   (Relaxed) with `configure`.

use std::io;

use crate::options::Options;
use crate::os::{self, GuardBackend};
use crate::pool::{ClassPool, RawSlot};
use crate::size::StackSize;
use crate::stack::Stack;
use crate::stats::{ClassStats, StackStats};
use crate::sync::real::{self, AtomicBool as RealAtomicBool, Mutex as RealMutex};
use crate::sync::{AtomicPtr, Mutex, Ordering, lock, process_global};

/// Class-table indices of the named classes.
const SMALL: usize = 0;
const NORMAL: usize = 1;
const LARGE: usize = 2;

/// The options `configure` set (read once, when the pool is first used).
static CONFIG: RealMutex<Option<Options>> = RealMutex::new(None);
/// Set when the pool has read `CONFIG`; later `configure` calls can only confirm it.
static FROZEN: RealAtomicBool = RealAtomicBool::new(false);

/// The process-wide pool.
pub(crate) struct Global {
    options: Options,
    /// Size classes: the named ones at `SMALL`, `NORMAL`, `LARGE`, custom sizes after them.
    /// Each entry is published once (P1); classes are never removed (outside loom, never
    /// freed).
    classes: Box<[AtomicPtr<ClassPool>]>,
    class_lock: Mutex<()>,
    /// Wakes the scavenger thread after a deferred return (`scavenger.rs`).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) scavenger: crate::scavenger::Wakeup,
}

process_global! {
    /// The process-wide pool, created on first use with the options `configure` set.
    pub(crate) fn global() -> &'static Global = Global::new();
}

impl Global {
    fn new() -> Global {
        let mut config = real::lock(&CONFIG);
        // Relaxed: CONFIG's mutex orders it with `configure`.
        FROZEN.store(true, real::Ordering::Relaxed);
        let options = config.get_or_insert_with(Options::new).clone();
        Global {
            options,
            classes: (0..StackSize::MAX_CLASSES)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            class_lock: Mutex::new(()),
            scavenger: crate::scavenger::Wakeup::new(),
        }
    }

    /// The class for `size`, created on first use.
    pub(crate) fn class_for(&self, size: StackSize) -> io::Result<&'static ClassPool> {
        let usable = size.usable_bytes()?;
        let index = match StackSize::from_usable(usable) {
            StackSize::Small => SMALL,
            StackSize::Normal => NORMAL,
            StackSize::Large => LARGE,
            StackSize::Bytes(_) => {
                for i in LARGE + 1..self.classes.len() {
                    match self.class(i) {
                        Some(c) if c.geo.usable == usable => return Ok(c),
                        Some(_) => {}
                        // Classes fill the table in order: the first gap ends the search.
                        None => break,
                    }
                }
                return self.create_class(usable, None);
            }
        };
        match self.class(index) {
            Some(c) => Ok(c),
            None => self.create_class(usable, Some(index)),
        }
    }

    /// The named class at `index`, if created.
    pub(crate) fn class(&self, index: usize) -> Option<&'static ClassPool> {
        // Acquire (P1): pairs with the Release store in `create_class`.
        let p = self.classes[index].load(Ordering::Acquire);
        // SAFETY: non-null entries are leaked boxes (`create_class`) that live as long as
        // `self`, which is process-wide (outside loom, forever; under loom, for the model
        // execution, whose stacks the model drops before it ends).
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Creates the class of `usable` bytes at `index` (a named class) or at the first free
    /// custom index.
    #[cold]
    fn create_class(&self, usable: usize, index: Option<usize>) -> io::Result<&'static ClassPool> {
        let _guard = lock(&self.class_lock);
        let index = match index {
            Some(i) => {
                if let Some(c) = self.class(i) {
                    return Ok(c);
                }
                i
            }
            None => {
                let mut free = None;
                for i in LARGE + 1..self.classes.len() {
                    match self.class(i) {
                        Some(c) if c.geo.usable == usable => return Ok(c),
                        Some(_) => {}
                        None => {
                            free = Some(i);
                            break;
                        }
                    }
                }
                free.ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "purloin-stack: {} distinct stack sizes are already in use, the \
                             most one process may use; use StackSize::Small, Normal or Large, \
                             or round custom sizes to a few values",
                            StackSize::MAX_CLASSES
                        ),
                    )
                })?
            }
        };
        let backend = self.backend()?;
        let class = ClassPool::new(index, usable, backend, &self.options, cfg!(not(loom)));
        let p = Box::into_raw(Box::new(class));
        // Release (P1): pairs with the Acquire load in `class`.
        self.classes[index].store(p, Ordering::Release);
        // SAFETY: just leaked; see `class`.
        Ok(unsafe { &*p })
    }

    fn backend(&self) -> io::Result<GuardBackend> {
        if self.options.get_force_mprotect_guards() {
            Ok(GuardBackend::Mprotect)
        } else {
            os::probe_backend()
        }
    }

    /// Every created class.
    pub(crate) fn classes(&self) -> impl Iterator<Item = &'static ClassPool> + '_ {
        (0..self.classes.len()).filter_map(|i| self.class(i))
    }

    pub(crate) fn options(&self) -> &Options {
        &self.options
    }
}

#[cfg(loom)]
impl Drop for Global {
    fn drop(&mut self) {
        for c in self.classes.iter() {
            // Acquire (P1): pairs with the Release store in `create_class`.
            let p = c.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: leaked by `create_class`, freed once, at the end of the model
                // execution, after the model dropped its stacks.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

/// The class-table index of a named size, without touching the pool (the per-thread
/// cache's fast path).
#[cfg(not(loom))]
fn named_index(size: StackSize) -> Option<usize> {
    match size {
        StackSize::Small => Some(SMALL),
        StackSize::Normal => Some(NORMAL),
        StackSize::Large => Some(LARGE),
        StackSize::Bytes(_) => None,
    }
}

/// Leases a guard-paged stack of `size` from the process-wide pool.
///
/// Order of supply: this thread's cache (no atomic read-modify-write, no system call), the
/// shared pool of the size class, a never-used slot of the class's arena (installing its
/// guard: one `madvise`, or one `mprotect` on the fallback), a new arena chunk (one `mmap`).
///
/// The stack is not zeroed: a reused stack holds whatever its previous user left there.
///
/// # Errors
///
/// - [`InvalidInput`](io::ErrorKind::InvalidInput): `size` is `Bytes(0)`, not a multiple of
///   the page size, above [`StackSize::MAX_BYTES`], or a 65th distinct size.
/// - [`OutOfMemory`](io::ErrorKind::OutOfMemory) and others: the kernel refused to map an
///   arena or install a guard. The message names the cause (for example the process
///   reached `vm.max_map_count`, an `RLIMIT_AS` limit, or strict overcommit) and the fix.
///   There is no silent fallback to an unguarded or smaller stack.
///
/// # Examples
///
/// ```
/// use purloin_stack::{lease, StackSize};
///
/// let stack = lease(StackSize::Small)?;
/// assert_eq!(stack.usable_size(), 32 * 1024);
/// assert_eq!(stack.top() as usize % 16, 0);
/// assert!(stack.guard().end == stack.limit() as usize);
/// drop(stack); // back to this thread's cache
/// # Ok::<(), std::io::Error>(())
/// ```
#[inline]
pub fn lease(size: StackSize) -> io::Result<Stack> {
    #[cfg(not(loom))]
    crate::fault::check(size)?;
    #[cfg(not(loom))]
    if let Some(index) = named_index(size)
        && let Some((class, raw)) = crate::cache::take(index)
    {
        return Ok(Stack::from_raw(class, raw));
    }
    lease_slow(size)
}

/// [`lease`] past this thread's cache of a named class.
#[cold]
#[inline(never)]
fn lease_slow(size: StackSize) -> io::Result<Stack> {
    let class = global().class_for(size)?;
    #[cfg(not(loom))]
    if named_index(size).is_none()
        && let Some((class, raw)) = crate::cache::take(class.index)
    {
        return Ok(Stack::from_raw(class, raw));
    }
    let raw = class.lease()?;
    Ok(Stack::from_raw(class, raw))
}

/// Gives a stack back: to this thread's cache if it has room, else to the shared pool.
#[inline]
pub(crate) fn give_back(class: &'static ClassPool, raw: RawSlot) {
    #[cfg(not(loom))]
    let raw = match crate::cache::put(class, raw) {
        Ok(()) => return,
        Err(raw) => raw,
    };
    give_back_slow(class, raw);
}

/// [`give_back`] past this thread's cache.
#[cold]
#[inline(never)]
pub(crate) fn give_back_slow(class: &'static ClassPool, raw: RawSlot) {
    if class.give_back(raw) {
        crate::scavenger::wake();
    }
}

/// Gives memory back to the kernel after a burst: every stack in the shared pools, waiting
/// for the background scavenger, and in every thread's cache (the caller's and other
/// threads', also of threads that are parked or blocked) is `MADV_DONTNEED`ed entirely
/// (including the `keep_resident` top pages) and put in the shared pool, so the next lease of
/// each starts from zero-filled pages. Without `trim`, the scavenger gives back the memory of
/// stacks returned beyond the pool's bounds on its own, shortly after a burst ends.
///
/// The rule: when `trim` returns, no stack that was pooled or cached when it was called
/// holds resident memory; the only stack memory still resident is that of leased stacks and
/// of stacks returned while `trim` ran. A thread's cache is taken between two of its leases
/// or returns (an owner that finds its cache being trimmed uses the shared pool for that
/// one call). Address space stays reserved (arenas are never unmapped): only memory is
/// returned.
///
/// # Examples
///
/// ```
/// let stacks: Vec<_> = (0..100)
///     .map(|_| purloin_stack::lease(purloin_stack::StackSize::Small))
///     .collect::<Result<_, _>>()?;
/// drop(stacks);
/// purloin_stack::trim();
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn trim() {
    let g = global();
    #[cfg(not(loom))]
    crate::cache::flush_all(|class, raw| class.release(raw));
    for class in g.classes() {
        class.trim();
    }
}

/// A snapshot of the process-wide pool: how many stacks are leased, pooled and cached, and
/// how much memory the arenas map.
///
/// The counters are read without stopping other threads: exact when no thread is leasing or
/// returning, approximate (but never negative) otherwise.
///
/// # Examples
///
/// ```
/// use purloin_stack::{lease, stats, StackSize};
///
/// let stack = lease(StackSize::Small)?;
/// let s = stats();
/// assert!(s.leased >= 1);
/// assert_eq!(s.leased + s.pooled + s.cached, s.slots);
/// drop(stack);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn stats() -> StackStats {
    let g = global();
    let mut out = StackStats::default();
    for class in g.classes() {
        let c = class.counters();
        #[cfg(not(loom))]
        let cached = crate::cache::cached(class.index);
        #[cfg(loom)]
        let cached = 0;
        let cs = ClassStats {
            size: StackSize::from_usable(class.geo.usable),
            usable: class.geo.usable,
            leased: c.carved.saturating_sub(c.pooled + cached),
            pooled: c.pooled,
            cached,
            slots: c.carved,
            chunks: c.chunks,
            mapped_bytes: c.mapped,
            backend: class.backend,
        };
        out.leased += cs.leased;
        out.pooled += cs.pooled;
        out.cached += cs.cached;
        out.slots += cs.slots;
        out.chunks += cs.chunks;
        out.mapped_bytes += cs.mapped_bytes;
        out.classes.push(cs);
    }
    out
}

/// Sets the process-wide pool's options. Call it once at start-up: the pool reads its
/// options when first used, which is the first call to [`lease`], [`trim`], [`stats`] or
/// [`guard_backend`].
///
/// # Errors
///
/// - [`InvalidInput`](io::ErrorKind::InvalidInput): an option is out of range.
/// - [`AlreadyExists`](io::ErrorKind::AlreadyExists): the pool is already in use with
///   different options (calling again with the options in force is fine).
///
/// # Examples
///
/// ```
/// use purloin_stack::{configure, Options};
///
/// // Usually the first thing `main` does; here other doctests may have used the pool, so
/// // only the options in force are accepted.
/// match configure(Options::new()) {
///     Ok(()) => {}
///     Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists),
/// }
/// ```
pub fn configure(options: Options) -> io::Result<()> {
    options.validate()?;
    let mut config = real::lock(&CONFIG);
    // Relaxed: CONFIG's mutex orders it with `Global::new`.
    if FROZEN.load(real::Ordering::Relaxed) {
        if config.as_ref() == Some(&options) {
            return Ok(());
        }
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "purloin-stack: configure() was called after the stack pool was first used, \
                 with options that differ from those in force ({:?}); call configure once at \
                 start-up, before the first lease",
                config.as_ref().unwrap_or(&Options::new())
            ),
        ));
    }
    *config = Some(options);
    Ok(())
}

/// The guard backend the process-wide pool uses: guard markers where the kernel supports
/// them (probed once with a scratch page), else `mprotect`, or `mprotect` when forced by
/// [`Options::force_mprotect_guards`].
///
/// # Errors
///
/// The probe's scratch mapping failed (the message names the cause and the fix).
pub fn guard_backend() -> io::Result<GuardBackend> {
    global().backend()
}

/// The system page size: custom [`StackSize::Bytes`] sizes must be a multiple of it, and
/// every guard is one page.
///
/// # Examples
///
/// ```
/// assert!(purloin_stack::page_size().is_power_of_two());
/// ```
pub fn page_size() -> usize {
    os::page_size()
}

/// The kernel thread id (Linux `gettid`) of this process's scavenger thread, the background
/// thread that gives back the memory of stacks returned beyond the pools' bounds, if it runs;
/// `None` before the first such return, and off Linux. A runtime's deadlock check uses it to
/// tell its own helper threads, which never wake a green thread, from the program's threads.
///
/// # Examples
///
/// ```
/// // A program that never returned more stacks than the pools keep has no scavenger yet.
/// if let Some(tid) = purloin_stack::scavenger_thread_id() {
///     assert!(tid > 0);
/// }
/// ```
pub fn scavenger_thread_id() -> Option<u64> {
    crate::scavenger::thread_id()
}

/// Calls `f(limit, usable)` for every stack slot handed out so far (the valgrind hook).
pub(crate) fn for_each_carved_slot(mut f: impl FnMut(*mut u8, usize)) {
    for class in global().classes() {
        let usable = class.geo.usable;
        class.for_each_carved_slot(|limit| f(limit, usable));
    }
}

/// The options in force (for tests and `Debug` output).
#[allow(dead_code)]
pub(crate) fn options() -> Options {
    global().options().clone()
}
