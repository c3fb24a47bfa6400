//! The guided tour of purloin: `cargo run --release --example tour`.
//!
//! Each section shows one capability at work and prints what it measured on this machine.

use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use purloin::sync::channel;
use purloin::{Builder, GreenThread, StackSize};

#[path = "machines.rs"]
#[allow(dead_code)]
mod machines;

fn main() {
    if std::env::var_os("PURLOIN_TOUR_OVERFLOW").is_some() {
        overflow_child();
    }
    let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!(
        "purloin tour — {workers} workers (one per CPU), global runtime started on first spawn\n"
    );

    spawn_and_join();
    fork_join_fib();
    channel_ping_pong();
    unmarked_blocking_calls();
    parked_green_threads();
    panics_reach_join();
    stack_overflow();
    machine_workflow();
    echo_over_loopback();
    children_signals_timers();
    cancelled_fan_out();
    scheduler_stats();
    dump_of_a_stuck_thread();
    production_diagnostics();
}

fn section(title: &str) {
    println!("== {title}");
}

/// Part 1: Spawn 100,000 green threads from `main` and join them.
fn spawn_and_join() {
    section("spawn 100,000 green threads and join them");
    let n = 100_000u64;
    // Warm the runtime up (it starts lazily on the first spawn).
    purloin::spawn(|| ()).join().unwrap();
    let t = Instant::now();
    let handles: Vec<_> = (0..n).map(|i| purloin::spawn(move || black_box(i) * 2)).collect();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let el = t.elapsed();
    assert_eq!(sum, n * (n - 1));
    println!(
        "   from main:          {:>8.1} ms  ({:.0} ns per spawn + join)",
        el.as_secs_f64() * 1e3,
        el.as_nanos() as f64 / n as f64
    );
    let t = Instant::now();
    let sum = purloin::spawn(move || {
        let hs: Vec<_> = (0..n).map(|i| purloin::spawn(move || black_box(i) * 2)).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    })
    .join()
    .unwrap();
    let el = t.elapsed();
    assert_eq!(sum, n * (n - 1));
    println!(
        "   from a green thread:{:>8.1} ms  ({:.0} ns per spawn + join; local queues)\n",
        el.as_secs_f64() * 1e3,
        el.as_nanos() as f64 / n as f64
    );
}

/// Part 2: the fork-join walk-through: fib(30) with `purloin::join`.
fn fork_join_fib() {
    section("fork-join: fib(30) with purloin::join (join-helping runs unstolen halves inline)");
    fn fib(n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = purloin::join(|| fib(n - 1), || fib(n - 2));
        a + b
    }
    fn forks(n: u64) -> u64 {
        if n < 2 { 0 } else { 1 + forks(n - 1) + forks(n - 2) }
    }
    let before = purloin::stats();
    let t = Instant::now();
    let r = purloin::spawn(|| fib(30)).join().unwrap();
    let el = t.elapsed();
    let after = purloin::stats();
    assert_eq!(r, 832_040);
    let f = forks(30);
    println!(
        "   fib(30) = {r} in {:.1} ms: {f} forks, {:.1} ns per fork; {} ran inline, {} stolen\n",
        el.as_secs_f64() * 1e3,
        el.as_nanos() as f64 / f as f64,
        after.total.inline_joins - before.total.inline_joins,
        after.total.stolen - before.total.stolen,
    );
}

/// Part 3: Two green threads passing a value back and forth over rendezvous channels (Go's
/// unbuffered channels): a wake-up puts the receiver in the sender's `runnext`, so the pair runs
/// as a unit.
fn channel_ping_pong() {
    section("channel ping-pong between two green threads (rendezvous channels, Go-style)");
    let n = 1_000_000u32;
    let el = purloin::spawn(move || {
        let (to_peer, from_me) = channel::bounded::<u32>(0);
        let (to_me, from_peer) = channel::bounded::<u32>(0);
        let peer = purloin::spawn(move || {
            for v in from_me.iter() {
                to_me.send(v + 1).unwrap();
            }
        });
        let t = Instant::now();
        let mut v = 0;
        for _ in 0..n {
            to_peer.send(v).unwrap();
            v = from_peer.recv().unwrap();
        }
        let el = t.elapsed();
        drop(to_peer);
        peer.join().unwrap();
        assert_eq!(v, n);
        el
    })
    .join()
    .unwrap();
    println!(
        "   {n} round trips (2 sends + 2 receives each) in {:.1} ms: {:.0} ns per round trip\n",
        el.as_secs_f64() * 1e3,
        el.as_nanos() as f64 / n as f64
    );
}

