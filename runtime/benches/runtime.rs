//! End-to-end runtime benchmarks against tokio, may and rayon in the same criterion groups
//! (`cargo xtask bench -p purloin runtime`); ids starting with `purloin` are ours. Everything
//! runs with 2 workers. Go numbers for the same shapes come from `bench-go/runtime/main.go`.
//!
//! - `spawn_join_100k`: from inside the runtime, spawn 100,000 no-op tasks, then join them all
//!   (may: in chunks of 10,000, see below); `purloin_scope` and `rayon_scope` spawn them into
//!   a scope without handles instead, `purloin_scope_spawn` with `Scope::spawn`, each handle
//!   dropped (std's shape).
//! - `fib/22`, `fib/25`: recursive fib where fib(n-1) is forked and joined (28,656 and
//!   121,392 forks).
//! - `skynet_1m`: the skynet tree (10 children per node, 1,111,111 tasks), sums via joins;
//!   `purloin_scope` and `rayon_scope` sum through a scope per node instead
//!   (`purloin_scope_spawn`: with `Scope::spawn`, each handle dropped).
//! - `yield`: one task yielding 10,000 times.
//! - `fork_join`: `purloin::join` against `rayon::join` only: fib(25) and fib(30) (fork n-1,
//!   run n-2 here) and skynet_join_1m, the skynet sum over 1,000,000 leaves split in halves
//!   with `join` (999,999 forks).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const WORKERS: usize = 2;

/// `PURLOIN_BENCH_TRACE=<file>` (`/dev/null` to time the recording alone) records a trace
/// of every purloin runtime of the run (`PURLOIN_TRACE` would record only the first runtime
/// built, whichever group it belongs to); it is never stopped, so the file is not complete.
fn purloin_rt() -> purloin::Runtime {
    if let Some(path) = std::env::var_os("PURLOIN_BENCH_TRACE")
        && !purloin::trace::is_recording()
    {
        purloin::trace::start(path).expect("PURLOIN_BENCH_TRACE: the trace could not start");
    }
    purloin::runtime::Builder::new()
        .workers(WORKERS)
        .stack_size(purloin::StackSize::Small)
        .build()
        .unwrap()
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(WORKERS).build().unwrap()
}

fn rayon_pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(WORKERS).build().unwrap()
}

fn may_setup() {
    may::config().set_workers(WORKERS);
}

fn spawn_join(c: &mut Criterion) {
    const N: u64 = 100_000;
    let mut g = c.benchmark_group("spawn_join_100k");
    let rt = purloin_rt();
    g.bench_function("purloin", |b| {
        b.iter(|| {
            rt.block_on(|| {
                let hs: Vec<_> = (0..N).map(|i| purloin::spawn(move || black_box(i))).collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            })
        })
    });
    g.bench_function("purloin_scope", |b| {
        b.iter(|| {
            rt.block_on(|| {
                purloin::scope(|s| {
                    for i in 0..N {
                        s.spawn_detached(move || {
                            black_box(i);
                        });
                    }
                })
            })
        })
    });
    g.bench_function("purloin_scope_spawn", |b| {
        b.iter(|| {
            rt.block_on(|| {
                purloin::scope(|s| {
                    for i in 0..N {
                        // std's shape: a handle, dropped unjoined.
                        s.spawn(move || {
                            black_box(i);
                        });
                    }
                })
            })
        })
    });
    drop(rt);
    let tk = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter(|| {
            tk.block_on(tk.spawn(async {
                let hs: Vec<_> =
                    (0..N).map(|i| tokio::spawn(async move { black_box(i) })).collect();
                let mut s = 0;
                for h in hs {
                    s += h.await.unwrap();
                }
                s
            }))
            .unwrap()
        })
    });
    drop(tk);
    may_setup();
    // may cannot hold 100,000 live coroutines (its guard pages cost two memory mappings each:
    // it aborts with ENOMEM near 32k), so it spawns and joins in chunks of 10,000.
    g.bench_function("may_chunks_of_10k", |b| {
        b.iter(|| {
            may::go!(move || {
                let mut s = 0;
                for chunk in 0..N / 10_000 {
                    let hs: Vec<_> = (chunk * 10_000..(chunk + 1) * 10_000)
                        .map(|i| may::go!(move || black_box(i)))
                        .collect();
                    s += hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>();
                }
                s
            })
            .join()
            .unwrap()
        })
    });
    let pool = rayon_pool();
    g.bench_function("rayon_scope", |b| {
        b.iter(|| {
            pool.install(|| {
                rayon::scope(|s| {
                    for i in 0..N {
                        s.spawn(move |_| {
                            black_box(i);
                        });
                    }
                })
            })
        })
    });
    g.finish();
}

