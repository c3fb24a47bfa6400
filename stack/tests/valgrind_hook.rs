//! The valgrind registration hook: every stack slot is registered exactly once, whether it
//! was handed out before or after the hook was installed, and reuse does not re-register.
//!
//! One test per file: the hook is process-wide.
#![cfg(not(loom))]

use std::collections::HashMap;
use std::sync::Mutex;

use purloin_stack::valgrind::set_stack_register_hook;
use purloin_stack::{StackSize, lease};

static CALLS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn record(start: *mut u8, end: *mut u8) {
    CALLS.lock().unwrap().push((start as usize, end as usize));
}

fn other(_: *mut u8, _: *mut u8) {}

fn registrations() -> HashMap<(usize, usize), usize> {
    let mut counts = HashMap::new();
    for &range in CALLS.lock().unwrap().iter() {
        *counts.entry(range).or_insert(0) += 1;
    }
    counts
}

#[test]
fn every_stack_is_registered_exactly_once() {
    let early: Vec<_> = (0..3).map(|_| lease(StackSize::Small).unwrap()).collect();
    set_stack_register_hook(record).unwrap();
    set_stack_register_hook(record).unwrap(); // the same hook again: fine
    let err = set_stack_register_hook(other).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);

    let late: Vec<_> = (0..5).map(|_| lease(StackSize::Normal).unwrap()).collect();
    let regs = registrations();
    for s in early.iter().chain(&late) {
        let range = (s.limit() as usize, s.top() as usize);
        assert_eq!(regs.get(&range), Some(&1), "{s:?} registered once");
    }
    assert!(regs.values().all(|&n| n == 1), "a stack registered twice");

    let before = CALLS.lock().unwrap().len();
    drop(late);
    let again: Vec<_> = (0..5).map(|_| lease(StackSize::Normal).unwrap()).collect();
    assert_eq!(CALLS.lock().unwrap().len(), before, "reused stacks are not re-registered");
    drop(again);
}
