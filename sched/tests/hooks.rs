//! Several scheduler hooks at once: each sees every spawn, park and unpark, and each gets back
//! exactly the switch words its own `switch_out` returned. Hooks are process-wide and never
//! removed, so this file's tests share the two hooks it installs.
#![cfg(not(loom))]

mod common;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use purloin_sched::hook::{self, Event, Hook, InstallError};

/// Counts events and checks its switch words: each `switch_out` returns a fresh word tagged
/// with the hook's own tag and remembers it; each `switch_in` must get one of its own words
/// back, once (or 0 for a green thread switched out before the hook was installed).
struct Counting {
    tag: usize,
    spawns: AtomicU64,
    parks: AtomicU64,
    unparks: AtomicU64,
    next: AtomicU64,
    outstanding: Mutex<BTreeSet<usize>>,
    wrong_words: AtomicU64,
    switch_ins: AtomicU64,
}

impl Counting {
    const fn new(tag: usize) -> Counting {
        Counting {
            tag,
            spawns: AtomicU64::new(0),
            parks: AtomicU64::new(0),
            unparks: AtomicU64::new(0),
            next: AtomicU64::new(1),
            outstanding: Mutex::new(BTreeSet::new()),
            wrong_words: AtomicU64::new(0),
            switch_ins: AtomicU64::new(0),
        }
    }
}

impl Hook for Counting {
    fn switch_out(&self, finished: bool) -> usize {
        if finished {
            return 0;
        }
        let word = (self.next.fetch_add(1, Ordering::Relaxed) as usize) << 8 | self.tag;
        self.outstanding.lock().unwrap().insert(word);
        word
    }

    fn switch_in(&self, saved: usize) {
        self.switch_ins.fetch_add(1, Ordering::Relaxed);
        if saved != 0 && !self.outstanding.lock().unwrap().remove(&saved) {
            self.wrong_words.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn event(&self, e: Event) {
        let n = match e {
            Event::Spawn { .. } => &self.spawns,
            Event::Park { .. } => &self.parks,
            Event::Unpark { .. } => &self.unparks,
            _ => return,
        };
        n.fetch_add(1, Ordering::Relaxed);
    }
}

static A: Counting = Counting::new(0xA);
static B: Counting = Counting::new(0xB);

fn install_both() {
    for h in [&A, &B] {
        match hook::install(h) {
            Ok(()) | Err(InstallError::AlreadyInstalled) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// Both hooks see the spawn, the park and the unpark of a green thread, and every switch
/// word each gets back is one it gave out (none of the other's, none twice).
#[test]
fn two_hooks_both_see_spawn_park_unpark_and_their_own_words() {
    let _w = common::watchdog("two hooks", Duration::from_secs(120));
    install_both();
    let sched = purloin_sched::Builder::new().workers(2).build().unwrap();
    let before: Vec<[u64; 4]> = [&A, &B]
        .iter()
        .map(|h| {
            let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
            [l(&h.spawns), l(&h.parks), l(&h.unparks), l(&h.switch_ins)]
        })
        .collect();
    let handles: Vec<_> = (0..20)
        .map(|_| {
            sched.spawn(|| {
                for _ in 0..5 {
                    purloin_sched::yield_now();
                }
                purloin_sched::park();
            })
        })
        .collect();
    while sched.parked().len() < handles.len() {
        std::thread::yield_now();
    }
    for h in &handles {
        h.thread().unpark();
    }
    handles.into_iter().for_each(|h| h.join().unwrap());
    for (h, before) in [&A, &B].iter().zip(before) {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert!(l(&h.spawns) - before[0] >= 20, "spawns seen by hook {:#x}", h.tag);
        assert!(l(&h.parks) - before[1] >= 20, "parks seen by hook {:#x}", h.tag);
        assert!(l(&h.unparks) - before[2] >= 20, "unparks seen by hook {:#x}", h.tag);
        assert!(l(&h.switch_ins) - before[3] >= 20, "switch-ins seen by hook {:#x}", h.tag);
        assert_eq!(l(&h.wrong_words), 0, "hook {:#x} got a word it did not give", h.tag);
    }
}

/// The same hook is refused a second time (it would see each event twice).
#[test]
fn the_same_hook_is_not_installed_twice() {
    install_both();
    assert_eq!(hook::install(&A), Err(InstallError::AlreadyInstalled));
    assert_eq!(hook::install(&B), Err(InstallError::AlreadyInstalled));
}

/// With hooks installed a parked green thread's switch-out has a frame more (the hooked
/// switch, out of line); a dump still cuts its stack at the wait it called.
#[test]
fn a_dump_cuts_a_hooked_switch_out_at_the_wait() {
    let _w = common::watchdog("dump with hooks", Duration::from_secs(120));
    install_both();
    let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
    let h = sched.spawn(purloin_sched::park);
    while sched.parked().is_empty() {
        std::thread::yield_now();
    }
    let dump = sched.dump();
    let t = dump.threads.iter().find(|t| t.id == h.thread().id()).unwrap();
    let top =
        t.backtrace.as_ref().and_then(|bt| bt.frames.first()).and_then(|f| f.function.clone());
    // With line tables only (as `cargo xtask ci` builds tests) a frame's name has no path.
    assert!(top.as_deref().is_some_and(|f| f == "park" || f.ends_with("::park")), "{dump}");
    h.thread().unpark();
    h.join().unwrap();
}
