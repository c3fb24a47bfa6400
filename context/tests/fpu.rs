//! The floating-point environment across switches, as documented in the crate docs:
//!
//! - default build: the floating-point control registers (MXCSR and the x87 control word on
//!   x86_64, FPCR on AArch64) belong to the OS thread, not to a
//!   context; a context that changes them and switches away leaks the change to the resumed
//!   code (Rust code cannot change them without `asm!`, and must restore them before any
//!   switch);
//! - `fpu-env` feature: each context keeps its own, a fresh context starts with the values of
//!   the thread that called `Context::new`.
//!
//! The tests only read and write the control registers with `asm!` and do no floating-point
//! arithmetic while a non-default mode is active.
#![cfg(not(loom))]

mod common;

use common::TestStack;
use purloin_context::{Context, Transfer};

/// The floating-point control state a test compares: MXCSR (without the sticky exception
/// flags) and the x87 control word on x86_64; FPCR (and 0) on AArch64.
type Env = (u32, u16);

#[cfg(target_arch = "x86_64")]
mod arch {
    use super::Env;
    use std::arch::asm;

    const MXCSR_DEFAULT: u32 = 0x1F80;
    /// Rounding control = toward zero (bits 13-14), all exceptions masked.
    const MXCSR_ROUND_TO_ZERO: u32 = MXCSR_DEFAULT | 0x6000;
    const X87_CW_DEFAULT: u16 = 0x037F;
    /// Precision control = 24 bits (bits 8-9 = 00), all exceptions masked.
    const X87_CW_SINGLE: u16 = 0x007F;

    pub fn default_env() -> Env {
        env(MXCSR_DEFAULT, X87_CW_DEFAULT)
    }

    pub fn changed_env() -> Env {
        env(MXCSR_ROUND_TO_ZERO, X87_CW_SINGLE)
    }

    pub fn read_env() -> Env {
        let mut mxcsr = 0u32;
        let mut cw = 0u16;
        // SAFETY: stores into our two locals only.
        unsafe {
            asm!(
                "stmxcsr [{m}]",
                "fnstcw [{c}]",
                m = in(reg) &raw mut mxcsr,
                c = in(reg) &raw mut cw,
                options(nostack, preserves_flags),
            );
        }
        env(mxcsr & !0x3F, cw) // ignore the sticky exception flags
    }

    /// An environment as the tests compare it. Valgrind does not emulate x87 precision
    /// control (`fnstcw` always reads 0x037F under it), so there the x87 half is left out of
    /// comparisons; MXCSR is emulated and always compared.
    fn env(mxcsr: u32, cw: u16) -> Env {
        if purloin_context::valgrind::running_on_valgrind() { (mxcsr, 0) } else { (mxcsr, cw) }
    }

    fn write(mxcsr: u32, cw: u16) {
        // SAFETY: loads valid control values (all exceptions masked); the callers do no
        // floating-point arithmetic until they restore the defaults.
        unsafe {
            asm!(
                "ldmxcsr [{m}]",
                "fldcw [{c}]",
                m = in(reg) &raw const mxcsr,
                c = in(reg) &raw const cw,
                options(nostack, preserves_flags),
            );
        }
    }

    pub fn write_default() {
        write(MXCSR_DEFAULT, X87_CW_DEFAULT);
    }

