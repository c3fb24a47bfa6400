//! Dumps: states, wait info, and backtraces of parked green threads captured on their own
//! stacks while the scheduler runs (and while unparks race the capture).
#![cfg(not(loom))]

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, GreenState, SpawnOptions, WaitInfo, WaitKind};

/// The function the target green thread parks in; its name must show in the backtrace.
#[inline(never)]
fn parked_in_known_function_marker(round: &AtomicU64, mine: u64) {
    while round.load(Ordering::Acquire) == mine {
        purloin_sched::park();
    }
    black_box(round);
}

/// A parked green thread shows the function it parked in, under load with 2 workers, 1,000
/// times; a noisy unparker races the captures (its wake-ups are spurious for the target), so
/// the capture-vs-unpark hand-over runs for real; every green thread the dumps saw parked
/// keeps running afterwards (nothing is lost or run twice: the ping-pong pair's count adds up).
#[test]
fn parked_thread_shows_its_function_1000_times_under_load() {
    let _w = common::watchdog("dump under load", Duration::from_secs(600));
    let sched = Builder::new().workers(2).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));

    // Load: yielders and a ping-pong pair that park and unpark each other.
    let mut load = Vec::new();
    for _ in 0..3 {
        let stop = stop.clone();
        load.push(sched.spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n = black_box(n + 1);
                purloin_sched::yield_now();
            }
            n
        }));
    }
    let pongs = Arc::new(AtomicU64::new(0));
    let (ping, pong) = {
        let turn = Arc::new(AtomicU64::new(0));
        let peer: Arc<std::sync::OnceLock<purloin_sched::GreenThread>> = Default::default();
        let (t2, p2, s2, c2) = (turn.clone(), peer.clone(), stop.clone(), pongs.clone());
        let pong = sched.spawn(move || {
            let mut seen = 0;
            while !s2.load(Ordering::Acquire) {
                if t2.load(Ordering::Acquire) & 1 == 1 {
                    seen += 1;
                    c2.fetch_add(1, Ordering::Relaxed);
                    t2.fetch_add(1, Ordering::AcqRel);
                    p2.get().unwrap().unpark();
                } else {
                    purloin_sched::park();
                }
            }
            seen
        });
        let me_pong = *pong.thread();
        let s3 = stop.clone();
        let ping = sched.spawn(move || {
            peer.set(purloin_sched::current().unwrap()).unwrap();
            while !s3.load(Ordering::Acquire) {
                if turn.load(Ordering::Acquire) & 1 == 0 {
                    turn.fetch_add(1, Ordering::AcqRel);
                    me_pong.unpark();
                } else {
                    purloin_sched::park();
                }
            }
        });
        (ping, pong)
    };

    // The target: parks in the marker until its round moves on.
    let round = Arc::new(AtomicU64::new(0));
    let r2 = round.clone();
    let target = sched.spawn(move || {
        let mut mine = 0;
        loop {
            let info = WaitInfo { kind: WaitKind::Park, object: 0xd0, holder: None };
            purloin_sched::set_wait_info(Some(info));
            parked_in_known_function_marker(&r2, mine);
            purloin_sched::set_wait_info(None);
            mine += 1;
            if r2.load(Ordering::Acquire) == u64::MAX {
                return;
            }
        }
    });
    let tid = target.thread().id();

    // A noisy unparker: spurious wake-ups of the target racing the captures.
    let noisy = {
        let (stop, t) = (stop.clone(), *target.thread());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Acquire) {
                t.unpark();
                for _ in 0..20_000 {
                    n = black_box(n + 1);
                }
                std::thread::yield_now();
            }
        })
    };

    let mut shown = 0;
    let mut dumps = 0u64;
    while shown < 1000 {
        let dump = sched.dump();
        dumps += 1;
        for t in &dump.threads {
            if t.state == GreenState::Parked
                && let Some(bt) = &t.backtrace
            {
                assert!(bt.contains("purloin_sched::thread::park"), "{}:\n{bt}", t.id);
            }
        }
        let me = dump.threads.iter().find(|t| t.id == tid).expect("the target is in the dump");
        if me.state == GreenState::Parked
            && let Some(bt) = &me.backtrace
        {
            assert!(
                bt.contains("parked_in_known_function_marker"),
                "round {shown}: the marker is missing:\n{dump}"
            );
            assert_eq!(me.wait.map(|w| w.object), Some(0xd0));
            shown += 1;
            if shown % 100 == 0 {
                eprintln!("{shown} captures in {dumps} dumps");
            }
            // Next round: the target wakes, leaves the marker, and parks in it again.
            round.fetch_add(1, Ordering::AcqRel);
            target.thread().unpark();
        } else {
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Release);
    noisy.join().unwrap();
    ping.thread().unpark();
    pong.thread().unpark();
    ping.join().unwrap();
    let seen = pong.join().unwrap();
    assert_eq!(seen, pongs.load(Ordering::Relaxed));
    for h in load {
        h.join().unwrap();
    }
    // Still alive and responsive after all those captures: end it.
    round.store(u64::MAX, Ordering::Release);
    target.thread().unpark();
    target.join().unwrap();
    eprintln!("{shown} captures showed the marker in {dumps} dumps");
}

/// States: a never-run thread is not started, a finished unjoined one is finished, a parked
/// one is parked with its wait; the dump's text names each.
#[test]
fn states_and_text() {
    let _w = common::watchdog("dump states", Duration::from_secs(120));
    let sched = Builder::new().workers(1).build().unwrap();
    let named = |n: &str| SpawnOptions { name: Some(n.into()), ..Default::default() };
    let finished = sched.spawn_with(named("finisher"), || 7).unwrap();
    let parked = sched
        .spawn_with(named("sleeper"), || {
            let info = WaitInfo { kind: WaitKind::ChannelRecv, object: 0x10, holder: None };
            purloin_sched::set_wait_info(Some(info));
            purloin_sched::park();
            purloin_sched::set_wait_info(None);
        })
        .unwrap();
    while !finished.thread().is_finished() || sched.parked().is_empty() {
        std::thread::yield_now();
    }
    let dump = sched.dump();
    let text = dump.to_string();
    let p = dump.threads.iter().find(|t| t.id == parked.thread().id()).unwrap();
    assert_eq!(p.state, GreenState::Parked);
    assert_eq!(p.wait.map(|w| w.kind), Some(WaitKind::ChannelRecv));
    assert!(text.contains("\"sleeper\" [parked: a channel receive 0x10]"), "{text}");
    let f = dump.threads.iter().find(|t| t.id == finished.thread().id());
    if let Some(f) = f {
        assert_eq!(f.state, GreenState::Finished, "{text}");
    }
    assert_eq!(dump.count(GreenState::Parked), 1, "{text}");
    assert_eq!(finished.join().unwrap(), 7);
    parked.thread().unpark();
    parked.join().unwrap();
}

/// A green thread dumping its own scheduler sees itself running, with its own stack.
#[test]
fn the_caller_sees_itself_running() {
    let _w = common::watchdog("dump self", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let h = sched.spawn(|| {
        let me = purloin_sched::current().unwrap().id();
        let dump = purloin_sched::current_dump().unwrap();
        let t = dump.threads.into_iter().find(|t| t.id == me).unwrap();
        (t.state, t.backtrace.unwrap().contains("the_caller_sees_itself_running"))
    });
    let (state, has_self) = h.join().unwrap();
    assert!(matches!(state, GreenState::Running { .. }), "{state:?}");
    assert!(has_self);
}
