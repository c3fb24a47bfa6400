//! `purloin::future::block_on` against `futures::executor::block_on` and `pollster::block_on`
//! in the same groups (`cargo bench -p purloin --bench future`). Everything runs with 2
//! workers.
//!
//! - `block_on_ready`: a future that is ready at once, from a green thread and from an OS
//!   thread (the cost of the call itself).
//! - `block_on_wake`: a green thread spawns a green thread that completes the future it then
//!   waits for (spawn + wake + park + resume). `park_unpark` is the same shape with a plain
//!   `park` / `GreenThread::unpark`: the floor. The peers park the worker's OS thread (the
//!   waking green thread runs on the other worker).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

fn purloin_rt() -> purloin::Runtime {
    purloin::runtime::Builder::new().workers(2).build().unwrap()
}

/// Runs `iters` iterations of `f` on a green thread and returns the time they took.
fn on_green(rt: &purloin::Runtime, iters: u64, f: fn()) -> Duration {
    rt.block_on(|| {
        let start = Instant::now();
        for _ in 0..iters {
            f();
        }
        start.elapsed()
    })
}

fn ready(c: &mut Criterion) {
    let mut g = c.benchmark_group("block_on_ready");
    let rt = purloin_rt();
    g.bench_function("purloin/green", |b| {
        b.iter_custom(|n| {
            on_green(&rt, n, || {
                black_box(purloin::future::block_on(async { black_box(1u64) }));
            })
        })
    });
    g.bench_function("futures/green", |b| {
        b.iter_custom(|n| {
            on_green(&rt, n, || {
                black_box(futures::executor::block_on(async { black_box(1u64) }));
            })
        })
    });
    g.bench_function("pollster/green", |b| {
        b.iter_custom(|n| {
            on_green(&rt, n, || {
                black_box(pollster::block_on(async { black_box(1u64) }));
            })
        })
    });
    g.bench_function("purloin/os", |b| {
        b.iter(|| purloin::future::block_on(async { black_box(1u64) }))
    });
    g.bench_function("futures/os", |b| {
        b.iter(|| futures::executor::block_on(async { black_box(1u64) }))
    });
    g.bench_function("pollster/os", |b| b.iter(|| pollster::block_on(async { black_box(1u64) })));
    g.finish();
}

/// A one-shot future completed by `fire` from another thread.
#[derive(Default)]
struct Shot {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

struct Wait(Arc<Shot>);

impl Future for Wait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.done.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.0.done.load(Ordering::Acquire) { Poll::Ready(()) } else { Poll::Pending }
    }
}

fn fire(s: &Shot) {
    s.done.store(true, Ordering::Release);
    let w = s.waker.lock().unwrap().take();
    if let Some(w) = w {
        w.wake();
    }
}

fn wake_round(block_on: fn(Wait)) {
    let shot = Arc::new(Shot::default());
    let s = shot.clone();
    let firer = purloin::spawn(move || fire(&s));
    block_on(Wait(shot));
    firer.join().unwrap();
}

fn wake(c: &mut Criterion) {
    let mut g = c.benchmark_group("block_on_wake");
    let rt = purloin_rt();
    g.bench_function("park_unpark", |b| {
        b.iter_custom(|n| {
            on_green(&rt, n, || {
                let flag = Arc::new(AtomicBool::new(false));
                let (f, me) = (flag.clone(), purloin::current().unwrap());
                let firer = purloin::spawn(move || {
                    f.store(true, Ordering::Release);
                    me.unpark();
                });
                while !flag.load(Ordering::Acquire) {
                    purloin::park();
                }
                firer.join().unwrap();
            })
        })
    });
    g.bench_function("purloin", |b| {
        b.iter_custom(|n| on_green(&rt, n, || wake_round(purloin::future::block_on)))
    });
    g.bench_function("futures", |b| {
        b.iter_custom(|n| on_green(&rt, n, || wake_round(futures::executor::block_on)))
    });
    g.bench_function("pollster", |b| {
        b.iter_custom(|n| on_green(&rt, n, || wake_round(pollster::block_on)))
    });
    g.finish();
}

criterion_group!(benches, ready, wake);
criterion_main!(benches);
