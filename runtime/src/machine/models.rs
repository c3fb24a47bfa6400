//! Loom models of the machine protocol: the real machine cell, event queue, id table and
//! inline hand-off, stepped by loom threads that follow purloin-sched's rules for a stackless
//! task ([`FakeTask`]: steps never overlap; an unpark while the task is queued or running
//! leaves a token, and a step that returns `Wait` with a token pending runs again at once; an
//! unpark of a parked task queues it). A machine handed off inline runs on the loom thread of
//! the step that woke it, while its own task stays parked. The scheduler's own models check that it keeps those rules;
//! these check that the machine protocol is correct *given* them, at a cost of seconds
//! instead of the many minutes an end-to-end model of the whole runtime takes (the
//! end-to-end model is `runtime/tests/loom_machine.rs`).
//!
//! A lost wake-up shows up as a deadlock (the waiter on the exit status and the worker both
//! blocked), which loom reports.
//!
//! Mutation checks (each made, the models run and seen to fail, then reverted). Since the
//! machine's own `state` word carries the wakeup flag and decides who runs the machine (the
//! inline hand-off, `chain.rs`), these break that protocol (`cell.rs`):
//!
//! | mutation | models that fail | what loom reported |
//! |---|---|---|
//! | `park` stores `IDLE`/`BLOCKED` unconditionally (ignores the wakeup flag `NOTIFY`) | all five machine models | deadlock |
//! | a publisher that finds `READY` returns without its RMW on `state` (P1: a plain load decides) | all but `completion_racing_the_worker` | deadlock |
//! | `park`'s flag clear (`swap(RUNNING)`) Relaxed instead of Acquire (P1) | all five | deadlock |
//! | W1 in `send` (`IDLE => READY/RUNNING`) Relaxed instead of AcqRel | all but `completion_racing_the_worker` | causality violation on the owner `UnsafeCell` |
//! | R1 (`park`'s CAS) Relaxed instead of Release | all but `completion_racing_the_worker` | causality violation on the owner `UnsafeCell` |
//! | shutdown (`host.rs`): `release_live` notifies on the decrement from 2 instead of the one that reaches zero (D1) | `shutdown_racing_send` | deadlock |
//!
//! Earlier rows, from the version whose wakeup flag was the scheduler's `NOTIFIED` token and
//! whose publishers used a store→load fence pair (F1/F2, now gone), still describe these
//! models' reach for the parts that did not change:
//!
//! | mutation | model | what loom reported |
//! |---|---|---|
//! | `complete` decrements `inflight` before pushing its answer (C1) | `completion_racing_the_worker` | deadlock |
//! | `publish_handle` ignores `PENDING` (H1) | `send_racing_idle` | deadlock |
//! | `machine_finished` decrements `live` Relaxed instead of Release (D3) | `shutdown_racing_send` | assertion: counted as timed out |
//! | shutdown reads `live` Relaxed instead of Acquire (D3) | `shutdown_racing_send` | assertion: counted as timed out |
//! | D1 fence in `release_live` (`machine_finished`) removed | `shutdown_racing_send` | deadlock (shutdown never notified) |
//! | D1 fence in `shutdown_machines` removed | `shutdown_racing_send` | deadlock |
//!
//! Not caught: concluding "the spawner will unpark" from a plain load of `PENDING` (instead
//! of the RMW in `handle_for_wake`) passes `two_senders_racing_the_handle_publication` at
//! preemption bound 2. The stale read that makes it wrong needs more preemptions than the
//! CI bound; the RMW is a hardening made on review (it costs nothing on the common path,
//! where the handle is long published).
//!
//! The end-to-end version of `shutdown_racing_send` found a real bug while this module was
//! written: shutdown read `live` with Relaxed, so having seen the count reach zero it could
//! still read a machine's state as not complete and report it as timed out (fixed by D3,
//! which the two D3 rows above re-break).

use std::sync::Arc as StdArc;
use std::time::Duration;

use purloin_sched::{Task, TaskStep};

