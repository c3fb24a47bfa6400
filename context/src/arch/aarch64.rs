//! The AArch64 (AAPCS64) switch: one inline `asm!` block for every switch, one naked entry
//! trampoline for fresh contexts. The same design as the x86_64 backend: read its module
//! docs first; this page states what differs.
//!
//! # How a switch is predicted
//!
//! A switch leaves by an indirect `br` to the target's resume address and is re-entered by
//! another `br`; no `bl`/`blr`/`ret` crosses a stack, so the return-address predictor is never
//! consulted or desynchronised by a switch (see the x86_64 docs for why that matters with
//! depth). The fresh-context trampoline also enters the entry function with `br`, with the
//! link register pointing at a label of its own.
//!
//! # Register contract
//!
//! AAPCS64 makes `x19`–`x29`, `sp` and the low 64 bits of `v8`–`v15` (`d8`–`d15`)
//! callee-saved; the link register `x30` is not preserved by a call. The switch is inlined
//! into its caller, so it lets the compiler save what is live: `x20`–`x28` are declared as
//! discarded outputs and `clobber_abi("C")` clobbers `x0`–`x17`, `x30` and every vector
//! register (Rust cannot name only the upper halves of `v8`–`v15`, so the compiler saves the
//! live `d8`–`d15` around the block). `x19` and `x29` cannot be named in LLVM inline assembly
//! (LLVM reserves them as base and frame pointer), so the block saves and restores them
//! itself, with the resume address, in one 32-byte frame (`sp` must stay 16-byte aligned).
//! `x18` is the platform register and is never touched.
//!
//! At the `br` from the suspending context into the target:
//!
//! | register | holds |
//! |---|---|
//! | `sp` | the target's saved stack pointer `S` (its frame is popped at the landing) |
//! | `x0` | the suspending context's saved stack pointer: the new [`Transfer::context`] |
//! | `x1` | the `data` word: the new [`Transfer::data`] |
//! | `x2` | the address of the `resume_ontop` function, or 0 for a plain `resume` |
//! | `x9` | the target's resume address (scratch) |
//!
//! `x0`/`x1` are where AAPCS64 passes a 16-byte composite such as [`Transfer`], so the
//! trampoline forwards them to the entry function unchanged. As on x86_64, the `ontop`
//! function is called by ordinary Rust code after the target's `asm!` block ends, so a panic
//! in it unwinds through frames the compiler described.
//!
//! With the `fpu-env` feature the switch also saves and restores FPCR, the floating-point
//! control register (rounding mode, flush-to-zero, default NaN): AAPCS64 gives it the same
//! status as MXCSR's control bits on x86_64 (it belongs to the thread and is expected to hold
//! the default at calls), and the crate-level contract is the same. FPSR (the sticky
//! exception flags) is never saved, as on x86_64.
//!
//! # Stack layouts
//!
//! A suspended context (`S` is the value stored in its [`Context`]):
//!
//! ```text
//!  higher addresses
//! ~  frames of the suspended code  ~
//! +--------------------------------+  <- S + 32: the stack pointer before the switch
//! | FPCR (fpu-env) or unused       |  S + 24
//! +--------------------------------+
//! | resume address                 |  S + 16: a label inside the suspending `asm!` block
//! +--------------------------------+
//! | saved x29                      |  S + 8
//! +--------------------------------+
//! | saved x19                      |  <- S
//! +--------------------------------+
//!  lower addresses
//! ```
//!
//! A fresh context made by [`Context::new`](crate::Context::new) (`T` = the stack top rounded
//! down to 16 bytes) has the same shape, plus the entry function above it:
//!
//! ```text
//! +--------------------------------+  <- T
//! | unused                         |  T - 8
//! +--------------------------------+
//! | entry function                 |  T - 16
//! +--------------------------------+
//! | FPCR of the creator, or 0      |  T - 24
//! +--------------------------------+
//! | address of `trampoline`        |  T - 32
//! +--------------------------------+
//! | 0 (x29), 0 (x19)               |  T - 40, T - 48 = S
//! +--------------------------------+
//! ```
//!
//! The first switch into it jumps to the trampoline with `sp = S`. The trampoline loads FPCR
//! (fpu-env), sets `sp = T`, clears `x29` (the end of the frame-record chain), points `x30`
//! at its own label `3` and *branches* to the entry function with the [`Transfer`] in
//! `x0, x1`; the entry function's prologue saves that `x29`/`x30` pair as its frame record.
//! Only when the first switch carries an `ontop` function does it branch to [`start`]
//! instead, with `(context, data, ontop, entry)` in `x0`–`x3`.
//!
//! # CFI
//!
//! As on x86_64: `trampoline` has hand-written CFI whose one rule, `.cfi_undefined x30`,
//! marks it as the outermost frame, so DWARF unwinders (`std::backtrace`, gdb) end a
//! backtrace taken inside a context right above the entry function; frame-record walkers stop
//! at the zeroed `x29`. Its FDE names a personality routine that aborts with a message when
//! a panic escapes the entry function. The inline switch carries no CFI of its own (nothing
//! unwinds from inside it); `call_on_stack` describes its frame so an unwinder walks from the
//! called function back to the caller's stack.
//!
//! Not supported: pointer authentication of the saved return addresses and BTI landing pads
//! (the resume labels are not `bti j` targets: Rust does not enable BTI enforcement for this
//! target by default), sanitizer fiber annotations.
//!
//! [`Context`]: crate::Context
//! [`Transfer`]: crate::Transfer
//! [`Transfer::context`]: crate::Transfer::context
//! [`Transfer::data`]: crate::Transfer::data

