//! The flight recorder (`trace::flight_recorder`): its ring stays within its bound while a
//! program records far more, and a snapshot is a valid trace file that holds the last events;
//! a long-runner report writes one by itself. And what every run slice carries: where its
//! green thread was spawned, and its labels.
#![cfg(not(loom))]

mod rt_common;

use std::time::Duration;

use serde_json::Value;

use rt_common::watchdog;

/// One trace records at a time per process: the tests take turns.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A test's turn: it holds the lock, and whatever records when it ends (a failed test's
/// recorder) is stopped, so the next test can start its own.
struct Turn(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl Drop for Turn {
    fn drop(&mut self) {
        let _ = purloin::trace::stop();
    }
}

fn turn() -> Turn {
    Turn(ONE.lock().unwrap_or_else(|e| e.into_inner()))
}

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("purloin-{name}-{}.json", std::process::id()))
}

fn read_trace(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

/// The run slices (`cat` `run`) of a trace.
fn runs(trace: &Value) -> Vec<&Value> {
    trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "run").collect()
}

fn named(trace: &Value, name: &str) -> usize {
    runs(trace).iter().filter(|e| e["name"].as_str().unwrap().starts_with(name)).count()
}

/// A fresh directory for automatic snapshots, and a flight recorder started into it.
fn recording_into(name: &str) -> (std::path::PathBuf, purloin::trace::FlightRecorder) {
    let dir = std::env::temp_dir().join(format!("purloin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fr = purloin::trace::flight_recorder().dir(&dir);
    fr.start().unwrap();
    (dir, fr)
}

/// Spawns and joins enough green threads named `name` to fill and hand over the worker's
/// trace buffers.
fn spawn_named(name: &str) {
    for _ in 0..3000 {
        purloin::Builder::new().name(name.into()).spawn(|| ()).unwrap().join().unwrap();
    }
}

/// The first snapshot file the recorder writes into `dir`, once complete; `pause` runs between
/// looks (a spinning hog must not yield its worker, others may).
fn first_snapshot(dir: &std::path::Path, pause: fn()) -> Value {
    let file = loop {
        let found = std::fs::read_dir(dir).unwrap().flatten().find(|e| {
            e.file_name().to_string_lossy().starts_with("purloin-flight-")
                && e.metadata().is_ok_and(|m| m.len() > 0)
        });
        if let Some(f) = found {
            break f.path();
        }
        pause();
    };
    // The writer may still be at it: wait for the complete file.
    loop {
        let text = std::fs::read_to_string(&file).unwrap();
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            return v;
        }
        pause();
    }
}

/// A program that records far more than the ring holds (about 60 MB of records into a ring of
/// 1 MiB): the ring's bytes never go past the bound, and the snapshot written at the end is
/// valid JSON whose run slices include the last green thread's and not the first one's.
#[test]
fn the_ring_stays_within_its_bound_and_keeps_the_last_events() {
    let _w = watchdog("flight recorder bound", Duration::from_secs(300));
    let _t = turn();
    const BOUND: usize = 1 << 20;
    let fr = purloin::trace::flight_recorder().max_bytes(BOUND).max_age(Duration::from_secs(3600));
    fr.start().unwrap();
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let mut largest = 0;
    rt.block_on(|| {
        let named_spawn = |name: &str| {
            purloin::Builder::new().name(name.into()).spawn(|| ()).unwrap().join().unwrap();
        };
        named_spawn("the-first-one");
        for i in 0..150_000 {
            purloin::spawn(purloin::yield_now).join().unwrap();
            if i % 1000 == 0 {
                largest = largest.max(fr.ring_bytes());
            }
        }
        named_spawn("the-last-one");
    });
    largest = largest.max(fr.ring_bytes());
    let path = temp("flight-bound");
    let summary = fr.write_to(&path).unwrap();
    largest = largest.max(fr.ring_bytes());
    fr.stop().unwrap();
    drop(rt);
    assert!(largest > 0 && largest <= BOUND, "ring {largest} bytes, bound {BOUND}");
    let trace = read_trace(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(summary.events as usize, trace["traceEvents"].as_array().unwrap().len());
    // 80-byte records: the ring holds at most BOUND / 80 of them; a record is at most a few
    // events (a slice and its flow ends).
    assert!(summary.events as usize <= 3 * BOUND / 80 + 100, "{summary:?}");
    assert_eq!(named(&trace, "the-last-one"), 1, "the newest events are kept");
    assert_eq!(named(&trace, "the-first-one"), 0, "the oldest events are gone");
    assert!(trace["otherData"]["dropped_events"].is_u64());
    assert_eq!(fr.ring_bytes(), 0, "stopped: the ring is freed");
}

/// A snapshot asks every recording thread for its newest records: a worker that keeps running
/// a green thread (yielding now and then, never sleeping, its buffer far from full) hands them
/// over at its next event, so the snapshot holds that green thread's latest slices. The
/// snapshot is asked from the main thread, which records nothing meanwhile.
#[test]
fn a_snapshot_collects_the_records_busy_threads_hold() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let _w = watchdog("flight recorder snapshot of busy threads", Duration::from_secs(120));
    let _t = turn();
    let fr = purloin::trace::flight_recorder();
    fr.start().unwrap();
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let path = temp("flight-busy");
    let (stop, yields) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let (s, y) = (stop.clone(), yields.clone());
    let spinner = rt.spawn(move || {
        purloin::labels::with(purloin::labels!("role" => "spinner"), || {
            while !s.load(Ordering::Acquire) {
                y.fetch_add(1, Ordering::Relaxed);
                // Slow enough that its buffer (4096 records) does not fill during the
                // snapshot; a scheduling point at each turn.
                std::thread::sleep(Duration::from_millis(1));
                purloin::yield_now();
            }
        })
    });
    while yields.load(Ordering::Relaxed) < 10 {
        std::thread::yield_now();
    }
    fr.write_to(&path).unwrap();
    stop.store(true, Ordering::Release);
    spinner.join().unwrap();
    fr.stop().unwrap();
    let trace = read_trace(&path);
    std::fs::remove_file(&path).unwrap();
    let spinning = runs(&trace).iter().filter(|e| e["args"]["labels"]["role"] == "spinner").count();
    assert!(spinning >= 5, "{spinning} slices of the spinner: {trace}");
}

/// `write_to` without a flight recorder, and a second start, are refused with the cause.
#[test]
fn write_to_and_start_say_what_is_wrong() {
    let _w = watchdog("flight recorder errors", Duration::from_secs(60));
    let _t = turn();
    let fr = purloin::trace::flight_recorder();
    let e = fr.write_to(temp("flight-none")).unwrap_err();
    assert!(e.to_string().contains("no flight recorder runs"), "{e}");
    assert!(fr.clone().max_bytes(0).start().unwrap_err().to_string().contains("must not be zero"));
    let path = temp("flight-vs-file");
    purloin::trace::start(&path).unwrap();
    let e = fr.start().unwrap_err();
    assert!(e.to_string().contains("a trace already records to"), "{e}");
    let e = fr.write_to(temp("flight-none")).unwrap_err();
    assert!(e.to_string().contains("no flight recorder runs"), "{e}");
    purloin::trace::stop().unwrap();
    std::fs::remove_file(&path).unwrap();
}

/// A green thread that hogs its worker makes the monitor report a long runner; a running
/// flight recorder then writes its ring to its directory and says so on stderr.
#[test]
fn a_long_runner_report_writes_a_snapshot() {
    let _w = watchdog("flight recorder on a long runner", Duration::from_secs(120));
    let _t = turn();
    let (dir, fr) = recording_into("flight-dir");
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    rt.block_on(|| {
        // Handed-over buffers: a thread that runs a green thread without a scheduling point
        // cannot hand over the records it still holds.
        spawn_named("before-the-hog");
        // Runs without a scheduling point until a snapshot file appears (the monitor reports
        // it after 10 ms of CPU time and the recorder writes the file).
        let trace = first_snapshot(&dir, std::hint::spin_loop);
        assert!(named(&trace, "before-the-hog") > 0, "{trace}");
        // The hog's worker cannot hand over its newest records: counted as missing.
        assert!(trace["otherData"]["unflushed_threads"].as_u64().unwrap() >= 1, "{trace}");
    });
    fr.stop().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The dump signal makes a running flight recorder write its ring beside the dump it prints.
#[test]
fn the_dump_signal_writes_a_snapshot() {
    let _w = watchdog("flight recorder on the dump signal", Duration::from_secs(120));
    let _t = turn();
    let (dir, fr) = recording_into("flight-sig");
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    rt.block_on(|| spawn_named("before-the-signal"));
    purloin::debugging::dump_on_signal(purloin::signal::Signal::USR2).unwrap();
    // SAFETY: `raise` sends a signal the dispatcher installed above catches.
    assert_eq!(unsafe { libc::raise(libc::SIGUSR2) }, 0);
    let trace = first_snapshot(&dir, std::thread::yield_now);
    assert!(named(&trace, "before-the-signal") > 0, "{trace}");
    fr.stop().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every green thread's first run slice says where it was spawned, and each run slice holds
/// the labels of the green thread when it was switched in.
#[test]
fn run_slices_carry_the_spawn_site_and_the_labels() {
    let _w = watchdog("trace slice arguments", Duration::from_secs(120));
    let _t = turn();
    let path = temp("trace-args");
    purloin::trace::start(&path).unwrap();
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let line = rt.block_on(|| {
        purloin::labels::with(purloin::labels!("tenant" => "blue"), || {
            let b = purloin::Builder::new().name("labelled".into());
            let (h, line) = (b.spawn(purloin::yield_now).unwrap(), line!());
            h.join().unwrap();
            line
        })
    });
    drop(rt);
    purloin::trace::stop().unwrap();
    let trace = read_trace(&path);
    std::fs::remove_file(&path).unwrap();
    let slices: Vec<&Value> = runs(&trace)
        .into_iter()
        .filter(|e| e["name"].as_str().unwrap().starts_with("labelled G"))
        .collect();
    assert!(slices.len() >= 2, "a first run and one after its yield: {slices:?}");
    let sites: Vec<&str> = slices.iter().filter_map(|e| e["args"]["spawned_at"].as_str()).collect();
    assert_eq!(sites.len(), 1, "on the first slice only: {slices:?}");
    assert!(sites[0].ends_with(&format!("trace_flight.rs:{line}")), "{sites:?}");
    for s in &slices {
        assert_eq!(s["args"]["labels"]["tenant"], "blue", "{s}");
    }
    // The root green thread has a spawn site too (spawned by `block_on`).
    assert!(runs(&trace).iter().any(|e| e["args"]["spawned_at"].is_string()));
}
