//! A `panic = "abort"` program whose runtime shuts down with parked green threads neither
//! aborts nor hangs: the threads are left parked (their stacks leaked) with one line on stderr.
//!
//! The test harness cannot run under `panic = "abort"` (cargo also ignores the setting for
//! test and bench targets and their dependencies), so this makes a one-binary package in
//! `target/panic-abort/fixture` whose `main` is `tests/fixtures/panic_abort_shutdown.rs`,
//! builds it there with `panic = "abort"` and the workspace's `Cargo.lock` (one extra build of
//! purloin's dependency tree, without debug info), and runs it.
#![cfg(not(loom))]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "rt_common/mod.rs"]
mod common;

/// `target/panic-abort`, beside this build's target directory.
fn target_dir(workspace: &Path) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), PathBuf::from);
    target.join("panic-abort")
}

/// Writes the fixture package (manifest and lock file) and returns its manifest's path.
fn fixture_package(workspace: &Path, dir: &Path) -> PathBuf {
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR"));
    let main = runtime.join("tests/fixtures/panic_abort_shutdown.rs");
    let manifest = format!(
        "[package]\nname = \"purloin-panic-abort-fixture\"\nversion = \"0.0.0\"\n\
         edition = \"2024\"\npublish = false\n\n\
         [[bin]]\nname = \"panic_abort_shutdown\"\npath = {main:?}\n\n\
         [dependencies]\npurloin = {{ path = {runtime:?} }}\n\n\
         [profile.dev]\npanic = \"abort\"\ndebug = false\n\n\
         [workspace]\n"
    );
    std::fs::create_dir_all(dir).expect("the fixture directory");
    let path = dir.join("Cargo.toml");
    std::fs::write(&path, manifest).expect("the fixture manifest");
    // The workspace's versions (the build is offline; unused entries are pruned).
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).expect("Cargo.lock");
    path
}

#[test]
fn a_panic_abort_shutdown_leaks_parked_green_threads_with_one_line() {
    // The build is the slow part (minutes on a loaded machine); the run takes milliseconds.
    let _w = common::watchdog("panic = abort build and run", Duration::from_secs(1800));
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace");
    let target = target_dir(workspace);
    let manifest = fixture_package(workspace, &target.join("fixture"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let build = Command::new(&cargo)
        .args(["build", "--offline", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .env("CARGO_INCREMENTAL", "0")
        .env_remove("CARGO_PROFILE_DEV_DEBUG")
        .stdin(Stdio::null())
        .status()
        .expect("cargo runs");
    assert!(build.success(), "building the panic = \"abort\" fixture failed: {build}");
    eprintln!("built the panic = \"abort\" fixture in {:?}", started.elapsed());
    let exe = target.join("debug/panic_abort_shutdown");
    let out = Command::new(&exe).stdin(Stdio::null()).output().expect("the fixture runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{exe:?} ended with {}:\n{stderr}", out.status);
    assert_eq!(stdout.trim(), "ok 3 true", "stderr:\n{stderr}");
    let lines: Vec<_> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr:\n{stderr}");
    assert!(
        lines[0].starts_with("purloin: 3 parked green threads were left parked at shutdown")
            && lines[0].contains("panic = \"abort\""),
        "{}",
        lines[0]
    );
}
