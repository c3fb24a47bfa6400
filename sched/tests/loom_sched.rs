//! End-to-end loom models of the whole scheduler: workers are loom threads, green threads are
//! contexts of purloin-context's loom backend (each a loom thread that runs only when switched
//! to), every atomic and lock is loom's — nothing is mocked but time.
//!
//! The protocols themselves are checked at preemption bound 2 by the unit models next to their
//! code (`worker.rs` the idle protocol, `g.rs` park against unpark, `p.rs` runnext and blocking handoff). The
//! whole machine has thousands of atomic steps per execution (and the injector's
//! crossbeam-epoch), so these integration models run at preemption bound 1 with one worker:
//! bound 2 takes from minutes to hours each on this 2-core machine (measured: 11 s, 47 s and
//! > 10 min), and two workers > 3 min each even at bound 1.
//!
//! Run with `cargo xtask loom -p purloin-sched`.
#![cfg(loom)]

use std::sync::Arc as StdArc;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use purloin_sched::{Builder, GreenThread, Scheduler};

/// `loom::model` at preemption bound 1 (see the module docs), with room for
/// crossbeam-epoch's branches.
fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bound(1, f);
}

fn model_bound(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.max_branches = b.max_branches.max(200_000);
    b.check(f);
}

fn sched(workers: usize) -> Scheduler {
    Builder::new().workers(workers).monitor(false).build().unwrap()
}

/// (a)/(e) The idle protocol, submit vs. going idle: a green thread submitted from outside while the
/// only worker searches, gives up and parks always runs (work conservation: a lost wake-up
/// leaves every thread blocked and loom reports the deadlock).
#[test]
fn outside_submission_vs_worker_going_idle() {
    model(|| {
        let s = sched(1);
        let h = s.spawn(|| 7);
        assert_eq!(h.join().unwrap(), 7);
        drop(s);
    });
}

/// (b) The state machine, unpark racing park on the same green thread: the wake-up is never lost
/// (the green thread finishes) and never doubled (a second queue entry would run the green
/// thread twice: its context would be missing and the scheduler's invariant check panics).
#[test]
fn unpark_racing_park_is_never_lost_or_doubled() {
    model(|| {
        let s = sched(1);
        let flag = StdArc::new(AtomicBool::new(false));
        let f2 = flag.clone();
        let parker = s.spawn(move || {
            while !f2.load(Ordering::Acquire) {
                purloin_sched::park();
            }
        });
        let g: GreenThread = *parker.thread();
        // The unparker: an OS thread racing the green thread's park (and its first run).
        let t = loom::thread::spawn(move || {
            flag.store(true, Ordering::Release);
            g.unpark();
        });
        parker.join().unwrap();
        t.join().unwrap();
        drop(s);
    });
}

/// A green thread spawns a child and joins it: the child is run inline (join-helping) or, if
/// the worker picked it first, the parent parks and is readied through runnext; either way each
/// runs exactly once. (Two-worker versions of these integration models take hours even at
/// bound 1; runnext stealing by a second worker is the unit model `p::loom_p`.)
#[test]
fn spawn_join_runs_each_green_thread_once() {
    model(|| {
        let s = sched(1);
        let runs = StdArc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let h = s.spawn(move || {
            let r2 = r.clone();
            let child = purloin_sched::spawn(move || {
                r2.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
            // Park via join: the child is in our queue/runnext; another worker may steal it.
            child.join().unwrap();
            r.fetch_add(1, Ordering::Relaxed);
        });
        h.join().unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), 2);
        drop(s);
    });
}

/// A green thread spawns three children and joins the second: the first waits in runnext
/// (it was empty), the second under the third in the local queue, so the join takes it back
/// from below (popping the third and pushing it back) while the worker may run any of them
/// first. The other two are detached: each green thread runs exactly once, also the sibling
/// that was popped and pushed back (one lost in the take-back never runs). Mutation check: not
/// pushing the popped entries back fails this model.
#[test]
fn join_takes_a_child_back_from_below() {
    model(|| {
        let s = sched(1);
        let runs = StdArc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let h = s.spawn(move || {
            let kids: Vec<_> = (0..3)
                .map(|_| {
                    let r2 = r.clone();
                    purloin_sched::spawn(move || {
                        r2.fetch_add(1, Ordering::Relaxed);
                    })
                    .unwrap()
                })
                .collect();
            let mut kids = kids.into_iter();
            let first = kids.next();
            kids.next().unwrap().join().unwrap();
            drop((first, kids));
            r.fetch_add(1, Ordering::Relaxed);
        });
        h.join().unwrap();
        drop(s);
        assert_eq!(runs.load(Ordering::Relaxed), 4);
    });
}

