//! Unwinding never crosses the assembly: a panic that escapes an entry function aborts the
//! process (the trampoline's personality routine says so), and one in a `resume_ontop`
//! function run on a fresh context aborts with Rust's "panic in a function that cannot
//! unwind". Each case runs in a child process (this test binary, re-executed with an
//! environment variable naming the case).
#![cfg(not(loom))]

mod common;

use std::process::Command;

use common::TestStack;
use purloin_context::{Context, Transfer};

const CASE_VAR: &str = "PURLOIN_CONTEXT_ABORT_CASE";

extern "C-unwind" fn escaping_panic(_: Transfer) -> ! {
    panic!("escaping the entry function");
}

extern "C-unwind" fn never_runs(_: Transfer) -> ! {
    unreachable!("the ontop function panicked first");
}

fn panicking_ontop(_: Transfer) -> Transfer {
    panic!("ontop on a fresh context");
}

/// The body of the child process; a no-op unless the case variable is set.
#[test]
fn abort_child() {
    let Ok(case) = std::env::var(CASE_VAR) else { return };
    let stack = TestStack::new(256 * 1024);
    // SAFETY: the stack outlives the context; the point is the abort.
    unsafe {
        match case.as_str() {
            "entry" => {
                Context::new(stack.top(), stack.limit(), escaping_panic).resume(0);
            }
            "ontop" => {
                Context::new(stack.top(), stack.limit(), never_runs)
                    .resume_ontop(0, panicking_ontop);
            }
            other => panic!("unknown case {other}"),
        }
    }
    unreachable!("the child process should have aborted");
}

fn run_case(case: &str) -> (std::process::ExitStatus, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "abort_child", "--nocapture", "--test-threads=1"])
        .env(CASE_VAR, case)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn assert_aborted(status: std::process::ExitStatus, stderr: &str, message: &str, cause: &str) {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGABRT), "expected SIGABRT; stderr:\n{stderr}");
    assert!(stderr.contains(message), "the panic message is printed first:\n{stderr}");
    assert!(stderr.contains(cause), "the abort names the cause:\n{stderr}");
}

#[test]
fn a_panic_escaping_the_entry_function_aborts() {
    let (status, stderr) = run_case("entry");
    assert_aborted(
        status,
        &stderr,
        "escaping the entry function",
        "purloin-context: a panic escaped the entry function of a context",
    );
}

#[test]
fn a_panicking_ontop_function_on_a_fresh_context_aborts() {
    let (status, stderr) = run_case("ontop");
    assert_aborted(
        status,
        &stderr,
        "ontop on a fresh context",
        "panic in a function that cannot unwind",
    );
}
