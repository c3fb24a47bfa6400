//! The host's behaviour: entry points, yields answered out of order, messages, errors as
//! values, waits from green and plain threads.
#![cfg(not(loom))]

mod machine_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use machine_common::{DropCounter, host, watchdog};
use purloin::machine::{
    CompleteErrorKind, Error, ErrorKind, Event, EventKind, Events, Machine, MachineId,
    MachineState, Payload, SendErrorKind, Status, StepOutput, Yield,
};

/// A calculator with three entry points; counts its init/close calls.
struct Calc {
    op: Option<&'static str>,
    args: (i64, i64),
    closes: Arc<AtomicUsize>,
}

impl Calc {
    fn new(closes: &Arc<AtomicUsize>) -> Calc {
        Calc { op: None, args: (0, 0), closes: closes.clone() }
    }
}

impl Machine for Calc {
    fn init(&mut self, method: &str, input: Payload) -> Result<(), Error> {
        self.op = Some(match method {
            "add" => "add",
            "mul" => "mul",
            "neg" => "neg",
            other => return Err(Error::unknown_method(other, &["add", "mul", "neg"])),
        });
        self.args = input.take::<(i64, i64)>()?;
        Ok(())
    }

    fn step(&mut self, _events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        let (a, b) = self.args;
        let r = match self.op.expect("init ran") {
            "add" => a + b,
            "mul" => a * b,
            _ => -a,
        };
        out.complete(Payload::new(r));
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_machine_with_several_entry_points() {
    let _w = watchdog("entry points", Duration::from_secs(60));
    let host = host(2);
    let closes = Arc::new(AtomicUsize::new(0));
    let add = host.spawn_machine(Calc::new(&closes), "add", Payload::new((3i64, 4i64))).unwrap();
    let mul = host.spawn_machine(Calc::new(&closes), "mul", Payload::new((3i64, 4i64))).unwrap();
    let neg = host.spawn_machine(Calc::new(&closes), "neg", Payload::new((3i64, 0i64))).unwrap();
    assert_eq!(host.wait(add).unwrap().downcast::<i64>().unwrap(), 7);
    assert_eq!(host.wait(mul).unwrap().downcast::<i64>().unwrap(), 12);
    assert_eq!(host.wait(neg).unwrap().downcast::<i64>().unwrap(), -3);

    // An unknown entry point: a clear error from spawn_machine, the machine never runs, and
    // it is closed.
    let err =
        host.spawn_machine(Calc::new(&closes), "div", Payload::new((1i64, 1i64))).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let inner = err.get_ref().unwrap().downcast_ref::<Error>().unwrap();
    assert_eq!(inner.kind(), ErrorKind::UnknownMethod);
    assert!(err.to_string().contains("unknown method `div`"), "{err}");
    assert!(err.to_string().contains("`add`, `mul`, `neg`"), "{err}");

    // Bad input for a known method is init's error too.
    let err = host.spawn_machine(Calc::new(&closes), "add", Payload::new("x")).unwrap_err();
    assert!(err.to_string().contains("expected a payload of type (i64, i64)"), "{err}");
    assert_eq!(closes.load(Ordering::SeqCst), 5);
    host.shutdown(Duration::from_secs(1));
}

/// Yields `n` commands at once and completes with the tags of the answers in the order they
/// arrived; counts its steps.
struct FanOut {
    n: u64,
    steps: Arc<AtomicUsize>,
    status_idle: bool,
    got: Vec<u64>,
}

impl Machine for FanOut {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        let step = self.steps.fetch_add(1, Ordering::SeqCst);
        if step == 0 {
            assert!(events.is_empty(), "the first step has no events");
            for tag in 1..=self.n {
                out.yield_command("gather", tag, Payload::new(tag * 10));
            }
            if self.status_idle {
                out.idle();
            }
            return Ok(());
        }
        for e in events {
            assert_eq!(e.kind, EventKind::YieldComplete);
            let v = e.into_result()?.take::<u64>()?;
            self.got.push(v / 10);
        }
        if self.got.len() as u64 == self.n {
            out.complete(Payload::new(core::mem::take(&mut self.got)));
        } else {
            out.idle();
        }
        Ok(())
    }
}

/// Collects the yields of `gather`; when all `n` are in, answers them in reverse tag order
/// (from the last handler's green thread).
fn register_reverse_gather(host: &purloin::machine::HostHandle, n: usize) {
    let parked: Arc<Mutex<Vec<Yield>>> = Arc::default();
    host.register("gather", move |y: Yield| {
        let mut all = parked.lock().unwrap();
        all.push(y);
        if all.len() == n {
            let mut ys: Vec<Yield> = all.drain(..).collect();
            drop(all);
            ys.sort_by_key(|y| core::cmp::Reverse(y.tag()));
            for mut y in ys {
                let v = y.take_data();
                y.complete(Ok(v)).unwrap();
            }
        }
    });
}

#[test]
fn a_blocked_machine_completes_when_all_answers_arrive_out_of_order() {
    let _w = watchdog("out of order", Duration::from_secs(60));
    let host = host(2);
    register_reverse_gather(&host, 5);
    let steps = Arc::new(AtomicUsize::new(0));
    let p = FanOut { n: 5, steps: steps.clone(), status_idle: false, got: Vec::new() };
    let id = host.spawn_machine(p, "run", Payload::empty()).unwrap();
    let order = host.wait(id).unwrap().downcast::<Vec<u64>>().unwrap();
    assert_eq!(order, [5, 4, 3, 2, 1], "answers are delivered in arrival order");
    // Blocked: one step to yield, one step when the last answer arrived (the first four
    // answers do not step the machine, whatever the wakeup flag did underneath).
    assert_eq!(steps.load(Ordering::SeqCst), 2);
    host.shutdown(Duration::from_secs(1));
}

#[test]
fn an_idle_machine_with_yields_in_flight_is_woken_by_each_answer() {
    let _w = watchdog("idle answers", Duration::from_secs(60));
    let host = host(2);
    // Answers from a plain thread, one at a time, waiting for the machine to go Idle again
    // between answers so that each answer is a separate wake-up.
    let (tx, rx) = std::sync::mpsc::channel::<(MachineId, u64)>();
    host.register("gather", move |y: Yield| {
        let (id, tag, _) = y.into_parts();
        tx.send((id, tag)).unwrap();
    });
    let steps = Arc::new(AtomicUsize::new(0));
    let p = FanOut { n: 3, steps: steps.clone(), status_idle: true, got: Vec::new() };
    let id = host.spawn_machine(p, "run", Payload::empty()).unwrap();
    let mut pending: Vec<(MachineId, u64)> = (0..3).map(|_| rx.recv().unwrap()).collect();
    pending.sort_by_key(|(_, t)| *t);
    for (i, (id2, tag)) in pending.into_iter().enumerate() {
        assert_eq!(id2, id);
        while host.status(id) != Some(MachineState::Idle) {
            std::thread::yield_now();
        }
        assert_eq!(steps.load(Ordering::SeqCst), 1 + i);
        host.complete_yield(id, tag, Ok(Payload::new(tag * 10))).unwrap();
        // Each answer is delivered exactly once.
        let again = host.complete_yield(id, tag, Ok(Payload::empty()));
        let kind = again.unwrap_err().kind();
        assert!(matches!(kind, CompleteErrorKind::NotInFlight | CompleteErrorKind::Finished));
    }
    assert_eq!(host.wait(id).unwrap().downcast::<Vec<u64>>().unwrap(), [1, 2, 3]);
    assert_eq!(steps.load(Ordering::SeqCst), 4);
    host.shutdown(Duration::from_secs(1));
}

/// Echoes messages back to the id inside them until it receives `None`.
struct Echo {
    seen: usize,
}

impl Machine for Echo {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        for e in events {
            assert_eq!(e.kind, EventKind::Message);
            match e.data.take::<Option<(MachineId, u64)>>()? {
                Some((reply_to, v)) => {
                    self.seen += 1;
                    out.host().send(reply_to, Payload::new(Some((out.machine_id(), v + 1)))).ok();
                }
                None => {
                    out.complete(Payload::new(self.seen));
                    return Ok(());
                }
            }
        }
        out.idle();
        Ok(())
    }
}

