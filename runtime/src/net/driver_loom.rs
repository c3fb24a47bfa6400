//! Loom models of the netpoller: the wake-up protocol alone, then the real driver inside a
//! real one-worker runtime (purloin-sched on loom, green threads as loom threads, the kernel
//! modelled by `selector_loom.rs`).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::driver::{Direction, Driver};
use super::selector_loom::READ_EVENTS;
use super::source::Source;
use crate::loom::{AtomicBool, AtomicUsize, Ordering, fence, thread};

/// The wake-up protocol between a worker that blocks in the poller and a submitter, written
/// the way sched's `poll_blocking` / `wake_if_blocked` use it (F3/F4 in sched's `poll.rs`):
/// every submission after the worker published "I block in the poller" makes its poll
/// return, across several rounds (so a stale `wake_pending` from one round cannot eat the
/// next round's wake-up).
///
/// It runs at preemption bound 4 whatever `LOOM_MAX_PREEMPTIONS` says (it is small: about a
/// second): the first mutation below needs 4 preemptions to show.
///
/// Mutation checks (each fails with "deadlock": the worker blocked in `select` forever):
/// - in `Driver::poll`, clearing `wake_pending` *before* draining the eventfd (a wake in
///   between leaves the flag set with the eventfd drained; every later wake is skipped):
///   found at bound 4, not at 2 or 3;
/// - in `Driver::poll`, never clearing `wake_pending`;
/// - in `Driver::wake`, not writing the eventfd.
#[test]
fn wake_vs_blocking_poll() {
    const ROUNDS: usize = 3;
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(4);
    model.check(|| {
        let driver = Arc::new(Driver::new().unwrap());
        // The worker's parking lot (a signal counter) and sched's `blocked` slot.
        let lot = Arc::new(AtomicUsize::new(0));
        let blocked = Arc::new(AtomicBool::new(false));
        let (d, l, b) = (driver.clone(), lot.clone(), blocked.clone());
        let worker = thread::spawn(move || {
            let mut seen = 0;
            let mut ready = Vec::new();
            while seen < ROUNDS {
                let now = l.load(Ordering::Relaxed);
                if now != seen {
                    seen = now;
                    continue;
                }
                b.store(true, Ordering::Relaxed);
                // F3
                fence(Ordering::SeqCst);
                let moved = l.load(Ordering::Relaxed) != seen;
                d.poll(if moved { Some(Instant::now()) } else { None }, &mut ready);
                b.store(false, Ordering::Relaxed);
            }
        });
        for _ in 0..ROUNDS {
            lot.fetch_add(1, Ordering::Relaxed);
            // F4
            fence(Ordering::SeqCst);
            if blocked.load(Ordering::Relaxed) {
                driver.wake();
            }
        }
        worker.join().unwrap();
    });
}

fn runtime() -> crate::Runtime {
    crate::runtime::Builder::new()
        .workers(1)
        .monitor(false)
        .deadlock_detection(false, Duration::from_secs(1))
        .schedtrace(None)
        .build()
        .unwrap()
}

/// `loom::model` at preemption bound 1, like sched's models of a whole scheduler
/// (`sched/tests/loom_sched.rs`): a runtime's spawn, join and shutdown are hundreds of atomic
/// operations, and bound 2 does not finish in CI's time.
fn whole_runtime_model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.check(f);
}

/// Installs `driver` as `rt`'s poller (under loom `net::install` leaves that to the models).
fn install(rt: &crate::Runtime, driver: &Arc<Driver>) {
    rt.scheduler().set_poller(Arc::new(super::driver::SchedPoller(driver.clone())));
}

/// The runtime's driver, fetched from a green thread.
fn driver_of(rt: &crate::Runtime) -> Arc<Driver> {
    rt.spawn(|| crate::current::with_current(|d| d.expect("a purloin runtime").net.clone()))
        .join()
        .unwrap()
}

/// A socket of the modelled kernel.
struct FakeSock(RawFd, Arc<Driver>);

impl AsRawFd for FakeSock {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl FakeSock {
    fn read(&self) -> io::Result<()> {
        if self.1.kernel().take_ready(self.0, READ_EVENTS) {
            Ok(())
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
}

/// A green thread reads a socket with no data: it registers with the runtime's poller
/// (lazily), parks, and the kernel's edge — arriving at any point: before the registration,
/// between the syscall and the park, while the worker blocks in the poller — makes it
/// runnable. A lost edge leaves the green thread parked and the worker blocked: loom reports
/// a deadlock. Mutation check (at preemption bound 2; at CI's bound 1 the next model catches
/// it): a stale-event filter that drops live events (tokens built with `generation + 1` in
/// `Driver::register`) fails this model with a deadlock. (With one
/// worker the snapshot races of `readiness.rs` cannot show here — the worker polls only
/// while the green thread is switched out — so those are checked by its own models.)
#[test]
fn readiness_reaches_parked_green_thread() {
    whole_runtime_model(|| {
        let rt = runtime();
        let driver = driver_of(&rt);
        install(&rt, &driver);
        let d2 = driver.clone();
        let reader = rt.spawn(move || {
            let src = Source::new(FakeSock(1000, d2));
            src.op(Direction::Read, None, |s| s.read())
        });
        driver.kernel().make_ready(1000, READ_EVENTS);
        reader.join().unwrap().unwrap();
        drop(rt);
    });
}

/// The same with the edge arriving only once the green thread waits (registered, about to
/// park or parked, the worker polling): the path the stale-event filter sits on, forced so
/// that the model's preemption bound does not have to find it. Mutation check: tokens built
/// with `generation + 1` in `Driver::register` (the filter drops live events) fail this model
/// with a deadlock (`readiness_reaches_parked_green_thread` finds that interleaving only at
/// preemption bound 2).
#[test]
fn a_late_edge_reaches_a_waiting_green_thread() {
    whole_runtime_model(|| {
        let rt = runtime();
        let driver = driver_of(&rt);
        install(&rt, &driver);
        let d2 = driver.clone();
        let reader = rt.spawn(move || {
            let src = Source::new(FakeSock(1001, d2));
            src.op(Direction::Read, None, |s| s.read())
        });
        while !driver.has_waiters() {
            loom::thread::yield_now();
        }
        driver.kernel().make_ready(1001, READ_EVENTS);
        reader.join().unwrap().unwrap();
        drop(rt);
    });
}

/// A submission from outside while the runtime's only worker blocks in the poller wakes it
/// (sched's F3/F4 plus the driver's eventfd wake-up); so does the shutdown that follows.
/// Mutation checks (each fails with a deadlock): `Driver::wake` not writing the eventfd;
/// removing F3 (the fence in sched's `poll_blocking`).
#[test]
fn submission_while_poller_blocks() {
    whole_runtime_model(|| {
        let rt = runtime();
        install(&rt, &driver_of(&rt));
        assert_eq!(rt.spawn(|| 1).join().unwrap(), 1);
        drop(rt);
    });
}
