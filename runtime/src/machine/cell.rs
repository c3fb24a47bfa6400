//! One machine on the scheduler: a stackless task ([`purloin_sched::Task`]) whose step runs
//! the machine — drains its events, calls [`Machine::step`], dispatches the yields — and
//! then, inline, the machines that step woke (`chain.rs`).
//!
//! # States
//!
//! The machine's own `state` word holds the machine's state and **decides who runs the
//! machine**; the scheduler's task underneath is only one way to get it run:
//!
//! | state    | `state`    | who owns the machine                                        |
//! |----------|------------|-------------------------------------------------------------|
//! | Ready    | `READY`    | its task, queued in the scheduler (or about to be)          |
//! | Running  | `RUNNING`  | the worker stepping it (or about to: an inline hand-off)    |
//! | Blocked  | `BLOCKED`  | nobody (parked: yields in flight)                            |
//! | Idle     | `IDLE`     | nobody (parked: waiting for messages)                       |
//! | Complete | `COMPLETE` | nobody (finished)                                           |
//!
//! A waker (a send, an answer, a cancellation, a close request) that finds the machine
//! `IDLE` (or `BLOCKED`, for the last answer, a cancellation or a close) wins it with a CAS
//! and then either runs it on its own worker right after the current step (`=> RUNNING`, an
//! inline hand-off: the sender is a step of the same host and the hand-off slot is free) or
//! hands it to the scheduler (`=> READY`, then [`GreenThread::unpark`] of its task, whose
//! next step claims it `READY => RUNNING`). A machine handed off inline never touches its
//! task: the task stays parked in the scheduler.
//!
//! **The wakeup flag** ("a handler completes a yield while the worker still owns
//! the machine") is the `NOTIFY` bit: an event for a machine that is `RUNNING` (or `READY`,
//! or `BLOCKED` by a message) sets it; the worker, ending a step with Idle or WaitYields,
//! parks with a CAS from plain `RUNNING`, which fails while `NOTIFY` is set: it clears the
//! flag, drains the new events and steps again instead of losing the wake-up.
//!
//! A message that wins an `IDLE` machine is not queued at all: the winner owns the machine,
//! so it leaves the message in the owner's `direct` slot, which the next step reads first
//! (the hop of a token ring allocates no queue node and touches no queue atomics).
//!
//! # Memory ordering
//!
//! The guarantee: an event published to a machine (a pushed message or answer, a close
//! request) is seen by a step that starts after the publisher's wake decision, and if no such
//! step was already going to happen, the publisher wakes the machine. No wake-up is lost, and
//! a parked machine is run once per wake.
//!
//! - (P1) Every write to `state` is a read-modify-write (CAS or swap), so every write
//!   continues the release sequence of the ones before it, and each one reads the latest
//!   value. A publisher publishes (queue push, close flag store, `inflight` decrement), then
//!   does its RMW on `state` (Release): the transition that wakes the machine, or setting
//!   `NOTIFY`. The owner's claim (`READY => RUNNING`) and its flag clear (`swap(RUNNING)`)
//!   are Acquire and come later in `state`'s modification order, so they synchronise with
//!   the publisher's RMW, and the drain that follows sees the publication. There is no
//!   store→load (Dekker) pattern and no fence: a publisher never concludes from a plain load.
//! - (W1) A wake (`IDLE/BLOCKED => READY/RUNNING`) is a CAS: exactly one waker wins. AcqRel:
//!   Acquire pairs with the park (R1) of the step that made the machine Idle/Blocked, so the
//!   winner owns the owner fields (it writes `direct`); Release hands them, and the direct
//!   message, to the claim (the task's `READY => RUNNING`, Acquire), or to itself (inline).
//! - (R1) The park (`RUNNING => IDLE/BLOCKED`, CAS from plain `RUNNING`) is Release: the
//!   step's writes to the owner fields happen before the next owner's W1. It fails only if
//!   `NOTIFY` is set (nobody else changes a `RUNNING` state); the owner then clears it with
//!   an Acquire swap (P1) and drains.
//! - (C1) `inflight`: the dispatcher adds before any handler can answer; each answer pushes
//!   its event *then* decrements (AcqRel). The decrement that reaches zero therefore happens
//!   after every answer's push (release sequence of the RMWs), and that publisher wakes a
//!   Blocked machine, whose next step drains all of them.
//! - (H1) The task's handle is known only after `spawn_task` returns, and the task may run
//!   before that. The spawner writes `handle` then swaps `handle_state` to `SET` (AcqRel); a
//!   waker loads it with Acquire (pairs) before reading `handle`. A waker that finds it not
//!   `SET` CASes it (from `UNSET` or `PENDING`) to `PENDING` instead of unparking — an RMW,
//!   so the spawner's swap reads it and, reading `PENDING`, unparks on its behalf after the
//!   waker's publication.
//! - (E1) `finish` swaps in `COMPLETE` (AcqRel: also an RMW, P1) before closing the queue and
//!   publishing the exit status; `is_complete` loads with Acquire.
//! - The queue's own pairs (Q1 in `queue.rs`) carry each event's contents; the owner may skip
//!   the drain's swap when a Relaxed load finds the queue empty: every push it must see
//!   happens before its P1 Acquire, so coherence forbids that load from reading an older
//!   `head`.