#[test]
fn messages_route_by_machine_id_and_errors_are_values() {
    let _w = watchdog("messages", Duration::from_secs(60));
    let host = host(2);
    let a = host.spawn_machine(Echo { seen: 0 }, "echo", Payload::empty()).unwrap();
    let b = host.spawn_machine(Echo { seen: 0 }, "echo", Payload::empty()).unwrap();
    // a and b bounce a counter: b receives 0 (from "a"), replies 1 to a, ... until a
    // machine's send fails because the other completed.
    host.send(b, Payload::new(Some((a, 0u64)))).unwrap();
    host.send(a, Payload::new(None::<(MachineId, u64)>)).unwrap();
    let seen_a = host.wait(a).unwrap().downcast::<usize>().unwrap();
    host.send(b, Payload::new(None::<(MachineId, u64)>)).unwrap();
    let seen_b = host.wait(b).unwrap().downcast::<usize>().unwrap();
    assert!(seen_b >= 1 && seen_a + 1 >= seen_b, "a {seen_a}, b {seen_b}");

    // A finished (and waited) id is unknown; the message comes back.
    let err = host.send(a, Payload::new(7u32)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownMachine);
    assert!(err.to_string().contains("no such machine"), "{err}");
    assert_eq!(err.into_payload().downcast::<u32>().unwrap(), 7);

    // A finished id whose result was not taken yet: Finished.
    let c = host.spawn_machine(Echo { seen: 0 }, "echo", Payload::empty()).unwrap();
    host.send(c, Payload::new(None::<(MachineId, u64)>)).unwrap();
    while host.status(c) != Some(MachineState::Complete) {
        std::thread::yield_now();
    }
    let err = host.send(c, Payload::new(1u8)).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Finished);
    assert!(err.to_string().contains("has completed"), "{err}");
    assert_eq!(err.into_payload().downcast::<u8>().unwrap(), 1, "the message comes back");
    assert_eq!(host.wait(c).unwrap().downcast::<usize>().unwrap(), 0);
    // The result is taken once.
    let again = host.wait(c).unwrap_err();
    assert_eq!(again.kind(), ErrorKind::UnknownMachine);

    // An id of another host is unknown here, never misrouted.
    let other = machine_common::host(1);
    let d = other.spawn_machine(Echo { seen: 0 }, "echo", Payload::empty()).unwrap();
    let err = host.send(d, Payload::empty()).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownMachine);
    other.cancel(d).unwrap();
    other.shutdown(Duration::from_secs(1));
    host.shutdown(Duration::from_secs(1));
}

