//! Shutdown: cancellation, the timeout and closing, no step after close, nothing leaked;
//! panics in steps fail only their machine.
#![cfg(not(loom))]

mod machine_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use machine_common::{Counted, DropCounter, host, watchdog};
use purloin::machine::{Error, ErrorKind, EventKind, Events, Machine, Payload, StepOutput, Yield};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Waits for messages; completes on Cancel.
    Idle,
    /// Waits for a yield that is never answered; completes on Cancel.
    Blocked,
    /// Ignores Cancel: closed by the host after the timeout.
    Stubborn,
}

struct Worker {
    kind: Kind,
    steps: Arc<AtomicUsize>,
    closed: Arc<AtomicBool>,
    closes: Arc<AtomicUsize>,
    stepped_after_close: Arc<AtomicUsize>,
    first: bool,
    _drop: Counted,
}

impl Machine for Worker {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        if self.closed.load(Ordering::SeqCst) {
            self.stepped_after_close.fetch_add(1, Ordering::SeqCst);
        }
        self.steps.fetch_add(1, Ordering::SeqCst);
        if self.first && self.kind == Kind::Blocked {
            self.first = false;
            out.yield_command("hang", 1, Payload::empty());
            return Ok(());
        }
        self.first = false;
        for e in events {
            if e.kind == EventKind::Cancel && self.kind != Kind::Stubborn {
                let why = e.error.expect("a cancel says why");
                assert_eq!(why.kind(), ErrorKind::Cancelled);
                out.fail(why);
                return Ok(());
            }
        }
        out.idle();
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
        self.closed.store(true, Ordering::SeqCst);
    }
}

#[test]
fn shutdown_cancels_then_closes_and_reports() {
    let _w = watchdog("shutdown", Duration::from_secs(120));
    let host = host(2);
    // A handler that never answers: parks its green thread until the runtime unwinds it.
    host.register("hang", |y: Yield| {
        let _keep = y;
        loop {
            purloin::park();
        }
    });
    let machine_drops = DropCounter::default();
    let message_drops = DropCounter::default();
    let steps = Arc::new(AtomicUsize::new(0));
    let closes = Arc::new(AtomicUsize::new(0));
    let after_close = Arc::new(AtomicUsize::new(0));
    let mut ids = Vec::new();
    for (kind, n) in [(Kind::Idle, 50), (Kind::Blocked, 20), (Kind::Stubborn, 10)] {
        for _ in 0..n {
            let w = Worker {
                kind,
                steps: steps.clone(),
                closed: Arc::new(AtomicBool::new(false)),
                closes: closes.clone(),
                stepped_after_close: after_close.clone(),
                first: true,
                _drop: machine_drops.token(),
            };
            ids.push((kind, host.spawn_machine(w, "w", Payload::empty()).unwrap()));
        }
    }
    // Let every machine take its first step (Idle / Blocked).
    while steps.load(Ordering::SeqCst) < 80 {
        std::thread::yield_now();
    }
    // Queued messages are delivered or dropped, never leaked.
    for (_, id) in &ids {
        host.send(*id, Payload::new(message_drops.token())).unwrap();
    }
    // Waiters on a stubborn machine: a plain thread and a green thread.
    let stubborn = ids.iter().find(|(k, _)| *k == Kind::Stubborn).unwrap().1;
    let h = host.handle();
    let os_waiter = std::thread::spawn(move || h.wait(stubborn));
    let h = host.handle();
    let stubborn2 = ids.iter().rfind(|(k, _)| *k == Kind::Stubborn).unwrap().1;
    let green_waiter = host.runtime().spawn(move || h.wait(stubborn2));
    let handle = host.handle();

    let report = host.shutdown(Duration::from_millis(300));
    assert_eq!(report.cancelled, 70, "{report:?}");
    assert_eq!(report.timed_out, 10, "{report:?}");
    assert_eq!(report.unfinished, 0, "{report:?}");
    // The handler green threads were unwound by the runtime's shutdown.
    assert_eq!(report.runtime.unfinished, 0, "{report:?}");

    let e = os_waiter.join().unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Closed);
    assert!(e.message().contains("closed by the host's shutdown"), "{e}");
    assert_eq!(green_waiter.join().unwrap().unwrap_err().kind(), ErrorKind::Closed);

    assert_eq!(closes.load(Ordering::SeqCst), 80, "close exactly once per machine");
    assert_eq!(after_close.load(Ordering::SeqCst), 0, "no step after close");
    assert_eq!(machine_drops.drops(), 80, "every machine dropped exactly once");
    assert_eq!(message_drops.drops(), 80, "every message dropped exactly once");

    // The handle outlives the host: everything is an error value now.
    let (_, id) = ids[0];
    assert!(handle.send(id, Payload::empty()).is_err());
    assert_eq!(handle.wait(id).unwrap_err().kind(), ErrorKind::UnknownMachine);
    assert_eq!(handle.live_machines(), 0);
}