use core::arch::{asm, naked_asm};
use core::ptr::NonNull;

use super::{escaped_panic_personality, start};
use crate::context::Entry;

/// Bytes `Context::new` writes below the (aligned) stack top.
pub(crate) const INITIAL_FRAME_SIZE: usize = 48;

/// Bytes a switch saves at a suspended context's stack pointer `S` (x19, x29, the resume
/// address, the FPCR slot; see "Stack layouts"): resuming it pops them, so a function run on
/// top of it overwrites only `S .. S + SAVED_FRAME_SIZE` and lower addresses.
pub(crate) const SAVED_FRAME_SIZE: usize = 32;

// With `fpu-env`, FPCR is saved in the fourth slot of the switch frame (`x10` is a scratch
// register the block declares clobbered) and loaded back at the landing.
cfg_if::cfg_if! {
    if #[cfg(feature = "fpu-env")] {
        macro_rules! fpu_save {
            () => { "mrs x10, fpcr\nstp x9, x10, [sp, #16]" };
        }
        macro_rules! fpu_restore {
            () => { "ldr x10, [sp, #24]\nmsr fpcr, x10" };
        }
        macro_rules! fpu_load_initial {
            () => { "ldr x10, [sp, #24]\nmsr fpcr, x10" };
        }
    } else {
        macro_rules! fpu_save {
            () => { "str x9, [sp, #16]" };
        }
        macro_rules! fpu_restore {
            () => { "" };
        }
        macro_rules! fpu_load_initial {
            () => { "" };
        }
    }
}

