//! `trim` empties every thread's stack cache, not only its caller's: also the cache of a
//! thread that is blocked for as long as the test wants (standing in for one parked for
//! ever). A test binary of its own, as it compares process-wide `stats()` and RSS.
#![cfg(not(loom))]

mod common;

use std::sync::mpsc;

use common::rss;
use purloin_stack::{StackSize, lease, stats, trim};

const MIB: usize = 1 << 20;

#[test]
fn trim_releases_the_cache_of_a_blocked_thread() {
    const N: usize = 8;
    let (cached_tx, cached_rx) = mpsc::channel::<usize>();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    let base = rss();
    let owner = std::thread::spawn(move || {
        let stacks: Vec<_> = (0..N).map(|_| lease(StackSize::Normal).unwrap()).collect();
        for s in &stacks {
            // SAFETY: the stack's whole usable range is read/write.
            unsafe { std::ptr::write_bytes(s.top().sub(s.usable_size()), 0x5A, s.usable_size()) };
        }
        let usable = stacks[0].usable_size();
        drop(stacks); // into this thread's cache (16 per class by default)
        cached_tx.send(usable).unwrap();
        // Blocked until the test ends: only `trim` on another thread can reach its cache.
        end_rx.recv().unwrap();
        // The thread still leases through its (now empty) cache afterwards.
        drop(lease(StackSize::Normal).unwrap());
    });
    let usable = cached_rx.recv().unwrap();
    let touched = rss().saturating_sub(base);
    let before = stats();
    assert!(before.cached >= N, "the owner's cache holds its stacks: {before:?}");
    assert!(touched >= N * usable * 9 / 10, "touched only {} MiB", touched / MIB);
    trim();
    let after = stats();
    let left = rss().saturating_sub(base);
    assert_eq!(after.cached, 0, "every thread's cache is empty after trim: {after:?}");
    assert_eq!(after.leased + after.pooled + after.cached, after.slots);
    assert!(left < touched / 10, "after trim: {} of {} MiB resident", left / MIB, touched / MIB);
    end_tx.send(()).unwrap();
    owner.join().unwrap();
    assert_eq!(stats().leased, before.leased);
}
