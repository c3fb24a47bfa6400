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

/// [`current_thread`] without a system call after the first on each thread: a thread-local
/// copy, dropped in a forked child (whose only thread has a new id) by a fork counter.
pub(crate) fn current_thread_cached() -> u64 {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        use crate::sync::{AtomicU32, Ordering};
        use core::cell::Cell;
        static FORKS: AtomicU32 = AtomicU32::new(0);
        extern "C" fn in_child() {
            // Relaxed: the child has one thread when this runs.
            FORKS.fetch_add(1, Ordering::Relaxed);
        }
        static INSTALL: std::sync::Once = std::sync::Once::new();
        std::thread_local! {
            static TID: Cell<(u32, u64)> = const { Cell::new((0, 0)) };
        }
        INSTALL.call_once(|| {
            // SAFETY: registers a child handler that only increments an atomic
            // (async-signal-safe, as a fork child handler must be).
            unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        });
        // Relaxed: a fork happens-before everything in the child.
        let forks = FORKS.load(Ordering::Relaxed);
        TID.try_with(|c| {
            let (at, tid) = c.get();
            if tid != 0 && at == forks {
                return tid;
            }
            let tid = current_thread();
            c.set((forks, tid));
            tid
        })
        .unwrap_or_else(|_| current_thread())
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    {
        current_thread()
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

/// How a thread waits in the kernel, if it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelWait {
    /// Interruptible sleep (`S`): a futex (a std lock, a condition variable), a sleep, or
    /// blocking I/O on a socket or pipe.
    Sleeping,
    /// Uninterruptible wait (`D`): page faults on fresh or swapped memory, the address-space
    /// lock, disk I/O — usually not the green thread's doing.
    Uninterruptible,
}

/// How thread `t` waits in the kernel right now, or `None` if it runs (or is unknown).
pub(crate) fn thread_kernel_wait(t: u64) -> Option<KernelWait> {
    #[cfg(target_os = "linux")]
    {
        if t == 0 {
            return None;
        }
        let stat = std::fs::read_to_string(format!("/proc/self/task/{t}/stat")).ok()?;
        kernel_wait_of_stat(&stat)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = t;
        None
    }
}

/// Parses the state field of a `/proc/<pid>/task/<tid>/stat` line ("tid (comm) S ...": the
/// state follows the last ')', as the command name may contain spaces and parentheses).
fn kernel_wait_of_stat(stat: &str) -> Option<KernelWait> {
    let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
    match state {
        "S" => Some(KernelWait::Sleeping),
        "D" => Some(KernelWait::Uninterruptible),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{KernelWait, kernel_wait_of_stat};

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(kernel_wait_of_stat("12 (a) b) S 1 2"), Some(KernelWait::Sleeping));
        assert_eq!(kernel_wait_of_stat("12 (w (x)) D 1"), Some(KernelWait::Uninterruptible));
        assert_eq!(kernel_wait_of_stat("12 (worker) R 1"), None);
        assert_eq!(kernel_wait_of_stat("garbage"), None);
    }
}