/// Writes the initial frame of a fresh context below `stack_top` and returns its saved stack
/// pointer.
///
/// # Safety
///
/// - `stack_top` rounded down to 16 bytes, minus [`INITIAL_FRAME_SIZE`], must be writable
///   memory that nothing else uses (the caller checked the bounds).
#[inline]
pub(crate) unsafe fn init(stack_top: *mut u8, _stack_limit: *mut u8, entry: Entry) -> NonNull<u8> {
    let top = (stack_top as usize) & !15;
    let slots = (top - INITIAL_FRAME_SIZE) as *mut usize;
    let words = [0, 0, trampoline as *const () as usize, initial_fpu_word(), entry as usize, 0];
    // SAFETY: `slots` .. `top` is the 48-byte region the caller promised is writable and
    // unused; `top` is 16-aligned so every slot is 8-aligned.
    unsafe { core::ptr::copy_nonoverlapping(words.as_ptr(), slots, words.len()) };
    // SAFETY: `top` is at least `INITIAL_FRAME_SIZE + 1` (the caller checked `stack_top`
    // against `stack_limit`), so `top - 48` is not null.
    unsafe { NonNull::new_unchecked(slots.cast::<u8>()) }
}

/// The current FPCR (the creator's floating-point mode is the one a fresh context starts
/// with).
#[cfg(feature = "fpu-env")]
fn initial_fpu_word() -> usize {
    let fpcr: u64;
    // SAFETY: reading FPCR has no side effects.
    unsafe { asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags)) };
    fpcr as usize
}

#[cfg(not(feature = "fpu-env"))]
fn initial_fpu_word() -> usize {
    0
}

/// Saves the current execution on its own stack, jumps into `target`, and returns when some
/// context jumps back here: `(its saved stack pointer, data, ontop)`.
///
/// # Safety
///
/// - `target` must be the saved stack pointer of a suspended context (written by `init` or by
///   this function) whose stack is still valid, and no other switch may use it.
/// - `ontop` is 0 or the address of a `fn(Transfer) -> Transfer`.
#[inline(always)]
pub(crate) unsafe fn switch(
    target: NonNull<u8>,
    data: usize,
    ontop: usize,
) -> (NonNull<u8>, usize, usize) {
    let from: usize;
    let data_out: usize;
    let ontop_out: usize;
    // SAFETY: the register contract in the module docs: the block saves x19/x29 (the only
    // callee-saved registers the compiler cannot spill for us) and a resume address in a
    // 32-byte frame below the current stack pointer (keeping it 16-byte aligned), publishes
    // the frame's address in x0, and jumps to the target's resume address with sp on the
    // target's stack (valid by the caller's obligation). When a switch jumps back to label 2,
    // sp is this frame again, so popping it restores sp to its value at the start of the
    // block. Every other register is an output or clobbered, so the compiler keeps nothing
    // live in them.
    unsafe {
        asm!(
            "adr x9, 2f",
            "stp x19, x29, [sp, #-32]!",
            fpu_save!(),
            "mov x0, sp",
            "ldr x9, [x3, #16]",
            "mov sp, x3",
            "br x9",
            "2:",
            fpu_restore!(),
            "ldp x19, x29, [sp], #32",
            in("x3") target.as_ptr(),
            inlateout("x1") data => data_out,
            inlateout("x2") ontop => ontop_out,
            lateout("x0") from,
            lateout("x20") _,
            lateout("x21") _,
            lateout("x22") _,
            lateout("x23") _,
            lateout("x24") _,
            lateout("x25") _,
            lateout("x26") _,
            lateout("x27") _,
            lateout("x28") _,
            clobber_abi("C"),
        );
    }
    // SAFETY: x0 at label 2 is the suspending context's stack pointer (`mov x0, sp` in its
    // switch; the trampoline never jumps here), which is never null.
    (unsafe { NonNull::new_unchecked(from as *mut u8) }, data_out, ontop_out)
}

