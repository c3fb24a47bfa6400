//! One process on the scheduler: a stackless task ([`purloin_sched::Task`]) whose step drains
//! the process's event queue, calls [`Process::step`], dispatches the yields and tells the
//! scheduler whether to run it again, park it, or forget it.
//!
//! # States (seed 003) and how they map onto the scheduler
//!
//! The process's own `state` word holds seed 003's state; the task underneath has sched's G
//! state. They work together:
//!
//! | seed 003 | `state`    | sched's G                                    |
//! |----------|------------|----------------------------------------------|
//! | Ready    | `READY`    | `RUNNABLE` (queued) — or about to be woken   |
//! | Running  | `RUNNING`  | `RUNNING` (claimed by a worker with a CAS)   |
//! | Blocked  | `BLOCKED`  | `PARKED` (step returned `TaskStep::Wait`)    |
//! | Idle     | `IDLE`     | `PARKED`                                     |
//! | Complete | `COMPLETE` | `DONE` (step returned `TaskStep::Done`)      |
//!
//! `state` decides *whether* an event wakes the process (a message does not wake a Blocked
//! process; the last yield answer, a cancellation or a close request does; anything wakes an
//! Idle one) and makes exactly one waker do the `IDLE/BLOCKED => READY` transition and call
//! [`GreenThread::unpark`]. The unpark moves the parked task to a run queue (the waker's
//! `runnext` from a green thread, its local queue from a step, the global queue from a plain
//! thread): from then on it is an ordinary runnable G, popped LIFO from a local queue, taken
//! from the global queue in batches, or stolen half at a time, like any green thread.
//!
//! **The wakeup flag** of seed 003 ("a handler completes a yield while the worker still owns
//! the process") is sched's `NOTIFIED` token: a waker that sees `RUNNING` calls `unpark`,
//! which on a running task sets `NOTIFIED`; when the step then returns `TaskStep::Wait`, the
//! scheduler finds the token and steps the task again at once instead of parking it. The same
//! token covers the narrower window where the step already stored `IDLE`/`BLOCKED` but the
//! scheduler has not parked the task yet.
//!
//! # Memory ordering
//!
//! The guarantee: an event published to a process (a pushed message or answer, a close
//! request) is seen by a step that starts after the publisher's wake decision, and if no such
//! step was already going to happen, the publisher wakes the process. No wake-up is lost, and
//! an Idle/Blocked process is queued once per transition to Ready.
//!
//! - (F1/F2) Store→load (Dekker). The step swaps in `RUNNING` (an RMW, so it is ordered after
//!   any `=> READY` CAS it replaces), then `fence(SeqCst)` (F1), then reads the close flag and
//!   drains the queue. A publisher publishes (queue push, close flag
//!   store, `inflight` decrement), then `fence(SeqCst)` (F2), then loads `state`. Either F1
//!   precedes F2 — the publisher reads `RUNNING` or a later state and wakes as needed — or F2
//!   precedes F1 — the step reads the publication. A publisher reading `READY` (a value older
//!   than the next step's `RUNNING`) is in the second case, so it may rely on that step.
//! - (S1) `IDLE/BLOCKED => READY` is a CAS, so exactly one publisher wins and unparks. It is
//!   Relaxed: the data travel through the queue (Q1 in `queue.rs`) and the unpark/claim pair
//!   of the scheduler (G1/G2 in purloin-sched), both Release/Acquire.
//! - (C1) `inflight`: the dispatcher adds before any handler can answer; each answer pushes
//!   its event *then* decrements (AcqRel). The decrement that reaches zero therefore happens
//!   after every answer's push (release sequence of the RMWs), and that publisher wakes a
//!   Blocked process, whose next step drains all of them.
//! - (H1) The task's handle is known only after `spawn_task` returns, and the task may run
//!   before that. The spawner writes `handle` then swaps `handle_state` to `SET` (AcqRel); a
//!   waker loads it with Acquire (pairs) before reading `handle`. A waker that finds it not
//!   `SET` CASes it (from `UNSET` or `PENDING`) to `PENDING` instead of unparking — an RMW,
//!   so the spawner's swap reads it and, reading `PENDING`, unparks on its behalf after the
//!   waker's publication.
//! - (E1) `finish` stores `COMPLETE` with Release before closing the queue and publishing the
//!   exit status; `is_complete` loads with Acquire.
//! - The owner-only fields (`owner`) are touched only inside a step; the scheduler runs one
//!   step of a task at a time and hands the task between workers with its own
//!   Release/Acquire pairs (G2 in purloin-sched).

