//! Profiling helper: what an idle runtime costs, and how fast a blocking hand-off follows idleness.
//!
//! `cargo bench -p purloin --bench profile_idle -- [idle|idle-main|handoff] [workers]`
//!
//! - `idle` (the default): 100 green threads parked on a channel, one in a 6 s sleep, the root
//!   (`block_on`) in a 5 s sleep; prints the process's CPU time (user + system, `getrusage`)
//!   over the root's 5 s. The Go twin is `bench-go/runtime/idle/main.go`, same shape. Count the
//!   system calls of either with `strace -f -c`.
//! - `idle-main`: the same green threads, spawned from `main` with `purloin::spawn`; `main`
//!   measures around a 5 s `std::thread::sleep` (no `block_on` caller waiting on a root).
//! - `handoff`: 50 rounds, each 30 ms of idleness (the root sleeps, every worker parks) then a
//!   green thread that spawns a child and enters a 20 ms blocking call; one worker, so the child
//!   runs only once the monitor hands the P to another thread. Prints the spawn-to-child-start
//!   latency (median, p90, max).
use std::time::{Duration, Instant};

fn cpu_time() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable rusage; RUSAGE_SELF is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage failed: {}", std::io::Error::last_os_error());
    // SAFETY: getrusage succeeded and filled `ru`.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn idle(workers: usize) {
    let rt = purloin::runtime::Builder::new().workers(workers).build().unwrap();
    let cpu = rt.block_on(|| {
        let (tx, rx) = purloin::sync::channel::bounded::<()>(0);
        let parked: Vec<_> = (0..100)
            .map(|_| {
                let rx = rx.clone();
                purloin::spawn(move || {
                    let _ = rx.recv();
                })
            })
            .collect();
        let sleeper = purloin::spawn(|| purloin::sleep(Duration::from_secs(6)));
        // Let every green thread reach its wait before the window opens.
        purloin::sleep(Duration::from_millis(100));
        let before = cpu_time();
        purloin::sleep(Duration::from_secs(5));
        let used = cpu_time() - before;
        drop(tx);
        for h in parked {
            h.join().unwrap();
        }
        sleeper.join().unwrap();
        used
    });
    println!("idle: {:.3} ms of CPU in 5 s ({} workers)", cpu.as_secs_f64() * 1e3, workers);
}

fn idle_main(workers: usize) {
    let rt = purloin::runtime::Builder::new().workers(workers).build().unwrap();
    let (tx, rx) = purloin::sync::channel::bounded::<()>(0);
    let parked: Vec<_> = (0..100)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn(move || {
                let _ = rx.recv();
            })
        })
        .collect();
    let sleeper = rt.spawn(|| purloin::sleep(Duration::from_secs(6)));
    std::thread::sleep(Duration::from_millis(100));
    let before = cpu_time();
    std::thread::sleep(Duration::from_secs(5));
    let used = cpu_time() - before;
    drop(tx);
    for h in parked {
        h.join().unwrap();
    }
    sleeper.join().unwrap();
    println!("idle-main: {:.3} ms of CPU in 5 s ({} workers)", used.as_secs_f64() * 1e3, workers);
}

fn handoff(workers: usize) {
    let rt = purloin::runtime::Builder::new().workers(workers).build().unwrap();
    let mut lat = rt.block_on(|| {
        (0..50)
            .map(|_| {
                purloin::sleep(Duration::from_millis(30));
                let start = Instant::now();
                let child = purloin::spawn(move || start.elapsed());
                purloin::blocking(|| std::thread::sleep(Duration::from_millis(20)));
                child.join().unwrap()
            })
            .collect::<Vec<_>>()
    });
    lat.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "handoff after idle: median {:.1} µs, p90 {:.1} µs, max {:.1} µs ({} rounds, {} workers, \
         {} hand-offs)",
        us(lat[lat.len() / 2]),
        us(lat[lat.len() * 9 / 10]),
        us(lat[lat.len() - 1]),
        lat.len(),
        workers,
        rt.stats().global.handoffs,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let mode = args.first().map_or("idle", String::as_str);
    let workers = args.get(1).and_then(|w| w.parse().ok());
    match mode {
        "idle" => idle(workers.unwrap_or(2)),
        "idle-main" => idle_main(workers.unwrap_or(2)),
        "handoff" => handoff(workers.unwrap_or(1)),
        other => panic!("unknown mode {other:?}: use `idle`, `idle-main` or `handoff`"),
    }
}
