//! Loom models of the idle protocol (submit vs. going idle) on the real worker code: `find_runnable`
//! (search, give up, the dance, park on the lot) against `Shared::push_global` +
//! `notify_work`, without context switches (the models stop at "a worker found the G"), also
//! with the worker blocking in an I/O poller instead of on its lot (F3/F4 in `poll`).

use crate::g::GRef;
use crate::ready::Slot;
use crate::registry::registry;
use crate::shared::Shared;
use crate::sync::Arc;
use crate::sync::thread as lthread;
use crate::worker::M;

/// Like `loom::model`, with room for crossbeam-epoch's own branches (the injector pins
/// the epoch; its collector's teardown alone takes thousands of loom branches).
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.max_branches = b.max_branches.max(200_000);
    b.check(f);
}

/// A `Shared` with `workers` P's and no monitor, built without threads.
pub(crate) fn shared(workers: usize) -> Arc<Shared> {
    let b = crate::Builder::new().workers(workers).monitor(false);
    Arc::new(Shared::new(b.config_for_tests()))
}

/// A fresh G record of `shared`, counted live, ready to be queued.
pub(crate) fn new_g(shared: &Arc<Shared>) -> GRef {
    let g = registry().alloc();
    // SAFETY: a fresh FREE record, not yet published.
    unsafe { g.sched.with_mut(|s| *s = Arc::as_ptr(shared)) };
    g.prepare_spawn(0);
    shared.note_started(None);
    g
}

/// Runs a worker's search on P `p` until it finds a G; returns it.
pub(crate) fn worker(shared: Arc<Shared>, p: usize) -> GRef {
    let m = M::new(shared, p, p);
    crate::sync::set_current_worker_ptr((&m as *const M).cast());
    let g = m.find_runnable().expect("the scheduler is running");
    m.found_work();
    crate::sync::set_current_worker_ptr(core::ptr::null());
    g
}

/// One worker going idle (searching, the re-check, parking) races an outside submission:
/// the worker always finds the G (a lost wake-up leaves it parked forever: loom reports
/// the deadlock). Mutation check: removing F1 (`fence` in `Idle::worker_to_wake`) makes this
/// model fail with a deadlock. Removing F2 (`Idle::fence_before_recheck`) does not: the
/// re-check finds the local queues empty and looks at the injector, which pins
/// crossbeam-epoch, whose SeqCst fence stands in for F2 (`local_spawn_vs_other_worker_going_idle`
/// catches it).
#[test]
fn outside_submission_vs_one_worker_going_idle() {
    model(|| {
        let s = shared(1);
        let s2 = s.clone();
        let w = lthread::spawn(move || worker(s2, 0));
        let g = new_g(&s);
        s.push_global(g);
        let found = w.join().unwrap();
        assert_eq!(found, g);
    });
}

/// A poller with no I/O: a `poll` with no deadline blocks until [`Poller::wake`] (which
/// leaves a token for the next such `poll` if none blocks now).
#[derive(Default)]
struct WakeOnlyPoller {
    woken: crate::sync::Mutex<bool>,
    cv: crate::sync::Condvar,
}

impl crate::Poller for WakeOnlyPoller {
    fn poll(&self, deadline: Option<std::time::Instant>, _: &mut Vec<crate::GreenThread>) {
        if deadline.is_some() {
            return;
        }
        let mut woken = crate::sync::lock(&self.woken);
        while !*woken {
            woken = self.cv.wait(woken).unwrap();
        }
        *woken = false;
    }

    fn wake(&self) {
        *crate::sync::lock(&self.woken) = true;
        self.cv.notify_one();
    }

    fn has_waiters(&self) -> bool {
        false
    }
}

/// The same race with an I/O poller installed, so the worker going idle blocks in the poller
/// instead of on its lot (`poll::poll_blocking`): the worker publishes `blocked`, then (F3)
/// checks whether its lot moved since its snapshot; the submitter's wake-up signals the lot,
/// then (F4) reads `blocked` and wakes the poller. Either the worker sees the lot move and
/// does not wait in the poller, or the poller is woken (a lost wake-up leaves the worker
/// blocked in `poll`: loom reports the deadlock). Mutation check: removing F3 (in
/// `poll_blocking`) or F4 (in `PollerSlot::wake_if_blocked`) makes this model fail with a
/// deadlock.
#[test]
fn outside_submission_vs_one_worker_blocking_in_the_poller() {
    model(|| {
        let s = shared(1);
        s.poller.install(std::sync::Arc::new(WakeOnlyPoller::default()));
        let s2 = s.clone();
        let w = lthread::spawn(move || worker(s2, 0));
        let g = new_g(&s);
        s.push_global(g);
        let found = w.join().unwrap();
        assert_eq!(found, g);
    });
}

