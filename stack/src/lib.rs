//! Guard-paged stacks for green threads: arenas that cost no memory mapping per stack, pools
//! that give memory back, and overflow reports that name the green thread.
//!
//! # The idea
//!
//! Every green thread needs a stack with a guard page below it. The usual way, `mprotect` of
//! one page of the stack's mapping (corosensei, context, generator/may, brpc), splits the
//! mapping: two kernel memory mappings per stack, so at the default `vm.max_map_count` of
//! 65530 a process fails at about 32,750 live stacks. Linux 6.13 added *guard markers*
//! (`madvise(MADV_GUARD_INSTALL)`): a page-table entry that faults on access, with no
//! mapping of its own.
//!
//! This crate carves stacks out of big **arena** mappings of fixed-size slots, one arena
//! family per size class (32 KiB, 1 MiB, 8 MiB, or a custom size), and installs each slot's
//! guard with a marker the first time the slot is handed out, so a million live stacks cost a
//! few dozen mappings. Support is probed once; older kernels fall back to `mprotect` guards
//! (and run into the map-count limit, which is then reported by name).
//!
//! Stacks are **pooled**: a per-thread cache (one uncontended compare-and-swap, no system
//! call), then a bounded shared pool per class. Returning a stack never makes a system call:
//! stacks returned to a pool above its bound are left resident for a background
//! **scavenger** thread, which gives their memory back in bulk shortly after (adjacent
//! stacks in one `MADV_DONTNEED`; at most about 200 ms after a burst's last return plus the
//! time to give back what came before), keeping the top pages of a second bound's worth of
//! them. [`trim`] gives everything back at once after a burst, from the shared pools, the
//! scavenger's backlog and every thread's cache (see [`Options`]). Because slots have a fixed size, "which stack's guard is this fault
//! address in?" is arithmetic, which lets the [`overflow`] handler print
//! `green thread 42 'worker-7' has overflowed its 32 KiB stack` from a signal handler.
//!
//! # Example
//!
//! ```
//! use purloin_stack::{lease, overflow, stats, trim, StackSize};
//!
//! // Once, at start-up: report overflows by green thread; give this thread an alternate
//! // signal stack (each worker thread does the same).
//! overflow::install_handler()?;
//! let _alt = overflow::AltStack::install_current_thread()?;
//!
//! // A scheduler leases a stack for each green thread it starts...
//! let stack = lease(StackSize::Small)?;
//! stack.set_label(1, "accept-loop");
//! let (top, limit) = (stack.top(), stack.limit());
//! assert_eq!(top as usize - limit as usize, 32 * 1024);
//! // ... switches to `top` (purloin-context does that) and, when the green thread is done,
//! // drops the stack, possibly on another worker thread: back to the pool.
//! std::thread::spawn(move || drop(stack)).join().unwrap();
//!
//! assert!(stats().slots >= 1);
//! trim(); // after a burst: give the pooled stacks' memory back
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Safety model
//!
//! - A [`Stack`] owns its slot exclusively until dropped; the pool never hands one slot to
//!   two lessees (checked by loom models of the cross-thread pool). It never touches the
//!   stack memory itself: code running on a stack must stop using it before the `Stack` is
//!   dropped (the context and scheduler crates tie the two lifetimes together).
//! - Slots are never unmapped (address space stays reserved; memory is given back), so the
//!   overflow handler can read their metadata from any thread at any time with atomic loads
//!   only. It takes no lock, allocates nothing, and formats into a stack buffer.
//! - A stack may hold data left by its previous user: it is pooled memory, like a reused
//!   heap allocation, not zeroed.
//! - One guard page suffices for Rust code (stack probes touch every page of a large frame);
//!   C frames bigger than a page need `-fstack-clash-protection`.
//!
//! # Cargo features
//!
//! None. Valgrind support is a hook ([`valgrind`]), because the client request is inline
//! assembly, which purloin keeps in `purloin-context`.
//!
//! # Platforms
//!
//! Linux (any architecture with a Rust `std` target): guard markers need Linux 6.13+, older
//! kernels use `mprotect` guards. macOS uses `mprotect` guards (it has no guard markers) and
//! is type-checked only: nothing runs it here. The BSDs and Windows fail to compile with a
//! message.
//!
//! # Loom models
//!
//! The shared pool's cross-thread protocol (lease, return on another thread, `trim`, arena
//! growth, the ABA case of its lock-free lists) is checked with loom:
//!
//! ```text
//! cargo xtask loom -p purloin-stack
//! # which runs:
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p purloin-stack --lib --tests
//! ```
//!
//! Under loom the per-thread cache is compiled out (lease and return go to the shared pool;
//! the gate through which `trim` reaches other threads' caches has its own model),
//! the memory system calls are replaced by heap allocations (they are not part of the
//! protocol, and made the models system-call bound), and the process-wide pool is recreated
//! for each model execution, so dependent crates can lease stacks inside their own models.
#![warn(missing_docs)]

mod arena;
#[cfg(not(loom))]
mod cache;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod fault;
// Under loom only its models use it (the caches are left out of loom builds).
#[cfg_attr(all(loom, not(test)), allow(dead_code))]
mod gate;
mod global;
mod options;
mod os;
pub mod overflow;
mod pool;
mod registry;
mod scavenger;
mod size;
mod stack;
mod stats;
mod sync;
pub mod valgrind;

pub use global::{configure, guard_backend, lease, page_size, scavenger_thread_id, stats, trim};
pub use options::Options;
pub use os::GuardBackend;
pub use size::StackSize;
pub use stack::Stack;
pub use stats::{ClassStats, StackStats};
