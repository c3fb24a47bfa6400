//! Grouped dumps (Go's goroutine profile with `debug=1`): green threads with the same state,
//! wait, stack and spawn site are one group with a count, largest first; each distinct stack
//! is its own group, and a grouped dump racing unparks loses no wake-up.
#![cfg(not(loom))]

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, GreenId, GreenState, GroupedDump, WaitInfo, WaitKind};

/// Parks until `go` is set, in a function of its own.
#[inline(never)]
fn parked_in_alpha(go: &AtomicBool) {
    while !go.load(Ordering::Acquire) {
        purloin_sched::park();
    }
    black_box(go);
}

/// Like `parked_in_alpha`, a different function (a different stack).
#[inline(never)]
fn parked_in_beta(go: &AtomicBool) {
    while !go.load(Ordering::Acquire) {
        purloin_sched::park();
    }
    black_box(go);
}

/// `parked_in_alpha` one call deeper: the same innermost frames, another path.
#[inline(never)]
fn parked_via_gamma(go: &AtomicBool) {
    parked_in_alpha(go);
    black_box(go);
}

fn wait_until_parked(sched: &purloin_sched::Scheduler, n: usize) {
    while sched.parked().len() < n {
        std::thread::yield_now();
    }
}

fn group_with<'a>(dump: &'a GroupedDump, function: &str) -> Vec<&'a purloin_sched::GreenGroup> {
    dump.groups
        .iter()
        .filter(|g| g.backtrace.as_ref().is_some_and(|bt| bt.contains(function)))
        .collect()
}

