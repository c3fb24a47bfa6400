//! Blocking calls nobody wrapped in `blocking()`, and hogs: while green threads keep every
//! worker's OS thread in the kernel (or computing) without a scheduling point, the monitor
//! adds spare workers, so the other green threads keep running; the spares retire after.
//!
//! Each stall case runs 4 blocked green threads on 2 workers, so both workers block. A
//! ping-pong pair must finish 10,000 round trips and a 1 ms ticker must tick, both before any
//! blocked call returns: the blockers set a flag when theirs returns, and the callers that
//! release them (a std thread) do so only once the pair and the ticker are done, or after 2 s
//! (without spares, nothing else runs until then, and the flag fails the test).
#![cfg(not(loom))]

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use purloin_sched::{Builder, GreenThread, Scheduler};

const BLOCKERS: usize = 4;
const ROUND_TRIPS: u64 = 10_000;
const TICKS: u64 = 20;
/// How long a blocker stays blocked if nobody releases it earlier.
const STALL: Duration = Duration::from_secs(2);

/// What the stall cases share: the blockers' "my call returned" flag, and "the pair and the
/// ticker are done" (which releases the blockers that can be released).
#[derive(Default)]
struct Flags {
    started: AtomicUsize,
    returned: AtomicBool,
    done: AtomicBool,
}

impl Flags {
    /// Called by a blocker when its blocking call returned.
    fn call_returned(&self) {
        self.returned.store(true, Ordering::SeqCst);
    }
}

