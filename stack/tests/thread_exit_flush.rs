//! A thread's stack cache goes back to the shared pool when the thread exits.
//!
//! A test binary of its own: it compares the process-wide `stats()` before and after, and in a
//! binary with other tests a test thread of an earlier test can still be exiting (flushing its
//! own cache) after that test released the lock its tests take turns with, which made this
//! comparison flaky when it lived in `pool.rs`.
#![cfg(not(loom))]

use purloin_stack::{StackSize, lease, stats};

#[test]
fn a_thread_exit_flushes_its_cache_to_the_shared_pool() {
    let before = stats();
    std::thread::spawn(|| {
        let stacks: Vec<_> = (0..8).map(|_| lease(StackSize::Small).unwrap()).collect();
        drop(stacks);
        assert!(stats().cached >= 8);
    })
    .join()
    .unwrap();
    let after = stats();
    assert_eq!(after.cached, before.cached, "the exited thread's cache is empty");
    assert_eq!(after.leased, before.leased);
    assert_eq!(after.leased + after.pooled + after.cached, after.slots);
}
