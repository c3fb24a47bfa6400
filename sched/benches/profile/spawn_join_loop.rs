//! Profiling helper: spawn + join of a no-op child from a green thread, in a loop.
use std::time::Instant;

pub fn run(args: &[String]) {
    let workers: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1);
    let sched = purloin_sched::Builder::new()
        .workers(workers)
        .stack_size(purloin_sched::StackSize::Small)
        .build()
        .unwrap();
    let n = 2_000_000u32;
    let t = Instant::now();
    sched
        .spawn(move || {
            for _ in 0..n {
                purloin_sched::spawn(|| ()).unwrap().join().unwrap();
            }
        })
        .join()
        .unwrap();
    let el = t.elapsed();
    println!("workers={workers} spawn+join: {:.1} ns", el.as_nanos() as f64 / n as f64);
    println!("{:?}", sched.stats().total);
}