use core::mem::take;
use core::ptr;
use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

use purloin_sched::{GreenThread, Task, TaskStep};

use super::error::CompleteErrorKind;
use super::step::StepBuf;
use super::{
    Command, Error, ErrorKind, Event, EventKind, Events, HostHandle, Machine, MachineId,
    MachineState, Payload, Status, StepOutput, chain,
};
use crate::loom::{AtomicBool, AtomicU32, AtomicUsize, Condvar, Mutex, Ordering, UnsafeCell, lock};

/// `state` values (the machine's states), in the low bits.
pub(crate) const READY: u32 = 0;
pub(crate) const RUNNING: u32 = 1;
pub(crate) const BLOCKED: u32 = 2;
pub(crate) const IDLE: u32 = 3;
pub(crate) const COMPLETE: u32 = 4;
const STATUS: u32 = 0b111;
/// The wakeup flag: an event arrived for a machine that was not parked.
const NOTIFY: u32 = 1 << 3;

/// `handle_state` values (H1).
const UNSET: u32 = 0;
const SET: u32 = 1;
const PENDING: u32 = 2;

/// How to wake the task under a machine: its scheduler handle (or, in the crate's own loom
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

/// A machine a waker won (W1): what the waker must do, outside any lock.
#[must_use = "a won machine runs only if the wake-up is carried out"]
pub(crate) enum Wakeup {
    /// Unpark its task (`READY`).
    Unpark(TaskRef),
    /// Hand it off to this worker's chain (`RUNNING`, see `chain.rs`).
    Inline(*const MachineCell),
}

impl Wakeup {
    pub(crate) fn wake(self) {
        match self {
            Wakeup::Unpark(t) => t.unpark(),
            Wakeup::Inline(c) => chain::put(c),
        }
    }
}

/// Aborts the process if dropped: held across code that must not unwind (and forgotten at
/// its end).
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        eprintln!("purloin: a panic while a message was half moved; aborting (a purloin bug)");
        std::process::abort();
    }
}

/// The machine completed: a message for it was not delivered.
#[derive(Debug)]
pub(crate) struct Completed;

/// Which events wake a machine in which state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Wake {
    /// A message or an answer that is not the last one: wakes only an Idle machine.
    IfIdle,
    /// The last answer, a cancellation, a close request: wakes Idle and Blocked machines.
    IfWaiting,
}

/// How a run of an owned machine ended.
enum Ran {
    /// Parked (`IDLE`/`BLOCKED`): nothing to do until a waker wins it.
    Parked,
    /// `Status::Continue`: `READY`, for its task to run again after other work.
    Requeued,
    /// `COMPLETE`: its task must finish.
    Finished,
}

/// What a step asked for, once its status is acted on (small: returned in a register).
#[derive(Clone, Copy)]
enum After {
    /// Park as `IDLE` or `BLOCKED` (unless the wakeup flag brought events).
    Park(u32),
    /// `Status::Continue`.
    Requeue,
    /// Completed or failed (`finish` was called).
    Finished,
}

