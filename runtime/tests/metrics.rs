//! Metrics: the Prometheus text output parses (names, types, values), counters are monotonic,
//! and green threads by state add up.
#![cfg(not(loom))]

mod rt_common;

use std::collections::HashMap;
use std::time::Duration;

/// Parses the text format: `# TYPE name kind` lines and `name{labels} value` samples (a
/// histogram's samples are `name_bucket`, `name_sum` and `name_count`).
fn parse(text: &str) -> (HashMap<String, String>, HashMap<String, f64>) {
    let mut types = HashMap::new();
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(matches!(kind, "counter" | "gauge" | "histogram"), "{line}");
            types.insert(name.to_string(), kind.to_string());
        } else if line.starts_with("# HELP ") || line.is_empty() {
        } else {
            let (key, value) = line.rsplit_once(' ').expect("sample: name value");
            let name = key.split('{').next().unwrap();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "bad metric name in {line}"
            );
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| {
                    let base = name.strip_suffix(suffix)?;
                    (types.get(base).map(String::as_str) == Some("histogram")).then_some(base)
                })
                .unwrap_or(name);
            assert!(types.contains_key(family), "sample before its TYPE: {line}");
            let v: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line}"));
            assert!(v >= 0.0, "{line}");
            samples.insert(key.to_string(), v);
        }
    }
    (types, samples)
}

