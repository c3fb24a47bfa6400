//! Profiling helper: fib(n) with fork-join, to measure the cost per fork.
use std::time::Instant;

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = purloin_sched::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

pub fn run(args: &[String]) {
    let n: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(30);
    let workers: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2);
    let sched = purloin_sched::Builder::new().workers(workers).build().unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let r = sched.spawn(move || fib(n)).join().unwrap();
        let el = t.elapsed();
        let forks = (1..=n).fold((0u64, 0u64), |(a, b), _| (b, a + b + 1)).0;
        println!(
            "fib({n}) = {r}: {:.1} ms, {:.1} ns/fork ({forks} forks)",
            el.as_secs_f64() * 1e3,
            el.as_nanos() as f64 / forks as f64
        );
    }
    println!("{:?}", sched.stats().total);
}