use super::cell::{MachineCell, TaskRef};
use super::{Error, EventKind, Events, HostHandle, Machine, MachineId, Payload, StepOutput, Yield};
use crate::loom::{Arc, AtomicUsize, Condvar, Mutex, Ordering, lock, thread};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Queued,
    Running,
    Parked,
    Done,
}

struct FakeState {
    status: Status,
    notified: bool,
}

/// One stackless task under purloin-sched's token rules (see the module docs).
pub(crate) struct FakeTask {
    st: Mutex<FakeState>,
    cv: Condvar,
}

impl FakeTask {
    fn new() -> StdArc<FakeTask> {
        StdArc::new(FakeTask {
            st: Mutex::new(FakeState { status: Status::Queued, notified: false }),
            cv: Condvar::new(),
        })
    }

    /// `GreenThread::unpark` of a task.
    pub(crate) fn unpark(&self) {
        let mut s = lock(&self.st);
        match s.status {
            Status::Parked => {
                s.status = Status::Queued;
                self.cv.notify_all();
            }
            // Queued or running: a token (sched keeps NOTIFIED through the claim).
            Status::Queued | Status::Running => s.notified = true,
            Status::Done => {}
        }
    }

    /// The worker: steps `cell` until it is done.
    fn run(&self, cell: &MachineCell) {
        loop {
            {
                let mut s = lock(&self.st);
                while s.status == Status::Parked {
                    s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                s.status = Status::Running;
            }
            let step = cell.step();
            let mut s = lock(&self.st);
            match step {
                TaskStep::Wait if s.notified => {
                    s.notified = false;
                    s.status = Status::Queued;
                }
                TaskStep::Wait => s.status = Status::Parked,
                TaskStep::Yield => s.status = Status::Queued,
                TaskStep::Done => {
                    s.status = Status::Done;
                    return;
                }
            }
        }
    }
}

/// Waits for the exit status on a plain thread (as `HostHandle::wait` does) and takes it.
fn wait_exit(cell: &MachineCell) -> Result<Payload, Error> {
    let mut exit = lock(&cell.exit);
    loop {
        if exit.done {
            return exit.result.take().expect("not taken before");
        }
        exit.os_waiters += 1;
        exit = cell.exit_cv.wait(exit).unwrap_or_else(|p| p.into_inner());
        exit.os_waiters -= 1;
    }
}

/// Starts the worker stepping `cell`; publishes the handle before (`early`) or leaves it to
/// the caller.
fn start(cell: &StdArc<MachineCell>, publish: bool) -> (StdArc<FakeTask>, thread::JoinHandle<()>) {
    let task = FakeTask::new();
    if publish {
        cell.publish_handle(TaskRef::Model(task.clone()));
    }
    let (c, t) = (cell.clone(), task.clone());
    let worker = thread::spawn(move || t.run(&c));
    (task, worker)
}

/// Breaks the table ↔ cell cycle (nothing is live any more).
fn clear(host: &HostHandle) {
    let (cancelled, timed_out, unfinished) = host.shared().shutdown_machines(Duration::MAX);
    assert_eq!((cancelled, timed_out, unfinished), (0, 0, 0));
}

/// Yields `ext` with tags 1 and 2 and completes with the sum of the answers.
struct TwoYields {
    steps: Arc<AtomicUsize>,
    sum: u64,
}

impl Machine for TwoYields {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        if self.steps.fetch_add(1, Ordering::Relaxed) == 0 {
            out.yield_command("ext", 1, Payload::empty());
            out.yield_command("ext", 2, Payload::empty());
            return Ok(());
        }
        for e in events {
            self.sum += e.into_result()?.take::<u64>()?;
        }
        out.complete(Payload::new(self.sum));
        Ok(())
    }
}

