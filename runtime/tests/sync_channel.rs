//! Channel behaviour for all three flavors (bounded ring, rendezvous, unbounded list): the
//! promises of crossbeam-channel's docs, disconnection (nothing sent before it is lost),
//! timeouts, iterators, mixed green/OS-thread users, and unwinding at shutdown.
#![cfg(not(loom))]

mod sync_util;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use purloin::sync::channel::{
    Receiver, RecvError, RecvTimeoutError, SendError, SendTimeoutError, Sender, TryRecvError,
    TrySendError, bounded, unbounded,
};
use sync_util::{DropCounter, runtime, wait_until, watchdog};

/// A channel of one flavor, with its name.
type Named<T> = (&'static str, (Sender<T>, Receiver<T>));

/// The three flavors (bounded(0) is the rendezvous one).
fn flavors<T>() -> Vec<Named<T>> {
    vec![
        ("bounded(0)", bounded(0)),
        ("bounded(1)", bounded(1)),
        ("bounded(16)", bounded(16)),
        ("unbounded", unbounded()),
    ]
}

#[test]
fn capacity_len_and_full_empty() {
    let (tx, rx) = bounded::<u8>(2);
    assert_eq!(tx.capacity(), Some(2));
    assert!(tx.is_empty() && rx.is_empty() && !tx.is_full());
    tx.send(1).unwrap();
    tx.send(2).unwrap();
    assert!(tx.is_full() && rx.is_full());
    assert_eq!(rx.len(), 2);
    assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.len(), 1);

    let (tx, rx) = unbounded::<u8>();
    assert_eq!(rx.capacity(), None);
    for i in 0..100 {
        tx.send(i).unwrap();
    }
    assert_eq!(tx.len(), 100);
    assert!(!tx.is_full());

    let (tx, rx) = bounded::<u8>(0);
    assert_eq!(tx.capacity(), Some(0));
    assert!(tx.is_empty() && tx.is_full() && rx.is_empty());
    assert_eq!(rx.len(), 0);
    assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)), "no receiver waits");
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert!(tx.same_channel(&tx.clone()) && !rx.same_channel(&bounded::<u8>(0).1));
}

/// FIFO order per producer, every flavor, with a green receiver.
#[test]
fn fifo_per_producer() {
    let _w = watchdog("fifo", Duration::from_secs(60));
    let rt = runtime(2);
    for (name, (tx, rx)) in flavors::<u32>() {
        let h = rt.spawn(move || {
            for i in 0..1000 {
                tx.send(i).unwrap();
            }
        });
        for i in 0..1000 {
            assert_eq!(rx.recv(), Ok(i), "{name}");
        }
        h.join().unwrap();
        assert_eq!(
            rx.recv(),
            Err(RecvError::Disconnected),
            "{name}: disconnected after the last message"
        );
    }
}

/// Disconnection loses nothing: every message sent before the last sender is dropped is
/// received, then `RecvError`.
#[test]
fn disconnection_loses_nothing() {
    let _w = watchdog("disconnect", Duration::from_secs(60));
    let rt = runtime(2);
    for (name, (tx, rx)) in flavors::<u64>() {
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let tx = tx.clone();
                rt.spawn(move || {
                    for i in 0..500 {
                        tx.send(p * 10_000 + i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let rx2 = rx.clone();
        let consumer = thread::spawn(move || rx2.iter().collect::<Vec<_>>());
        let mut got: Vec<u64> = rx.iter().collect();
        got.extend(consumer.join().unwrap());
        for p in producers {
            p.join().unwrap();
        }
        got.sort_unstable();
        let mut expect: Vec<u64> =
            (0..4u64).flat_map(|p| (0..500).map(move |i| p * 10_000 + i)).collect();
        expect.sort_unstable();
        assert_eq!(got, expect, "{name}");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected), "{name}");
        assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Disconnected));
    }
}

#[test]
fn sends_fail_with_the_message_after_receivers_drop() {
    for (name, (tx, rx)) in flavors::<String>() {
        drop(rx);
        assert_eq!(tx.send("a".into()), Err(SendError::Disconnected("a".to_string())), "{name}");
        assert_eq!(tx.try_send("b".into()), Err(TrySendError::Disconnected("b".to_string())));
        assert_eq!(
            tx.send_timeout("c".into(), Duration::from_millis(1)),
            Err(SendTimeoutError::Disconnected("c".to_string()))
        );
    }
}

