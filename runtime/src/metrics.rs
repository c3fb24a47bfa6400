//! Metrics in the Prometheus text exposition format (version 0.0.4), without an HTTP
//! dependency: serve [`prometheus`]'s string from whatever `/metrics` handler you have.
//!
//! Counters (`_total`) are the scheduler's [`Stats`] (monotonic since the runtime
//! started, per worker with a `worker` label); gauges are queue depths, timers pending, workers
//! searching and parked, live green threads and green threads by state (one pass over the
//! green-thread records, no green thread held). With the park histogram on
//! ([`Builder::park_histogram`](crate::runtime::Builder::park_histogram) or
//! `PURLOIN_PARK_HISTOGRAM=1`), `purloin_park_duration_seconds` is a Prometheus histogram per
//! worker: cumulative `_bucket`s at powers of two from 1.024 µs to 68.7 s and `+Inf`, `_sum`
//! and `_count` (see [`ParkHistogram`](purloin_sched::ParkHistogram)).
//! `purloin_sched_latency_seconds` is a histogram per worker of the same shape, always there:
//! how long runnable green threads waited for a worker (Go's `/sched/latencies:seconds`), from
//! a sample of the transitions (see [`Stats::sched_latency`]: `_count` is the number of
//! samples, not of transitions).

use std::fmt::Write as _;

use purloin_sched::{Dump, DurationHistogram, GreenState, Stats};

/// The metrics of the runtime running the current green thread (of the global runtime, from
/// a plain thread) in the Prometheus text format.
///
/// # Examples
///
/// ```
/// purloin::spawn(|| ()).join().unwrap();
/// let text = purloin::metrics::prometheus();
/// assert!(text.contains("# TYPE purloin_switches_total counter"));
/// ```
pub fn prometheus() -> String {
    let states = purloin_sched::current_worker_states()
        .unwrap_or_else(|| crate::rt::global().scheduler().states());
    render(&crate::stats(), &states)
}

/// Renders a stats snapshot and a state dump (see [`prometheus`]).
pub(crate) fn render(s: &Stats, states: &Dump) -> String {
    let mut out = String::new();
    let mut counter = |name: &str, help: &str, per: &dyn Fn(&purloin_sched::ProcStats) -> u64| {
        let _ = writeln!(out, "# HELP purloin_{name}_total {help}");
        let _ = writeln!(out, "# TYPE purloin_{name}_total counter");
        for (i, p) in s.procs.iter().enumerate() {
            let _ = writeln!(out, "purloin_{name}_total{{worker=\"{i}\"}} {}", per(p));
        }
    };
    counter("switches", "Green threads switched in.", &|p| p.switches);
    counter("spawned", "Green threads spawned.", &|p| p.spawned);
    counter("yields", "Yields.", &|p| p.yields);
    counter("steals", "Successful steals.", &|p| p.steals);
    counter("steal_attempts", "Steal attempts.", &|p| p.steal_attempts);
    counter("stolen", "Green threads moved by steals.", &|p| p.stolen);
    counter("global_pulls", "Takes from the global queue.", &|p| p.global_pulls);
    counter("worker_parks", "Times a worker parked its OS thread.", &|p| p.parks);
    counter("inline_joins", "Children run inline by their joiner.", &|p| p.inline_joins);
    counter("blocking_sections", "Blocking sections entered.", &|p| p.blocking);
    let mut global = |name: &str, help: &str, v: u64| {
        let _ = writeln!(out, "# HELP purloin_{name}_total {help}");
        let _ = writeln!(out, "# TYPE purloin_{name}_total counter");
        let _ = writeln!(out, "purloin_{name}_total {v}");
    };
    global("wakes_sent", "Wake-ups sent to parked workers.", s.global.wakes_sent);
    global("wakes_skipped", "Submissions that needed no wake-up.", s.global.wakes_skipped);
    global("handoffs", "Processors handed off from blocked workers.", s.global.handoffs);
    global("threads_started", "Worker OS threads started.", s.global.threads_started);
    global("long_runners", "Green threads reported for running too long.", s.global.long_runners);
    let mut gauge = |name: &str, help: &str, rows: &[(String, u64)]| {
        let _ = writeln!(out, "# HELP purloin_{name} {help}");
        let _ = writeln!(out, "# TYPE purloin_{name} gauge");
        for (labels, v) in rows {
            let _ = writeln!(out, "purloin_{name}{labels} {v}");
        }
    };
    let local: Vec<(String, u64)> = s
        .queue_lens
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("{{worker=\"{i}\"}}"), *n as u64))
        .collect();
    gauge("local_queue_depth", "Runnable green threads in a worker's local queue.", &local);
    let timers: Vec<(String, u64)> = s
        .timers_pending
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("{{worker=\"{i}\"}}"), *n as u64))
        .collect();
    gauge("timers_pending", "Timers not yet fired or deleted, per worker.", &timers);
    gauge(
        "global_queue_depth",
        "Green threads in the global queue.",
        &[(String::new(), s.global_queue_len as u64)],
    );
    gauge("workers", "Processors.", &[(String::new(), s.procs.len() as u64)]);
    gauge(
        "workers_searching",
        "Workers searching for work.",
        &[(String::new(), s.searching.into())],
    );
    gauge("workers_parked", "Workers parked.", &[(String::new(), s.parked.into())]);
    gauge("threads", "OS threads running as workers.", &[(String::new(), s.threads as u64)]);
    gauge(
        "green_threads_live",
        "Green threads spawned and not finished.",
        &[(String::new(), s.live as u64)],
    );
    let by_state: Vec<(String, u64)> = [
        ("running", GreenState::Running { worker: 0 }),
        ("blocking", GreenState::Blocking { worker: None }),
        ("runnable", GreenState::Runnable),
        ("not_started", GreenState::NotStarted),
        ("parked", GreenState::Parked),
        ("run_inline", GreenState::RunInline),
        ("finished", GreenState::Finished),
    ]
    .into_iter()
    .map(|(name, st)| (format!("{{state=\"{name}\"}}"), states.count(st) as u64))
    .collect();
    gauge("green_threads", "Green threads by state.", &by_state);
    if !s.park_durations.is_empty() {
        histogram(
            &mut out,
            "purloin_park_duration_seconds",
            "How long green threads stayed parked (switch out to switch in), by the worker that \
             resumed them.",
            &s.park_durations,
        );
    }
    histogram(
        &mut out,
        "purloin_sched_latency_seconds",
        "How long runnable green threads waited for a worker (queued to switched in), by the \
         worker that ran them; a sample of the transitions.",
        &s.sched_latencies,
    );
    out
}

/// `name`, a histogram per worker (cumulative buckets, as the format wants them).
fn histogram(out: &mut String, name: &str, help: &str, per_worker: &[DurationHistogram]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (w, h) in per_worker.iter().enumerate() {
        let mut cumulative = 0;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            match DurationHistogram::upper_bound(i) {
                Some(le) => {
                    let le = le.as_secs_f64();
                    let _ =
                        writeln!(out, "{name}_bucket{{worker=\"{w}\",le=\"{le}\"}} {cumulative}");
                }
                None => {
                    let _ =
                        writeln!(out, "{name}_bucket{{worker=\"{w}\",le=\"+Inf\"}} {cumulative}");
                }
            }
        }
        let _ = writeln!(out, "{name}_sum{{worker=\"{w}\"}} {}", h.sum().as_secs_f64());
        let _ = writeln!(out, "{name}_count{{worker=\"{w}\"}} {cumulative}");
    }
}
