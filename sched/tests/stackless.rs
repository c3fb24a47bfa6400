//! Stackless tasks: stepped on worker stacks, parked between steps, woken by unpark, and a
//! wake-up during a step is not lost.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, Task, TaskStep};

/// Steps until it has seen `target` wake-ups; each step consumes the pending ones.
struct Counter {
    pending: AtomicUsize,
    seen: AtomicUsize,
    target: usize,
    done: Arc<AtomicUsize>,
}

impl Task for Counter {
    fn step(&self) -> TaskStep {
        let n = self.pending.swap(0, Ordering::AcqRel);
        let seen = self.seen.fetch_add(n, Ordering::AcqRel) + n;
        if seen >= self.target {
            self.done.fetch_add(1, Ordering::AcqRel);
            TaskStep::Done
        } else {
            TaskStep::Wait
        }
    }
}

#[test]
fn wakeups_from_many_threads_are_never_lost() {
    let _w = common::watchdog("stackless", Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let t = Arc::new(Counter {
            pending: AtomicUsize::new(0),
            seen: AtomicUsize::new(0),
            target: 1000,
            done: done.clone(),
        });
        let h = sched.spawn_task(t.clone()).unwrap();
        tasks.push((t, h));
    }
    // Two OS threads deliver 500 events each to every task: event, then unpark.
    let tasks = Arc::new(tasks);
    let senders: Vec<_> = (0..2)
        .map(|_| {
            let tasks = tasks.clone();
            std::thread::spawn(move || {
                for _ in 0..500 {
                    for (t, h) in tasks.iter() {
                        t.pending.fetch_add(1, Ordering::AcqRel);
                        h.unpark();
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    while done.load(Ordering::Acquire) < 100 {
        std::thread::yield_now();
    }
    assert!(tasks.iter().all(|(t, _)| t.seen.load(Ordering::Acquire) == 1000));
}

struct Panicker(Arc<AtomicUsize>);
impl Task for Panicker {
    fn step(&self) -> TaskStep {
        panic!("a task step panicked");
    }
    fn panicked(&self, _payload: Box<dyn std::any::Any + Send>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_panicking_step_finishes_the_task_and_is_reported() {
    let _w = common::watchdog("stackless panic", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    sched.spawn_task(Arc::new(Panicker(seen.clone()))).unwrap();
    while seen.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    // The scheduler still runs green threads.
    assert_eq!(sched.spawn(|| 3).join().unwrap(), 3);
}

struct Sleeper(Arc<AtomicUsize>);
impl Task for Sleeper {
    fn step(&self) -> TaskStep {
        TaskStep::Wait // never woken
    }
    fn cancel(&self) -> TaskStep {
        self.0.fetch_add(1, Ordering::SeqCst);
        TaskStep::Done
    }
}

#[test]
fn shutdown_cancels_waiting_tasks_through_their_hook() {
    let _w = common::watchdog("stackless cancel", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let cancelled = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        sched.spawn_task(Arc::new(Sleeper(cancelled.clone()))).unwrap();
    }
    // Let them all park.
    while sched.parked().len() < 10 {
        std::thread::yield_now();
    }
    let report = sched.shutdown_timeout(Duration::from_millis(10));
    assert_eq!(report.unfinished, 0);
    assert_eq!(cancelled.load(Ordering::SeqCst), 10);
}
