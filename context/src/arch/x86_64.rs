//! The x86_64 System V switch: one inline `asm!` block for every switch, one naked entry
//! trampoline for fresh contexts.
//!
//! # How a switch is predicted
//!
//! A switch leaves the current context by an indirect `jmp` to the target's resume address and
//! is later re-entered by another indirect `jmp` to its own resume address. No `call` or `ret`
//! crosses a stack boundary, so the CPU's return-stack buffer (RSB) is never consulted for a
//! switch and never desynchronised by one. Two consequences:
//!
//! - Depth costs no mispredictions by itself. A green thread that parks `N` frames below the
//!   point where it was resumed pushes `N` return addresses onto the RSB on the way down; if
//!   the code that runs until it is resumed again makes balanced calls and returns (a
//!   scheduler loop resuming it from one site), its `N` returns still find their own addresses
//!   on the RSB. A `call`/`ret`-paired design (corosensei, boost fcontext) pops the wrong
//!   entries there: one mispredicted return per frame. (When other green threads run in
//!   between, they overwrite those entries in any design.)
//! - Each switch site has one indirect branch whose target is predicted by the branch target
//!   buffer. A green thread's park site always jumps to the scheduler's single resume site (a
//!   constant target), and the scheduler's resume site jumps to wherever the green thread
//!   parked, exactly as an indirect `call` would.
//!
//! # Register contract
//!
//! The switch is an inline `asm!` block (inlined into every caller of
//! [`Context::resume`](crate::Context::resume)), so the compiler spills only the registers that
//! are live across it: the block declares every caller-saved register clobbered with
//! `clobber_abi("sysv64")` and `r12`–`r15` as discarded outputs. `rbx` and `rbp` cannot be
//! named in LLVM inline assembly (LLVM reserves them), so the block pushes and pops them itself.
//!
//! At the jump from the suspending context into the target:
//!
//! | register | holds |
//! |---|---|
//! | `rsp` | the target's saved stack pointer plus 8 (its resume address has been popped) |
//! | `rdi` | the suspending context's saved stack pointer: the new [`Transfer::context`] |
//! | `rsi` | the `data` word: the new [`Transfer::data`] |
//! | `rcx` | the address of the `resume_ontop` function, or 0 for a plain `resume` |
//! | `rax` | the target's resume address (scratch) |
//!
//! Everything else is garbage at that point; the target restores `rbx` and `rbp` (and, with the
//! `fpu-env` feature, MXCSR and the x87 control word) from its own stack. `rdi`/`rsi` are the
//! registers in which the System V ABI passes a two-word `#[repr(C)]` struct, so the
//! trampoline forwards them to the entry function as its [`Transfer`] argument unchanged.
//!
//! The `ontop` function is not called by the assembly: the target calls it from ordinary Rust
//! code right after its own `asm!` block ends (see `Context::resume_ontop`). A panic in it
//! therefore unwinds through frames the compiler laid out and described itself, out of the
//! target's `resume` call, up to whatever `catch_unwind` the target's code has.
//!
//! `rsp` is 16-byte aligned at the start of the block (Rust guarantees call alignment at every
//! `asm!` without `nostack`); DF is clear by the ABI and nothing here sets it.
//!
//! # Stack layouts
//!
//! A suspended context (`S` is the value stored in its [`Context`]):
//!
//! ```text
//!  higher addresses
//! |                                |
//! ~  frames of the suspended code  ~
//! |                                |
//! +--------------------------------+
//! | saved RBP                      |  S + 16  (S + 24 with fpu-env)
//! +--------------------------------+
//! | saved RBX                      |  S + 8   (S + 16 with fpu-env)
//! +--------------------------------+
//! | MXCSR (u32), x87 CW (u16)      |  S + 8, only with fpu-env
//! +--------------------------------+
//! | resume address                 |  <- S: a label inside the suspending `asm!` block
//! +--------------------------------+
//!  lower addresses
//! ```
//!
//! A fresh context made by [`Context::new`](crate::Context::new) (`T` = the stack top rounded
//! down to 16 bytes):
//!
//! ```text
//! +--------------------------------+  <- T
//! | entry function                 |  T - 8
//! +--------------------------------+
//! | MXCSR, x87 CW (fpu-env) or 0   |  T - 16: the creator's values, captured by `new`
//! +--------------------------------+
//! | address of `trampoline`        |  T - 24 = S
//! +--------------------------------+
//! ```
//!
//! The first switch into it pops the trampoline address and jumps there with
//! `rsp = T - 16` (16-byte aligned). The trampoline loads the FP environment (fpu-env), clears
//! `rbp` (the end of the frame-pointer chain), pushes the address of its own label `3` as a
//! return address and *jumps* to the entry function with the [`Transfer`] in `rdi, rsi`. A
//! `call` would push an entry onto the return-stack buffer that is never popped (the entry
//! function never returns) and cost a mispredicted return on the resumer's side. Only when
//! the first switch carries an `ontop` function does it jump to [`start`] instead, with
//! `(context, data, ontop, entry)` in `rdi, rsi, rdx, rcx`. The fake return address is the
//! last word the context ever adds below `T - 16`:
//!
//! ```text
//! +--------------------------------+  <- T
//! | entry function, FP word        |
//! +--------------------------------+  <- T - 16
//! | label 3 of `trampoline`        |  the CFI of `trampoline` says: no caller (end of stack)
//! +--------------------------------+
//! | frames of the entry function   |
//! ~ (below `start`, after an ontop) ~
//! ```
//!
//! # CFI
//!
//! `trampoline` is a naked function with hand-written `.cfi_startproc` / `.cfi_endproc` and
//! one rule, `.cfi_undefined rip`: "this frame has no return address". DWARF unwinders
//! (libgcc's `_Unwind_Backtrace`, which `std::backtrace` uses; gdb; perf with
//! `--call-graph dwarf`) take an undefined return-address column as the outermost frame, so a
//! backtrace taken inside a context ends cleanly at `trampoline`, right above the entry
//! function, instead of wandering into whatever the stack memory above holds. Frame-pointer
//! walkers stop at the zeroed `rbp`. The context is deliberately *not* linked to the frame
//! that resumed it: with a symmetric API the resumer changes on every switch (and may be
//! another green thread), so "the parent" is not a stable notion.
//!
//! Because the unwinder also stops there, a panic that escapes the entry function finds no
//! handler. The trampoline's FDE therefore names a personality routine
//! (`.cfi_personality`, pointer-indirect and PC-relative so `.eh_frame` needs no dynamic
//! relocation): when a panic's search phase reaches the trampoline frame, the unwinder calls
//! [`escaped_panic_personality`], which writes "a panic escaped the entry function of a
//! context" to stderr and aborts. (Backtraces and debuggers do not call personality routines.)
//! A panic in an `ontop` function on a fresh context aborts in [`start`], an `extern "C"`
//! function ("panic in a function that cannot unwind"). Unwinding never crosses the assembly.
//!
//! The inline switch itself carries no CFI of its own: for the few instructions between its
//! first `push` and its landing, the enclosing function's CFI is off by the pushed words (as
//! in corosensei). Nothing unwinds from there (no call happens inside the block); only a
//! sampling profiler that interrupts exactly those instructions may record one broken
//! stack for that sample.
//!
//! Not supported: CET shadow stacks and IBT (no `endbr64` at resume labels; Rust does not
//! enable either on stable), sanitizer fiber annotations.
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
pub(crate) const INITIAL_FRAME_SIZE: usize = 24;