/// Steps forever (`Continue`) until cancelled, then panics or completes depending on its id.
struct Spinner {
    id: usize,
    steps: usize,
}

impl Machine for Spinner {
    fn init(&mut self, _method: &str, input: Payload) -> Result<(), Error> {
        self.id = input.take::<usize>()?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        self.steps += 1;
        if self.id.is_multiple_of(3) && self.steps == 2 {
            panic!("spinner {} panics on its second step", self.id);
        }
        if events.has_cancel() {
            out.complete(Payload::new(self.id));
        } else if self.steps < 50 {
            out.continue_();
        } else {
            out.idle();
        }
        Ok(())
    }
}

#[test]
fn panics_in_steps_fail_only_their_machine() {
    let _w = watchdog("panics", Duration::from_secs(120));
    let host = host(2);
    let ids: Vec<_> = (0..90usize)
        .map(|i| host.spawn_machine(Spinner { id: 0, steps: 0 }, "s", Payload::new(i)).unwrap())
        .collect();
    for (i, id) in ids.iter().enumerate() {
        if i.is_multiple_of(3) {
            let e = host.wait(*id).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Panicked);
            assert!(e.message().contains(&format!("spinner {i} panics")), "{e}");
        } else {
            host.cancel(*id).unwrap();
            assert_eq!(host.wait(*id).unwrap().downcast::<usize>().unwrap(), i);
        }
    }
    let report = host.shutdown(Duration::from_secs(1));
    assert_eq!((report.cancelled, report.timed_out, report.unfinished), (0, 0, 0));
}

#[test]
fn spawning_during_and_after_shutdown_is_an_error() {
    let _w = watchdog("spawn after shutdown", Duration::from_secs(60));
    let host = host(1);
    let handle = host.handle();
    // A machine that spawns a child every time it is woken (including by its Cancel).
    struct Spawner {
        last: Option<std::io::Error>,
    }
    impl Machine for Spawner {
        fn init(&mut self, _m: &str, _i: Payload) -> Result<(), Error> {
            Ok(())
        }
        fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
            let cancelled = events.has_cancel();
            if cancelled {
                let child = Spawner { last: None };
                self.last = out.host().spawn_machine(child, "s", Payload::empty()).err();
                let e = self.last.take().expect("spawn during shutdown fails");
                assert!(e.to_string().contains("shutting down"), "{e}");
                out.complete(Payload::empty());
            } else {
                out.idle();
            }
            Ok(())
        }
    }
    host.spawn_machine(Spawner { last: None }, "s", Payload::empty()).unwrap();
    let report = host.shutdown(Duration::from_secs(2));
    assert_eq!(report.cancelled, 1, "{report:?}");
    assert_eq!(report.timed_out, 0, "{report:?}");
    let e = handle.spawn_machine(Spawner { last: None }, "s", Payload::empty()).unwrap_err();
    assert!(e.to_string().contains("outside the host's runtime"), "{e}");
}