#[test]
fn prometheus_text_parses_and_counters_are_monotonic() {
    let _w = rt_common::watchdog("metrics", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    rt.block_on(|| {
        let (types, first) = parse(&purloin::metrics::prometheus());
        assert_eq!(types["purloin_switches_total"], "counter");
        assert_eq!(types["purloin_green_threads"], "gauge");
        assert!(first.contains_key("purloin_switches_total{worker=\"1\"}"));
        let hs: Vec<_> = (0..100).map(|i| purloin::spawn(move || i)).collect();
        for h in hs {
            h.join().unwrap();
        }
        let parked = purloin::spawn(purloin::park);
        while purloin::debugging::dump().count(purloin::sched::GreenState::Parked) == 0 {
            purloin::yield_now();
        }
        let (_, second) = parse(&purloin::metrics::prometheus());
        for (k, v) in &first {
            if k.split('{').next().unwrap().ends_with("_total") {
                assert!(second[k] >= *v, "{k} went down: {v} -> {}", second[k]);
            }
        }
        let spawned: f64 = second
            .iter()
            .filter(|(k, _)| k.starts_with("purloin_spawned_total"))
            .map(|(_, v)| v)
            .sum();
        assert!(spawned >= 101.0, "spawned {spawned}");
        assert!(second["purloin_green_threads{state=\"parked\"}"] >= 1.0);
        assert!(second["purloin_green_threads{state=\"running\"}"] >= 1.0); // this one
        parked.thread().unpark();
        parked.join().unwrap();
    });
}

/// A timed wait shows as a pending timer (in `Stats` and the text) until it ends; a wait that
/// ends early deletes its timer.
#[test]
fn timers_pending_counts_a_timed_wait() {
    let _w = rt_common::watchdog("timers_pending", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    rt.block_on(|| {
        let sleeper = purloin::spawn(|| purloin::park_timeout(Duration::from_secs(3600)));
        while purloin::debugging::dump().count(purloin::sched::GreenState::Parked) == 0 {
            purloin::yield_now();
        }
        let s = purloin::stats();
        assert_eq!(s.timers_pending.len(), 2);
        assert_eq!(s.timers_pending.iter().sum::<usize>(), 1, "{:?}", s.timers_pending);
        let (types, samples) = parse(&purloin::metrics::prometheus());
        assert_eq!(types["purloin_timers_pending"], "gauge");
        let text: f64 = samples
            .iter()
            .filter(|(k, _)| k.starts_with("purloin_timers_pending{"))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(text, 1.0);
        sleeper.thread().unpark();
        sleeper.join().unwrap();
        assert_eq!(purloin::stats().timers_pending.iter().sum::<usize>(), 0);
    });
}

/// Checks that `name` is a Prometheus histogram per worker (`workers` of them) in `text`:
/// cumulative buckets that never decrease, one per bound of `DurationHistogram` and `+Inf`,
/// whose `+Inf` bucket equals its `_count`, and a `_sum`. Returns the counts' total.
fn check_histogram(text: &str, name: &str, workers: usize) -> f64 {
    let (types, samples) = parse(text);
    assert_eq!(types[name], "histogram", "{text}");
    let mut total = 0.0;
    for w in 0..workers {
        let mut buckets: Vec<(f64, f64)> = samples
            .iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix(&format!("{name}_bucket{{worker=\"{w}\",le=\""))?;
                let le = rest.strip_suffix("\"}")?;
                let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() };
                Some((le, *v))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(buckets.len(), purloin::sched::DurationHistogram::BUCKETS, "{text}");
        assert!(buckets.windows(2).all(|p| p[0].1 <= p[1].1), "not cumulative: {text}");
        let count = samples[&format!("{name}_count{{worker=\"{w}\"}}")];
        assert_eq!(buckets.last().unwrap(), &(f64::INFINITY, count), "{text}");
        assert!(samples.contains_key(&format!("{name}_sum{{worker=\"{w}\"}}")), "{text}");
        total += count;
    }
    total
}

/// `purloin_sched_latency_seconds` is always there, a histogram per worker; two green threads
/// that wake each other many times on one worker give it samples.
#[test]
fn sched_latency_is_a_prometheus_histogram() {
    const ROUNDS: u32 = 1000;
    let _w = rt_common::watchdog("sched latency text", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    rt.block_on(|| {
        let (tx1, rx1) = purloin::sync::channel::bounded::<u32>(0);
        let (tx2, rx2) = purloin::sync::channel::bounded::<u32>(0);
        let echo = purloin::spawn(move || {
            for v in rx1.iter() {
                tx2.send(v).unwrap();
            }
        });
        for i in 0..ROUNDS {
            tx1.send(i).unwrap();
            assert_eq!(rx2.recv().unwrap(), i);
        }
        drop(tx1);
        echo.join().unwrap();
        let text = purloin::metrics::prometheus();
        // About one in 64 of the ~2000 wake-ups is timed.
        let samples = check_histogram(&text, "purloin_sched_latency_seconds", 1);
        assert!(samples >= 1.0, "{text}");
    });
}

/// With the park histogram on, `purloin_park_duration_seconds` is a histogram per worker whose
/// cumulative buckets never decrease, whose `+Inf` bucket equals its `_count`, and whose
/// counts add up to at least the parks the program made (other green threads of the runtime
/// may park too); off, it is absent.
#[test]
fn park_histogram_is_a_prometheus_histogram() {
    const PARKS: u32 = 50;
    let _w = rt_common::watchdog("park histogram text", Duration::from_secs(120));
    let off = purloin::runtime::Builder::new().workers(1).park_histogram(false).build().unwrap();
    off.block_on(|| {
        let (types, _) = parse(&purloin::metrics::prometheus());
        assert!(!types.contains_key("purloin_park_duration_seconds"));
    });
    let rt = purloin::runtime::Builder::new().workers(2).park_histogram(true).build().unwrap();
    rt.block_on(|| {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU32, Ordering};
        let round = Arc::new(AtomicU32::new(u32::MAX));
        let r2 = round.clone();
        let parker = purloin::spawn(move || {
            for i in 0..PARKS {
                r2.store(i, Ordering::Release);
                purloin::park();
            }
        });
        let id = parker.thread().id();
        let parked = || {
            purloin::sched::current_worker_states()
                .unwrap()
                .threads
                .iter()
                .any(|t| t.id == id && t.state == purloin::sched::GreenState::Parked)
        };
        for i in 0..PARKS {
            // Released only once it has parked: each `park` call is one park.
            while round.load(Ordering::Acquire) != i || !parked() {
                purloin::yield_now();
            }
            parker.thread().unpark();
        }
        parker.join().unwrap();
        let text = purloin::metrics::prometheus();
        let total = check_histogram(&text, "purloin_park_duration_seconds", 2);
        assert!(total >= f64::from(PARKS), "{total} parks counted: {text}");
    });
}
