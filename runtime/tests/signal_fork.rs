//! A child process forked without `exec` from a process with signal receivers: its
//! subscriptions are void, so SIGTERM terminates it as in a process that never watched
//! SIGTERM, instead of being swallowed by a handler whose dispatcher thread stayed in the
//! parent. Alone in its test binary, so no other test's thread holds a lock across the fork.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::io::ErrorKind;
use std::os::fd::RawFd;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use purloin::signal::{Signal, Signals};

/// The child's alarm: if SIGTERM is swallowed, SIGALRM ends the child instead (and the test
/// fails naming it) rather than leaving it running.
const CHILD_ALARM_SECS: u32 = 20;

#[test]
fn a_forked_child_does_not_keep_the_parents_subscriptions() {
    let _w = common::watchdog("signal fork", Duration::from_secs(60));
    let signals = Signals::new(&[Signal::TERM]).unwrap();
    let extra = Signals::new(&[Signal::TERM]).unwrap();

    // fork(3): the atfork child handler restores the disposition as the child starts; the
    // child checks what it can see and reports it before the parent sends SIGTERM. (The
    // parent drops `extra` with the closure it does not run.)
    let inherited = &signals;
    let (pid, report) = fork_and_report(Fork::Libc, move || child_checks(inherited, extra));
    assert_terminated_by_sigterm(pid, "fork(3)");
    assert_eq!(report, Some(ALL_CHECKS), "fork(3): the child's checks (bits: {CHECK_NAMES:?})");

    // A raw fork system call runs no atfork handlers: purloin's handler, inherited, must hand
    // the signal to the default disposition itself.
    let (pid, report) = fork_and_report(Fork::RawSyscall, || 0);
    assert_terminated_by_sigterm(pid, "raw fork");
    assert_eq!(report, Some(0));

    // The parent's receiver is unaffected.
    // SAFETY: plain system call; SIGTERM is handled by `signals`.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGTERM) }, 0);
    assert_eq!(signals.recv_timeout(Duration::from_secs(30)), Some(Signal::TERM));
    drop(signals);
}

const CHECK_NAMES: [&str; 4] = [
    "SIGTERM's disposition is the default",
    "Signals::new fails with Unsupported",
    "an inherited receiver's recv panics naming exec",
    "dropping an inherited receiver returns",
];
const ALL_CHECKS: u8 = 0b1111;

/// What a child forked with fork(3) can see: one bit per entry of `CHECK_NAMES`. `signals`
/// and `extra` are the child's copies of receivers the parent created.
fn child_checks(signals: &Signals, extra: Signals) -> u8 {
    let mut bits = 0;
    if disposition(libc::SIGTERM) == libc::SIG_DFL {
        bits |= 1;
    }
    if Signals::new(&[Signal::USR1]).is_err_and(|e| e.kind() == ErrorKind::Unsupported) {
        bits |= 2;
    }
    std::panic::set_hook(Box::new(|_| {}));
    let recv = std::panic::catch_unwind(AssertUnwindSafe(|| signals.recv()));
    if let Err(p) = recv {
        let msg = p
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| p.downcast_ref::<String>().map(String::as_str))
            .unwrap_or_default();
        if msg.contains("exec a program in the child") {
            bits |= 4;
        }
    }
    drop(extra);
    bits | 8
}

/// The forking method.
#[derive(Clone, Copy)]
enum Fork {
    Libc,
    RawSyscall,
}

/// `fork` as a bare system call, bypassing the C library's fork handlers. AArch64 Linux has
/// no `fork` system call: `clone(SIGCHLD)` with no other flags is the same operation.
///
/// # Safety
///
/// As `fork`: the child may only make async-signal-safe calls.
unsafe fn raw_fork() -> libc::pid_t {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the caller's obligation; clone with only the exit signal and no new stack is fork.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) };
    #[cfg(not(target_arch = "aarch64"))]
    // SAFETY: the caller's obligation.
    let pid = unsafe { libc::syscall(libc::SYS_fork) };
    pid as libc::pid_t
}

/// Forks a child that runs `checks`, reports its result byte through a pipe and then waits
/// for signals; returns the child's pid and its report (`None`: it died first).
fn fork_and_report(how: Fork, checks: impl FnOnce() -> u8) -> (libc::pid_t, Option<u8>) {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is valid for two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [read, write] = fds;
    let pid = match how {
        // SAFETY: the child runs `checks` (which only uses purloin's signal API), then only
        // async-signal-safe calls; its alarm ends it if it hangs.
        Fork::Libc => unsafe { libc::fork() },
        // SAFETY: as above, and the child of a raw fork only makes async-signal-safe calls.
        Fork::RawSyscall => unsafe { raw_fork() },
    };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm has no preconditions.
        unsafe { libc::alarm(CHILD_ALARM_SECS) };
        let report = checks();
        // SAFETY: writes one byte from a live local to our pipe.
        unsafe { libc::write(write, (&report as *const u8).cast(), 1) };
        loop {
            // SAFETY: waits for a signal; SIGTERM (or the alarm) ends the process.
            unsafe { libc::pause() };
        }
    }
    // SAFETY: closes our copy of the write end (the child's copy stays open until it dies).
    unsafe { libc::close(write) };
    let mut byte = 0u8;
    // SAFETY: reads one byte into a live local; end-of-file when the child died first.
    let n = unsafe { libc::read(read, (&mut byte as *mut u8).cast(), 1) };
    // SAFETY: closes our read end.
    unsafe { libc::close(read) };
    (pid, (n == 1).then_some(byte))
}

/// Sends SIGTERM to `pid` and asserts that it was terminated by it.
fn assert_terminated_by_sigterm(pid: libc::pid_t, what: &str) {
    // SAFETY: signals our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFSIGNALED(status),
        "{what}: the child exited with status {} instead of dying by SIGTERM",
        libc::WEXITSTATUS(status)
    );
    let sig = libc::WTERMSIG(status);
    assert!(
        sig == libc::SIGTERM,
        "{what}: the child was killed by signal {sig}{}, not by SIGTERM: it ignored SIGTERM",
        if sig == libc::SIGALRM { " (its watchdog alarm)" } else { "" }
    );
}

fn disposition(sig: libc::c_int) -> libc::sighandler_t {
    // SAFETY: sigaction is plain old data.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `old`.
    assert_eq!(unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) }, 0);
    old.sa_sigaction
}