/// Runs a scripted sequence of misbehaviours, one per entry point.
struct Misbehave {
    mode: String,
    stepped: bool,
}

impl Machine for Misbehave {
    fn init(&mut self, method: &str, _input: Payload) -> Result<(), Error> {
        self.mode = method.to_string();
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        let first = !self.stepped;
        self.stepped = true;
        match self.mode.as_str() {
            "wait-nothing" => out.wait_yields(),
            "dup-tags" => {
                out.yield_command("slow", 1, Payload::empty());
                out.yield_command("slow", 1, Payload::empty());
            }
            "no-handler" if first => out.yield_command("nobody", 9, Payload::empty()),
            "lost" if first => out.yield_command("forgetful", 3, Payload::empty()),
            "wait-in-step" => {
                let e = out.host().wait(out.machine_id()).unwrap_err();
                out.fail(e);
            }
            "fail" => return Err(Error::new("the step said no")),
            "panic" => panic!("step exploded"),
            _ => {
                // Second step of no-handler / lost: report the answer's error.
                let e: Event = events.next().expect("the answer");
                assert_eq!(e.kind, EventKind::YieldComplete);
                out.fail(e.error.expect("an error answer"));
            }
        }
        Ok(())
    }
}

#[test]
fn broken_machines_fail_with_clear_errors_and_the_host_keeps_running() {
    let _w = watchdog("misbehave", Duration::from_secs(60));
    let host = host(2);
    host.register("forgetful", |y: Yield| drop(y));
    host.register("slow", |y: Yield| {
        let _ = y.complete(Ok(Payload::empty()));
    });
    let run = |mode: &str| {
        let id = host
            .spawn_machine(
                Misbehave { mode: String::new(), stepped: false },
                mode,
                Payload::empty(),
            )
            .unwrap();
        host.wait(id).unwrap_err()
    };
    let e = run("wait-nothing");
    assert_eq!(e.kind(), ErrorKind::Protocol);
    assert!(e.message().contains("no yields in flight"), "{e}");
    let e = run("dup-tags");
    assert_eq!(e.kind(), ErrorKind::Protocol);
    assert!(e.message().contains("tag 1"), "{e}");
    let e = run("no-handler");
    assert_eq!(e.kind(), ErrorKind::NoHandler);
    assert!(e.message().contains("HostHandle::register(\"nobody\""), "{e}");
    let e = run("lost");
    assert_eq!(e.kind(), ErrorKind::HandlerLost);
    assert!(e.message().contains("forgetful"), "{e}");
    let e = run("wait-in-step");
    assert_eq!(e.kind(), ErrorKind::WouldBlock);
    let e = run("fail");
    assert_eq!(e.kind(), ErrorKind::Failed);
    assert_eq!(e.message(), "the step said no");
    let e = run("panic");
    assert_eq!(e.kind(), ErrorKind::Panicked);
    assert!(e.message().contains("step exploded"), "{e}");

    // The host and its runtime still work.
    let closes = Arc::new(AtomicUsize::new(0));
    let id = host.spawn_machine(Calc::new(&closes), "add", Payload::new((1i64, 1i64))).unwrap();
    assert_eq!(host.wait(id).unwrap().downcast::<i64>().unwrap(), 2);
    assert_eq!(host.runtime().spawn(|| 5).join().unwrap(), 5);
    let report = host.shutdown(Duration::from_secs(1));
    assert_eq!((report.cancelled, report.timed_out, report.unfinished), (0, 0, 0));
}

