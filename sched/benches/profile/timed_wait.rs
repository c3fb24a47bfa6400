//! Profiling helper: the timed-wait path. Each wait arms a 1 h timer and
//! ends early, as a `recv_timeout(1 h)` answered at once does:
//!
//! - `self`: a green thread unparks itself, then `park_timeout(1 h)` (returns on the token);
//! - `pingpong`: two green threads on one worker hand a turn back and forth, each waiting
//!   with `park_timeout(1 h)`.
//!
//! Prints ns per wait (median of 5 runs) and the process's peak RSS (the timers of the old
//! code stayed in the heap until their deadline).
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use purloin_sched::GreenThread;

const HOUR: Duration = Duration::from_secs(3600);

pub fn run(args: &[String]) {
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
    let mut selfs = Vec::new();
    let mut pings = Vec::new();
    for _ in 0..5 {
        selfs.push(
            sched
                .spawn(move || {
                    let me = purloin_sched::current().unwrap();
                    let t = Instant::now();
                    for _ in 0..n {
                        me.unpark();
                        purloin_sched::park_timeout(HOUR);
                    }
                    t.elapsed().as_nanos() as f64 / n as f64
                })
                .join()
                .unwrap(),
        );
        pings.push(pingpong(&sched, n));
    }
    selfs.sort_by(f64::total_cmp);
    pings.sort_by(f64::total_cmp);
    println!("timed_wait self     {n} waits: {:.1} ns/wait (median of 5)", selfs[2]);
    println!("timed_wait pingpong {n} waits: {:.1} ns/wait (median of 5)", pings[2]);
    println!("peak RSS: {} MiB", peak_rss_kib() / 1024);
}

/// Two green threads pass a turn `n` times; each waits for its turn with a 1 h timed park.
fn pingpong(sched: &purloin_sched::Scheduler, n: usize) -> f64 {
    let turn = Arc::new(AtomicUsize::new(0));
    let slots: Arc<[std::sync::Mutex<Option<GreenThread>>; 2]> = Arc::default();
    let side = |me: usize| {
        let (turn, slots) = (turn.clone(), slots.clone());
        move || {
            *slots[me].lock().unwrap() = purloin_sched::current();
            let other = loop {
                if let Some(g) = *slots[1 - me].lock().unwrap() {
                    break g;
                }
                purloin_sched::yield_now();
            };
            let t = Instant::now();
            for i in 0..n {
                // My turns are 2i + me; Acquire pairs with the other side's Release store.
                while turn.load(Ordering::Acquire) != 2 * i + me {
                    purloin_sched::park_timeout(HOUR);
                }
                turn.store(2 * i + me + 1, Ordering::Release);
                other.unpark();
            }
            t.elapsed().as_nanos() as f64 / (2 * n) as f64
        }
    };
    let a = sched.spawn(side(0));
    let b = sched.spawn(side(1));
    b.join().unwrap();
    a.join().unwrap()
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