/// What the owner of the machine has (touched only by the worker that owns it: see the
/// module docs). Hot fields first.
///
/// The step's [`Events`] and [`StepBuf`] live here between steps and are lent to
/// `Machine::step` in place, so a hop builds and moves no per-step structures: the waker that
/// wins an Idle machine writes its message straight into `events.direct`. Between steps,
/// `events.direct` and `events.fresh` are empty and `events.carry` holds only the events kept
/// while Blocked.
#[repr(C)]
struct Owner {
    machine: Option<Box<dyn Machine>>,
    events: Events,
    /// Yields dispatched minus answers drained: what the machine still waits for.
    outstanding: usize,
    /// The last status was `WaitYields`.
    blocked: bool,
    /// The step's status and yields (the yields' buffer is reused).
    out: StepBuf,
}

/// The exit status, under `exit`'s lock.
#[derive(Default)]
pub(crate) struct Exit {
    pub(crate) done: bool,
    pub(crate) result: Option<Result<Payload, Error>>,
    /// A waiter took the result; later waits fail with `UnknownMachine`.
    pub(crate) taken: bool,
    /// Nobody will wait: drop the result and forget the id when the machine completes.
    pub(crate) detached: bool,
    pub(crate) green_waiters: Vec<GreenThread>,
    pub(crate) os_waiters: usize,
}

/// One machine: the task the scheduler steps, and what senders, handlers and waiters share.
///
/// `repr(C)` with the fields every message and step touches first: with the `Arc` header
/// they share the first cache line, the owner's fields the second (a ring of 10,000
/// machines touches each machine once per lap, so every line a hop touches is a miss).
#[repr(C)]
pub(crate) struct MachineCell {
    /// The machine's state (`READY`..`COMPLETE`) and the wakeup flag: see the module docs.
    state: AtomicU32,
    /// `UNSET` / `SET` / `PENDING` (H1).
    handle_state: AtomicU32,
    pub(crate) queue: super::queue::EventQueue,
    pub(crate) host: HostHandle,
    pub(crate) id: MachineId,
    /// Shutdown asks the machine to close (no further `Machine::step`).
    close_requested: AtomicBool,
    owner: UnsafeCell<Owner>,
    /// The task's handle, written once by the spawner before `handle_state = SET`.
    handle: UnsafeCell<Option<TaskRef>>,
    /// Yields dispatched and not yet answered (C1).
    inflight: AtomicUsize,
    /// Tags of the yields in flight: each is answered exactly once.
    tags: Mutex<HashSet<u64>>,
    pub(crate) exit: Mutex<Exit>,
    pub(crate) exit_cv: Condvar,
}

// SAFETY: `owner` is touched only by the machine's owner: the worker that claimed it or won
// it (W1/R1 and the claim order the hand-overs, module docs); `handle` is written once before
// `handle_state = SET` (Release) and read only after an Acquire load of `SET` (H1).
// Everything else is atomics, locks, or the `Sync` queue. The machine inside `owner` is
// `Send`, which is all a value touched by one thread at a time needs.
unsafe impl Sync for MachineCell {}
// SAFETY: as above; all fields are `Send` (`Box<dyn Machine>` is `Send`).
unsafe impl Send for MachineCell {}

impl MachineCell {
    pub(crate) fn new(id: MachineId, host: HostHandle, machine: Box<dyn Machine>) -> MachineCell {
        MachineCell {
            id,
            host,
            state: AtomicU32::new(READY),
            close_requested: AtomicBool::new(false),
            queue: super::queue::EventQueue::new(),
            inflight: AtomicUsize::new(0),
            tags: Mutex::new(HashSet::new()),
            handle_state: AtomicU32::new(UNSET),
            handle: UnsafeCell::new(None),
            owner: UnsafeCell::new(Owner {
                machine: Some(machine),
                events: Events::default(),
                out: StepBuf::default(),
                outstanding: 0,
                blocked: false,
            }),
            exit: Mutex::new(Exit::default()),
            exit_cv: Condvar::new(),
        }
    }

    /// The state, for `HostHandle::status` (a racy snapshot).
    pub(crate) fn state(&self) -> MachineState {
        match self.state.load(Ordering::Relaxed) & STATUS {
            READY => MachineState::Ready,
            RUNNING => MachineState::Running,
            BLOCKED => MachineState::Blocked,
            IDLE => MachineState::Idle,
            _ => MachineState::Complete,
        }
    }

