//! Under loom: the memory calls without system calls.
//!
//! Loom runs a model thousands of times, and mapping, guarding and discarding real memory in
//! every execution made the models system-call bound (a three-thread model took 100 s, 37 s
//! of it in the kernel). None of these calls is part of the pool's protocol, which is what
//! the models check, so here "mapping" is a zeroed, page-aligned heap allocation, guards are
//! recorded but not installed, and discarding is a no-op. The real calls are exercised by
//! the ordinary tests.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::io;

use super::GuardBackend;

pub(crate) const GUARD_BATCH: usize = 16;

fn layout(len: usize) -> Layout {
    Layout::from_size_align(len, super::page_size()).expect("a page-aligned layout")
}

pub(crate) fn map_stack_memory(len: usize, what: &dyn Fn() -> String) -> io::Result<*mut u8> {
    // SAFETY: `layout(len)` has a non-zero size (arenas and alternate stacks are never empty).
    let p = unsafe { alloc_zeroed(layout(len)) };
    if p.is_null() {
        return Err(io::Error::new(io::ErrorKind::OutOfMemory, format!("loom mock: {}", what())));
    }
    Ok(p)
}

/// # Safety
///
/// - `p` and `len` come from one [`map_stack_memory`] call, and nothing uses it afterwards.
pub(crate) unsafe fn unmap(p: *mut u8, len: usize) {
    // SAFETY: allocated by `map_stack_memory` with this layout (caller).
    unsafe { dealloc(p, layout(len)) };
}

/// # Safety
///
/// - As for the real `install_guard`: the range is ours and unused.
pub(crate) unsafe fn install_guard(
    _backend: GuardBackend,
    _p: *mut u8,
    _len: usize,
    _what: &dyn Fn() -> String,
) -> io::Result<()> {
    Ok(())
}

/// # Safety
///
/// - As for the real `install_guard_markers_batch`.
pub(crate) unsafe fn install_guard_markers_batch(starts: &[*mut u8], _len: usize) -> usize {
    starts.len().min(GUARD_BATCH)
}

/// # Safety
///
/// - As for the real `discard`.
pub(crate) unsafe fn discard(_p: *mut u8, _len: usize) {}

pub(crate) fn guard_batching() -> bool {
    true
}

pub(crate) fn probe_backend() -> io::Result<GuardBackend> {
    Ok(GuardBackend::GuardMarkers)
}
