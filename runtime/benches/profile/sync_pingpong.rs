//! Channel ping-pong between two green threads on a 2-worker runtime, for profiling:
//! `cargo bench -p purloin --bench profile_sync_pingpong -- [cap] [n] [workers]`, or
//! `perf record -g` on the binary it builds in `target/release/deps/` (`cap` 0 is the
//! rendezvous channel, `u` the unbounded one; `workers` defaults to 2). With `workers` 1 the
//! run is deterministic, so `valgrind --tool=callgrind` instruction counts compare builds.
use std::time::Instant;

use purloin::sync::channel::{Receiver, Sender, bounded, unbounded};

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let cap_arg = args.next().unwrap_or_else(|| "0".into());
    let cap: Option<usize> = if cap_arg == "u" { None } else { cap_arg.parse().ok() };
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5_000_000);
    let workers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let rt = purloin::runtime::Builder::new().workers(workers).build().unwrap();
    let t = Instant::now();
    rt.block_on(|| {
        let (tx1, rx1) = make(cap);
        let (tx2, rx2) = make(cap);
        let h = purloin::spawn(move || {
            for v in rx1.iter() {
                tx2.send(v).unwrap();
            }
        });
        for i in 0..n {
            tx1.send(i).unwrap();
            rx2.recv().unwrap();
        }
        drop(tx1);
        h.join().unwrap();
    });
    println!("ping-pong {cap_arg}: {:.1} ns/round trip", t.elapsed().as_nanos() as f64 / n as f64);
    // Leak the runtime: its shutdown is not what is measured here.
    std::mem::forget(rt);
}

fn make(cap: Option<usize>) -> (Sender<u32>, Receiver<u32>) {
    match cap {
        Some(c) => bounded(c),
        None => unbounded(),
    }
}