/// Part 3b: every worker's OS thread blocked in a plain `std::thread::sleep` (not wrapped in
/// `purloin::blocking`): the monitor adds spare workers, which take the queued green threads,
/// so a ping-pong pair keeps running; the spares retire when the sleeps are over.
fn unmarked_blocking_calls() {
    section("green threads in an unmarked std::thread::sleep on every worker; others keep running");
    // One per active processor (spares the monitor added earlier, if any, included).
    let workers = purloin::stats().procs.len();
    let started = Arc::new(AtomicUsize::new(0));
    let slept = Arc::new(AtomicBool::new(false));
    let sleepers: Vec<_> = (0..workers)
        .map(|_| {
            let (started, slept) = (started.clone(), slept.clone());
            purloin::spawn(move || {
                started.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(500)); // blocks this worker's OS thread
                slept.store(true, Ordering::SeqCst);
            })
        })
        .collect();
    while started.load(Ordering::SeqCst) < workers {
        std::thread::yield_now();
    }
    let n = 10_000u32;
    let t = Instant::now();
    let during = purloin::spawn(move || {
        let (to_peer, from_me) = channel::bounded::<u32>(0);
        let (to_me, from_peer) = channel::bounded::<u32>(0);
        let peer = purloin::spawn(move || {
            for v in from_me.iter() {
                to_me.send(v + 1).unwrap();
            }
        });
        let mut v = 0;
        for _ in 0..n {
            to_peer.send(v).unwrap();
            v = from_peer.recv().unwrap();
        }
        drop(to_peer);
        peer.join().unwrap();
        v
    });
    assert_eq!(during.join().unwrap(), n);
    let el = t.elapsed();
    let still_sleeping = !slept.load(Ordering::SeqCst);
    for s in sleepers {
        s.join().unwrap();
    }
    let s = purloin::stats();
    println!(
        "   {workers} green threads (one per processor) in std::thread::sleep(500 ms); meanwhile {n} \
         ping-pong round trips took {:.1} ms (done before the sleeps ended: {still_sleeping}); \
         spare workers added {}\n",
        el.as_secs_f64() * 1e3,
        s.global.spares_added
    );
}

/// Counts this process's memory mappings.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").map(|m| m.lines().count()).unwrap_or(0)
}

/// A field of /proc/self/status or /proc/meminfo, in KiB.
fn kib(file: &str, field: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Part 4: Many parked green threads, each on its own guard-paged stack.
fn parked_green_threads() {
    let available_gib = kib("/proc/meminfo", "MemAvailable:") / (1024 * 1024);
    let n: usize = if available_gib >= 10 { 1_000_000 } else { 100_000 };
    section(&format!("{n} parked green threads, each on its own 32 KiB stack with a guard page"));
    let rt = purloin::runtime::Builder::new().stack_size(StackSize::Small).build().unwrap();
    let maps_before = mappings();
    let rss_before = kib("/proc/self/status", "VmRSS:");
    let parked = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (p, r) = (parked.clone(), release.clone());
            rt.spawn(move || {
                p.fetch_add(1, Ordering::Relaxed);
                while !r.load(Ordering::Acquire) {
                    purloin::park();
                }
            })
        })
        .collect();
    while parked.load(Ordering::Relaxed) < n {
        std::thread::sleep(Duration::from_millis(5));
    }
    let spawned_in = t.elapsed();
    let maps_after = mappings();
    let rss_after = kib("/proc/self/status", "VmRSS:");
    let threads: Vec<GreenThread> = handles.iter().map(|h| *h.thread()).collect();
    println!(
        "   all parked after {:.2} s; memory mappings {} -> {} (+{}), RSS +{:.0} MiB = {:.2} KiB per \
         parked green thread",
        spawned_in.as_secs_f64(),
        maps_before,
        maps_after,
        maps_after.saturating_sub(maps_before),
        (rss_after.saturating_sub(rss_before)) as f64 / 1024.0,
        (rss_after.saturating_sub(rss_before)) as f64 / n as f64,
    );
    println!(
        "   (an mprotect guard costs 2 mappings per stack: at vm.max_map_count = {} that design \
         stops near {} stacks)",
        std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap_or_default().trim(),
        std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .map_or(0, |m| m / 2)
    );
    let t = Instant::now();
    release.store(true, Ordering::Release);
    for g in &threads {
        g.unpark();
    }
    for h in handles {
        h.join().unwrap();
    }
    println!("   woken and joined in {:.2} s\n", t.elapsed().as_secs_f64());
    drop(rt);
    purloin::stack::trim();
}