/// Receivers and senders blocked when the other side disconnects wake with an error (green
/// and OS waiters); a blocked sender gets its message back.
#[test]
fn blocked_operations_wake_on_disconnection() {
    let _w = watchdog("wake on disconnect", Duration::from_secs(60));
    let rt = runtime(2);
    for (name, (tx, rx)) in flavors::<u32>() {
        let rx2 = rx.clone();
        let green = rt.spawn(move || rx2.recv());
        let rx3 = rx.clone();
        let os = thread::spawn(move || rx3.recv());
        wait_until(|| rt.scheduler().parked().len() == 1);
        drop(tx);
        assert_eq!(green.join().unwrap(), Err(RecvError::Disconnected), "{name}");
        assert_eq!(os.join().unwrap(), Err(RecvError::Disconnected), "{name}");
        drop(rx);
    }
    for cap in [0, 1] {
        let (tx, rx) = bounded::<String>(cap);
        if cap == 1 {
            tx.send("fill".into()).unwrap();
        }
        let tx2 = tx.clone();
        let green = rt.spawn(move || tx2.send("green".into()));
        let os = thread::spawn(move || tx.send("os".into()));
        wait_until(|| rt.scheduler().parked().len() == 1);
        thread::sleep(Duration::from_millis(5)); // not needed for correctness
        drop(rx);
        assert_eq!(
            green.join().unwrap(),
            Err(SendError::Disconnected("green".to_string())),
            "cap {cap}"
        );
        assert_eq!(os.join().unwrap(), Err(SendError::Disconnected("os".to_string())), "cap {cap}");
    }
}

/// Dropping the last receiver drops the queued messages (bounded and unbounded); dropping
/// everything drops the rest: no message leaks.
#[test]
fn queued_messages_are_dropped_exactly_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    for cap in [None, Some(64)] {
        drops.store(0, Ordering::SeqCst);
        let (tx, rx) = match cap {
            Some(c) => bounded(c),
            None => unbounded(),
        };
        for _ in 0..50 {
            tx.send(DropCounter(drops.clone())).unwrap();
        }
        drop(rx.recv().unwrap());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(rx);
        let err = tx.send(DropCounter(drops.clone())).unwrap_err();
        drop(err);
        drop(tx);
        assert_eq!(drops.load(Ordering::SeqCst), 51, "{cap:?}");
    }
}

#[test]
fn timeouts_on_every_flavor() {
    let _w = watchdog("timeouts", Duration::from_secs(60));
    let rt = runtime(1);
    for (name, (tx, rx)) in flavors::<u8>() {
        let start = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(3)),
            Err(RecvTimeoutError::Timeout),
            "{name}"
        );
        assert!(start.elapsed() >= Duration::from_millis(3));
        rt.block_on(|| {
            let start = Instant::now();
            let d = Instant::now() + Duration::from_millis(3);
            assert_eq!(rx.recv_deadline(d), Err(RecvTimeoutError::Timeout), "{name}");
            assert!(start.elapsed() >= Duration::from_millis(3));
        });
        if let Some(cap) = tx.capacity() {
            for i in 0..cap {
                tx.send(i as u8).unwrap();
            }
            let start = Instant::now();
            assert_eq!(
                tx.send_timeout(9, Duration::from_millis(3)),
                Err(SendTimeoutError::Timeout(9))
            );
            assert!(start.elapsed() >= Duration::from_millis(3));
            rt.block_on(|| {
                assert_eq!(
                    tx.send_timeout(8, Duration::from_millis(3)),
                    Err(SendTimeoutError::Timeout(8))
                );
            });
            // The timed-out senders left nothing behind: exactly `cap` messages queued.
            assert_eq!(rx.try_iter().count(), cap, "{name}");
        }
    }
}