    pub(crate) fn is_complete(&self) -> bool {
        // Acquire pairs with `finish`'s swap (E1).
        self.state.load(Ordering::Acquire) & STATUS == COMPLETE
    }

    /// The identity of this machine's host, for the inline hand-off (`chain.rs`).
    fn host_id(&self) -> usize {
        self.host.shared() as *const super::host::HostShared as usize
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

    /// Where a machine this thread may win goes: inline (`RUNNING`) or to its task (`READY`).
    fn wake_target(&self) -> u32 {
        if chain::available(self.host_id()) { RUNNING } else { READY }
    }

    /// What the winner of a wake (W1) to `target` must do.
    fn won(&self, target: u32) -> Option<Wakeup> {
        if target == RUNNING {
            Some(Wakeup::Inline(self))
        } else {
            self.handle_for_wake().map(Wakeup::Unpark)
        }
    }

    /// Sends a message: to an Idle machine directly (the winner of W1 owns it and leaves the
    /// message in `direct`), otherwise through the queue, and carries out the wake-up (no
    /// lock is held here). `Err(Completed)` if the machine completed: then the message is
    /// still in `*message`.
    ///
    /// Two details keep a token ring's hop free of store-forwarding stalls (each was about a
    /// tenth of the ring's time in `perf annotate`): the message is read from the sender's
    /// frame only after the state CAS, whose locked instruction has drained the sender's
    /// stores of the freshly built payload; and the result is small enough to come back in
    /// registers.
    ///
    /// # Safety
    /// On `Ok` the message has been moved out of `*message`: the caller must neither use nor
    /// drop it (`mem::forget` it).
    pub(crate) unsafe fn send(&self, message: &mut Payload) -> Result<(), Completed> {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & STATUS == IDLE {
            let target = self.wake_target();
            // W1: AcqRel, see the module docs.
            match self.state.compare_exchange_weak(s, target, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    // SAFETY: winning W1 made this thread the owner (Acquire: the last owner's
                    // writes happen before), and no step runs until it hands the machine on.
                    let no_unwind = self.owner.with_mut(|o| unsafe {
                        debug_assert!(
                            (*o).events.direct.is_none(),
                            "an Idle machine has no direct message"
                        );
                        // The caller gives up the message on `Ok` (the contract). Between this
                        // read and that `Ok`, a panic would drop the message twice (here and
                        // in the caller's frame): the guard aborts instead. Nothing there is
                        // expected to panic; the guard costs nothing when nothing does.
                        let no_unwind = AbortOnUnwind;
                        (*o).events.direct = Some(Event::message(ptr::read(message)));
                        no_unwind
                    });
                    if let Some(w) = self.won(target) {
                        w.wake();
                    }
                    core::mem::forget(no_unwind);
                    return Ok(());
                }
                Err(actual) => s = actual,
            }
        }
        if s & STATUS == COMPLETE {
            return Err(Completed);
        }
        // As above: from the read to the `Ok` (or the write-back), a panic aborts.
        let no_unwind = AbortOnUnwind;
        // SAFETY: read here, and written back below unless the push keeps it.
        let event = Event::message(unsafe { ptr::read(message) });
        let sent = match self.push(event, Wake::IfIdle) {
            Ok(wake) => {
                if let Some(w) = wake {
                    w.wake();
                }
                Ok(())
            }
            Err(back) => {
                // SAFETY: `*message` was moved out above; this puts the message back.
                unsafe { ptr::write(message, back.data) };
                Err(Completed)
            }
        };
        core::mem::forget(no_unwind);
        sent
    }

    /// Pushes `event` and decides the wake-up. Gives the event back if the machine completed.
    pub(crate) fn push(&self, event: Event, wake: Wake) -> Result<Option<Wakeup>, Event> {
        self.queue.push(event)?;
        Ok(self.publish(wake))
    }