#[test]
fn complete_yield_errors_are_values() {
    let _w = watchdog("complete errors", Duration::from_secs(60));
    let host = host(1);
    let (tx, rx) = std::sync::mpsc::channel::<(MachineId, u64)>();
    host.register("gather", move |y: Yield| {
        let (id, tag, _) = y.into_parts();
        tx.send((id, tag)).unwrap();
    });
    let steps = Arc::new(AtomicUsize::new(0));
    let p = FanOut { n: 1, steps, status_idle: false, got: Vec::new() };
    let id = host.spawn_machine(p, "run", Payload::empty()).unwrap();
    let (_, tag) = rx.recv().unwrap();
    let e = host.complete_yield(id, 99, Ok(Payload::empty())).unwrap_err();
    assert_eq!(e.kind(), CompleteErrorKind::NotInFlight);
    assert!(e.to_string().contains("exactly once"), "{e}");
    host.complete_yield(id, tag, Ok(Payload::new(tag * 10))).unwrap();
    assert_eq!(host.wait(id).unwrap().downcast::<Vec<u64>>().unwrap(), [1]);
    let e = host.complete_yield(id, tag, Ok(Payload::empty())).unwrap_err();
    assert_eq!(e.kind(), CompleteErrorKind::UnknownMachine);
    host.shutdown(Duration::from_secs(1));
}

/// Completes after a `tick` yield answered by an inline handler; checks `Continue`.
struct Ticker {
    left: u32,
    continues: u32,
}

impl Machine for Ticker {
    fn init(&mut self, _method: &str, input: Payload) -> Result<(), Error> {
        self.left = input.take::<u32>()?;
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        for e in events {
            let n = e.into_result()?.take::<u32>()?;
            self.left -= n;
        }
        if self.left == 0 {
            out.complete(Payload::new(self.continues));
        } else if self.continues < 3 {
            self.continues += 1;
            out.set_status(Status::Continue);
        } else {
            out.yield_command("tick", u64::from(self.left), Payload::empty());
        }
        Ok(())
    }
}

#[test]
fn inline_handlers_and_continue() {
    let _w = watchdog("inline", Duration::from_secs(60));
    let host = host(2);
    host.register_inline("tick", |y: Yield| {
        let _ = y.complete(Ok(Payload::new(1u32)));
    });
    let id =
        host.spawn_machine(Ticker { left: 0, continues: 0 }, "t", Payload::new(50u32)).unwrap();
    assert_eq!(host.wait(id).unwrap().downcast::<u32>().unwrap(), 3);
    host.shutdown(Duration::from_secs(1));
}

/// Idle until a message; completes with it.
struct Inbox;

