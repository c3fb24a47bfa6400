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
    let sched = Builder::new().workers(1).build().unwrap();
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
