//! Owner and thief benchmarks: purloin-deque against crossbeam-deque 0.8 and st3 0.4, in the
//! same criterion groups with the same parameters, so `cargo xtask bench -p purloin-deque`
//! prints ratios. Our function ids start with `purloin`; peers' do not.
//!
//! Groups (see the performance table):
//! * `owner_push_pop`: one thread pushes N items then pops them (LIFO). Time per iteration is for
//!   N push+pop pairs. `owner_push_pop_floor` holds `std::collections::VecDeque` as the floor.
//! * `owner_push_pop_fifo`: the same with FIFO workers (the owner pops the oldest).
//! * `st3_batch`: st3's own single-thread benchmark: push 64 (or 256) then pop them.
//! * `owner_thief_steal_half`: the owner pushes N items into a 256-slot queue (spinning while it
//!   is full) while one thief steals half at a time and consumes its loot; ends when the thief
//!   has consumed all N. Time per item is the cost of moving it to another core.
//! * `owner_thief_batch_and_pop`: as `owner_thief_steal_half`, but every thief calls
//!   crossbeam's `steal_batch_and_pop` (at most 32 items), from LIFO and FIFO victims alike.
//! * `contended_owner`: the owner pushes and pops one item N times while a thief hammers the
//!   almost-empty queue with single steals (LIFO and FIFO owners).
#![cfg(not(loom))]
// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const N: usize = 1 << 20;
const N_LABEL: &str = "1M";

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

fn owner_push_pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("owner_push_pop");
    g.throughput(Throughput::Elements(N as u64));
    {
        let w = purloin_deque::Worker::bounded(N);
        g.bench_function(BenchmarkId::new("purloin-bounded", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i)).unwrap();
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    {
        let w = purloin_deque::Worker::bounded(N).with_pop_batch(16);
        g.bench_function(BenchmarkId::new("purloin-bounded-pop-batch-16", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i)).unwrap();
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    {
        let w = purloin_deque::Worker::new();
        g.bench_function(BenchmarkId::new("purloin-growable", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i)).unwrap();
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    {
        let w = st3::lifo::Worker::new(N);
        g.bench_function(BenchmarkId::new("st3-lifo", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i)).unwrap();
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    {
        let w = crossbeam_deque::Worker::new_lifo();
        g.bench_function(BenchmarkId::new("crossbeam-lifo", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i));
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("owner_push_pop_fifo");
    g.throughput(Throughput::Elements(N as u64));
    {
        let w = purloin_deque::Worker::bounded_fifo(N);
        g.bench_function(BenchmarkId::new("purloin-fifo-bounded", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i)).unwrap();
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    {
        let w = purloin_deque::Worker::new_fifo();
        g.bench_function(BenchmarkId::new("purloin-fifo-growable", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i)).unwrap();
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    {
        let w = st3::fifo::Worker::new(N);
        g.bench_function(BenchmarkId::new("st3-fifo", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i)).unwrap();
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    {
        let w = crossbeam_deque::Worker::new_fifo();
        g.bench_function(BenchmarkId::new("crossbeam-fifo", N_LABEL), |b| {
            b.iter(|| {
                for i in 0..N {
                    w.push(black_box(i));
                }
                while let Some(x) = w.pop() {
                    black_box(x);
                }
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("owner_push_pop_floor");
    g.throughput(Throughput::Elements(N as u64));
    let mut v = VecDeque::with_capacity(N);
    g.bench_function(BenchmarkId::new("std-vecdeque", N_LABEL), |b| {
        b.iter(|| {
            for i in 0..N {
                v.push_back(black_box(i));
            }
            while let Some(x) = v.pop_back() {
                black_box(x);
            }
        })
    });
    g.finish();
}

fn st3_batch(c: &mut Criterion) {
    let mut g = c.benchmark_group("st3_batch");
    for n in [64usize, 256] {
        g.throughput(Throughput::Elements(n as u64));
        let w = purloin_deque::Worker::bounded(256);
        g.bench_function(BenchmarkId::new("purloin-bounded", n), |b| {
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i)).unwrap();
                }
                for _ in 0..n {
                    black_box(w.pop());
                }
            })
        });
        let w = purloin_deque::Worker::bounded(256).with_pop_batch(16);
        g.bench_function(BenchmarkId::new("purloin-bounded-pop-batch-16", n), |b| {
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i)).unwrap();
                }
                for _ in 0..n {
                    black_box(w.pop());
                }
            })
        });
        let w = purloin_deque::Worker::new();
        g.bench_function(BenchmarkId::new("purloin-growable", n), |b| {
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i)).unwrap();
                }
                for _ in 0..n {
                    black_box(w.pop());
                }
            })
        });
        let w = st3::lifo::Worker::new(256);
        g.bench_function(BenchmarkId::new("st3-lifo", n), |b| {
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i)).unwrap();
                }
                for _ in 0..n {
                    black_box(w.pop());
                }
            })
        });
        let w = st3::fifo::Worker::new(256);
        g.bench_function(BenchmarkId::new("st3-fifo", n), |b| {
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i)).unwrap();
                }
                for _ in 0..n {
                    black_box(w.pop());
                }
            })
        });
        let w = crossbeam_deque::Worker::new_lifo();
        g.bench_function(BenchmarkId::new("crossbeam-lifo", n), |b| {
            b.iter(|| {
                for i in 0..n {
                    w.push(black_box(i));
                }
                for _ in 0..n {
                    black_box(w.pop());
                }
            })
        });
    }
    g.finish();
}