use std::collections::{HashSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};

use purloin_sched::{GreenThread, Task, TaskStep};

use super::error::CompleteErrorKind;
use super::{
    Command, Error, ErrorKind, Event, EventKind, Events, HostHandle, Payload, Pid, Process,
    ProcessState, Status, StepOutput,
};
use crate::loom::{
    AtomicBool, AtomicU32, AtomicUsize, Condvar, Mutex, Ordering, UnsafeCell, fence, lock,
};

/// `state` values (seed 003's states).
pub(crate) const READY: u32 = 0;
pub(crate) const RUNNING: u32 = 1;
pub(crate) const BLOCKED: u32 = 2;
pub(crate) const IDLE: u32 = 3;
pub(crate) const COMPLETE: u32 = 4;

/// `handle_state` values (H1).
const UNSET: u32 = 0;
const SET: u32 = 1;
const PENDING: u32 = 2;

/// How to wake the task under a process: its scheduler handle (or, in the crate's own loom
/// models, an emulation of the scheduler's token rules).
#[derive(Clone)]
pub(crate) enum TaskRef {
    Green(GreenThread),
    #[cfg(all(test, loom))]
    Model(std::sync::Arc<super::models::FakeTask>),
}

impl TaskRef {
    /// `GreenThread::unpark`: queues the parked task, or leaves a token for a running one.
    pub(crate) fn unpark(&self) {
        match self {
            TaskRef::Green(g) => {
                g.unpark();
            }
            #[cfg(all(test, loom))]
            TaskRef::Model(t) => t.unpark(),
        }
    }
}

/// Which events wake a process in which state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Wake {
    /// A message or an answer that is not the last one: wakes only an Idle process.
    IfIdle,
    /// The last answer, a cancellation, a close request: wakes Idle and Blocked processes.
    IfWaiting,
}

/// What the worker stepping the process owns (touched only inside a step). Hot fields first.
#[repr(C)]
struct Owner {
    process: Option<Box<dyn Process>>,
    /// Yields dispatched minus answers drained: what the process still waits for.
    outstanding: usize,
    /// The last status was `WaitYields`.
    blocked: bool,
    /// Reused buffer for the step's yields.
    yields: Vec<Command>,
    /// Events drained but not yet given to `Process::step` (kept while Blocked).
    carry: VecDeque<Event>,
}

/// The exit status, under `exit`'s lock.
#[derive(Default)]
pub(crate) struct Exit {
    pub(crate) done: bool,
    pub(crate) result: Option<Result<Payload, Error>>,
    /// A waiter took the result; later waits fail with `UnknownPid`.
    pub(crate) taken: bool,
    /// Nobody will wait: drop the result and forget the pid when the process completes.
    pub(crate) detached: bool,
    pub(crate) green_waiters: Vec<GreenThread>,
    pub(crate) os_waiters: usize,
}

/// One process: the task the scheduler steps, and what senders, handlers and waiters share.
///
/// `repr(C)` with the fields every message and step touches first: with the `Arc` header
/// they share the first cache line, the owner's fields the second (a ring of 10,000
/// processes touches each process once per lap, so every line a hop touches is a miss).
#[repr(C)]
pub(crate) struct ProcCell {
    /// Seed 003's state (`READY`..`COMPLETE`): see the module docs.
    state: AtomicU32,
    /// `UNSET` / `SET` / `PENDING` (H1).
    handle_state: AtomicU32,
    pub(crate) queue: super::queue::EventQueue,
    /// The task's handle, written once by the spawner before `handle_state = SET`.
    handle: UnsafeCell<Option<TaskRef>>,
    pub(crate) pid: Pid,
    owner: UnsafeCell<Owner>,
    pub(crate) host: HostHandle,
    /// Shutdown asks the process to close (no further `Process::step`).
    close_requested: AtomicBool,
    /// Yields dispatched and not yet answered (C1).
    inflight: AtomicUsize,
    /// Tags of the yields in flight: each is answered exactly once.
    tags: Mutex<HashSet<u64>>,
    pub(crate) exit: Mutex<Exit>,
    pub(crate) exit_cv: Condvar,
}

