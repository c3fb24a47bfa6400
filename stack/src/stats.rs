//! [`StackStats`]: what the process-wide pool holds, for leak checks and dashboards.

use crate::os::GuardBackend;
use crate::size::StackSize;

/// A snapshot of the process-wide pool, returned by [`stats`](crate::stats).
///
/// At rest, `leased + pooled + cached == slots`. A scheduler's tests prove nothing leaked by
/// checking that `leased` is back where it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StackStats {
    /// Stacks currently leased (alive as [`Stack`](crate::Stack) values).
    pub leased: usize,
    /// Stacks in the shared pools.
    pub pooled: usize,
    /// Stacks in the per-thread caches (all threads).
    pub cached: usize,
    /// Slots ever handed out (each has its guard installed and is never unmapped).
    pub slots: usize,
    /// Arena chunks mapped (each is one `mmap`; the kernel may merge neighbours).
    pub chunks: usize,
    /// Virtual bytes mapped by the arenas (reserved, mostly not resident).
    pub mapped_bytes: usize,
    /// The same, per size class in use.
    pub classes: Vec<ClassStats>,
}

/// One size class's part of [`StackStats`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassStats {
    /// The class.
    pub size: StackSize,
    /// Usable bytes per stack.
    pub usable: usize,
    /// Stacks currently leased.
    pub leased: usize,
    /// Stacks in the shared pool.
    pub pooled: usize,
    /// Stacks in per-thread caches.
    pub cached: usize,
    /// Slots ever handed out.
    pub slots: usize,
    /// Arena chunks mapped.
    pub chunks: usize,
    /// Virtual bytes mapped.
    pub mapped_bytes: usize,
    /// How this class's guards are installed.
    pub backend: GuardBackend,
}
