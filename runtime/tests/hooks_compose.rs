//! A program's own scheduler hook (`purloin::runtime::hook::install`) and the facade's trace
//! hook work side by side: the program's hook sees the parks and unparks and gets back its
//! own switch words while a trace records them too.
#![cfg(not(loom))]

mod rt_common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use purloin::runtime::hook::{self, Event, Hook};

/// Counts parks and unparks; its switch words are odd numbers it checks on the way back in
/// (0 is a green thread switched out before it was installed).
struct Mine {
    parks: AtomicU64,
    unparks: AtomicU64,
    bad_words: AtomicU64,
}

impl Hook for Mine {
    fn switch_out(&self, _finished: bool) -> usize {
        0x5EED_0001
    }

    fn switch_in(&self, saved: usize) {
        if saved != 0 && saved != 0x5EED_0001 {
            self.bad_words.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn event(&self, e: Event) {
        match e {
            Event::Park { .. } => self.parks.fetch_add(1, Ordering::Relaxed),
            Event::Unpark { .. } => self.unparks.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
    }
}

static MINE: Mine =
    Mine { parks: AtomicU64::new(0), unparks: AtomicU64::new(0), bad_words: AtomicU64::new(0) };

#[test]
fn a_program_hook_and_a_trace_both_see_the_switches() {
    const ROUNDS: usize = 200;
    let _w = rt_common::watchdog("hooks compose", Duration::from_secs(120));
    hook::install(&MINE).unwrap();
    let path =
        std::env::temp_dir().join(format!("purloin-hooks-compose-{}.json", std::process::id()));
    purloin::trace::start(&path).unwrap();
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let done = AtomicUsize::new(0);
    rt.block_on(|| {
        let (tx1, rx1) = purloin::sync::channel::bounded::<usize>(0);
        let (tx2, rx2) = purloin::sync::channel::bounded::<usize>(0);
        let echo = purloin::spawn(move || {
            for v in rx1.iter() {
                tx2.send(v).unwrap();
            }
        });
        for i in 0..ROUNDS {
            tx1.send(i).unwrap();
            assert_eq!(rx2.recv().unwrap(), i);
            done.fetch_add(1, Ordering::Relaxed);
        }
        drop(tx1);
        echo.join().unwrap();
    });
    drop(rt);
    let summary = purloin::trace::stop().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(done.load(Ordering::Relaxed), ROUNDS);
    assert!(MINE.parks.load(Ordering::Relaxed) >= ROUNDS as u64, "the program's hook saw parks");
    assert!(MINE.unparks.load(Ordering::Relaxed) >= ROUNDS as u64);
    assert_eq!(MINE.bad_words.load(Ordering::Relaxed), 0, "a word of another hook came back");
    assert!(summary.events > 2 * ROUNDS as u64, "the trace recorded the switches: {summary:?}");
    assert!(text.contains("traceEvents"));
}