impl Machine for Inbox {
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

#[test]
fn waits_from_green_threads_timed_waits_and_detach() {
    let _w = watchdog("waits", Duration::from_secs(60));
    let host = host(2);
    let id = host.spawn_machine(Inbox, "in", Payload::empty()).unwrap();
    let e = host.wait_timeout(id, Duration::from_millis(20)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    // A green thread waits (parks) while another sends.
    let h = host.handle();
    let waiter = host.runtime().spawn(move || h.wait(id).map(|p| p.downcast::<u8>().unwrap()));
    let h = host.handle();
    let timed = host.runtime().spawn(move || h.wait_timeout(id, Duration::from_millis(10)));
    assert_eq!(timed.join().unwrap().unwrap_err().kind(), ErrorKind::TimedOut);
    host.send(id, Payload::new(9u8)).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), 9);

    // Detached: the result is dropped at completion and the id forgotten.
    let drops = DropCounter::default();
    let id = host.spawn_machine(Inbox, "in", Payload::empty()).unwrap();
    host.detach(id).unwrap();
    host.send(id, Payload::new(drops.token())).unwrap();
    while host.status(id).is_some() {
        std::thread::yield_now();
    }
    assert_eq!(drops.drops(), 1);
    assert_eq!(host.wait(id).unwrap_err().kind(), ErrorKind::UnknownMachine);

    // Cancel from the API.
    let id = host.spawn_machine(Inbox, "in", Payload::empty()).unwrap();
    host.cancel(id).unwrap();
    assert_eq!(host.wait(id).unwrap_err().kind(), ErrorKind::Cancelled);
    host.shutdown(Duration::from_secs(1));
}

/// Spawns `n` children from its step (each an `Inbox`), messages them, and sums their
/// answers, which come back via a handler that waits for each child on a green thread.
struct Parent {
    n: u64,
    sum: u64,
    answered: u64,
}

impl Machine for Parent {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        if self.answered == 0 && events.is_empty() && self.sum == 0 {
            for i in 0..self.n {
                let child = out
                    .host()
                    .spawn_machine(Inbox, "in", Payload::empty())
                    .map_err(|e| Error::new(e.to_string()))?;
                out.host().send(child, Payload::new(i)).map_err(|e| Error::new(e.to_string()))?;
                out.yield_command("join", i, Payload::new(child));
            }
            return Ok(());
        }
        for e in events {
            self.sum += e.into_result()?.take::<u64>()?;
            self.answered += 1;
        }
        if self.answered == self.n {
            out.complete(Payload::new(self.sum));
        } else {
            out.wait_yields();
        }
        Ok(())
    }
}

#[test]
fn machines_spawn_machines_and_handlers_wait_for_them() {
    let _w = watchdog("children", Duration::from_secs(60));
    let host = host(2);
    host.register("join", |mut y: Yield| {
        let child = y.take_data().take::<MachineId>().unwrap();
        let r = y.host().wait(child);
        let _ = y.complete(r);
    });
    let id = host.spawn_machine(Parent { n: 20, sum: 0, answered: 0 }, "p", Payload::empty());
    assert_eq!(host.wait(id.unwrap()).unwrap().downcast::<u64>().unwrap(), (0..20).sum());
    // A handle spawns only on the host's runtime.
    let h = host.handle();
    let err = std::thread::spawn(move || h.spawn_machine(Inbox, "in", Payload::empty()))
        .join()
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("outside the host's runtime"), "{err}");
    host.shutdown(Duration::from_secs(1));
}

/// Steps (`Continue`) until machines have been seen on two different worker threads, then
/// completes.
struct Spread {
    seen: Arc<Mutex<std::collections::HashSet<std::thread::ThreadId>>>,
    steps: u64,
}

impl Machine for Spread {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, _events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        self.steps += 1;
        let mut seen = self.seen.lock().unwrap();
        seen.insert(std::thread::current().id());
        if seen.len() >= 2 {
            out.complete(Payload::new(self.steps));
        } else {
            out.continue_();
        }
        Ok(())
    }
}

