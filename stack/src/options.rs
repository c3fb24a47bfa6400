//! Process-wide pool options, set once with [`configure`](crate::configure) before the first
//! lease.

use std::io;

use crate::os;

/// Options of the process-wide stack pool.
///
/// Build with [`Options::new`] (the defaults) and the chainable setters, then pass to
/// [`configure`](crate::configure) before the first [`lease`](crate::lease).
///
/// | option | default | meaning |
/// |---|---|---|
/// | [`force_mprotect_guards`](Options::force_mprotect_guards) | `false` | use `mprotect(PROT_NONE)` guards even where guard markers work |
/// | [`keep_resident`](Options::keep_resident) | 8 KiB | bytes at the top of a stack kept resident when it is returned to a pool that is above its bound |
/// | [`thread_cache`](Options::thread_cache) | 16 | stacks per size class kept in each thread's cache (fewer for big stacks: at most 16 MiB per class) |
/// | [`pool_capacity`](Options::pool_capacity) | 256 | returned stacks per size class kept as they are in the shared pool (fewer for big stacks: at most 256 MiB per class); beyond it, the background scavenger trims returns to `keep_resident` |
/// | [`resident_capacity`](Options::resident_capacity) | 4096 | returned stacks per size class that keep their top `keep_resident` bytes; beyond it, the scavenger gives back all of their memory |
///
/// Returning a stack never makes a system call: a stack returned beyond `pool_capacity` stays
/// resident until the scavenger thread gives its memory back, in bulk, shortly after the
/// burst of returns ends (at most about 200 ms after its return, plus the time to give back
/// the stacks returned before it). [`trim`](crate::trim) does it at once.
///
/// Stacks bigger than [`Options::BIG_STACK_BYTES`] (16 MiB) are neither cached per thread
/// nor kept as they are in the shared pool: each return gives back all but their top
/// `keep_resident` bytes (one `madvise`), so a deep recursion on a big stack does not stay
/// resident after its green thread ended.
///
/// # Examples
///
/// ```
/// use purloin_stack::Options;
///
/// let opts = Options::new().keep_resident(16 * 1024).thread_cache(32);
/// assert_eq!(opts.get_thread_cache(), 32);
/// assert!(!opts.get_force_mprotect_guards());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    force_mprotect_guards: bool,
    keep_resident: usize,
    thread_cache: usize,
    pool_capacity: usize,
    resident_capacity: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options::new()
    }
}

impl Options {
    /// Stacks with more usable bytes than this are returned without their memory (see the
    /// table above).
    pub const BIG_STACK_BYTES: usize = 16 << 20;
    /// Byte budget per size class of one thread's cache (see [`Options::thread_cache`]).
    pub const THREAD_CACHE_BYTES: usize = 16 << 20;
    /// Byte budget per size class of the shared pool's untrimmed stacks (see
    /// [`Options::pool_capacity`]).
    pub const POOL_BYTES: usize = 256 << 20;
    /// The largest accepted [`Options::thread_cache`].
    pub const MAX_THREAD_CACHE: usize = 4096;

    /// The defaults (see the table on [`Options`]).
    pub const fn new() -> Options {
        Options {
            force_mprotect_guards: false,
            keep_resident: 8 * 1024,
            thread_cache: 16,
            pool_capacity: 256,
            resident_capacity: 4096,
        }
    }

    /// Use `mprotect(PROT_NONE)` guard pages even when the kernel supports guard markers
    /// (`MADV_GUARD_INSTALL`, Linux 6.13+). Each such guard splits the arena mapping, costing
    /// two of the process's `vm.max_map_count` memory mappings per stack (about 32,700 live
    /// stacks at the default limit). For testing the fallback and for tools that do not
    /// understand guard markers (checkpoint/restore, some debuggers).
    pub const fn force_mprotect_guards(mut self, yes: bool) -> Options {
        self.force_mprotect_guards = yes;
        self
    }

