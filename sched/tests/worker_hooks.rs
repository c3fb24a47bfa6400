//! Worker start and stop hooks (`Builder::on_worker_start`, `on_worker_stop`): each worker
//! thread calls its start hook before it runs a green thread and its stop hook after its last
//! one, also the threads started later; a panicking hook is reported and the worker goes on.
#![cfg(not(loom))]

mod common;

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Start(usize),
    Ran,
    Stop(usize),
}

type Log = Arc<Mutex<Vec<(ThreadId, Step)>>>;

fn note(log: &Log, step: Step) {
    log.lock().unwrap().push((std::thread::current().id(), step));
}

/// Checks the log: on each OS thread that ran a green thread the first entry is a start and
/// the last a stop with the same number; every started thread stopped; returns the numbers.
fn check(log: &Log) -> Vec<usize> {
    let log = log.lock().unwrap();
    let mut threads: Vec<ThreadId> = Vec::new();
    for (t, _) in log.iter() {
        if !threads.contains(t) {
            threads.push(*t);
        }
    }
    let mut numbers = Vec::new();
    for t in threads {
        let steps: Vec<Step> = log.iter().filter(|(u, _)| *u == t).map(|(_, s)| *s).collect();
        let Some(Step::Start(n)) = steps.first().copied() else {
            panic!("a thread did not start with its start hook: {steps:?}");
        };
        assert_eq!(steps.last(), Some(&Step::Stop(n)), "{steps:?}");
        assert_eq!(steps.iter().filter(|s| !matches!(s, Step::Ran)).count(), 2, "{steps:?}");
        numbers.push(n);
    }
    numbers.sort_unstable();
    numbers
}

/// Every worker thread, the initial ones and those `set_workers` adds, logs start, then the
/// green threads it ran, then stop; the numbers are the threads' numbers, each once.
#[test]
fn each_worker_thread_starts_before_and_stops_after_its_green_threads() {
    let _w = common::watchdog("worker hooks", Duration::from_secs(120));
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let (l1, l2) = (log.clone(), log.clone());
    let sched = purloin_sched::Builder::new()
        .workers(2)
        .max_workers(3)
        .on_worker_start(move |n| note(&l1, Step::Start(n)))
        .on_worker_stop(move |n| note(&l2, Step::Stop(n)))
        .build()
        .unwrap();
    sched.set_workers(3).unwrap();
    let handles: Vec<_> = (0..300)
        .map(|_| {
            let l = log.clone();
            sched.spawn(move || {
                for _ in 0..3 {
                    note(&l, Step::Ran);
                    purloin_sched::yield_now();
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let started = sched.stats().global.threads_started as usize;
    drop(sched); // shutdown joins every worker thread
    let numbers = check(&log);
    assert_eq!(numbers, (0..started).collect::<Vec<_>>(), "one start and stop per thread");
    assert!(started >= 3);
}

/// A start hook that panics on one worker thread: the panic is reported, the worker still
/// runs green threads and still calls its stop hook.
#[test]
fn a_panicking_start_hook_leaves_the_worker_running() {
    let _w = common::watchdog("panicking worker hook", Duration::from_secs(120));
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let (l1, l2) = (log.clone(), log.clone());
    let sched = purloin_sched::Builder::new()
        .workers(1)
        .on_worker_start(move |n| {
            note(&l1, Step::Start(n));
            panic!("start hook of worker {n} fails");
        })
        .on_worker_stop(move |n| note(&l2, Step::Stop(n)))
        .build()
        .unwrap();
    let l3 = log.clone();
    sched.spawn(move || note(&l3, Step::Ran)).join().unwrap();
    drop(sched);
    assert_eq!(check(&log), [0]);
}