// SAFETY: `owner` is touched only by the worker running the task's step (the scheduler runs
// one step at a time and hands the task over with Release/Acquire, G2); `handle` is written
// once before `handle_state = SET` (Release) and read only after an Acquire load of `SET`
// (H1). Everything else is atomics, locks, or the `Sync` queue. The process inside `owner` is
// `Send`, which is all a value touched by one thread at a time needs.
unsafe impl Sync for ProcCell {}
// SAFETY: as above; all fields are `Send` (`Box<dyn Process>` is `Send`).
unsafe impl Send for ProcCell {}

impl ProcCell {
    pub(crate) fn new(pid: Pid, host: HostHandle, process: Box<dyn Process>) -> ProcCell {
        ProcCell {
            pid,
            host,
            state: AtomicU32::new(READY),
            close_requested: AtomicBool::new(false),
            queue: super::queue::EventQueue::new(),
            inflight: AtomicUsize::new(0),
            tags: Mutex::new(HashSet::new()),
            handle_state: AtomicU32::new(UNSET),
            handle: UnsafeCell::new(None),
            owner: UnsafeCell::new(Owner {
                process: Some(process),
                carry: VecDeque::new(),
                yields: Vec::new(),
                outstanding: 0,
                blocked: false,
            }),
            exit: Mutex::new(Exit::default()),
            exit_cv: Condvar::new(),
        }
    }

    /// The state, for `HostHandle::status` (a racy snapshot).
    pub(crate) fn state(&self) -> ProcessState {
        match self.state.load(Ordering::Relaxed) {
            READY => ProcessState::Ready,
            RUNNING => ProcessState::Running,
            BLOCKED => ProcessState::Blocked,
            IDLE => ProcessState::Idle,
            _ => ProcessState::Complete,
        }
    }

    pub(crate) fn is_complete(&self) -> bool {
        self.state.load(Ordering::Acquire) == COMPLETE
    }

    /// The spawner publishes the task's handle (H1); unparks if a waker deferred to it.
    pub(crate) fn publish_handle(&self, thread: TaskRef) {
        // SAFETY: written once, by the spawner, before `SET` is published; no reader reads it
        // before an Acquire load of `SET` (H1).
        unsafe { self.handle.with_mut(|h| *h = Some(thread.clone())) };
        // AcqRel: Release publishes `handle` (H1); Acquire pairs with a waker's `PENDING` CAS.
        if self.handle_state.swap(SET, Ordering::AcqRel) == PENDING {
            thread.unpark();
        }
    }

    /// The handle to unpark, or `None` if the spawner will unpark on our behalf (H1).
    fn handle_for_wake(&self) -> Option<TaskRef> {
        // Acquire pairs with the spawner's swap to SET (H1).
        let mut hs = self.handle_state.load(Ordering::Acquire);
        while hs != SET {
            // Not published yet: leave (or renew) `PENDING` with an RMW, never conclude from a
            // plain load. The spawner's swap then reads our RMW (or a later one), so our
            // publication happens before its unpark. AcqRel; on failure Acquire (we may read
            // SET and then read `handle`).
            match self.handle_state.compare_exchange(
                hs,
                PENDING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return None,
                Err(actual) => hs = actual,
            }
        }
        // SAFETY: SET was read with Acquire: `handle` is written and never written again.
        unsafe { self.handle.with(|h| (*h).clone()) }
    }

