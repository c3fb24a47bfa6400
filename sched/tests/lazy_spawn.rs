//! Lazily spawned green threads (a spawn from a green thread with default options queues its
//! task, and whoever dequeues it gives it a G): identities made on demand, unparks before the
//! start, and entries drained at shutdown.
#![cfg(not(loom))]

mod common;

use common::Counted;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, GreenThread, StackSize};

/// A child run inline by its joiner has no G until it asks for its identity; then it gets one
/// of its own (not its joiner's), and an unpark through it reaches the child parked inside
/// the inline run (it is forwarded to the joiner, which the child's park parked).
#[test]
fn an_inline_child_gets_an_identity_on_demand_and_unparks_reach_it() {
    let _w = common::watchdog("inline identity", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let (parent, child, finished) = sched
        .spawn(|| {
            let parent = purloin_sched::current().unwrap().id();
            let child = purloin_sched::spawn(|| {
                let me = purloin_sched::current().unwrap();
                let woken = Arc::new(AtomicBool::new(false));
                let w = woken.clone();
                let waker = purloin_sched::spawn(move || {
                    w.store(true, Ordering::Release);
                    me.unpark()
                })
                .unwrap();
                while !woken.load(Ordering::Acquire) {
                    purloin_sched::park();
                }
                assert!(waker.join().unwrap(), "the child was alive when unparked");
                me
            })
            .unwrap();
            // Joined at once with one worker: the child runs inline.
            let me = child.join().unwrap();
            (parent, me.id(), me.is_finished())
        })
        .join()
        .unwrap();
    assert_ne!(parent, child, "the child has an identity of its own");
    assert!(finished, "its identity ends with it");
    assert!(sched.stats().total.inline_joins >= 1, "{:?}", sched.stats().total);
}

/// An unpark through the handle of a child that has not started yet is kept: the child's
/// first park returns at once (with one worker, a lost token leaves both parked: the
/// watchdog fails the test).
#[test]
fn an_unpark_before_the_start_is_kept() {
    let _w = common::watchdog("unpark before start", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let (id, seen) = sched
        .spawn(|| {
            let child = purloin_sched::spawn(|| {
                purloin_sched::park();
                purloin_sched::current().unwrap().id()
            })
            .unwrap();
            assert!(child.thread().unpark(), "a child that has not started is alive");
            let id = child.thread().id();
            (id, child.join().unwrap())
        })
        .join()
        .unwrap();
    assert_eq!(id, seen, "the handle's identity is the one the child runs with");
}

/// Two workers: handles ask for their children's identities and unpark them while the other
/// worker starts them (or after). Every child runs exactly once, sees the identity its
/// handle reports, and wakes from its park; every capture is dropped once.
#[test]
fn handles_asking_for_identities_race_the_workers_starting_them() {
    const N: usize = 20_000;
    let _w = common::watchdog("identity race", Duration::from_secs(120));
    let sched = Builder::new().workers(2).stack_size(StackSize::Small).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    sched
        .spawn(move || {
            let mut hs = Vec::with_capacity(N);
            for i in 0..N {
                let capture = Counted(d.clone());
                let h = purloin_sched::spawn(move || {
                    let _keep = capture;
                    purloin_sched::park();
                    purloin_sched::current().unwrap().id()
                })
                .unwrap();
                if i % 3 == 0 {
                    h.thread().unpark();
                }
                hs.push(h);
            }
            for (i, h) in hs.iter().enumerate() {
                if i % 3 != 0 {
                    h.thread().unpark();
                }
            }
            for h in hs {
                let id = h.thread().id();
                assert_eq!(h.join().unwrap(), id);
            }
        })
        .join()
        .unwrap();
    assert_eq!(drops.load(Ordering::Relaxed), N, "each capture dropped once");
}

/// Children queued behind a worker that never reaches a scheduling point are cancelled when
/// shutdown gives up on that worker, like eagerly spawned ones: their joins return
/// `Cancelled` instead of waiting forever, and only the stuck green thread is unfinished.
#[test]
fn lazily_spawned_children_queued_behind_a_stuck_worker_are_cancelled_at_shutdown() {
    let _w = common::watchdog("lazy unfinished", Duration::from_secs(60));
    // No spare workers: the monitor would add one for the stuck worker (as soon as it spins
    // for the long-run threshold, which a slow machine reaches before the shutdown), and the
    // spare would take the queued children this test needs to stay queued.
    let sched = Builder::new().workers(1).max_spare_workers(0).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let s = stop.clone();
    drop(sched.spawn(move || {
        let plain = purloin_sched::spawn(|| ()).unwrap();
        let asked = purloin_sched::spawn(|| ()).unwrap();
        let asked_thread: GreenThread = *asked.thread();
        tx.send((plain, asked, asked_thread)).unwrap();
        // Never a scheduling point: the children stay queued.
        while !s.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    }));
    let (plain, asked, asked_thread) = rx.recv().unwrap();
    let report = sched.shutdown_timeout(Duration::from_millis(200));
    stop.store(true, Ordering::Release);
    assert_eq!(report.unfinished, 1, "the spinning green thread only");
    assert!(asked_thread.is_finished(), "an identity made for a queued child is released");
    for h in [plain, asked] {
        assert!(h.join().unwrap_err().downcast_ref::<purloin_sched::Cancelled>().is_some());
    }
}

/// Detached tasks (no handle; `spawn_detached_unchecked`) run exactly once each and drop their
/// closure once, whether they run on a worker or inline in a waiter of their group
/// (`run_detached_inline`); those queued behind a worker that never reaches a scheduling point
/// are dropped unrun at shutdown, once each.
#[test]
fn detached_tasks_run_or_drop_once_each() {
    let _w = common::watchdog("detached tasks", Duration::from_secs(60));
    const N: usize = 200;
    let sched = Builder::new().workers(2).build().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let (r, d) = (runs.clone(), drops.clone());
    let helped = sched
        .spawn(move || {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let group = Arc::as_ptr(&r) as usize;
            for i in 0..N {
                let (r, c, tx) = (r.clone(), Counted(d.clone()), tx.clone());
                // SAFETY: the closure borrows nothing.
                unsafe {
                    purloin_sched::spawn_detached_unchecked(
                        purloin_sched::SpawnOptions::default(),
                        group,
                        move || {
                            let _keep = (c, tx);
                            r.fetch_add(1, Ordering::SeqCst);
                            assert!(i % 9 != 4, "a panic is caught and dropped");
                        },
                    )
                }
                .unwrap();
            }
            drop(tx);
            let mut helped = 0;
            while purloin_sched::run_detached_inline(group) {
                helped += 1;
            }
            // Every sender gone: every closure was dropped (the ones left run on workers).
            while rx.try_recv() != Err(std::sync::mpsc::TryRecvError::Disconnected) {
                purloin_sched::yield_now();
            }
            helped
        })
        .join()
        .unwrap();
    assert!(helped > 0, "the waiter ran some inline");
    assert_eq!(runs.load(Ordering::SeqCst), N, "each ran once");
    assert_eq!(drops.load(Ordering::SeqCst), N, "each closure dropped once");

    // Queued behind a stuck worker: dropped unrun at shutdown. No spare workers, which would
    // take the queued tasks (see the test above).
    let sched = Builder::new().workers(1).max_spare_workers(0).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, r, d) = (stop.clone(), runs.clone(), drops.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    drop(sched.spawn(move || {
        for _ in 0..N {
            let (r, c) = (r.clone(), Counted(d.clone()));
            // SAFETY: the closure borrows nothing.
            unsafe {
                purloin_sched::spawn_detached_unchecked(
                    purloin_sched::SpawnOptions::default(),
                    0,
                    move || {
                        let _keep = c;
                        r.fetch_add(1, Ordering::SeqCst);
                    },
                )
            }
            .unwrap();
        }
        tx.send(()).unwrap();
        // Never a scheduling point: the tasks stay queued.
        while !s.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
    }));
    rx.recv().unwrap();
    let report = sched.shutdown_timeout(Duration::from_millis(200));
    stop.store(true, Ordering::Release);
    assert_eq!(report.unfinished, 1, "the spinning green thread only");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "none ran");
    assert_eq!(drops.load(Ordering::SeqCst), N, "each dropped once, unrun");
}
