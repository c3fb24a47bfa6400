//! Profiling helper: the cost of a dump of many parked green threads.
//!
//! `cargo bench -p purloin --bench profile_dump_scale -- [n] [what]`
//! (defaults: 100,000 green threads; `what` is `full`, `grouped` or `both`, the default).
//!
//! The root green thread spawns `n` green threads (default stacks), a quarter of them in each
//! of four functions that wait on a channel receive, and waits until all of them are parked.
//! Then, from the root: `full` takes `purloin::debugging::dump()` (a backtrace per green
//! thread) and formats it; `grouped` takes `purloin::debugging::dump_grouped()` (one entry per
//! distinct stack, wait and spawn site) and formats it. Printed: the time to collect, the time
//! to format, the text's size, and the process's peak RSS (`DUMP_SCALE_SHOW=1`: also the first
//! 3,000 bytes of the full text, on stderr).
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use purloin::sync::channel::Receiver;

/// A `/proc/self/status` field in KiB.
fn status_kib(field: &str) -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[inline(never)]
fn wait_a(rx: &Receiver<()>) {
    let _ = rx.recv();
}

#[inline(never)]
fn wait_b(rx: &Receiver<()>) {
    let _ = rx.recv();
}

#[inline(never)]
fn wait_c(rx: &Receiver<()>) {
    wait_a(rx);
}

#[inline(never)]
fn wait_d(rx: &Receiver<()>) {
    wait_b(rx);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000).max(1);
    let what = args.get(1).cloned().unwrap_or_else(|| "both".into());
    let workers = 2;
    let rt = purloin::runtime::Builder::new().workers(workers).build().unwrap();
    rt.block_on(move || {
        let t = Instant::now();
        let (tx, rx) = purloin::sync::channel::bounded::<()>(0);
        let arrived = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (rx, arrived) = (rx.clone(), arrived.clone());
                purloin::spawn(move || {
                    arrived.fetch_add(1, Ordering::Relaxed);
                    match i % 4 {
                        0 => wait_a(&rx),
                        1 => wait_b(&rx),
                        2 => wait_c(&rx),
                        _ => wait_d(&rx),
                    }
                })
            })
            .collect();
        drop(rx);
        // All parked: every green thread got past its bump, nothing is queued, and the other
        // worker is parked or searching.
        loop {
            if arrived.load(Ordering::Relaxed) == n {
                let s = purloin::stats();
                if s.global_queue_len == 0
                    && s.queue_lens.iter().all(|&q| q == 0)
                    && (s.parked + s.searching) as usize + 1 >= workers
                {
                    break;
                }
            }
            purloin::sleep(Duration::from_millis(1));
        }
        println!("{n} parked in {:.3} s, RSS {} MiB", t.elapsed().as_secs_f64(), status_kib("VmRSS:") / 1024);
        if what == "full" || what == "both" {
            let t = Instant::now();
            let dump = purloin::debugging::dump();
            let collect = t.elapsed();
            let t = Instant::now();
            let text = dump.to_string();
            if std::env::var_os("DUMP_SCALE_SHOW").is_some() {
                eprintln!("{}", &text[..text.len().min(3000)]);
            }
            let format = t.elapsed();
            println!(
                "full:    collect {:.3} s, format {:.3} s, {} threads, {:.1} MB of text, peak RSS {} MiB",
                collect.as_secs_f64(),
                format.as_secs_f64(),
                dump.threads.len(),
                text.len() as f64 / 1e6,
                status_kib("VmHWM:") / 1024
            );
        }
        if what == "grouped" || what == "both" {
            let t = Instant::now();
            let dump = purloin::debugging::dump_grouped();
            let collect = t.elapsed();
            let t = Instant::now();
            let text = dump.to_string();
            let format = t.elapsed();
            println!(
                "grouped: collect {:.3} s, format {:.3} s, {} threads in {} groups, {:.1} KB of text, peak RSS {} MiB",
                collect.as_secs_f64(),
                format.as_secs_f64(),
                dump.threads,
                dump.groups.len(),
                text.len() as f64 / 1e3,
                status_kib("VmHWM:") / 1024
            );
        }
        let t = Instant::now();
        drop(tx);
        for h in handles {
            h.join().unwrap();
        }
        println!("woken and joined in {:.3} s", t.elapsed().as_secs_f64());
    });
}
