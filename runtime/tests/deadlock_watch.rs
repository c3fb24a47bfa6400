//! The deadlock watch in whole programs: each scenario runs as this binary's child process, a
//! program with no threads but its own and the runtime's, as a user's `main` would be (the
//! test harness's threads would make every deadlock uncertain, so this is a `harness = false`
//! test).
//!
//! - *Waits that end* (the watch must stay silent): green threads wait for something outside
//!   them — SIGINT sent by the parent, a tokio timer or socket, a plain OS thread that sends,
//!   unparks, unlocks or wakes a future — 2.5 s after the wait began, well past the watch's
//!   1 s grace. Each runs on the global runtime (a join from `main`), on an explicit one (a
//!   join from `main`, and `Runtime::block_on`), with 1 and with 4 workers.
//! - *Waits that cannot end* (the watch must report): a receive nobody sends on, a scope's
//!   owner on a green thread stuck on a lock, `main` blocking on a green thread's future,
//!   `block_on`'s root; with 1 and with 4 workers.
//!
//! - *With the runtime's helper threads running* (a trace writer, a schedtrace printer, a
//!   dump on a signal): a
//!   wait that cannot end is still reported.
//! - *The watch turned off* (`PURLOIN_DEADLOCK=0`): a wait that cannot end stays silent.
//!
//! The parent runs the children a few at a time and kills any that outlives its limit (the
//! watchdog: a hang fails the test instead of blocking CI).

// Under loom the runtime's signals and timers are not built: nothing to run.
#[cfg(loom)]
fn main() {}

#[cfg(not(loom))]
fn main() {
    programs::main();
}

#[cfg(not(loom))]
mod programs {

    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Child, Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    /// How long after a wait began the outside wake-up comes.
    const WAKE_AFTER: Duration = Duration::from_millis(2500);

    /// What the report says.
    const HEADLINE: &str = "all green threads are asleep — deadlock!";

    /// Where a scenario runs.
    #[derive(Clone, Copy, Debug)]
    enum Place {
        /// `purloin::spawn(f).join()` from `main` (the global runtime's watch).
        GlobalJoin,
        /// `rt.spawn(f).join()` from `main` on an explicit runtime (its watch).
        ExplicitJoin,
        /// `rt.block_on(f)` (the root's own check).
        BlockOn,
    }

    const PLACES: [Place; 3] = [Place::GlobalJoin, Place::ExplicitJoin, Place::BlockOn];

    impl Place {
        fn parse(s: &str) -> Place {
            match s {
                "global" => Place::GlobalJoin,
                "explicit" => Place::ExplicitJoin,
                "block_on" => Place::BlockOn,
                other => panic!("unknown place {other}"),
            }
        }

        fn name(self) -> &'static str {
            match self {
                Place::GlobalJoin => "global",
                Place::ExplicitJoin => "explicit",
                Place::BlockOn => "block_on",
            }
        }