/// Part 5: A panic inside a green thread reaches its joiner, like std::thread.
fn panics_reach_join() {
    section("a panic inside a green thread is handed to join() as Err");
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let h = Builder::new()
        .name("doomed".into())
        .spawn(|| -> u32 { panic!("something broke") })
        .unwrap();
    let err = h.join().unwrap_err();
    std::panic::set_hook(prev);
    println!(
        "   join() = Err({:?}); the runtime keeps going: {}\n",
        err.downcast_ref::<&str>().unwrap(),
        purloin::spawn(|| "still running").join().unwrap()
    );
}

/// Part 6: A stack overflow lands on the guard page; the handler names the green thread.
fn stack_overflow() {
    section("a stack overflow is caught on the guard page (in a child process)");
    let exe = std::env::current_exe().expect("the tour's own path");
    let out = Command::new(exe).env("PURLOIN_TOUR_OVERFLOW", "1").output();
    match out {
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let line = stderr.lines().find(|l| l.contains("overflowed")).unwrap_or("(no message)");
            println!("   child said: {line}");
            println!("   child ended with: {}\n", out.status);
        }
        Err(e) => println!("   could not start the child: {e}\n"),
    }
}

fn overflow_child() -> ! {
    #[allow(unconditional_recursion)] // on purpose: it ends on the guard page
    fn recurse(depth: u64) -> u64 {
        let buf = [depth as u8; 512];
        black_box(&buf);
        recurse(depth + 1) + black_box(buf[0] as u64)
    }
    let h = Builder::new()
        .name("deep-recursion".into())
        .stack_size(StackSize::Small)
        .spawn(|| recurse(0))
        .unwrap();
    let _ = h.join();
    std::process::exit(0)
}

/// Part 7: state machines (`purloin::machine`) stepped by the same scheduler, no
/// stack each.
fn machine_workflow() {
    section(
        "state machines: a crawl workflow of machines with fetch commands answered by handlers",
    );
    let t = Instant::now();
    let summary = machines::run();
    println!("   ({} sites crawled in {:.1} ms)\n", summary.len(), t.elapsed().as_secs_f64() * 1e3);
}

