//! The process-wide pool through the public API: stacks migrating between threads exactly
//! once, the per-thread cache, labels, sizes, statistics and configuration.
#![cfg(not(loom))]

mod common;

use std::collections::HashSet;
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};

use purloin_stack::{Options, Stack, StackSize, configure, lease, page_size, stats, trim};

/// The pool is process-wide and some tests compare `stats()` before and after: all tests of
/// this file take turns.
static STATS: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    STATS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Producers lease stacks and send them to consumers, which return them (a green thread
/// migrating between workers). Every stack carries a token at both ends; a live-set catches
/// a stack handed out twice; at the end nothing is leaked.
#[test]
fn stacks_migrate_between_threads_exactly_once() {
    let _serial = serial();
    let done = common::watchdog(120, "the test");
    const PRODUCERS: usize = 3;
    const PER_PRODUCER: usize = 20_000;
    let leased_before = stats().leased;
    let live: Arc<Mutex<HashSet<usize>>> = Arc::default();
    let mut consumers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = mpsc::sync_channel::<(Stack, u64)>(64);
        senders.push(tx);
        let live = live.clone();
        consumers.push(std::thread::spawn(move || {
            let mut received = 0usize;
            for (stack, token) in rx {
                // SAFETY: both ends of the usable range are read/write and were written by
                // the producer before sending (the channel orders it).
                let (low, high) = unsafe {
                    (stack.limit().cast::<u64>().read(), stack.top().cast::<u64>().sub(1).read())
                };
                assert_eq!((low, high), (token, token), "stack written by someone else");
                assert!(live.lock().unwrap().remove(&(stack.limit() as usize)));
                received += 1;
                if token % 5 == 0 {
                    stack.release();
                } else {
                    drop(stack);
                }
            }
            received
        }));
    }
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let senders = senders.clone();
            let live = live.clone();
            std::thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    let size = if i % 3 == 0 { StackSize::Normal } else { StackSize::Small };
                    let stack = lease(size).unwrap();
                    let token = (p * PER_PRODUCER + i) as u64;
                    assert!(
                        live.lock().unwrap().insert(stack.limit() as usize),
                        "stack leased twice"
                    );
                    // SAFETY: both ends of the usable range are read/write.
                    unsafe {
                        stack.limit().cast::<u64>().write(token);
                        stack.top().cast::<u64>().sub(1).write(token);
                    }
                    senders[i % senders.len()].send((stack, token)).unwrap();
                    if i % 1000 == 0 {
                        trim();
                    }
                }
            })
        })
        .collect();
    drop(senders);
    for p in producers {
        p.join().unwrap();
    }
    let received: usize = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(received, PRODUCERS * PER_PRODUCER, "every stack delivered once");
    assert!(live.lock().unwrap().is_empty());
    assert_eq!(stats().leased, leased_before, "no stack leaked");
    let s = stats();
    assert_eq!(s.leased + s.pooled + s.cached, s.slots);
    done.store(true, Ordering::Relaxed);
}

#[test]
fn the_warm_cache_hands_back_the_same_stack() {
    let _serial = serial();
    let first = lease(StackSize::Small).unwrap();
    let limit = first.limit();
    drop(first);
    let slots = stats().slots;
    for _ in 0..1000 {
        let s = lease(StackSize::Small).unwrap();
        assert_eq!(s.limit(), limit, "LIFO per-thread cache");
    }
    assert_eq!(stats().slots, slots, "no new slot");
}

#[test]
fn labels_are_cleared_when_a_stack_is_returned() {
    let _serial = serial();
    let s = lease(StackSize::Small).unwrap();
    let limit = s.limit();
    s.set_label(5, "first user");
    assert_eq!(s.label(), Some((5, "first user".to_string())));
    drop(s);
    let again = lease(StackSize::Small).unwrap();
    assert_eq!(again.limit(), limit, "same slot from the cache");
    assert_eq!(again.label(), None);
    let long = "é".repeat(40);
    again.set_label(u64::MAX, &long);
    let (id, name) = again.label().unwrap();
    assert_eq!((id, name.len()), (u64::MAX, 32), "truncated at a char boundary");
}

#[test]
fn stack_geometry() {
    let _serial = serial();
    let page = page_size();
    for size in [StackSize::Small, StackSize::Normal, StackSize::Large, StackSize::at_least(5000)] {
        let s = lease(size).unwrap();
        assert_eq!(s.size(), size);
        assert_eq!(s.top() as usize - s.limit() as usize, s.usable_size());
        assert_eq!(s.usable_size(), size.bytes());
        assert_eq!(s.top() as usize % 16, 0);
        assert_eq!(s.guard(), s.limit() as usize - page..s.limit() as usize);
        // SAFETY: the whole usable range is read/write.
        unsafe { std::ptr::write_bytes(s.limit(), 0, s.usable_size()) };
        assert!(format!("{s:?}").contains("Stack"));
    }
}

#[test]
fn custom_sizes_equal_to_a_named_class_share_it() {
    let _serial = serial();
    let named = lease(StackSize::Small).unwrap();
    let custom = lease(StackSize::Bytes(32 * 1024)).unwrap();
    assert_eq!(custom.size(), StackSize::Small);
    assert_eq!(named.size(), custom.size());
    let class_count = stats().classes.iter().filter(|c| c.usable == 32 * 1024).count();
    assert_eq!(class_count, 1);
}

#[test]
fn invalid_sizes_are_rejected_with_the_fix() {
    let _serial = serial();
    let page = page_size();
    let cases = [
        (StackSize::Bytes(0), "0 bytes is invalid"),
        (StackSize::Bytes(page + 1), "StackSize::at_least"),
        (StackSize::Bytes(StackSize::MAX_BYTES + page), "std::thread::Builder::stack_size"),
        (StackSize::at_least(StackSize::MAX_BYTES + 1), "exceeds the limit"),
    ];
    for (size, fix) in cases {
        let err = lease(size).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{size:?}");
        assert!(err.to_string().contains(fix), "{size:?}: {err}");
    }
}

#[test]
fn configure_after_first_use_only_accepts_the_options_in_force() {
    let _serial = serial();
    let _warm = lease(StackSize::Small).unwrap();
    configure(Options::new()).unwrap();
    let err = configure(Options::new().thread_cache(3)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(err.to_string().contains("before the first lease"), "{err}");
    let err = configure(Options::new().thread_cache(Options::MAX_THREAD_CACHE + 1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("thread_cache"), "{err}");
}

#[test]
fn stats_account_for_every_slot() {
    let _serial = serial();
    let before = stats();
    let stacks: Vec<_> = (0..100).map(|_| lease(StackSize::Large).unwrap()).collect();
    let during = stats();
    assert_eq!(during.leased, before.leased + 100);
    assert!(during.mapped_bytes >= 100 * StackSize::LARGE_BYTES);
    let large = during.classes.iter().find(|c| c.size == StackSize::Large).unwrap();
    assert!(large.leased >= 100 && large.chunks >= 1);
    drop(stacks);
    let after = stats();
    assert_eq!(after.leased, before.leased);
    assert_eq!(after.leased + after.pooled + after.cached, after.slots);
}
