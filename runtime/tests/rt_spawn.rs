//! The facade's spawning API: `spawn` anywhere, joins from OS and green threads, `Builder`,
//! panics, pinned green threads, 100,000 concurrent green threads.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use purloin::{Builder, StackSize};

#[test]
fn spawn_from_main_uses_the_global_runtime() {
    let _w = common::watchdog("global spawn", Duration::from_secs(60));
    let h = purloin::spawn(|| purloin::current().is_some());
    assert!(h.join().unwrap(), "the closure runs on a green thread");
    assert!(purloin::current().is_none(), "the test thread is a plain thread");
}

#[test]
fn join_from_a_green_thread_and_from_an_os_thread() {
    let _w = common::watchdog("joins", Duration::from_secs(60));
    let outer = purloin::spawn(|| {
        let inner = purloin::spawn(|| 21);
        inner.join().unwrap() * 2
    });
    assert_eq!(outer.join().unwrap(), 42);
    let h = purloin::spawn(|| "x");
    let from_thread = std::thread::spawn(move || h.join().unwrap()).join().unwrap();
    assert_eq!(from_thread, "x");
}

#[test]
fn builder_names_and_stack_sizes() {
    let _w = common::watchdog("builder", Duration::from_secs(60));
    // `name` takes a `String`, as std's thread builder does: `"..".into()` infers it.
    let h = Builder::new()
        .name("named".into())
        .stack_size(StackSize::Large)
        .spawn(|| purloin::current().unwrap().name().map(|n| n.to_string()))
        .unwrap();
    assert_eq!(h.join().unwrap().as_deref(), Some("named"));
    let err = Builder::new().stack_size(StackSize::Bytes(1000)).spawn(|| ()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("page size"), "{err}");
    let err = Builder::new().stack_size(StackSize::Bytes(1 << 40)).spawn(|| ()).unwrap_err();
    assert!(err.to_string().contains("exceeds"), "{err}");
}

#[test]
fn a_panic_is_returned_by_join() {
    let _w = common::watchdog("panic", Duration::from_secs(60));
    let h = purloin::spawn(|| -> i32 { panic!("kaboom {}", 7) });
    let err = h.join().unwrap_err();
    // The payload is a String, or a &str when the compiler folded the format string.
    let msg = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied());
    assert_eq!(msg, Some("kaboom 7"));
    assert_eq!(purloin::spawn(|| 1).join().unwrap(), 1);
}

#[test]
fn spawn_urgent_runs_the_child_before_the_parent_continues() {
    let _w = common::watchdog("urgent", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let order = rt.block_on(|| {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let l2 = log.clone();
        let h = purloin::spawn_urgent(move || l2.lock().unwrap().push("child"));
        log.lock().unwrap().push("parent");
        h.join().unwrap();
        log.lock().unwrap().clone()
    });
    assert_eq!(order, ["child", "parent"]);
}

#[test]
fn pinned_green_threads_keep_their_os_thread() {
    let _w = common::watchdog("pinned", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    rt.block_on(|| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                Builder::new()
                    .pinned(true)
                    .spawn(|| {
                        let me = std::thread::current().id();
                        for _ in 0..200 {
                            purloin::yield_now();
                            purloin::sleep(Duration::from_micros(50));
                            assert_eq!(std::thread::current().id(), me);
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    let err = Builder::new().pinned(true).spawn(|| ()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

/// 100,000 green threads alive at once (each parked on its own stack), then released.
#[test]
fn a_hundred_thousand_concurrent_green_threads() {
    let _w = common::watchdog("100k", Duration::from_secs(300));
    const N: usize = 100_000;
    let rt = purloin::runtime::Builder::new().stack_size(StackSize::Small).build().unwrap();
    let parked = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let hs: Vec<_> = (0..N)
        .map(|i| {
            let (p, g) = (parked.clone(), go.clone());
            rt.spawn(move || {
                p.fetch_add(1, Ordering::SeqCst);
                while !g.load(Ordering::Acquire) {
                    purloin::park();
                }
                i
            })
        })
        .collect();
    while parked.load(Ordering::SeqCst) < N {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(rt.stats().live, N);
    go.store(true, Ordering::Release);
    for h in &hs {
        h.thread().unpark();
    }
    let sum: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, N * (N - 1) / 2);
}

#[test]
fn join_helping_is_visible_in_stats() {
    let _w = common::watchdog("join helping", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let before = rt.stats().total.inline_joins;
    rt.block_on(|| {
        for _ in 0..100 {
            purloin::spawn(|| 1).join().unwrap();
        }
    });
    assert!(rt.stats().total.inline_joins >= before + 100);
}
