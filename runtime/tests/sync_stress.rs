//! Stress: 10^6-message MPMC runs with exactly-once delivery (a per-message counter) and no
//! leak (every message dropped exactly once), for each channel flavor, with green and OS
//! producers and consumers, plain receives and selects.
#![cfg(not(loom))]

mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use purloin::select;
use purloin::sync::channel::{Receiver, Sender, bounded, unbounded};
use sync_util::{runtime, watchdog};

/// A message that counts its drops.
struct Msg {
    v: u32,
    drops: &'static AtomicUsize,
}

impl Drop for Msg {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

fn leak_counter() -> &'static AtomicUsize {
    Box::leak(Box::new(AtomicUsize::new(0)))
}

/// `n` messages from `producers` (half green, half OS threads) to `consumers` (likewise);
/// checks that each value arrives exactly once and each message is dropped exactly once.
fn mpmc(
    name: &str,
    make: impl Fn() -> (Sender<Msg>, Receiver<Msg>),
    n: u32,
    producers: u32,
    consumers: u32,
    use_select: bool,
) {
    let rt = runtime(2);
    let drops = leak_counter();
    let seen: Arc<Vec<AtomicU8>> = Arc::new((0..n).map(|_| AtomicU8::new(0)).collect());
    let (tx, rx) = make();
    // A second channel that the selecting consumers also watch (never used).
    let (idle_tx, idle_rx) = make();
    let per = n / producers;
    let mut green = Vec::new();
    let mut os = Vec::new();
    for p in 0..producers {
        let tx = tx.clone();
        let body = move || {
            for i in p * per..(p + 1) * per {
                tx.send(Msg { v: i, drops }).unwrap();
            }
        };
        if p % 2 == 0 {
            green.push(rt.spawn(body));
        } else {
            os.push(thread::spawn(body));
        }
    }
    drop(tx);
    let mut green_c = Vec::new();
    let mut os_c = Vec::new();
    for c in 0..consumers {
        let (rx, idle_rx, seen) = (rx.clone(), idle_rx.clone(), seen.clone());
        let body = move || {
            let mut count = 0usize;
            loop {
                let m = if use_select && count.is_multiple_of(2) {
                    select! {
                        recv(rx) -> m => m,
                        recv(idle_rx) -> _ => unreachable!("the idle channel stays empty"),
                    }
                } else {
                    rx.recv()
                };
                match m {
                    Ok(m) => {
                        let prev = seen[m.v as usize].fetch_add(1, Ordering::Relaxed);
                        assert_eq!(prev, 0, "value {} received twice", m.v);
                        count += 1;
                    }
                    Err(_) => return count,
                }
            }
        };
        if c % 2 == 0 {
            green_c.push(rt.spawn(body));
        } else {
            os_c.push(thread::spawn(body));
        }
    }
    drop(rx);
    let mut total = 0;
    for h in green_c {
        total += h.join().unwrap();
    }
    for h in os_c {
        total += h.join().unwrap();
    }
    for h in green {
        h.join().unwrap();
    }
    for h in os {
        h.join().unwrap();
    }
    let expect = (per * producers) as usize;
    assert_eq!(total, expect, "{name}: received count");
    let missing = seen[..expect].iter().filter(|s| s.load(Ordering::Relaxed) != 1).count();
    assert_eq!(missing, 0, "{name}: values not received exactly once");
    drop((idle_tx, idle_rx));
    assert_eq!(drops.load(Ordering::Relaxed), expect, "{name}: drops (leak or double drop)");
}

#[test]
fn million_messages_bounded_1024() {
    let _w = watchdog("stress bounded(1024)", Duration::from_secs(300));
    mpmc("bounded(1024)", || bounded(1024), 1_000_000, 4, 4, false);
}

#[test]
fn million_messages_unbounded() {
    let _w = watchdog("stress unbounded", Duration::from_secs(300));
    mpmc("unbounded", unbounded, 1_000_000, 4, 4, false);
}

#[test]
fn rendezvous_and_tiny_buffers() {
    let _w = watchdog("stress small", Duration::from_secs(300));
    mpmc("bounded(0)", || bounded(0), 200_000, 4, 4, false);
    mpmc("bounded(1)", || bounded(1), 200_000, 4, 4, false);
}

#[test]
fn selecting_consumers() {
    let _w = watchdog("stress select", Duration::from_secs(300));
    mpmc("select bounded(64)", || bounded(64), 300_000, 2, 4, true);
    mpmc("select unbounded", unbounded, 300_000, 2, 4, true);
    mpmc("select bounded(0)", || bounded(0), 100_000, 2, 4, true);
}

/// Receivers dropped while senders still send: messages queued at that moment and messages
/// sent after are all dropped exactly once (no leak, no double drop).
#[test]
fn disconnect_under_load_drops_everything_once() {
    let _w = watchdog("disconnect under load", Duration::from_secs(120));
    let rt = runtime(2);
    for cap in [None, Some(16)] {
        let drops = leak_counter();
        let sent_ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = match cap {
            Some(c) => bounded(c),
            None => unbounded(),
        };
        let producers: Vec<_> = (0..4)
            .map(|_| {
                let (tx, ok, failed) = (tx.clone(), sent_ok.clone(), failed.clone());
                rt.spawn(move || {
                    for v in 0..50_000 {
                        match tx.send(Msg { v, drops }) {
                            Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                            Err(e) => {
                                drop(e);
                                failed.fetch_add(1, Ordering::Relaxed)
                            }
                        };
                    }
                })
            })
            .collect();
        drop(tx);
        let mut got = 0;
        for _ in 0..10_000 {
            if rx.recv().is_ok() {
                got += 1;
            }
        }
        drop(rx);
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(got, 10_000);
        assert_eq!(sent_ok.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed), 200_000);
        assert_eq!(drops.load(Ordering::Relaxed), 200_000, "{cap:?}: every message dropped once");
    }
}
