//! The facade's scheduler hook (one of the process's `purloin_sched::hook`s): it serves the
//! `tracing` feature's span mover (`span_hook`) and the trace recorder (`trace`).
//!
//! It is installed by the first runtime built while a `tracing` subscriber is interested in
//! anything, or by the first trace started; from then on it serves the whole process, and
//! each part checks whether it is wanted (a subscriber that is still interested; a trace that
//! records) before doing anything. A program's own hooks
//! ([`runtime::hook::install`](crate::runtime::hook::install)) are installed beside it.
//!
//! The switch word `switch_out` returns carries both parts: the span mover's word (a boxed
//! span stack, aligned, or 0) with bit 0 free, and in bit 0 the recorder's "this switch-out is
//! a park's" (its resumed run then ends a `wake` flow).

use std::io;

use purloin_sched::hook;

/// Bit 0 of the switch word: the green thread switched out to park.
pub(crate) const PARKED: usize = 1;

/// The hook; what it does at each switch and event is in `hook_dispatch`, which calls the
/// parts (this file is what the parts use to install it, so it uses neither of them).
pub(crate) struct FacadeHook;

static HOOK: FacadeHook = FacadeHook;

/// Installs the hook (once per process; later calls do nothing).
///
/// # Errors
/// The process has the most scheduler hooks it can have (`purloin_sched::hook::MAX_HOOKS`,
/// installed by the program itself).
pub(crate) fn install() -> io::Result<()> {
    match hook::install(&HOOK) {
        Ok(()) | Err(hook::InstallError::AlreadyInstalled) => Ok(()),
        Err(e) => Err(io::Error::other(format!(
            "{e}; purloin needs one of them to record a trace or move tracing spans: install \
             fewer hooks of your own"
        ))),
    }
}
