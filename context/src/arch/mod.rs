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
