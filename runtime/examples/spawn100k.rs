//! Profiling helper: spawn 100,000 no-op green threads from a green thread, then join them.
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let rt = purloin::runtime::Builder::new()
        .workers(std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2))
        .stack_size(purloin::StackSize::Small)
        .build()
        .unwrap();
    for _ in 0..10 {
        let t = Instant::now();
        let s = rt.block_on(|| {
            let hs: Vec<_> =
                (0..100_000u64).map(|i| purloin::spawn(move || black_box(i))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        println!("{:?} ({s})", t.elapsed());
    }
    println!("{:?}", rt.stats().total);
}
