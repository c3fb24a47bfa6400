//! The operating-system boundary: mapping arenas, installing guards, giving memory back,
//! and explaining failures.
//!
//! One module per platform with the same surface, selected here: Linux (guard markers where
//! the kernel has them, `mprotect` guards otherwise) and macOS (`mprotect` guards only). The
//! BSDs and Windows fail to compile with a message (see the README's platform table).

use std::io;

use crate::sync::real::{AtomicUsize, Ordering};

cfg_if::cfg_if! {
    if #[cfg(all(target_os = "linux", not(loom)))] {
        mod linux;
        pub(crate) use linux::*;
    } else if #[cfg(all(target_os = "linux", loom))] {
        // The same surface with the memory calls replaced (see `loom.rs`).
        #[allow(dead_code)]
        mod linux;
        mod loom;
        pub(crate) use linux::{cause_and_fix, errno_location, min_signal_stack};
        pub(crate) use loom::*;
    } else if #[cfg(all(target_vendor = "apple", not(loom)))] {
        mod macos;
        pub(crate) use macos::*;
    } else {
        compile_error!(
            "purloin-stack supports Linux and macOS only; the BSDs and Windows are not \
             supported yet (they need their own guard-page and fault-signal code): see the \
             README's platform table"
        );
    }
}

/// The page size (`sysconf(_SC_PAGESIZE)`: 4 KiB on x86_64, 4, 16 or 64 KiB on AArch64
/// Linux, 16 KiB on Apple silicon), read once: stack sizes are rounded with it on every
/// spawn, where the libc call took about 1% of a spawn-and-join benchmark.
pub(crate) fn page_size() -> usize {
    // Relaxed: a cache of a constant; a race only makes two threads both ask libc.
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions; _SC_PAGESIZE is always supported.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let page =
                usize::try_from(page).ok().filter(|p| p.is_power_of_two()).unwrap_or_else(|| {
                    panic!(
                        "purloin-stack: sysconf(_SC_PAGESIZE) returned {page}, not a page size; \
                         the C library or the emulator this runs under is broken"
                    )
                });
            PAGE.store(page, Ordering::Relaxed);
            page
        }
        page => page,
    }
}

/// Builds the error for a failed memory call: names the call, what it was for, the cause
/// (diagnosed by the platform's `cause_and_fix`, on this cold path only) and the fix. The OS
/// error is kept as the error's [`source`](std::error::Error::source), so callers can still
/// match on its errno.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) fn explain(op: &str, what: &str, len: usize, err: io::Error) -> io::Error {
    let kind = err.kind();
    let message = format!(
        "purloin-stack: {op} of {} for {what} failed: {err}: {}",
        crate::size::DisplaySize(len),
        cause_and_fix(op, len, &err)
    );
    io::Error::new(kind, Explained { message, os: err })
}

/// An explained OS error: the message, with the OS error as its source.
#[derive(Debug)]
struct Explained {
    message: String,
    os: io::Error,
}

impl std::fmt::Display for Explained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Explained {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.os)
    }
}

/// How guard pages are installed, probed once per process.
///
/// # Examples
///
/// ```
/// use purloin_stack::{guard_backend, GuardBackend};
///
/// // On Linux 6.13+ with no seccomp filter in the way, guard markers are used.
/// match guard_backend().unwrap() {
///     GuardBackend::GuardMarkers => println!("no memory mapping per stack"),
///     GuardBackend::Mprotect => println!("two memory mappings per stack"),
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GuardBackend {
    /// `madvise(MADV_GUARD_INSTALL)` (Linux 6.13+): a page-table marker, no memory mapping of
    /// its own; a hit is a SIGSEGV with `si_code == SEGV_MAPERR`.
    GuardMarkers,
    /// `mprotect(PROT_NONE)`: splits the arena mapping, two of the process's
    /// `vm.max_map_count` mappings per stack; a hit is a SIGSEGV with
    /// `si_code == SEGV_ACCERR` (or a SIGBUS on some macOS versions). Used on older kernels,
    /// on macOS, or when forced by
    /// [`Options::force_mprotect_guards`](crate::Options::force_mprotect_guards).
    Mprotect,
}
