//! Injector benchmarks: purloin-deque's `Injector` against crossbeam-deque 0.8's `Injector`, in
//! the same criterion groups with the same parameters (our ids start with `purloin`).
//!
//! * `injector_1p1c`: one producer pushes N items one at a time; one consumer takes one item
//!   plus a batch of up to 16 into its local worker (crossbeam: limit 17, the same 1 + 16) and
//!   runs them, until it has consumed all N. Time per iteration is for N items.
//! * `injector_1p1c_steal`: the same, but the consumer takes one item per `steal()`.
//! * `injector_batch_1p1c`: as `injector_1p1c`, but the producer hands items over in batches
//!   of 128 (`push_batch` here; crossbeam has no batch push, so 128 `push` calls).
#![cfg(not(loom))]
// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const N: usize = 1 << 20;
const N_LABEL: &str = "1M";
const BATCH: usize = 16;
const PUSH_BATCH: usize = 128;

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
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

trait Global: Sync + Default {
    type Local;
    fn local() -> Self::Local;
    fn push(&self, item: usize);
    fn push_batch(&self, items: std::ops::Range<usize>);
    /// One batch steal; consumes the loot; returns how many items it consumed.
    fn take(&self, local: &Self::Local) -> usize;
    /// One `steal()`; consumes the item; returns how many items it consumed (0 or 1).
    fn take_one(&self) -> usize;
}

#[derive(Default)]
struct Purloin(purloin_deque::Injector<usize>);
impl Global for Purloin {
    type Local = purloin_deque::Worker<usize>;
    fn local() -> Self::Local {
        purloin_deque::Worker::bounded(256)
    }
    #[inline]
    fn push(&self, item: usize) {
        self.0.push(item);
    }
    #[inline]
    fn push_batch(&self, items: std::ops::Range<usize>) {
        self.0.push_batch(items);
    }
    #[inline]
    fn take(&self, local: &Self::Local) -> usize {
        match self.0.steal_batch_with_limit_and_pop(local, BATCH + 1) {
            purloin_deque::Steal::Success(x) => {
                black_box(x);
                let mut n = 1;
                while let Some(x) = local.pop() {
                    black_box(x);
                    n += 1;
                }
                n
            }
            _ => 0,
        }
    }
    #[inline]
    fn take_one(&self) -> usize {
        usize::from(self.0.steal().success().map(black_box).is_some())
    }
}

#[derive(Default)]
struct Crossbeam(crossbeam_deque::Injector<usize>);
impl Global for Crossbeam {
    type Local = crossbeam_deque::Worker<usize>;
    fn local() -> Self::Local {
        crossbeam_deque::Worker::new_lifo()
    }
    #[inline]
    fn push(&self, item: usize) {
        self.0.push(item);
    }
    #[inline]
    fn push_batch(&self, items: std::ops::Range<usize>) {
        for item in items {
            self.0.push(item);
        }
    }
    #[inline]
    fn take(&self, local: &Self::Local) -> usize {
        // crossbeam's limit counts the returned item too: 1 + 16.
        match self.0.steal_batch_with_limit_and_pop(local, BATCH + 1) {
            crossbeam_deque::Steal::Success(x) => {
                black_box(x);
                let mut n = 1;
                while let Some(x) = local.pop() {
                    black_box(x);
                    n += 1;
                }
                n
            }
            _ => 0,
        }
    }
    #[inline]
    fn take_one(&self) -> usize {
        usize::from(self.0.steal().success().map(black_box).is_some())
    }
}

/// How the 1P1C producer pushes and the consumer pops.
#[derive(Clone, Copy)]
enum Mode {
    /// `push` one at a time; batch steals of 1 + 16.
    PerItemPush,
    /// `push` one at a time; one `steal()` per item.
    PerItemPushAndPop,
    /// `push_batch` of 128; batch steals of 1 + 16.
    BatchPush,
}

fn run_1p1c<G: Global>(n: usize, mode: Mode) -> Duration {
    let global = G::default();
    let start = Instant::now();
    let consumed = thread::scope(|scope| {
        let global = &global;
        let consumer = scope.spawn(move || {
            let local = G::local();
            let mut consumed = 0;
            let mut backoff = Backoff::default();
            while consumed < n {
                let got = match mode {
                    Mode::PerItemPushAndPop => global.take_one(),
                    Mode::PerItemPush | Mode::BatchPush => global.take(&local),
                };
                if got == 0 {
                    backoff.wait();
                } else {
                    backoff = Backoff::default();
                }
                consumed += got;
            }
            consumed
        });
        if matches!(mode, Mode::BatchPush) {
            let mut i = 0;
            while i < n {
                let end = (i + PUSH_BATCH).min(n);
                global.push_batch(i..end);
                i = end;
            }
        } else {
            for i in 0..n {
                global.push(i);
            }
        }
        consumer.join().unwrap()
    });
    let elapsed = start.elapsed();
    assert_eq!(consumed, n, "every item consumed exactly once");
    elapsed
}

fn injector_1p1c(c: &mut Criterion) {
    for (group, mode) in [
        ("injector_1p1c", Mode::PerItemPush),
        ("injector_1p1c_steal", Mode::PerItemPushAndPop),
        ("injector_batch_1p1c", Mode::BatchPush),
    ] {
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Elements(N as u64));
        g.bench_function(BenchmarkId::new("purloin", N_LABEL), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run_1p1c::<Purloin>(N, mode)).sum())
        });
        g.bench_function(BenchmarkId::new("crossbeam", N_LABEL), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run_1p1c::<Crossbeam>(N, mode)).sum())
        });
        g.finish();
    }
}

/// Single-thread components of the 1P1C case, less sensitive to scheduling noise: pushing N
/// items, and draining N pre-pushed items with batch steals.
fn injector_components(c: &mut Criterion) {
    fn push_all<G: Global>(g: &G) {
        for i in 0..N {
            g.push(i);
        }
    }
    fn drain_all<G: Global>(g: &G, local: &G::Local) {
        let mut consumed = 0;
        while consumed < N {
            consumed += g.take(local);
        }
    }
    let mut g = c.benchmark_group("injector_push_only");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("purloin", N_LABEL), |b| {
        b.iter_batched(Purloin::default, |q| push_all(&q), criterion::BatchSize::PerIteration)
    });
    g.bench_function(BenchmarkId::new("crossbeam", N_LABEL), |b| {
        b.iter_batched(Crossbeam::default, |q| push_all(&q), criterion::BatchSize::PerIteration)
    });
    g.finish();

    let mut g = c.benchmark_group("injector_drain_only");
    g.throughput(Throughput::Elements(N as u64));
    let full = || {
        let q = Purloin::default();
        push_all(&q);
        (q, Purloin::local())
    };
    g.bench_function(BenchmarkId::new("purloin", N_LABEL), |b| {
        b.iter_batched(full, |(q, l)| drain_all(&q, &l), criterion::BatchSize::PerIteration)
    });
    let full = || {
        let q = Crossbeam::default();
        push_all(&q);
        (q, Crossbeam::local())
    };
    g.bench_function(BenchmarkId::new("crossbeam", N_LABEL), |b| {
        b.iter_batched(full, |(q, l)| drain_all(&q, &l), criterion::BatchSize::PerIteration)
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = injector_1p1c, injector_components
}
criterion_main!(benches);
