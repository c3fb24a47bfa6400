//! The machine-specific switch, selected by target. Every backend exposes the same functions:
//! `init(stack_top, stack_limit, entry) -> NonNull<u8>`,
//! `switch(target, data, ontop) -> (from, data, ontop)` and `call_on_stack(data, f, sp)`
//! (the loom backend has no stacks, and no `call_on_stack`).
//!
//! Implemented: x86_64 with the System V ABI and AArch64 with AAPCS64, both on ELF platforms
//! (tested on Linux; AArch64 under qemu-user). Other targets fail to compile with a message
//! naming the target, rather than ship assembly that no test here executes. Under
//! `--cfg loom` the crate uses `crate::loom` instead and builds everywhere.

cfg_if::cfg_if! {
    if #[cfg(all(target_arch = "x86_64", unix, not(target_vendor = "apple")))] {
        mod x86_64;
        pub(crate) use self::x86_64::{SAVED_FRAME_SIZE, call_on_stack, init, switch, valgrind_request};
    } else if #[cfg(all(target_arch = "aarch64", unix, not(target_vendor = "apple")))] {
        mod aarch64;
        pub(crate) use self::aarch64::{SAVED_FRAME_SIZE, call_on_stack, init, switch, valgrind_request};
    } else if #[cfg(all(target_arch = "aarch64", target_vendor = "apple"))] {
        compile_error!(
            "purloin-context: aarch64 macOS/iOS is not supported (Apple's arm64 ABI reserves \
             x18 and differs in Mach-O symbol, section and unwind conventions, untested \
             here). Supported: x86_64 System V and AArch64 AAPCS64 on Linux and other ELF \
             Unixes."
        );
    } else if #[cfg(all(target_arch = "x86_64", windows))] {
        compile_error!(
            "purloin-context: x86_64 Windows is not supported (the Microsoft x64 ABI has \
             different callee-saved registers, SEH unwinding and TEB stack bounds). \
             Supported: x86_64 System V and AArch64 AAPCS64 on Linux and other ELF Unixes."
        );
    } else if #[cfg(all(target_arch = "x86_64", target_vendor = "apple"))] {
        compile_error!(
            "purloin-context: x86_64 macOS is not supported (Mach-O symbol and unwind \
             conventions are untested here). Supported: x86_64 System V and AArch64 AAPCS64 \
             on Linux and other ELF Unixes."
        );
    } else {
        compile_error!(
            "purloin-context: this target architecture is not supported. Supported: x86_64 \
             System V and AArch64 AAPCS64 on Linux and other ELF Unixes."
        );
    }
}

// The Rust half of every backend's trampoline (the same on every architecture).

use crate::context::{Context, Entry, Transfer};

/// The personality routine of `trampoline`'s frame: the unwinder calls it when a panic's
/// search reaches the trampoline, i.e. when a panic escaped an entry function. Nothing above
/// can catch it: report and abort.
pub(super) unsafe extern "C" fn escaped_panic_personality(
    _version: i32,
    _actions: u32,
    _class: u64,
    _exception: *mut u8,
    _context: *mut u8,
) -> u32 {
    unsafe extern "C" {
        fn write(fd: i32, buf: *const u8, len: usize) -> isize;
        fn abort() -> !;
    }
    const MSG: &str = "purloin-context: a panic escaped the entry function of a context; \
                       entry functions must catch every panic (nothing above them can); aborting\n";
    // SAFETY: `write` to stderr of a static buffer and `abort` are async-signal-safe libc
    // calls with no preconditions.
    unsafe {
        write(2, MSG.as_ptr(), MSG.len());
        abort()
    }
}

/// Runs the `ontop` function of the first switch, then the entry function. It is `extern "C"`,
/// so a panic that escapes the `ontop` function aborts the process here instead of unwinding
/// into the trampoline, which has no caller to unwind to.
///
/// # Safety
///
/// Called only by a backend's `trampoline`, with the registers of the switch contract:
/// `ontop` is 0 or a `fn(Transfer) -> Transfer`.
pub(super) unsafe extern "C" fn start(
    context: Context,
    data: usize,
    ontop: usize,
    entry: Entry,
) -> ! {
    // SAFETY: `ontop` comes straight from the switch contract (the caller's obligation).
    let transfer = unsafe { crate::context::run_ontop(Transfer { context, data }, ontop) };
    entry(transfer)
}
