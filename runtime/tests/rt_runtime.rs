//! Explicit runtimes: shutdown unwinds parked green threads, stats and schedtrace lines (the
//! deadlock watch's reports are tested in whole programs: `deadlock_watch.rs`).
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

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
