//! Signals in a child process forked without `exec`: the dispatcher thread exists only in the
//! parent, so purloin's handlers, inherited by the child, would swallow every signal there.
//! The child's subscriptions are therefore void: each signal purloin handled gets back the
//! disposition it had before the first receiver.
//!
//! Two places do it, because a signal can reach the child before either runs:
//!
//! - a `pthread_atfork` child handler restores the dispositions as the child starts (only
//!   `sigaction` and atomics: a fork child handler must be async-signal-safe);
//! - `on_signal` itself, when it runs in a process other than the one that started the
//!   dispatcher (a signal sent between the fork and the atfork handler, or a child made by a
//!   raw `clone`, which runs no atfork handlers), restores the signal's disposition and sends
//!   the signal again, so the child sees it as a process that never watched it would.
//!
//! Both read the saved disposition without the registry lock (a forked child cannot take a
//! lock another thread may have held at the fork). That is sound because of the order in
//! which `install` and `restore` change things: the saved disposition of a signal is written
//! (under the registry lock) before its bit in [`INSTALLED`] is set and before purloin's
//! handler is installed, and is not written again until the handler is gone and the bit is
//! cleared. A child whose copy of memory shows the bit set, or in which purloin's handler
//! runs, therefore also has the complete saved disposition.

use core::cell::UnsafeCell;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use super::pending::NSIG;
use super::{bit, bits, on_signal};

/// Signals whose handler purloin installed or is about to install (bit `n - 1`: signal `n`).
static INSTALLED: AtomicU64 = AtomicU64::new(0);
/// The process that started the dispatcher thread (0: not started).
static OWNER: AtomicI32 = AtomicI32::new(0);
/// Set by the atfork child handler: this process is a fork of one that had the dispatcher.
static FORKED: AtomicBool = AtomicBool::new(false);

/// The disposition of each signal before purloin's handler was installed.
struct Saved([UnsafeCell<libc::sigaction>; NSIG]);

// SAFETY: entry `n` is written only by `install` (under the registry lock, while purloin's
// handler for `n` is not installed and `INSTALLED`'s bit for `n` is clear) and read by
// `restore` (under the same lock) or, in a forked child, by `forward` and `in_child`, which
// only read entries whose write completed before the fork (see the module docs). No entry is
// read while it is written.
unsafe impl Sync for Saved {}

static SAVED: Saved = Saved(
    // SAFETY: `sigaction` is plain old data; all-zero is a valid value (SIG_DFL, no flags).
    [const { UnsafeCell::new(unsafe { core::mem::zeroed::<libc::sigaction>() }) }; NSIG],
);

/// Records that this process runs the dispatcher, and registers the atfork child handler
/// (once per process). Called before the first handler is installed.
pub(super) fn start() {
    static ATFORK: Once = Once::new();
    ATFORK.call_once(|| {
        // SAFETY: registers a child handler that only uses atomics and `sigaction`
        // (async-signal-safe, as a fork child handler must be); no other arguments.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
    });
    // SAFETY: plain system call.
    OWNER.store(unsafe { libc::getpid() }, Ordering::Relaxed);
}

/// Whether this process is a child forked from one whose receivers were served by the
/// dispatcher thread (set by the atfork child handler; a relaxed load, cheap enough for
/// every receive).
pub(super) fn forked() -> bool {
    // Relaxed: the fork happens-before everything in the child.
    FORKED.load(Ordering::Relaxed)
}

