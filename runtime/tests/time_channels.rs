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

/// A pending `after` is neither a green thread nor a timer: a runtime shuts down without
/// waiting for it (the 60 s shutdown timeout is never used: a green-thread timer would keep
/// the shutdown waiting the whole timeout, so the watchdog would fail it). The channel does
/// not belong to the runtime: it is still pending after the shutdown, and one made there
/// fires afterwards for a plain thread.
#[test]
fn pending_after_does_not_hold_the_shutdown() {
    let _w = watchdog("pending_after_does_not_hold_the_shutdown", 20);
    let runtime = rt(2);
    let (far, near) =
        runtime.block_on(|| (after(Duration::from_secs(3600)), after(Duration::from_millis(2))));
    let report = runtime.shutdown_timeout(Duration::from_secs(60));
    assert_eq!(report.unfinished, 0);
    assert_eq!(far.try_recv(), Err(channel::TryRecvError::Empty));
    assert!(near.recv().is_ok());
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
            let t = ticker.recv().unwrap();
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
        let first = ticker.recv().unwrap();
        // Let ~20 periods pass without receiving (sleeping is the scenario, not a sync).
        purloin::sleep(Duration::from_millis(20));
        let buffered = ticker.receiver().try_recv().expect("one tick is buffered");
        assert!(buffered > first);
        assert!(ticker.receiver().try_recv().is_err(), "more than one tick piled up");
        let fresh = ticker.recv().unwrap();
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
        ticker.recv().unwrap();
        ticker.stop();
        // The tick buffered before the stop is discarded (unless the callback was sending one
        // on another thread at that very moment), then the channel disconnects.
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

/// Timers pending in the current runtime, every processor (a timed park or a callback timer
/// not yet fired or deleted).
fn timers_pending() -> usize {
    purloin::stats().timers_pending.iter().sum()
}

/// Go's timeout idiom: a fresh `after` in every `select!`, dropped unobserved when the
/// message wins. The timers of the dropped ones must not stay pending (nor their memory).
#[test]
fn unobserved_afters_in_a_select_loop_leave_no_timers() {
    let _w = watchdog("unobserved_afters_in_a_select_loop_leave_no_timers", 60);
    const MESSAGES: u64 = 20_000;
    rt(2).block_on(|| {
        let before = timers_pending();
        let (tx, rx) = channel::bounded::<u64>(16);
        let producer = purloin::spawn(move || {
            for i in 0..MESSAGES {
                tx.send(i).unwrap();
            }
        });
        let mut got = 0;
        loop {
            purloin::select! {
                recv(rx) -> m => match m {
                    Ok(_) => got += 1,
                    Err(_) => break,
                },
                recv(after(Duration::from_secs(30))) -> _ => panic!("no message for 30 s"),
            }
        }
        producer.join().unwrap();
        assert_eq!(got, MESSAGES);
        let pending = timers_pending();
        assert!(pending <= before + 4, "{pending} timers pending after the loop ({before} before)");
    });
}

/// Receivers of `after` that are dropped before their deadline leave no timer behind.
#[test]
fn dropped_after_receivers_leave_no_timers() {
    let _w = watchdog("dropped_after_receivers_leave_no_timers", 60);
    rt(2).block_on(|| {
        let before = timers_pending();
        let held: Vec<_> = (0..100_000).map(|_| after(Duration::from_secs(3600))).collect();
        drop(held);
        let pending = timers_pending();
        assert!(pending <= before + 4, "{pending} timers pending after the drop ({before} before)");
    });
}

/// The message of an `after` / `at`: not before its deadline, to exactly one receiver of the
/// clones, after which the channel is disconnected; `len` and `is_empty` follow.
#[test]
fn timer_channel_delivers_once_to_one_receiver() {
    let _w = watchdog("timer_channel_delivers_once_to_one_receiver", 30);
    let far = after(Duration::from_secs(3600));
    assert_eq!(far.try_recv(), Err(channel::TryRecvError::Empty));
    assert!(far.is_empty());
    assert_eq!(far.len(), 0);
    assert_eq!(far.capacity(), Some(1));
    assert_eq!(far.recv_timeout(Duration::from_millis(1)), Err(channel::RecvTimeoutError::Timeout));
    let past = Instant::now() - Duration::from_secs(1);
    let a = at(past);
    let b = a.clone();
    assert!(a.same_channel(&b));
    assert_eq!(a.len(), 1);
    assert!(a.is_full());
    assert_eq!(b.try_recv(), Ok(past));
    assert_eq!(a.try_recv(), Err(channel::TryRecvError::Disconnected));
    assert_eq!(a.recv(), Err(channel::RecvError::Disconnected));
    assert!(a.is_empty());
}

/// A green thread and an OS thread each wait for an `after` in a `select!`; each wakes at
/// (not before) its deadline, and a selection's own shorter timeout still wins over a far
/// timer.
#[test]
fn after_wakes_green_and_os_threads_in_select() {
    let _w = watchdog("after_wakes_green_and_os_threads_in_select", 30);
    let wait = || {
        let (_tx, quiet) = channel::unbounded::<u8>();
        let start = Instant::now();
        let timeout = after(Duration::from_millis(3));
        purloin::select! {
            recv(quiet) -> _ => panic!("nothing was sent"),
            recv(timeout) -> t => assert!(t.unwrap() >= start + Duration::from_millis(3)),
        }
        let far = after(Duration::from_secs(3600));
        let mut sel = channel::Select::new();
        sel.recv(&far);
        assert!(sel.select_timeout(Duration::from_millis(2)).is_err());
        let near = after(Duration::from_millis(2));
        let mut sel = channel::Select::new();
        let i = sel.recv(&near);
        let op = sel.select_timeout(Duration::from_secs(3600)).expect("the timer fired");
        assert_eq!(op.index(), i);
        assert!(op.recv(&near).is_ok());
    };
    wait();
    rt(2).block_on(wait);
}

/// `never` neither receives nor disconnects, in `recv_timeout` and in a `select!`.
#[test]
fn never_stays_quiet() {
    let _w = watchdog("never_stays_quiet", 30);
    rt(1).block_on(|| {
        let n = never::<String>();
        assert_eq!(n.try_recv(), Err(channel::TryRecvError::Empty));
        assert_eq!(
            n.recv_timeout(Duration::from_millis(1)),
            Err(channel::RecvTimeoutError::Timeout)
        );
        purloin::select! {
            recv(n) -> _ => panic!("never received"),
            default(Duration::from_millis(1)) => {}
        }
    });
}

/// A period too long to represent never fires, like `after(Duration::MAX)`.
#[test]
fn max_period_ticker_never_fires() {
    let _w = watchdog("max_period_ticker_never_fires", 30);
    rt(2).block_on(|| {
        let ticks = tick(Duration::MAX);
        assert_eq!(
            ticks.recv_timeout(Duration::from_millis(2)),
            Err(channel::RecvTimeoutError::Timeout)
        );
        let ticker = Ticker::new(Duration::MAX);
        assert_eq!(
            ticker.receiver().recv_timeout(Duration::from_millis(2)),
            Err(channel::RecvTimeoutError::Timeout)
        );
        ticker.stop();
    });
}

/// A ticker outlives its runtime: once the runtime is dropped its channel is disconnected
/// (`recv` returns an error at once instead of waiting for a tick that cannot come).
#[test]
fn ticker_of_a_dropped_runtime_disconnects() {
    let _w = watchdog("ticker_of_a_dropped_runtime_disconnects", 30);
    let runtime = rt(2);
    let (ticker, ticks) = runtime
        .block_on(|| (Ticker::new(Duration::from_secs(3600)), tick(Duration::from_secs(3600))));
    drop(runtime);
    assert!(ticker.recv().is_err());
    assert!(ticker.receiver().recv().is_err());
    assert!(ticks.recv().is_err());
}

/// `Ticker::recv` after `stop` is an error, also with a tick buffered before the stop.
#[test]
fn ticker_recv_after_stop_is_an_error() {
    let _w = watchdog("ticker_recv_after_stop_is_an_error", 30);
    rt(2).block_on(|| {
        let ticker = Ticker::new(Duration::from_secs(3600));
        ticker.stop();
        assert!(ticker.recv().is_err());
        let ticker = Ticker::new(Duration::from_millis(1));
        ticker.recv().unwrap();
        ticker.stop();
        assert!(ticker.recv().is_err());
        assert!(ticker.recv().is_err());
    });
}
