//! P2: 10^7 `ParkingLot::signal(1)` calls with nobody waiting: time per call and syscalls.
//!
//! ```text
//! cargo run --release -p purloin-parking --features stats --example signal_no_waiter
//! strace -c -f -e trace=futex target/release/examples/signal_no_waiter
//! ```
//!
//! With `stats` the counters show the syscalls made during the loop (expected: 0 waits, 0
//! wakes, 10^7 skipped wakes). Under strace, the futex calls listed come from thread start-up
//! and exit, not from the loop (compare with `CALLS=0`).

use std::hint::black_box;
use std::time::Instant;

use purloin_parking::{ParkingLot, ParkingLots, stats};

fn main() {
    let calls: u64 = std::env::var("CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000_000);

    let lot = ParkingLot::new();
    let before = stats::snapshot();
    let start = Instant::now();
    for _ in 0..calls {
        black_box(black_box(&lot).signal(1));
    }
    let elapsed = start.elapsed();
    let d = stats::snapshot().since(&before);
    println!(
        "ParkingLot::signal(1), no waiter: {calls} calls in {elapsed:?} = {:.2} ns/call",
        elapsed.as_nanos() as f64 / calls.max(1) as f64
    );
    report(&d);

    let lots = ParkingLots::new(4);
    let before = stats::snapshot();
    let start = Instant::now();
    for i in 0..calls {
        black_box(black_box(&lots).signal_task(1, i as usize));
    }
    let elapsed = start.elapsed();
    let d = stats::snapshot().since(&before);
    println!(
        "ParkingLots(4)::signal_task(1), nobody asleep: {calls} calls in {elapsed:?} = {:.2} ns/call",
        elapsed.as_nanos() as f64 / calls.max(1) as f64
    );
    report(&d);
}

fn report(d: &stats::Counters) {
    if stats::ENABLED {
        println!(
            "  futex waits {}, futex wakes {}, syscalls {}, wakes skipped {}",
            d.futex_waits,
            d.futex_wakes,
            d.syscalls(),
            d.wakes_skipped
        );
    } else {
        println!("  (counters off: rebuild with --features stats, or run under strace -c)");
    }
}
