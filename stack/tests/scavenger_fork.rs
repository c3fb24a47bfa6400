//! A child forked after the scavenger thread started (which exists only in the parent) gets
//! its own: memory of stacks it returns beyond the pool's bound is given back without `trim`.
//! Alone in its test binary, so no other test's thread holds a lock across the fork.
#![cfg(not(loom))]

mod common;

use common::rss;
use purloin_stack::{StackSize, lease};

const MIB: usize = 1 << 20;

/// Leases `n` stacks of `size` (1 MiB or less), touches 256 KiB of each, returns them all,
/// and waits until the scavenger has given back most of that memory (the caller bounds the
/// wait).
fn burst_and_wait_for_the_scavenger(size: StackSize, n: usize) {
    let base = rss();
    let stacks: Vec<_> = (0..n)
        .map(|_| {
            let s = lease(size).unwrap();
            // SAFETY: the top 256 KiB of a stack of at least 512 KiB we leased are its usable
            // memory.
            unsafe { std::ptr::write_bytes(s.top().sub(256 * 1024), 0x5A, 256 * 1024) };
            s
        })
        .collect();
    let touched = rss().saturating_sub(base);
    assert!(touched >= n * 200 * 1024, "touched only {} MiB", touched / MIB);
    drop(stacks);
    // The thread cache and the pool's bound keep 272 of them; the scavenger trims the rest.
    while rss().saturating_sub(base) >= touched * 6 / 10 {
        std::thread::yield_now();
    }
}

#[test]
fn a_forked_child_starts_its_own_scavenger() {
    let done = common::watchdog(60, "the parent's scavenger giving memory back");
    burst_and_wait_for_the_scavenger(StackSize::Normal, 600);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: the child only leases and returns stacks, reads /proc, and exits with `_exit`;
    // an alarm ends it if it hangs.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: alarm and _exit have no preconditions.
        unsafe { libc::alarm(30) };
        // A size class the parent never used: no stack of it is resident yet.
        let ok = std::panic::catch_unwind(|| {
            burst_and_wait_for_the_scavenger(StackSize::Bytes(512 * 1024), 600)
        })
        .is_ok();
        // SAFETY: see above.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child we forked; `status` is a valid out-pointer.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(rc, pid, "waitpid failed: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's returned stacks were not given back (killed by its 30 s alarm: {}; \
         status {status:#x})",
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM
    );
}
