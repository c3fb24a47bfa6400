//! Profiling helper: N green threads that park (each on its own stack), then released.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

pub fn run(args: &[String]) {
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let sched = purloin_sched::Builder::new()
        .workers(2)
        .stack_size(purloin_sched::StackSize::Small)
        .build()
        .unwrap();
    let parked = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let (p, r) = (parked.clone(), release.clone());
            sched.spawn(move || {
                p.fetch_add(1, Ordering::Relaxed);
                while !r.load(Ordering::Acquire) {
                    purloin_sched::park();
                }
            })
        })
        .collect();
    let spawned = t.elapsed();
    while parked.load(Ordering::Relaxed) < n {
        std::thread::yield_now();
    }
    println!("spawn {n}: {:?}, all parked: {:?}", spawned, t.elapsed());
    let t = Instant::now();
    release.store(true, Ordering::Release);
    for h in &hs {
        h.thread().unpark();
    }
    for h in hs {
        h.join().unwrap();
    }
    println!("released + joined: {:?}", t.elapsed());
}
