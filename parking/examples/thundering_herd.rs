//! P4: thundering herd. Many workers sleep on parking lots; a producer hands out tasks one at a
//! time with `signal_task(1)`. Counts wake-ups that found nothing to do ("wasted"), and futex
//! syscalls, for three configurations with the same workers and the same task stream:
//!
//! - `purloin for_workers`: `ParkingLots::for_workers(W)` (one lot per 4 workers),
//! - `purloin fixed 4`: `ParkingLots::new(4)` (brpc's lot count, our lot),
//! - `brpc-style fixed 4`: 4 lots of brpc's algorithm (a signal is `fetch_add` then an
//!   unconditional `futex_wake`; no waiter count), re-implemented here on `futex`.
//!
//! ```text
//! cargo run --release -p purloin-parking --features stats --example thundering_herd
//! WORKERS=64 TASKS=100000 WORK_NS=2000 GAP_NS=2000 cargo run ... (the defaults)
//! ```
//!
//! Numbers depend heavily on the machine (core count, load): compare configurations within one
//! run, not across machines.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use purloin_parking::{ParkingLots, futex, stats};

/// brpc's ParkingLot (bthread/parking_lot.h): `_pending_signal` bumped by 2 per signal, bit 0
/// = stopped, `futex_wake` on every signal.
#[repr(align(128))]
struct BrpcLot(futex::AtomicU32);

struct Brpc(Vec<BrpcLot>);

impl Brpc {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn state(&self, lot: usize) -> u32 {
        self.0[lot].0.load(Ordering::Acquire)
    }
    fn stopped(state: u32) -> bool {
        state & 1 != 0
    }
    fn wait(&self, lot: usize, state: u32) {
        futex::wait(&self.0[lot].0, state, None);
    }
    fn signal_task(&self, n: u32, from: usize) -> u32 {
        let mut left = n.min(2);
        let mut woken = 0;
        let mut i = from % self.0.len();
        for _ in 0..self.0.len() {
            if left == 0 {
                break;
            }
            self.0[i].0.fetch_add(2, Ordering::Release);
            let w = futex::wake(&self.0[i].0, 1) as u32;
            woken += w;
            left -= w.min(left);
            i = (i + 1) % self.0.len();
        }
        woken
    }
    fn stop(&self) {
        for lot in &self.0 {
            lot.0.fetch_or(1, Ordering::Release);
            futex::wake_all(&lot.0);
        }
    }
}

struct Config {
    workers: usize,
    tasks: usize,
    work: Duration,
    gap: Duration,
}

#[derive(Default)]
struct Counts {
    wakeups: AtomicU64,
    wasted: AtomicU64,
    done: AtomicUsize,
}

fn spin_for(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        black_box(());
    }
}

fn take(pending: &AtomicUsize) -> bool {
    pending.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
}

/// Runs the producer on this thread; `worker` is each worker's loop.
fn run<W: Fn(usize, &AtomicUsize, &Counts, &AtomicBool) + Sync>(
    cfg: &Config,
    signal_task: impl Fn(u32, usize) -> u32,
    stop: impl Fn(),
    worker: W,
) -> (Duration, Counts) {
    let pending = AtomicUsize::new(0);
    let counts = Counts::default();
    let quit = AtomicBool::new(false);
    let start = Instant::now();
    thread::scope(|s| {
        for w in 0..cfg.workers {
            let (pending, counts, quit, worker) = (&pending, &counts, &quit, &worker);
            thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn_scoped(s, move || worker(w, pending, counts, quit))
                .expect("spawn worker");
        }
        for i in 0..cfg.tasks {
            pending.fetch_add(1, Ordering::Release);
            signal_task(1, i);
            spin_for(cfg.gap);
        }
        while counts.done.load(Ordering::Acquire) < cfg.tasks {
            thread::yield_now();
        }
        quit.store(true, Ordering::Release);
        stop();
    });
    (start.elapsed(), counts)
}

/// One run's numbers.
struct Sample {
    wakeups: u64,
    wasted: u64,
    syscalls: u64,
    millis: f64,
}

impl Sample {
    fn new(elapsed: Duration, counts: &Counts, d: &stats::Counters) -> Sample {
        Sample {
            wakeups: counts.wakeups.load(Ordering::Relaxed),
            wasted: counts.wasted.load(Ordering::Relaxed),
            syscalls: d.syscalls(),
            millis: elapsed.as_secs_f64() * 1e3,
        }
    }
    fn wasted_pct(&self) -> f64 {
        100.0 * self.wasted as f64 / self.wakeups.max(1) as f64
    }
}

