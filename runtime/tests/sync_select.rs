//! `select!` and `Select`: readiness, default and timeout arms, disconnected operations,
//! fairness (no arm starves), rendezvous channels selected from both sides, and the dynamic
//! API's rules.
#![cfg(not(loom))]

mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use purloin::select;
use purloin::sync::channel::{
    RecvError, Select, SelectTimeoutError, SendError, TrySelectError, bounded, unbounded,
};
use sync_util::{runtime, watchdog};

#[test]
fn picks_the_ready_operation() {
    let (tx1, rx1) = unbounded::<i32>();
    let (_tx2, rx2) = unbounded::<i32>();
    tx1.send(7).unwrap();
    let got = select! {
        recv(rx1) -> m => m.unwrap(),
        recv(rx2) -> _ => unreachable!("rx2 is empty"),
    };
    assert_eq!(got, 7);
    // A send arm on a channel with room; its message expression runs only when chosen.
    let (tx, rx) = bounded::<String>(1);
    let evaluated = AtomicUsize::new(0);
    select! {
        send(tx, { evaluated.fetch_add(1, Ordering::SeqCst); "x".to_string() }) -> r => r.unwrap(),
        recv(rx2) -> _ => unreachable!(),
    }
    assert_eq!(evaluated.load(Ordering::SeqCst), 1);
    assert_eq!(rx.recv().unwrap(), "x");
}

#[test]
fn default_and_timeout_arms() {
    let (_tx, rx) = unbounded::<i32>();
    let r = select! {
        recv(rx) -> _ => 1,
        default => 2,
    };
    assert_eq!(r, 2);
    let start = Instant::now();
    let r = select! {
        recv(rx) -> _ => 1,
        default(Duration::from_millis(5)) => 3,
    };
    assert_eq!(r, 3);
    assert!(start.elapsed() >= Duration::from_millis(5));
    // Blocks-with-timeout in a green thread too.
    let rt = runtime(1);
    rt.block_on(|| {
        let start = Instant::now();
        select! {
            recv(rx) -> _ => unreachable!(),
            default(Duration::from_millis(5)) => {}
        }
        assert!(start.elapsed() >= Duration::from_millis(5));
    });
    // Only a default: runs it.
    let r = select! { default => 4 };
    assert_eq!(r, 4);
}

/// A receive on a disconnected channel and a send on a channel without receivers are ready
/// (they complete with an error).
#[test]
fn disconnected_operations_are_ready() {
    let (tx, rx) = bounded::<i32>(0);
    drop(tx);
    select! {
        recv(rx) -> m => assert_eq!(m, Err(RecvError::Disconnected)),
        default(Duration::from_secs(10)) => panic!("a disconnected receive must be ready"),
    }
    let (tx, rx) = bounded::<i32>(1);
    drop(rx);
    select! {
        send(tx, 5) -> r => assert_eq!(r, Err(SendError::Disconnected(5))),
        default(Duration::from_secs(10)) => panic!("a disconnected send must be ready"),
    }
}

/// A select blocked on several channels wakes when any of them becomes ready, whatever kind
/// of thread sends (OS thread, green thread), for each flavor.
#[test]
fn blocked_select_wakes_on_any_operation() {
    let _w = watchdog("blocked select", Duration::from_secs(60));
    let rt = runtime(2);
    for cap in [None, Some(0), Some(3)] {
        for which in 0..3 {
            let mk = || match cap {
                Some(c) => bounded::<usize>(c),
                None => unbounded::<usize>(),
            };
            let chans: Vec<_> = (0..3).map(|_| mk()).collect();
            let rxs: Vec<_> = chans.iter().map(|(_, r)| r.clone()).collect();
            let h = rt.spawn(move || {
                select! {
                    recv(rxs[0]) -> m => (0, m.unwrap()),
                    recv(rxs[1]) -> m => (1, m.unwrap()),
                    recv(rxs[2]) -> m => (2, m.unwrap()),
                }
            });
            let tx = chans[which].0.clone();
            let sender = thread::spawn(move || tx.send(which * 10).unwrap());
            assert_eq!(h.join().unwrap(), (which, which * 10), "{cap:?}");
            sender.join().unwrap();
        }
    }
}

