//! `purloin::future::block_on` (parks only the green thread; wakes from anywhere, before the
//! park, many times, after migration) and awaiting green threads (`JoinHandle` and
//! `ScopedJoinHandle` as futures) in tokio, `futures::executor`, pollster and `block_on`.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use purloin::future::block_on;

static_assertions::assert_impl_all!(purloin::JoinFuture<u8>: Send, Sync, Unpin);
static_assertions::assert_impl_all!(purloin::ScopedJoinFuture<'static, u8>: Send, Sync, Unpin);

/// A one-shot future completed by `Trigger::fire` from any thread.
struct OneShot {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
    polls: AtomicUsize,
}

#[derive(Clone)]
struct Trigger(Arc<Shared>);

fn oneshot() -> (OneShot, Trigger) {
    let shared = Arc::new(Shared::default());
    (OneShot { shared: shared.clone() }, Trigger(shared))
}

impl Trigger {
    fn fire(&self) {
        self.0.done.store(true, Ordering::Release);
        if let Some(w) = self.0.waker.lock().unwrap().take() {
            w.wake();
        }
    }
}

impl Future for OneShot {
    type Output = usize;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        let polls = self.shared.polls.fetch_add(1, Ordering::Relaxed) + 1;
        *self.shared.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.shared.done.load(Ordering::Acquire) { Poll::Ready(polls) } else { Poll::Pending }
    }
}

#[test]
fn ready_future_on_green_and_os_threads() {
    let _w = common::watchdog("ready", Duration::from_secs(60));
    assert_eq!(block_on(async { 1 + 1 }), 2);
    let h = purloin::spawn(|| block_on(std::future::ready(5)));
    assert_eq!(h.join().unwrap(), 5);
}

#[test]
fn wake_from_another_green_thread_parks_only_the_waiter() {
    let _w = common::watchdog("green wake", Duration::from_secs(60));
    // One worker: if block_on blocked the worker, the firing green thread could never run.
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let got = rt.block_on(|| {
        let mut total = 0;
        for _ in 0..1000 {
            let (fut, trigger) = oneshot();
            let firer = purloin::spawn(move || trigger.fire());
            total += usize::from(block_on(fut) >= 1);
            firer.join().unwrap();
        }
        total
    });
    assert_eq!(got, 1000);
}

/// A future that wakes itself during its own poll (before the green thread parks), `n` times.
struct SelfWake(usize);

impl Future for SelfWake {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        // Woken twice, by clones, before Pending is even returned: neither is lost, and the
        // second costs nothing.
        let clone = cx.waker().clone();
        cx.waker().wake_by_ref();
        clone.wake();
        Poll::Pending
    }
}

#[test]
fn wake_before_park_is_not_lost() {
    let _w = common::watchdog("wake before park", Duration::from_secs(60));
    let h = purloin::spawn(|| block_on(SelfWake(10_000)));
    h.join().unwrap();
    block_on(SelfWake(100));
}

/// Needs `n` wakes, each from a fresh OS thread; yields the green thread in every poll so it
/// moves between workers.
struct ManyWakes {
    left: usize,
    wakers: Arc<Mutex<Vec<Waker>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Future for ManyWakes {
    type Output = usize;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        purloin::yield_now();
        if self.left == 0 {
            for t in self.threads.drain(..) {
                t.join().unwrap();
            }
            return Poll::Ready(self.wakers.lock().unwrap().len());
        }
        self.left -= 1;
        let waker = cx.waker().clone();
        self.wakers.lock().unwrap().push(waker.clone());
        self.threads.push(std::thread::spawn(move || {
            // The same waker, used several times by value and by reference.
            waker.wake_by_ref();
            waker.wake_by_ref();
            waker.wake();
        }));
        Poll::Pending
    }
}

#[test]
fn waker_from_os_threads_many_times_while_migrating() {
    let _w = common::watchdog("many wakes", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            rt.spawn(|| {
                block_on(ManyWakes { left: 200, wakers: Arc::default(), threads: Vec::new() })
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 200);
    }
}

#[test]
fn stale_waker_after_return_is_harmless() {
    let _w = common::watchdog("stale waker", Duration::from_secs(60));
    let h = purloin::spawn(|| {
        let (fut, trigger) = oneshot();
        let kept = trigger.0.clone();
        let t = trigger.clone();
        let firer = purloin::spawn(move || t.fire());
        block_on(fut);
        firer.join().unwrap();
        // The future's source still holds a waker clone (the last poll's): wake it later.
        *kept.waker.lock().unwrap() = None;
        let (fut2, trigger2) = oneshot();
        trigger2.fire();
        block_on(fut2)
    });
    assert_eq!(h.join().unwrap(), 1);
}

#[test]
fn os_thread_waits_for_a_green_waker() {
    let _w = common::watchdog("os waiter", Duration::from_secs(60));
    for _ in 0..200 {
        let (fut, trigger) = oneshot();
        let firer = purloin::spawn(move || trigger.fire());
        assert!(block_on(fut) >= 1);
        firer.join().unwrap();
    }
}

#[test]
fn panics_in_the_future_propagate() {
    let _w = common::watchdog("panic", Duration::from_secs(60));
    let h = purloin::spawn(|| block_on(async { panic!("boom in a future") }));
    let err = h.join().unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"boom in a future"));
}