/// A worker whose green thread spawns (a local push + `notify_work`, then it keeps running
/// and never looks at its queue again) races the other worker going idle: the idle worker
/// must be woken (or see the G in its re-check) and steal it — Go's delicate dance between
/// `runqput` + `wakep` and the last spinner's re-check. Mutation check: removing F1 or F2
/// makes this model fail with a deadlock.
#[test]
fn local_spawn_vs_other_worker_going_idle() {
    spawn_vs_other_worker_going_idle(|busy, g| {
        busy.held_on_g0().enqueue(g.into(), Slot::LocalQuiet);
        busy.shared.notify_work();
    });
}

/// P 0's worker submits a G with `submit` while the worker of P 1 goes idle; P 1's worker
/// must end up with it.
fn spawn_vs_other_worker_going_idle(submit: fn(&M, GRef)) {
    model(move || {
        let s = shared(2);
        let s2 = s.clone();
        let idle = lthread::spawn(move || worker(s2, 1));
        let g = new_g(&s);
        submit(&M::new(s.clone(), 0, 0), g);
        let found = idle.join().unwrap();
        assert_eq!(found, g);
    });
}

/// The same race for a spawn from a green thread, which goes to runnext (Go's `newproc`):
/// `enqueue(_, Slot::Runnext)` (the swap, which is F1, and the idle check) against the other
/// worker going idle (F2, then a re-check that reads every runnext). The idle worker must end
/// up with the G: woken, or seeing it in its re-check, then taking the runnext of a victim that
/// does not schedule. Mutation check: `Slot::Runnext` without its notify fails with a
/// deadlock.
#[test]
fn runnext_spawn_vs_other_worker_going_idle() {
    spawn_vs_other_worker_going_idle(|busy, g| busy.held_on_g0().enqueue(g.into(), Slot::Runnext));
}

/// The same race for a lazy spawn (`HeldP::push_spawn`): into an empty runnext
/// with a plain Release store (`P::fill_empty_runnext`), so the StoreLoad fence F1 is the
/// explicit one in `notify_work_from`. Mutation checks: without the notify, loom reports a
/// deadlock; with the runnext store Relaxed, a causality violation on the G record the thief
/// takes.
#[test]
fn lazy_spawn_into_runnext_vs_other_worker_going_idle() {
    spawn_vs_other_worker_going_idle(|busy, g| busy.held_on_g0().push_spawn(g.into()));
}

/// A fork (`join`, `HeldP::push_fork`): P 0's worker queues a job with the wake-up hint, which has
/// no F1 (`idle`, I4), while P 1's worker goes idle; then the joiner takes the job back if it is
/// still on top of its queue. Then P 0 spawns one more G with the full notify rule, so that P 1
/// always finds something and the model ends. The job runs exactly once: taken back, or found
/// by P 1. Mutation check: without the take-back (the joiner relies on the hint to get its job
/// run), loom reports a deadlock: the hint may miss the worker going idle.
#[test]
fn fork_vs_other_worker_going_idle() {
    model(|| {
        let s = shared(2);
        let s2 = s.clone();
        let idle = lthread::spawn(move || worker(s2, 1));
        let (job, last) = (new_g(&s), new_g(&s));
        let busy = M::new(s.clone(), 0, 0);
        busy.held_on_g0().push_fork(job.into());
        let taken_back = match busy.held_on_g0().local().pop() {
            Some(e) => {
                assert!(e == job.into(), "only the job was queued");
                true
            }
            None => false,
        };
        busy.held_on_g0().enqueue(last.into(), Slot::Local);
        let found = idle.join().unwrap();
        assert!(taken_back != (found == job), "the job ran exactly once");
    });
}

/// A fork's hint that woke nobody must not leave the next spawn on that P stranded: P 0 queues
/// a fork's job with the hint, then spawns a G onto its now non-empty queue and never looks at
/// its queue again (a green thread that spins on its child), while P 1 goes idle. P 1 must end
/// up with one of them. Mutation check: with `fork_unannounced` ignored (a push onto visible
/// work never notifies), loom reports a deadlock.
#[test]
fn spawn_after_an_unannounced_fork_vs_other_worker_going_idle() {
    model(|| {
        let s = shared(2);
        let s2 = s.clone();
        let idle = lthread::spawn(move || worker(s2, 1));
        let (job, child) = (new_g(&s), new_g(&s));
        let busy = M::new(s.clone(), 0, 0);
        busy.held_on_g0().push_fork(job.into());
        busy.held_on_g0().enqueue(child.into(), Slot::Local);
        let found = idle.join().unwrap();
        assert!(found == job || found == child);
    });
}
