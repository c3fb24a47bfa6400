//! The run-queue entry: a G record, a fork-join job with no G yet, or a lazily spawned green
//! thread's task cell with no G yet.
//!
//! This file holds `impl M`'s part that takes entries (`M::accept`, `adopt_job`,
//! `adopt_task`); the rest of `impl M` is in `worker.rs` (its first lines say where).
//!
//! Local queues, runnext and the global queue hold [`Entry`] words; a [`GRef`] is always a
//! real record. An entry is decoded in one place, [`Entry::kind`], and every dequeue by a
//! worker goes through [`M::accept`], which gives a job or a task its G (a task's from the
//! dequeuing worker's own cache, so a record never moves between cores on spawn). The other
//! readers of entries compare them for equality (a joiner looking for its child's entry) or
//! decode them (join-helping, the shutdown drain).
//!
//! # Layout
//!
//! ```text
//!   …pointer bits… 00   a G record             (`GRef`; records are 8-aligned)
//!   …pointer bits… 01   a fork-join job slot   (`JobSlot`, in its joiner's frame)
//!   …pointer bits… 10   a task cell            (the G side of a lazily spawned thread)
//! ```
//!
//! # Ownership
//!
//! - A G entry carries one reference on the record (the scheduling reference, or a stale
//!   entry's own; see `g`).
//! - A job entry points at a slot in its joiner's frame. The joiner takes its job back only by
//!   popping that very entry from its own local queue; a job anywhere else is left to whoever
//!   dequeues it. The slot outlives the entry because the joiner does not leave `join` before
//!   the job is done, and the job is done only after its entry was dequeued.
//! - A task entry is owned by whoever dequeues it (the joiner, to run it inline, a waiter
//!   running a detached task of its group inline (`help`), or a worker):
//!   dequeuing it takes the cell's G side, given up at spawn (`OwnedTask::into_cell`).

use core::fmt;
use core::ptr::NonNull;

use crate::g::GRef;
use crate::sync::Arc;
use crate::task::{CellHead, OwnedTask, Runnable, TaskRef};
use crate::worker::M;

/// Where a lazily started fork-join job lives: a fat pointer to the job, in its joiner's frame.
pub(crate) type JobSlot = NonNull<NonNull<dyn Runnable>>;

const JOB_TAG: usize = 1;
const TASK_TAG: usize = 2;
const TAGS: usize = JOB_TAG | TASK_TAG;

/// A run-queue entry (see the module docs for the layout and who owns what).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry(NonNull<()>);

// SAFETY: an entry is a word handed between threads through the queues' Release/Acquire
// pairs; a G record is Sync, and a job slot or task cell is used only by the party that
// dequeued its entry (see the module docs).
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

/// What an entry denotes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// A G record.
    G(GRef),
    /// A fork-join job with no G yet.
    Job(JobSlot),
    /// A lazily spawned green thread's task cell (its G side).
    Task(NonNull<()>),
}

impl Entry {
    /// The entry for a fork-join job that has no G yet (see the module docs).
    #[inline]
    pub(crate) fn job(slot: JobSlot) -> Entry {
        Entry::tagged(slot.cast(), JOB_TAG)
    }

    /// The entry for a lazily spawned green thread with no G yet: its task cell.
    pub(crate) fn task(cell: NonNull<()>) -> Entry {
        Entry::tagged(cell, TASK_TAG)
    }

    #[inline]
    fn tagged(ptr: NonNull<()>, tag: usize) -> Entry {
        debug_assert_eq!(ptr.as_ptr() as usize & TAGS, 0, "job slots and task cells are aligned");
        // `map_addr` keeps the pointer's provenance; the result is not null (ptr is not).
        Entry(ptr.map_addr(|a| a | tag))
    }

    /// Decodes the entry.
    pub(crate) fn kind(self) -> Kind {
        let untagged = self.0.map_addr(|a| {
            core::num::NonZeroUsize::new(a.get() & !TAGS).expect("an entry is never null")
        });
        match self.0.addr().get() & TAGS {
            // SAFETY: an untagged entry is only made from a `GRef` (`From<GRef>`): a live
            // record.
            0 => Kind::G(unsafe { GRef::from_ptr(untagged.as_ptr().cast()) }.expect("not null")),
            JOB_TAG => Kind::Job(untagged.cast()),
            _ => Kind::Task(untagged),
        }
    }

