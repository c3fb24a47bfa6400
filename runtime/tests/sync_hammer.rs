//! Hammer: many short rounds of 2 producers / 2 consumers on a bounded channel, spawned from a
//! root green thread that joins them (so join-helping runs some of them inline), on 2
//! workers. Each round must deliver every message exactly once and end.
//!
//! This shape found a lost wake-up in the scheduler (an unpark merged into a pending token
//! without a write, sched's `g::loom_state::wake_merged_into_pending_token_is_not_lost`): a
//! consumer or producer parked for good after 1,000–9,000 rounds, but only in optimized builds.
//! `cargo xtask ci` therefore also runs this file with `--release` (100,000 rounds, ~10 s), where
//! the old code deadlocked in 4 of 4 tries (the runtime's deadlock detection panics the test);
//! debug builds run a short version.
#![cfg(not(loom))]

mod sync_util;

use std::time::{Duration, Instant};

use purloin::sync::channel::bounded;
use sync_util::watchdog;

#[test]
fn bounded_2p2c_rounds_end_and_deliver_everything() {
    let (rounds, budget) = if cfg!(debug_assertions) {
        (300, Duration::from_secs(20))
    } else {
        (100_000, Duration::from_secs(30))
    };
    let _w = watchdog("hammer", budget + Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let start = Instant::now();
    for round in 0..rounds {
        // A work budget, not a timing assertion: slow machines run fewer rounds.
        if start.elapsed() > budget {
            break;
        }
        let per = 1 + (round % 3000);
        let (sent, received) = rt.block_on(|| {
            let (tx, rx) = bounded::<u64>(1024);
            let producers: Vec<_> = (0..2)
                .map(|_| {
                    let tx = tx.clone();
                    purloin::spawn(move || {
                        (0..per).map(|i| tx.send(i).map(|()| i).unwrap()).sum::<u64>()
                    })
                })
                .collect();
            drop(tx);
            let consumers: Vec<_> = (0..2)
                .map(|_| {
                    let rx = rx.clone();
                    purloin::spawn(move || rx.iter().sum::<u64>())
                })
                .collect();
            let sent: u64 = producers.into_iter().map(|h| h.join().unwrap()).sum();
            let received: u64 = consumers.into_iter().map(|h| h.join().unwrap()).sum();
            (sent, received)
        });
        assert_eq!(sent, received, "round {round}: every message received exactly once");
        assert_eq!(sent, per * (per - 1), "round {round}");
    }
}
