//! The facade's one scheduler hook (`purloin_sched::hook` takes one per process): it serves
//! the `tracing` feature's span mover (`span_hook`) and the trace recorder (`trace`).
//!
//! It is installed by the first runtime built while a `tracing` subscriber is interested in
//! anything, or by the first trace started; from then on it serves the whole process, and
//! each part checks whether it is wanted (a subscriber that is still interested; a trace that
//! records) before doing anything.
//!
//! The switch word `switch_out` returns carries both parts: the span mover's word (a boxed
//! span stack, aligned, or 0) with bit 0 free, and in bit 0 the recorder's "this switch-out is
//! a park's" (its resumed run then ends a `wake` flow).

use std::io;

use purloin_sched::hook::{self, Hook};

/// Bit 0 of the switch word: the green thread switched out to park.
pub(crate) const PARKED: usize = 1;

/// The hook; what it does at each switch and event is in `hook_dispatch`, which calls the
/// parts (this file is what the parts use to install it, so it uses neither of them).
pub(crate) struct FacadeHook;

static HOOK: FacadeHook = FacadeHook;

/// Installs the hook (once per process).
///
/// # Errors
/// Another hook was installed with `purloin_sched::hook::install`: there is one per process.
pub(crate) fn install() -> io::Result<()> {
    match hook::install(&HOOK) {
        Ok(()) => Ok(()),
        Err(h) if core::ptr::addr_eq(h as *const dyn Hook, &HOOK as *const FacadeHook) => Ok(()),
        Err(_) => Err(io::Error::other(
            "purloin: another scheduler hook is installed (purloin_sched::hook::install was \
             called directly, and there is one hook per process), so purloin cannot record a \
             trace or move tracing spans; do not install your own hook in a program that uses \
             purloin::trace or the tracing feature",
        )),
    }
}
