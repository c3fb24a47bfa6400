//! Channel ping-pong between two green threads on a 2-worker scheduler, for profiling:
//! `cargo bench -p purloin-sync --bench profile_pingpong -- [cap] [n] [workers]`, or
//! `perf record -g` on the binary it builds in `target/release/deps/` (`cap` 0 is the
//! rendezvous channel, `u` the unbounded one; `workers` defaults to 2). With `workers` 1 the
//! run is deterministic, so `valgrind --tool=callgrind` instruction counts compare builds.
use std::time::Instant;

use purloin_sync::channel::{Receiver, Sender, bounded, unbounded};

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let cap_arg = args.next().unwrap_or_else(|| "0".into());
    let cap: Option<usize> = if cap_arg == "u" { None } else { cap_arg.parse().ok() };
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5_000_000);
    let workers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let sched = purloin_sched::Builder::new().workers(workers).build().unwrap();
    let t = Instant::now();
    let root = sched.spawn(move || {
        let (tx1, rx1) = make(cap);
        let (tx2, rx2) = make(cap);
        let h = purloin_sched::spawn(move || {
            for v in rx1.iter() {
                tx2.send(v).unwrap();
            }
        })
        .unwrap();
        for i in 0..n {
            tx1.send(i).unwrap();
            rx2.recv().unwrap();
        }
        drop(tx1);
        h.join().unwrap();
    });
    root.join().unwrap();
    println!("ping-pong {cap_arg}: {:.1} ns/round trip", t.elapsed().as_nanos() as f64 / n as f64);
    // Leak the scheduler: its shutdown is not what is measured here.
    std::mem::forget(sched);
}

fn make(cap: Option<usize>) -> (Sender<u32>, Receiver<u32>) {
    match cap {
        Some(c) => bounded(c),
        None => unbounded(),
    }
}