/// The first code a fresh context runs, reached by the first switch into it (see the module
/// docs for the register and stack state). It never returns; its CFI ends every backtrace,
/// and its personality routine aborts a panic that escaped the entry function.
#[unsafe(naked)]
unsafe extern "C" fn trampoline() {
    naked_asm!(
        ".cfi_startproc",
        ".cfi_personality 0x9b, .Lpurloin_context_personality_ref",
        // This frame has no caller: unwinders stop here (the outermost frame).
        ".cfi_undefined x30",
        fpu_load_initial!(),
        // The entry function, then sp = T (the frame's 48 bytes are popped).
        "ldr x3, [sp, #32]",
        "add sp, sp, #48",
        // End of the frame-record chain for frame-pointer walkers (perf, eBPF profilers).
        "mov x29, xzr",
        // The fake return address of the entry (or `start`) frame: label 3, in this function.
        "adr x30, 3f",
        "cbnz x2, 2f",
        // No ontop function: entry(Transfer { context: x0, data: x1 }), entered by a branch,
        // as if called from label 3.
        "br x3",
        "2:",
        // start(context = x0, data = x1, ontop = x2, entry = x3)
        "b {start}",
        "3:",
        // Never reached: the entry function and `start` return `!`. Label 3 - 4 is the `b`
        // above, so unwinders find this function's CFI for the fake return address.
        "brk #0x1",
        ".cfi_endproc",
        // The personality pointer the `.cfi_personality` directive refers to (indirect).
        ".pushsection .data.rel.ro.purloin_context_personality,\"aw\",@progbits",
        ".balign 8",
        ".Lpurloin_context_personality_ref:",
        ".quad {personality}",
        ".popsection",
        start = sym start,
        personality = sym escaped_panic_personality,
    )
}

/// Calls `f(data)` with the stack pointer at `sp` (16-byte aligned), on the calling thread,
/// and returns with the caller's stack pointer back (see `Context::call_below`). The frame
/// is a frame record (`x29`, `x30`) with CFI, so unwinders and debuggers walk from `f` up
/// through this frame into the caller's frames on the other stack.
///
/// # Safety
///
/// `sp` is 16-byte aligned, and the memory below it is a stack nobody else uses during the
/// call, with room for `f`; `f` may not unwind (an `extern "C"` function aborts instead).
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn call_on_stack(data: usize, f: extern "C" fn(usize), sp: usize) {
    naked_asm!(
        ".cfi_startproc",
        "stp x29, x30, [sp, #-16]!",
        ".cfi_def_cfa_offset 16",
        ".cfi_offset x29, -16",
        ".cfi_offset x30, -8",
        "mov x29, sp",
        // From here the caller's frame is found through x29, whatever sp holds.
        ".cfi_def_cfa x29, 16",
        "mov sp, x2",
        // x0 is already `data`, f's argument.
        "blr x1",
        "mov sp, x29",
        ".cfi_def_cfa sp, 16",
        "ldp x29, x30, [sp], #16",
        ".cfi_def_cfa_offset 0",
        ".cfi_restore x29",
        ".cfi_restore x30",
        "ret",
        ".cfi_endproc",
    )
}

/// Issues a valgrind client request (`valgrind.h`'s `VALGRIND_DO_CLIENT_REQUEST_EXPR` for
/// arm64): returns `default` when the program does not run under valgrind.
///
/// The "special instruction preamble" rotates x12 by 3 + 13 + 51 + 61 = 128 bits (a no-op on
/// the real CPU, a marker for valgrind's JIT), then `orr x10, x10, x10` (also a no-op) asks
/// valgrind to serve the request whose arguments x4 points to; the answer arrives in x3.
pub(crate) fn valgrind_request(default: usize, args: &[usize; 6]) -> usize {
    let result: usize;
    // SAFETY: outside valgrind the sequence changes no register (x12 is rotated by a full
    // 128 bits, x10 is or-ed with itself); x3 keeps `default`. Under valgrind the tool reads
    // the six words at x4 (a valid array we borrow) and writes the result to x3.
    unsafe {
        asm!(
            "ror x12, x12, #3",
            "ror x12, x12, #13",
            "ror x12, x12, #51",
            "ror x12, x12, #61",
            "orr x10, x10, x10",
            in("x4") args.as_ptr(),
            inlateout("x3") default => result,
            options(nostack, readonly, preserves_flags),
        );
    }
    result
}
