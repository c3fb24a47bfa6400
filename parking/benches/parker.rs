//! P1: two-thread wake-up ping-pong, nanoseconds per round trip.
//!
//! Main hands the turn to a peer thread and sleeps until the peer hands it back. Every variant
//! runs the same protocol (a turn word, the waker publishes then wakes, the sleeper re-checks
//! the turn after every return) and differs only in how threads sleep:
//!
//! - `purloin_parker`: [`purloin_parking::Parker`] / `Unparker`
//! - `purloin_futex`: [`purloin_parking::futex`] wait / wake_one on the turn word
//! - `purloin_parking_lot`: one [`purloin_parking::ParkingLot`] per side (snapshot, check, wait)
//! - `std_thread_park`: `std::thread::park` / `Thread::unpark` (peer)
//! - `parking_lot_condvar`: `parking_lot::Mutex<u32>` + `Condvar` (peer)
//! - `atomic_wait`: `atomic_wait::wait` / `wake_one` on the turn word (peer)
//!
//! Run: `cargo bench -p purloin-parking --bench parker` (or `cargo xtask bench -p
//! purloin-parking` for the ratio table).
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_main};
use purloin_parking::{Parker, ParkingLot, futex};

/// Whose turn it is: `MAIN` or `PEER`.
const MAIN: u32 = 0;
const PEER: u32 = 1;

/// Runs `iters` round trips between the current thread (`main_side`) and a fresh peer thread
/// (`peer_side`), timing only the round trips (the peer is spawned and has reached a barrier
/// before the clock starts).
fn ping_pong<S: Send + Sync + 'static>(
    iters: u64,
    shared: S,
    main_side: impl Fn(&S),
    peer_side: impl Fn(&S) + Send + 'static,
) -> Duration {
    let shared = Arc::new(shared);
    let barrier = Arc::new(Barrier::new(2));
    let peer = {
        let (shared, barrier) = (shared.clone(), barrier.clone());
        thread::spawn(move || {
            barrier.wait();
            for _ in 0..iters {
                peer_side(&shared);
            }
        })
    };
    barrier.wait();
    let start = Instant::now();
    for _ in 0..iters {
        main_side(&shared);
    }
    let elapsed = start.elapsed();
    peer.join().unwrap();
    elapsed
}

