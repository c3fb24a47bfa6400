//! Configuring the global runtime: from code (`Builder::install_global`, before its first
//! use) and from the `PURLOIN_*` environment. The global runtime is one per process, so each
//! case runs in a child process (this binary re-run with one test selected).
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::process::Command;
use std::time::Duration;

/// Runs this binary's test `name` alone in a child process with `envs` set (the test's child
/// branch sees `PURLOIN_TEST_CONFIG_CHILD`); returns the exit code, stdout and stderr.
fn run_child(name: &str, envs: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture"]).env("PURLOIN_TEST_CONFIG_CHILD", "1");
    for var in
        ["PURLOIN_WORKERS", "PURLOIN_STACK_SIZE", "PURLOIN_DEADLOCK", "PURLOIN_SPARE_WORKERS"]
    {
        cmd.env_remove(var);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn is_child() -> bool {
    std::env::var_os("PURLOIN_TEST_CONFIG_CHILD").is_some()
}

/// The usable size of the stack the calling green thread runs on (the one class with a
/// stack leased while only this green thread lives).
fn own_stack_size() -> usize {
    let leased: Vec<_> =
        purloin::stack::stats().classes.into_iter().filter(|c| c.leased > 0).collect();
    assert_eq!(leased.len(), 1, "{leased:?}");
    leased[0].usable
}

#[test]
fn install_global_configures_the_global_runtime_before_its_first_use() {
    if is_child() {
        purloin::runtime::Builder::new()
            .workers(3)
            .stack_size(purloin::StackSize::at_least(96 * 1024))
            .install_global()
            .unwrap();
        let (workers, stack) =
            purloin::spawn(|| (purloin::stats().procs.len(), own_stack_size())).join().unwrap();
        println!("WORKERS {workers} STACK {stack}");
        let again = purloin::runtime::Builder::new().workers(1).install_global().unwrap_err();
        println!("AGAIN {:?}: {again}", again.kind());
        return;
    }
    let _w = common::watchdog("install_global child", Duration::from_secs(60));
    let (code, out, err) =
        run_child("install_global_configures_the_global_runtime_before_its_first_use", &[]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains(&format!("WORKERS 3 STACK {}", 96 * 1024)), "{out}");
    assert!(out.contains("AGAIN AlreadyExists"), "{out}");
    assert!(out.contains("call runtime::Builder::install_global before the first use"), "{out}");
}

#[test]
fn install_global_after_the_first_spawn_says_it_is_too_late() {
    if is_child() {
        purloin::spawn(|| ()).join().unwrap();
        let late = purloin::runtime::Builder::new().workers(2).install_global().unwrap_err();
        println!("LATE {:?}", late.kind());
        return;
    }
    let _w = common::watchdog("late install_global child", Duration::from_secs(60));
    let (code, out, err) =
        run_child("install_global_after_the_first_spawn_says_it_is_too_late", &[]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("LATE AlreadyExists"), "{out}");
}

#[test]
fn the_environment_configures_the_global_runtime() {
    if is_child() {
        let (workers, stack) =
            purloin::spawn(|| (purloin::stats().procs.len(), own_stack_size())).join().unwrap();
        println!("WORKERS {workers} STACK {stack}");
        return;
    }
    let _w = common::watchdog("environment child", Duration::from_secs(60));
    for (size, bytes) in [("small", 32 * 1024), ("64k", 64 * 1024), ("2M", 2 << 20)] {
        let (code, out, err) = run_child(
            "the_environment_configures_the_global_runtime",
            &[("PURLOIN_WORKERS", "3"), ("PURLOIN_STACK_SIZE", size)],
        );
        assert_eq!(code, Some(0), "{out}\n{err}");
        assert!(out.contains(&format!("WORKERS 3 STACK {bytes}")), "{size}: {out}");
        assert!(!err.contains("ignoring"), "{err}");
    }
}

#[test]
fn code_overrides_the_environment() {
    if is_child() {
        let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
        println!("WORKERS {}", rt.block_on(|| purloin::stats().procs.len()));
        return;
    }
    let _w = common::watchdog("override child", Duration::from_secs(60));
    let (code, out, err) = run_child("code_overrides_the_environment", &[("PURLOIN_WORKERS", "3")]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("WORKERS 2"), "{out}");
}

#[test]
fn bad_values_are_ignored_with_a_warning_naming_the_accepted_form() {
    if is_child() {
        let workers = purloin::spawn(|| purloin::stats().procs.len()).join().unwrap();
        // A second builder reads the environment again: the warnings are printed once.
        drop(purloin::runtime::Builder::new());
        println!("WORKERS {workers}");
        return;
    }
    let _w = common::watchdog("bad values child", Duration::from_secs(60));
    let (code, out, err) = run_child(
        "bad_values_are_ignored_with_a_warning_naming_the_accepted_form",
        &[("PURLOIN_WORKERS", "0"), ("PURLOIN_STACK_SIZE", "huge"), ("PURLOIN_DEADLOCK", "maybe")],
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(out.contains(&format!("WORKERS {cpus}")), "the default: {out}");
    for (var, accepted) in [
        ("PURLOIN_WORKERS", "a number of workers from 1 up"),
        ("PURLOIN_STACK_SIZE", "small, normal, large, or a size in bytes"),
        ("PURLOIN_DEADLOCK", "1 (on), 0 (off), or the grace period in milliseconds"),
    ] {
        assert_eq!(err.matches(&format!("ignoring {var}=")).count(), 1, "{var}: {err}");
        assert!(err.contains(accepted), "{var}: {err}");
    }
}

/// `PURLOIN_SPARE_WORKERS` sets the global runtime's spare workers: with one worker, a green
/// thread blocked in an unmarked std receive is answered by another green thread only if a
/// spare worker may run it (with none, its receive times out).
#[test]
fn the_environment_sets_the_spare_workers() {
    if is_child() {
        let wait: u64 = std::env::var("PURLOIN_TEST_WAIT_MS").unwrap().parse().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let waiter = purloin::spawn(move || rx.recv_timeout(Duration::from_millis(wait)).is_ok());
        let sender = purloin::spawn(move || {
            let _ = tx.send(1);
        });
        let answered = waiter.join().unwrap();
        sender.join().unwrap();
        println!("ANSWERED {answered} SPARES {}", purloin::stats().global.spares_added);
        return;
    }
    let _w = common::watchdog("spare workers child", Duration::from_secs(120));
    let (code, out, err) = run_child(
        "the_environment_sets_the_spare_workers",
        &[
            ("PURLOIN_WORKERS", "1"),
            ("PURLOIN_SPARE_WORKERS", "0"),
            ("PURLOIN_TEST_WAIT_MS", "300"),
        ],
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("ANSWERED false SPARES 0"), "{out}\n{err}");
    let (code, out, err) = run_child(
        "the_environment_sets_the_spare_workers",
        &[
            ("PURLOIN_WORKERS", "1"),
            ("PURLOIN_SPARE_WORKERS", "2"),
            ("PURLOIN_TEST_WAIT_MS", "60000"),
        ],
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("ANSWERED true SPARES ") && !out.contains("SPARES 0"), "{out}\n{err}");
}