    pub fn write_changed() {
        write(MXCSR_ROUND_TO_ZERO, X87_CW_SINGLE);
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    use super::Env;
    use std::arch::asm;

    /// FPCR: round to nearest, no flush-to-zero, no default NaN, traps off.
    const FPCR_DEFAULT: u64 = 0;
    /// RMode (bits 22-23) = toward zero, FZ (bit 24) = flush denormals to zero.
    const FPCR_CHANGED: u64 = 0b11 << 22 | 1 << 24;

    pub fn default_env() -> Env {
        (FPCR_DEFAULT as u32, 0)
    }

    pub fn changed_env() -> Env {
        (FPCR_CHANGED as u32, 0)
    }

    pub fn read_env() -> Env {
        let fpcr: u64;
        // SAFETY: reading FPCR has no side effects.
        unsafe { asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags)) };
        (fpcr as u32, 0)
    }

    fn write(fpcr: u64) {
        // SAFETY: writes a valid control value (traps off); the callers do no floating-point
        // arithmetic until they restore the default.
        unsafe { asm!("msr fpcr, {}", in(reg) fpcr, options(nomem, nostack, preserves_flags)) };
    }

    pub fn write_default() {
        write(FPCR_DEFAULT);
    }

    pub fn write_changed() {
        write(FPCR_CHANGED);
    }
}

use arch::{changed_env, default_env, read_env, write_changed, write_default};

fn pack(env: Env) -> usize {
    (env.0 as usize) << 16 | env.1 as usize
}

/// Reports its environment, sets a non-default one, switches away, and reports what it finds
/// when resumed; finally restores the defaults.
extern "C-unwind" fn changes_mode(t: Transfer) -> ! {
    let at_start = read_env();
    write_changed();
    // SAFETY: `t.context` is the test thread, suspended in `resume`.
    let t = unsafe { t.context.resume(pack(at_start)) };
    let after_resume = read_env();
    write_default();
    // SAFETY: as above; never resumed again.
    unsafe { t.context.resume(pack(after_resume)) };
    unreachable!();
}

#[test]
fn rounding_mode_and_precision_follow_the_documented_contract() {
    let stack = TestStack::new(64 * 1024);
    assert_eq!(read_env(), default_env(), "the test thread starts at defaults");
    // SAFETY: the stack outlives the context.
    let ctx = unsafe { Context::new(stack.top(), stack.limit(), changes_mode) };
    // SAFETY: fresh context.
    let t = unsafe { ctx.resume(0) };
    let seen_by_main = read_env();
    // Restore before anything else runs here (a no-op with fpu-env).
    write_default();
    assert_eq!(t.data, pack(default_env()), "the context started at defaults");
    // SAFETY: the context is suspended in `resume`.
    let t = unsafe { t.context.resume(0) };
    let seen_by_context = t.data;
    let _ = t;
    if cfg!(feature = "fpu-env") {
        assert_eq!(seen_by_main, default_env(), "fpu-env isolates the resumer");
        assert_eq!(
            seen_by_context,
            pack(changed_env()),
            "fpu-env keeps the context's own mode across the switch"
        );
    } else {
        assert_eq!(
            seen_by_main,
            changed_env(),
            "without fpu-env the mode belongs to the thread and leaks to the resumer"
        );
        assert_eq!(
            seen_by_context,
            pack(default_env()),
            "without fpu-env the context sees whatever the resumer had"
        );
    }
    assert_eq!(read_env(), default_env());
}

extern "C-unwind" fn reports_mode(t: Transfer) -> ! {
    let env = read_env();
    // SAFETY: `t.context` is the test thread, suspended in `resume`.
    unsafe { t.context.resume(pack(env)) };
    unreachable!();
}

#[test]
fn a_fresh_context_starts_with_the_mode_documented_for_the_build() {
    let stack = TestStack::new(64 * 1024);
    // Create while a non-default mode is active, resume after restoring the defaults.
    write_changed();
    // SAFETY: the stack outlives the context.
    let ctx = unsafe { Context::new(stack.top(), stack.limit(), reports_mode) };
    write_default();
    // SAFETY: fresh context.
    let t = unsafe { ctx.resume(0) };
    let seen = t.data;
    let after = read_env();
    write_default();
    if cfg!(feature = "fpu-env") {
        assert_eq!(seen, pack(changed_env()), "captured by Context::new");
        assert_eq!(after, default_env(), "the resumer keeps its own");
    } else {
        assert_eq!(seen, pack(default_env()), "inherited from the resumer");
    }
}
