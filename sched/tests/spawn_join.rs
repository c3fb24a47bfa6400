//! Spawning and joining: from OS threads and green threads, results and panics, join-helping,
//! and a million green threads each run exactly once.
#![cfg(not(loom))]

mod common;

use common::Counted;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, SpawnOptions, StackSize};

#[test]
fn join_from_os_thread_returns_the_value() {
    let _w = common::watchdog("join_from_os_thread", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let h = sched.spawn(|| 6 * 7);
    assert_eq!(h.join().unwrap(), 42);
}

#[test]
fn join_from_green_thread_parks_only_the_green_thread() {
    let _w = common::watchdog("join_from_green", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let h = sched.spawn(|| {
        // With one worker, a blocked OS thread would deadlock: the child must run while the
        // parent waits.
        let child = purloin_sched::spawn(|| {
            purloin_sched::yield_now();
            String::from("child")
        })
        .unwrap();
        purloin_sched::yield_now();
        child.join().unwrap()
    });
    assert_eq!(h.join().unwrap(), "child");
}

#[test]
fn a_panic_reaches_the_joiner_and_the_runtime_keeps_working() {
    let _w = common::watchdog("panic", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let h = sched.spawn(|| -> u32 { panic!("boom in a green thread") });
    let err = h.join().unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"boom in a green thread"));
    assert_eq!(sched.spawn(|| 1 + 1).join().unwrap(), 2);
}

#[test]
fn join_helping_runs_an_unstarted_child_inline() {
    let _w = common::watchdog("join_helping", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let h = sched.spawn(|| {
        let me = purloin_sched::current().unwrap().id();
        // The child has not started when we join (one worker, and we do not yield): it runs
        // inline on our stack and sees itself as current().
        let child =
            purloin_sched::spawn(move || purloin_sched::current().unwrap().id() != me).unwrap();
        let child_id = child.thread().id();
        let saw_itself = child.join().unwrap();
        (saw_itself, child_id != me)
    });
    let (saw_itself, distinct) = h.join().unwrap();
    assert!(saw_itself && distinct);
    assert!(sched.stats().total.inline_joins >= 1, "{:?}", sched.stats().total);
}

/// With one worker, a burst that overflows the local queue and is joined in spawn order is run
/// inline and leaves no stale entries in the global queue: each join takes its child from the
/// queue's head or the local queue's top (a join that claimed it in place would leave the
/// entry for a worker to pop and drop later; the next green thread submitted from outside
/// then waited behind all of them). Checked with the global queue's length while the parent
/// still runs, so no worker has drained it; for lazily spawned children (default options)
/// and for children with a G from the start (named).
#[test]
fn joining_overflowed_children_in_order_leaves_no_stale_entries() {
    let _w = common::watchdog("no_stale_entries", Duration::from_secs(60));
    for named in [false, true] {
        // One worker and no spare (`max_spare_workers`): a spare the monitor adds when the
        // parent stalls on page faults would steal children and change the counts.
        let sched = Arc::new(Builder::new().workers(1).max_spare_workers(0).build().unwrap());
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let sched2 = sched.clone();
        let left = sched
            .spawn(move || {
                let hs: Vec<_> = (0..2_000)
                    .map(|_| {
                        let r = r.clone();
                        let opts = SpawnOptions {
                            name: named.then(|| "kid".into()),
                            ..Default::default()
                        };
                        purloin_sched::spawn_with(opts, move || {
                            r.fetch_add(1, Ordering::Relaxed);
                        })
                        .unwrap()
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                sched2.stats().global_queue_len
            })
            .join()
            .unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), 2_000);
        assert_eq!(left, 0, "stale entries left in the global queue (named: {named})");
        let total = sched.stats().total;
        assert_eq!(total.inline_joins, 2_000, "named: {named}: {total:?}");
    }
}

/// The same, wave after wave: a parent on one worker spawns a burst of named children (a G
/// each from the start), joins them in spawn order, and again. The entries a wave leaves at
/// the global queue's head (stale ones, or the next wave's children behind them) must not make
/// the joins claim the children where they are wave after wave, leaving a stale entry, and
/// the finished G's record, for each: the global queue and the records stay at about a wave.
#[test]
fn waves_of_overflowed_children_leave_no_stale_entries() {
    let _w = common::watchdog("waves_no_stale_entries", Duration::from_secs(60));
    const WAVE: usize = 5_000;
    // One worker and no spare, as above.
    let sched = Arc::new(Builder::new().workers(1).max_spare_workers(0).build().unwrap());
    let sched2 = sched.clone();
    let left: Vec<usize> = sched
        .spawn(move || {
            (0..4)
                .map(|_| {
                    let hs: Vec<_> = (0..WAVE)
                        .map(|i| {
                            let opts =
                                SpawnOptions { name: Some("kid".into()), ..Default::default() };
                            purloin_sched::spawn_with(opts, move || i).unwrap()
                        })
                        .collect();
                    for (i, h) in hs.into_iter().enumerate() {
                        assert_eq!(h.join().unwrap(), i);
                    }
                    sched2.stats().global_queue_len
                })
                .collect()
        })
        .join()
        .unwrap();
    assert!(left.iter().all(|&n| n < WAVE / 10), "global queue after each wave: {left:?}");
}

#[test]
fn names_and_ids() {
    let _w = common::watchdog("names", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let opts = SpawnOptions { name: Some("worker-bee".into()), ..Default::default() };
    let h = sched
        .spawn_with(opts, || {
            let me = purloin_sched::current().unwrap();
            (me.name().map(|n| n.to_string()), me.id())
        })
        .unwrap();
    let id = h.thread().id();
    let (name, seen_id) = h.join().unwrap();
    assert_eq!(name.as_deref(), Some("worker-bee"));
    assert_eq!(seen_id, id);
    assert!(purloin_sched::current().is_none(), "an OS thread is not a green thread");
}

#[test]
fn bad_stack_size_is_an_error_at_spawn() {
    let sched = Builder::new().workers(1).build().unwrap();
    let opts = SpawnOptions { stack_size: Some(StackSize::Bytes(12345)), ..Default::default() };
    let err = sched.spawn_with(opts, || ()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("page"), "{err}");
}

#[test]
fn builder_rejects_zero_workers() {
    let err = Builder::new().workers(0).build().unwrap_err();
    assert!(err.to_string().contains("workers"), "{err}");
}

#[test]
fn spawn_outside_a_green_thread_without_a_scheduler_is_an_error() {
    let err = purloin_sched::spawn(|| ()).unwrap_err();
    assert!(err.to_string().contains("outside a green thread"), "{err}");
}

/// 10^6 green threads, half spawned from outside (the injector) and half from inside (local
/// queues), some yielding: each runs exactly once.
#[test]
fn a_million_green_threads_run_exactly_once() {
    const N: usize = 1_000_000;
    let _w = common::watchdog("million", Duration::from_secs(300));
    let sched = Builder::new().workers(2).stack_size(StackSize::Small).build().unwrap();
    let hits: Arc<Vec<AtomicU8>> = Arc::new((0..N).map(|_| AtomicU8::new(0)).collect());
    let done = Arc::new(AtomicUsize::new(0));

    // Inside: 10 spawner green threads, each spawning N/20 children.
    let mut spawners = Vec::new();
    for s in 0..10 {
        let hits = hits.clone();
        let done = done.clone();
        spawners.push(sched.spawn(move || {
            let per = N / 20;
            let mut kids = Vec::with_capacity(1024);
            for i in 0..per {
                let idx = s * per + i;
                let hits = hits.clone();
                let done = done.clone();
                kids.push(
                    purloin_sched::spawn(move || {
                        if idx.is_multiple_of(7) {
                            purloin_sched::yield_now();
                        }
                        hits[idx].fetch_add(1, Ordering::Relaxed);
                        done.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap(),
                );
                if kids.len() == 1024 {
                    for k in kids.drain(..) {
                        k.join().unwrap();
                    }
                }
            }
            for k in kids {
                k.join().unwrap();
            }
        }));
    }
    // Outside: the other half from this OS thread.
    let mut outside = Vec::with_capacity(4096);
    for idx in N / 2..N {
        let hits = hits.clone();
        let done = done.clone();
        outside.push(sched.spawn(move || {
            hits[idx].fetch_add(1, Ordering::Relaxed);
            done.fetch_add(1, Ordering::Relaxed);
        }));
        if outside.len() == 4096 {
            for h in outside.drain(..) {
                h.join().unwrap();
            }
        }
    }
    for h in outside {
        h.join().unwrap();
    }
    for s in spawners {
        s.join().unwrap();
    }
    assert_eq!(done.load(Ordering::Relaxed), N);
    let bad: Vec<usize> =
        (0..N).filter(|&i| hits[i].load(Ordering::Relaxed) != 1).take(10).collect();
    assert!(bad.is_empty(), "green threads not run exactly once: {bad:?}");
    // A joiner returns once the child's result is published, a moment before the child's
    // worker counts it finished (so `stats().live` may still show it); shutdown waits for the
    // count to reach zero and reports what did not.
    let report = sched.shutdown_timeout(Duration::from_secs(60));
    assert_eq!(
        (report.unfinished, report.cancelled),
        (0, 0),
        "every green thread counted finished"
    );
}

/// Counts drops of closures' captures and of results.
/// The task cell has no reference count: the packet's state says who frees it. Every way a
/// handle can end — joined (inline or after a park), dropped before or after the child ran,
/// and dropped after a `wait_timeout` registered it — drops each capture and each result
/// exactly once (no leak, no double free). A task dropped unrun is covered by the loom model
/// `task::loom_cell::unrun_task_cancels`.
#[test]
fn every_handle_ending_frees_its_cell_once() {
    const N: usize = 20_000;
    let _w = common::watchdog("cell_ownership", Duration::from_secs(120));
    let drops = Arc::new(AtomicUsize::new(0));
    let sched = Builder::new().workers(2).stack_size(StackSize::Small).build().unwrap();
    let d = drops.clone();
    sched
        .spawn(move || {
            for i in 0..N {
                let capture = Counted(d.clone());
                let result = Counted(d.clone());
                let h = purloin_sched::spawn(move || {
                    let _keep = capture;
                    if i % 3 == 0 {
                        purloin_sched::yield_now();
                    }
                    result
                })
                .unwrap();
                match i % 4 {
                    0 => drop(h.join().unwrap()),
                    1 => drop(h),
                    2 => {
                        purloin_sched::yield_now();
                        drop(h);
                    }
                    _ => {
                        let mut h = h;
                        if h.wait_timeout(Duration::from_secs(60)) {
                            drop(h.join().unwrap());
                        }
                    }
                }
            }
        })
        .join()
        .unwrap();
    // Children detached above may still be running: shut down and wait for all of them.
    let report = sched.shutdown_timeout(Duration::from_secs(60));
    assert_eq!(report.unfinished, 0);
    assert_eq!(drops.load(Ordering::Relaxed), 2 * N, "each capture and result dropped once");
}