/// Installs purloin's handler for `sig`, saving the disposition it replaces (see the module
/// docs for the order). The caller holds the registry lock.
pub(super) fn install(sig: usize) -> std::io::Result<()> {
    let signo = sig as libc::c_int;
    // SAFETY: `sig < NSIG`; the caller holds the registry lock and purloin's handler for
    // `sig` is not installed, so nobody reads this entry now (see `Saved`).
    let saved = unsafe { &mut *SAVED.0[sig].get() };
    // SAFETY: a null new action only reads the current one into `saved`.
    if unsafe { libc::sigaction(signo, core::ptr::null(), saved) } != 0 {
        return Err(sigaction_failed(sig));
    }
    // Release: a child that sees the bit sees the saved disposition (module docs).
    INSTALLED.fetch_or(bit(sig), Ordering::Release);
    // SAFETY: sigaction is plain old data; all-zero is a valid value (empty mask, no flags).
    let mut new: libc::sigaction = unsafe { core::mem::zeroed() };
    new.sa_sigaction = on_signal as *const () as libc::sighandler_t;
    new.sa_flags = libc::SA_RESTART | libc::SA_ONSTACK;
    // SAFETY: `new` is a valid action whose handler is async-signal-safe.
    if unsafe { libc::sigaction(signo, &new, core::ptr::null_mut()) } != 0 {
        let e = sigaction_failed(sig);
        INSTALLED.fetch_and(!bit(sig), Ordering::Relaxed);
        return Err(e);
    }
    Ok(())
}

fn sigaction_failed(sig: usize) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    std::io::Error::new(
        e.kind(),
        format!("purloin::signal: sigaction({}) failed: {e}", super::Signal(sig as libc::c_int)),
    )
}

/// Puts back the disposition `install` replaced. The caller holds the registry lock.
pub(super) fn restore(sig: usize) {
    // SAFETY: `sig < NSIG`; `install` wrote the entry under the lock the caller holds.
    let saved = unsafe { &*SAVED.0[sig].get() };
    // SAFETY: `saved` is the action `sigaction` reported for `sig` before purloin installed
    // its handler; restoring it is always valid. Nothing to do on error (it cannot fail for a
    // signal whose action was just read and set).
    unsafe { libc::sigaction(sig as libc::c_int, saved, core::ptr::null_mut()) };
    INSTALLED.fetch_and(!bit(sig), Ordering::Relaxed);
}

/// Called first by `on_signal`: if this is not the process that runs the dispatcher, puts
/// back `sig`'s saved disposition, sends `sig` to this process again (delivered with that
/// disposition once the handler returns: `sig` is blocked while its handler runs) and
/// returns true. Async-signal-safe: `getpid`, `sigaction` and `kill`, with `errno` kept.
pub(super) fn forward(sig: usize) -> bool {
    // SAFETY: plain system calls.
    if unsafe { libc::getpid() } == OWNER.load(Ordering::Relaxed) {
        return false;
    }
    // SAFETY: reading this thread's errno location is always valid.
    let saved_errno = unsafe { *libc::__errno_location() };
    // SAFETY: the handler for `sig` ran, so it was installed before the fork, after its saved
    // disposition was written (module docs); restoring a saved action is always valid.
    unsafe { libc::sigaction(sig as libc::c_int, SAVED.0[sig].get(), core::ptr::null_mut()) };
    // SAFETY: plain system calls.
    unsafe { libc::kill(libc::getpid(), sig as libc::c_int) };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved_errno };
    true
}

/// The atfork child handler: the subscriptions of the parent are void here.
extern "C" fn in_child() {
    // Relaxed: the child has one thread at this point.
    FORKED.store(true, Ordering::Relaxed);
    // Acquire: pairs with the Release in `install` (module docs).
    let installed = INSTALLED.load(Ordering::Acquire);
    for sig in bits(installed) {
        // SAFETY: sigaction is plain old data; all-zero is a valid value.
        let mut current: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: a null new action only reads the current one.
        let rc = unsafe { libc::sigaction(sig as libc::c_int, core::ptr::null(), &mut current) };
        // Only purloin's own handler is replaced: the bit is set a moment before the handler
        // is installed and cleared a moment after the saved disposition is back.
        if rc == 0 && current.sa_sigaction == on_signal as *const () as libc::sighandler_t {
            // SAFETY: the bit is set, so the saved disposition is complete (module docs).
            unsafe {
                libc::sigaction(sig as libc::c_int, SAVED.0[sig].get(), core::ptr::null_mut())
            };
        }
    }
}
