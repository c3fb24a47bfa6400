//! Spawns 100,000 no-op green threads from a green thread, then joins them in spawn order;
//! prints each iteration's time and what the scheduler did, then the median.
//! Arguments: `[workers (1)] [iterations (20)]`.
use std::hint::black_box;
use std::time::{Duration, Instant};

use purloin_sched::{Builder, StackSize};

pub fn run(args: &[String]) {
    let workers: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1);
    let iterations: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(20).max(1);
    let sched = Builder::new().workers(workers).stack_size(StackSize::Small).build().unwrap();
    let mut totals: Vec<Duration> = Vec::new();
    for _ in 0..iterations {
        let before = sched.stats().total;
        let t = Instant::now();
        sched
            .spawn(|| {
                let hs: Vec<_> = (0..100_000u64)
                    .map(|i| purloin_sched::spawn(move || black_box(i)).unwrap())
                    .collect();
                black_box(hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>())
            })
            .join()
            .unwrap();
        let total = t.elapsed();
        let s = sched.stats().total;
        println!(
            "{:6.2} ms | inline {:6} switches {:6} stolen {:6} global pulls {:5}",
            total.as_secs_f64() * 1e3,
            s.inline_joins - before.inline_joins,
            s.switches - before.switches,
            s.stolen - before.stolen,
            s.global_pulls - before.global_pulls,
        );
        totals.push(total);
    }
    totals.sort();
    println!("workers={workers} median {:?}", totals[totals.len() / 2]);
}