#[test]
fn iterators() {
    let (tx, rx) = unbounded();
    for i in 0..5 {
        tx.send(i).unwrap();
    }
    assert_eq!(rx.try_iter().take(2).collect::<Vec<_>>(), vec![0, 1]);
    drop(tx);
    assert_eq!((&rx).into_iter().collect::<Vec<_>>(), vec![2, 3, 4]);
    let (tx, rx) = bounded(0);
    let h = thread::spawn(move || {
        for i in 0..3 {
            tx.send(i).unwrap();
        }
    });
    assert_eq!(rx.into_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    h.join().unwrap();
}

/// Rendezvous: a send completes only when a receiver takes the message, so the sender can
/// never be more than one message ahead.
#[test]
fn rendezvous_sends_wait_for_receivers() {
    let _w = watchdog("rendezvous", Duration::from_secs(60));
    let rt = runtime(2);
    let (tx, rx) = bounded::<usize>(0);
    let sent = Arc::new(AtomicUsize::new(0));
    let s2 = sent.clone();
    let h = rt.spawn(move || {
        for i in 0..200 {
            tx.send(i).unwrap();
            s2.store(i + 1, Ordering::SeqCst);
        }
    });
    for i in 0..200 {
        // Before receiving message i, at most i sends completed.
        assert!(sent.load(Ordering::SeqCst) <= i);
        assert_eq!(rx.recv().unwrap(), i);
    }
    h.join().unwrap();
}

/// Green threads and OS threads as producers and consumers on one channel of each flavor.
#[test]
fn mixed_green_and_os_users() {
    let _w = watchdog("mixed users", Duration::from_secs(120));
    let rt = runtime(2);
    for (name, (tx, rx)) in flavors::<u64>() {
        const PER: u64 = 5_000;
        let mut producers = Vec::new();
        let mut os_producers = Vec::new();
        for p in 0..4u64 {
            let tx = tx.clone();
            let body = move || {
                for i in 0..PER {
                    tx.send(p * PER + i).unwrap();
                }
            };
            if p % 2 == 0 {
                producers.push(rt.spawn(body));
            } else {
                os_producers.push(thread::spawn(body));
            }
        }
        drop(tx);
        let mut green_consumers = Vec::new();
        let mut os_consumers = Vec::new();
        for c in 0..4 {
            let rx = rx.clone();
            let body = move || rx.iter().fold((0u64, 0u64), |(n, s), v| (n + 1, s + v));
            if c % 2 == 0 {
                green_consumers.push(rt.spawn(body));
            } else {
                os_consumers.push(thread::spawn(body));
            }
        }
        drop(rx);
        let (mut n, mut s) = (0, 0);
        for h in green_consumers {
            let (a, b) = h.join().unwrap();
            n += a;
            s += b;
        }
        for h in os_consumers {
            let (a, b) = h.join().unwrap();
            n += a;
            s += b;
        }
        for h in producers {
            h.join().unwrap();
        }
        for h in os_producers {
            h.join().unwrap();
        }
        let total = 4 * PER;
        assert_eq!(n, total, "{name}: count");
        assert_eq!(s, total * (total - 1) / 2, "{name}: checksum");
    }
}

/// A green receiver parked on a channel does not block its worker: on a single worker a
/// green sender still runs and wakes it.
#[test]
fn one_worker_ping_pong() {
    let _w = watchdog("one worker", Duration::from_secs(60));
    let rt = runtime(1);
    for cap in [0, 1] {
        rt.block_on(|| {
            let (tx1, rx1) = bounded::<u32>(cap);
            let (tx2, rx2) = bounded::<u32>(cap);
            let h = purloin::spawn(move || {
                for v in rx1.iter() {
                    tx2.send(v + 1).unwrap();
                }
            });
            for i in 0..10_000 {
                tx1.send(i).unwrap();
                assert_eq!(rx2.recv().unwrap(), i + 1);
            }
            drop(tx1);
            h.join().unwrap();
        });
    }
}

/// Shutdown unwinds green threads blocked in channel operations (each flavor, both
/// directions, and a select): destructors run, nothing stays queued, and the channels work
/// afterwards.
#[test]
fn shutdown_unwinds_channel_waiters() {
    let _w = watchdog("channel shutdown", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let d = || DropCounter(drops.clone());
    let (z1_tx, z1_rx) = bounded::<DropCounter>(0); // a receiver waits
    let (z2_tx, z2_rx) = bounded::<DropCounter>(0); // a sender waits
    let (b_tx, b_rx) = bounded::<DropCounter>(1); // full: a sender waits
    b_tx.send(d()).unwrap();
    let (e_tx, e_rx) = bounded::<DropCounter>(4); // empty: a receiver waits
    let (u_tx, u_rx) = unbounded::<DropCounter>(); // empty: a receiver waits
    let (s1_tx, s1_rx) = bounded::<DropCounter>(0); // a select waits on both
    let (s2_tx, s2_rx) = bounded::<DropCounter>(2);
    {
        let rt = runtime(2);
        let mut n = 0;
        let mut go = |f: Box<dyn FnOnce() + Send>| {
            let guard = d();
            n += 1;
            drop(rt.spawn(move || {
                let _guard = guard;
                f();
            }));
        };
        let r = z1_rx.clone();
        go(Box::new(move || drop(r.recv())));
        let (s, m) = (z2_tx.clone(), d());
        go(Box::new(move || drop(s.send(m))));
        let (s, m) = (b_tx.clone(), d());
        go(Box::new(move || drop(s.send(m))));
        let r = e_rx.clone();
        go(Box::new(move || drop(r.recv())));
        let r = u_rx.clone();
        go(Box::new(move || drop(r.recv())));
        let (r, s) = (s1_rx.clone(), s2_tx.clone());
        s.send(d()).unwrap();
        s.send(d()).unwrap(); // full
        go(Box::new(move || {
            purloin::select! {
                recv(r) -> m => drop(m),
                send(s, DropCounter(Arc::new(AtomicUsize::new(0)))) -> res => drop(res),
            }
        }));
        wait_until(|| rt.scheduler().parked().len() == n);
        rt.shutdown_timeout(Duration::from_millis(100));
        // The 6 guards and the 2 messages of the unwound senders.
        assert_eq!(drops.load(Ordering::SeqCst), 8);
    }
    // Nothing stayed queued: each channel still works.
    let h = thread::spawn(move || z1_rx.recv().map(drop));
    z1_tx.send(d()).unwrap();
    h.join().unwrap().unwrap();
    assert_eq!(z2_rx.try_recv().map(drop), Err(TryRecvError::Empty));
    drop(b_rx.recv().unwrap());
    assert!(b_rx.is_empty());
    e_tx.send(d()).unwrap();
    drop(e_rx.recv().unwrap());
    u_tx.send(d()).unwrap();
    drop(u_rx.recv().unwrap());
    assert_eq!(s2_rx.len(), 2);
    drop((s1_tx, s2_rx));
}

/// Messages still queued when the last receiver goes are dropped at once, in every flavor,
/// while senders are still alive (crossbeam's and the docs' promise): a request carrying its
/// reply sender then disconnects its requester instead of leaving it waiting.
#[test]
fn queued_messages_are_dropped_when_the_last_receiver_goes() {
    let _w = watchdog("drop on receiver disconnect", Duration::from_secs(60));
    for (name, (tx, rx)) in flavors::<Sender<u32>>() {
        let rx2 = rx.clone();
        let (reply_tx, reply_rx) = bounded::<u32>(1);
        if name != "bounded(0)" {
            // Queued (the rendezvous send below blocks until the receivers leave instead).
            tx.send(reply_tx).unwrap();
            drop((rx, rx2));
            // The sender is alive, yet the reply channel's only sender was dropped.
            assert_eq!(reply_rx.recv(), Err(RecvError::Disconnected), "{name}");
            drop(tx);
            continue;
        }
        let sender = thread::spawn(move || tx.send(reply_tx).is_err());
        drop((rx, rx2));
        assert!(sender.join().unwrap(), "{name}: the send failed");
        assert_eq!(reply_rx.recv(), Err(RecvError::Disconnected), "{name}");
    }
}

/// The same with drop counters, a full ring of every capacity and a wrapped head.
#[test]
fn every_queued_message_is_dropped_once_when_the_receivers_go() {
    for cap in [1, 2, 3, 16] {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = bounded(cap);
        // Move the head around the ring first.
        for _ in 0..cap + cap / 2 {
            tx.send(DropCounter(drops.clone())).unwrap();
            drop(rx.recv().unwrap());
        }
        let before = drops.load(Ordering::SeqCst);
        for _ in 0..cap {
            tx.send(DropCounter(drops.clone())).unwrap();
        }
        drop(rx);
        assert_eq!(drops.load(Ordering::SeqCst), before + cap, "cap {cap}");
        let Err(SendError::Disconnected(m)) = tx.send(DropCounter(drops.clone())) else {
            panic!("disconnected")
        };
        drop(m);
        drop(tx);
        assert_eq!(drops.load(Ordering::SeqCst), before + cap + 1, "cap {cap}: dropped once");
    }
}

/// Counts the drops of [`Bomb`]s (one scenario at a time: only the child process of
/// `a_panicking_message_destructor_propagates_once_and_leaks_the_rest` makes them).
static BOMB_DROPS: AtomicUsize = AtomicUsize::new(0);

/// A message whose destructor panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        BOMB_DROPS.fetch_add(1, Ordering::SeqCst);
        panic!("a message's destructor panicked");
    }
}

