//! Helpers shared by the integration tests: re-running one test in a child process, and
//! reading the process's memory numbers from `/proc`.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that tells a re-executed test binary which child case to run.
pub const CHILD_ENV: &str = "PURLOIN_STACK_CHILD";

/// The child case this process should run, if it is a child.
pub fn child_case() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}

/// What a child process did.
pub struct ChildOutcome {
    pub status: ExitStatus,
    pub stderr: String,
    pub stdout: String,
}

impl ChildOutcome {
    /// The signal that killed the child, if any.
    pub fn signal(&self) -> Option<i32> {
        self.status.signal()
    }

    pub fn describe(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Re-runs the test `test_name` of this test binary in a child process with
/// `PURLOIN_STACK_CHILD=case`, and waits for it with a watchdog (a hung child is killed and
/// the test fails instead of hanging).
pub fn run_child(test_name: &str, case: &str) -> ChildOutcome {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe)
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, case)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child test process");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    // Watchdog: a bounded wait, not synchronisation.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child case '{case}' of {test_name} hung for 120 s and was killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    ChildOutcome { status, stdout: out_reader.join().unwrap(), stderr: err_reader.join().unwrap() }
}

/// In a child that is expected to crash: no core dump.
pub fn no_core_dumps() {
    let zero = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: setrlimit reads one rlimit through a valid pointer.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) };
}

/// Lines of /proc/self/maps: the process's memory mappings.
pub fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

/// A `kB` field of /proc/self/status, in bytes.
pub fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"));
    let kb: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// Resident set size in bytes.
pub fn rss() -> usize {
    status_bytes("VmRSS")
}

/// vm.max_map_count.
pub fn max_map_count() -> usize {
    std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap().trim().parse().unwrap()
}

/// Aborts the process if the returned flag is not set within `secs`: a wait that never ends
/// fails the test instead of hanging it. A bound, not synchronisation.
pub fn watchdog(secs: u64, what: &'static str) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        for _ in 0..secs * 10 {
            if d.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("watchdog: {what} did not happen in {secs} s");
        std::process::abort();
    });
    done
}
