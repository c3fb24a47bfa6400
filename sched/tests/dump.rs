//! Dumps: states, wait info, and backtraces of parked green threads captured on their own
//! stacks while the scheduler runs (and while unparks race the capture).
#![cfg(not(loom))]

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, GreenState, SpawnOptions, WaitInfo, WaitKind};

/// Whether a frame of `bt` is `purloin_sched::park`: by its path, or by its bare name where it
/// was inlined (with line tables only, an inlined frame carries its name without the path).
fn goes_through_park(bt: &purloin_sched::StackTrace) -> bool {
    bt.frames.iter().any(|f| {
        f.function
            .as_deref()
            .is_some_and(|n| n == "park" || n.contains("purloin_sched::thread::park"))
    })
}

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
                assert!(goes_through_park(bt), "{}:\n{bt}", t.id);
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
    assert!(text.contains("\"sleeper\" [parked: a channel receive 0x10, for "), "{text}");
    let f = dump.threads.iter().find(|t| t.id == finished.thread().id());
    if let Some(f) = f {
        assert_eq!(f.state, GreenState::Finished, "{text}");
    }
    assert_eq!(dump.count(GreenState::Parked), 1, "{text}");
    assert_eq!(finished.join().unwrap(), 7);
    parked.thread().unpark();
    parked.join().unwrap();
}