/// Fairness: when every arm is always ready, each is chosen a fair share of the time (no
/// arm starves). Counts per arm over many selects; the bound is loose (1/4 of the even
/// share), since the choice is random.
#[test]
fn no_arm_starves() {
    let (tx1, rx1) = unbounded::<u32>();
    let (tx2, rx2) = unbounded::<u32>();
    let (tx3, rx3) = bounded::<u32>(10_000);
    const N: usize = 30_000;
    for i in 0..N as u32 {
        tx1.send(i).unwrap();
        tx2.send(i).unwrap();
        if i < 10_000 {
            tx3.send(i).unwrap();
        }
    }
    let mut counts = [0usize; 3];
    for _ in 0..10_000 {
        select! {
            recv(rx1) -> _ => counts[0] += 1,
            recv(rx2) -> _ => counts[1] += 1,
            recv(rx3) -> _ => counts[2] += 1,
        }
    }
    for (arm, c) in counts.iter().enumerate() {
        assert!(*c > 10_000 / 3 / 4, "arm {arm} starved: {counts:?}");
    }
    // Send arms too.
    let (stx1, srx1) = unbounded::<u8>();
    let (stx2, srx2) = unbounded::<u8>();
    for _ in 0..10_000 {
        select! {
            send(stx1, 1) -> r => r.unwrap(),
            send(stx2, 2) -> r => r.unwrap(),
        }
    }
    assert!(srx1.len() > 1000 && srx2.len() > 1000, "{} {}", srx1.len(), srx2.len());
}

/// Fairness under blocking: two producers feed two channels; a green consumer selecting over
/// both receives from both (neither producer is starved), with exactly-once delivery.
#[test]
fn blocking_select_serves_every_producer() {
    let _w = watchdog("select producers", Duration::from_secs(120));
    let rt = runtime(2);
    for cap in [0, 1, 64] {
        let (tx1, rx1) = bounded::<u64>(cap);
        let (tx2, rx2) = bounded::<u64>(cap);
        const PER: u64 = 10_000;
        let p1 = rt.spawn(move || (0..PER).for_each(|i| tx1.send(i).unwrap()));
        let p2 = thread::spawn(move || (0..PER).for_each(|i| tx2.send(i + PER).unwrap()));
        let consumer = rt.spawn(move || {
            let (mut a, mut b, mut sum) = (0u64, 0u64, 0u64);
            let (mut open1, mut open2) = (true, true);
            while open1 || open2 {
                select! {
                    recv(rx1) -> m => match m {
                        Ok(v) => { a += 1; sum += v; }
                        Err(_) => open1 = false,
                    },
                    recv(rx2) -> m => match m {
                        Ok(v) => { b += 1; sum += v; }
                        Err(_) => open2 = false,
                    },
                }
                // A disconnected channel stays ready: stop selecting it.
                if !open1 && open2 {
                    for v in rx2.iter() {
                        b += 1;
                        sum += v;
                    }
                    open2 = false;
                }
                if !open2 && open1 {
                    for v in rx1.iter() {
                        a += 1;
                        sum += v;
                    }
                    open1 = false;
                }
            }
            (a, b, sum)
        });
        p1.join().unwrap();
        p2.join().unwrap();
        let (a, b, sum) = consumer.join().unwrap();
        assert_eq!((a, b), (PER, PER), "cap {cap}");
        assert_eq!(sum, (0..2 * PER).sum::<u64>(), "cap {cap}");
    }
}

/// Rendezvous channels selected from both ends: a selecting sender meets a selecting (or
/// plain) receiver; every message arrives once.
#[test]
fn rendezvous_select_on_both_sides() {
    let _w = watchdog("zero select", Duration::from_secs(120));
    let rt = runtime(2);
    let (tx, rx) = bounded::<u32>(0);
    let (quit_tx, quit_rx) = bounded::<()>(0);
    const N: u32 = 5_000;
    let sender = rt.spawn(move || {
        for i in 0..N {
            select! {
                send(tx, i) -> r => r.unwrap(),
                recv(quit_rx) -> _ => unreachable!("nobody quits"),
            }
        }
    });
    let (_never_tx, never_rx) = bounded::<u32>(0);
    let receiver = thread::spawn(move || {
        let mut got = Vec::with_capacity(N as usize);
        while got.len() < N as usize {
            if got.len() % 2 == 0 {
                select! {
                    recv(rx) -> m => got.push(m.unwrap()),
                    recv(never_rx) -> _ => unreachable!(),
                }
            } else {
                got.push(rx.recv().unwrap());
            }
        }
        got
    });
    sender.join().unwrap();
    let got = receiver.join().unwrap();
    assert_eq!(got, (0..N).collect::<Vec<_>>());
    drop(quit_tx);
}