    /// After a publication (event push, close flag, `inflight` decrement): the RMW on `state`
    /// (P1) that wakes the machine (W1) or sets the wakeup flag.
    fn publish(&self, wake: Wake) -> Option<Wakeup> {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let status = s & STATUS;
            let (next, wakes) = match status {
                COMPLETE => return None,
                IDLE => (self.wake_target(), true),
                BLOCKED if wake == Wake::IfWaiting => (self.wake_target(), true),
                // READY, RUNNING, or BLOCKED by an event that does not unblock it.
                _ => (s | NOTIFY, false),
            };
            // P1 (Release) / W1 (AcqRel): see the module docs.
            match self.state.compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) if wakes => return self.won(next),
                Ok(_) => return None,
                Err(actual) => s = actual,
            }
        }
    }

    /// Asks the machine to close at its next step (shutdown after the timeout).
    pub(crate) fn request_close(&self) -> Option<Wakeup> {
        self.close_requested.store(true, Ordering::Relaxed);
        self.publish(Wake::IfWaiting)
    }

    /// Delivers the answer to yield `tag`. Returns the wake-up to carry out.
    pub(crate) fn complete(
        &self,
        tag: u64,
        result: Result<Payload, Error>,
    ) -> Result<Option<Wakeup>, CompleteErrorKind> {
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
        Ok(self.publish(if last { Wake::IfWaiting } else { Wake::IfIdle }))
    }

    /// Closes a machine whose task was never handed to the scheduler (its spawn failed).
    pub(crate) fn abandon(&self) {
        self.state.swap(COMPLETE, Ordering::AcqRel);
        drop(self.queue.close());
        // SAFETY: the task was never given to the scheduler, so no step runs or will run: the
        // spawner (the caller) is the only one touching the owner fields.
        let machine = self.owner.with_mut(|o| unsafe { (*o).machine.take() });
        if let Some(mut p) = machine {
            p.close();
        }
    }

    /// The task's claim: `READY => RUNNING` (Acquire: pairs with W1 and P1).
    fn claim(&self) -> Option<TaskStep> {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            match s & STATUS {
                READY => match self.state.compare_exchange_weak(
                    s,
                    RUNNING,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return None,
                    Err(actual) => s = actual,
                },
                // Finished (inline, or by a close): the task ends.
                COMPLETE => return Some(TaskStep::Done),
                // Not ours: parked, or owned by a worker that won it inline.
                _ => return Some(TaskStep::Wait),
            }
        }
    }

    /// Parks the owned machine as `to` (R1). False if the wakeup flag was set: it is cleared
    /// (Acquire, P1) and the caller drains again.
    fn park(&self, to: u32) -> bool {
        // R1: Release.
        if self.state.compare_exchange(RUNNING, to, Ordering::Release, Ordering::Relaxed).is_ok() {
            return true;
        }
        // Only NOTIFY can have changed a RUNNING state. P1: Acquire.
        self.state.swap(RUNNING, Ordering::Acquire);
        false
    }

    /// Gives a machine won for an inline hand-off to its task instead (the chain unwound).
    pub(crate) fn requeue(&self) {
        // Release: hands the owner fields to the claim (W1's role).
        self.state.swap(READY, Ordering::AcqRel);
        if let Some(t) = self.handle_for_wake() {
            t.unpark();
        }
    }

    /// Steps a machine handed off inline (`chain.rs`); the caller owns it (`RUNNING`).
    pub(crate) fn run_inline(&self) {
        let ran = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller owns the machine (it won W1 on this thread).
            self.owner.with_mut(|o| self.run_owned(unsafe { &mut *o }))
        }));
        let ran = ran.unwrap_or_else(|payload| {
            self.fail_host(payload);
            Ran::Finished
        });
        match ran {
            Ran::Parked => {}
            // The task runs it next (`READY`), or ends (`COMPLETE`). The unpark is the last
            // touch of `self`: once the task ends, the cell may be freed.
            Ran::Requeued | Ran::Finished => {
                if let Some(t) = self.handle_for_wake() {
                    t.unpark();
                }
            }
        }
    }

    /// The host's own code panicked while this worker owned the machine: fail it rather than
    /// leave its waiters hanging.
    fn fail_host(&self, payload: Box<dyn core::any::Any + Send>) {
        let why = Error::from_panic(&format!("the host while stepping {}", self.id), &*payload);
        self.owner.with_mut(|o| {
            // SAFETY: only the owner calls this (the step or the inline run that panicked).
            let o = unsafe { &mut *o };
            if o.machine.is_some() {
                self.finish(o, Err(why));
            }
        });
    }

    /// Runs the owned machine (`RUNNING`): steps it, then parks it, or steps it again while
    /// the wakeup flag brings new events.
    fn run_owned(&self, o: &mut Owner) -> Ran {
        // A claim or a wake steps the machine even without events (its first step, a
        // `Continue`); a cleared wakeup flag only if it brought some.
        let mut must_step = true;
        let mut park_as = IDLE;
        loop {
            // P1: the close flag was stored before the RMW we synchronised with.
            if self.close_requested.load(Ordering::Relaxed) {
                let why = Error::with_kind(
                    ErrorKind::Closed,
                    format!(
                        "{} was closed by the host's shutdown: it did not complete within the \
                         timeout after its Cancel event; complete soon after EventKind::Cancel, \
                         or give shutdown a longer timeout",
                        self.id
                    ),
                );
                self.finish(o, Err(why));
                return Ran::Finished;
            }
            debug_assert!(o.events.fresh.len() == 0, "drained events are stepped or carried");
            o.events.fresh = self.queue.take_if_any();
            if !must_step && o.events.direct.is_none() && o.events.fresh.len() == 0 {
                if self.park(park_as) {
                    return Ran::Parked;
                }
                continue;
            }
            // A direct event is always a message: only queued events can be answers or
            // cancellations.
            debug_assert!(o.events.direct.as_ref().is_none_or(|e| e.kind == EventKind::Message));
            let (mut answers, mut cancels) = (0, 0);
            if o.events.fresh.len() > 0 {
                for e in o.events.fresh.iter() {
                    match e.kind {
                        EventKind::YieldComplete => answers += 1,
                        EventKind::Cancel => cancels += 1,
                        EventKind::Message => {}
                    }
                }
                debug_assert!(answers <= o.outstanding, "an answer nobody waited for was counted");
                o.outstanding = o.outstanding.saturating_sub(answers);
            }
            if o.blocked && o.outstanding > 0 && cancels == 0 {
                // Still Blocked (a message or a non-last answer): keep the events for the
                // step that the last answer triggers.
                let events = &mut o.events;
                events
                    .carry
                    .extend(events.direct.take().into_iter().chain(take(&mut events.fresh)));
                must_step = false;
                park_as = BLOCKED;
                continue;
            }
            must_step = false;
            park_as = match self.step_once(o) {
                After::Park(state) => state,
                After::Requeue => {
                    // Release: hands the owner fields to the task's claim (W1's role).
                    self.state.swap(READY, Ordering::AcqRel);
                    return Ran::Requeued;
                }
                After::Finished => return Ran::Finished,
            };
            // Park at once: an event that arrived during the step set the wakeup flag (P1),
            // which fails this CAS, and the loop then drains it (a hop skips a drain check).
            if self.park(park_as) {
                return Ran::Parked;
            }
        }
    }

    /// One `Machine::step` with the owner's events; dispatches the yields and acts on the
    /// status (`Complete` and failures finish the machine here).
    ///
    /// The status is read in place and only a `Complete` one is moved out: on a hop this
    /// function touches no large temporaries (moving freshly written aggregates through the
    /// stack cost the ring stalls in `perf annotate`).
    fn step_once(&self, o: &mut Owner) -> After {
        let Owner { machine, events, out, .. } = o;
        let machine = machine.as_mut().expect("a machine is stepped only before it finishes");
        let mut step_out = StepOutput::new(self.id, &self.host, out);
        // The step's error is kept aside and only a flag crosses `catch_unwind` (its result
        // goes through memory; a small one keeps the hop free of store-forwarding stalls).
        let mut error = None;
        let stepped =
            catch_unwind(AssertUnwindSafe(|| match machine.step(events, &mut step_out) {
                Ok(()) => true,
                Err(e) => {
                    error = Some(e);
                    false
                }
            }));
        if !events.is_empty() {
            events.clear();
        }
        let failed = match stepped {
            Ok(true) => None,
            Ok(false) => error,
            Err(payload) => {
                Some(Error::from_panic(&format!("Machine::step of {}", self.id), &*payload))
            }
        };
        if let Some(why) = failed {
            o.out.yields.clear();
            o.out.status = None;
            self.finish(o, Err(why));
            return After::Finished;
        }
        let made = o.out.yields.len();
        if made > 0 {
            let dispatched = self.dispatch(&mut o.out.yields);
            if let Err(e) = dispatched {
                o.out.yields.clear();
                o.out.status = None;
                self.finish(o, Err(e));
                return After::Finished;
            }
            o.outstanding += made;
        }
        let after = match &o.out.status {
            Some(Status::Continue) => After::Requeue,
            Some(Status::Idle) => After::Park(IDLE),
            None if made == 0 => After::Park(IDLE),
            Some(Status::WaitYields) | None => After::Park(BLOCKED),
            Some(Status::Complete(_)) => {
                let Some(Status::Complete(result)) = o.out.status.take() else { unreachable!() };
                self.finish(o, result);
                return After::Finished;
            }
        };
        if o.out.status.is_some() {
            // SAFETY: the status is `Continue`, `Idle` or `WaitYields` (a `Complete` one was
            // moved out above): variants without fields, so overwriting it drops nothing.
            // (Assigning would call the drop glue out of line on every hop.)
            unsafe { ptr::write(&mut o.out.status, None) };
        }
        match after {
            After::Park(BLOCKED) if o.outstanding == 0 => {
                let why = Error::with_kind(
                    ErrorKind::Protocol,
                    format!(
                        "{} returned Status::WaitYields with no yields in flight, so nothing \
                         would ever wake it; yield a command in the same step, or return \
                         Status::Idle to wait for messages",
                        self.id
                    ),
                );
                self.finish(o, Err(why));
                After::Finished
            }
            After::Park(BLOCKED) => {
                o.blocked = true;
                after
            }
            _ => {
                o.blocked = false;
                after
            }
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
                             must be unique among a machine's unanswered yields",
                            self.id, c.tag
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

    /// Ends the machine: `COMPLETE`, queue closed, `Machine::close`, exit published.
    fn finish(&self, o: &mut Owner, result: Result<Payload, Error>) {
        // E1: an RMW (P1); Release: a waiter that sees COMPLETE (without the lock) sees the
        // writes before.
        self.state.swap(COMPLETE, Ordering::AcqRel);
        let leftovers = self.queue.close();
        lock(&self.tags).clear();
        o.events.clear();
        drop(leftovers);
        if let Some(mut machine) = o.machine.take() {
            // `close` must not take the host down; its panic is reported by the panic hook.
            let _ = catch_unwind(AssertUnwindSafe(|| machine.close()));
            let _ = catch_unwind(AssertUnwindSafe(move || drop(machine)));
        }
        self.host.shared().machine_finished(self, result);
    }
}

impl Task for MachineCell {
    fn step(&self) -> TaskStep {
        if let Some(done_or_wait) = self.claim() {
            return done_or_wait;
        }
        // One epoch pin for every id lookup of the chain (`table.rs`).
        let _pin = super::table::pin();
        chain::run(self.host_id(), || {
            // SAFETY: the claim made this worker the owner (Acquire: pairs with W1/P1).
            match self.owner.with_mut(|o| self.run_owned(unsafe { &mut *o })) {
                Ran::Parked => TaskStep::Wait,
                Ran::Requeued => TaskStep::Yield,
                Ran::Finished => TaskStep::Done,
            }
        })
    }

    fn panicked(&self, payload: Box<dyn core::any::Any + Send>) {
        // Only the host's own code can get here (the machine's step and close are caught,
        // and so is each inline run): `panicked` runs on the worker that ran the panicking
        // step, which still owns the machine.
        self.fail_host(payload);
    }

    fn cancel(&self) -> TaskStep {
        // The scheduler stops (the host's shutdown closed every machine before, unless a step
        // never returned). Finish a machine nobody owns; leave one a worker owns to it.
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            match s & STATUS {
                COMPLETE => return TaskStep::Done,
                RUNNING => return TaskStep::Wait,
                _ => match self.state.compare_exchange_weak(
                    s,
                    RUNNING,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(actual) => s = actual,
                },
            }
        }
        let why = Error::with_kind(
            ErrorKind::Closed,
            format!("{} was closed because its runtime shut down", self.id),
        );
        // SAFETY: the CAS above made this worker the owner (Acquire: pairs with R1/W1).
        self.owner.with_mut(|o| self.finish(unsafe { &mut *o }, Err(why)));
        TaskStep::Done
    }
}
