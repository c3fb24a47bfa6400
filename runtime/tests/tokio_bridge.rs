//! `purloin::tokio` (the `tokio` feature): tokio timers from green threads, panics, cancellation
//! when the green thread stops waiting, many green threads waiting at once on one worker, and a
//! stress of 100,000 bridged futures woken from tokio's threads while green threads migrate.
#![cfg(all(not(loom), feature = "tokio"))]

#[path = "rt_common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Counts drops of its instances into a shared counter.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn tokio_sleep_and_timeout_from_green_threads() {
    let _w = common::watchdog("sleep/timeout", Duration::from_secs(60));
    let h = purloin::spawn(|| {
        // tokio's timers are made inside the async block: it runs in a tokio task, where
        // their constructors find the runtime (on the green thread there is none).
        purloin::tokio::block_on(async { tokio::time::sleep(Duration::from_millis(2)).await });
        let elapsed = purloin::tokio::block_on(async {
            tokio::time::timeout(Duration::from_millis(1), std::future::pending::<()>()).await
        });
        let in_time = purloin::tokio::block_on(async {
            tokio::time::timeout(Duration::from_secs(3600), async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                9
            })
            .await
        });
        (elapsed.is_err(), in_time)
    });
    assert_eq!(h.join().unwrap(), (true, Ok(9)));
    // From a plain OS thread it blocks the thread.
    assert_eq!(purloin::tokio::block_on(async { 1 }), 1);
}

/// The bridge never enters a tokio context on a purloin worker: not before, during (seen by
/// other green threads of the same worker while the caller is parked) or after a call.
#[test]
fn no_tokio_context_on_a_worker() {
    let _w = common::watchdog("no context", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let (tx, rx) = purloin::sync::channel::bounded::<()>(0);
    let waiter = rt.spawn(move || {
        assert!(tokio::runtime::Handle::try_current().is_err());
        let in_task = purloin::tokio::block_on(async move {
            // Hold the waiter in tokio until the other green thread has looked.
            let rx = rx;
            tokio::task::spawn_blocking(move || rx.recv()).await.unwrap().unwrap();
            tokio::runtime::Handle::try_current().is_ok()
        });
        (in_task, tokio::runtime::Handle::try_current().is_err())
    });
    let looker = rt.spawn(move || {
        let clean = tokio::runtime::Handle::try_current().is_err();
        tx.send(()).unwrap();
        clean
    });
    assert!(looker.join().unwrap(), "no context while the waiter is parked");
    assert_eq!(waiter.join().unwrap(), (true, true));
}

/// 1,000 green threads on ONE worker wait in tokio at the same time: each future waits on a
/// tokio barrier of 1,000, which opens only if none of the waits blocked the worker.
#[test]
fn thousand_green_threads_wait_at_once_on_one_worker() {
    let _w = common::watchdog("one worker", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(1000));
    let handles: Vec<_> = (0..1000)
        .map(|i| {
            let b = barrier.clone();
            rt.spawn(move || {
                purloin::tokio::block_on(async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    b.wait().await;
                    i
                })
            })
        })
        .collect();
    let sum: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 999 * 1000 / 2);
}

#[test]
fn a_panic_in_the_future_is_the_green_threads_panic() {
    let _w = common::watchdog("panic", Duration::from_secs(60));
    let h = purloin::spawn(|| {
        purloin::tokio::block_on(async {
            tokio::task::yield_now().await;
            std::panic::panic_any(17u32)
        })
    });
    let err = h.join().unwrap_err();
    assert_eq!(err.downcast_ref::<u32>(), Some(&17));
}