/// A select with both a send and a receive on the same rendezvous channel never pairs with
/// itself: it needs another thread.
#[test]
fn a_select_does_not_rendezvous_with_itself() {
    let (tx, rx) = bounded::<u8>(0);
    let r = select! {
        send(tx, 1) -> _ => "sent",
        recv(rx) -> _ => "received",
        default(Duration::from_millis(20)) => "timed out",
    };
    assert_eq!(r, "timed out");
}

#[test]
fn dynamic_select_api() {
    let (tx1, rx1) = unbounded::<i32>();
    let (tx2, rx2) = bounded::<i32>(0);
    let mut sel = Select::new();
    let i1 = sel.recv(&rx1);
    let i2 = sel.recv(&rx2);
    assert!(matches!(sel.try_select(), Err(TrySelectError)));
    assert_eq!(sel.select_timeout(Duration::from_millis(2)).unwrap_err(), SelectTimeoutError);
    tx1.send(3).unwrap();
    let oper = sel.select();
    assert_eq!(oper.index(), i1);
    assert_eq!(oper.recv(&rx1), Ok(3));
    sel.remove(i1);
    let h = thread::spawn(move || tx2.send(9).unwrap());
    let oper = sel.select_deadline(Instant::now() + Duration::from_secs(30)).unwrap();
    assert_eq!(oper.index(), i2);
    assert_eq!(oper.recv(&rx2), Ok(9));
    h.join().unwrap();
    let mut empty = Select::new();
    assert!(empty.try_select().is_err());
    assert!(empty.select_timeout(Duration::from_millis(1)).is_err());
}

#[test]
#[should_panic(expected = "not selected")]
fn completing_with_the_wrong_receiver_panics() {
    let (tx, rx) = unbounded::<i32>();
    let (_tx2, rx2) = unbounded::<i32>();
    tx.send(1).unwrap();
    let mut sel = Select::new();
    sel.recv(&rx);
    let oper = sel.select();
    let _ = oper.recv(&rx2);
}

#[test]
fn dropping_a_selected_operation_panics_and_releases_a_rendezvous_partner() {
    let _w = watchdog("abandon", Duration::from_secs(60));
    let rt = runtime(2);
    let (tx, rx) = bounded::<u32>(0);
    let sent = Arc::new(AtomicUsize::new(0));
    let s2 = sent.clone();
    // A plain sender waits; a select claims it, then drops the operation without completing.
    let h = rt.spawn(move || {
        tx.send(1).unwrap();
        s2.fetch_add(1, Ordering::SeqCst);
    });
    while rt.scheduler().parked().is_empty() {
        thread::yield_now();
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut sel = Select::new();
        sel.recv(&rx);
        let _oper = sel.select();
    }));
    assert!(r.is_err());
    // The sender was released to retry, not lost: a plain receive gets its message.
    assert_eq!(rx.recv(), Ok(1));
    h.join().unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}

/// The other end of the same mistake: a select claims a *selecting* receiver for a send, then
/// drops the operation (e.g. the send arm's message expression panicked). The receiver is
/// released to retry (its heap packet is not waited on, nor leaked), and a later send reaches
/// it.
#[test]
fn dropping_a_selected_send_releases_a_selecting_receiver() {
    let _w = watchdog("abandon send", Duration::from_secs(60));
    let rt = runtime(2);
    let (tx, rx) = bounded::<u32>(0);
    let h = rt.spawn(move || {
        select! {
            recv(rx) -> m => m.unwrap(),
        }
    });
    while rt.scheduler().parked().is_empty() {
        thread::yield_now();
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut sel = Select::new();
        sel.send(&tx);
        let _oper = sel.select();
    }));
    assert!(r.is_err());
    tx.send(7).unwrap();
    assert_eq!(h.join().unwrap(), 7);
}

/// `select!` arms can `break`, `continue` and `return`.
#[test]
fn control_flow_in_arms() {
    fn first_even(rx: &purloin::sync::channel::Receiver<u32>) -> u32 {
        loop {
            select! {
                recv(rx) -> m => {
                    let v = m.unwrap();
                    if v % 2 == 1 {
                        continue;
                    }
                    return v;
                }
            }
        }
    }
    let (tx, rx) = unbounded();
    for v in [1, 3, 4, 5] {
        tx.send(v).unwrap();
    }
    assert_eq!(first_even(&rx), 4);
    let mut n = 0;
    loop {
        select! {
            recv(rx) -> _ => n += 1,
            default => break,
        }
    }
    assert_eq!(n, 1);
}