/// Dropping the last receiver of a channel holding messages whose destructors panic: the
/// first panic propagates from the drop, the other messages are leaked (exactly one
/// destructor ran), and nothing aborts the process or drops a message twice later — with
/// the senders still alive (dropped afterwards) or already gone. In a child process, because
/// a second panicking destructor during the unwind would abort it.
#[test]
fn a_panicking_message_destructor_propagates_once_and_leaks_the_rest() {
    const CHILD: &str = "PURLOIN_TEST_PANICKING_MESSAGE_DROP_CHILD";
    const NAME: &str = "a_panicking_message_destructor_propagates_once_and_leaks_the_rest";
    type Make = fn() -> (Sender<Bomb>, Receiver<Bomb>);
    let cases: [(&str, usize, Make); 4] = [
        ("bounded(3)", 3, || bounded(3)),
        ("bounded(16)", 3, || bounded(16)),
        ("unbounded", 3, unbounded),
        ("unbounded, over a block boundary", 40, unbounded),
    ];
    if std::env::var_os(CHILD).is_some() {
        std::panic::set_hook(Box::new(|_| {}));
        for (name, n, make) in cases {
            for senders_first in [false, true] {
                BOMB_DROPS.store(0, Ordering::SeqCst);
                let (tx, rx) = make();
                for _ in 0..n {
                    tx.send(Bomb).unwrap_or_else(|_| panic!("{name}: disconnected"));
                }
                let tx = if senders_first {
                    drop(tx);
                    None
                } else {
                    Some(tx)
                };
                let last_receiver = std::panic::catch_unwind(AssertUnwindSafe(|| drop(rx)));
                let at_receiver = BOMB_DROPS.load(Ordering::SeqCst);
                let later = std::panic::catch_unwind(AssertUnwindSafe(|| drop(tx)));
                println!(
                    "CASE {name} senders_first={senders_first}: receiver_panicked={} \
                     drops={at_receiver} later_panicked={} drops_after={}",
                    last_receiver.is_err(),
                    later.is_err(),
                    BOMB_DROPS.load(Ordering::SeqCst)
                );
            }
        }
        return;
    }
    let _w = watchdog("panicking message destructors", Duration::from_secs(60));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the child did not exit normally ({:?}): a message dropped twice, or a second panicking \
         destructor during the unwind:\n{stdout}\n{stderr}",
        out.status
    );
    for (name, _, _) in cases {
        for senders_first in [false, true] {
            let line = format!(
                "CASE {name} senders_first={senders_first}: receiver_panicked=true drops=1 \
                 later_panicked=false drops_after=1"
            );
            assert!(stdout.contains(&line), "expected {line:?} in:\n{stdout}");
        }
    }
}

/// A capacity that cannot be allocated is a panic with a message, not an abort.
#[test]
fn an_impossible_capacity_panics_with_a_message() {
    let payload = std::panic::catch_unwind(|| bounded::<u64>(1 << 40)).unwrap_err();
    let msg = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("bounded(1099511627776)") && msg.contains("capacity"), "{msg}");
}