#[test]
fn machines_are_spread_over_the_workers_like_green_threads() {
    // Machines are tasks of the same scheduler: queued on the workers' local queues and the
    // global queue, and stolen by idle workers. With two workers, ready machines end up on
    // both (the watchdog fails the test if they never do).
    let _w = watchdog("spread", Duration::from_secs(120));
    let host = host(2);
    let seen = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let ids: Vec<MachineId> = (0..64)
        .map(|_| {
            let p = Spread { seen: seen.clone(), steps: 0 };
            host.spawn_machine(p, "spread", Payload::empty()).unwrap()
        })
        .collect();
    for id in ids {
        host.wait(id).unwrap();
    }
    assert!(seen.lock().unwrap().len() >= 2, "ran on at least two worker threads");
    host.shutdown(Duration::from_secs(1));
}

/// A machine written against the former names: `impl Process`, yields once with its own id,
/// completes with the answer, counts its closes.
#[allow(deprecated)]
struct OldNames {
    yielded: bool,
    closes: Arc<AtomicUsize>,
}

#[allow(deprecated)]
impl purloin::machine::Process for OldNames {
    fn init(&mut self, method: &str, _input: Payload) -> Result<(), Error> {
        match method {
            "run" => Ok(()),
            other => Err(Error::unknown_method(other, &["run"])),
        }
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        if !self.yielded {
            self.yielded = true;
            out.yield_command("whoami", 1, Payload::new(out.pid()));
            return Ok(());
        }
        let answer = events.next().expect("the answer to the yield").into_result()?;
        out.complete(answer);
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
#[allow(deprecated)]
fn the_former_names_still_compile_and_run() {
    use purloin::machine::{Pid, ProcessState, ShutdownReport};
    // Code written before the rename keeps compiling (with deprecation warnings) and runs the
    // same: an `impl Process` is a `Machine` through the blanket impl (init, step and close
    // all forwarded), and every old name is the new item.
    let _w = watchdog("former names", Duration::from_secs(60));
    let host = host(2);
    host.register("whoami", |y| {
        let asked = *y.data().downcast_ref::<Pid>().expect("the step's own id");
        assert_eq!(asked, y.pid());
        assert_eq!(y.pid(), y.machine_id());
        let _ = y.complete(Ok(Payload::new(asked)));
    });
    let closes = Arc::new(AtomicUsize::new(0));
    let old = |closes: &Arc<AtomicUsize>| OldNames { yielded: false, closes: closes.clone() };

    let err = host.spawn_process(old(&closes), "walk", Payload::empty()).unwrap_err();
    assert!(err.to_string().contains("unknown method `walk`"), "{err}");
    assert_eq!(closes.load(Ordering::SeqCst), 1, "close after a failed init");

    let pid: Pid = host.spawn_process(old(&closes), "run", Payload::empty()).unwrap();
    let state: Option<ProcessState> = host.status(pid);
    assert!(state.is_some(), "a spawned machine is known until its result is taken");
    assert_eq!(host.wait(pid).unwrap().take::<MachineId>().unwrap(), pid);
    assert_eq!(closes.load(Ordering::SeqCst), 2, "close after the last step");
    assert_eq!(host.live_processes(), 0);
    assert_eq!(host.status(pid), None::<MachineState>);

    // The former variant names match the new variants, also as patterns.
    let e = host.wait(pid).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::UnknownPid), "{e:?}");
    let e = host.send(pid, Payload::empty()).unwrap_err();
    assert!(matches!(e.kind(), SendErrorKind::UnknownPid), "{e:?}");
    assert_eq!(e.pid(), pid);
    let e = host.complete_yield(pid, 1, Ok(Payload::empty())).unwrap_err();
    assert!(matches!(e.kind(), CompleteErrorKind::UnknownPid), "{e:?}");
    assert_eq!(e.pid(), pid);

    // `HostHandle::spawn_process` from a green thread of the host's runtime.
    let (h, c) = (host.handle(), closes.clone());
    let spawned = host.runtime().spawn(move || h.spawn_process(old(&c), "run", Payload::empty()));
    let pid = spawned.join().unwrap().unwrap();
    assert_eq!(host.wait(pid).unwrap().take::<MachineId>().unwrap(), pid);
    assert_eq!(closes.load(Ordering::SeqCst), 3);

    let report: ShutdownReport = host.shutdown(Duration::from_secs(5));
    assert_eq!((report.cancelled, report.timed_out, report.unfinished), (0, 0, 0));
}