        /// Runs `f` as a green thread here and returns whether it completed (`Ok`) or was unwound.
        fn run<T: Send + 'static>(
            self,
            f: impl FnOnce() -> T + Send + 'static,
        ) -> Result<T, String> {
            match self {
                Place::GlobalJoin => purloin::spawn(f).join().map_err(describe),
                Place::ExplicitJoin => {
                    let rt = purloin::Runtime::new().unwrap();
                    let r = rt.spawn(f).join().map_err(describe);
                    drop(rt);
                    r
                }
                Place::BlockOn => {
                    let rt = purloin::Runtime::new().unwrap();
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(f)))
                        .map_err(describe)
                }
            }
        }
    }

    fn describe(p: Box<dyn std::any::Any + Send>) -> String {
        if p.downcast_ref::<purloin::ForcedUnwind>().is_some() {
            return "unwound by the runtime".into();
        }
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into())
    }

    /// Tells the parent the wait is about to begin (it times outside wake-ups from here).
    fn waiting() {
        use std::io::Write;
        let mut out = std::io::stdout();
        writeln!(out, "WAITING").unwrap();
        out.flush().unwrap();
    }

    /// A plain OS thread that runs `f` `WAKE_AFTER` from now.
    fn later(f: impl FnOnce() + Send + 'static) {
        std::thread::spawn(move || {
            std::thread::sleep(WAKE_AFTER);
            f();
        });
    }

    // ------------------------------------------------------------------------------------------
    // Waits that end

    const ENDING: &[&str] = &[
        "ctrl_c",
        "thread_sends",
        "thread_unparks",
        "thread_unlocks",
        "thread_wakes_future",
        #[cfg(feature = "tokio")]
        "tokio_sleep",
        #[cfg(feature = "tokio")]
        "tokio_read",
    ];

    fn ending(name: &str, place: Place) -> Result<(), String> {
        match name {
            "ctrl_c" => {
                waiting();
                place.run(|| purloin::signal::ctrl_c().unwrap())
            }
            "thread_sends" => {
                let (tx, rx) = purloin::sync::channel::bounded::<u32>(0);
                later(move || tx.send(7).unwrap());
                waiting();
                let got = place.run(move || rx.recv())?;
                (got == Ok(7)).then_some(()).ok_or(format!("received {got:?}"))
            }
            "thread_unparks" => {
                let (tx, rx) = std::sync::mpsc::channel::<purloin::GreenThread>();
                let woken = Arc::new(AtomicBool::new(false));
                let w = woken.clone();
                later(move || {
                    let t = rx.recv().unwrap();
                    w.store(true, Ordering::Release);
                    t.unpark();
                });
                waiting();
                place.run(move || {
                    tx.send(purloin::current().unwrap()).unwrap();
                    while !woken.load(Ordering::Acquire) {
                        purloin::park();
                    }
                })
            }
            "thread_unlocks" => {
                let m = Arc::new(purloin::sync::Mutex::new(0u32));
                let (locked_tx, locked_rx) = std::sync::mpsc::channel();
                let m2 = m.clone();
                std::thread::spawn(move || {
                    let mut g = m2.lock().unwrap();
                    locked_tx.send(()).unwrap();
                    std::thread::sleep(WAKE_AFTER);
                    *g = 7;
                });
                locked_rx.recv().unwrap();
                waiting();
                let got = place.run(move || *m.lock().unwrap())?;
                (got == 7).then_some(()).ok_or(format!("read {got}"))
            }
            "thread_wakes_future" => {
                let slot: Arc<std::sync::Mutex<(bool, Option<std::task::Waker>)>> = Arc::default();
                let s2 = slot.clone();
                later(move || {
                    let mut s = s2.lock().unwrap();
                    s.0 = true;
                    if let Some(w) = s.1.take() {
                        w.wake();
                    }
                });
                waiting();
                place.run(move || {
                    purloin::future::block_on(std::future::poll_fn(|cx| {
                        let mut s = slot.lock().unwrap();
                        if s.0 {
                            std::task::Poll::Ready(())
                        } else {
                            s.1 = Some(cx.waker().clone());
                            std::task::Poll::Pending
                        }
                    }))
                })
            }
            #[cfg(feature = "tokio")]
            "tokio_sleep" => {
                waiting();
                place.run(|| {
                    purloin::tokio::block_on(async { tokio::time::sleep(WAKE_AFTER).await })
                })
            }
            #[cfg(feature = "tokio")]
            "tokio_read" => {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = listener.local_addr().unwrap();
                std::thread::spawn(move || {
                    let (mut conn, _) = listener.accept().unwrap();
                    std::thread::sleep(WAKE_AFTER);
                    std::io::Write::write_all(&mut conn, b"late").unwrap();
                });
                waiting();
                let got = place.run(move || {
                    purloin::tokio::block_on(async move {
                        use tokio::io::AsyncReadExt;
                        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                        let mut buf = [0u8; 4];
                        s.read_exact(&mut buf).await.unwrap();
                        buf
                    })
                })?;
                (&got == b"late").then_some(()).ok_or(format!("read {got:?}"))
            }
            other => panic!("unknown scenario {other}"),
        }
    }

    // ------------------------------------------------------------------------------------------
    // Waits that cannot end

    const STUCK: &[&str] = &[
        "recv_forever",
        "recv_forever_recorded",
        "recv_after_signals",
        "park_forever",
        "join_stuck_child",
        "join_after_idle",
        "scope_owner",
        "future_from_main",
    ];

    fn stuck(name: &str, place: Place) -> Result<(), String> {
        match name {
            "recv_forever" => {
                let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
                let r = place.run(move || rx.recv());
                drop(tx);
                r.map(|v| println!("RECEIVED {v:?}"))
            }
            "recv_forever_recorded" => {
                // A flight recorder runs: the report makes it write its ring to a file.
                let dir = std::env::temp_dir()
                    .join(format!("purloin-deadlock-flight-{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
                purloin::trace::flight_recorder().dir(&dir).start().unwrap();
                let r = stuck("recv_forever", place);
                // The recorder's thread writes the file after the report: wait for it (the
                // parent's watchdog ends a child that waits forever).
                loop {
                    let written = std::fs::read_dir(&dir).unwrap().flatten().any(|e| {
                        e.file_name().to_string_lossy().starts_with("purloin-flight-")
                            && e.metadata().is_ok_and(|m| m.len() > 0)
                    });
                    if written {
                        println!("FLIGHT FILE WRITTEN");
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = purloin::trace::flight_recorder().stop();
                let _ = std::fs::remove_dir_all(&dir);
                r
            }
            "recv_after_signals" => {
                // A signal watched once: its dispatcher thread lives on, but with no receiver
                // left, nothing it does can wake a green thread.
                drop(purloin::signal::Signals::new(&[purloin::signal::Signal::USR1]).unwrap());
                stuck("recv_forever", place)
            }
            "park_forever" => place.run(|| {
                loop {
                    purloin::park();
                }
            }),
            "join_stuck_child" => place.run(|| {
                let started = Arc::new(AtomicBool::new(false));
                let s2 = started.clone();
                let child = purloin::Builder::new()
                    .name("waits-forever".into())
                    .spawn(move || {
                        s2.store(true, Ordering::SeqCst);
                        loop {
                            purloin::park();
                        }
                    })
                    .unwrap();
                // Let it start on its own (a child joined before it starts runs inline instead).
                while !started.load(Ordering::SeqCst) {
                    purloin::yield_now();
                }
                child.join().map_err(describe)
            })?,
            "join_after_idle" => {
                // The join from outside starts only after every worker went idle, so no worker
                // parks after the wait began: the wait itself must wake the watch.
                let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
                // Only the runtime under test exists: another one's workers could wake it.
                let rt = match place {
                    Place::GlobalJoin => None,
                    _ => Some(purloin::Runtime::new().unwrap()),
                };
                let h = match &rt {
                    None => purloin::Builder::new()
                        .name("parked-first".into())
                        .spawn(move || rx.recv())
                        .unwrap(),
                    Some(rt) => rt.spawn(move || rx.recv()),
                };
                let stats = || rt.as_ref().map_or_else(purloin::stats, |rt| rt.stats());
                loop {
                    let s = stats();
                    if s.parked as usize == s.procs.len() && s.searching == 0 && s.live == 1 {
                        break;
                    }
                    std::thread::yield_now();
                }
                let r = h.join();
                drop(tx);
                r.map(drop).map_err(describe)
            }
            "scope_owner" => {
                // A scope's owner (`main`) waiting on a green thread stuck on a lock held forever.
                let m = purloin::sync::Mutex::new(());
                let held = m.lock().unwrap();
                let scoped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    purloin::scope(|s| {
                        s.spawn(|| drop(m.lock()));
                        std::mem::forget(held);
                    })
                }));
                scoped.map_err(describe)
            }
            "future_from_main" => {
                // `main` blocking on a green thread's future.
                let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
                let r = purloin::future::block_on(purloin::spawn(move || rx.recv()));
                drop(tx);
                r.map(drop).map_err(describe)
            }
            other => panic!("unknown scenario {other}"),
        }
    }

    // ------------------------------------------------------------------------------------------
    // The parent

    struct Case {
        kind: &'static str,
        name: &'static str,
        place: Place,
        workers: usize,
    }

    impl Case {
        fn label(&self) -> String {
            format!(
                "{} {} on {} with {} worker(s)",
                self.kind,
                self.name,
                self.place.name(),
                self.workers
            )
        }

        /// The runtime's helper threads (a trace writer, a schedtrace printer, a dump on a signal
        /// with its signal dispatcher) for the
        /// `helpers` kind: they must not make a deadlock uncertain.
        fn extra_env(&self) -> Vec<(String, String)> {
            if self.kind != "helpers" {
                return Vec::new();
            }
            let file = std::env::temp_dir().join(format!(
                "purloin-deadlock-watch-{}-{}.json",
                std::process::id(),
                self.workers
            ));
            vec![
                ("PURLOIN_TRACE".into(), file.display().to_string()),
                ("PURLOIN_SCHEDTRACE".into(), "100".into()),
                ("PURLOIN_DUMP_SIGNAL".into(), "SIGUSR2".into()),
            ]
        }

        fn start(&self) -> Child {
            Command::new(std::env::current_exe().unwrap())
                .env(
                    "PURLOIN_TEST_SCENARIO",
                    format!("{}:{}:{}", self.kind, self.name, self.place.name()),
                )
                .env("PURLOIN_WORKERS", self.workers.to_string())
                .env("PURLOIN_DEADLOCK", if self.kind == "off" { "0" } else { "1" })
                .env_remove("PURLOIN_TRACE")
                .env_remove("PURLOIN_SCHEDTRACE")
                .env_remove("PURLOIN_DUMP_SIGNAL")
                .envs(self.extra_env())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        }
    }

    /// Runs one case to its end: `Err` with what went wrong.
    fn check(case: &Case) -> Result<(), String> {
        let mut child = case.start();
        let pid = child.id() as libc::pid_t;
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut stderr = child.stderr.take().unwrap();
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        // The watchdog: a child still running after the limit is killed, and the case fails.
        let limit = Duration::from_secs(60);
        let started = Instant::now();
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let killer = std::thread::spawn(move || {
            while !d2.load(Ordering::Acquire) {
                if started.elapsed() > limit {
                    // SAFETY: kill has no memory preconditions; the pid is our unreaped child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        });
        let mut out = String::new();
        let mut line = String::new();
        while stdout.read_line(&mut line).unwrap_or(0) > 0 {
            if line.trim() == "WAITING" && case.kind == "off" {
                // Silent past the grace period (and more): then end it.
                std::thread::sleep(WAKE_AFTER * 2);
                // SAFETY: as below.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            if line.trim() == "WAITING" && case.name == "ctrl_c" {
                std::thread::sleep(WAKE_AFTER);
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGINT) };
            }
            out.push_str(&line);
            line.clear();
        }
        let status = child.wait().unwrap();
        for (var, file) in case.extra_env() {
            if var == "PURLOIN_TRACE" {
                let _ = std::fs::remove_file(file);
            }
        }
        done.store(true, Ordering::Release);
        let killed = killer.join().unwrap();
        let err = err_reader.join().unwrap();
        // The end of stderr is enough to tell what happened.
        let mut from = err.len().saturating_sub(4000);
        while !err.is_char_boundary(from) {
            from += 1;
        }
        let tail = &err[from..];
        let fail = |why: &str| {
            Err(format!("{why} (status {status})\n--- stdout\n{out}--- stderr\n{tail}"))
        };
        if killed && case.kind != "off" {
            return fail("hung: killed after 60 s");
        }
        let reported = err.contains(HEADLINE);
        match case.kind {
            "off" => {
                if reported {
                    return fail("a report while the watch is off (PURLOIN_DEADLOCK=0)");
                }
                if status.signal() != Some(libc::SIGKILL) {
                    return fail("the stuck wait ended while the watch is off");
                }
            }
            "ending" => {
                if reported {
                    return fail("a false deadlock report");
                }
                if !status.success() || !out.contains("OUTCOME ok") {
                    return fail("the wait did not complete");
                }
            }
            _ => {
                if !reported {
                    return fail("the deadlock was not reported");
                }
                if !status.success() || !out.contains("OUTCOME err") {
                    return fail("the stuck wait did not end with an error");
                }
                if case.name == "recv_forever_recorded" && !out.contains("FLIGHT FILE WRITTEN") {
                    return fail("the report did not make the flight recorder write its ring");
                }
                if case.name == "join_stuck_child"
                    && matches!(case.place, Place::BlockOn)
                    && !(err.contains("'waits-forever'")
                        && err.contains("[root]: waits on joining a green thread")
                        && err.contains("held by green thread"))
                {
                    return fail("the report does not name the root's wait and the child");
                }
            }
        }
        Ok(())
    }

    pub fn main() {
        if let Ok(s) = std::env::var("PURLOIN_TEST_SCENARIO") {
            let mut it = s.split(':');
            let (kind, name, place) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
            let place = Place::parse(place);
            let r = match kind {
                "ending" => ending(name, place),
                "off" => {
                    waiting();
                    stuck(name, place)
                }
                _ => stuck(name, place),
            };
            match r {
                Ok(()) => println!("OUTCOME ok"),
                Err(e) => println!("OUTCOME err: {e}"),
            }
            std::process::exit(0);
        }
        let mut cases = Vec::new();
        for workers in [1, 4] {
            for place in PLACES {
                for name in ENDING {
                    cases.push(Case { kind: "ending", name, place, workers });
                }
                for name in STUCK {
                    // A scope's owner, a future from `main` and a late join are waits from
                    // outside by nature: they run once, outside any `place`.
                    if matches!(*name, "scope_owner" | "future_from_main" | "join_after_idle")
                        && matches!(place, Place::BlockOn)
                        || matches!(*name, "scope_owner" | "future_from_main")
                            && matches!(place, Place::ExplicitJoin)
                    {
                        continue;
                    }
                    cases.push(Case { kind: "stuck", name, place, workers });
                }
            }
        }
        // With a trace and a schedtrace running, a deadlock is still certain.
        for workers in [1, 4] {
            cases.push(Case {
                kind: "helpers",
                name: "recv_forever",
                place: Place::GlobalJoin,
                workers,
            });
        }
        // `PURLOIN_DEADLOCK=0` turns the global runtime's watch off.
        cases.push(Case {
            kind: "off",
            name: "recv_forever",
            place: Place::GlobalJoin,
            workers: 2,
        });
        // A few at a time: most of a case's time is spent waiting.
        let failures = std::sync::Mutex::new(Vec::new());
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(case) = cases.get(i) else { break };
                        let r = check(case);
                        println!(
                            "{} ... {}",
                            case.label(),
                            if r.is_ok() { "ok" } else { "FAILED" }
                        );
                        if let Err(e) = r {
                            failures.lock().unwrap().push(format!("{}: {e}", case.label()));
                        }
                    }
                });
            }
        });
        let failures = failures.into_inner().unwrap();
        for f in &failures {
            eprintln!("\n=== {f}");
        }
        println!("\n{} passed, {} failed", cases.len() - failures.len(), failures.len());
        if !failures.is_empty() {
            std::process::exit(1);
        }
    }
}
