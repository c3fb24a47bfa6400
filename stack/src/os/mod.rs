//! The operating-system boundary: mapping arenas, installing guards, giving memory back,
//! and explaining failures.
//!
//! One module per platform with the same surface, selected here. Only Linux is implemented:
//! the crate's reason to exist is `MADV_GUARD_INSTALL`, a Linux 6.13+ feature, and its
//! overflow handler reads Linux's `siginfo_t`. Other targets fail to compile with a message
//! (see the README's platform table).

cfg_if::cfg_if! {
    if #[cfg(all(target_os = "linux", not(loom)))] {
        mod linux;
        pub(crate) use linux::*;
    } else if #[cfg(all(target_os = "linux", loom))] {
        // The same surface with the memory calls replaced (see `loom.rs`).
        #[allow(dead_code)]
        mod linux;
        mod loom;
        pub(crate) use linux::page_size;
        pub(crate) use loom::*;
    } else {
        compile_error!(
            "purloin-stack supports Linux only (any architecture with a Rust std target); \
             macOS, the BSDs and Windows are not supported yet: see the README's platform table"
        );
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
    /// `si_code == SEGV_ACCERR`. Used on older kernels or when forced by
    /// [`Options::force_mprotect_guards`](crate::Options::force_mprotect_guards).
    Mprotect,
}
