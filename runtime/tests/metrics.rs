//! Metrics: the Prometheus text output parses (names, types, values), counters are monotonic,
//! and green threads by state add up.
#![cfg(not(loom))]

mod rt_common;

use std::collections::HashMap;
use std::time::Duration;

/// Parses the text format: `# TYPE name kind` lines and `name{labels} value` samples.
fn parse(text: &str) -> (HashMap<String, String>, HashMap<String, f64>) {
    let mut types = HashMap::new();
    let mut samples = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(matches!(kind, "counter" | "gauge"), "{line}");
            types.insert(name.to_string(), kind.to_string());
        } else if line.starts_with("# HELP ") || line.is_empty() {
        } else {
            let (key, value) = line.rsplit_once(' ').expect("sample: name value");
            let name = key.split('{').next().unwrap();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "bad metric name in {line}"
            );
            assert!(types.contains_key(name), "sample before its TYPE: {line}");
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
