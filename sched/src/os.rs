//! The few OS facts the monitor needs about worker threads: their CPU time and whether they
//! are blocked in the kernel (Linux: `pthread_getcpuclockid` and `/proc/self/task/<tid>/stat`).
//! Elsewhere the monitor falls back to wall-clock time.

use std::time::Duration;

/// A word identifying the calling OS thread: `tid << 32 | ...` is not portable, so on Linux it
/// is the kernel thread id in the low half and nothing else (0 means unknown).
pub(crate) fn current_thread() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        tid as u64
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// CPU time consumed by the thread `t` (from [`current_thread`]), if known.
pub(crate) fn thread_cpu_time(t: u64) -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        if t == 0 {
            return None;
        }
        // The per-thread CPU clock of another thread of this process: Linux encodes it as
        // CPUCLOCK_SCHED (2) with CPUCLOCK_PERTHREAD_MASK (4) and the negated tid shifted by 3
        // (the same value `pthread_getcpuclockid` returns, see clock_getcpuclockid(3)).
        let clock = ((!(t as libc::clockid_t)) << 3) | 6;
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid out-pointer; an invalid clock id is an error return.
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = t;
        None
    }
}

/// Whether thread `t` is blocked in the kernel (state `S` or `D`: a futex, a sleep, I/O).
pub(crate) fn thread_is_blocked(t: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        if t == 0 {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{t}/stat")) else {
            return false;
        };
        // "tid (comm) S ...": the state follows the last ')'.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "S" || state == "D")
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = t;
        false
    }
}
