//! P2: `signal()` while every worker is busy (nobody waits), nanoseconds per call.
//!
//! The zero-syscall claim is shown separately: `cargo run --release -p purloin-parking
//! --features stats --example signal_no_waiter` makes 10^7 calls and prints the counters, and
//! runs under `strace -c -f` (see the crate README).
//!
//! - `purloin_lot_signal`: [`purloin_parking::ParkingLot::signal`]`(1)`, no waiter: one `fetch_add`.
//! - `purloin_lots_signal_task`: [`purloin_parking::ParkingLots::signal_task`]`(1, 0)` over 4
//!   lots with nobody asleep: walks all 4 lots (4 `fetch_add`s), still no syscall.
//! - `brpc_style_signal`: brpc's `ParkingLot::signal` re-implemented (fetch_add, then
//!   `futex_wake` unconditionally): one syscall per call.
//! - `parking_lot_condvar_notify_one`: `parking_lot::Condvar::notify_one` with no waiter (a
//!   load; parking_lot tracks waiters too).
//! - `std_condvar_notify_one`: `std::sync::Condvar::notify_one` with no waiter (std's futex
//!   condvar bumps a counter and always calls `futex_wake`).
//!
//! Single-threaded: the cost of the call itself, with the line in the caller's cache.
#![cfg(not(loom))]

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_main};
use purloin_parking::{ParkingLot, ParkingLots, futex};

/// brpc's `ParkingLot::signal` (bthread/parking_lot.h) without the optional waiter counter:
/// `fetch_add(n << 1, release)` and an unconditional `futex_wake(n)`.
struct BrpcLot {
    pending: futex::AtomicU32,
}

impl BrpcLot {
    fn signal(&self, n: u32) -> usize {
        self.pending.fetch_add(n << 1, Ordering::Release);
        futex::wake(&self.pending, n)
    }
}

fn bench_signal(c: &mut Criterion) {
    let mut group = c.benchmark_group("signal_no_waiter");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1));
    let param = "per_call";

    let lot = ParkingLot::new();
    group.bench_function(BenchmarkId::new("purloin_lot_signal", param), |b| {
        b.iter(|| black_box(&lot).signal(black_box(1)))
    });

    let lots = ParkingLots::new(4);
    group.bench_function(BenchmarkId::new("purloin_lots_signal_task", param), |b| {
        b.iter(|| black_box(&lots).signal_task(black_box(1), 0))
    });

    let brpc = BrpcLot { pending: futex::AtomicU32::new(0) };
    group.bench_function(BenchmarkId::new("brpc_style_signal", param), |b| {
        b.iter(|| black_box(&brpc).signal(black_box(1)))
    });

    let pl_condvar = parking_lot::Condvar::new();
    group.bench_function(BenchmarkId::new("parking_lot_condvar_notify_one", param), |b| {
        b.iter(|| black_box(&pl_condvar).notify_one())
    });

    let std_condvar = std::sync::Condvar::new();
    group.bench_function(BenchmarkId::new("std_condvar_notify_one", param), |b| {
        b.iter(|| black_box(&std_condvar).notify_one())
    });

    group.finish();
}

/// criterion's generated group function (the macro cannot carry a doc comment).
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench_signal);
}
criterion_main!(group::benches);