/// Spin briefly, then yield: on a busy 2-core machine a pure spin can burn a whole time slice
/// waiting for a thread that is not running.
#[derive(Default)]
struct Backoff(u32);

impl Backoff {
    #[inline]
    fn wait(&mut self) {
        if self.0 < 64 {
            self.0 += 1;
            std::hint::spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

/// The common shape of the two-thread benchmarks: the owner's side and the thief's side of one
/// queue flavour, each returning how many items it consumed.
trait Pair: Send + Sync + 'static {
    type Owner;
    type Thief: Send;
    fn new() -> (Self::Owner, Self::Thief);
    /// Pushes `i`, spinning while the queue is full (256 items): the owner never consumes.
    fn push(o: &Self::Owner, i: usize);
    fn pop(o: &Self::Owner) -> Option<usize>;
    /// One steal-half attempt; runs (consumes) the loot; returns how many items it consumed.
    fn steal_half(t: &mut Self::Thief) -> usize;
    /// One single-item steal attempt.
    fn steal_one(t: &Self::Thief) -> bool;
}

/// purloin-deque with bounded 256-slot queues of one flavour; `BATCH_AND_POP` makes the thief
/// call crossbeam's `steal_batch_and_pop` (at most 32) instead of `steal_half_into` (at most
/// 128).
struct Purloin<const FIFO: bool, const BATCH_AND_POP: bool>;
impl<const FIFO: bool, const BATCH_AND_POP: bool> Pair for Purloin<FIFO, BATCH_AND_POP> {
    type Owner = purloin_deque::Worker<usize>;
    type Thief = (purloin_deque::Stealer<usize>, purloin_deque::Worker<usize>);
    fn new() -> (Self::Owner, Self::Thief) {
        let make = || {
            if FIFO {
                purloin_deque::Worker::bounded_fifo(256)
            } else {
                purloin_deque::Worker::bounded(256)
            }
        };
        let w = make();
        let s = w.stealer();
        (w, (s, make()))
    }
    #[inline]
    fn push(o: &Self::Owner, i: usize) {
        let mut item = i;
        let mut backoff = Backoff::default();
        while let Err(back) = o.push(item) {
            item = back;
            backoff.wait();
        }
    }
    #[inline]
    fn pop(o: &Self::Owner) -> Option<usize> {
        o.pop()
    }
    #[inline]
    fn steal_half(t: &mut Self::Thief) -> usize {
        let loot =
            if BATCH_AND_POP { t.0.steal_batch_and_pop(&t.1) } else { t.0.steal_half_into(&t.1) };
        match loot {
            purloin_deque::Steal::Success(x) => {
                black_box(x);
                let mut ran = 1;
                while let Some(x) = t.1.pop() {
                    black_box(x);
                    ran += 1;
                }
                ran
            }
            _ => 0,
        }
    }
    #[inline]
    fn steal_one(t: &Self::Thief) -> bool {
        t.0.steal().success().map(black_box).is_some()
    }
}

struct St3;
impl Pair for St3 {
    type Owner = st3::lifo::Worker<usize>;
    type Thief = (st3::lifo::Stealer<usize>, st3::lifo::Worker<usize>);
    fn new() -> (Self::Owner, Self::Thief) {
        let w = st3::lifo::Worker::new(256);
        let s = w.stealer();
        (w, (s, st3::lifo::Worker::new(256)))
    }
    #[inline]
    fn push(o: &Self::Owner, i: usize) {
        let mut item = i;
        let mut backoff = Backoff::default();
        while let Err(back) = o.push(item) {
            item = back;
            backoff.wait();
        }
    }
    #[inline]
    fn pop(o: &Self::Owner) -> Option<usize> {
        o.pop()
    }
    #[inline]
    fn steal_half(t: &mut Self::Thief) -> usize {
        match t.0.steal_and_pop(&t.1, |n| n - n / 2) {
            Ok((x, _)) => {
                black_box(x);
                let mut ran = 1;
                while let Some(x) = t.1.pop() {
                    black_box(x);
                    ran += 1;
                }
                ran
            }
            Err(_) => 0,
        }
    }
    #[inline]
    fn steal_one(t: &Self::Thief) -> bool {
        match t.0.steal_and_pop(&t.1, |_| 1) {
            Ok((x, _)) => {
                black_box(x);
                true
            }
            Err(_) => false,
        }
    }
}

/// crossbeam-deque with workers of one flavour.
struct Crossbeam<const FIFO: bool>;
impl<const FIFO: bool> Pair for Crossbeam<FIFO> {
    type Owner = crossbeam_deque::Worker<usize>;
    type Thief = (crossbeam_deque::Stealer<usize>, crossbeam_deque::Worker<usize>);
    fn new() -> (Self::Owner, Self::Thief) {
        let make = || {
            if FIFO {
                crossbeam_deque::Worker::new_fifo()
            } else {
                crossbeam_deque::Worker::new_lifo()
            }
        };
        let w = make();
        let s = w.stealer();
        (w, (s, make()))
    }
    #[inline]
    fn push(o: &Self::Owner, i: usize) {
        // Unbounded: never full. Keep the same queue depth as the bounded peers (256).
        let mut backoff = Backoff::default();
        while o.len() >= 256 {
            backoff.wait();
        }
        o.push(i);
    }
    #[inline]
    fn pop(o: &Self::Owner) -> Option<usize> {
        o.pop()
    }
    #[inline]
    fn steal_half(t: &mut Self::Thief) -> usize {
        // The batch steal with the default limit (32) — from a LIFO source crossbeam pays one
        // CAS and one fence per item, from a FIFO one a single CAS.
        match t.0.steal_batch_and_pop(&t.1) {
            crossbeam_deque::Steal::Success(x) => {
                black_box(x);
                let mut ran = 1;
                while let Some(x) = t.1.pop() {
                    black_box(x);
                    ran += 1;
                }
                ran
            }
            _ => 0,
        }
    }
    #[inline]
    fn steal_one(t: &Self::Thief) -> bool {
        t.0.steal().success().map(black_box).is_some()
    }
}

/// The owner pushes `n` items (spinning while its 256-slot queue is full); one thief steals half
/// at a time and consumes its loot, until it has consumed all `n`. Returns the wall time.
fn run_owner_thief<P: Pair>(n: usize) -> Duration {
    let (owner, thief) = P::new();
    let start = Instant::now();
    let consumed = thread::scope(|scope| {
        let thief = scope.spawn(move || {
            let mut thief = thief;
            let mut consumed = 0;
            let mut backoff = Backoff::default();
            while consumed < n {
                let got = P::steal_half(&mut thief);
                if got == 0 {
                    backoff.wait();
                } else {
                    backoff = Backoff::default();
                }
                consumed += got;
            }
            consumed
        });
        for i in 0..n {
            P::push(&owner, i);
        }
        thief.join().unwrap()
    });
    let elapsed = start.elapsed();
    assert_eq!(consumed, n, "every item consumed exactly once");
    elapsed
}

fn owner_thief_steal_half(c: &mut Criterion) {
    let mut g = c.benchmark_group("owner_thief_steal_half");
    g.throughput(Throughput::Elements(N as u64));
    bench_pair(&mut g, "purloin-bounded", run_owner_thief::<Purloin<false, false>>);
    bench_pair(&mut g, "purloin-fifo-bounded", run_owner_thief::<Purloin<true, false>>);
    bench_pair(&mut g, "st3-lifo", run_owner_thief::<St3>);
    bench_pair(&mut g, "crossbeam-lifo", run_owner_thief::<Crossbeam<false>>);
    bench_pair(&mut g, "crossbeam-fifo", run_owner_thief::<Crossbeam<true>>);
    g.finish();
}

fn owner_thief_batch_and_pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("owner_thief_batch_and_pop");
    g.throughput(Throughput::Elements(N as u64));
    bench_pair(&mut g, "purloin-lifo", run_owner_thief::<Purloin<false, true>>);
    bench_pair(&mut g, "purloin-fifo", run_owner_thief::<Purloin<true, true>>);
    bench_pair(&mut g, "crossbeam-lifo", run_owner_thief::<Crossbeam<false>>);
    bench_pair(&mut g, "crossbeam-fifo", run_owner_thief::<Crossbeam<true>>);
    g.finish();
}

/// One row of a two-thread group: `run::<P>(N)` timed per iteration.
fn bench_pair(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    run: fn(usize) -> Duration,
) {
    g.bench_function(BenchmarkId::new(name, N_LABEL), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run(N)).sum())
    });
}

