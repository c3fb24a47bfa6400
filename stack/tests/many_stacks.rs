//! 100,000 live guarded stacks at the default `vm.max_map_count`: the process's mapping
//! count grows by a constant (the arena chunks), not per stack, and an idle stack with one
//! touched page costs about one page of RSS.
//!
//! The tests of this file count the whole process's mappings and RSS, so they take turns
//! (`SERIAL`), and no other test file shares their process.
#![cfg(not(loom))]

mod common;

use common::{mappings, max_map_count, rss, status_bytes};
use purloin_stack::{GuardBackend, StackSize, guard_backend, lease, stats};

const N: usize = 100_000;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn hundred_thousand_live_stacks_cost_o1_mappings() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let backend = guard_backend().unwrap();
    let leased_before = stats().leased;
    // Filled before the baseline, so the test's own bookkeeping is not counted per stack.
    let mut stacks: Vec<Option<purloin_stack::Stack>> = (0..N).map(|_| None).collect();
    let (maps_before, rss_before, pte_before) = (mappings(), rss(), status_bytes("VmPTE"));
    let mut leased = 0;
    for slot in stacks.iter_mut() {
        match lease(StackSize::Small) {
            Ok(s) => {
                // An idle green thread has touched the top page of its stack.
                // SAFETY: the byte below top() is inside the stack's usable range.
                unsafe { s.top().sub(1).write_volatile(1) };
                *slot = Some(s);
                leased += 1;
            }
            Err(e) => {
                // Only acceptable on the mprotect fallback, which costs 2 mappings per stack.
                assert_eq!(backend, GuardBackend::Mprotect, "lease failed: {e}");
                let msg = e.to_string();
                assert!(msg.contains("vm.max_map_count"), "{msg}");
                eprintln!("mprotect fallback: failed after {leased} stacks, as expected: {msg}");
                assert!(leased < N && leased * 2 + 100 >= max_map_count() - maps_before);
                return;
            }
        }
    }
    let growth = mappings() as i64 - maps_before as i64;
    let rss_per_stack = (rss() - rss_before) as f64 / N as f64;
    let pte_per_stack = (status_bytes("VmPTE") - pte_before) as f64 / N as f64;
    println!(
        "{N} live 32 KiB stacks ({backend:?}): +{growth} mappings (max_map_count {}), \
         RSS {:.2} KiB per stack, page tables {:.0} bytes per stack",
        max_map_count(),
        rss_per_stack / 1024.0,
        pte_per_stack
    );
    match backend {
        GuardBackend::GuardMarkers => {
            assert!(growth <= 64, "{growth} new mappings for {N} stacks: not O(1)");
            // One page plus the slot's metadata; loose, RSS is noisy.
            assert!(rss_per_stack < 4.5 * 1024.0, "{rss_per_stack} bytes per idle stack");
        }
        // Reached only where max_map_count was raised: 2 mappings per stack.
        GuardBackend::Mprotect => assert!(growth >= 2 * N as i64 - 16, "{growth}"),
    }
    // Every stack is distinct, with its guard right below it.
    let mut limits: Vec<usize> = stacks.iter().flatten().map(|s| s.limit() as usize).collect();
    limits.sort_unstable();
    let slot = 32 * 1024 + purloin_stack::page_size();
    assert!(limits.windows(2).all(|w| w[1] - w[0] >= slot), "overlapping stacks");
    assert_eq!(stats().leased, leased_before + N);
    drop(stacks);
    assert_eq!(stats().leased, leased_before);
}

/// The goal: a million live 32 KiB stacks at the default `vm.max_map_count` (about 36 GiB of
/// address space, reserved with `MAP_NORESERVE`; untouched, so it costs page tables and the
/// slots' metadata, not stack memory).
#[test]
fn a_million_live_stacks_fit_under_the_default_map_count() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if guard_backend().unwrap() != GuardBackend::GuardMarkers {
        eprintln!("skipped: the mprotect fallback cannot hold a million stacks (2 mappings each)");
        return;
    }
    const M: usize = 1_000_000;
    let leased_before = stats().leased;
    let mut stacks = Vec::with_capacity(M);
    let maps_before = mappings();
    for _ in 0..M {
        stacks.push(lease(StackSize::Small).unwrap());
    }
    let growth = mappings() as i64 - maps_before as i64;
    println!("{M} live 32 KiB stacks: +{growth} mappings, {} arena chunks", stats().chunks);
    assert!(growth <= 128, "{growth} new mappings for {M} stacks: not O(1)");
    assert_eq!(stats().leased, leased_before + M);
    drop(stacks);
    assert_eq!(stats().leased, leased_before);
}