/// A green thread unwound while it waits (its runtime shuts down) aborts the tokio task: the
/// future is dropped.
#[test]
fn unwinding_green_thread_drops_the_future() {
    let _w = common::watchdog("cancel", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(tokio::sync::Notify::new());
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let (d, s) = (drops.clone(), started.clone());
    let h = rt.spawn(move || {
        purloin::tokio::block_on(async move {
            let _guard = Counted(d);
            s.notify_one();
            std::future::pending::<()>().await
        })
    });
    // Wait (on the tokio side) until the future runs, then shut the runtime down.
    purloin::tokio::block_on(async move { started.notified().await });
    // Until the green thread is parked in `block_on` (the future may run before it parks).
    while rt.scheduler().parked().is_empty() {
        std::thread::yield_now();
    }
    // The timeout is how long shutdown lets live green threads finish before it unwinds the
    // parked ones (ours never finishes by itself).
    let report = rt.shutdown_timeout(Duration::from_millis(10));
    assert_eq!(report.cancelled, 1, "{report:?}");
    assert!(h.join().is_err(), "the waiting green thread was unwound");
    // tokio drops the aborted future on one of its threads: wait for it without sleeping.
    while drops.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

/// `block_on_with` uses the given runtime: what the future spawns runs on its threads.
#[test]
fn a_user_supplied_handle() {
    let _w = common::watchdog("handle", Duration::from_secs(60));
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("user-tokio")
        .enable_all()
        .build()
        .unwrap();
    let handle = tokio_rt.handle().clone();
    // Once `block_on` has a handle in use, `set_handle` gives the new one back.
    let _ = purloin::tokio::handle();
    assert!(purloin::tokio::set_handle(handle.clone()).is_err());
    let h = purloin::spawn(move || {
        purloin::tokio::block_on_with(&handle, async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let spawned = tokio::spawn(async { std::thread::current().name().map(str::to_owned) });
            spawned.await.unwrap()
        })
    });
    assert_eq!(h.join().unwrap().as_deref(), Some("user-tokio"));
}

/// A purloin wait inside a bridged future would park the green thread with tokio's context
/// entered on its worker: it panics instead, with a message that says why, and the worker is
/// left without a context (for this green thread afterwards and for the next one).
#[test]
fn a_purloin_wait_inside_a_bridged_future_panics_and_leaves_no_context() {
    let _w = common::watchdog("no switch", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let h = rt.spawn(|| {
        let caught = std::panic::catch_unwind(|| {
            purloin::tokio::block_on(async {
                purloin::time::sleep(Duration::from_millis(1));
            })
        });
        let msg = caught.unwrap_err().downcast::<String>().map(|m| *m).unwrap_or_default();
        (msg, tokio::runtime::Handle::try_current().is_err())
    });
    let (msg, clean) = h.join().unwrap();
    assert!(msg.contains("purloin::tokio::block_on"), "{msg}");
    assert!(clean, "no tokio context left on the green thread's worker");
    let next = rt.spawn(|| tokio::runtime::Handle::try_current().is_err());
    assert!(next.join().unwrap(), "no tokio context for the next green thread");
    // A bridged future that awaits (parks between polls) is fine on the same worker.
    let ok = rt.spawn(|| {
        purloin::tokio::block_on(async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            tokio::runtime::Handle::try_current().is_ok()
        })
    });
    assert!(ok.join().unwrap());
}

/// 100,000 bridged futures, each woken from a tokio thread (a task spawned there completes a
/// oneshot the future awaits), by 200
/// green threads that yield between futures (so they move between the two workers): every
/// future completes exactly once, and every future's capture and output is dropped once.
#[test]
fn stress_100k_bridged_futures_while_migrating() {
    let _w = common::watchdog("stress", Duration::from_secs(300));
    const THREADS: usize = 200;
    const EACH: usize = 500;
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let captures = Arc::new(AtomicUsize::new(0));
    let outputs = Arc::new(AtomicUsize::new(0));
    let moves = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (c, o, moves) = (captures.clone(), outputs.clone(), moves.clone());
            rt.spawn(move || {
                let mut mine = Vec::with_capacity(EACH);
                let mut last = std::thread::current().id();
                for i in 0..EACH {
                    let id = t * EACH + i;
                    let (guard, out) = (Counted(c.clone()), Counted(o.clone()));
                    let (got, out) = purloin::tokio::block_on(async move {
                        let _guard = guard;
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        tokio::spawn(async move { tx.send(()) });
                        rx.await.unwrap();
                        (id, out)
                    });
                    drop(out);
                    mine.push(got);
                    purloin::yield_now();
                    let now = std::thread::current().id();
                    if now != last {
                        moves.fetch_add(1, Ordering::Relaxed);
                        last = now;
                    }
                }
                mine
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for h in handles {
        seen.extend(h.join().unwrap());
    }
    let total = THREADS * EACH;
    assert_eq!(seen.len(), total, "each future completed exactly once");
    assert_eq!(outputs.load(Ordering::SeqCst), total, "each output dropped once");
    assert_eq!(captures.load(Ordering::SeqCst), total, "each future dropped once");
    eprintln!("stress: {} OS-thread moves of green threads", moves.load(Ordering::Relaxed));
}
