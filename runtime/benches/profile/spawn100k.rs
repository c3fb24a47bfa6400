//! Profiling helper: spawn 100,000 no-op green threads from a green thread, then join them.
//! `cargo bench -p purloin --bench profile_spawn100k -- [workers] [iterations]`.
//!
//! Per iteration: the time from `block_on` to the root starting (`pre`: the root queues behind
//! whatever the last iteration left in the global queue), the spawn and join phases, and what
//! the scheduler did meanwhile (children run inline by the joiner, switches, green threads
//! stolen from local queues, global-queue takes). Then the median total.
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut args =
        std::env::args().skip(1).filter(|a| !a.starts_with("--")).map(|a| a.parse::<usize>().ok());
    let workers = args.next().flatten().unwrap_or(2);
    let iterations = args.next().flatten().unwrap_or(10).max(1);
    let rt = purloin::runtime::Builder::new()
        .workers(workers)
        .stack_size(purloin::StackSize::Small)
        .build()
        .unwrap();
    let mut totals = Vec::new();
    for _ in 0..iterations {
        let before = rt.stats().total;
        let t = Instant::now();
        let (started, spawned, joined) = rt.block_on(|| {
            let started = Instant::now();
            let hs: Vec<_> =
                (0..100_000u64).map(|i| purloin::spawn(move || black_box(i))).collect();
            let spawned = Instant::now();
            black_box(hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>());
            (started, spawned, Instant::now())
        });
        let total = t.elapsed();
        let s = rt.stats().total;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        println!(
            "{:6.2} ms: pre {:5.2} spawn {:6.2} join {:6.2} | inline {:6} switches {:6} \
             stolen {:6} steals {:5} global pulls {:5}",
            ms(total),
            ms(started - t),
            ms(spawned - started),
            ms(joined - spawned),
            s.inline_joins - before.inline_joins,
            s.switches - before.switches,
            s.stolen - before.stolen,
            s.steals - before.steals,
            s.global_pulls - before.global_pulls,
        );
        totals.push(total);
    }
    totals.sort();
    println!("median {:?}", totals[totals.len() / 2]);
}
