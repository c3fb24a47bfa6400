//! End-to-end loom models of the machine host: the real host on a real one-worker runtime
//! (the worker is a loom thread; the scheduler's atomics and locks are loom's). They check
//! that the host and purloin-sched compose: the machine protocol's own races are modelled,
//! much more cheaply, against an emulation of the scheduler's task rules in
//! `runtime/src/machine/models.rs`. A model of the whole runtime with a racing thread costs
//! many minutes at preemption bound 2, so these keep to the main thread and the worker.
//!
//! Run with `cargo xtask loom -p purloin`. A lost wake-up shows up as a deadlock (every loom
//! thread blocked), which loom reports.
//!
//! Mutation checks (made in `runtime/src/machine/cell.rs`, run, seen to fail, reverted), from
//! the version whose wakeup flag was the scheduler's `NOTIFIED` token: with `wake_decision`
//! returning `None` for `RUNNING` (no wakeup flag), or `publish_handle` ignoring `PENDING`,
//! `a_wake_during_the_first_step_before_the_handle_is_published` deadlocked (main waiting for
//! the exit status, the worker parked). The wakeup flag is now the `NOTIFY` bit of the
//! machine's own state word; its mutation checks are in `runtime/src/machine/models.rs`.
#![cfg(loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use purloin::machine::{Error, ErrorKind, EventKind, Events, Host, Machine, Payload, StepOutput};
use purloin::runtime::Builder;

fn host() -> Host {
    Host::new(Builder::new().workers(1).monitor(false).build().expect("runtime"))
}

/// On its first step it sends itself a message (so it must be woken while the worker still
/// runs it: the wakeup flag) and goes Idle; completes with the
/// first message, or fails on a cancellation.
struct SelfSend {
    self_send: bool,
    closes: Arc<AtomicUsize>,
}

impl Machine for SelfSend {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        if std::mem::take(&mut self.self_send) {
            out.host().send(out.machine_id(), Payload::new(3u64)).expect("own id is live");
        }
        match events.next() {
            Some(e) if e.kind == EventKind::Cancel => out.fail(e.error.unwrap()),
            Some(e) => out.complete(e.data),
            None => out.idle(),
        }
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::Relaxed);
    }
}

/// The task's first step may run before the spawner has published its handle, and wakes
/// itself during that step: the wakeup flag makes the worker step it again before parking it
/// (and a wake after it parked is deferred to the spawner, H1); either way the machine runs
/// again and completes.
#[test]
fn a_wake_during_the_first_step_before_the_handle_is_published() {
    loom::model(|| {
        let host = host();
        let closes = Arc::new(AtomicUsize::new(0));
        let p = SelfSend { self_send: true, closes: closes.clone() };
        let id = host.spawn_machine(p, "self", Payload::empty()).unwrap();
        assert_eq!(host.wait(id).unwrap().take::<u64>().unwrap(), 3);
        let r = host.shutdown(Duration::from_secs(1));
        assert_eq!((r.cancelled, r.timed_out, r.unfinished), (0, 0, 0));
        assert_eq!(closes.load(Ordering::Relaxed), 1);
    });
}

/// Shutdown racing the machine's first step: the machine is queued, running, or Idle and
/// parked when the Cancel event arrives; in each case it is stepped with the Cancel, fails
/// with it, is closed once, and the report counts it as cancelled.
#[test]
fn shutdown_cancels_a_machine_wherever_it_is() {
    loom::model(|| {
        let host = host();
        let closes = Arc::new(AtomicUsize::new(0));
        let p = SelfSend { self_send: false, closes: closes.clone() };
        let id = host.spawn_machine(p, "idle", Payload::empty()).unwrap();
        let h = host.handle();
        let r = host.shutdown(Duration::from_secs(1));
        assert_eq!((r.cancelled, r.timed_out, r.unfinished), (1, 0, 0), "{r:?}");
        assert_eq!(r.runtime.unfinished, 0);
        assert_eq!(closes.load(Ordering::Relaxed), 1);
        // The result was dropped with the host; the id is unknown now.
        assert_eq!(h.wait(id).unwrap_err().kind(), ErrorKind::UnknownMachine);
    });
}
