//! P1 on a noisy machine: many short ping-pong trials of `Parker` and `std::thread::park`,
//! interleaved (A, B, A, B, ...), reporting the median time per round trip of each and the
//! median of the per-pair ratios. Interleaving cancels most of the drift that makes separate
//! criterion runs on a shared 2-core box disagree by ±50%.
//!
//! ```text
//! cargo run --release -p purloin-parking --example ping_pong_ab
//! TRIALS=40 ROUNDS=2000 cargo run ...   (the defaults)
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use purloin_parking::Parker;

const MAIN: u32 = 0;
const PEER: u32 = 1;

fn trial_parker(rounds: u32) -> Duration {
    let main_parker = Parker::new();
    let main_unparker = main_parker.unparker();
    let peer_parker = Parker::new();
    let peer_unparker = peer_parker.unparker();
    let turn = Arc::new(AtomicU32::new(MAIN));
    let barrier = Arc::new(Barrier::new(2));
    let peer = {
        let (turn, barrier) = (turn.clone(), barrier.clone());
        thread::spawn(move || {
            barrier.wait();
            for _ in 0..rounds {
                while turn.load(Ordering::Acquire) != PEER {
                    peer_parker.park();
                }
                turn.store(MAIN, Ordering::Release);
                main_unparker.unpark();
            }
        })
    };
    barrier.wait();
    let start = Instant::now();
    for _ in 0..rounds {
        turn.store(PEER, Ordering::Release);
        peer_unparker.unpark();
        while turn.load(Ordering::Acquire) != MAIN {
            main_parker.park();
        }
    }
    let elapsed = start.elapsed();
    peer.join().unwrap();
    elapsed
}

fn trial_std(rounds: u32) -> Duration {
    let main_thread = thread::current();
    let peer_thread: Arc<OnceLock<thread::Thread>> = Arc::default();
    let turn = Arc::new(AtomicU32::new(MAIN));
    let barrier = Arc::new(Barrier::new(2));
    let peer = {
        let (peer_thread, turn, barrier) = (peer_thread.clone(), turn.clone(), barrier.clone());
        thread::spawn(move || {
            peer_thread.set(thread::current()).unwrap();
            barrier.wait();
            for _ in 0..rounds {
                while turn.load(Ordering::Acquire) != PEER {
                    thread::park();
                }
                turn.store(MAIN, Ordering::Release);
                main_thread.unpark();
            }
        })
    };
    barrier.wait();
    let peer_handle = peer_thread.get().unwrap().clone();
    let start = Instant::now();
    for _ in 0..rounds {
        turn.store(PEER, Ordering::Release);
        peer_handle.unpark();
        while turn.load(Ordering::Acquire) != MAIN {
            thread::park();
        }
    }
    let elapsed = start.elapsed();
    peer.join().unwrap();
    elapsed
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let env = |k: &str, d: u32| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (trials, rounds) = (env("TRIALS", 40).max(1), env("ROUNDS", 2000).max(1));
    let per = |d: Duration| d.as_nanos() as f64 / f64::from(rounds);
    let (mut ours, mut std_, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..trials {
        // Alternate which goes first within a pair.
        let (a, b) = if i % 2 == 0 {
            let a = per(trial_parker(rounds));
            (a, per(trial_std(rounds)))
        } else {
            let b = per(trial_std(rounds));
            (per(trial_parker(rounds)), b)
        };
        ours.push(a);
        std_.push(b);
        ratios.push(a / b);
    }
    println!(
        "{trials} interleaved pairs of {rounds} round trips: purloin Parker median {:.0} ns, \
         std thread::park median {:.0} ns, median per-pair ratio {:.3}",
        median(&mut ours),
        median(&mut std_),
        median(&mut ratios)
    );
}
