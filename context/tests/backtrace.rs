//! A backtrace captured inside a context is finite, shows the entry function, and ends at the
//! entry trampoline (whose CFI says "no caller") instead of walking into the resumer's stack or
//! into garbage.
#![cfg(not(loom))]

mod common;

use std::backtrace::Backtrace;
use std::hint::black_box;

use common::{TestStack, Watchdog};
use purloin_context::{Context, Transfer};

#[inline(never)]
fn capture_at_depth(depth: usize) -> String {
    if depth == 0 {
        Backtrace::force_capture().to_string()
    } else {
        let s = capture_at_depth(depth - 1);
        black_box(&s);
        s
    }
}

extern "C-unwind" fn backtrace_entry_marker(t: Transfer) -> ! {
    let text = capture_at_depth(3);
    // Hand the text to the resumer through a leaked box (one allocation per test).
    let ptr = Box::into_raw(Box::new(text)) as usize;
    // SAFETY: `t.context` is the test thread, suspended in `resume`.
    unsafe { t.context.resume(ptr) };
    unreachable!();
}

/// The frame lines of a formatted `Backtrace` ("  12: symbol").
fn frames(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| {
            let l = l.trim_start();
            l.split_once(": ").is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
        })
        .collect()
}

#[test]
fn backtrace_resume_site_marker() {
    let _dog = Watchdog::new("backtrace", 120);
    let stack = TestStack::new(1 << 20);
    // SAFETY: the stack outlives the context.
    let ctx = unsafe { Context::new(stack.top(), stack.limit(), backtrace_entry_marker) };
    // SAFETY: fresh context.
    let t = unsafe { ctx.resume(0) };
    // SAFETY: produced by `Box::into_raw` in the context, taken once.
    let text = *unsafe { Box::from_raw(t.data as *mut String) };
    let frames = frames(&text);
    assert!(!frames.is_empty(), "no frames in:\n{text}");
    assert!(frames.len() < 40, "suspiciously long backtrace:\n{text}");
    assert!(text.contains("backtrace_entry_marker"), "entry function missing:\n{text}");
    assert!(text.contains("capture_at_depth"), "frames below the entry missing:\n{text}");
    let last = frames.last().unwrap();
    assert!(last.contains("trampoline"), "the walk must end at the trampoline:\n{text}");
    assert!(
        !text.contains("backtrace_resume_site_marker"),
        "the walk must not continue into the resumer's stack:\n{text}"
    );
}

/// gdb's `bt` inside a context ends at the trampoline too ("outermost" frame, no "corrupt
/// stack" complaint). Runs this test binary under `gdb -batch`; skipped (with a message) when
/// gdb is not installed or cannot trace (e.g. ptrace forbidden in a container).
#[test]
fn gdb_backtrace_inside_a_context_ends_at_the_trampoline() {
    let _dog = Watchdog::new("gdb", 300);
    let exe = std::env::current_exe().unwrap();
    let out = match std::process::Command::new("gdb")
        .args([
            "-nx",
            "-batch",
            "-ex",
            "set debuginfod enabled off",
            "-ex",
            "break backtrace::capture_at_depth",
            "-ex",
            "run --exact backtrace_resume_site_marker --test-threads=1",
            "-ex",
            "bt",
            "-ex",
            "kill",
        ])
        .arg(&exe)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipped: gdb is not available ({e})");
            return;
        }
    };
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !text.contains("hit Breakpoint 1") {
        eprintln!("skipped: gdb could not run the test binary:\n{text}");
        return;
    }
    let frames: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert!(frames.len() >= 3 && frames.len() < 20, "gdb backtrace:\n{text}");
    assert!(frames.iter().any(|f| f.contains("backtrace_entry_marker")), "gdb backtrace:\n{text}");
    assert!(frames.last().unwrap().contains("trampoline"), "gdb backtrace:\n{text}");
    assert!(!text.contains("corrupt stack"), "gdb backtrace:\n{text}");
    assert!(!text.contains("backtrace_resume_site_marker ("), "walked into the resumer:\n{text}");
}