/// The owner pushes and pops one item `n` times while a thief hammers single steals on the
/// (almost always empty) queue. Returns the owner's time.
fn run_contended<P: Pair>(n: usize) -> Duration {
    let (owner, thief) = P::new();
    let stop = AtomicBool::new(false);
    let started = AtomicBool::new(false);
    thread::scope(|scope| {
        let (stop, started) = (&stop, &started);
        scope.spawn(move || {
            started.store(true, Ordering::Release);
            while !stop.load(Ordering::Relaxed) {
                black_box(P::steal_one(&thief));
            }
        });
        while !started.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        for i in 0..n {
            P::push(&owner, i);
            black_box(P::pop(&owner));
        }
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        elapsed
    })
}

fn contended_owner(c: &mut Criterion) {
    let mut g = c.benchmark_group("contended_owner");
    g.throughput(Throughput::Elements(N as u64));
    bench_pair(&mut g, "purloin-bounded", run_contended::<Purloin<false, false>>);
    bench_pair(&mut g, "purloin-fifo-bounded", run_contended::<Purloin<true, false>>);
    bench_pair(&mut g, "st3-lifo", run_contended::<St3>);
    bench_pair(&mut g, "crossbeam-lifo", run_contended::<Crossbeam<false>>);
    bench_pair(&mut g, "crossbeam-fifo", run_contended::<Crossbeam<true>>);
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = owner_push_pop, st3_batch, owner_thief_steal_half, owner_thief_batch_and_pop,
        contended_owner
}
criterion_main!(benches);
