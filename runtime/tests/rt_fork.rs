//! A child process forked after the global runtime started cannot use it (its worker threads
//! exist only in the parent): `spawn` there panics with a message saying so, instead of
//! returning a handle whose join never returns. Alone in its test binary, so no other test's
//! thread holds a lock across the fork.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::time::Duration;

#[test]
fn a_forked_child_that_spawns_gets_a_clear_panic() {
    let _w = common::watchdog("fork", Duration::from_secs(60));
    assert_eq!(purloin::spawn(|| 1).join().unwrap(), 1);
    // SAFETY: the child only calls purloin's spawn paths, formats a message and exits with
    // `_exit`; an alarm ends it if it hangs.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm and _exit have no preconditions.
        unsafe { libc::alarm(20) };
        std::panic::set_hook(Box::new(|_| {}));
        let spawned = std::panic::catch_unwind(|| purloin::spawn(|| 1).join().is_ok());
        let builder = purloin::Builder::new().spawn(|| 1).map(|_| ());
        let code = match (spawned, builder) {
            (Err(p), Err(e))
                if p.downcast_ref::<String>().is_some_and(|m| m.contains("fork"))
                    && e.to_string().contains("build a new runtime") =>
            {
                0
            }
            _ => 3,
        };
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status),
        "the child was killed (signal {}): a hang",
        libc::WTERMSIG(status)
    );
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child's spawn did not panic with the message");
}
