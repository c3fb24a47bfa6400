//! `purloin::time::{after, at, tick, Ticker, never}` in `select!`, under a spinning worker,
//! and without piling up ticks. No timing is asserted beyond "not before".
#![cfg(not(loom))]

mod net_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use net_common::{rt, watchdog};
use purloin::sync::channel;
use purloin::time::{Ticker, after, at, never, tick};

#[test]
fn after_fires_once_not_early() {
    let _w = watchdog("after_fires_once_not_early", 30);
    rt(2).block_on(|| {
        let start = Instant::now();
        let rx = after(Duration::from_millis(5));
        let t = rx.recv().unwrap();
        assert!(t >= start + Duration::from_millis(5));
        // Once: nothing more arrives, and the channel disconnects when the timer ends.
        assert!(rx.recv().is_err());
        let deadline = Instant::now() - Duration::from_secs(1);
        assert!(at(deadline).recv().unwrap() >= deadline);
    });
}

#[test]
fn after_in_select_against_a_quiet_channel() {
    let _w = watchdog("after_in_select_against_a_quiet_channel", 30);
    let runtime = rt(2);
    runtime.block_on(|| {
        let (_tx, quiet) = channel::unbounded::<u8>();
        let timeout = after(Duration::from_millis(5));
        let fired = purloin::select! {
            recv(quiet) -> _ => false,
            recv(timeout) -> t => t.is_ok(),
        };
        assert!(fired);
        // A message that is there wins over a far timeout.
        let (tx, busy) = channel::unbounded();
        tx.send(7u8).unwrap();
        let far = after(Duration::from_secs(3600));
        purloin::select! {
            recv(busy) -> m => assert_eq!(m, Ok(7)),
            recv(far) -> _ => panic!("the hour passed?"),
        }
        let n = never::<()>();
        purloin::select! {
            recv(n) -> _ => panic!("never fired"),
            recv(after(Duration::from_millis(1))) -> _ => {}
        }
    });
    // The hour-long timer is still pending (a heap entry, no green thread).
    runtime.shutdown_timeout(Duration::from_millis(1));
}

/// A pending `after` is a callback timer, not a green thread: a runtime shuts down without
/// waiting for it (the 60 s shutdown timeout is never used: the old green-thread timer kept
/// the shutdown waiting the whole timeout, so the watchdog failed it), and the timer is
/// dropped with the runtime, disconnecting its channel.
#[test]
fn pending_after_does_not_hold_the_shutdown() {
    let _w = watchdog("pending_after_does_not_hold_the_shutdown", 20);
    let runtime = rt(2);
    let far = runtime.block_on(|| after(Duration::from_secs(3600)));
    let report = runtime.shutdown_timeout(Duration::from_secs(60));
    assert_eq!(report.unfinished, 0);
    assert_eq!(far.try_recv(), Err(channel::TryRecvError::Disconnected));
}

/// Ticks keep coming on a 2-worker runtime while one worker runs a green thread that spins
/// without scheduling points; the receiver sees increasing times.
#[test]
fn ticks_under_a_spinning_worker() {
    let _w = watchdog("ticks_under_a_spinning_worker", 60);
    rt(2).block_on(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let spinner = purloin::spawn(move || {
            let mut x = 0u64;
            while !s.load(Ordering::Relaxed) {
                x = x.wrapping_add(1);
                std::hint::spin_loop();
            }
            x
        });
        let ticker = Ticker::new(Duration::from_millis(2));
        let mut last = Instant::now() - Duration::from_secs(1);
        for _ in 0..10 {
            let t = ticker.recv();
            assert!(t > last);
            last = t;
        }
        ticker.stop();
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
    });
}

/// A receiver that does not look for many periods finds one buffered tick, not a burst, and
/// the next tick after that is a fresh one.
#[test]
fn missed_ticks_do_not_pile_up() {
    let _w = watchdog("missed_ticks_do_not_pile_up", 60);
    rt(2).block_on(|| {
        let ticker = Ticker::new(Duration::from_millis(1));
        let first = ticker.recv();
        // Let ~20 periods pass without receiving (sleeping is the scenario, not a sync).
        purloin::sleep(Duration::from_millis(20));
        let buffered = ticker.receiver().try_recv().expect("one tick is buffered");
        assert!(buffered > first);
        assert!(ticker.receiver().try_recv().is_err(), "more than one tick piled up");
        let fresh = ticker.recv();
        assert!(fresh > buffered);
    });
}

/// `stop` ends a ticker at once; dropping `tick`'s receiver ends its green thread at the
/// next tick (observed as the runtime shutting down without leftovers).
#[test]
fn stop_and_drop() {
    let _w = watchdog("stop_and_drop", 30);
    let runtime = rt(2);
    runtime.block_on(|| {
        let ticker = Ticker::new(Duration::from_millis(1));
        ticker.recv();
        ticker.stop();
        // At most the one tick already buffered, then the channel disconnects.
        let mut after_stop = 0;
        while ticker.receiver().recv().is_ok() {
            after_stop += 1;
        }
        assert!(after_stop <= 1);
        let rx = tick(Duration::from_millis(1));
        rx.recv().unwrap();
        drop(rx);
    });
    let report = runtime.shutdown_timeout(Duration::from_secs(10));
    assert_eq!(report.unfinished, 0);
}

#[test]
#[should_panic(expected = "greater than zero")]
fn zero_period_is_refused() {
    let _ = tick(Duration::ZERO);
}