    /// After a publication (event push, close flag, `inflight` decrement): decides whether
    /// the process must be woken and returns the handle to unpark (outside any lock).
    pub(crate) fn wake_decision(&self, wake: Wake) -> Option<TaskRef> {
        // F2: orders the publication before the state load (module docs).
        fence(Ordering::SeqCst);
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            match s {
                // READY: the next step's drain sees the publication (F1/F2).
                READY | COMPLETE => return None,
                // The wakeup flag: sched's NOTIFIED token makes the step run again.
                RUNNING => return self.handle_for_wake(),
                BLOCKED if wake == Wake::IfIdle => return None,
                // IDLE, or BLOCKED and this wakes it.
                _ => {
                    // S1: Relaxed, one winner; data travel through the queue and the unpark.
                    match self.state.compare_exchange(
                        s,
                        READY,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return self.handle_for_wake(),
                        Err(actual) => s = actual,
                    }
                }
            }
        }
    }

    /// Pushes `event` and decides the wake-up. Gives the event back if the process completed.
    pub(crate) fn push(&self, event: Event, wake: Wake) -> Result<Option<TaskRef>, Event> {
        self.queue.push(event)?;
        Ok(self.wake_decision(wake))
    }

    /// Asks the process to close at its next step (shutdown after the timeout).
    pub(crate) fn request_close(&self) -> Option<TaskRef> {
        self.close_requested.store(true, Ordering::Relaxed);
        self.wake_decision(Wake::IfWaiting)
    }

    /// Delivers the answer to yield `tag`. Returns the handle to unpark.
    pub(crate) fn complete(
        &self,
        tag: u64,
        result: Result<Payload, Error>,
    ) -> Result<Option<TaskRef>, CompleteErrorKind> {
        if !lock(&self.tags).remove(&tag) {
            return Err(if self.is_complete() {
                CompleteErrorKind::Finished
            } else {
                CompleteErrorKind::NotInFlight
            });
        }
        if self.queue.push(Event::completion(tag, result)).is_err() {
            return Err(CompleteErrorKind::Finished);
        }
        // AcqRel (C1): the decrement that reaches zero happens after every answer's push.
        let last = self.inflight.fetch_sub(1, Ordering::AcqRel) == 1;
        Ok(self.wake_decision(if last { Wake::IfWaiting } else { Wake::IfIdle }))
    }

    /// Closes a process whose task was never handed to the scheduler (its spawn failed).
    pub(crate) fn abandon(&self) {
        self.state.store(COMPLETE, Ordering::Release);
        drop(self.queue.close());
        // SAFETY: the task was never given to the scheduler, so no step runs or will run: the
        // spawner (the caller) is the only one touching the owner fields.
        let process = self.owner.with_mut(|o| unsafe { (*o).process.take() });
        if let Some(mut p) = process {
            p.close();
        }
    }

    /// The body of a step (the caller holds the owner cell).
    fn run_step(&self, o: &mut Owner) -> TaskStep {
        // A swap, not a store: an RMW is ordered after a waker's `=> READY` CAS that it
        // replaces (a plain store from a thread that never synchronised with that CAS could be
        // placed before it in the modification order by loom, which then lets the CAS's READY
        // outlive a later COMPLETE in its model).
        self.state.swap(RUNNING, Ordering::Relaxed);
        // F1: orders `RUNNING` before the reads of the close flag and the queue (module docs).
        fence(Ordering::SeqCst);
        if self.close_requested.load(Ordering::Relaxed) {
            let why = Error::with_kind(
                ErrorKind::Closed,
                format!(
                    "{} was closed by the host's shutdown: it did not complete within the \
                     timeout after its Cancel event; complete soon after EventKind::Cancel, or \
                     give shutdown a longer timeout",
                    self.pid
                ),
            );
            return self.finish(o, Err(why));
        }
        let fresh = self.queue.take_all();
        let (mut answers, mut cancels) = (0, 0);
        for e in fresh.iter() {
            match e.kind {
                EventKind::YieldComplete => answers += 1,
                EventKind::Cancel => cancels += 1,
                EventKind::Message => {}
            }
        }
        debug_assert!(answers <= o.outstanding, "an answer nobody waited for was counted");
        o.outstanding = o.outstanding.saturating_sub(answers);
        if o.blocked && o.outstanding > 0 && cancels == 0 {
            // Still Blocked (woken by the wakeup flag for a message or a non-last answer):
            // keep the events for the step that the last answer triggers.
            o.carry.extend(fresh);
            self.state.store(BLOCKED, Ordering::Relaxed);
            return TaskStep::Wait;
        }

        let yields = core::mem::take(&mut o.yields);
        let mut out = StepOutput::new(self.pid, &self.host, yields);
        let process = o.process.as_mut().expect("a process is stepped only before it finishes");
        // `carry` holds events only after a Blocked re-park, which sets `blocked`: leave its
        // (cold) cache line alone otherwise.
        let carry = if o.blocked { core::mem::take(&mut o.carry) } else { VecDeque::new() };
        let mut events = Events { carry, fresh };
        let stepped = catch_unwind(AssertUnwindSafe(|| process.step(&mut events, &mut out)));
        // Events not taken are dropped; the carry buffer's allocation is kept for next time.
        let Events { mut carry, fresh } = events;
        drop(fresh);
        if carry.capacity() > 0 {
            carry.clear();
            o.carry = carry;
        }
        let StepOutput { status, yields: mut commands, .. } = out;
        match stepped {
            Err(payload) => {
                commands.clear();
                o.yields = commands;
                let why = Error::from_panic(&format!("Process::step of {}", self.pid), &*payload);
                return self.finish(o, Err(why));
            }
            Ok(Err(e)) => {
                commands.clear();
                o.yields = commands;
                return self.finish(o, Err(e));
            }
            Ok(Ok(())) => {}
        }
        let made = commands.len();
        let status = status.unwrap_or(if made > 0 { Status::WaitYields } else { Status::Idle });
        if made > 0 {
            if let Err(e) = self.dispatch(&mut commands) {
                commands.clear();
                o.yields = commands;
                return self.finish(o, Err(e));
            }
            o.outstanding += made;
        }
        o.yields = commands;
        match status {
            Status::Continue => {
                o.blocked = false;
                self.state.store(READY, Ordering::Relaxed);
                TaskStep::Yield
            }
            Status::Idle => {
                o.blocked = false;
                self.state.store(IDLE, Ordering::Relaxed);
                TaskStep::Wait
            }
            Status::WaitYields if o.outstanding == 0 => {
                let why = Error::with_kind(
                    ErrorKind::Protocol,
                    format!(
                        "{} returned Status::WaitYields with no yields in flight, so nothing \
                         would ever wake it; yield a command in the same step, or return \
                         Status::Idle to wait for messages",
                        self.pid
                    ),
                );
                self.finish(o, Err(why))
            }
            Status::WaitYields => {
                o.blocked = true;
                self.state.store(BLOCKED, Ordering::Relaxed);
                TaskStep::Wait
            }
            Status::Complete(result) => self.finish(o, result),
        }
    }

    /// Registers the yields as in flight and hands them to their handlers (C1: counted before
    /// any handler can answer).
    fn dispatch(&self, commands: &mut Vec<Command>) -> Result<(), Error> {
        {
            let mut tags = lock(&self.tags);
            for (i, c) in commands.iter().enumerate() {
                let dup_in_step = commands[..i].iter().any(|d| d.tag == c.tag);
                if dup_in_step || tags.contains(&c.tag) {
                    return Err(Error::with_kind(
                        ErrorKind::Protocol,
                        format!(
                            "{} yielded tag {} while a yield with that tag is in flight; tags \
                             must be unique among a process's unanswered yields",
                            self.pid, c.tag
                        ),
                    ));
                }
            }
            // Relaxed is enough: the `tags` lock orders this before any answer's decrement
            // (an answer must first remove its tag under the same lock).
            self.inflight.fetch_add(commands.len(), Ordering::Relaxed);
            tags.extend(commands.iter().map(|c| c.tag));
        }
        self.host.shared().dispatch(self, commands.drain(..));
        Ok(())
    }

    /// Ends the process: `COMPLETE`, queue closed, `Process::close`, exit published.
    fn finish(&self, o: &mut Owner, result: Result<Payload, Error>) -> TaskStep {
        // Release: a waiter that sees COMPLETE (without the lock) sees the writes before.
        self.state.store(COMPLETE, Ordering::Release);
        let leftovers = self.queue.close();
        lock(&self.tags).clear();
        o.carry.clear();
        drop(leftovers);
        if let Some(mut process) = o.process.take() {
            // `close` must not take the host down; its panic is reported by the panic hook.
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
            let _ = catch_unwind(AssertUnwindSafe(move || drop(process)));
        }
        self.host.shared().process_finished(self, result);
        TaskStep::Done
    }
}

impl Task for ProcCell {
    fn step(&self) -> TaskStep {
        // SAFETY: the scheduler runs one step of this task at a time and hands it between
        // workers with Release/Acquire (G2 in purloin-sched), so the owner fields are ours.
        self.owner.with_mut(|o| self.run_step(unsafe { &mut *o }))
    }

    fn panicked(&self, payload: Box<dyn core::any::Any + Send>) {
        // Only the host's own code can get here (the process's step and close are caught
        // above); fail the process rather than leave its waiters hanging.
        let why = Error::from_panic(&format!("the host while stepping {}", self.pid), &*payload);
        self.owner.with_mut(|o| {
            // SAFETY: as in `step`: `panicked` runs on the worker that ran the panicking
            // step, before the task is released.
            let o = unsafe { &mut *o };
            if o.process.is_some() {
                self.finish(o, Err(why));
            }
        });
    }
}
