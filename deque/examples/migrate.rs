//! The same small work-stealing pool written four times: for crossbeam-deque and its port to
//! purloin-deque, for st3 and its port to purloin-deque. Each pool adds up `0..N` by splitting
//! ranges into tasks; idle threads take from a global queue (crossbeam, purloin) and steal
//! from each other. Read each pair side by side: the ports change only what the README's
//! migration tables list.
//!
//! ```text
//! cargo run -p purloin-deque --example migrate
//! ```

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;

/// Adds up `0..N`.
const N: u64 = 200_000;
const THREADS: usize = 3;

/// A task: add up `start..end`, splitting it first if it is big. (`Debug` lets a failed `push`
/// be `expect`ed; without it, write `push(t).ok().expect(..)`.)
#[derive(Debug)]
struct Task(u64, u64);

/// What every pool shares: the number of tasks queued or running, and the running sum.
struct Progress {
    pending: AtomicUsize,
    total: AtomicU64,
}

impl Progress {
    /// One task queued: the whole range.
    fn new() -> Progress {
        Progress { pending: AtomicUsize::new(1), total: AtomicU64::new(0) }
    }

    fn running(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    /// Runs `task`: a small one is added up, a big one is split and `spawn` gets both halves.
    fn run(&self, Task(start, end): Task, mut spawn: impl FnMut(Task)) {
        if end - start > 1_000 {
            let mid = start + (end - start) / 2;
            self.pending.fetch_add(2, Ordering::Relaxed);
            spawn(Task(start, mid));
            spawn(Task(mid, end));
        } else {
            self.total.fetch_add((start..end).sum::<u64>(), Ordering::Relaxed);
        }
        self.pending.fetch_sub(1, Ordering::Release);
    }
}

/// crossbeam-deque: growable LIFO workers, a global `Injector`, and crossbeam's `find_task`.
fn crossbeam_pool() -> u64 {
    use crossbeam_deque::{Injector, Steal, Stealer, Worker};

    let workers: Vec<Worker<Task>> = (0..THREADS).map(|_| Worker::new_lifo()).collect();
    let stealers: Vec<Stealer<Task>> = workers.iter().map(Worker::stealer).collect();
    let global = Injector::new();
    let progress = &Progress::new();
    global.push(Task(0, N));
    thread::scope(|scope| {
        for local in workers {
            let (global, stealers) = (&global, &stealers);
            scope.spawn(move || {
                while progress.running() {
                    let task = local.pop().or_else(|| {
                        std::iter::repeat_with(|| {
                            global
                                .steal_batch_and_pop(&local)
                                .or_else(|| stealers.iter().map(|s| s.steal()).collect())
                        })
                        .find(|s| !s.is_retry())
                        .and_then(Steal::success)
                    });
                    match task {
                        Some(task) => progress.run(task, |t| local.push(t)),
                        None => thread::yield_now(),
                    }
                }
            });
        }
    });
    progress.total.load(Ordering::Relaxed)
}

/// The port: the imports, and `push` returning a `Result` (a growable worker only refuses an
/// item past 2^30 items or its maximum capacity). Everything else is unchanged.
fn purloin_pool_from_crossbeam() -> u64 {
    use purloin_deque::{Injector, Steal, Stealer, Worker};

    let workers: Vec<Worker<Task>> = (0..THREADS).map(|_| Worker::new_lifo()).collect();
    let stealers: Vec<Stealer<Task>> = workers.iter().map(Worker::stealer).collect();
    let global = Injector::new();
    let progress = &Progress::new();
    global.push(Task(0, N));
    thread::scope(|scope| {
        for local in workers {
            let (global, stealers) = (&global, &stealers);
            scope.spawn(move || {
                while progress.running() {
                    let task = local.pop().or_else(|| {
                        std::iter::repeat_with(|| {
                            global
                                .steal_batch_and_pop(&local)
                                .or_else(|| stealers.iter().map(|s| s.steal()).collect())
                        })
                        .find(|s| !s.is_retry())
                        .and_then(Steal::success)
                    });
                    match task {
                        Some(task) => progress.run(task, |t| local.push(t).expect("growable")),
                        None => thread::yield_now(),
                    }
                }
            });
        }
    });
    progress.total.load(Ordering::Relaxed)
}

/// st3: bounded LIFO workers, stealing half with `steal_and_pop`, `Busy` meaning "try another
/// victim". st3 has no global queue: the first task goes to worker 0.
fn st3_pool() -> u64 {
    use st3::StealError;
    use st3::lifo::{Stealer, Worker};

    let workers: Vec<Worker<Task>> = (0..THREADS).map(|_| Worker::new(256)).collect();
    let stealers: Vec<Stealer<Task>> = workers.iter().map(Worker::stealer).collect();
    let progress = &Progress::new();
    workers[0].push(Task(0, N)).expect("room for the first task");
    thread::scope(|scope| {
        for (me, local) in workers.into_iter().enumerate() {
            let stealers = &stealers;
            scope.spawn(move || {
                while progress.running() {
                    let task = local.pop().or_else(|| {
                        (1..THREADS).find_map(|i| {
                            match stealers[(me + i) % THREADS].steal_and_pop(&local, |n| n - n / 2)
                            {
                                Ok((task, _moved)) => Some(task),
                                Err(StealError::Empty | StealError::Busy) => None,
                            }
                        })
                    });
                    match task {
                        // st3 refuses an item when full; this pool never queues more than a
                        // few tasks per thread.
                        Some(task) => {
                            progress.run(task, |t| local.push(t).expect("room in the queue"))
                        }
                        None => thread::yield_now(),
                    }
                }
            });
        }
    });
    progress.total.load(Ordering::Relaxed)
}

/// The port: `Worker::bounded` for `Worker::new`, `steal_half_into` for
/// `steal_and_pop(.., |n| n - n / 2)`, and `Steal`'s three cases for `Result<_, StealError>`
/// (`Retry` is st3's `Busy`). A full bounded queue can now spill its older half into an
/// `Injector` instead of refusing the task.
fn purloin_pool_from_st3() -> u64 {
    use purloin_deque::{Injector, Steal, Stealer, Worker};

    let workers: Vec<Worker<Task>> = (0..THREADS).map(|_| Worker::bounded(256)).collect();
    let stealers: Vec<Stealer<Task>> = workers.iter().map(Worker::stealer).collect();
    let overflow = Injector::new();
    let progress = &Progress::new();
    workers[0].push(Task(0, N)).expect("room for the first task");
    thread::scope(|scope| {
        for (me, local) in workers.into_iter().enumerate() {
            let (stealers, overflow) = (&stealers, &overflow);
            scope.spawn(move || {
                while progress.running() {
                    let task = local.pop().or_else(|| {
                        (1..THREADS)
                            .find_map(|i| {
                                match stealers[(me + i) % THREADS].steal_half_into(&local) {
                                    Steal::Success(task) => Some(task),
                                    Steal::Empty | Steal::Retry => None,
                                }
                            })
                            .or_else(|| overflow.steal().success())
                    });
                    match task {
                        Some(task) => progress.run(task, |t| local.push_or_overflow(t, overflow)),
                        None => thread::yield_now(),
                    }
                }
            });
        }
    });
    progress.total.load(Ordering::Relaxed)
}

fn main() {
    let expected = (0..N).sum::<u64>();
    for (name, pool) in [
        ("crossbeam-deque", crossbeam_pool as fn() -> u64),
        ("purloin-deque, ported from crossbeam-deque", purloin_pool_from_crossbeam),
        ("st3", st3_pool),
        ("purloin-deque, ported from st3", purloin_pool_from_st3),
    ] {
        let total = pool();
        assert_eq!(total, expected, "{name}");
        println!("{name}: {total}");
    }
}