    /// Whether this entry is a fork-join job (the cheap test a thief makes: see
    /// `worker::steal_from`).
    #[inline]
    pub(crate) fn is_job(self) -> bool {
        self.0.addr().get() & TAGS == JOB_TAG
    }

    /// The record, if this entry is a G.
    pub(crate) fn record(self) -> Option<GRef> {
        match self.kind() {
            Kind::G(g) => Some(g),
            _ => None,
        }
    }

    /// The entry as a word for `runnext` (see [`Entry::from_ptr`]).
    pub(crate) fn as_ptr(self) -> *mut () {
        self.0.as_ptr()
    }

    /// # Safety
    /// - `ptr` must be null (giving `None`) or come from [`Entry::as_ptr`] of an entry whose
    ///   ownership the caller now has (it took it out of `runnext`).
    pub(crate) unsafe fn from_ptr(ptr: *mut ()) -> Option<Entry> {
        NonNull::new(ptr).map(Entry)
    }
}

impl From<GRef> for Entry {
    fn from(g: GRef) -> Entry {
        Entry(NonNull::new(g.as_ptr().cast()).expect("a record is not null"))
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            Kind::G(g) => write!(f, "{g:?}"),
            Kind::Job(slot) => write!(f, "job@{slot:p}"),
            Kind::Task(cell) => write!(f, "task@{cell:p}"),
        }
    }
}

impl M {
    /// Accepts a dequeued entry: a G is claimed (`RUNNABLE => RUNNING`), or for a stale entry
    /// of a G its joiner ran inline, the entry's reference is dropped; a job or a task is given
    /// a G, claimed for this worker to run.
    pub(crate) fn accept(&self, entry: Entry) -> Option<GRef> {
        match entry.kind() {
            Kind::Job(job) => Some(self.adopt_job(job)),
            Kind::Task(cell) => Some(self.adopt_task(cell)),
            Kind::G(g) => {
                if g.claim_for_run() {
                    return Some(g);
                }
                if g.drop_ref() {
                    self.recycle(g);
                }
                None
            }
        }
    }

    /// Gives a dequeued fork-join job its G, claimed for this worker to run: the job is about
    /// to run somewhere other than inline in its joiner, so it needs a stack of its own (it
    /// may park).
    fn adopt_job(&self, job: JobSlot) -> GRef {
        let g = self.alloc_g();
        // SAFETY: the slot outlives the entry we dequeued (see the module docs); the queue's
        // push (Release) / pop (Acquire) published it. The record is FREE and unpublished: we
        // own its cells, emptied by `recycle` (plain writes, as in `spawn_g`).
        unsafe {
            let job = *job.as_ptr();
            g.work.with_mut(|w| w.write(crate::g::Work::Task(TaskRef::Borrowed(job))));
            g.uncounted.with_mut(|u| u.write(true));
            g.stack_size.with_mut(|s| s.write(self.shared.config.stack_size));
            g.sched.with_mut(|s| s.write(Arc::as_ptr(&self.shared)));
        }
        // A fork-join job has no spawner of its own: its joiner waits for it in `join`.
        g.prepare_spawn(0);
        let claimed = g.claim_for_run();
        debug_assert!(claimed, "a fresh record is claimable");
        g
    }

    /// Gives a dequeued lazily spawned green thread (see `lazy`) its G, claimed for this worker
    /// to run. The G comes from this worker's cache (unless a handle asked for the thread's
    /// identity before it started), so the record does not move between cores.
    fn adopt_task(&self, cell: NonNull<()>) -> GRef {
        // SAFETY: we dequeued the entry, so we own the cell's G side (given up at spawn), and
        // the cell lives until that side completes; the queue's push (Release) / pop (Acquire)
        // published it.
        let task = unsafe { OwnedTask::from_cell(cell) };
        // SAFETY: as above; the head is at offset 0 of the cell.
        let head = unsafe { &*cell.cast::<CellHead>().as_ptr() };
        let g = head.identity.start_on_worker(|| self.alloc_g(), |g| self.recycle_cached(g));
        // SAFETY: we claimed the record: we own its cells, emptied by `recycle` (plain writes,
        // as in `spawn_g`).
        unsafe {
            g.work.with_mut(|w| w.write(crate::g::Work::Task(TaskRef::Owned(task))));
            g.stack_size.with_mut(|s| s.write(self.shared.config.stack_size));
            g.sched.with_mut(|s| s.write(Arc::as_ptr(&self.shared)));
        }
        g
    }
}
