//! Explicit runtimes: shutdown unwinds parked green threads, deadlock reports (in a child
//! process), stats and schedtrace lines.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::Drops;

#[test]
fn dropping_a_runtime_unwinds_parked_green_threads() {
    let _w = common::watchdog("shutdown", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let parked = Arc::new(AtomicUsize::new(0));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    for _ in 0..50 {
        let (d, p) = (drops.clone(), parked.clone());
        drop(rt.spawn(move || {
            let _g = Drops(d);
            p.fetch_add(1, Ordering::SeqCst);
            loop {
                purloin::park();
            }
        }));
    }
    while parked.load(Ordering::SeqCst) < 50 {
        std::thread::yield_now();
    }
    let report = rt.shutdown_timeout(Duration::from_millis(20));
    assert_eq!(report.cancelled, 50);
    assert_eq!(drops.load(Ordering::SeqCst), 50);
}

/// Run in a child process: a root that waits on a green thread that waits forever.
#[test]
fn deadlock_child() {
    if std::env::var_os("PURLOIN_DEADLOCK_CHILD").is_none() {
        return;
    }
    let rt = purloin::runtime::Builder::new()
        .workers(2)
        .deadlock_detection(true, Duration::from_millis(200))
        .build()
        .unwrap();
    rt.block_on(|| {
        let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = started.clone();
        let stuck = purloin::Builder::new()
            .name("waits-forever")
            .spawn(move || {
                s2.store(true, Ordering::SeqCst);
                loop {
                    purloin::park();
                }
            })
            .unwrap();
        // Let it start on its own (a child joined before it starts runs inline instead).
        while !started.load(Ordering::SeqCst) {
            purloin::yield_now();
        }
        stuck.join().unwrap();
    });
}

#[test]
fn a_global_deadlock_is_reported_and_panics_in_the_root() {
    let _w = common::watchdog("deadlock", Duration::from_secs(60));
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "deadlock_child", "--nocapture", "--test-threads=1"])
        .env("PURLOIN_DEADLOCK_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "the child must fail: {stdout}\n{stderr}");
    assert!(stderr.contains("all green threads are asleep — deadlock!"), "{stderr}");
    assert!(stderr.contains("'waits-forever'"), "{stderr}");
    assert!(stderr.contains("[root]: waits on joining a green thread"), "{stderr}");
    assert!(stderr.contains("held by green thread"), "{stderr}");
}

#[test]
fn stats_count_work_and_schedtrace_lines_read_well() {
    let _w = common::watchdog("stats", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    rt.block_on(|| {
        let hs: Vec<_> = (0..100).map(|i| purloin::spawn(move || i)).collect();
        for h in hs {
            h.join().unwrap();
        }
        let s = purloin::stats();
        assert_eq!(s.procs.len(), 2);
        assert!(s.total.spawned >= 100, "{:?}", s.total);
    });
}

/// The deadlock watch does not poll: an OS thread that starts joining a green thread after
/// the runtime already went quiet (every worker parked, the green thread waiting forever) is
/// an idle event of its own, so the watch still reports the deadlock and the join returns
/// `Err` (without the event the join would hang: the watchdog fails the test).
#[test]
fn a_join_that_starts_after_the_runtime_went_quiet_is_reported() {
    let _w = common::watchdog("late outside join", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new()
        .workers(2)
        .deadlock_detection(true, Duration::from_millis(20))
        .build()
        .unwrap();
    let (tx, rx) = purloin::sync::channel::bounded::<u32>(0);
    let reached = Arc::new(AtomicUsize::new(0));
    let r = reached.clone();
    let h = rt.spawn(move || {
        r.fetch_add(1, Ordering::SeqCst);
        rx.recv()
    });
    while reached.load(Ordering::SeqCst) == 0 || !rt.scheduler().is_quiescent() {
        std::thread::yield_now();
    }
    let err = h.join().unwrap_err();
    assert!(err.downcast_ref::<purloin::ForcedUnwind>().is_some());
    drop(tx);
}