/// The wakeup flag and "Blocked until the last answer": two answers, from two threads, race
/// each other and the worker that still holds the machine (dispatching, declaring Blocked,
/// being parked by the scheduler). The machine is stepped exactly twice and completes.
#[test]
fn completion_racing_the_worker() {
    loom::model(|| {
        let host = HostHandle::for_model();
        let slot: Arc<(Mutex<Vec<(MachineId, u64)>>, Condvar)> =
            Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let s2 = slot.clone();
        host.register_inline("ext", move |y: Yield| {
            let (id, tag, _) = y.into_parts();
            lock(&s2.0).push((id, tag));
            s2.1.notify_all();
        });
        let steps = Arc::new(AtomicUsize::new(0));
        let cell = host.adopt_for_model(Box::new(TwoYields { steps: steps.clone(), sum: 0 }));
        let (_task, worker) = start(&cell, true);
        let await_yields = |slot: &(Mutex<Vec<(MachineId, u64)>>, Condvar)| {
            let mut g = lock(&slot.0);
            while g.len() < 2 {
                g = slot.1.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            g[0].0
        };
        // The racer answers through the cell directly (as dispatch does for a command with no
        // handler); `complete_yield` would take the id table's shard lock, which serialises
        // it with main's answer and hides the ordering of push and decrement (C1).
        let (c2, s3) = (cell.clone(), slot.clone());
        let racer = thread::spawn(move || {
            await_yields(&s3);
            if let Some(w) = c2.complete(2, Ok(Payload::new(2u64))).unwrap() {
                w.wake();
            }
        });
        let id = await_yields(&slot);
        host.complete_yield(id, 1, Ok(Payload::new(1u64))).unwrap();
        assert_eq!(wait_exit(&cell).unwrap().take::<u64>().unwrap(), 3);
        racer.join().unwrap();
        worker.join().unwrap();
        assert_eq!(steps.load(Ordering::Relaxed), 2, "stepped for the yields and the last answer");
        clear(&host);
    });
}

/// Goes Idle with no events; completes with the first message (or fails on a cancel).
struct Once;

impl Machine for Once {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        match events.next() {
            Some(e) if e.kind == EventKind::Cancel => out.fail(e.error.unwrap()),
            Some(e) => out.complete(e.data),
            None => out.idle(),
        }
        Ok(())
    }
}

/// A send from another thread races the step that finds no events and goes Idle, and the
/// scheduler parking the task — and the spawner publishing the task's handle (H1: the first
/// step may run, and be woken, before the handle is known).
#[test]
fn send_racing_idle() {
    loom::model(|| {
        let host = HostHandle::for_model();
        let cell = host.adopt_for_model(Box::new(Once));
        let id = cell.id;
        let (task, worker) = start(&cell, false);
        let h = host.clone();
        let sender = thread::spawn(move || h.send(id, Payload::new(5u64)).unwrap());
        cell.publish_handle(TaskRef::Model(task));
        assert_eq!(wait_exit(&cell).unwrap().take::<u64>().unwrap(), 5);
        sender.join().unwrap();
        worker.join().unwrap();
        clear(&host);
    });
}

/// Completes with the sum of the first two messages it gets.
struct SumTwo {
    got: Vec<u64>,
}

impl Machine for SumTwo {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        for e in events {
            self.got.push(e.data.take::<u64>()?);
        }
        if self.got.len() >= 2 {
            out.complete(Payload::new(self.got.iter().sum::<u64>()));
        } else {
            out.idle();
        }
        Ok(())
    }
}

/// Two senders race each other, the first step, and the spawner publishing the handle (H1):
/// a sender that finds the handle unpublished leaves the wake-up to the spawner, and must
/// not conclude that from a stale `PENDING` after the spawner already unparked.
#[test]
fn two_senders_racing_the_handle_publication() {
    loom::model(|| {
        let host = HostHandle::for_model();
        let cell = host.adopt_for_model(Box::new(SumTwo { got: Vec::new() }));
        let id = cell.id;
        let (task, worker) = start(&cell, false);
        let senders: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|v| {
                let h = host.clone();
                thread::spawn(move || h.send(id, Payload::new(v)).unwrap())
            })
            .collect();
        cell.publish_handle(TaskRef::Model(task));
        assert_eq!(wait_exit(&cell).unwrap().take::<u64>().unwrap(), 3);
        for s in senders {
            s.join().unwrap();
        }
        worker.join().unwrap();
        clear(&host);
    });
}

