//! Shutting a scheduler down (the steps `Scheduler::shutdown_timeout` and `Drop` run).
//!
//! Dropping a [`Scheduler`](crate::Scheduler) (or calling [`Scheduler::shutdown_timeout`](crate::Scheduler::shutdown_timeout)) goes through these
//! steps:
//!
//! 1. The phase becomes *draining*: spawns from outside the scheduler fail; green threads may
//!    still spawn (their children are part of finishing).
//! 2. Runnable green threads run to completion; we wait until none is alive, or the timeout.
//! 3. Green threads still alive are parked ones (or ones that never yield): every parked one is
//!    resumed with a forced unwind ([`ForcedUnwind`](crate::ForcedUnwind)) so its destructors
//!    run, repeatedly (a destructor may park again), until none is alive or a second timeout.
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
    loop {
        if shared.live() == 0 {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        // Re-check at least every 10 ms: the notification comes from `note_finished`.
        let wait = (deadline - now).min(Duration::from_millis(10));
        guard = match shared.all_done.1.wait_timeout(guard, wait) {
            Ok((g, _)) => g,
            Err(p) => p.into_inner().0,
        };
    }
}

/// Resumes every parked green thread of `shared` with a forced unwind. Returns how many.
pub(crate) fn cancel_parked(shared: &Arc<Shared>) -> usize {
    let mut n = 0;
    for_each_parked(Arc::as_ptr(shared), |gref, generation| {
        if gref.cancel(generation) == g::Unparked::Queue {
            n += 1;
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
/// inline, whose records wait for them).
pub(crate) fn drain_queues(shared: &Shared) {
    let mut pending = Vec::new();
    while let purloin_deque::Steal::Success(g) = shared.injector.steal() {
        pending.push(g);
    }
    for p in shared.ps.iter() {
        while let purloin_deque::Steal::Success(g) = p.stealer.steal() {
            pending.push(g);
        }
        pending.extend(p.take_runnext());
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
            if let Some(task) = unsafe { g.task.with_mut(|t| (*t).take()) } {
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