/// Thirty green threads parked in one function, twenty in another, ten in the first through
/// a third, all spawned at one line: three groups of 30, 20 and 10, largest first, each with
/// its own stack, the spawn line, its members' ids as samples, and the counts adding up.
#[test]
fn threads_at_the_same_place_form_one_group_with_a_count() {
    let _w = common::watchdog("grouped dump", Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    let go = Arc::new(AtomicBool::new(false));
    let mut ids: Vec<Vec<GreenId>> = vec![Vec::new(), Vec::new(), Vec::new()];
    let mut handles = Vec::new();
    let which = |i: usize| match i % 6 {
        0..3 => 0,
        3..5 => 1,
        _ => 2,
    };
    // One spawn line for all: only the stacks tell the groups apart.
    let line = line!() + 3;
    for i in 0..60 {
        let g = go.clone();
        let h = sched.spawn(move || match which(i) {
            0 => parked_in_alpha(&g),
            1 => parked_in_beta(&g),
            _ => parked_via_gamma(&g),
        });
        ids[which(i)].push(h.thread().id());
        handles.push(h);
    }
    wait_until_parked(&sched, 60);
    let dump = sched.dump_grouped();
    let text = dump.to_string();
    assert_eq!(dump.threads, 60, "{text}");
    assert_eq!(dump.groups.iter().map(|g| g.count).sum::<usize>(), 60, "{text}");
    assert_eq!(dump.groups.len(), 3, "{text}");
    assert_eq!(dump.groups.iter().map(|g| g.count).collect::<Vec<_>>(), [30, 20, 10], "{text}");
    for (i, function) in
        ["parked_in_alpha", "parked_in_beta", "parked_via_gamma"].iter().enumerate()
    {
        let g = &dump.groups[i];
        assert_eq!(g.state, GreenState::Parked, "{text}");
        let bt = g.backtrace.as_ref().unwrap_or_else(|| panic!("no stack: {text}"));
        assert!(bt.contains(function), "group {i} is not {function}'s: {text}");
        assert_eq!(g.spawned_at.map(|l| l.line()), Some(line), "{text}");
        assert!(g.longest.is_some(), "{text}");
        assert_eq!(g.sample.len(), purloin_sched::GROUP_SAMPLE.min(g.count), "{text}");
        assert!(g.sample.windows(2).all(|w| w[0] < w[1]), "ascending: {text}");
        assert!(g.sample.iter().all(|id| ids[i].contains(id)), "members only: {text}");
    }
    // Only the deeper path's group goes through both functions.
    assert_eq!(group_with(&dump, "parked_in_alpha").len(), 2, "{text}");
    assert!(text.contains("30 × parked"), "{text}");
    assert!(text.contains("in 3 groups"), "{text}");
    go.store(true, Ordering::Release);
    for h in handles {
        h.thread().unpark();
        h.join().unwrap();
    }
}

/// The same stack spawned from two places is two groups; so is the same stack with two kinds
/// of wait. The wait's object is not part of the key.
#[test]
fn spawn_site_and_wait_kind_split_groups() {
    let _w = common::watchdog("grouped dump keys", Duration::from_secs(120));
    let sched = Builder::new().workers(1).build().unwrap();
    let go = Arc::new(AtomicBool::new(false));
    let park_as = |kind: WaitKind, object: usize, go: Arc<AtomicBool>| {
        move || {
            purloin_sched::set_wait_info(Some(WaitInfo { kind, object, holder: None }));
            parked_in_alpha(&go);
        }
    };
    let mut handles = Vec::new();
    for i in 0..4 {
        let f = park_as(WaitKind::Mutex, 0x100 + i, go.clone());
        handles.push(sched.spawn(f));
    }
    for i in 0..3 {
        let f = park_as(WaitKind::Mutex, 0x200 + i, go.clone());
        handles.push(sched.spawn(f)); // another line
    }
    for i in 0..2 {
        let f = park_as(WaitKind::Condvar, 0x300 + i, go.clone());
        handles.push(sched.spawn(f));
    }
    wait_until_parked(&sched, 9);
    let dump = sched.dump_grouped();
    let text = dump.to_string();
    let shape: Vec<(usize, Option<WaitKind>)> =
        dump.groups.iter().map(|g| (g.count, g.wait)).collect();
    assert_eq!(
        shape,
        [(4, Some(WaitKind::Mutex)), (3, Some(WaitKind::Mutex)), (2, Some(WaitKind::Condvar))],
        "{text}"
    );
    assert_ne!(dump.groups[0].spawned_at, dump.groups[1].spawned_at, "{text}");
    assert!(text.contains("4 × parked: a mutex"), "{text}");
    assert!(text.contains("2 × parked: a condition variable"), "{text}");
    go.store(true, Ordering::Release);
    for h in handles {
        h.thread().unpark();
        h.join().unwrap();
    }
}

/// Grouped dumps taken over and over while green threads park and are unparked: every
/// wake-up that arrives while a dump holds a green thread is kept, so every green thread
/// finishes its rounds (each one counted exactly once), and each dump's counts add up.
#[test]
fn grouped_dumps_racing_unparks_lose_no_wake_up() {
    let _w = common::watchdog("grouped dumps racing unparks", Duration::from_secs(300));
    let sched = Builder::new().workers(2).build().unwrap();
    const THREADS: usize = 50;
    const ROUNDS: usize = 200;
    let done = Arc::new(AtomicUsize::new(0));
    let turns: Arc<Vec<AtomicUsize>> =
        Arc::new((0..THREADS).map(|_| AtomicUsize::new(0)).collect());
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let (turns, done) = (turns.clone(), done.clone());
            sched.spawn(move || {
                for round in 1..=ROUNDS {
                    while turns[i].load(Ordering::Acquire) < round {
                        purloin_sched::park();
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    // Dumps of this scheduler only: a dump of every scheduler would hold the green threads
    // of the tests running beside this one.
    let stop = AtomicBool::new(false);
    let taken = AtomicUsize::new(0);
    let dumps = std::thread::scope(|s| {
        let dumper = s.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                let d = sched.dump_grouped();
                assert_eq!(d.groups.iter().map(|g| g.count).sum::<usize>(), d.threads);
                taken.fetch_add(1, Ordering::Release);
            }
        });
        // The rounds start once the dumps do (the first one reads the debug info).
        while taken.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        for round in 1..=ROUNDS {
            for (i, h) in handles.iter().enumerate() {
                turns[i].store(round, Ordering::Release);
                h.thread().unpark();
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        dumper.join().unwrap();
        taken.load(Ordering::Acquire)
    });
    assert_eq!(done.load(Ordering::SeqCst), THREADS);
    assert!(dumps > 0);
}
