//! Quick timings of purloin::sync's hot paths (a smoke check; `benches/sync.rs` has the
//! criterion measurements against the peers).
use std::sync::Arc;
use std::time::Instant;

use purloin::sync::Mutex;
use purloin::sync::channel::{bounded, unbounded};

fn main() {
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let n = 1_000_000u32;
    for round in 0..3 {
        for cap in [0usize, 1] {
            let t = Instant::now();
            rt.block_on(|| {
                let (tx1, rx1) = bounded::<u32>(cap);
                let (tx2, rx2) = bounded::<u32>(cap);
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
            println!(
                "[{round}] ping-pong bounded({cap}): {:.1} ns/round trip",
                t.elapsed().as_nanos() as f64 / n as f64
            );
        }
        let t = Instant::now();
        rt.block_on(|| {
            let m = Arc::new(Mutex::new(0u64));
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let m = m.clone();
                    purloin::spawn(move || {
                        for _ in 0..n / 4 {
                            *m.lock().unwrap() += 1;
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        });
        println!(
            "[{round}] mutex 4 green threads: {:.1} ns/increment",
            t.elapsed().as_nanos() as f64 / n as f64
        );
        let t = Instant::now();
        rt.block_on(|| {
            let (tx, rx) = bounded::<u64>(1024);
            let ps: Vec<_> = (0..2)
                .map(|_| {
                    let tx = tx.clone();
                    purloin::spawn(move || {
                        for i in 0..n as u64 / 2 {
                            tx.send(i).unwrap();
                        }
                    })
                })
                .collect();
            drop(tx);
            let cs: Vec<_> = (0..2)
                .map(|_| {
                    let rx = rx.clone();
                    purloin::spawn(move || rx.iter().count())
                })
                .collect();
            for p in ps {
                p.join().unwrap();
            }
            let c: usize = cs.into_iter().map(|c| c.join().unwrap()).sum();
            assert_eq!(c, n as usize);
        });
        println!(
            "[{round}] mpmc 2x2 bounded(1024): {:.1} ns/msg",
            t.elapsed().as_nanos() as f64 / n as f64
        );
        let t = Instant::now();
        {
            let (tx, rx) = crossbeam_channel::bounded::<u64>(1024);
            let ps: Vec<_> = (0..2)
                .map(|_| {
                    let tx = tx.clone();
                    std::thread::spawn(move || {
                        for i in 0..n as u64 / 2 {
                            tx.send(i).unwrap();
                        }
                    })
                })
                .collect();
            drop(tx);
            let cs: Vec<_> = (0..2)
                .map(|_| {
                    let rx = rx.clone();
                    std::thread::spawn(move || rx.iter().count())
                })
                .collect();
            for p in ps {
                p.join().unwrap();
            }
            let c: usize = cs.into_iter().map(|c| c.join().unwrap()).sum();
            assert_eq!(c, n as usize);
        }
        println!(
            "[{round}] crossbeam mpmc 2x2 bounded(1024): {:.1} ns/msg",
            t.elapsed().as_nanos() as f64 / n as f64
        );
        let _ = unbounded::<u8>();
    }
    // Leak the runtime: its shutdown is not what is measured here.
    std::mem::forget(rt);
}
