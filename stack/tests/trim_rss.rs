//! Memory given back: returns beyond the pool's bounds (by the scavenger, without `trim`),
//! `trim` after a burst,
//! `Stack::release`, and no huge-page blow-up of idle stacks. RSS from /proc/self/status,
//! compared loosely.
#![cfg(not(loom))]

mod common;

use common::rss;
use purloin_stack::{Stack, StackSize, lease, trim};

/// RSS is process-wide: the tests of this file take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const MIB: usize = 1 << 20;

/// Touches the top `bytes` of `s`.
fn touch(s: &Stack, bytes: usize) {
    // SAFETY: the top `bytes` (<= usable_size) of the stack's usable range are read/write.
    unsafe { std::ptr::write_bytes(s.top().sub(bytes), 0x5A, bytes) };
}

#[test]
fn trim_gives_memory_back_after_a_burst() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    trim();
    const N: usize = 600;
    const DEPTH: usize = 256 * 1024;
    let mut stacks = Vec::with_capacity(N);
    let base = rss();
    for _ in 0..N {
        let s = lease(StackSize::Normal).unwrap();
        touch(&s, DEPTH);
        stacks.push(s);
    }
    let touched = rss().saturating_sub(base);
    assert!(touched >= N * DEPTH * 9 / 10, "touched only {} MiB", touched / MIB);
    drop(stacks);
    // The thread cache (16) and the shared pool's bound (256) keep theirs; the other 328 are
    // left to the scavenger, which, shortly after, leaves them only their top 8 KiB. Wait for
    // it (bounded by the watchdog): no `trim` needed for memory to come back.
    let done = common::watchdog(60, "the scavenger giving back stacks beyond the pool's bound");
    let mut after_drop = rss().saturating_sub(base);
    while after_drop >= touched * 6 / 10 {
        std::thread::yield_now();
        after_drop = rss().saturating_sub(base);
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    trim();
    let after_trim = rss().saturating_sub(base);
    println!(
        "burst of {N} x 256 KiB: touched {} MiB, after drop {} MiB, after trim {} MiB",
        touched / MIB,
        after_drop / MIB,
        after_trim / MIB
    );
    assert!(after_trim < touched / 10, "after trim: {} of {} MiB", after_trim / MIB, touched / MIB);
}

#[test]
fn release_gives_memory_back_at_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stacks: Vec<_> = (0..32).map(|_| lease(StackSize::Normal).unwrap()).collect();
    let base = rss();
    for s in &stacks {
        touch(s, s.usable_size());
    }
    let touched = rss().saturating_sub(base);
    assert!(touched >= 30 * MIB, "touched {touched}");
    for s in stacks {
        s.release();
    }
    let left = rss().saturating_sub(base);
    assert!(left < touched / 10, "{} MiB left of {} MiB", left / MIB, touched / MIB);
}

/// With transparent huge pages a single touch could make 2 MiB resident per stack; arenas
/// are `MADV_NOHUGEPAGE`.
#[test]
fn idle_large_stacks_cost_a_page_not_a_huge_page() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 64;
    let mut stacks = Vec::with_capacity(N);
    let base = rss();
    for _ in 0..N {
        let s = lease(StackSize::Large).unwrap();
        touch(&s, 1);
        stacks.push(s);
    }
    let per_stack = rss().saturating_sub(base) / N;
    println!("idle 8 MiB stack: {per_stack} bytes of RSS");
    assert!(per_stack < 64 * 1024, "{per_stack} bytes per idle 8 MiB stack");
}

/// Resident pages of `[lo, hi)` (inside a stack arena, which stays mapped).
fn resident_pages(lo: *mut u8, hi: *mut u8) -> usize {
    let page = purloin_stack::page_size();
    let mut vec = vec![0u8; (hi as usize - lo as usize) / page];
    // SAFETY: page-aligned range of an arena mapping; one byte per page fits in `vec`.
    let rc = unsafe { libc::mincore(lo.cast(), hi as usize - lo as usize, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

/// A stack above `Options::BIG_STACK_BYTES` keeps only its top pages resident once returned
/// (neither the thread cache nor the pool keeps it as it is), so a deep recursion on it does
/// not stay resident until `trim`; a Large one keeps its pages for fast reuse until `trim`.
#[test]
fn big_stacks_give_their_touched_pages_back_on_return() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let big = lease(StackSize::Bytes(32 * MIB)).unwrap();
    assert!(!big.worth_keeping());
    touch(&big, 24 * MIB);
    let (limit, top) = (big.limit(), big.top());
    assert!(resident_pages(limit, top) >= 24 * MIB / purloin_stack::page_size());
    drop(big);
    // The top `keep_resident` (8 KiB) may stay; nothing below.
    assert_eq!(resident_pages(limit, top.wrapping_sub(64 * 1024)), 0);
    let large = lease(StackSize::Large).unwrap();
    assert!(large.worth_keeping());
    touch(&large, 4 * MIB);
    let (limit, top) = (large.limit(), large.top());
    drop(large);
    assert!(resident_pages(limit, top) > 0, "a Large stack is cached as it is");
    trim();
    assert_eq!(resident_pages(limit, top), 0, "trim gives the cached Large stack back");
}
