//! Soak: rounds of green threads (100,000 by default) doing mutex, channel, timed-wait and
//! spawn/join work until a time limit, with exactly-once checks every round and the resident
//! memory sampled after the first round and at the end (it must stay bounded).
//!
//! ```text
//! cargo bench -p purloin --bench profile_soak -- [SECONDS [THREADS]]
//! cargo xtask soak [SECONDS [THREADS]]          # the same
//! ```
//!
//! Exits with status 1 (and says why) if a check fails or the resident memory at the end
//! exceeds twice the first sample plus 64 MiB.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use purloin::sync::Mutex;
use purloin::sync::channel::{RecvTimeoutError, bounded};

/// Resident memory of this process, in bytes (`VmRSS`).
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<usize>().ok())
        .unwrap_or(0);
    kib * 1024
}

/// One round: `n` green threads, each locks the shared mutex, sends its index to the
/// collector, waits (timed) on a channel nobody sends on, and spawns and joins a child. The
/// collector checks every index arrives exactly once; the round checks the mutex count.
fn round(n: usize, counter: &Arc<Mutex<u64>>, timeouts: &Arc<AtomicU64>) -> Result<(), String> {
    let before = *counter.lock().unwrap();
    let (tx, rx) = bounded::<usize>(1024);
    let collector = purloin::spawn(move || {
        let mut seen = vec![false; n];
        for _ in 0..n {
            let i = rx.recv().map_err(|e| format!("collector: {e}"))?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(format!("index {i} delivered twice"));
            }
        }
        Ok::<(), String>(())
    });
    let (_never_tx, never_rx) = bounded::<()>(1);
    let workers: Vec<_> = (0..n)
        .map(|i| {
            let (counter, tx, never_rx, timeouts) =
                (counter.clone(), tx.clone(), never_rx.clone(), timeouts.clone());
            purloin::spawn(move || {
                *counter.lock().unwrap() += 1;
                tx.send(i).expect("the collector is alive");
                if i % 16 == 0 {
                    match never_rx.recv_timeout(Duration::from_micros(200)) {
                        Err(RecvTimeoutError::Timeout) => {
                            timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        other => panic!("a timed wait on a silent channel returned {other:?}"),
                    }
                }
                let child = purloin::spawn(move || i * 2);
                assert_eq!(child.join().unwrap(), i * 2);
                i
            })
        })
        .collect();
    drop(tx);
    for (i, w) in workers.into_iter().enumerate() {
        let got = w.join().map_err(|_| format!("green thread {i} panicked"))?;
        if got != i {
            return Err(format!("green thread {i} returned {got}"));
        }
    }
    collector.join().map_err(|_| "the collector panicked".to_string())??;
    let after = *counter.lock().unwrap();
    if after - before != n as u64 {
        return Err(format!("the mutex counted {} increments, not {n}", after - before));
    }
    Ok(())
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let secs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(60);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let rt = purloin::runtime::Builder::new().build().expect("a runtime");
    let counter = Arc::new(Mutex::new(0u64));
    let timeouts = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut rounds = 0u64;
    let mut first_rss = 0;
    let result = rt.block_on(|| {
        while rounds == 0 || start.elapsed() < Duration::from_secs(secs) {
            round(n, &counter, &timeouts)?;
            rounds += 1;
            if rounds == 1 {
                first_rss = rss();
            }
        }
        Ok::<(), String>(())
    });
    let end_rss = rss();
    println!(
        "soak: {rounds} rounds of {n} green threads in {:.1} s ({} timed waits timed out); \
         RSS after the first round {} MiB, at the end {} MiB",
        start.elapsed().as_secs_f64(),
        timeouts.load(Ordering::Relaxed),
        first_rss >> 20,
        end_rss >> 20
    );
    if let Err(e) = result {
        eprintln!("soak: FAILED: {e}");
        std::process::exit(1);
    }
    if end_rss > 2 * first_rss + (64 << 20) {
        eprintln!(
            "soak: FAILED: resident memory grew from {} to {} MiB",
            first_rss >> 20,
            end_rss >> 20
        );
        std::process::exit(1);
    }
}
