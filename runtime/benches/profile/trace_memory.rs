//! Profiling helper: the memory of a program that records a trace much faster than the trace's
//! writer can write it.
//!
//! `cargo bench -p purloin --bench profile_trace_memory -- [n] [workers] [shape] [off]`
//! (defaults: 8,000,000 spawn+join, 2 workers, `one`).
//!
//! Starts a trace (`purloin::trace::start`, to a file in the temporary directory, removed at
//! the end; `off`: no trace), then a root green thread spawns and joins `n` no-op green threads:
//!
//! - `one`: one at a time (`spawn(f).join()`);
//! - `waves`: in waves of 100,000 (spawn them all, then join them in spawn order).
//!
//! Prints, every `n / 8` spawns and at the end, the process's resident memory (`VmRSS`), its
//! peak (`VmHWM`) from `/proc/self/status`, the G records the scheduler ever allocated and the
//! length of the global run queue; then the trace's summary (events written and dropped).
//! What the trace's writer lags behind is dropped and counted rather than queued, so the peak
//! stays flat however large `n` is.
use std::hint::black_box;
use std::time::Instant;

/// A `/proc/self/status` field in MiB.
fn status_mib(field: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: u64 = s
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    kib as f64 / 1024.0
}

const WAVE: usize = 100_000;

fn main() {
    let args: Vec<String> =
        std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect::<Vec<_>>();
    let mut numbers = args.iter().filter_map(|a| a.parse::<usize>().ok());
    let n = numbers.next().unwrap_or(8_000_000);
    let workers = numbers.next().unwrap_or(2);
    let waves = args.iter().any(|a| a == "waves");
    let traced = !args.iter().any(|a| a == "off");
    let path =
        std::env::temp_dir().join(format!("purloin-trace-memory-{}.json", std::process::id()));
    println!(
        "before: VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        status_mib("VmRSS:"),
        status_mib("VmHWM:")
    );
    let rt = purloin::runtime::Builder::new().workers(workers).build().unwrap();
    if traced {
        purloin::trace::start(&path).unwrap();
    }
    let t = Instant::now();
    let step = (n / 8).max(1);
    let report = |done: usize| {
        let s = purloin::stats();
        println!(
            "{done:>9} spawn+join, {:6.2} s: VmRSS {:7.1} MiB, VmHWM {:7.1} MiB, G records {:7}, \
             global queue {:7}",
            t.elapsed().as_secs_f64(),
            status_mib("VmRSS:"),
            status_mib("VmHWM:"),
            s.g_records,
            s.global_queue_len,
        );
    };
    rt.block_on(|| {
        if waves {
            for w in 0..n / WAVE {
                let hs: Vec<_> = (0..WAVE).map(|i| purloin::spawn(move || black_box(i))).collect();
                for h in hs {
                    black_box(h.join().unwrap());
                }
                if ((w + 1) * WAVE) % step < WAVE {
                    report((w + 1) * WAVE);
                }
            }
        } else {
            for i in 0..n {
                black_box(purloin::spawn(move || black_box(i)).join().unwrap());
                if (i + 1) % step == 0 {
                    report(i + 1);
                }
            }
        }
    });
    let elapsed = t.elapsed();
    drop(rt);
    println!(
        "{n} spawn+join in {:.2} s; VmHWM {:.1} MiB",
        elapsed.as_secs_f64(),
        status_mib("VmHWM:")
    );
    if traced {
        let summary = purloin::trace::stop().unwrap();
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        println!(
            "trace: {} events written ({:.1} MiB), {} dropped, {} threads unflushed",
            summary.events,
            size as f64 / (1 << 20) as f64,
            summary.dropped,
            summary.unflushed_threads,
        );
        let _ = std::fs::remove_file(&path);
    }
}
