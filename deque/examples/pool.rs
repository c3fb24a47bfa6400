//! A tiny work-stealing thread pool built from `purloin-deque` alone.
//!
//! Each worker thread owns a bounded `Worker` queue; new tasks go to the local queue (half of it
//! overflows to the shared `Injector` when full); an idle worker takes a batch from the
//! injector, then steals half of a random victim's queue. The job: sum the squares of
//! `0..n` by splitting ranges recursively (fork-join style), checked against the closed form.
//!
//! ```text
//! cargo run --release -p purloin-deque --example pool [n] [threads]
//! ```

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use purloin_deque::{Injector, Steal, Stealer, Worker};

/// A task: sum the squares of `start..end`.
struct Task {
    start: u64,
    end: u64,
}

/// Ranges at most this long are summed directly instead of split.
const LEAF: u64 = 1024;

struct Pool {
    injector: Injector<Task>,
    stealers: Vec<Stealer<Task>>,
    /// Tasks pushed but not finished; the pool is done when it reaches zero.
    pending: AtomicUsize,
    total: AtomicU64,
    steals: AtomicUsize,
}

impl Pool {
    /// Runs one task on the worker that owns `local`, pushing the halves of a large range.
    fn run(&self, task: Task, local: &Worker<Task>) {
        let Task { start, end } = task;
        if end - start > LEAF {
            let mid = start + (end - start) / 2;
            self.pending.fetch_add(2, Ordering::Relaxed);
            local.push_or_overflow(Task { start, end: mid }, &self.injector);
            local.push_or_overflow(Task { start: mid, end }, &self.injector);
        } else {
            let sum: u64 = (start..end).map(|i| i.wrapping_mul(i)).fold(0, u64::wrapping_add);
            self.total.fetch_add(sum, Ordering::Relaxed);
        }
        // Release: the final decrement publishes every result to the thread that sees zero.
        self.pending.fetch_sub(1, Ordering::Release);
    }

    /// The next task for worker `me`: local queue, then the injector, then steal half of
    /// another worker's queue (starting at a pseudo-random victim).
    fn find(&self, me: usize, local: &Worker<Task>, seed: &mut u64) -> Option<Task> {
        if let Some(task) = local.pop() {
            return Some(task);
        }
        loop {
            let batch = (self.injector.len() / self.stealers.len() + 1).min(16) + 1;
            let mut found = self.injector.steal_batch_with_limit_and_pop(local, batch);
            // xorshift: a cheap pseudo-random starting victim.
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            let n = self.stealers.len();
            let first = (*seed % n as u64) as usize;
            for victim in (0..n).map(|i| (first + i) % n).filter(|&v| v != me) {
                if found.is_success() {
                    break;
                }
                found = found.or_else(|| self.stealers[victim].steal_half_into(local));
                if found.is_success() {
                    self.steals.fetch_add(1, Ordering::Relaxed);
                }
            }
            match found {
                Steal::Success(task) => return Some(task),
                // Someone was mid-operation: look again.
                Steal::Retry => continue,
                Steal::Empty => return None,
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(1 << 24, |s| s.parse().expect("n must be a number"));
    let threads: usize = args.next().map_or_else(
        || thread::available_parallelism().map_or(2, |p| p.get()),
        |s| s.parse().expect("threads must be a number"),
    );
    assert!(threads > 0, "need at least one thread");

    let workers: Vec<Worker<Task>> = (0..threads).map(|_| Worker::bounded(256)).collect();
    let pool = Pool {
        injector: Injector::new(),
        stealers: workers.iter().map(Worker::stealer).collect(),
        pending: AtomicUsize::new(1),
        total: AtomicU64::new(0),
        steals: AtomicUsize::new(0),
    };
    pool.injector.push(Task { start: 0, end: n });

    let started = Instant::now();
    thread::scope(|scope| {
        for (me, local) in workers.into_iter().enumerate() {
            let pool = &pool;
            scope.spawn(move || {
                let mut seed = 0x9E37_79B9_7F4A_7C15 ^ (me as u64 + 1);
                let mut idle = 0u32;
                // Acquire: pairs with the Release decrements in `run`.
                while pool.pending.load(Ordering::Acquire) > 0 {
                    match pool.find(me, &local, &mut seed) {
                        Some(task) => {
                            idle = 0;
                            pool.run(task, &local);
                        }
                        // Nothing anywhere right now: back off (a real scheduler would park).
                        None if idle < 64 => {
                            idle += 1;
                            std::hint::spin_loop();
                        }
                        None => thread::yield_now(),
                    }
                }
            });
        }
    });
    let elapsed = started.elapsed();

    // Sum of i^2 for i in 0..n, modulo 2^64 (the tasks sum with wrapping arithmetic too).
    let n128 = u128::from(n);
    let expected = (n128.saturating_sub(1) * n128 * (2 * n128).saturating_sub(1) / 6) as u64;
    let total = pool.total.load(Ordering::Relaxed);
    println!(
        "sum of squares below {n} on {threads} threads: {total} ({} steals, {elapsed:.2?})",
        pool.steals.load(Ordering::Relaxed)
    );
    assert_eq!(total, expected, "every range summed exactly once");
}
