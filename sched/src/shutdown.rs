//! Shutting a scheduler down (the steps `Scheduler::shutdown_timeout` and `Drop` run).
//!
//! Dropping a [`Scheduler`](crate::Scheduler) (or calling [`Scheduler::shutdown_timeout`](crate::Scheduler::shutdown_timeout)) goes through these
//! steps:
//!
//! 1. The phase becomes *draining*: spawns from outside the scheduler fail; green threads may
//!    still spawn (their children are part of finishing).
//! 2. Runnable green threads run to completion; we wait until none is alive, or the timeout,
//!    or nothing pending can wake the ones left (every worker parked, nothing queued, no
//!    timer, I/O wait or blocking section:
//!    [`Scheduler::is_quiescent`](crate::Scheduler::is_quiescent), seen twice 10 ms apart),
//!    whichever comes first.
//! 3. Green threads still alive are parked ones (or ones that never yield): every parked one is
//!    resumed with a forced unwind ([`ForcedUnwind`](crate::ForcedUnwind)) so its destructors
//!    run, repeatedly (a destructor may park again), until none is alive or a second timeout.
//!    Green threads that still reach scheduling points (yielding, not stuck) extend that
//!    wait, up to 5 s in all. Built with `panic = "abort"`, an unwind would abort the
//!    process: the parked green threads are taken out of scheduling for ever instead (their
//!    stacks and captures leaked, their `JoinHandle`s never complete; later wake-ups of them
//!    are ignored), with one line on stderr, and shutdown goes on as if they had finished.
//! 4. The phase becomes *stopped*; every worker is woken, leaves its loop, and is joined; the
//!    monitor stops. Green threads that never reached a scheduling point are reported as
//!    unfinished and their workers are left running (detached) rather than hanging the caller.

use std::time::{Duration, Instant};

use crate::entry::Kind;
use crate::g;
use crate::registry::{for_each_parked, registry};
use crate::shared::{PHASE_STOPPED, Shared};
use crate::sync::{Arc, Ordering, lock};

/// Waits at most `timeout` for the scheduler's live green threads to reach zero (step 2).
pub(crate) fn wait_all_done(shared: &Shared, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    // F5 (pairs with F6 in `note_finished`, or F2 of a worker's next park): the phase was
    // stored before this call.
    shared.fence_before_live_check();
    let mut guard = lock(&shared.all_done.0);
    let mut quiet = 0;
    loop {
        if shared.live() == 0 {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        // Nothing pending can wake the green threads still alive (every worker parked, no
        // queued work, timer, I/O wait or blocking section): waiting longer cannot help, so
        // their unwinding starts now. Seen twice, 10 ms apart, so a wake-up in flight between
        // a worker's park and its next search is not mistaken for quiescence.
        // Under loom time does not pass (its condvar waits never time out), so the "10 ms
        // apart" above has no meaning there; the check's many atomic loads would only multiply
        // the models' interleavings.
        if !cfg!(loom) && shared.quiescent() {
            quiet += 1;
            if quiet >= 2 {
                return false;
            }
        } else {
            quiet = 0;
        }
        // Re-check at least every 10 ms: the notification comes from `note_finished`.
        let wait = (deadline - now).min(Duration::from_millis(10));
        guard = match shared.all_done.1.wait_timeout(guard, wait) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        };
    }
}

/// How long shutdown keeps waiting for green threads that still reach scheduling points
/// after the parked ones were unwound (see [`unwind_remaining`]).
const BUSY_SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// Step 3, after `wait_all_done(shared, timeout)` gave up: unwinds the parked green threads
/// until none is alive or the grace ends. Returns `(cancelled, unfinished, leaked)`.
pub(crate) fn unwind_remaining(shared: &Arc<Shared>, timeout: Duration) -> (usize, usize, usize) {
    if cfg!(panic = "abort") {
        // A forced unwind is a panic, which aborts the process under `panic = "abort"`.
        let (leaked, unfinished) = leak_parked(shared, timeout);
        eprintln!(
            "purloin: {leaked} parked green threads were left parked at shutdown and their \
             stacks leaked (built with panic = \"abort\", which cannot unwind them to run their \
             destructors)"
        );
        return (0, unfinished, leaked);
    }
    let mut cancelled = 0;
    let wait = timeout.max(Duration::from_millis(100));
    let mut deadline = Instant::now() + wait;
    // Green threads still running and reaching scheduling points (yielding, not stuck) get
    // more time, up to this bound: a short grace is meant for parked ones.
    let hard_deadline = Instant::now() + wait.max(BUSY_SHUTDOWN_BOUND);
    let (mut ticks, mut live) = (shared.sched_ticks(), shared.live());
    loop {
        cancelled += cancel_parked(shared);
        if wait_all_done(shared, Duration::from_millis(10)) {
            return (cancelled, 0, 0);
        }
        let now = Instant::now();
        let (now_ticks, now_live) = (shared.sched_ticks(), shared.live());
        // Progress: scheduling rounds, or green threads finishing (an unwinding one may take
        // a while, printing its panic, without a scheduling point).
        if now_ticks != ticks || now_live < live {
            (ticks, live) = (now_ticks, now_live);
            deadline = deadline.max((now + wait).min(hard_deadline));
        }
        if now >= deadline {
            return (cancelled, shared.live(), 0);
        }
    }
}