/// Bytes a switch saves at a suspended context's stack pointer `S` (the resume address, the
/// FP word with `fpu-env`, RBX, RBP; see "Stack layouts"): resuming it pops them, so a
/// function run on top of it overwrites only `S .. S + SAVED_FRAME_SIZE` and lower addresses.
#[cfg(not(feature = "fpu-env"))]
pub(crate) const SAVED_FRAME_SIZE: usize = 24;
#[cfg(feature = "fpu-env")]
pub(crate) const SAVED_FRAME_SIZE: usize = 32;

// With `fpu-env`, MXCSR (all 32 bits, as boost.context does) and the x87 control word are
// stored in one 8-byte slot between the saved RBX and the resume address.
cfg_if::cfg_if! {
    if #[cfg(feature = "fpu-env")] {
        macro_rules! fpu_save {
            () => { "sub rsp, 8\nstmxcsr [rsp]\nfnstcw [rsp + 4]" };
        }
        // Unconditional loads: comparing first (skipping `ldmxcsr`/`fldcw` when the values
        // already match) needs a `stmxcsr`/`fnstcw` per landing and measured slower here.
        macro_rules! fpu_restore {
            () => { "ldmxcsr [rsp]\nfldcw [rsp + 4]\nadd rsp, 8" };
        }
        macro_rules! fpu_load_initial {
            () => { "ldmxcsr [rsp]\nfldcw [rsp + 4]" };
        }
    } else {
        macro_rules! fpu_save {
            () => { "" };
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
    let fpu_word = initial_fpu_word();
    let slots = (top - INITIAL_FRAME_SIZE) as *mut usize;
    // SAFETY: `slots` .. `top` is the 24-byte region the caller promised is writable and
    // unused; `top` is 16-aligned so every slot is 8-aligned.
    unsafe {
        slots.write(trampoline as *const () as usize);
        slots.add(1).write(fpu_word);
        slots.add(2).write(entry as usize);
    }
    // SAFETY: `top` is at least `INITIAL_FRAME_SIZE + 1` (the caller checked `stack_top`
    // against `stack_limit`), so `top - 24` is not null.
    unsafe { NonNull::new_unchecked(slots.cast::<u8>()) }
}

/// The current MXCSR and x87 control word packed as the fpu-env slot expects them (the
/// creator's environment is the one a fresh context starts with).
#[cfg(feature = "fpu-env")]
fn initial_fpu_word() -> usize {
    let mut word: u64 = 0;
    // SAFETY: `stmxcsr`/`fnstcw` only store 4 and 2 bytes into `word`, a local we own; they
    // change no register or flag.
    unsafe {
        asm!(
            "stmxcsr [{p}]",
            "fnstcw [{p} + 4]",
            p = in(reg) &raw mut word,
            options(nostack, preserves_flags),
        );
    }
    word as usize
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
    // SAFETY: the register contract in the module docs: the block saves RBX/RBP (the only
    // callee-saved registers the compiler cannot spill for us) and a resume address on the
    // current stack, publishes the resulting stack pointer in RDI, and jumps to the target's
    // resume address with RSP on the target's stack (valid by the caller's obligation). When a
    // switch jumps back to label 2, RSP is this stack again, exactly as the block left it, so
    // popping RBX/RBP restores RSP to its value at the start of the block. Every other
    // register is an output or clobbered, so the compiler keeps nothing live in them.
    unsafe {
        asm!(
            "push rbp",
            "push rbx",
            fpu_save!(),
            "lea rax, [rip + 2f]",
            "push rax",
            "mov rdi, rsp",
            "mov rsp, rdx",
            "pop rax",
            "jmp rax",
            "2:",
            fpu_restore!(),
            "pop rbx",
            "pop rbp",
            in("rdx") target.as_ptr(),
            inlateout("rsi") data => data_out,
            inlateout("rcx") ontop => ontop_out,
            lateout("rdi") from,
            lateout("r12") _,
            lateout("r13") _,
            lateout("r14") _,
            lateout("r15") _,
            clobber_abi("sysv64"),
        );
    }
    // SAFETY: RDI at label 2 is the suspending context's stack pointer (`mov rdi, rsp` in its
    // switch, or the trampoline never jumps here), which is never null.
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
        ".cfi_undefined rip",
        fpu_load_initial!(),
        // End of the frame-pointer chain for frame-pointer walkers (perf, eBPF profilers).
        "xor ebp, ebp",
        // The fake return address of the entry (or `start`) frame: label 3, in this function.
        "lea rax, [rip + 3f]",
        "test rcx, rcx",
        "jnz 2f",
        // No ontop function: entry(Transfer { context: rdi, data: rsi }), entered by a jump
        // with RSP = T - 24 after the push, as if called. The entry is at T - 8.
        "push rax",
        "jmp qword ptr [rsp + 16]",
        "2:",
        // start(context = rdi, data = rsi, ontop = rdx, entry = rcx)
        "mov rdx, rcx",
        "mov rcx, [rsp + 8]",
        "push rax",
        "jmp {start}",
        "3:",
        // Never reached: the entry function and `start` return `!`. Label 3 - 1 lies inside the
        // `jmp` above, so unwinders find this function's CFI for the fake return address.
        "ud2",
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
/// keeps the frame-pointer chain and carries CFI, so unwinders and debuggers walk from `f`
/// up through this frame into the caller's frames on the other stack.
///
/// # Safety
///
/// `sp` is 16-byte aligned, and the memory below it is a stack nobody else uses during the
/// call, with room for `f`; `f` may not unwind (an `extern "C"` function aborts instead).
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn call_on_stack(data: usize, f: extern "C" fn(usize), sp: usize) {
    naked_asm!(
        ".cfi_startproc",
        "push rbp",
        ".cfi_adjust_cfa_offset 8",
        ".cfi_rel_offset rbp, 0",
        "mov rbp, rsp",
        // From here the caller's frame is found through rbp, whatever rsp holds.
        ".cfi_def_cfa_register rbp",
        "mov rsp, rdx",
        // rsp is 16-byte aligned at the call (the caller's obligation), as the ABI requires.
        "call rsi",
        "mov rsp, rbp",
        ".cfi_def_cfa_register rsp",
        "pop rbp",
        ".cfi_adjust_cfa_offset -8",
        ".cfi_restore rbp",
        "ret",
        ".cfi_endproc",
    )
}

/// Issues a valgrind client request (`valgrind.h`'s `VALGRIND_DO_CLIENT_REQUEST_EXPR` for
/// amd64): returns `default` when the program does not run under valgrind.
///
/// The "special instruction preamble" rotates RDI by 3 + 13 + 61 + 51 = 128 bits (a no-op on
/// the real CPU, a marker for valgrind's JIT), then `xchg rbx, rbx` (also a no-op) asks
/// valgrind to serve the request whose arguments RAX points to; the answer arrives in RDX.
pub(crate) fn valgrind_request(default: usize, args: &[usize; 6]) -> usize {
    let result: usize;
    // SAFETY: outside valgrind the sequence changes no register (RDI is rotated by a full
    // 128 bits, RBX is exchanged with itself) except the flags, which are not preserved here;
    // RDX gets `default` back. Under valgrind the tool reads the six words at RAX (a valid
    // array we borrow) and writes the result to RDX.
    unsafe {
        asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inlateout("rdx") default => result,
            options(nostack, readonly),
        );
    }
    result
}
