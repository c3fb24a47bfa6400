//! Scheduler micro-benchmarks, side by side with tokio in the same criterion groups (run with
//! `cargo xtask bench -p purloin-sched`). Benchmarks whose id starts with `purloin` are ours.
//!
//! - `yield`: one green thread yielding (a full G → g0 → G round trip through the run queue),
//!   next to the raw context-switch round trip of purloin-context (the floor) and tokio's
//!   `yield_now` (a task re-polled through its queue).
//! - `spawn_local`: spawn + run + exit of a no-op green thread from a green thread: through the
//!   queues (the spawner waits for a counter), and spawn + join (join-helping runs it inline);
//!   tokio: spawn + await from a task.
//! - `spawn_outside`: spawn from a plain thread + join, vs tokio `Runtime::spawn` + `block_on`.
//! - `park_handoff`: two green threads handing a baton with park/unpark, on one P and on two;
//!   tokio: two tasks with `Notify`.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use purloin_sched::{Builder, GreenThread, Scheduler, StackSize};

fn sched(workers: usize) -> Scheduler {
    Builder::new().workers(workers).stack_size(StackSize::Small).build().unwrap()
}

fn tokio_rt(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build().unwrap()
}

fn yield_group(c: &mut Criterion) {
    let mut g = c.benchmark_group("yield");
    let s = sched(2);
    g.bench_function("purloin_yield", |b| {
        b.iter_custom(|iters| {
            s.spawn(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    purloin_sched::yield_now();
                }
                t.elapsed()
            })
            .join()
            .unwrap()
        })
    });
    g.bench_function("raw_context_round_trip", |b| {
        let stack = purloin_stack::lease(StackSize::Small).unwrap();
        extern "C-unwind" fn echo(mut t: purloin_context::Transfer) -> ! {
            loop {
                // SAFETY: `t.context` is the suspended resumer; it outlives this loop.
                t = unsafe { t.context.resume(t.data) };
            }
        }
        // SAFETY: the stack outlives the context (dropped after the loop below; the context is
        // never resumed after this closure returns).
        let mut ctx =
            Some(unsafe { purloin_context::Context::new(stack.top(), stack.limit(), echo) });
        b.iter(|| {
            // SAFETY: the context is suspended in `echo` and its stack is alive.
            let t = unsafe { ctx.take().unwrap().resume(1) };
            ctx = Some(t.context);
            black_box(t.data)
        });
    });
    let rt = tokio_rt(2);
    g.bench_function("tokio_yield", |b| {
        b.iter_custom(|iters| {
            rt.block_on(rt.spawn(async move {
                let t = Instant::now();
                for _ in 0..iters {
                    tokio::task::yield_now().await;
                }
                t.elapsed()
            }))
            .unwrap()
        })
    });
    g.finish();
}

fn spawn_local(c: &mut Criterion) {
    let mut g = c.benchmark_group("spawn_local");
    let s = sched(2);
    g.bench_function("purloin_spawn_run_exit_queued", |b| {
        b.iter_custom(|iters| {
            s.spawn(move || {
                let done = Arc::new(AtomicU64::new(0));
                let t = Instant::now();
                for _ in 0..iters {
                    let d = done.clone();
                    drop(purloin_sched::spawn(move || {
                        d.fetch_add(1, Ordering::Relaxed);
                    }));
                }
                while done.load(Ordering::Relaxed) < iters {
                    purloin_sched::yield_now();
                }
                t.elapsed()
            })
            .join()
            .unwrap()
        })
    });
    g.bench_function("purloin_spawn_join", |b| {
        b.iter_custom(|iters| {
            s.spawn(move || {
                let t = Instant::now();
                for _ in 0..iters {
                    purloin_sched::spawn(|| black_box(1)).unwrap().join().unwrap();
                }
                t.elapsed()
            })
            .join()
            .unwrap()
        })
    });
    let rt = tokio_rt(2);
    g.bench_function("tokio_spawn_await", |b| {
        b.iter_custom(|iters| {
            rt.block_on(rt.spawn(async move {
                let t = Instant::now();
                for _ in 0..iters {
                    tokio::spawn(async { black_box(1) }).await.unwrap();
                }
                t.elapsed()
            }))
            .unwrap()
        })
    });
    g.finish();
}

fn spawn_outside(c: &mut Criterion) {
    let mut g = c.benchmark_group("spawn_outside");
    let s = sched(2);
    g.bench_function("purloin_spawn_join", |b| {
        b.iter(|| s.spawn(|| black_box(1)).join().unwrap());
    });
    let rt = tokio_rt(2);
    g.bench_function("tokio_spawn_block_on", |b| {
        b.iter(|| rt.block_on(rt.spawn(async { black_box(1) })).unwrap());
    });
    g.finish();
}

/// Two green threads hand a baton `iters` times with park/unpark; returns the elapsed time.
fn baton(s: &Scheduler, iters: u64) -> Duration {
    let turn = Arc::new(AtomicU64::new(0));
    let peers: Arc<[std::sync::Mutex<Option<GreenThread>>; 2]> = Arc::default();
    let started = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let hs: Vec<_> = (0..2u64)
        .map(|me| {
            let (turn, peers, started, go) =
                (turn.clone(), peers.clone(), started.clone(), go.clone());
            s.spawn(move || {
                *peers[me as usize].lock().unwrap() = purloin_sched::current();
                started.fetch_add(1, Ordering::AcqRel);
                while !go.load(Ordering::Acquire) {
                    purloin_sched::yield_now();
                }
                let other = peers[1 - me as usize].lock().unwrap().unwrap();
                loop {
                    let t = turn.load(Ordering::Acquire);
                    if t >= 2 * iters {
                        other.unpark();
                        return;
                    }
                    if t % 2 == me {
                        turn.store(t + 1, Ordering::Release);
                        other.unpark();
                    } else {
                        purloin_sched::park();
                    }
                }
            })
        })
        .collect();
    while started.load(Ordering::Acquire) < 2 {
        std::thread::yield_now();
    }
    let t = Instant::now();
    go.store(true, Ordering::Release);
    for h in hs {
        h.join().unwrap();
    }
    t.elapsed()
}

fn park_handoff(c: &mut Criterion) {
    let mut g = c.benchmark_group("park_handoff");
    let one = sched(1);
    g.bench_function("purloin_one_p", |b| b.iter_custom(|iters| baton(&one, iters)));
    drop(one);
    let two = sched(2);
    g.bench_function("purloin_two_p", |b| b.iter_custom(|iters| baton(&two, iters)));
    drop(two);
    let rt = tokio_rt(2);
    g.bench_function("tokio_notify", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async move {
                let a = Arc::new(tokio::sync::Notify::new());
                let bn = Arc::new(tokio::sync::Notify::new());
                let (a2, b2) = (a.clone(), bn.clone());
                let peer = tokio::spawn(async move {
                    for _ in 0..iters {
                        a2.notified().await;
                        b2.notify_one();
                    }
                });
                let t = Instant::now();
                for _ in 0..iters {
                    a.notify_one();
                    bn.notified().await;
                }
                let el = t.elapsed();
                peer.await.unwrap();
                el
            })
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
}

criterion_group! { name = benches; config = config(); targets = yield_group, spawn_local, spawn_outside, park_handoff }
criterion_main!(benches);
