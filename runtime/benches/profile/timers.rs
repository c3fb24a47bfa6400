//! Profiling helper: what `time::after` channels that nobody waits on cost.
//!
//! `cargo bench -p purloin --bench profile_timers -- [messages] [receivers] [workers]`
//! (defaults: 2,000,000, 1,000,000, 2 workers).
//!
//! Two shapes, each printing the RSS growth and the scheduler's pending-timer count
//! (`Stats::timers_pending`, summed over processors):
//!
//! * *select loop*: Go's timeout idiom. A producer green thread sends `messages` numbers on a
//!   `bounded(128)` channel; the consumer receives them with
//!   `select! { recv(rx) -> m => ..., recv(after(30 s)) -> _ => ... }`, a fresh `after` per
//!   message, which is dropped unobserved when its `select!` returns.
//! * *dropped receivers*: `receivers` `after(1 h)` channels made, held, then dropped; RSS
//!   and pending timers while held and after the drop, and RSS after `malloc_trim(0)`. Run
//!   twice: glibc keeps the freed blocks of a worker thread's arena for reuse (`malloc_trim`
//!   does not shrink a thread arena's top), so the second round shows whether the memory is
//!   reused (RSS stays put) or leaked (RSS grows again).
//!
//! ```text
//! cargo bench -p purloin --bench profile_timers -- 2000000 1000000 2
//! ```
use std::time::{Duration, Instant};

use purloin::sync::channel;
use purloin::time::after;

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn mib(kib: usize) -> f64 {
    kib as f64 / 1024.0
}

/// Timers pending in the current runtime (every processor).
fn pending() -> usize {
    purloin::stats().timers_pending.iter().sum()
}

fn select_loop(messages: u64) {
    let rss_before = status_kib("VmRSS:");
    let pending_before = pending();
    let t = Instant::now();
    let (tx, rx) = channel::bounded::<u64>(128);
    let producer = purloin::spawn(move || {
        for i in 0..messages {
            tx.send(i).unwrap();
        }
    });
    let (mut got, mut timeouts) = (0u64, 0u64);
    loop {
        purloin::select! {
            recv(rx) -> m => match m {
                Ok(_) => got += 1,
                Err(_) => break,
            },
            recv(after(Duration::from_secs(30))) -> _ => timeouts += 1,
        }
    }
    producer.join().unwrap();
    let took = t.elapsed();
    let rss_after = status_kib("VmRSS:");
    assert_eq!(got, messages);
    println!(
        "select loop: {messages} messages, {timeouts} timeouts, {:.3} s ({:.0} ns/message) | \
         RSS {:.0} -> {:.0} MiB (+{:.0} MiB) | timers pending {} -> {}",
        took.as_secs_f64(),
        took.as_nanos() as f64 / messages as f64,
        mib(rss_before),
        mib(rss_after),
        mib(rss_after.saturating_sub(rss_before)),
        pending_before,
        pending(),
    );
}

fn dropped_receivers(n: usize) {
    let rss_before = status_kib("VmRSS:");
    let pending_before = pending();
    let t = Instant::now();
    let held: Vec<_> = (0..n).map(|_| after(Duration::from_secs(3600))).collect();
    let made = t.elapsed();
    let rss_held = status_kib("VmRSS:");
    let pending_held = pending();
    let t = Instant::now();
    drop(held);
    let dropped = t.elapsed();
    let rss_dropped = status_kib("VmRSS:");
    let rss_trimmed = trimmed_rss();
    println!(
        "dropped receivers: {n} after(1 h) | made in {:.3} s, dropped in {:.3} s | RSS {:.0} \
         -> {:.0} (held) -> {:.0} MiB (dropped, +{:.0} MiB over the start) | timers pending \
         {} -> {} (held) -> {} (dropped) | RSS after malloc_trim {:.0} MiB",
        made.as_secs_f64(),
        dropped.as_secs_f64(),
        mib(rss_before),
        mib(rss_held),
        mib(rss_dropped),
        mib(rss_dropped.saturating_sub(rss_before)),
        pending_before,
        pending_held,
        pending(),
        mib(rss_trimmed),
    );
}

/// RSS after asking the allocator to give its free memory back to the OS.
fn trimmed_rss() -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory of the allocator's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
    status_kib("VmRSS:")
}

fn main() {
    let mut args =
        std::env::args().skip(1).filter(|a| !a.starts_with("--")).map(|a| a.parse::<usize>().ok());
    let messages = args.next().flatten().unwrap_or(2_000_000);
    let receivers = args.next().flatten().unwrap_or(1_000_000);
    let workers = args.next().flatten().unwrap_or(2).max(1);
    let rt = purloin::runtime::Builder::new().workers(workers).build().unwrap();
    rt.block_on(move || {
        select_loop(messages as u64);
        dropped_receivers(receivers);
        dropped_receivers(receivers);
    });
    println!("peak RSS (VmHWM) {:.0} MiB", mib(status_kib("VmHWM:")));
}
