//! Profiling helper: a million parked green threads, then all woken and joined.
//!
//! `cargo bench -p purloin --bench profile_million -- [n] [workers] [rounds] [stack]`
//! (defaults: 1,000,000, 2 workers, 1 round, the runtime's default stack size; `stack` as
//! `PURLOIN_STACK_SIZE` reads it: `small`, `normal`, `large`, or bytes with a `k`/`m` suffix).
//!
//! The root green thread spawns `n` green threads with `purloin::spawn` (what a user writes:
//! no stack size chosen); each bumps a counter and
//! blocks in `recv` on one rendezvous channel (`bounded(0)`). The root waits until all of
//! them are parked: the counter reached `n`, every run queue is empty and every other worker
//! is parked or searching for work, so no green thread is between its bump and its park. That is *spawn until
//! parked*. Then it drops the sender (every `recv` fails with a disconnect) and joins them
//! all: *wake + join*. Printed per round: both phases, memory per parked green thread (VmRSS
//! plus VmPTE, the page tables, which VmRSS does not count: at peak minus before the spawns,
//! over `n`), the process's memory mappings before, at peak and after, and the RSS left after
//! the join and after the stack pool has given memory back.
//!
//! The Go twin is `bench-go/runtime/million/main.go` (goroutines on a channel that is closed,
//! a `sync.WaitGroup`), run with `GOMAXPROCS=2` for the same shape:
//!
//! ```text
//! cargo bench -p purloin --bench profile_million -- 1000000 2 2
//! (cd bench-go/runtime/million && GOMAXPROCS=2 go run main.go 1000000 2)
//! ```
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use purloin::StackSize;

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A stack size as `PURLOIN_STACK_SIZE` takes it: `small`, `normal`, `large`, or bytes with
/// an optional `k`/`m` suffix.
fn parse_stack(s: &str) -> StackSize {
    let s = s.to_ascii_lowercase();
    match s.as_str() {
        "small" => StackSize::Small,
        "normal" => StackSize::Normal,
        "large" => StackSize::Large,
        _ => {
            let (digits, unit) = match s.strip_suffix('k') {
                Some(d) => (d, 1024),
                None => match s.strip_suffix('m') {
                    Some(d) => (d, 1024 * 1024),
                    None => (s.as_str(), 1),
                },
            };
            let n: usize = digits.parse().expect("stack: small, normal, large, or bytes (64k)");
            StackSize::at_least(n * unit)
        }
    }
}

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

struct Round {
    spawn_parked: Duration,
    wake_join: Duration,
    rss_before: usize,
    rss_peak: usize,
    pte_before: usize,
    pte_peak: usize,
    rss_joined: usize,
    maps: [usize; 3],
}

fn round(n: usize, workers: usize) -> Round {
    let rss_before = status_kib("VmRSS:");
    let pte_before = status_kib("VmPTE:");
    let maps_before = mappings();
    let (spawn_parked, handles, tx) = {
        let t = Instant::now();
        let (tx, rx) = purloin::sync::channel::bounded::<()>(0);
        let arrived = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (rx, arrived) = (rx.clone(), arrived.clone());
                purloin::spawn(move || {
                    arrived.fetch_add(1, Ordering::Relaxed);
                    let _ = rx.recv();
                })
            })
            .collect();
        drop(rx);
        // All parked: every green thread got past its bump, nothing is queued, and every
        // worker but the one running this root is parked or searching for work (so none is
        // running a green thread between its bump and its park).
        let mut report = Instant::now();
        loop {
            // A wait that does not end says why instead of hanging quietly.
            if report.elapsed() > Duration::from_secs(30) {
                report = Instant::now();
                let s = purloin::stats();
                eprintln!(
                    "still waiting after {:.1} s: {} of {n} arrived, global queue {}, local \
                     queues {:?}, {} workers parked, {} searching, {} live",
                    t.elapsed().as_secs_f64(),
                    arrived.load(Ordering::Relaxed),
                    s.global_queue_len,
                    s.queue_lens,
                    s.parked,
                    s.searching,
                    s.live
                );
            }
            if arrived.load(Ordering::Relaxed) == n {
                let s = purloin::stats();
                if s.global_queue_len == 0
                    && s.queue_lens.iter().all(|&q| q == 0)
                    && (s.parked + s.searching) as usize + 1 >= workers
                {
                    break;
                }
            }
            purloin::sleep(Duration::from_millis(1));
        }
        (t.elapsed(), handles, tx)
    };
    let rss_peak = status_kib("VmRSS:");
    let pte_peak = status_kib("VmPTE:");
    let maps_peak = mappings();
    let t = Instant::now();
    drop(tx);
    for h in handles {
        h.join().unwrap();
    }
    let wake_join = t.elapsed();
    let rss_joined = status_kib("VmRSS:");
    Round {
        spawn_parked,
        wake_join,
        rss_before,
        rss_peak,
        pte_before,
        pte_peak,
        rss_joined,
        maps: [maps_before, maps_peak, mappings()],
    }
}

fn main() {
    let mut args =
        std::env::args().skip(1).filter(|a| !a.starts_with("--")).map(|a| a.parse::<usize>().ok());
    let n = args.next().flatten().unwrap_or(1_000_000).max(1);
    let workers = args.next().flatten().unwrap_or(2).max(1);
    let rounds = args.next().flatten().unwrap_or(1).max(1);
    let mut builder = purloin::runtime::Builder::new().workers(workers);
    let stack = match std::env::args().skip(1).filter(|a| !a.starts_with("--")).nth(3) {
        Some(s) => {
            let size = parse_stack(&s);
            builder = builder.stack_size(size);
            format!("{size:?} ({size})")
        }
        None => format!("the default, {:?} ({})", StackSize::default(), StackSize::default()),
    };
    println!("stack size: {stack}");
    let rt = builder.build().unwrap();
    for i in 0..rounds {
        let r = rt.block_on(move || round(n, workers));
        // Memory given back by the pool on its own (bounded delay), then by `trim`.
        let settle = Instant::now();
        let mut rss_settled = status_kib("VmRSS:");
        while settle.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
            let now = status_kib("VmRSS:");
            if now + 1024 >= rss_settled && now < r.rss_peak / 2 {
                rss_settled = now;
                break;
            }
            rss_settled = now;
        }
        let settled_after = settle.elapsed();
        purloin::stack::trim();
        let rss_trimmed = status_kib("VmRSS:");
        let mib = |k: usize| k as f64 / 1024.0;
        println!(
            "round {i}: n {n}, {workers} workers | spawn until parked {:.3} s | wake + join {:.3} s \
             | {:.2} KiB per parked green thread (RSS {:.0} -> {:.0} MiB, page tables {:.0} -> \
             {:.0} MiB) | mappings {} -> {} -> {} \
             | RSS after join {:.0} MiB, {:.0} MiB {:.0} ms later, {:.0} MiB after trim",
            r.spawn_parked.as_secs_f64(),
            r.wake_join.as_secs_f64(),
            (r.rss_peak + r.pte_peak).saturating_sub(r.rss_before + r.pte_before) as f64 / n as f64,
            mib(r.rss_before),
            mib(r.rss_peak),
            mib(r.pte_before),
            mib(r.pte_peak),
            r.maps[0],
            r.maps[1],
            r.maps[2],
            mib(r.rss_joined),
            mib(rss_settled),
            settled_after.as_secs_f64() * 1e3,
            mib(rss_trimmed),
        );
    }
    println!("peak RSS (VmHWM) {:.0} MiB", status_kib("VmHWM:") as f64 / 1024.0);
}
