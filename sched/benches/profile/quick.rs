//! Quick timings of the scheduler's basic operations (a smoke check; the criterion benches in
//! `benches/` are the real measurements).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use purloin_sched::{Builder, StackSize};

pub fn run(_args: &[String]) {
    for workers in [1, 2] {
        let sched = Builder::new().workers(workers).stack_size(StackSize::Small).build().unwrap();
        let n = 1_000_000u32;
        let t = Instant::now();
        sched
            .spawn(move || {
                for _ in 0..n {
                    purloin_sched::yield_now();
                }
            })
            .join()
            .unwrap();
        println!("workers={workers} yield: {:.1} ns", t.elapsed().as_nanos() as f64 / n as f64);

        let n = 200_000u32;
        let t = Instant::now();
        sched
            .spawn(move || {
                for _ in 0..n {
                    purloin_sched::spawn(|| ()).unwrap().join().unwrap();
                }
            })
            .join()
            .unwrap();
        println!(
            "workers={workers} spawn+join (join-helping): {:.1} ns",
            t.elapsed().as_nanos() as f64 / n as f64
        );

        let t = Instant::now();
        sched
            .spawn(move || {
                let done = Arc::new(AtomicUsize::new(0));
                for _ in 0..n {
                    let d = done.clone();
                    drop(purloin_sched::spawn(move || {
                        d.fetch_add(1, Ordering::Relaxed);
                    }));
                }
                while done.load(Ordering::Relaxed) < n as usize {
                    purloin_sched::yield_now();
                }
            })
            .join()
            .unwrap();
        println!(
            "workers={workers} spawn+run+exit via queues: {:.1} ns",
            t.elapsed().as_nanos() as f64 / n as f64
        );

        let t = Instant::now();
        let hs: Vec<_> = (0..n).map(|_| sched.spawn(|| ())).collect();
        for h in hs {
            h.join().unwrap();
        }
        println!(
            "workers={workers} spawn from outside + join: {:.1} ns",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    }
}