/// A green thread dumping its own scheduler sees itself running, with its own stack: a frame
/// of this test's closure (named after the test, or, inlined under line tables only, a bare
/// `{closure#0}` in this file).
#[test]
fn the_caller_sees_itself_running() {
    let _w = common::watchdog("dump self", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    let h = sched.spawn(|| {
        let me = purloin_sched::current().unwrap().id();
        let dump = purloin_sched::current_dump().unwrap();
        let t = dump.threads.into_iter().find(|t| t.id == me).unwrap();
        (t.state, t.backtrace.unwrap())
    });
    let (state, bt) = h.join().unwrap();
    assert!(matches!(state, GreenState::Running { .. }), "{state:?}");
    let here = |f: &purloin_sched::Frame| {
        f.function.as_deref().is_some_and(|n| n.contains("the_caller_sees_itself_running"))
            || f.file.as_ref().is_some_and(|p| p.ends_with("tests/dump.rs"))
    };
    assert!(bt.frames.iter().any(here), "{bt}");
}

/// How long a green thread has been parked: a thread that parked earlier shows a longer time
/// than one that parked after a refresh of the clock at least `GAP` later (so the stamp is
/// taken at the park, not at the spawn or the dump), the time grows between dumps by at
/// least the time between them, and it is never less than the time since the park was seen.
/// Only lower bounds are asserted: they follow from the clock's rules (`clock`: a stamp never
/// leads the real time; a dump measures against a precise reading), whatever the load.
#[test]
fn parked_duration_is_stamped_at_the_park_and_grows() {
    const GAP: Duration = Duration::from_millis(30);
    let _w = common::watchdog("dump durations", Duration::from_secs(120));
    // `late` spins on its worker for a while on purpose: no long-runner report for it.
    let sched =
        Builder::new().workers(2).long_run_threshold(Duration::from_secs(3600)).build().unwrap();
    let early = sched.spawn(purloin_sched::park);
    let go = Arc::new(AtomicBool::new(false));
    let g2 = go.clone();
    // Runs (switched in, stamped) at once, but parks only when told to.
    let late = sched.spawn(move || {
        while !g2.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        purloin_sched::park();
    });
    while !sched.parked().iter().any(|p| p.thread.id() == early.thread().id()) {
        std::thread::yield_now();
    }
    let early_seen = std::time::Instant::now();
    std::thread::sleep(GAP); // lets time pass: what is measured
    // A dump reads the OS clock and refreshes the coarse one: `late` parks after this.
    let _ = sched.states();
    go.store(true, Ordering::Release);
    while !sched.parked().iter().any(|p| p.thread.id() == late.thread().id()) {
        std::thread::yield_now();
    }
    let lower = early_seen.elapsed();
    let first = sched.states();
    let of = |d: &purloin_sched::Dump, id| {
        let t = d.threads.iter().find(|t| t.id == id).unwrap();
        assert_eq!(t.state, GreenState::Parked, "{d}");
        t.in_state_for.unwrap_or_else(|| panic!("a parked thread has a duration: {d}"))
    };
    let (e1, l1) = (of(&first, early.thread().id()), of(&first, late.thread().id()));
    assert!(e1 >= lower, "parked at least since it was seen parked: {e1:?} < {lower:?}");
    assert!(e1 >= l1 + GAP, "the later park has the later stamp: early {e1:?}, late {l1:?}");
    let between = std::time::Instant::now();
    std::thread::sleep(GAP);
    let elapsed = between.elapsed();
    let second = sched.dump();
    let e2 = of(&second, early.thread().id());
    assert!(e2 >= e1 + elapsed, "grows between dumps: {e1:?} then {e2:?} ({elapsed:?} apart)");
    let text = second.to_string();
    assert!(text.contains("[parked, for "), "{text}");
    early.thread().unpark();
    late.thread().unpark();
    early.join().unwrap();
    late.join().unwrap();
}

/// `spawned_by`: `None` for a spawn from a plain thread; the spawning green thread's id for an
/// eager spawn (with options), a lazy spawn that a worker starts, a lazy spawn whose handle
/// asked for its identity before it started, and a spawn from a child its joiner runs inline
/// (the joiner's record runs it: the child's id if it has one, as a named child does).
#[test]
fn spawned_by_names_the_spawning_green_thread() {
    let _w = common::watchdog("spawned_by", Duration::from_secs(120));
    let sched = Builder::new().workers(1).build().unwrap();
    let marker = |object| WaitInfo { kind: WaitKind::Park, object, holder: None };
    let parent_line = line!() + 1;
    let parent = sched.spawn(move || {
        let me = purloin_sched::current().unwrap().id();
        let named = SpawnOptions { name: Some("eager".into()), ..Default::default() };
        let eager = purloin_sched::spawn_with(named, purloin_sched::park).unwrap();
        let eager_line = line!() - 1;
        // Lazy (default options); `thread()` before it could start (one worker, and this
        // green thread does not switch) binds its identity: the binder's path.
        let (bound, bound_line) = (purloin_sched::spawn(purloin_sched::park).unwrap(), line!());
        let _ = bound.thread().id();
        // Lazy, and nobody asks for its identity: the worker that dequeues it makes its record.
        let adopted_line = line!() + 1;
        let adopted = purloin_sched::spawn(move || {
            purloin_sched::set_wait_info(Some(marker(0xad0)));
            purloin_sched::park();
        })
        .unwrap();
        // A named child joined at once runs inline (not started yet); what it spawns is
        // reported as spawned by the record running it.
        let named = SpawnOptions { name: Some("inline".into()), ..Default::default() };
        let middle = purloin_sched::spawn_with(named, move || {
            let grandchild_line = line!() + 1;
            let grandchild = purloin_sched::spawn(move || {
                purloin_sched::set_wait_info(Some(marker(0x9c)));
                purloin_sched::park();
            })
            .unwrap();
            (purloin_sched::current().unwrap().id(), grandchild, grandchild_line)
        })
        .unwrap();
        let (middle_id, grandchild, grandchild_line) = middle.join().unwrap();
        let parked = |n| {
            purloin_sched::current_worker_states()
                .unwrap()
                .threads
                .iter()
                .filter(|t| t.state == GreenState::Parked)
                .count()
                >= n
        };
        while !parked(4) {
            purloin_sched::yield_now();
        }
        let dump = purloin_sched::current_dump().unwrap();
        let lines = [eager_line, bound_line, adopted_line, grandchild_line];
        (me, middle_id, dump, [eager, bound, adopted, grandchild], lines)
    });
    let (parent_id, middle_id, dump, handles, lines) = parent.join().unwrap();
    let text = dump.to_string();
    let by = |pick: &dyn Fn(&purloin_sched::GreenDump) -> bool| {
        dump.threads.iter().find(|t| pick(t)).unwrap_or_else(|| panic!("{text}")).spawned_by
    };
    let p = dump.threads.iter().find(|t| t.id == parent_id).unwrap();
    assert_eq!(p.spawned_by, None, "spawned from a plain thread: {text}");
    assert_eq!(by(&|t| t.name.as_deref() == Some("eager")), Some(parent_id), "{text}");
    assert_eq!(by(&|t| t.id == handles[1].thread().id()), Some(parent_id), "bound: {text}");
    let marked = |o| move |t: &purloin_sched::GreenDump| t.wait.is_some_and(|w| w.object == o);
    assert_eq!(by(&marked(0xad0)), Some(parent_id), "adopted: {text}");
    let grandchild_by = by(&marked(0x9c));
    assert!(
        grandchild_by == Some(middle_id) || grandchild_by == Some(parent_id),
        "the inline child or its joiner: {text}"
    );
    assert!(text.contains(&format!("created by green thread {parent_id} at ")), "{text}");
    // Where: each spawn call's line in this file, whichever path made the record.
    let at = |pick: &dyn Fn(&purloin_sched::GreenDump) -> bool| {
        let t = dump.threads.iter().find(|t| pick(t)).unwrap_or_else(|| panic!("{text}"));
        let at = t.created_at.unwrap_or_else(|| panic!("no place for {}: {text}", t.id));
        assert!(at.file().ends_with("dump.rs"), "{at}");
        at.line()
    };
    assert_eq!(at(&|t| t.id == parent_id), parent_line, "{text}");
    assert_eq!(at(&|t| t.name.as_deref() == Some("eager")), lines[0], "{text}");
    assert_eq!(at(&|t| t.id == handles[1].thread().id()), lines[1], "bound: {text}");
    assert_eq!(at(&marked(0xad0)), lines[2], "adopted: {text}");
    assert_eq!(at(&marked(0x9c)), lines[3], "inline child's spawn: {text}");
    for h in handles {
        h.thread().unpark();
        h.join().unwrap();
    }
}

/// Whether a frame's function is `name` (its path ends with it, or it is the bare name an
/// inlined frame has under line tables only).
fn is_fn(f: &purloin_sched::Frame, name: &str) -> bool {
    f.function.as_deref().is_some_and(|n| n == name || n.ends_with(&format!("::{name}")))
}

/// No frame of the stack walk itself (the walker, the `backtrace` crate, the visit of the
/// parked stack) anywhere in the trace.
fn assert_no_walker_frames(bt: &purloin_sched::StackTrace) {
    for f in bt.frames.iter().chain(&bt.hidden).chain(&bt.entry) {
        let name = f.function.as_deref().unwrap_or("");
        let file = f.file.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        assert!(
            !name.contains("walk_here")
                && !name.contains("walk_visited")
                && !name.contains("trace_unsynchronized")
                && !name.contains("visit")
                && !file.contains("/backtrace-"),
            "a walker frame {name} at {file}:\n{bt}"
        );
    }
}

/// The function the green thread of the next test waits in.
#[inline(never)]
fn waits_for_its_turn(turn: &AtomicBool) {
    while !turn.load(Ordering::Acquire) {
        purloin_sched::park();
    }
    black_box(turn);
}

/// A parked green thread's stack reads like Go's: it starts at the wait (`park`, the call the
/// green thread's own code made), then the function that waits; the scheduler's switch is
/// hidden and no frame of the walk itself shows; the scheduler's way in is one line; and the
/// dump ends the thread with where it was created (this file and line).
#[test]
fn a_parked_thread_starts_at_its_wait_and_ends_with_its_creation() {
    let _w = common::watchdog("dump reads like Go", Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    let turn = Arc::new(AtomicBool::new(false));
    let t2 = turn.clone();
    let (h, line) = (sched.spawn(move || waits_for_its_turn(&t2)), line!());
    // `park` may return spuriously (the thread then parks again): dump until the dump caught
    // it parked, which is when its stack is walked.
    let dump = loop {
        let dump = sched.dump();
        let t = dump.threads.iter().find(|t| t.id == h.thread().id());
        if t.is_some_and(|t| t.state == GreenState::Parked) {
            break dump;
        }
        std::thread::yield_now();
    };
    let t = dump.threads.iter().find(|t| t.id == h.thread().id()).unwrap();
    let bt = t.backtrace.as_ref().expect("a parked green thread's stack is walked");
    assert!(is_fn(&bt.frames[0], "park"), "starts at the wait:\n{bt}");
    assert!(is_fn(&bt.frames[1], "waits_for_its_turn"), "then its caller:\n{bt}");
    assert!(bt.hidden.iter().any(|f| is_fn(f, "switch_out_from")), "{:?}", bt.hidden);
    assert!(!bt.frames.iter().any(|f| is_fn(f, "switch_out_from")), "{bt}");
    assert!(bt.entry.iter().any(|f| is_fn(f, "g_entry")), "{:?}", bt.entry);
    assert_no_walker_frames(bt);
    let at = t.created_at.expect("a spawn records its place");
    assert!(at.file().ends_with("tests/dump.rs"), "{at}");
    assert_eq!(at.line(), line);
    let text = dump.to_string();
    let header = format!("scheduler #{}: ", sched.number());
    assert!(text.contains(&header), "{text}");
    assert!(text.contains("... runtime entry frames"), "{text}");
    let created = format!("created by a plain thread at {}:{line}:", at.file());
    assert!(text.contains(&created), "{text}");
    turn.store(true, Ordering::Release);
    h.thread().unpark();
    h.join().unwrap();
}

/// The green thread that asks for a dump sees its own stack start at the dump call, with the
/// dump's own frames hidden.
#[test]
fn the_caller_s_own_stack_starts_at_the_dump_call() {
    let _w = common::watchdog("dump of the caller", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let bt = sched
        .spawn(|| {
            let me = purloin_sched::current().unwrap().id();
            let dump = purloin_sched::current_dump().unwrap();
            dump.threads.into_iter().find(|t| t.id == me).unwrap().backtrace.unwrap()
        })
        .join()
        .unwrap();
    assert!(is_fn(&bt.frames[0], "current_dump"), "{bt}");
    assert_no_walker_frames(&bt);
}

/// `dump_all` lists every running scheduler of the process by its number, with its green
/// threads, and leaves out one whose shutdown began.
#[test]
fn dump_all_lists_every_running_scheduler() {
    let _w = common::watchdog("dump_all", Duration::from_secs(120));
    let a = Builder::new().workers(1).build().unwrap();
    let b = Builder::new().workers(2).build().unwrap();
    assert_ne!(a.number(), b.number());
    let ha = a.spawn(purloin_sched::park);
    let hb = b.spawn(purloin_sched::park);
    while a.parked().is_empty() || b.parked().is_empty() {
        std::thread::yield_now();
    }
    let dumps = purloin_sched::dump_all();
    let of = |n: u64| dumps.iter().find(|d| d.scheduler == n).unwrap_or_else(|| panic!("#{n}"));
    let (da, db) = (of(a.number()), of(b.number()));
    assert_eq!((da.workers, db.workers), (1, 2));
    assert!(da.threads.iter().any(|t| t.id == ha.thread().id()));
    assert!(db.threads.iter().any(|t| t.id == hb.thread().id()));
    assert!(!da.threads.iter().any(|t| t.id == hb.thread().id()));
    let parked = db.threads.iter().find(|t| t.id == hb.thread().id()).unwrap();
    assert!(parked.backtrace.as_ref().is_some_and(|bt| is_fn(&bt.frames[0], "park")), "{db}");
    ha.thread().unpark();
    ha.join().unwrap();
    let gone = a.number();
    drop(a);
    assert!(purloin_sched::dump_all().iter().all(|d| d.scheduler != gone));
    hb.thread().unpark();
    hb.join().unwrap();
}

/// Dumps of every scheduler racing schedulers that start and shut down: every shutdown ends
/// (its parked green threads unwound or woken, each exactly once), and no dump shows a
/// scheduler after its shutdown returned.
#[test]
fn dump_all_races_schedulers_starting_and_stopping() {
    let _w = common::watchdog("dump_all vs shutdown", Duration::from_secs(300));
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let dumper = {
        let (stop, stopped) = (stop.clone(), stopped.clone());
        std::thread::spawn(move || {
            let mut dumps = 0u64;
            while !stop.load(Ordering::Acquire) {
                let gone = stopped.lock().unwrap().clone();
                for d in purloin_sched::dump_all() {
                    assert!(!gone.contains(&d.scheduler), "#{} after its shutdown", d.scheduler);
                }
                dumps += 1;
            }
            dumps
        })
    };
    let ends = Arc::new(AtomicU64::new(0));
    for _ in 0..30 {
        let sched = Builder::new().workers(1).build().unwrap();
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let ends = ends.clone();
                sched.spawn(move || {
                    struct End(Arc<AtomicU64>);
                    impl Drop for End {
                        fn drop(&mut self) {
                            self.0.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    let _end = End(ends);
                    purloin_sched::park();
                })
            })
            .collect();
        while sched.parked().len() < 3 {
            std::thread::yield_now();
        }
        let number = sched.number();
        let report = sched.shutdown_timeout(Duration::from_millis(10));
        assert_eq!(report.unfinished, 0, "{report:?}");
        stopped.lock().unwrap().push(number);
        for h in handles {
            // Unwound by the shutdown, or woken by it while a dump held it: either way ended.
            let _ = h.join();
        }
    }
    stop.store(true, Ordering::Release);
    let dumps = dumper.join().unwrap();
    assert_eq!(ends.load(Ordering::Relaxed), 90, "each green thread ended exactly once");
    eprintln!("{dumps} dumps raced 30 shutdowns");
}

/// A scheduler leaves `dump_all` as soon as its shutdown begins, while that shutdown still
/// waits for a green thread: a dump never looks at a stopping scheduler.
#[test]
fn a_scheduler_leaves_dump_all_when_its_shutdown_begins() {
    let _w = common::watchdog("dump_all during shutdown", Duration::from_secs(60));
    let sched = Builder::new().workers(1).build().unwrap();
    let number = sched.number();
    let (running, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (r2, l2) = (running.clone(), release.clone());
    // Runnable until released: the shutdown waits for it.
    let h = sched.spawn(move || {
        r2.store(true, Ordering::Release);
        while !l2.load(Ordering::Acquire) {
            purloin_sched::yield_now();
        }
    });
    while !running.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    assert!(purloin_sched::dump_all().iter().any(|d| d.scheduler == number));
    let stopper = std::thread::spawn(move || sched.shutdown_timeout(Duration::from_secs(60)));
    while purloin_sched::dump_all().iter().any(|d| d.scheduler == number) {
        std::thread::yield_now();
    }
    assert!(!stopper.is_finished(), "left the list before its shutdown ended");
    release.store(true, Ordering::Release);
    assert_eq!(stopper.join().unwrap(), purloin_sched::ShutdownReport::default());
    h.join().unwrap();
}