/// Step 3 in a `panic = "abort"` build: takes every parked green thread out of scheduling for
/// ever instead of unwinding it. Returns `(leaked, unfinished)`: how many were taken, and how
/// many live green threads were not parked (ones that never reach a scheduling point).
///
/// Each parked G is claimed as a cancel would claim it (`PARKED => RUNNABLE`, G3), but the
/// claim's queue entry is never pushed: the G never runs again, so its stack, its captures and
/// its task cell stay as they are (leaked, never reused). Wakers that come later (a channel
/// send, a timer, an I/O event) find it RUNNABLE and only note the wake-up
/// ([`g::Unparked::Noted`]), so none of them touches the scheduler that is about to be freed.
fn leak_parked(shared: &Arc<Shared>, timeout: Duration) -> (usize, usize) {
    let mut leaked = 0;
    // A G being inspected by a dump (INSPECTED) is claimed when the dump releases it, and one
    // parking right now becomes PARKED in a moment: go round until every live G is taken, or
    // the grace ends (the rest never reach a scheduling point).
    let deadline = Instant::now() + timeout.max(Duration::from_millis(100));
    loop {
        for_each_parked(Arc::as_ptr(shared), |gref, generation| {
            if gref.cancel(generation) == g::Unparked::Queue {
                leaked += 1;
            }
        });
        let live = shared.live();
        if live <= leaked || Instant::now() >= deadline {
            return (leaked, live.saturating_sub(leaked));
        }
        wait_all_done(shared, Duration::from_millis(10));
    }
}

/// Resumes every parked green thread of `shared` with a forced unwind. Returns how many.
pub(crate) fn cancel_parked(shared: &Arc<Shared>) -> usize {
    let mut n = 0;
    for_each_parked(Arc::as_ptr(shared), |gref, generation| {
        if gref.cancel(generation) == g::Unparked::Queue {
            n += 1;
            crate::hook::emit(move || crate::hook::Event::Unpark {
                id: crate::GreenId(gref.id_with(generation)),
                by: None,
            });
            shared.push_global(gref);
        }
    });
    n
}

/// Step 4: marks the scheduler stopped and wakes every worker (parked, polling, or spare).
pub(crate) fn stop_workers(shared: &Arc<Shared>) {
    shared.phase.store(PHASE_STOPPED, Ordering::Release);
    shared.lots.stop();
    // A worker blocked in the I/O poller is not on a lot: wake the poller too.
    shared.poller.wake_blocked();
    for s in lock(&shared.spares).iter() {
        s.wake();
    }
}

/// After every worker stopped: drop queue entries left behind (stale entries of children run
/// inline, whose records wait for them). With `workers_stopped` false (shutdown gave up on
/// green threads that never yield, whose workers still run them), only what a thief may take
/// is taken (queues and runnext; not the P's caches).
pub(crate) fn drain_queues(shared: &Shared, workers_stopped: bool) {
    let mut pending = Vec::new();
    while let purloin_deque::Steal::Success(g) = shared.injector.steal() {
        pending.push(g);
    }
    for p in shared.ps.iter() {
        while let purloin_deque::Steal::Success(g) = p.stealer.steal() {
            pending.push(g);
        }
        pending.extend(p.take_runnext());
        if !workers_stopped {
            continue;
        }
        // SAFETY: every worker has stopped: nobody holds the P any more.
        let cached: Vec<_> = p.free_gs.with_mut(|v| unsafe { core::mem::take(&mut *v) });
        registry().give_free(cached);
    }
    for entry in pending {
        let g = match entry.kind() {
            Kind::G(g) => g,
            Kind::Job(job) => {
                // A fork-join job nobody started (shutdown gave up on its joiner's worker):
                // fail it so its joiner, if it ever resumes, sees the job done.
                // SAFETY: the slot outlives the entry (see `entry`).
                unsafe { (*job.as_ptr()).as_ref() }.fail(Box::new(crate::Cancelled));
                continue;
            }
            Kind::Task(cell) => {
                // A lazily spawned green thread that never ran. Not expected (a queued task counts
                // as live, and the queues are drained only when nothing is), but handled as a
                // fork-join job is: release the G a handle may have made for it, then fail the
                // task (its joiner gets `Cancelled`).
                // SAFETY: we dequeued the entry: we own the cell's G side, so the cell is live.
                let head = unsafe { &*cell.cast::<crate::task::CellHead>().as_ptr() };
                if let Some(t) = head.identity.end_unstarted()
                    && t.g.claim_for_run()
                {
                    t.g.finish_run();
                    if t.g.drop_ref() {
                        crate::registry::recycle_anywhere(t.g);
                    }
                }
                // SAFETY: as above.
                drop(unsafe { crate::task::OwnedTask::from_cell(cell) });
                shared.note_finished(None);
                continue;
            }
        };
        if g.claim_for_run() {
            // A runnable G that never ran (only possible if shutdown gave up on others).
            // SAFETY: we claimed it: we own its cells.
            if let Some(task) = unsafe { g.work.with_mut(|w| (*w).take_task()) } {
                task.fail(Box::new(crate::Cancelled));
            }
            g.finish_run();
            // SAFETY: as above.
            if !unsafe { g.uncounted.with(|u| *u) } {
                shared.note_finished(None);
            }
        }
        if g.drop_ref() {
            crate::registry::recycle_anywhere(g);
        }
    }
}

