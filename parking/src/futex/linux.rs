//! Linux and Android: the `futex` syscall, private to the process.
//!
//! Waits use `FUTEX_WAIT_BITSET` with `FUTEX_BITSET_MATCH_ANY` (so they behave like
//! `FUTEX_WAIT`) because it takes an **absolute** timeout, measured on `CLOCK_MONOTONIC` when
//! `FUTEX_CLOCK_REALTIME` is not set. A loop that retries after `EINTR` therefore keeps the
//! same deadline. `std::time::Instant` is `CLOCK_MONOTONIC` on Linux, but its value is opaque,
//! so a deadline is converted by reading `clock_gettime(CLOCK_MONOTONIC)` and adding the time
//! remaining until the `Instant` (the two clock reads are nanoseconds apart; the error only
//! ever moves the deadline later by that much, never earlier, because `Instant::now()` is read
//! first). `FUTEX_PRIVATE_FLAG` lets the kernel key the wait on (mm, address) without looking
//! up the page: the word is never shared with another process.

use std::mem::MaybeUninit;
use std::ptr;
use std::time::{Duration, Instant};

use super::WaitResult;
use crate::stats::{self, Event};
use crate::sync::AtomicU32;

/// Match any bit: makes `FUTEX_WAIT_BITSET` behave like `FUTEX_WAIT` (and be woken by plain
/// `FUTEX_WAKE`). Spelled here because older `libc` releases lack the constant.
const FUTEX_BITSET_MATCH_ANY: u32 = u32::MAX;

pub(super) const WAKE_COUNT_IS_EXACT: bool = true;

pub(super) fn wait(atomic: &AtomicU32, expected: u32, deadline: Option<Instant>) -> WaitResult {
    let timeout = match deadline {
        None => None,
        Some(deadline) => {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return WaitResult::TimedOut;
            }
            // `None` if the deadline is too far away to represent: then it cannot be reached
            // either, so an untimed wait is exact.
            monotonic_after(remaining)
        }
    };
    let timeout_ptr = timeout.as_ref().map_or(ptr::null(), |ts| ts as *const libc::timespec);
    loop {
        stats::record(Event::FutexWait);
        // SAFETY: `atomic` is a live, 4-byte-aligned `AtomicU32` borrowed for the whole call,
        // which is all FUTEX_WAIT_BITSET reads. `timeout_ptr` is null or points at `timeout`,
        // a valid timespec that outlives the call. The fourth argument (`uaddr2`) is unused
        // by this operation.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                atomic as *const AtomicU32,
                libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
                expected,
                timeout_ptr,
                ptr::null::<u32>(),
                FUTEX_BITSET_MATCH_ANY,
            )
        };
        if r == 0 {
            return WaitResult::Woken;
        }
        match errno() {
            libc::EAGAIN => return WaitResult::ValueChanged,
            libc::ETIMEDOUT => return WaitResult::TimedOut,
            // A signal handler ran. The deadline is absolute, so simply wait again: the kernel
            // re-checks the value.
            libc::EINTR => continue,
            e => panic!(
                "futex(FUTEX_WAIT_BITSET) failed: {}; purloin-parking cannot block threads \
                 without it (if a seccomp filter forbids futex, allow it)",
                std::io::Error::from_raw_os_error(e)
            ),
        }
    }
}

pub(super) fn wake(atomic: *const AtomicU32, n: u32) -> usize {
    let n = n.min(i32::MAX as u32) as i32;
    // SAFETY: FUTEX_WAKE with FUTEX_PRIVATE_FLAG only hashes the address (it never reads or
    // writes the memory), so any pointer value is sound; a dangling one wakes nobody or
    // whoever waits at that address now (a spurious wake-up, which every waiter tolerates).
    let r = unsafe {
        libc::syscall(libc::SYS_futex, atomic, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n)
    };
    // An error (only EFAULT/EINVAL for a bad pointer) woke nobody.
    usize::try_from(r).unwrap_or(0)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `CLOCK_MONOTONIC` now plus `after`, as a timespec; `None` if that does not fit.
// `time_t` and `c_long` are `i64` on 64-bit Linux but `i32` on some 32-bit targets, so the
// conversions below are identities here and needed there.
#[allow(clippy::useless_conversion)]
fn monotonic_after(after: Duration) -> Option<libc::timespec> {
    let mut now = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `now` is valid for writing one timespec; CLOCK_MONOTONIC is always supported.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, now.as_mut_ptr()) };
    assert_eq!(r, 0, "clock_gettime(CLOCK_MONOTONIC) failed: {}", std::io::Error::last_os_error());
    // SAFETY: clock_gettime returned 0, so it initialised `now`.
    let now = unsafe { now.assume_init() };
    let mut secs = i64::from(now.tv_sec).checked_add(i64::try_from(after.as_secs()).ok()?)?;
    let mut nanos = i64::from(now.tv_nsec) + i64::from(after.subsec_nanos());
    if nanos >= 1_000_000_000 {
        nanos -= 1_000_000_000;
        secs = secs.checked_add(1)?;
    }
    Some(libc::timespec { tv_sec: secs.try_into().ok()?, tv_nsec: nanos.try_into().ok()? })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn far_deadline_is_unrepresentable_not_wrapped() {
        assert!(monotonic_after(Duration::from_secs(u64::MAX)).is_none());
        let ts = monotonic_after(Duration::from_millis(1500)).expect("fits");
        assert!((0..1_000_000_000).contains(&ts.tv_nsec));
    }
}
