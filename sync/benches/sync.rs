//! purloin-sync against its peers, 2 workers everywhere, in the same criterion groups with the
//! same parameters so `cargo xtask bench -p purloin-sync` prints ratios. Our function ids start
//! with `purloin`; peers' do not. Green threads run on a purloin-sched scheduler (what the
//! `purloin` runtime runs them on).
//!
//! Groups (the performance table):
//! * `chan_pingpong`: one round trip (2 sends + 2 receives) between two green threads over two
//!   channels — purloin `bounded(0)` (Go's unbuffered channel), `bounded(1)` and `unbounded`;
//!   may coroutines with may's channel (`set_workers(2)`); tokio multi-thread `mpsc(1)`, 2
//!   workers. (Go's figure comes from `bench-go/sync/chan_pingpong`, run separately.)
//! * `mutex_contended`: 4 green threads incrementing one counter under a mutex, 2 workers —
//!   purloin `Mutex` vs `tokio::sync::Mutex` (4 tasks) vs `may::sync::Mutex` (4 coroutines).
//!   Time per increment.
//! * `mpmc_bounded_1024`: 2 producers, 2 consumers on a `bounded(1024)` channel — purloin
//!   green threads vs crossbeam-channel between OS threads. Time per message.
//! * `after_select`: a round trip whose echo side waits in
//!   `select! { recv(rx) -> m => ..., recv(after(30 s)) -> _ => ... }` (Go's timeout idiom,
//!   a fresh `after` per message, never fired) — purloin green threads vs crossbeam-channel
//!   between OS threads; `*-quiet` replaces the `after` with a channel that stays empty (the
//!   cost of the `select!` alone); `*-drop` makes and drops one `after(1 h)`; `*-ready`, on
//!   one thread, sends a message and selects it against a quiet channel (a `select!` that
//!   never parks). Time per round trip (per `after` for `*-drop`, per message for
//!   `*-ready`).
#![cfg(not(loom))]
// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use purloin_sync::Mutex;
use purloin_sync::channel::{Receiver, Sender, after, bounded, unbounded};

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

/// One purloin-sched scheduler (2 workers) for the whole run. It is leaked at exit: dropping
/// it would only add a shutdown to the last sample.
fn sched() -> &'static purloin_sched::Scheduler {
    static SCHED: OnceLock<purloin_sched::Scheduler> = OnceLock::new();
    SCHED.get_or_init(|| purloin_sched::Builder::new().workers(2).build().unwrap())
}

/// Runs `f` on a green thread of [`sched`] and waits for it.
fn on_green<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    sched().spawn(f).join().unwrap()
}

/// Spawns a green thread from a green thread.
fn go<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> purloin_sched::JoinHandle<T> {
    purloin_sched::spawn(f).unwrap()
}

fn tokio_rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap()
    })
}

fn may_init() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        may::config().set_workers(2);
    });
}

/// `iters` round trips between two purloin green threads over channels made by `make`.
fn purloin_pingpong(iters: u64, make: fn() -> (Sender<u64>, Receiver<u64>)) -> Duration {
    on_green(move || {
        let (tx1, rx1) = make();
        let (tx2, rx2) = make();
        let echo = go(move || {
            for v in rx1.iter() {
                tx2.send(v).unwrap();
            }
        });
        let driver = go(move || {
            let start = Instant::now();
            for i in 0..iters {
                tx1.send(i).unwrap();
                rx2.recv().unwrap();
            }
            start.elapsed()
        });
        let took = driver.join().unwrap();
        echo.join().unwrap();
        took
    })
}

fn chan_pingpong(c: &mut Criterion) {
    let mut g = c.benchmark_group("chan_pingpong");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("purloin-bounded0", "2w"), |b| {
        b.iter_custom(|iters| purloin_pingpong(iters, || bounded(0)))
    });
    g.bench_function(BenchmarkId::new("purloin-bounded1", "2w"), |b| {
        b.iter_custom(|iters| purloin_pingpong(iters, || bounded(1)))
    });
    g.bench_function(BenchmarkId::new("purloin-unbounded", "2w"), |b| {
        b.iter_custom(|iters| purloin_pingpong(iters, unbounded))
    });
    may_init();
    g.bench_function(BenchmarkId::new("may-mpsc", "2w"), |b| {
        b.iter_custom(|iters| {
            let (tx1, rx1) = may::sync::mpsc::channel::<u64>();
            let (tx2, rx2) = may::sync::mpsc::channel::<u64>();
            let echo = may::go!(move || {
                while let Ok(v) = rx1.recv() {
                    tx2.send(v).unwrap();
                }
            });
            let driver = may::go!(move || {
                let start = Instant::now();
                for i in 0..iters {
                    tx1.send(i).unwrap();
                    rx2.recv().unwrap();
                }
                start.elapsed()
            });
            let took = driver.join().unwrap();
            echo.join().unwrap();
            took
        })
    });
    g.bench_function(BenchmarkId::new("tokio-mpsc1", "2w"), |b| {
        b.iter_custom(|iters| {
            tokio_rt().block_on(async move {
                let (tx1, mut rx1) = tokio::sync::mpsc::channel::<u64>(1);
                let (tx2, mut rx2) = tokio::sync::mpsc::channel::<u64>(1);
                let echo = tokio::spawn(async move {
                    while let Some(v) = rx1.recv().await {
                        tx2.send(v).await.unwrap();
                    }
                });
                let driver = tokio::spawn(async move {
                    let start = Instant::now();
                    for i in 0..iters {
                        tx1.send(i).await.unwrap();
                        rx2.recv().await.unwrap();
                    }
                    start.elapsed()
                });
                let took = driver.await.unwrap();
                echo.await.unwrap();
                took
            })
        })
    });
    g.finish();
}