// ---- awaiting green threads ----

#[test]
fn join_handle_awaited_in_tokio() {
    let _w = common::watchdog("tokio await", Duration::from_secs(60));
    for rt in [
        tokio::runtime::Builder::new_current_thread().build().unwrap(),
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap(),
    ] {
        let sum = rt.block_on(async {
            let hs: Vec<_> = (0..1000u64).map(|i| purloin::spawn(move || i)).collect();
            let mut sum = 0;
            for h in hs {
                sum += h.await.unwrap();
            }
            sum
        });
        assert_eq!(sum, 499_500);
        // A panic is the same Err as `join`'s.
        let err = rt.block_on(async { purloin::spawn(|| panic!("child")).await }).unwrap_err();
        assert_eq!(err.downcast_ref::<&str>(), Some(&"child"));
        // Spawned from a tokio task, awaited from another.
        let out = rt.block_on(async {
            let h = tokio::spawn(async { purloin::spawn(|| 3) }).await.unwrap();
            tokio::spawn(async move { h.await.unwrap() }).await.unwrap()
        });
        assert_eq!(out, 3);
    }
}

#[test]
fn join_handle_awaited_in_futures_executor_and_pollster() {
    let _w = common::watchdog("other executors", Duration::from_secs(60));
    let h = purloin::spawn(|| 7);
    assert_eq!(futures::executor::block_on(h.into_future()).unwrap(), 7);
    let h = purloin::spawn(|| 8);
    assert_eq!(pollster::block_on(h.into_future()).unwrap(), 8);
    let err = pollster::block_on(purloin::spawn(|| panic!("p")).into_future()).unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"p"));
    // A child that is blocked until the awaiting side has registered.
    let (fut, trigger) = oneshot();
    let h = purloin::spawn(move || block_on(fut));
    let t = std::thread::spawn(move || {
        std::thread::yield_now();
        trigger.fire();
    });
    assert!(futures::executor::block_on(h.into_future()).unwrap() >= 1);
    t.join().unwrap();
}

#[test]
fn join_handle_awaited_on_a_green_thread() {
    let _w = common::watchdog("green await", Duration::from_secs(60));
    let h = purloin::spawn(|| {
        let kids: Vec<_> = (0..100u32).map(|i| purloin::spawn(move || i)).collect();
        block_on(async move {
            let mut s = 0;
            for k in kids {
                s += k.await.unwrap();
            }
            s
        })
    });
    assert_eq!(h.join().unwrap(), 4950);
}

#[test]
fn join_future_after_wait_timeout() {
    let _w = common::watchdog("wait_timeout then await", Duration::from_secs(60));
    let (fut, trigger) = oneshot();
    let mut h = purloin::spawn(move || block_on(fut));
    assert!(!h.wait_timeout(Duration::from_millis(1)) || h.is_finished());
    trigger.fire();
    assert!(pollster::block_on(h.into_future()).unwrap() >= 1);
}

/// Dropping the future detaches: the green thread still runs, its result is dropped once.
#[test]
fn dropped_join_future_detaches() {
    let _w = common::watchdog("detach", Duration::from_secs(60));
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct D;
    impl Drop for D {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (fut, trigger) = oneshot();
    let (done_fut, done) = oneshot();
    let h = purloin::spawn(move || {
        block_on(fut);
        let d = D;
        done.fire();
        d
    });
    let mut jf = Box::pin(h.into_future());
    let waker = Waker::noop();
    assert!(jf.as_mut().poll(&mut Context::from_waker(waker)).is_pending());
    drop(jf);
    trigger.fire();
    block_on(done_fut);
    // The result is dropped by the completer after `done` fired: wait for it without sleeps.
    while DROPS.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
}

#[test]
fn scoped_join_handle_awaited() {
    let _w = common::watchdog("scoped await", Duration::from_secs(60));
    let data = [1u64, 2, 3];
    let h = purloin::spawn(move || {
        purloin::scope(|s| {
            let a = s.spawn(|| data.iter().sum::<u64>());
            let b = s.spawn(|| -> u64 { panic!("scoped") });
            let a = block_on(a).unwrap();
            let b = block_on(b);
            (a, b.is_err())
        })
    });
    assert_eq!(h.join().unwrap(), (6, true));
}
