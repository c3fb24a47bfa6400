//! The default stack size keeps many parked green threads cheap in page tables, which `VmRSS`
//! does not count: a parked green thread touches one page at the top of its stack, and the
//! span of address space between two such pages decides how many of them share a page of
//! page tables. (Alone in its binary: the process's memory is the measure.)
#![cfg(all(not(loom), target_os = "linux"))]

#[path = "rt_common/mod.rs"]
mod common;

use std::time::Duration;

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

#[test]
fn parked_green_threads_with_the_default_stack_share_page_tables() {
    let _w = common::watchdog("default stack page tables", Duration::from_secs(120));
    const N: usize = 50_000;
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let per_thread_pte = rt.block_on(|| {
        let (tx, rx) = purloin::sync::channel::bounded::<()>(0);
        let pte_before = status_kib("VmPTE:");
        let arrived = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let handles: Vec<_> = (0..N)
            .map(|_| {
                let (rx, arrived) = (rx.clone(), arrived.clone());
                purloin::spawn(move || {
                    arrived.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let _ = rx.recv();
                })
            })
            .collect();
        // Every one has run (its stack is attached and its top page touched).
        while arrived.load(std::sync::atomic::Ordering::Relaxed) < N {
            purloin::yield_now();
        }
        let pte = status_kib("VmPTE:").saturating_sub(pte_before);
        drop(tx);
        for h in handles {
            h.join().unwrap();
        }
        pte * 1024 / N
    });
    // A 1 MiB stack costs 2 KiB of page tables per parked thread (two per 4 KiB page, which
    // maps 2 MiB on x86_64); the default costs a few hundred bytes.
    assert!(
        per_thread_pte < 1024,
        "{per_thread_pte} bytes of page tables per parked green thread with the default stack \
         ({})",
        purloin::StackSize::default()
    );
}