/// On its first step sends `v` to `to` — an inline hand-off when `to` is Idle: the worker
/// stepping this machine then steps `to` itself — and completes.
struct Forward {
    to: MachineId,
    v: u64,
}

impl Machine for Forward {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, _events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        out.host().send(self.to, Payload::new(self.v)).expect("the receiver waits for two");
        out.complete(Payload::empty());
        Ok(())
    }
}

/// The inline hand-off: a step sends to a machine that may be Idle (its task parked), wins it
/// and steps it on its own worker, while a sender on another thread races it (finding it
/// Idle, Ready, Running, or handed off). The receiver's steps never overlap (the machine is
/// a `&mut`; loom reports concurrent access to the owner cell), it sees both messages, and
/// its task ends once it completes — on its own worker or inline on the other.
#[test]
fn inline_hand_off_racing_a_sender() {
    loom::model(|| {
        let host = HostHandle::for_model();
        let rx = host.adopt_for_model(Box::new(SumTwo { got: Vec::new() }));
        let to = rx.id;
        let tx = host.adopt_for_model(Box::new(Forward { to, v: 1 }));
        let (_rt, rw) = start(&rx, true);
        let (_tt, tw) = start(&tx, true);
        let h = host.clone();
        let sender = thread::spawn(move || h.send(to, Payload::new(2u64)).unwrap());
        assert_eq!(wait_exit(&rx).unwrap().take::<u64>().unwrap(), 3);
        assert!(wait_exit(&tx).is_ok());
        sender.join().unwrap();
        tw.join().unwrap();
        rw.join().unwrap();
        clear(&host);
    });
}

/// Counts drops (exactly-once ownership of a message).
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Like `Once`, and records closes and any step after close.
struct Guarded {
    closed: Arc<AtomicUsize>,
    after_close: Arc<AtomicUsize>,
}

impl Machine for Guarded {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        if self.closed.load(Ordering::Relaxed) > 0 {
            self.after_close.fetch_add(1, Ordering::Relaxed);
        }
        Once.step(events, out)
    }

    fn close(&mut self) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Shutdown (cancel every machine, wait, close, report) races a send to an Idle machine: the
/// message is delivered or refused with the message handed back, dropped exactly once; the
/// machine is closed exactly once and never stepped after; the report counts it as
/// cancelled, never as timed out.
#[test]
fn shutdown_racing_send() {
    loom::model(|| {
        let host = HostHandle::for_model();
        let closed = Arc::new(AtomicUsize::new(0));
        let after_close = Arc::new(AtomicUsize::new(0));
        let p = Guarded { closed: closed.clone(), after_close: after_close.clone() };
        let cell = host.adopt_for_model(Box::new(p));
        let id = cell.id;
        let (_task, worker) = start(&cell, true);
        let drops = Arc::new(AtomicUsize::new(0));
        let (h, d2) = (host.clone(), drops.clone());
        let sender = thread::spawn(move || match h.send(id, Payload::new(Counted(d2))) {
            Ok(()) => true,
            Err(e) => {
                drop(e.into_payload());
                false
            }
        });
        // No wait ends by time under loom, so the timeout never decides the outcome here.
        let (cancelled, timed_out, unfinished) =
            host.shared().shutdown_machines(Duration::from_secs(3600));
        let delivered = sender.join().unwrap();
        worker.join().unwrap();
        assert_eq!((timed_out, unfinished), (0, 0));
        assert!(cancelled <= 1);
        if !delivered {
            // Refused: the machine had completed (on the cancellation) or was forgotten.
            assert_eq!(cancelled, 1);
        }
        drop(cell);
        assert_eq!(drops.load(Ordering::Relaxed), 1, "the message is dropped exactly once");
        assert_eq!(closed.load(Ordering::Relaxed), 1, "closed exactly once");
        assert_eq!(after_close.load(Ordering::Relaxed), 0, "no step after close");
    });
}
