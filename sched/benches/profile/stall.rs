//! Profiling helper: a ping-pong pair's round trips while every worker's OS thread is
//! blocked in an unmarked `read(2)` on a pipe (green threads that do not use
//! `purloin_sched::blocking`), next to the same pair with nothing blocked. Prints p50, p99
//! and the worst round trip of each; the Go twin is `bench-go/runtime/stall`.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use purloin_sched::{GreenThread, Scheduler};

const WORKERS: usize = 2;
const BLOCKERS: usize = 4;
const ROUND_TRIPS: u64 = 20_000;

pub fn run(_args: &[String]) {
    let sched = purloin_sched::Builder::new().workers(WORKERS).build().unwrap();
    let quiet = round_trips(&sched);
    report("nothing blocked", &quiet);

    let pipes: Vec<(OwnedFd, OwnedFd)> = (0..BLOCKERS).map(|_| pipe()).collect();
    let started = Arc::new(AtomicUsize::new(0));
    let returned = Arc::new(AtomicBool::new(false));
    let blockers: Vec<_> = pipes
        .iter()
        .map(|(r, _)| {
            let fd = r.as_raw_fd();
            let (s, d) = (started.clone(), returned.clone());
            sched.spawn(move || {
                s.fetch_add(1, Ordering::SeqCst);
                let mut b = [0u8; 1];
                // SAFETY: reads one byte into a valid buffer from an open pipe.
                let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
                d.store(true, Ordering::SeqCst);
                assert_eq!(n, 1);
            })
        })
        .collect();
    while started.load(Ordering::SeqCst) < WORKERS {
        std::thread::yield_now();
    }
    let stalled = round_trips(&sched);
    let during = !returned.load(Ordering::SeqCst);
    for (_, w) in &pipes {
        // SAFETY: writes one byte from a valid buffer to an open pipe.
        assert_eq!(unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) }, 1);
    }
    for b in blockers {
        b.join().unwrap();
    }
    report(&format!("{BLOCKERS} green threads in read(2) on {WORKERS} workers"), &stalled);
    println!("   all round trips done while the reads blocked: {during}");
    println!("   {:?}", sched.stats().global);
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: pipe(2) succeeded: both descriptors are open and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// `ROUND_TRIPS` round trips of a park/unpark ping-pong pair, each timed; the first entry is
/// how long the pair waited, from its spawn, for a worker to run it.
fn round_trips(sched: &Scheduler) -> Vec<Duration> {
    let spawned = Instant::now();
    struct Pair {
        turn: AtomicU64,
        a: OnceLock<GreenThread>,
        b: OnceLock<GreenThread>,
    }
    let pair = Arc::new(Pair { turn: AtomicU64::new(0), a: OnceLock::new(), b: OnceLock::new() });
    fn peer(me: &OnceLock<GreenThread>, other: &OnceLock<GreenThread>) -> GreenThread {
        let _ = me.set(purloin_sched::current().unwrap());
        loop {
            if let Some(o) = other.get() {
                return *o;
            }
            purloin_sched::yield_now();
        }
    }
    let p = pair.clone();
    let b = sched.spawn(move || {
        let a = peer(&p.b, &p.a);
        for i in 0..ROUND_TRIPS {
            while p.turn.load(Ordering::Acquire) != 2 * i + 1 {
                purloin_sched::park();
            }
            p.turn.store(2 * i + 2, Ordering::Release);
            a.unpark();
        }
    });
    let p = pair;
    let a = sched.spawn(move || {
        let mut times = Vec::with_capacity(ROUND_TRIPS as usize + 1);
        times.push(spawned.elapsed());
        let b = peer(&p.a, &p.b);
        for i in 0..ROUND_TRIPS {
            let t = Instant::now();
            p.turn.store(2 * i + 1, Ordering::Release);
            b.unpark();
            while p.turn.load(Ordering::Acquire) != 2 * i + 2 {
                purloin_sched::park();
            }
            times.push(t.elapsed());
        }
        times
    });
    b.join().unwrap();
    a.join().unwrap()
}

fn report(what: &str, times: &[Duration]) {
    println!("{what}: the pair started {:?} after its spawn", times[0]);
    let mut t = times[1..].to_vec();
    t.sort();
    let q = |f: f64| t[((t.len() - 1) as f64 * f) as usize];
    println!(
        "{what}: {} round trips, p50 {:?}, p99 {:?}, max {:?}",
        t.len(),
        q(0.5),
        q(0.99),
        t[t.len() - 1]
    );
}
