//! macOS: `mmap` arenas with `mprotect(PROT_NONE)` guards (the kernel has no guard markers),
//! memory given back with `MADV_FREE`, and failure causes without `/proc`.
//!
//! Type-checked for `aarch64-apple-darwin` and `x86_64-apple-darwin`; nothing here has run
//! on a Mac (see the README's platform table).

use std::io;
use std::ptr;

use super::{GuardBackend, explain};

/// Maps `len` bytes of private anonymous read/write memory for stacks. macOS reserves no swap
/// for untouched anonymous memory, so no flag is needed for that (`MAP_NORESERVE` is
/// accepted and ignored there); there is no transparent huge page to opt out of.
///
/// `what` describes the mapping for the error message.
pub(crate) fn map_stack_memory(len: usize, what: &dyn Fn() -> String) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing has no
    // preconditions and cannot alias any existing Rust object.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANON,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let err = io::Error::last_os_error();
        return Err(explain("mmap", &what(), len, err));
    }
    Ok(p.cast())
}

/// Unmaps memory mapped by [`map_stack_memory`].
///
/// # Safety
///
/// - `[p, p + len)` is a whole mapping returned by [`map_stack_memory`] (or another `mmap`).
/// - Nothing accesses it afterwards.
pub(crate) unsafe fn unmap(p: *mut u8, len: usize) {
    // SAFETY: the caller passes a whole mapping that nothing uses any more.
    let rc = unsafe { libc::munmap(p.cast(), len) };
    debug_assert_eq!(rc, 0, "munmap of our own mapping failed: {}", io::Error::last_os_error());
}

/// Installs a guard over `[p, p + len)` (page-aligned): `mprotect(PROT_NONE)`. A hit is a
/// SIGSEGV with `SEGV_ACCERR`, or a SIGBUS on some macOS versions; the overflow handler
/// takes both.
///
/// # Safety
///
/// - `[p, p + len)` lies inside a mapping from [`map_stack_memory`] and nothing accesses it
///   afterwards (any access faults from now on).
pub(crate) unsafe fn install_guard(
    backend: GuardBackend,
    p: *mut u8,
    len: usize,
    what: &dyn Fn() -> String,
) -> io::Result<()> {
    if backend == GuardBackend::GuardMarkers {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "purloin-stack: guard markers (MADV_GUARD_INSTALL) are a Linux feature; macOS \
             uses mprotect guards (GuardBackend::Mprotect)",
        ));
    }
    // SAFETY: PROT_NONE on an unused range of our own mapping (caller).
    if unsafe { libc::mprotect(p.cast(), len, libc::PROT_NONE) } == 0 {
        return Ok(());
    }
    Err(explain("mprotect(PROT_NONE)", &what(), len, io::Error::last_os_error()))
}

/// How many guard ranges a batch could hold (no batching on macOS: see
/// [`install_guard_markers_batch`]).
pub(crate) const GUARD_BATCH: usize = 64;

/// Always false: batching installs guard markers, which macOS does not have.
pub(crate) fn guard_batching() -> bool {
    false
}

/// Installs nothing and returns 0 (no guard markers on macOS); callers guard one by one.
///
/// # Safety
///
/// - As for the Linux version: every range lies inside a mapping from [`map_stack_memory`].
pub(crate) unsafe fn install_guard_markers_batch(_starts: &[*mut u8], _len: usize) -> usize {
    0
}

/// Gives the pages of `[p, p + len)` back to the kernel (`MADV_FREE`): the kernel may take
/// them at once or under memory pressure, and a later touch reads either zeros or the old
/// contents (the pool never relies on either). `mprotect` guards next to the range stay.
///
/// # Safety
///
/// - `[p, p + len)` lies inside a mapping from [`map_stack_memory`], and its contents are
///   dead (no live reference or frame points into it).
pub(crate) unsafe fn discard(p: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: the range is ours and its contents are dead (caller).
    let rc = unsafe { libc::madvise(p.cast(), len, libc::MADV_FREE) };
    // Giving memory back is best effort; EINVAL would mean a bug in the range arithmetic.
    debug_assert_eq!(rc, 0, "MADV_FREE failed: {}", io::Error::last_os_error());
}

/// The guard backend: always `mprotect` guards (macOS has no guard markers, and its
/// `vm_map` has no per-process mapping limit as low as Linux's `vm.max_map_count`).
pub(crate) fn probe_backend() -> io::Result<GuardBackend> {
    Ok(GuardBackend::Mprotect)
}

/// The cause of a failed memory call and its fix, for [`explain`](super::explain). macOS has
/// no `/proc`: an ENOMEM names the limits it can come from instead of telling them apart.
pub(crate) fn cause_and_fix(op: &str, _len: usize, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ENOMEM) if op.starts_with("mmap") => "the kernel could not map the memory \
             (virtual address space or the process's memory limit, `ulimit -v`, exhausted); \
             use smaller stacks (StackSize::Small) or fewer of them"
            .to_string(),
        Some(libc::ENOMEM) => "the kernel is out of memory for its mapping records; free \
             memory or keep fewer stacks alive"
            .to_string(),
        Some(libc::EPERM | libc::EACCES) => "the call was denied by the sandbox or a security \
             policy; allow mmap and mprotect of private memory for this process"
            .to_string(),
        _ => "this is unexpected for private anonymous memory; please report it with the \
              macOS version (sw_vers)"
            .to_string(),
    }
}

/// The calling thread's `errno`, for the signal handler to save and restore.
pub(crate) fn errno_location() -> *mut libc::c_int {
    // SAFETY: no preconditions; the location is the calling thread's.
    unsafe { libc::__error() }
}

/// The minimal signal stack size: the C library's `MINSIGSTKSZ` (the kernel tells no
/// CPU-specific value on macOS).
pub(crate) fn min_signal_stack() -> usize {
    libc::MINSIGSTKSZ
}