/// Loom models of the live count (`Shared::live`, L1 in `shared`) and of shutdown's wait for
/// it to reach zero (L2: F5 against F6, or against F2 of a worker's park), on the real code.
#[cfg(all(test, loom))]
mod loom_drain {
    use super::*;
    use crate::loom_idle::{model, shared};
    use crate::shared::PHASE_DRAINING;
    use crate::sync::{AtomicBool, thread};
    use crate::worker::M;

    /// (L1) A green thread alive throughout (started from outside) while a child is spawned
    /// on P 0 and finishes on P 1 (the flag stands for the queue the child passes through):
    /// `live`, read on a third thread, never reads less than one. A count that saw the
    /// child's finish but not its start would read zero, and shutdown would stop waiting for
    /// the live green thread. (The reader is spawned last, so that loom's first execution
    /// runs it after the others: loom backtracks a load only to the last access of its
    /// atomic, and the spawner's start is a load then a store.) Mutation checks: the
    /// finish's store on P 1 without Release, `live`'s loads of the `finished` counters
    /// without Acquire, or `live` reading the `started` counters first, each fail this model
    /// ("a live green thread was not counted").
    #[test]
    fn live_counts_a_child_finished_on_another_p() {
        model(|| {
            let s = shared(2);
            s.note_started(None);
            let queued = Arc::new(AtomicBool::new(false));
            let (s1, q1) = (s.clone(), queued.clone());
            let spawner = thread::spawn(move || {
                s1.note_started(Some(&s1.ps[0]));
                q1.store(true, Ordering::Release);
            });
            let s2 = s.clone();
            let finisher = thread::spawn(move || {
                while !queued.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                s2.note_finished_under_live_host(Some(&s2.ps[1]));
            });
            let s3 = s.clone();
            let reader = thread::spawn(move || s3.live());
            assert!(reader.join().unwrap() >= 1, "a live green thread was not counted");
            spawner.join().unwrap();
            finisher.join().unwrap();
        });
    }

    /// (L2) The last green thread finishes off a P (a blocking section's thread, or
    /// shutdown's own cancel) while shutdown begins its wait: the wait returns (loom
    /// reports a lost notification as a deadlock: its condvar waits never time out).
    /// Mutation checks: removing F5 (`Shared::fence_before_live_check`) or F6 (the fence in
    /// `Shared::note_finished`) fails this model with a deadlock.
    #[test]
    fn last_finish_off_a_p_vs_the_shutdown_wait() {
        model(|| {
            let s = shared(1);
            s.note_started(None);
            let s2 = s.clone();
            let finisher = thread::spawn(move || s2.note_finished(None));
            s.phase.store(PHASE_DRAINING, Ordering::Release);
            assert!(wait_all_done(&s, Duration::from_secs(3600)));
            finisher.join().unwrap();
        });
    }

    /// (L2) The last green thread finishes on a worker's P (a finish with no fence of its
    /// own) while shutdown begins: the worker, finding nothing to run, goes idle, and F2 of
    /// that park is the finish's fence before it reads the phase and notifies
    /// (`M::park`). The wait returns (or loom reports the deadlock). Mutation check:
    /// removing the notification after F2 in `M::park` fails this model with a deadlock.
    /// Removing F2 does not: shutdown's `wake_all` takes the sleepers' lock, which the
    /// parking worker took after its finish (`Idle::transition_to_parked`), and that lock
    /// orders the finish before the wait's count (the idle models check F2).
    #[test]
    fn last_finish_on_a_p_vs_the_shutdown_wait() {
        model(|| {
            let s = shared(1);
            s.note_started(None);
            let s2 = s.clone();
            let worker = thread::spawn(move || {
                let m = M::new(s2.clone(), 0, 0);
                crate::sync::set_current_worker_ptr((&m as *const M).cast());
                s2.note_finished(Some(&s2.ps[0]));
                let found = m.find_runnable();
                crate::sync::set_current_worker_ptr(core::ptr::null());
                assert!(found.is_none(), "nothing was queued");
            });
            s.phase.store(PHASE_DRAINING, Ordering::Release);
            s.wake_all();
            assert!(wait_all_done(&s, Duration::from_secs(3600)));
            stop_workers(&s);
            worker.join().unwrap();
        });
    }
}