/// Part 8: Blocking-style socket I/O on green threads, scheduled by readiness (the netpoller).
fn echo_over_loopback() {
    section("echo over loopback: 100 client green threads x 1,000 requests of 100 bytes");
    use std::io::{Read, Write};
    let rt = purloin::runtime::Builder::new().build().unwrap();
    let (clients, requests) = (100usize, 1_000usize);
    let el = rt.block_on(|| {
        let listener = purloin::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = purloin::spawn(move || {
            for _ in 0..clients {
                let (mut s, _) = listener.accept().unwrap();
                purloin::spawn(move || {
                    let mut buf = [0u8; 100];
                    while s.read_exact(&mut buf).is_ok() {
                        if s.write_all(&buf).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let t = Instant::now();
        let hs: Vec<_> = (0..clients)
            .map(|c| {
                purloin::spawn(move || {
                    let mut s = purloin::net::TcpStream::connect(addr).unwrap();
                    s.set_nodelay(true).unwrap();
                    let msg = [c as u8; 100];
                    let mut back = [0u8; 100];
                    for _ in 0..requests {
                        s.write_all(&msg).unwrap();
                        s.read_exact(&mut back).unwrap();
                        assert_eq!(back, msg);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let el = t.elapsed();
        server.join().unwrap();
        el
    });
    let total = clients * requests;
    println!(
        "   {total} request/responses in {:.0} ms: {:.0} k req/s (runtime/examples/echo_client.rs \
         measures latency percentiles and compares with tokio, may, std and Go)\n",
        el.as_secs_f64() * 1e3,
        total as f64 / el.as_secs_f64() / 1e3
    );
}

/// Part 9: What the scheduler did.
/// Part 9: OS child processes, signals and timer channels, all parking green threads.
fn children_signals_timers() {
    section("child processes, signals and timers in select! (green threads park, workers run)");
    purloin::spawn(|| {
        let t = Instant::now();
        let out = purloin::process::output(Command::new("echo").arg("from a child")).unwrap();
        println!(
            "   child: {:?} exited {} in {:.1} ms (waited on a pidfd through the netpoller)",
            String::from_utf8_lossy(&out.stdout).trim_end(),
            out.status,
            t.elapsed().as_secs_f64() * 1e3
        );
        let signals = purloin::signal::Signals::new(&[purloin::signal::Signal::USR1]).unwrap();
        // SAFETY: plain system call; SIGUSR1 is handled by `signals`.
        unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
        let timeout = purloin::time::after(Duration::from_secs(5));
        purloin::select! {
            recv(signals.receiver()) -> sig => println!("   signal: received {}", sig.unwrap()),
            recv(timeout) -> _ => println!("   signal: none within 5 s"),
        }
        let ticker = purloin::time::Ticker::new(Duration::from_millis(1));
        let t = Instant::now();
        for _ in 0..10 {
            ticker.recv().unwrap();
        }
        println!("   ticker: 10 ticks of 1 ms in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    })
    .join()
    .unwrap();
    println!();
}

/// A request fans out to four backends; one fails, and `try_scope` cancels the others, which
/// were parked in a channel receive, a sleep and a socket read.
fn cancelled_fan_out() {
    section("cancellation: a fan-out where one branch fails and the others are cancelled");
    purloin::spawn(|| {
        let (_never_tx, never_rx) = purloin::sync::channel::unbounded::<u32>();
        let (sock, _peer) = purloin::net::UnixStream::pair().unwrap();
        let failed = std::sync::Mutex::new(None::<Instant>);
        let stopped = std::sync::Mutex::new(Vec::new());
        let stop = |what: &'static str, how: String| {
            stopped.lock().unwrap().push((what, how, Instant::now()));
        };
        let stop = &stop;
        let request = purloin::cancel::CancelToken::new().with_timeout(Duration::from_secs(30));
        let r: Result<(), String> = purloin::cancel::try_scope_in(&request, |s| {
            s.spawn(|| {
                let r = never_rx.recv();
                stop("cache lookup (channel recv)", format!("{r:?}"));
                Ok(())
            });
            s.spawn(|| {
                purloin::sleep(Duration::from_secs(3600));
                stop("retry backoff (sleep)", format!("interrupted: {}", purloin::interrupted()));
                Ok(())
            });
            s.spawn(|| {
                let mut buf = [0u8; 64];
                let r = std::io::Read::read(&mut &sock, &mut buf);
                stop("database (socket read)", format!("{:?}", r.map_err(|e| e.kind())));
                Ok(())
            });
            s.spawn(|| {
                purloin::sleep(Duration::from_millis(2));
                *failed.lock().unwrap() = Some(Instant::now());
                Err("the auth backend answered 503".to_string())
            });
            Ok(())
        });
        let at = failed.lock().unwrap().unwrap();
        println!("   the request failed: {}", r.unwrap_err());
        for (what, how, t) in stopped.into_inner().unwrap() {
            println!(
                "   {what:<28} stopped {:>6.1} µs after the failure: {how}",
                t.saturating_duration_since(at).as_secs_f64() * 1e6
            );
        }
        println!(
            "   the request's token is {:?} (its 30 s deadline never fired)",
            request.reason()
        );
    })
    .join()
    .unwrap();
    println!();
}

fn scheduler_stats() {
    section("scheduler stats of the global runtime");
    let s = purloin::stats();
    println!(
        "   workers {}, OS threads {}, green threads switched in {}, spawned {}, yields {}",
        s.procs.len(),
        s.threads,
        s.total.switches,
        s.total.spawned,
        s.total.yields
    );
    println!(
        "   steals {} of {} attempts ({} moved), global pulls {}, run inline by joiners {}",
        s.total.steals,
        s.total.steal_attempts,
        s.total.stolen,
        s.total.global_pulls,
        s.total.inline_joins
    );
    println!(
        "   worker parks {}, wake-ups sent {} / skipped {}, blocking handoffs {}",
        s.total.parks, s.global.wakes_sent, s.global.wakes_skipped, s.global.handoffs
    );
    println!("   (set PURLOIN_SCHEDTRACE=1000 for a line like this every second)");
}

/// A dump: every green thread, and where a parked one is stuck (its own stack).
fn dump_of_a_stuck_thread() {
    section("a dump: where every green thread is (purloin::debugging)");
    let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
    let waiter = purloin::spawn(move || rx.recv());
    while !purloin::debugging::dump()
        .threads
        .iter()
        .any(|t| t.id == waiter.thread().id() && t.state == purloin::sched::GreenState::Parked)
    {
        std::thread::yield_now();
    }
    let dump = purloin::debugging::dump();
    if let Some(t) = dump.threads.iter().find(|t| t.id == waiter.thread().id()) {
        println!("   green thread {} is {}; its stack, innermost first:", t.id, t.state);
        if let Some(bt) = &t.backtrace {
            for f in bt.frames.iter().take(8) {
                println!("     {}", f.function.as_deref().unwrap_or("?"));
            }
        }
    }
    println!("   (PURLOIN_DUMP_SIGNAL=SIGQUIT prints the whole dump on `kill -QUIT`)");
    tx.send(1).unwrap();
    waiter.join().unwrap().unwrap();
}

/// What an operator asks of a busy service: run time and switches per green thread, how long
/// runnable green threads wait for a worker, threads grouped by where they wait (and for whom,
/// by label), and the last seconds of scheduling kept in memory until something goes wrong.
fn production_diagnostics() {
    section("production diagnostics: run time, latency, grouped dump, labels, flight recorder");
    let recorder = purloin::trace::flight_recorder().max_age(Duration::from_secs(2));
    let recording = recorder.start().is_ok();

    // Run time and switches per green thread (brpc's cputime_ns and nswitch).
    let busy = purloin::spawn(|| {
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(60) {
            for i in 0..10_000u64 {
                x = black_box(x.rotate_left(3) ^ i);
            }
            purloin::yield_now();
        }
        let me = purloin::current().unwrap();
        (me.cpu_time(), me.switches())
    });
    if let (Some(cpu), Some(switches)) = busy.join().unwrap() {
        println!(
            "   a green thread that spun 60 ms between yields: ran {cpu:.1?} in {switches} switches"
        );
    }

    // 10,000 request handlers parked in two places, under their route's labels.
    let (tx, rx) = channel::bounded::<()>(0);
    let mut handlers = Vec::new();
    for i in 0..10_000 {
        let route = if i % 4 == 0 { "/checkout" } else { "/search" };
        let rx = rx.clone();
        handlers.push(purloin::labels::with(purloin::labels!("route" => route), || {
            purloin::spawn(move || {
                if i % 4 == 0 {
                    purloin::sleep(Duration::from_secs(3600));
                } else {
                    let _ = rx.recv();
                }
            })
        }));
    }
    while purloin::debugging::dump_grouped().count(purloin::sched::GreenState::Parked) < 10_000 {
        purloin::sleep(Duration::from_millis(1));
    }
    let t = Instant::now();
    let grouped = purloin::debugging::dump_grouped();
    let took = t.elapsed();
    println!(
        "   grouped dump of {} green threads in {took:.1?}, {} groups; the largest:",
        grouped.threads,
        grouped.groups.len()
    );
    for g in grouped.groups.iter().take(2) {
        let labels = g.labels.as_ref().map(|l| format!("{l}")).unwrap_or_default();
        let wait = g.wait.map(|w| format!("{w:?}")).unwrap_or_else(|| "-".into());
        let at = g.spawned_at.map(|a| format!("{}:{}", a.file(), a.line())).unwrap_or_default();
        println!("     {:>6} x {} on {wait}, spawned at {at} {labels}", g.count, g.state);
    }
    for h in &handlers {
        h.interrupt();
    }
    drop(tx);
    for h in handlers {
        let _ = h.join();
    }

    // How long runnable green threads waited for a worker (Go's /sched/latencies), sampled.
    let lat = purloin::stats().sched_latency();
    if lat.count() > 0 {
        println!(
            "   scheduling latency: {} samples, mean {:.1?} (purloin_sched_latency_seconds)",
            lat.count(),
            lat.sum() / lat.count() as u32
        );
    }

    // The flight recorder: the last 2 s of the scheduler's events, written on demand.
    if recording {
        let path = std::env::temp_dir().join(format!("purloin-tour-{}.json", std::process::id()));
        match recorder.write_to(&path) {
            Ok(summary) => {
                let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                println!(
                    "   flight recorder: the last {} events written on demand ({} KiB)",
                    summary.events,
                    bytes / 1024
                );
            }
            Err(e) => println!("   flight recorder: {e}"),
        }
        let _ = std::fs::remove_file(&path);
        let _ = recorder.stop();
    }
    println!("   (examples/diagnostics.rs serves /metrics and writes a flight file on SIGUSR1)");
}