    /// Bytes at the top of a returned stack that stay resident when the pool is above its
    /// bound (the rest is given back with `MADV_DONTNEED`). Rounded up to whole pages when
    /// applied. [`trim`](crate::trim) gives back these bytes too.
    pub const fn keep_resident(mut self, bytes: usize) -> Options {
        self.keep_resident = bytes;
        self
    }

    /// Stacks per size class each thread keeps for itself (no atomic operation, no system
    /// call on a hit). `0` disables the per-thread cache. For big classes the count is capped
    /// so a thread holds at most [`Options::THREAD_CACHE_BYTES`] of stacks per class (at
    /// least one stack).
    pub const fn thread_cache(mut self, stacks: usize) -> Options {
        self.thread_cache = stacks;
        self
    }

    /// Returned stacks per size class the shared pool keeps untouched. Of a stack returned to
    /// a fuller pool, the background scavenger gives back all but the top
    /// [`keep_resident`](Options::keep_resident) bytes shortly after. Capped so the untrimmed stacks of a class span at most
    /// [`Options::POOL_BYTES`] (at least one stack).
    pub const fn pool_capacity(mut self, stacks: usize) -> Options {
        self.pool_capacity = stacks;
        self
    }

    /// Returned stacks per size class that keep their top
    /// [`keep_resident`](Options::keep_resident) bytes once the pool is above
    /// [`pool_capacity`](Options::pool_capacity). Of stacks returned beyond both bounds the
    /// scavenger gives back all of the memory, so a burst of a million green threads does not
    /// leave a million resident top pages behind (adjacent stacks are given back with one
    /// `madvise`). [`trim`](crate::trim) gives back the kept bytes too.
    pub const fn resident_capacity(mut self, stacks: usize) -> Options {
        self.resident_capacity = stacks;
        self
    }

    /// Whether guard markers are bypassed for `mprotect` guards.
    pub const fn get_force_mprotect_guards(&self) -> bool {
        self.force_mprotect_guards
    }

    /// The configured bytes kept resident (before rounding to pages).
    pub const fn get_keep_resident(&self) -> usize {
        self.keep_resident
    }

    /// The configured per-thread cache size, in stacks per class (before the byte cap).
    pub const fn get_thread_cache(&self) -> usize {
        self.thread_cache
    }

    /// The configured shared pool bound, in stacks per class (before the byte cap).
    pub const fn get_pool_capacity(&self) -> usize {
        self.pool_capacity
    }

    /// The configured bound on stacks keeping their top pages, per class.
    pub const fn get_resident_capacity(&self) -> usize {
        self.resident_capacity
    }

    /// Checks the options; errors name the option and the accepted range.
    pub(crate) fn validate(&self) -> io::Result<()> {
        if self.thread_cache > Self::MAX_THREAD_CACHE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-stack: Options::thread_cache({}) is too large; use at most {} \
                     stacks per class (the cache is per thread and per size class)",
                    self.thread_cache,
                    Self::MAX_THREAD_CACHE
                ),
            ));
        }
        Ok(())
    }

    /// The per-thread cache capacity for stacks of `usable` bytes.
    pub(crate) fn thread_cache_for(&self, usable: usize) -> usize {
        if self.thread_cache == 0 || usable > Self::BIG_STACK_BYTES {
            return 0;
        }
        self.thread_cache.min((Self::THREAD_CACHE_BYTES / usable).max(1))
    }

    /// The shared pool's bound on untrimmed stacks of `usable` bytes.
    pub(crate) fn pool_capacity_for(&self, usable: usize) -> usize {
        if usable > Self::BIG_STACK_BYTES {
            return 0;
        }
        self.pool_capacity.min((Self::POOL_BYTES / usable).max(1))
    }

    /// `keep_resident` rounded up to whole pages.
    pub(crate) fn keep_resident_pages(&self) -> usize {
        let page = os::page_size();
        self.keep_resident.div_ceil(page) * page
    }
}