fn fib_purloin(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = purloin::join(|| fib_purloin(n - 1), || fib_purloin(n - 2));
    a + b
}

fn fib_rayon(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn fib_tokio(n: u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send>> {
    Box::pin(async move {
        if n < 2 {
            return n;
        }
        let a = tokio::spawn(fib_tokio(n - 1));
        let b = fib_tokio(n - 2).await;
        a.await.unwrap() + b
    })
}

fn fib_may(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let a = may::go!(move || fib_may(n - 1));
    let b = fib_may(n - 2);
    a.join().unwrap() + b
}

fn fib(c: &mut Criterion) {
    let mut g = c.benchmark_group("fib");
    let rt = purloin_rt();
    let pool = rayon_pool();
    let tk = tokio_rt();
    for n in [22u64, 25] {
        g.bench_with_input(BenchmarkId::new("purloin_join", n), &n, |b, &n| {
            b.iter(|| rt.block_on(|| fib_purloin(black_box(n))))
        });
        // The same fork as a full green thread (spawn + join; join-helping runs it inline
        // when nobody stole it): the shape Go and may use.
        g.bench_with_input(BenchmarkId::new("purloin_spawn", n), &n, |b, &n| {
            fn fib_spawn(n: u64) -> u64 {
                if n < 2 {
                    return n;
                }
                let a = purloin::spawn(move || fib_spawn(n - 1));
                let b = fib_spawn(n - 2);
                a.join().unwrap() + b
            }
            b.iter(|| rt.block_on(|| fib_spawn(black_box(n))))
        });
        g.bench_with_input(BenchmarkId::new("rayon_join", n), &n, |b, &n| {
            b.iter(|| pool.install(|| fib_rayon(black_box(n))))
        });
        g.bench_with_input(BenchmarkId::new("tokio_spawn", n), &n, |b, &n| {
            b.iter(|| tk.block_on(fib_tokio(black_box(n))))
        });
    }
    drop((rt, tk));
    // may: fib(22) only; at fib(25) it holds more live coroutines than its guard pages allow
    // (ENOMEM), as in the anchor table.
    may_setup();
    g.bench_with_input(BenchmarkId::new("may_spawn", 22), &22u64, |b, &n| {
        b.iter(|| may::go!(move || fib_may(black_box(n))).join().unwrap())
    });
    g.finish();
}

fn skynet_purloin(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let step = size / 10;
    let hs: Vec<_> =
        (0..10).map(|i| purloin::spawn(move || skynet_purloin(num + i * step, step))).collect();
    hs.into_iter().map(|h| h.join().unwrap()).sum()
}

/// Skynet as `skynet_rayon` writes it: a scope and 10 handle-less spawns per node.
fn skynet_purloin_scope(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let step = size / 10;
    let mut parts = [0u64; 10];
    purloin::scope(|s| {
        for (i, p) in parts.iter_mut().enumerate() {
            s.spawn_detached(move || *p = skynet_purloin_scope(num + i as u64 * step, step));
        }
    });
    parts.iter().sum()
}

/// [`skynet_purloin_scope`] in std's shape: `Scope::spawn`, each handle dropped unjoined.
fn skynet_purloin_scope_spawn(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let step = size / 10;
    let mut parts = [0u64; 10];
    purloin::scope(|s| {
        for (i, p) in parts.iter_mut().enumerate() {
            s.spawn(move || *p = skynet_purloin_scope_spawn(num + i as u64 * step, step));
        }
    });
    parts.iter().sum()
}

fn skynet_tokio(
    num: u64,
    size: u64,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send>> {
    Box::pin(async move {
        if size == 1 {
            return num;
        }
        let step = size / 10;
        let hs: Vec<_> =
            (0..10).map(|i| tokio::spawn(skynet_tokio(num + i * step, step))).collect();
        let mut s = 0;
        for h in hs {
            s += h.await.unwrap();
        }
        s
    })
}

fn skynet_rayon(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let step = size / 10;
    let mut parts = [0u64; 10];
    rayon::scope(|s| {
        for (i, p) in parts.iter_mut().enumerate() {
            s.spawn(move |_| *p = skynet_rayon(num + i as u64 * step, step));
        }
    });
    parts.iter().sum()
}

fn skynet(c: &mut Criterion) {
    const SIZE: u64 = 1_000_000;
    let expected = SIZE * (SIZE - 1) / 2;
    let mut g = c.benchmark_group("skynet_1m");
    g.sample_size(10);
    let rt = purloin_rt();
    g.bench_function("purloin", |b| {
        b.iter(|| assert_eq!(rt.block_on(|| skynet_purloin(0, SIZE)), expected))
    });
    g.bench_function("purloin_scope", |b| {
        b.iter(|| assert_eq!(rt.block_on(|| skynet_purloin_scope(0, SIZE)), expected))
    });
    g.bench_function("purloin_scope_spawn", |b| {
        b.iter(|| assert_eq!(rt.block_on(|| skynet_purloin_scope_spawn(0, SIZE)), expected))
    });
    drop(rt);
    let tk = tokio_rt();
    g.bench_function("tokio", |b| {
        b.iter(|| assert_eq!(tk.block_on(skynet_tokio(0, SIZE)), expected))
    });
    drop(tk);
    let pool = rayon_pool();
    g.bench_function("rayon_scope", |b| {
        b.iter(|| assert_eq!(pool.install(|| skynet_rayon(0, SIZE)), expected))
    });
    // may: not run. With its default guarded 32 KiB stacks it aborts with ENOMEM near 32k
    // live coroutines (two memory mappings each against vm.max_map_count = 65530).
    g.finish();
}

fn skynet_join_purloin(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let half = size / 2;
    let (a, b) = purloin::join(
        || skynet_join_purloin(num, half),
        || skynet_join_purloin(num + half, size - half),
    );
    a + b
}

fn skynet_join_rayon(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let half = size / 2;
    let (a, b) =
        rayon::join(|| skynet_join_rayon(num, half), || skynet_join_rayon(num + half, size - half));
    a + b
}

/// Fork-join at rayon's own game, in one group.
fn fork_join(c: &mut Criterion) {
    const SIZE: u64 = 1_000_000;
    let expected = SIZE * (SIZE - 1) / 2;
    let mut g = c.benchmark_group("fork_join");
    let rt = purloin_rt();
    let pool = rayon_pool();
    for n in [25u64, 30] {
        g.bench_with_input(BenchmarkId::new("purloin_fib", n), &n, |b, &n| {
            b.iter(|| rt.block_on(|| fib_purloin(black_box(n))))
        });
        g.bench_with_input(BenchmarkId::new("rayon_fib", n), &n, |b, &n| {
            b.iter(|| pool.install(|| fib_rayon(black_box(n))))
        });
    }
    g.bench_function("purloin_skynet_join_1m", |b| {
        b.iter(|| assert_eq!(rt.block_on(|| skynet_join_purloin(0, black_box(SIZE))), expected))
    });
    g.bench_function("rayon_skynet_join_1m", |b| {
        b.iter(|| assert_eq!(pool.install(|| skynet_join_rayon(0, black_box(SIZE))), expected))
    });
    g.finish();
}

fn yield_now(c: &mut Criterion) {
    const N: u64 = 10_000;
    let mut g = c.benchmark_group("yield");
    let rt = purloin_rt();
    g.bench_with_input(BenchmarkId::new("purloin", N), &N, |b, &n| {
        b.iter(|| {
            rt.block_on(|| {
                for _ in 0..n {
                    purloin::yield_now();
                }
            })
        })
    });
    drop(rt);
    may_setup();
    g.bench_with_input(BenchmarkId::new("may", N), &N, |b, &n| {
        b.iter(|| {
            may::go!(move || {
                for _ in 0..n {
                    may::coroutine::yield_now();
                }
            })
            .join()
            .unwrap()
        })
    });
    let tk = tokio_rt();
    g.bench_with_input(BenchmarkId::new("tokio", N), &N, |b, &n| {
        b.iter(|| {
            tk.block_on(tk.spawn(async move {
                for _ in 0..n {
                    tokio::task::yield_now().await;
                }
            }))
            .unwrap()
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500))
}

criterion_group! { name = benches; config = config(); targets = spawn_join, fib, skynet, yield_now, fork_join }
criterion_main!(benches);
