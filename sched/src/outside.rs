//! OS threads outside a scheduler that wait on one of its green threads (a `join` from
//! `main`, a scope's owner): counted per scheduler, so the runtime's deadlock watch can tell
//! "every green thread is parked and an OS thread waits for one of them" (Go's "all
//! goroutines are asleep") from "every green thread is parked, waiting for an OS thread".
//!
//! A plain mutex-protected list: an OS thread that blocks pays a futex wait anyway.

use crate::sync::{DiagMutex, DiagMutexGuard};

/// `(scheduler address, OS threads waiting on it)`.
static WAITING: DiagMutex<Vec<(usize, usize)>> = DiagMutex::new(Vec::new());

fn lock() -> DiagMutexGuard<'static, Vec<(usize, usize)>> {
    WAITING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An OS thread waiting on a green thread of one scheduler, while it lives (see
/// [`Scheduler::outside_wait`](crate::Scheduler::outside_wait)).
#[derive(Debug)]
#[must_use = "the wait is counted while the guard lives"]
pub struct OutsideWait {
    sched: usize,
}

impl OutsideWait {
    /// Counts the calling OS thread as waiting on `sched` (a `Shared` address).
    pub(crate) fn new(sched: *const crate::shared::Shared) -> OutsideWait {
        let sched = sched as usize;
        let mut list = lock();
        match list.iter_mut().find(|(s, _)| *s == sched) {
            Some((_, n)) => *n += 1,
            None => list.push((sched, 1)),
        }
        OutsideWait { sched }
    }
}

impl Drop for OutsideWait {
    fn drop(&mut self) {
        let mut list = lock();
        if let Some(i) = list.iter().position(|(s, _)| *s == self.sched) {
            list[i].1 -= 1;
            if list[i].1 == 0 {
                list.swap_remove(i);
            }
        }
    }
}

/// How many OS threads wait on green threads of `sched` now.
pub(crate) fn count(sched: *const crate::shared::Shared) -> usize {
    lock().iter().find(|(s, _)| *s == sched as usize).map_or(0, |(_, n)| *n)
}

/// Counts the caller while it waits if it is an OS thread (not a green thread).
pub(crate) fn if_os_thread(sched: *const crate::shared::Shared) -> Option<OutsideWait> {
    (!crate::in_green_thread()).then(|| OutsideWait::new(sched))
}