/// Median and range of `f` over `samples`.
fn summary(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> String {
    let mut v: Vec<f64> = samples.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    format!("{:.1} ({:.1}–{:.1})", v[v.len() / 2], v[0], v[v.len() - 1])
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn run_ours(cfg: &Config, lots: &ParkingLots) -> Sample {
    let before = stats::snapshot();
    let (elapsed, counts) = run(
        cfg,
        |n, from| lots.signal_task(n, from),
        || lots.stop(),
        |w, pending, counts, quit| {
            let lot = lots.lot(lots.lot_for_worker(w));
            let mut just_woke = false;
            loop {
                let state = lot.state();
                if take(pending) {
                    spin_for(cfg.work);
                    counts.done.fetch_add(1, Ordering::Release);
                    just_woke = false;
                    continue;
                }
                if just_woke {
                    counts.wasted.fetch_add(1, Ordering::Relaxed);
                }
                if state.is_stopped() || quit.load(Ordering::Acquire) {
                    return;
                }
                lot.wait(state);
                counts.wakeups.fetch_add(1, Ordering::Relaxed);
                just_woke = true;
            }
        },
    );
    Sample::new(elapsed, &counts, &stats::snapshot().since(&before))
}

fn run_brpc(cfg: &Config) -> Sample {
    let brpc = Brpc((0..4).map(|_| BrpcLot(futex::AtomicU32::new(0))).collect());
    let before = stats::snapshot();
    let (elapsed, counts) = run(
        cfg,
        |n, from| brpc.signal_task(n, from),
        || brpc.stop(),
        |w, pending, counts, quit| {
            let lot = w % brpc.len();
            let mut just_woke = false;
            loop {
                let state = brpc.state(lot);
                if take(pending) {
                    spin_for(cfg.work);
                    counts.done.fetch_add(1, Ordering::Release);
                    just_woke = false;
                    continue;
                }
                if just_woke {
                    counts.wasted.fetch_add(1, Ordering::Relaxed);
                }
                if Brpc::stopped(state) || quit.load(Ordering::Acquire) {
                    return;
                }
                brpc.wait(lot, state);
                counts.wakeups.fetch_add(1, Ordering::Relaxed);
                just_woke = true;
            }
        },
    );
    Sample::new(elapsed, &counts, &stats::snapshot().since(&before))
}

fn main() {
    let cfg = Config {
        workers: env("WORKERS", 64) as usize,
        tasks: env("TASKS", 50_000) as usize,
        work: Duration::from_nanos(env("WORK_NS", 2_000)),
        gap: Duration::from_nanos(env("GAP_NS", 2_000)),
    };
    let rounds = env("ROUNDS", 5).max(1) as usize;
    println!(
        "{} workers, {} tasks of {:?} each, one signal_task(1) per task every {:?}; {} CPUs; \
         {rounds} rounds, configurations interleaved; median (min–max)",
        cfg.workers,
        cfg.tasks,
        cfg.work,
        cfg.gap,
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    if !stats::ENABLED {
        println!("(syscall columns need --features stats)");
    }
    let names = ["purloin for_workers", "purloin fixed 4", "brpc-style fixed 4"];
    let lot_counts = [ParkingLots::for_workers(cfg.workers).len(), 4, 4];
    let mut samples: [Vec<Sample>; 3] = Default::default();
    for round in 0..rounds {
        // Rotate the order each round so no configuration always runs first.
        for k in 0..3 {
            let which = (round + k) % 3;
            let sample = match which {
                0 => run_ours(&cfg, &ParkingLots::for_workers(cfg.workers)),
                1 => run_ours(&cfg, &ParkingLots::new(4)),
                _ => run_brpc(&cfg),
            };
            samples[which].push(sample);
        }
    }
    println!(
        "\n| configuration | lots | wake-ups | wasted wake-ups % | futex syscalls per task | time ms |"
    );
    println!("|---|---|---|---|---|---|");
    for i in 0..3 {
        let s = &samples[i];
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            names[i],
            lot_counts[i],
            summary(s, |x| x.wakeups as f64),
            summary(s, Sample::wasted_pct),
            summary(s, |x| x.syscalls as f64 / cfg.tasks as f64),
            summary(s, |x| x.millis),
        );
    }
}
