//! Profiling helper: what the flight recorder costs the program it records.
//!
//! `cargo bench -p purloin --bench profile_flight_cost -- [rounds]` (default 200,000).
//!
//! A ping-pong between two green threads on rendezvous channels (each round: two parks, two
//! unparks, two switches), on a 1-worker runtime, timed three ways: nothing recording (best of
//! three); a flight recorder running with the default bounds (best of three); a trace to a
//! file (a tenth of the rounds), whose summary gives the events per round. Printed: ns per
//! round for each, the events per round, and the flight recorder's cost per event
//! ((on - off) / events) and its event rate.
use std::time::{Duration, Instant};

fn pingpong(rt: &purloin::Runtime, rounds: u64) -> Duration {
    rt.block_on(move || {
        let (tx1, rx1) = purloin::sync::channel::bounded::<u64>(0);
        let (tx2, rx2) = purloin::sync::channel::bounded::<u64>(0);
        let h = purloin::spawn(move || {
            for v in rx1.iter() {
                tx2.send(v).unwrap();
            }
        });
        let t = Instant::now();
        for i in 0..rounds {
            tx1.send(i).unwrap();
            rx2.recv().unwrap();
        }
        let took = t.elapsed();
        drop(tx1);
        h.join().unwrap();
        took
    })
}

fn main() {
    let rounds: u64 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    pingpong(&rt, rounds / 10); // warm-up
    let best = |f: &dyn Fn() -> Duration| (0..3).map(|_| f()).min().unwrap();
    let off = best(&|| pingpong(&rt, rounds));
    let fr = purloin::trace::flight_recorder();
    fr.start().unwrap();
    let on = best(&|| pingpong(&rt, rounds));
    let ring = fr.ring_bytes();
    fr.stop().unwrap();
    let path =
        std::env::temp_dir().join(format!("purloin-flight-cost-{}.json", std::process::id()));
    let n = rounds / 10;
    purloin::trace::start(&path).unwrap();
    let file = pingpong(&rt, n);
    let summary = purloin::trace::stop().unwrap();
    std::fs::remove_file(&path).unwrap();
    let per = |d: Duration| d.as_nanos() as f64 / rounds as f64;
    let events = summary.events as f64 / n as f64;
    let cost = (per(on) - per(off)) / events;
    println!(
        "ping-pong round: off {:.0} ns, flight recorder on {:.0} ns, trace to a file {:.0} ns \
         ({:.2} trace events per round, {:.1} ns per event, {:.1} M events/s recorded; ring \
         {:.1} MiB)",
        per(off),
        per(on),
        file.as_nanos() as f64 / n as f64,
        events,
        cost,
        events * rounds as f64 / on.as_secs_f64() / 1e6,
        ring as f64 / (1 << 20) as f64
    );
}
