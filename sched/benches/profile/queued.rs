//! Profiling helper: spawn N no-op green threads through the queues (no joins), wait for all.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub fn run(_args: &[String]) {
    let sched = purloin_sched::Builder::new()
        .workers(2)
        .stack_size(purloin_sched::StackSize::Small)
        .build()
        .unwrap();
    for _ in 0..5 {
        let n = 200_000u64;
        let el = sched
            .spawn(move || {
                let done = Arc::new(AtomicU64::new(0));
                let t = Instant::now();
                for _ in 0..n {
                    let d = done.clone();
                    drop(purloin_sched::spawn(move || {
                        d.fetch_add(1, Ordering::Relaxed);
                    }));
                }
                while done.load(Ordering::Relaxed) < n {
                    purloin_sched::yield_now();
                }
                t.elapsed()
            })
            .join()
            .unwrap();
        println!("{:.1} ns per spawn+run+exit", el.as_nanos() as f64 / n as f64);
    }
    println!("{:?}", sched.stats().total);
}
