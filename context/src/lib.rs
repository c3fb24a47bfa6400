//! A context switch for stackful coroutines and green threads: boost.context's fcontext model
//! (`make`/`jump`/`ontop` with a [`Transfer`]) in Rust, written with naked functions and
//! inline assembly, with hand-written CFI and a loom backend.
//!
//! # The model
//!
//! A [`Context`] is a suspended execution: the saved stack pointer of a stack whose
//! callee-saved registers and resume address were pushed onto it. There are only three
//! operations:
//!
//! - [`Context::new`] prepares a fresh context on a stack you provide (two pointers; the crate
//!   allocates nothing and does not depend on any stack crate), to run an [`Entry`] function.
//! - [`Context::resume`] suspends whatever runs now (a thread's own stack, or a context) and
//!   continues the target, handing it a [`Transfer`]: the just-suspended context and one word
//!   of data. The call returns when somebody resumes *us*, with their `Transfer`.
//! - [`Context::resume_ontop`] does the same but first runs a function on the target's stack,
//!   after the switch: the place to publish the suspended context to other threads (a
//!   scheduler's "park"), or to inject a panic that unwinds the target (forced unwind).
//!
//! Switching is symmetric (any context can resume any other), so both shapes a scheduler wants
//! are available: a worker's scheduling loop switching to a green thread and back (Go's
//! `gogo`/`mcall`), and a green thread handing over directly to the next one.
//!
//! # Example: a scheduler loop, a parked green thread, and a forced unwind
//!
//! ```
//! use purloin_context::{Context, Transfer};
//! use std::cell::Cell;
//! use std::panic;
//!
//! /// The "scheduler": where parked green threads are published (here a single slot, whose
//! /// address travels in `data`).
//! type Slot = Cell<Option<Context>>;
//!
//! struct ForcedUnwind;
//!
//! fn publish(t: Transfer) -> Transfer {
//!     // Runs on the scheduler's stack after the green thread is fully suspended.
//!     // SAFETY: `data` is the address of the slot, alive for the whole example.
//!     let slot = unsafe { &*(t.data as *const Slot) };
//!     slot.set(Some(t.context));
//!     Transfer { context: Context::placeholder(), data: 0 }
//! }
//!
//! fn unwind(t: Transfer) -> Transfer {
//!     // Runs on the green thread's stack, inside its pending `resume_ontop` call.
//!     // SAFETY: as in `publish`.
//!     let slot = unsafe { &*(t.data as *const Slot) };
//!     slot.set(Some(t.context)); // where to go when the unwinding is done
//!     panic::resume_unwind(Box::new(ForcedUnwind))
//! }
//!
//! extern "C-unwind" fn green_thread(t: Transfer) -> ! {
//!     let (scheduler, slot_addr) = (t.context, t.data);
//!     let result = panic::catch_unwind(panic::AssertUnwindSafe(|| {
//!         // Park: the scheduler publishes us, then resumes us later with `unwind`.
//!         // SAFETY: `scheduler` is suspended in `resume`; its side of the switch handles
//!         // `publish`, and our `catch_unwind` catches what `unwind` throws.
//!         unsafe { scheduler.resume_ontop(slot_addr, publish) };
//!         unreachable!("resumed only by a forced unwind");
//!     }));
//!     let forced = matches!(result, Err(p) if p.is::<ForcedUnwind>());
//!     // SAFETY: `unwind` left the context to return to in the slot.
//!     let slot = unsafe { &*(slot_addr as *const Slot) };
//!     let back = slot.take().unwrap();
//!     // SAFETY: `back` is suspended in `resume_ontop`; we are never resumed again.
//!     unsafe { back.resume(usize::from(forced)) };
//!     unreachable!();
//! }
//!
//! let mut stack = vec![0u8; 256 * 1024]; // real code: a guard-paged stack
//! let r = stack.as_mut_ptr_range();
//! let slot: Slot = Cell::new(None);
//! let addr = &slot as *const Slot as usize;
//! // SAFETY: the stack outlives the context.
//! let g = unsafe { Context::new(r.end, r.start, green_thread) };
//! // SAFETY: `g` is fresh.
//! unsafe { g.resume(addr) };
//! let parked = slot.take().expect("published by `publish`");
//! // SAFETY: `parked` is suspended in `resume_ontop`, and catches panics.
//! let t = unsafe { parked.resume_ontop(addr, unwind) };
//! assert_eq!(t.data, 1, "the green thread saw its forced unwind");
//! ```
//!
//! # Safety model
//!
//! Everything that switches is `unsafe`: the compiler cannot see that a call to `resume`
//! continues some other stack, nor check what the resumed code assumes. The obligations are
//! listed on each function; in short:
//!
//! - **Stacks** are memory you own, valid for as long as any context on them may be resumed.
//!   Put a guard page below each one (an overflow is then a fault); this crate never allocates.
//! - **Each suspension is resumed at most once.** A [`Context`] is consumed by resuming it,
//!   and it is not `Clone`; do not build two contexts on one stack.
//! - **Unwinding never crosses the assembly.** A panic unwinds the stack it started on, up to
//!   that context's entry function, which must catch it ([`Entry`]); one that escapes aborts
//!   the process. A panic in a [`resume_ontop`](Context::resume_ontop) function unwinds the
//!   *target's* stack from its pending `resume` call, which is how a forced unwind works.
//! - **Migration.** A context suspended on one OS thread may be resumed on another ([`Context`]
//!   is `Send`); the code in it must then not hold thread-local references across the switch
//!   (and see llvm/llvm-project#98479 about cached thread-local addresses).
//! - **Dropping** a `Context` leaks the suspended execution: nothing on its stack is dropped.
//!
//! # How fast, and why
//!
//! A switch is an inline `asm!` block inlined into the caller: it pushes `rbx`, `rbp` and a
//! resume address (on AArch64: stores `x19`, `x29` and a resume address), swaps the stack
//! pointer and jumps to the target's resume address; the
//! compiler spills only the other registers that are live at that point. No `call`/`ret`
//! pair crosses stacks, so the CPU's return-stack buffer stays aligned with each context's own
//! calls, even when a green thread parks several frames below where it was resumed. The
//! `arch` module docs have the register contract and stack diagrams; `benches/switch.rs`
//! compares round trips at depth 0, 3 and 8 and a symmetric ring with corosensei, context
//! (boost fcontext) and generator.
//!
//! # Floating-point environment
//!
//! The System V ABI makes the MXCSR control bits and the x87 control word callee-saved. By
//! default a switch does **not** save them: they belong to the OS thread, and a context that
//! changes them and switches away leaks its mode to whatever runs next on that thread. That is
//! sound for Rust code: Rust assumes the default floating-point environment everywhere (LLVM
//! optimises on that assumption), so Rust code cannot change these registers except through
//! `asm!` or deprecated intrinsics, and such code must restore them before it calls anything,
//! a switch included. The contract: **code that changes MXCSR or the x87 control word must
//! restore them before switching.** Foreign code that keeps a non-default mode across a
//! callback that may switch (a C library calling `fesetround` around a callback) needs the
//! `fpu-env` feature. The same holds on AArch64 for FPCR (rounding mode, flush-to-zero,
//! default NaN), which AAPCS64 also treats as the thread's.
//!
//! # Cargo features
//!
//! - `fpu-env` (off by default): save and restore MXCSR and the x87 control word (on
//!   AArch64: FPCR) on every switch (boost.context does this always on x86_64), so each
//!   context keeps its own floating-point mode; a fresh context starts with the mode of the thread that called [`Context::new`].
//!   It costs `stmxcsr`/`fnstcw`/`ldmxcsr`/`fldcw` per switch: about 5–10 ns per round trip
//!   on the development machine, mostly `ldmxcsr` (see BENCHMARKS.md).
//!
//! # Platforms
//!
//! x86_64 with the System V ABI and AArch64 with AAPCS64, on ELF Unixes: x86_64 Linux is
//! tested natively, aarch64 Linux under qemu-user. Other targets (Windows, macOS) fail to
//! build with a message saying so. Under `--cfg loom` the crate builds on any target.
//!
//! # The loom backend and its models
//!
//! With `RUSTFLAGS="--cfg loom"` the same API is implemented with loom threads handing control
//! to each other (one runs at a time), so a scheduler's loom models run its real park/yield
//! code. Each [`Context::new`] spawns a loom thread (loom allows few threads per model). Two
//! differences from the assembly backend: the stack arguments of `new` are ignored (null is
//! fine), and dropping a `Context` that was never resumed ends its loom thread by unwinding it
//! with a private payload (so loom does not report a deadlock when the model ends):
//! destructors on that stack run, where the assembly backend would leak them, and code that
//! catches panics on that stack sees the payload; it must re-raise it
//! ([`is_abandon_payload`]; switching again also re-raises it). Run the models with
//!
//! ```text
//! cargo xtask loom -p purloin-context
//! ```
//!
//! (models: `tests/loom_context.rs`; each documents the protocol mutations that make it fail).
//!
//! # Debugging
//!
//! A backtrace taken inside a context (gdb `bt`, [`std::backtrace::Backtrace`]) ends at the
//! entry trampoline, right above the entry function: its CFI marks it as the outermost frame.
//! Under valgrind, register each stack with [`valgrind::StackRegistration`].
#![cfg_attr(not(loom), no_std)]

// The loom backend needs std; the docs link to it.
#[cfg(any(loom, doc))]
extern crate std;

#[cfg(not(loom))]
mod arch;
mod context;
#[cfg(loom)]
mod loom;
mod sync;
pub mod valgrind;

pub use crate::context::{Context, Entry, MIN_STACK_SIZE, Transfer, is_abandon_payload};
