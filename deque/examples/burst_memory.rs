//! Memory after a burst: push 1M items into a growable queue, take them all out, and print the
//! process's resident set size (VmRSS, Linux) at each step, with and without `shrink_to_fit`,
//! next to crossbeam-deque for reference. Not a benchmark and asserts nothing about timing; it
//! prints numbers for BENCHMARKS.md.
//!
//! ```text
//! cargo run --release -p purloin-deque --example burst_memory
//! ```

use std::fs;

const BURST: usize = 1 << 20;

/// The process's resident set size in KiB, if the platform reports it.
fn rss_kib() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn show(step: &str) {
    match rss_kib() {
        Some(kib) => println!("  {step:<44} RSS {:>8.1} MiB", kib as f64 / 1024.0),
        None => println!("  {step:<44} RSS unavailable on this platform"),
    }
}

/// Lets the epoch collector run the deferred frees of retired rings: pinning and flushing
/// advances the global epoch, and a retired ring is freed two advances later.
fn settle_epoch() {
    for _ in 0..4 {
        crossbeam_epoch::pin().flush();
    }
}

fn purloin_burst(shrink: bool) {
    println!("purloin-deque Worker::new(), {BURST} items, shrink_to_fit: {shrink}");
    let w = purloin_deque::Worker::new();
    let s = w.stealer();
    show("baseline");
    for i in 0..BURST {
        w.push(i).expect("a growable queue below its maximum never refuses");
    }
    show(&format!("after the burst (capacity {})", w.capacity()));
    // Half popped by the owner, half stolen, as a scheduler would.
    for _ in 0..BURST / 2 {
        w.pop();
    }
    while s.steal().is_success() {}
    assert!(w.is_empty());
    if shrink {
        w.shrink_to_fit();
    }
    settle_epoch();
    show(&format!("drained (capacity {})", w.capacity()));
}

fn crossbeam_burst() {
    println!("crossbeam-deque Worker::new_lifo() (shrinks by itself when len <= cap / 4)");
    let w = crossbeam_deque::Worker::new_lifo();
    let s = w.stealer();
    show("baseline");
    for i in 0..BURST {
        w.push(i);
    }
    show("after the burst");
    for _ in 0..BURST / 2 {
        w.pop();
    }
    while s.steal().is_success() {}
    settle_epoch();
    show("drained");
}

fn main() {
    purloin_burst(false);
    purloin_burst(true);
    crossbeam_burst();
}