/// A join's look at the global queue's head (`join::take_from_global_head`, made only when
/// the scheduler has one worker). A green thread on the model's one worker spawns six
/// children (lazily: their queue entries are their tasks). `k0` fills the empty runnext; the
/// local queue holds 4 under loom, so pushing `k5` overflows the two oldest local entries to
/// the global queue, which holds `[k1, k2]`; the local queue holds `[k3, k4, k5]`. It joins
/// k2, k3, k4 and k5 and detaches k0 and k1 (two green threads the worker runs: loom allows
/// five threads).
/// - The k2 join's look takes `k1`, a sibling nobody joins: it must stay runnable (pushed to
///   the local queue); the look goes on and takes k2 to run it inline.
/// - k3, k4 and k5 are taken back from below the local queue's top.
///
/// Every green thread runs exactly once. Mutation check: dropping the taken sibling instead
/// of pushing it loses k1 and fails this model (loom reports the deadlock: shutdown waits for
/// k1, which counts as live).
///
/// At preemption bound 0 (each thread runs until it blocks; every access is still checked for
/// causality): at bound 1 it ran over 15 minutes. The race that matters here, the joiner's
/// steal of an entry against another worker's, is the injector's exactly-once steal and the
/// G's claim CAS, each modelled on its own (`purloin-deque`, `g.rs`).
#[test]
fn join_takes_its_child_from_the_global_queue_head() {
    model_bound(0, || {
        let s = sched(1);
        let runs = StdArc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let h = s.spawn(move || {
            let mut kids: Vec<_> = (0..6)
                .map(|_| {
                    let r2 = r.clone();
                    Some(
                        purloin_sched::spawn(move || {
                            r2.fetch_add(1, Ordering::Relaxed);
                        })
                        .unwrap(),
                    )
                })
                .collect();
            for i in [2, 3, 4, 5] {
                kids[i].take().unwrap().join().unwrap();
            }
            drop(kids);
            r.fetch_add(1, Ordering::Relaxed);
        });
        h.join().unwrap();
        drop(s);
        assert_eq!(runs.load(Ordering::Relaxed), 7);
    });
}

/// (f) Shutdown racing a green thread that spawns: shutdown waits for (or cancels) every
/// green thread, nothing runs after the scheduler is dropped, and no record leaks.
#[test]
fn shutdown_vs_concurrent_spawn() {
    model(|| {
        let s = sched(1);
        let ran = StdArc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let h = s.spawn(move || {
            let r2 = r.clone();
            if let Ok(child) = purloin_sched::spawn(move || {
                r2.fetch_add(1, Ordering::Relaxed);
            }) {
                drop(child);
            }
            r.fetch_add(1, Ordering::Relaxed);
        });
        drop(h);
        let report = s.shutdown_timeout(std::time::Duration::from_secs(1));
        assert_eq!(report.unfinished, 0);
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    });
}

/// A stackless task that counts its one step (stepped on the worker's stack: no loom thread).
struct CountStep(StdArc<AtomicUsize>);
impl purloin_sched::Task for CountStep {
    fn step(&self) -> purloin_sched::TaskStep {
        self.0.fetch_add(1, Ordering::Relaxed);
        purloin_sched::TaskStep::Done
    }
}

/// (g) Fork-join's lazy G: a job taken back by its joiner runs inline with no G, and a job the
/// joiner cannot take back (an entry sits above it in the local queue) is given a G by the
/// worker that dequeues it, parks on it (a yield), and its result reaches the waiting joiner.
/// The entries above the job are stackless tasks (green threads would need more loom threads
/// than loom allows). Mutation check: letting `take_back` run a job inline that is not on top
/// of the local queue (its entry stays queued) fails the runner assertion.
#[test]
fn fork_join_lazy_g_taken_back_or_adopted() {
    model(|| {
        let s = sched(1);
        let steps = StdArc::new(AtomicUsize::new(0));
        let st = steps.clone();
        let h = s.spawn(move || {
            let me = purloin_sched::current().map(|t| t.id());
            let (a, b) = purloin_sched::join(|| 1u32, || 2u32);
            let (c, (d, runner)) = purloin_sched::join(
                || {
                    // The second spawn takes runnext and pushes the first above the job.
                    for _ in 0..2 {
                        purloin_sched::spawn_task(StdArc::new(CountStep(st.clone()))).unwrap();
                    }
                    4u32
                },
                || {
                    purloin_sched::yield_now();
                    (5u32, purloin_sched::current().map(|t| t.id()))
                },
            );
            assert_ne!(runner, me, "a job buried under other entries runs on its own G");
            a + b + c + d
        });
        assert_eq!(h.join().unwrap(), 12);
        drop(s);
        assert_eq!(steps.load(Ordering::Relaxed), 2);
    });
}