fn bench_ping_pong(c: &mut Criterion) {
    let mut group = c.benchmark_group("park_ping_pong");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    let param = "round_trip";

    group.bench_function(BenchmarkId::new("purloin_parker", param), |b| {
        b.iter_custom(|iters| {
            let main_parker = Parker::new();
            let main_unparker = main_parker.unparker();
            let peer_parker = Parker::new();
            let peer_unparker = peer_parker.unparker();
            let turn = AtomicU32::new(MAIN);
            // The peer's Parker moves into the peer thread; the main Parker stays here.
            let shared = (turn, main_unparker, peer_unparker);
            ping_pong(
                iters,
                shared,
                move |(turn, _, peer)| {
                    turn.store(PEER, Ordering::Release);
                    peer.unpark();
                    while turn.load(Ordering::Acquire) != MAIN {
                        main_parker.park();
                    }
                },
                move |(turn, main, _)| {
                    while turn.load(Ordering::Acquire) != PEER {
                        peer_parker.park();
                    }
                    turn.store(MAIN, Ordering::Release);
                    main.unpark();
                },
            )
        })
    });

    group.bench_function(BenchmarkId::new("purloin_futex", param), |b| {
        b.iter_custom(|iters| {
            ping_pong(
                iters,
                futex::AtomicU32::new(MAIN),
                |turn| {
                    turn.store(PEER, Ordering::Release);
                    futex::wake_one(turn);
                    while turn.load(Ordering::Acquire) != MAIN {
                        futex::wait(turn, PEER, None);
                    }
                },
                |turn| {
                    while turn.load(Ordering::Acquire) != PEER {
                        futex::wait(turn, MAIN, None);
                    }
                    turn.store(MAIN, Ordering::Release);
                    futex::wake_one(turn);
                },
            )
        })
    });

    group.bench_function(BenchmarkId::new("purloin_parking_lot", param), |b| {
        b.iter_custom(|iters| {
            ping_pong(
                iters,
                (AtomicU32::new(MAIN), ParkingLot::new(), ParkingLot::new()),
                |(turn, main_lot, peer_lot)| {
                    turn.store(PEER, Ordering::Release);
                    peer_lot.signal(1);
                    loop {
                        let s = main_lot.state();
                        if turn.load(Ordering::Acquire) == MAIN {
                            break;
                        }
                        main_lot.wait(s);
                    }
                },
                |(turn, main_lot, peer_lot)| {
                    loop {
                        let s = peer_lot.state();
                        if turn.load(Ordering::Acquire) == PEER {
                            break;
                        }
                        peer_lot.wait(s);
                    }
                    turn.store(MAIN, Ordering::Release);
                    main_lot.signal(1);
                },
            )
        })
    });

    group.bench_function(BenchmarkId::new("std_thread_park", param), |b| {
        b.iter_custom(|iters| {
            // The peer needs main's Thread handle and main needs the peer's: exchange them
            // through a OnceLock set by the peer before the barrier.
            let main_thread = thread::current();
            let peer_thread: Arc<std::sync::OnceLock<thread::Thread>> = Arc::default();
            let turn = Arc::new(AtomicU32::new(MAIN));
            let barrier = Arc::new(Barrier::new(2));
            let peer = {
                let (peer_thread, turn, barrier) =
                    (peer_thread.clone(), turn.clone(), barrier.clone());
                thread::spawn(move || {
                    peer_thread.set(thread::current()).unwrap();
                    barrier.wait();
                    for _ in 0..iters {
                        while turn.load(Ordering::Acquire) != PEER {
                            thread::park();
                        }
                        turn.store(MAIN, Ordering::Release);
                        main_thread.unpark();
                    }
                })
            };
            barrier.wait();
            let peer_handle = peer_thread.get().unwrap().clone();
            let start = Instant::now();
            for _ in 0..iters {
                turn.store(PEER, Ordering::Release);
                peer_handle.unpark();
                while turn.load(Ordering::Acquire) != MAIN {
                    thread::park();
                }
            }
            let elapsed = start.elapsed();
            peer.join().unwrap();
            elapsed
        })
    });

    group.bench_function(BenchmarkId::new("parking_lot_condvar", param), |b| {
        b.iter_custom(|iters| {
            ping_pong(
                iters,
                (
                    parking_lot::Mutex::new(MAIN),
                    parking_lot::Condvar::new(),
                    parking_lot::Condvar::new(),
                ),
                |(turn, main_cv, peer_cv)| {
                    let mut t = turn.lock();
                    *t = PEER;
                    peer_cv.notify_one();
                    while *t != MAIN {
                        main_cv.wait(&mut t);
                    }
                },
                |(turn, main_cv, peer_cv)| {
                    let mut t = turn.lock();
                    while *t != PEER {
                        peer_cv.wait(&mut t);
                    }
                    *t = MAIN;
                    main_cv.notify_one();
                },
            )
        })
    });

    group.bench_function(BenchmarkId::new("atomic_wait", param), |b| {
        b.iter_custom(|iters| {
            ping_pong(
                iters,
                AtomicU32::new(MAIN),
                |turn| {
                    turn.store(PEER, Ordering::Release);
                    atomic_wait::wake_one(turn);
                    while turn.load(Ordering::Acquire) != MAIN {
                        atomic_wait::wait(turn, PEER);
                    }
                },
                |turn| {
                    while turn.load(Ordering::Acquire) != PEER {
                        atomic_wait::wait(turn, MAIN);
                    }
                    turn.store(MAIN, Ordering::Release);
                    atomic_wait::wake_one(turn);
                },
            )
        })
    });

    group.finish();
}

/// criterion's generated group function (the macro cannot carry a doc comment).
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench_ping_pong);
}
criterion_main!(group::benches);