/// Waits until `done` is set or `STALL` passed (a release that comes after the stall at the
/// latest, so a run without spares ends too).
fn wait_done_or_stall(flags: &Flags) {
    let end = Instant::now() + STALL;
    while !flags.done.load(Ordering::SeqCst) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A ping-pong pair: `n` round trips through park/unpark.
fn ping_pong(
    sched: &Scheduler,
    n: u64,
) -> (purloin_sched::JoinHandle<()>, purloin_sched::JoinHandle<()>) {
    struct Pair {
        turn: AtomicU64,
        a: OnceLock<GreenThread>,
        b: OnceLock<GreenThread>,
    }
    let pair = Arc::new(Pair { turn: AtomicU64::new(0), a: OnceLock::new(), b: OnceLock::new() });
    fn side(
        pair: &Pair,
        me: &OnceLock<GreenThread>,
        other: &OnceLock<GreenThread>,
        first: u64,
        n: u64,
    ) {
        let _ = me.set(purloin_sched::current().unwrap());
        let other = loop {
            if let Some(o) = other.get() {
                break *o;
            }
            purloin_sched::yield_now();
        };
        for i in 0..n {
            while pair.turn.load(Ordering::Acquire) != 2 * i + first {
                purloin_sched::park();
            }
            pair.turn.store(2 * i + first + 1, Ordering::Release);
            other.unpark();
        }
    }
    let p = pair.clone();
    let a = sched.spawn(move || side(&p, &p.a, &p.b, 0, n));
    let p = pair;
    let b = sched.spawn(move || side(&p, &p.b, &p.a, 1, n));
    (a, b)
}

/// Runs one stall case on 2 workers: `blocker(i, flags)` is the body of blocked green thread
/// `i` (it must call `flags.call_returned()` when its call returns); `releaser` runs on a std
/// thread and unblocks them (after `wait_done_or_stall`).
fn stall_case(
    what: &'static str,
    blocker: impl Fn(usize, Arc<Flags>) + Send + Sync + 'static,
    releaser: impl FnOnce(Arc<Flags>) + Send + 'static,
) {
    let _w = common::watchdog(what, Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    let flags = Arc::new(Flags::default());
    let blocker = Arc::new(blocker);
    let blockers: Vec<_> = (0..BLOCKERS)
        .map(|i| {
            let (f, b) = (flags.clone(), blocker.clone());
            sched.spawn(move || {
                f.started.fetch_add(1, Ordering::SeqCst);
                b(i, f)
            })
        })
        .collect();
    // Both workers are in blocking calls (or about to be) once two blockers started.
    while flags.started.load(Ordering::SeqCst) < 2 {
        std::thread::yield_now();
    }
    let f = flags.clone();
    let release = std::thread::spawn(move || releaser(f));
    let ticks = Arc::new(AtomicU64::new(0));
    let t = ticks.clone();
    let ticker = sched.spawn(move || {
        while t.load(Ordering::SeqCst) < TICKS {
            purloin_sched::sleep(Duration::from_millis(1));
            t.fetch_add(1, Ordering::SeqCst);
        }
    });
    let (a, b) = ping_pong(&sched, ROUND_TRIPS);
    a.join().unwrap();
    b.join().unwrap();
    let pair_in_time = !flags.returned.load(Ordering::SeqCst);
    ticker.join().unwrap();
    let ticker_in_time = !flags.returned.load(Ordering::SeqCst);
    flags.done.store(true, Ordering::SeqCst);
    release.join().unwrap();
    for h in blockers {
        h.join().unwrap();
    }
    assert!(
        pair_in_time,
        "{what}: the ping-pong pair finished only after a blocked call returned: the blocked \
         workers' green threads did not move ({:?})",
        sched.stats().global
    );
    assert!(ticker_in_time, "{what}: the ticker stopped while every worker was blocked");
    let stats = sched.stats();
    assert!(stats.global.spares_added >= 1, "{what}: {:?}", stats.global);
    // The spares retire once their work is done: the worker threads are back to 2.
    while sched.stats().threads > 2 {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(sched.stats().global.spares_retired >= 1, "{what}: {:?}", sched.stats().global);
    assert_eq!(sched.workers(), 2);
    // And the scheduler still works.
    assert_eq!(sched.spawn(|| 7).join().unwrap(), 7);
}

#[test]
fn unmarked_sleeps_do_not_stall_other_green_threads() {
    stall_case(
        "std::thread::sleep",
        |_, f| {
            std::thread::sleep(STALL);
            f.call_returned();
        },
        |_| {},
    );
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: pipe(2) succeeded: both descriptors are open and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

#[test]
fn unmarked_fifo_reads_do_not_stall_other_green_threads() {
    let dir = std::env::temp_dir().join(format!("purloin-unmarked-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifos: Vec<_> = (0..BLOCKERS)
        .map(|i| {
            let path = dir.join(format!("fifo-{i}"));
            let _ = std::fs::remove_file(&path);
            let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: `c` is a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
            path
        })
        .collect();
    let readers = fifos.clone();
    stall_case(
        "std::fs::read of a FIFO",
        move |i, f| {
            let data = std::fs::read(&readers[i]).unwrap();
            f.call_returned();
            assert_eq!(data, b"hello");
        },
        move |f| {
            wait_done_or_stall(&f);
            for path in &fifos {
                std::fs::write(path, b"hello").unwrap();
            }
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn contended_std_mutexes_do_not_stall_other_green_threads() {
    let lock = Arc::new(Mutex::new(0u32));
    let held = Arc::new(AtomicBool::new(false));
    let (l, h) = (lock.clone(), held.clone());
    // The std thread takes the lock before any blocker starts.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let guard = l.lock().unwrap();
        h.store(true, Ordering::SeqCst);
        rx.recv().unwrap();
        drop(guard);
    });
    while !held.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    stall_case(
        "a contended std::sync::Mutex",
        move |_, f| {
            *lock.lock().unwrap() += 1;
            f.call_returned();
        },
        move |f| {
            wait_done_or_stall(&f);
            tx.send(()).unwrap();
        },
    );
    holder.join().unwrap();
}

#[test]
fn unmarked_polls_do_not_stall_other_green_threads() {
    let pipes: Vec<_> = (0..BLOCKERS).map(|_| pipe()).collect();
    let (readers, writers): (Vec<_>, Vec<_>) = pipes.into_iter().unzip();
    let readers = Arc::new(readers);
    stall_case(
        "libc::poll on a pipe",
        move |i, f| {
            let mut pfd =
                libc::pollfd { fd: readers[i].as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd; no timeout.
            let n = unsafe { libc::poll(&mut pfd, 1, -1) };
            f.call_returned();
            assert_eq!(n, 1, "poll");
        },
        move |f| {
            wait_done_or_stall(&f);
            for w in &writers {
                // SAFETY: writes one byte from a valid buffer to an open pipe.
                assert_eq!(unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) }, 1);
            }
        },
    );
}

/// A hog: one green thread spins without a scheduling point until another green thread,
/// queued on the same (only) worker, sets a flag. Without a spare taking the queue away from
/// the hog, that green thread never runs (the watchdog fails the test).
#[test]
fn a_hog_does_not_keep_its_queue() {
    let _w = common::watchdog("hog", Duration::from_secs(60));
    let sched =
        Builder::new().workers(1).long_run_threshold(Duration::from_millis(20)).build().unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let spinning = Arc::new(AtomicBool::new(false));
    let (f, s) = (flag.clone(), spinning.clone());
    let hog = sched.spawn(move || {
        s.store(true, Ordering::SeqCst);
        let mut spins = 0u64;
        while !f.load(Ordering::SeqCst) {
            spins += 1;
            std::hint::spin_loop();
        }
        spins
    });
    while !spinning.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let f = flag.clone();
    let setter = sched.spawn(move || f.store(true, Ordering::SeqCst));
    setter.join().unwrap();
    assert!(hog.join().unwrap() > 0);
    assert!(sched.stats().global.spares_added >= 1);
}

/// The green thread stalled in an unmarked call keeps its OS thread (it never leaves its
/// worker: its thread-locals, green-locals and spans stay as they were), its other green
/// threads run on a spare meanwhile, and a pinned green thread queued on its worker waits
/// for it (pinned work never moves).
#[test]
fn a_stalled_green_thread_keeps_its_worker_and_its_pinned_work_waits() {
    let _w = common::watchdog("stalled keeps its worker", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let h = sched.spawn(|| {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let pinned_ran = Arc::new(AtomicBool::new(false));
        let pr = pinned_ran.clone();
        let pinned = purloin_sched::spawn_with(
            purloin_sched::SpawnOptions { pinned: true, ..Default::default() },
            move || pr.store(true, Ordering::SeqCst),
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let other = purloin_sched::spawn(move || tx.send(5).unwrap()).unwrap();
        // Blocks this worker's OS thread until `other` ran: on a spare.
        assert_eq!(rx.recv().unwrap(), 5);
        assert!(!pinned_ran.load(Ordering::SeqCst), "pinned work ran while its worker blocked");
        // SAFETY: as above.
        assert_eq!(unsafe { libc::gettid() }, tid, "the stalled green thread changed OS thread");
        other.join().unwrap();
        pinned.join().unwrap();
        pinned_ran.load(Ordering::SeqCst)
    });
    assert!(h.join().unwrap());
}

/// `set_workers` while spares stand in for stalled workers: the spares stay on top of the
/// asked count, nothing is lost, and once the stall ends the worker threads come back to the
/// asked count.
#[test]
fn resizing_while_spares_stand_in() {
    let _w = common::watchdog("resize with spares", Duration::from_secs(60));
    let sched = Builder::new().workers(2).max_workers(4).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(rx));
    let started = Arc::new(AtomicUsize::new(0));
    // Two green threads stall both workers in a std channel receive (one at a time holds the
    // receiver's lock, the other waits for the lock: both OS threads wait in the kernel).
    let blockers: Vec<_> = (0..2)
        .map(|_| {
            let (rx, s) = (rx.clone(), started.clone());
            sched.spawn(move || {
                s.fetch_add(1, Ordering::SeqCst);
                rx.lock().unwrap().recv().unwrap();
            })
        })
        .collect();
    while started.load(Ordering::SeqCst) < 2 {
        std::thread::yield_now();
    }
    // Work behind the stalled workers brings a spare.
    let first = sched.spawn(|| 1);
    assert_eq!(first.join().unwrap(), 1);
    assert!(sched.stats().global.spares_added >= 1);
    // Never below the two stalled workers: shrinking waits for a removed processor's running
    // green thread to finish (`set_workers`' docs), and the blocked ones finish only at the
    // end. (Spares retire once no work waits, so none may be left on top to keep them.)
    for n in [3, 2, 4, 2] {
        sched.set_workers(n).unwrap();
        assert_eq!(sched.workers(), n);
        let hs: Vec<_> = (0..100u64).map(|i| sched.spawn(move || i)).collect();
        assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>(), 4950);
    }
    tx.send(()).unwrap();
    tx.send(()).unwrap();
    for b in blockers {
        b.join().unwrap();
    }
    while sched.stats().threads > 2 {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sched.workers(), 2);
    assert_eq!(sched.stats().procs.len(), 2);
}
