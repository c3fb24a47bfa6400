//! Windows 8 and later: `WaitOnAddress` / `WakeByAddress*`.
//!
//! Untimed waits and all wakes go through `atomic-wait` (which calls the same functions);
//! timed waits call `WaitOnAddress` here with a millisecond timeout. That timeout is relative
//! and the OS timer may fire a little early, so after every timeout the remaining time to the
//! absolute deadline is recomputed (rounded up to whole milliseconds) and the wait repeated
//! until the deadline really passed: `TimedOut` is never reported early. `WaitOnAddress`
//! returns `TRUE` both for a wake and spuriously, and `WakeByAddress*` report no count, so
//! wake counts here are upper bounds (`WAKE_COUNT_IS_EXACT = false`).
//!
//! Tested on this project's CI on x86_64-pc-windows-gnu under wine (`cargo xtask cross`);
//! Linux test builds type-check this file too.

use core::ffi::c_void;
use std::time::{Duration, Instant};

use super::WaitResult;
use crate::stats::{self, Event};
use crate::sync::AtomicU32;

pub(super) const WAKE_COUNT_IS_EXACT: bool = false;

/// `ERROR_TIMEOUT` from `winerror.h`: what `GetLastError` says after a timed-out wait.
const ERROR_TIMEOUT: u32 = 1460;
/// `INFINITE` from `winbase.h`; a timed wait never passes it (it would mean "no timeout").
const INFINITE: u32 = u32::MAX;

#[cfg_attr(windows, link(name = "synchronization"))]
unsafe extern "system" {
    fn WaitOnAddress(
        address: *const c_void,
        compare_address: *const c_void,
        address_size: usize,
        milliseconds: u32,
    ) -> i32;
}

#[cfg_attr(windows, link(name = "kernel32"))]
unsafe extern "system" {
    fn GetLastError() -> u32;
}

pub(super) fn wait(atomic: &AtomicU32, expected: u32, deadline: Option<Instant>) -> WaitResult {
    let Some(deadline) = deadline else {
        stats::record(Event::FutexWait);
        atomic_wait::wait(atomic, expected);
        return WaitResult::Woken;
    };
    loop {
        let now = Instant::now();
        if now >= deadline {
            return WaitResult::TimedOut;
        }
        let millis = millis_rounded_up(deadline - now);
        stats::record(Event::FutexWait);
        // SAFETY: `atomic` is a live AtomicU32 (4 bytes, aligned) borrowed for the call and
        // `expected` a live u32 on our stack; address_size 4 matches both. WaitOnAddress only
        // reads them.
        let woke = unsafe {
            WaitOnAddress(
                (atomic as *const AtomicU32).cast(),
                (&expected as *const u32).cast(),
                4,
                millis,
            )
        };
        if woke != 0 {
            return WaitResult::Woken;
        }
        // SAFETY: GetLastError has no preconditions; it reads this thread's last-error value,
        // set by the failed WaitOnAddress just above.
        let error = unsafe { GetLastError() };
        assert_eq!(
            error, ERROR_TIMEOUT,
            "WaitOnAddress failed with Windows error {error}; purloin-parking needs Windows 8 or \
             later (Synchronization.lib)"
        );
        // Timed out: loop, recomputing the remaining time (the timer may fire early).
    }
}

fn millis_rounded_up(d: Duration) -> u32 {
    let millis = d.as_nanos().div_ceil(1_000_000);
    u32::try_from(millis).unwrap_or(INFINITE - 1).min(INFINITE - 1)
}

pub(super) fn wake(atomic: *const AtomicU32, n: u32) -> usize {
    wake_via_atomic_wait(atomic, n)
}

/// Up to 16 single wakes, else one wake-all (extra wakes are spurious wake-ups, which waiters
/// tolerate); returns `n`, an upper bound, since the OS reports no count.
fn wake_via_atomic_wait(atomic: *const AtomicU32, n: u32) -> usize {
    if n <= 16 {
        for _ in 0..n {
            atomic_wait::wake_one(atomic);
        }
        n as usize
    } else {
        atomic_wait::wake_all(atomic);
        if n == u32::MAX { usize::MAX } else { n as usize }
    }
}