const LOCKERS: u64 = 4;

fn mutex_contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("mutex_contended");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("purloin", "4x2w"), |b| {
        b.iter_custom(|iters| {
            on_green(move || {
                let m = Arc::new(Mutex::new(0u64));
                let per = iters.div_ceil(LOCKERS);
                let start = Instant::now();
                let hs: Vec<_> = (0..LOCKERS)
                    .map(|_| {
                        let m = m.clone();
                        go(move || {
                            for _ in 0..per {
                                *m.lock().unwrap() += 1;
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                let took = start.elapsed();
                assert_eq!(*m.lock().unwrap(), per * LOCKERS);
                took
            })
        })
    });
    g.bench_function(BenchmarkId::new("tokio", "4x2w"), |b| {
        b.iter_custom(|iters| {
            tokio_rt().block_on(async move {
                let m = Arc::new(tokio::sync::Mutex::new(0u64));
                let per = iters.div_ceil(LOCKERS);
                let start = Instant::now();
                let hs: Vec<_> = (0..LOCKERS)
                    .map(|_| {
                        let m = m.clone();
                        tokio::spawn(async move {
                            for _ in 0..per {
                                *m.lock().await += 1;
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                let took = start.elapsed();
                assert_eq!(*m.lock().await, per * LOCKERS);
                took
            })
        })
    });
    may_init();
    g.bench_function(BenchmarkId::new("may", "4x2w"), |b| {
        b.iter_custom(|iters| {
            let m = Arc::new(may::sync::Mutex::new(0u64));
            let per = iters.div_ceil(LOCKERS);
            let start = Instant::now();
            let hs: Vec<_> = (0..LOCKERS)
                .map(|_| {
                    let m = m.clone();
                    may::go!(move || {
                        for _ in 0..per {
                            *m.lock().unwrap() += 1;
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let took = start.elapsed();
            assert_eq!(*m.lock().unwrap(), per * LOCKERS);
            took
        })
    });
    g.finish();
}

fn mpmc_bounded_1024(c: &mut Criterion) {
    let mut g = c.benchmark_group("mpmc_bounded_1024");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("purloin", "2p2c"), |b| {
        b.iter_custom(|iters| {
            on_green(move || {
                let (tx, rx) = bounded::<u64>(1024);
                let per = iters.div_ceil(2);
                let start = Instant::now();
                let ps: Vec<_> = (0..2)
                    .map(|_| {
                        let tx = tx.clone();
                        go(move || {
                            for i in 0..per {
                                tx.send(i).unwrap();
                            }
                        })
                    })
                    .collect();
                drop(tx);
                let cs: Vec<_> = (0..2)
                    .map(|_| {
                        let rx = rx.clone();
                        go(move || rx.iter().count() as u64)
                    })
                    .collect();
                for p in ps {
                    p.join().unwrap();
                }
                let n: u64 = cs.into_iter().map(|c| c.join().unwrap()).sum();
                let took = start.elapsed();
                assert_eq!(n, per * 2);
                took
            })
        })
    });
    g.bench_function(BenchmarkId::new("crossbeam-channel", "2p2c"), |b| {
        b.iter_custom(|iters| {
            let (tx, rx) = crossbeam_channel::bounded::<u64>(1024);
            let per = iters.div_ceil(2);
            let start = Instant::now();
            let ps: Vec<_> = (0..2)
                .map(|_| {
                    let tx = tx.clone();
                    std::thread::spawn(move || {
                        for i in 0..per {
                            tx.send(i).unwrap();
                        }
                    })
                })
                .collect();
            drop(tx);
            let cs: Vec<_> = (0..2)
                .map(|_| {
                    let rx = rx.clone();
                    std::thread::spawn(move || rx.iter().count() as u64)
                })
                .collect();
            for p in ps {
                p.join().unwrap();
            }
            let n: u64 = cs.into_iter().map(|c| c.join().unwrap()).sum();
            let took = start.elapsed();
            assert_eq!(n, per * 2);
            took
        })
    });
    g.finish();
}

/// The echo side of `after_select`: waits for each message with a timeout arm (`timeout`
/// makes the second receiver: a fresh `after`, or a clone of a quiet channel).
fn purloin_select_pingpong(
    iters: u64,
    timeout: impl Fn() -> Receiver<Instant> + Send + 'static,
) -> Duration {
    on_green(move || {
        let (tx1, rx1) = bounded::<u64>(0);
        let (tx2, rx2) = bounded::<u64>(0);
        let echo = go(move || {
            loop {
                purloin_sync::select! {
                    recv(rx1) -> m => match m {
                        Ok(v) => tx2.send(v).unwrap(),
                        Err(_) => break,
                    },
                    recv(timeout()) -> _ => panic!("no message for 30 s"),
                }
            }
        });
        let start = Instant::now();
        for i in 0..iters {
            tx1.send(i).unwrap();
            rx2.recv().unwrap();
        }
        let took = start.elapsed();
        drop(tx1);
        echo.join().unwrap();
        took
    })
}

fn crossbeam_select_pingpong(
    iters: u64,
    timeout: impl Fn() -> crossbeam_channel::Receiver<Instant> + Send + 'static,
) -> Duration {
    let (tx1, rx1) = crossbeam_channel::bounded::<u64>(0);
    let (tx2, rx2) = crossbeam_channel::bounded::<u64>(0);
    let echo = std::thread::spawn(move || {
        loop {
            crossbeam_channel::select! {
                recv(rx1) -> m => match m {
                    Ok(v) => tx2.send(v).unwrap(),
                    Err(_) => break,
                },
                recv(timeout()) -> _ => panic!("no message for 30 s"),
            }
        }
    });
    let start = Instant::now();
    for i in 0..iters {
        tx1.send(i).unwrap();
        rx2.recv().unwrap();
    }
    let took = start.elapsed();
    drop(tx1);
    echo.join().unwrap();
    took
}

const TIMEOUT: Duration = Duration::from_secs(30);

fn after_select(c: &mut Criterion) {
    let mut g = c.benchmark_group("after_select");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("purloin-after", "2w"), |b| {
        b.iter_custom(|iters| purloin_select_pingpong(iters, || after(TIMEOUT)))
    });
    g.bench_function(BenchmarkId::new("crossbeam-channel-after", "threads"), |b| {
        b.iter_custom(|iters| {
            crossbeam_select_pingpong(iters, || crossbeam_channel::after(TIMEOUT))
        })
    });
    g.bench_function(BenchmarkId::new("purloin-quiet", "2w"), |b| {
        b.iter_custom(|iters| {
            let (keep, quiet) = bounded::<Instant>(1);
            let took = purloin_select_pingpong(iters, move || quiet.clone());
            drop(keep);
            took
        })
    });
    g.bench_function(BenchmarkId::new("crossbeam-channel-quiet", "threads"), |b| {
        b.iter_custom(|iters| {
            let (keep, quiet) = crossbeam_channel::bounded::<Instant>(1);
            let took = crossbeam_select_pingpong(iters, move || quiet.clone());
            drop(keep);
            took
        })
    });
    g.bench_function(BenchmarkId::new("purloin-ready", "1t"), |b| {
        let (tx, rx) = bounded::<u64>(1);
        let (_keep, quiet) = bounded::<Instant>(1);
        b.iter(|| {
            tx.send(1).unwrap();
            purloin_sync::select! {
                recv(rx) -> m => m.unwrap(),
                recv(quiet) -> _ => unreachable!(),
            }
        })
    });
    g.bench_function(BenchmarkId::new("crossbeam-channel-ready", "1t"), |b| {
        let (tx, rx) = crossbeam_channel::bounded::<u64>(1);
        let (_keep, quiet) = crossbeam_channel::bounded::<Instant>(1);
        b.iter(|| {
            tx.send(1).unwrap();
            crossbeam_channel::select! {
                recv(rx) -> m => m.unwrap(),
                recv(quiet) -> _ => unreachable!(),
            }
        })
    });
    g.bench_function(BenchmarkId::new("purloin-drop", "2w"), |b| {
        b.iter_custom(|iters| {
            on_green(move || {
                let start = Instant::now();
                for _ in 0..iters {
                    drop(std::hint::black_box(after(Duration::from_secs(3600))));
                }
                start.elapsed()
            })
        })
    });
    g.bench_function(BenchmarkId::new("crossbeam-channel-drop", "threads"), |b| {
        b.iter(|| drop(std::hint::black_box(crossbeam_channel::after(Duration::from_secs(3600)))))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = chan_pingpong, mutex_contended, mpmc_bounded_1024, after_select
}
criterion_main!(benches);
