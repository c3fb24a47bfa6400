//! Loom models of `purloin::future::block_on`'s wake-vs-park race, on its real code: the
//! `notified` flag is a loom atomic, OS-thread parks are loom parks, and green threads run on
//! purloin's real scheduler on loom.
//!
//! Run with `cargo xtask loom -p purloin block_on_`. A lost wake-up shows up as a loom
//! deadlock ("all threads blocked").
//!
//! Mutation checks (each made in `runtime/src/future.rs`, run, and reverted; what loom
//! reported):
//! - clearing the flag after the poll instead of consuming it before the next one
//!   (`poll; notified.store(false); while !notified.load() { park() }`): all three models fail
//!   with "deadlock" (a wake during the poll was erased, and its unpark token was spent by the
//!   first park);
//! - parking before the first poll with the real waker (only the no-op waker had been given
//!   out): `block_on_os_waiter_os_waker` fails with "deadlock".
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use purloin::future::block_on;

/// A one-shot future: `fire` sets `done` and wakes the waker of the latest poll.
struct Shared {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

struct OneShot(Arc<Shared>);

impl Future for OneShot {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.0.done.load(Ordering::Acquire) { Poll::Ready(()) } else { Poll::Pending }
    }
}

fn fire(s: &Shared) {
    s.done.store(true, Ordering::Release);
    let w = s.waker.lock().unwrap().take();
    if let Some(w) = w {
        w.wake();
    }
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared { done: AtomicBool::new(false), waker: Mutex::new(None) })
}

/// An OS thread in `block_on`, woken by another OS thread: the wake may come before, during
/// or after the poll, and before or after the park.
#[test]
fn block_on_os_waiter_os_waker() {
    loom::model(|| {
        let s = shared();
        let s2 = s.clone();
        let t = thread::spawn(move || fire(&s2));
        block_on(OneShot(s));
        t.join().unwrap();
    });
}

/// Two wakers race (clones of one waker, from two threads, one of them twice): one wake is
/// enough, none is lost, and the waiter's writes-before-wake guarantee holds for the data.
#[test]
fn block_on_os_waiter_two_wakers() {
    loom::model(|| {
        let s = shared();
        let data = Arc::new(AtomicUsize::new(0));
        let (s2, d2) = (s.clone(), data.clone());
        let t = thread::spawn(move || {
            d2.store(1, Ordering::Relaxed);
            fire(&s2);
        });
        let s3 = s.clone();
        let t2 = thread::spawn(move || {
            let w = s3.waker.lock().unwrap().clone();
            if let Some(w) = w {
                w.wake_by_ref();
                w.wake();
            }
        });
        block_on(OneShot(s));
        assert_eq!(data.load(Ordering::Relaxed), 1, "the firing thread's write is visible");
        t.join().unwrap();
        t2.join().unwrap();
    });
}

/// A green thread in `block_on` on a one-worker scheduler, woken by a plain OS thread (the
/// wake goes through `GreenThread::unpark`).
#[test]
fn block_on_green_waiter_os_waker() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.check(|| {
        let sched = purloin::sched::Builder::new().workers(1).monitor(false).build().unwrap();
        let s = shared();
        let s2 = s.clone();
        let h = sched.spawn(move || block_on(OneShot(s2)));
        let t = thread::spawn(move || fire(&s));
        h.join().unwrap();
        t.join().unwrap();
        drop(sched);
    });
}

/// An OS thread awaits a green thread's `JoinHandle` through `block_on`: the first poll (with
/// the no-op waker) registers the handle's forwarding waker in the join packet, the second
/// replaces the waker it forwards to (sched's `join_future` J1) while the child may complete
/// at any point. (J1's mutation check is in sched's own model, which can explore more
/// preemptions: at bound 1 this model does not reach the window, and at bound 2 models with
/// the real scheduler trip loom's own `state.notified` assertion, mutated or not.)
#[test]
fn block_on_join_handle() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.check(|| {
        let sched = purloin::sched::Builder::new().workers(1).monitor(false).build().unwrap();
        let h = sched.spawn(|| 7u32);
        assert_eq!(block_on(h).unwrap(), 7);
        drop(sched);
    });
}
