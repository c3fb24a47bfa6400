//! The `tracing` feature: spans entered on a green thread stay right across migrations, seen
//! by a real `tracing-subscriber` registry and layer; the scheduler's `purloin::sched` events.
#![cfg(all(not(loom), feature = "tracing"))]

mod rt_common;

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::Id;
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

use rt_common::watchdog;

/// What the checking layer saw.
#[derive(Default)]
struct Seen {
    /// Problems, described (the test asserts there are none).
    errors: Vec<String>,
    /// Events checked inside a green thread's span.
    checked: u64,
    /// `purloin::sched` events: (message, id field).
    sched: Vec<(String, Option<u64>)>,
}

fn seen() -> &'static Mutex<Seen> {
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
}

fn error(e: String) {
    let mut s = seen().lock().unwrap();
    if s.errors.len() < 20 {
        s.errors.push(e);
    }
}

thread_local! {
    /// The spans this layer saw entered on this OS thread and not yet exited, in order.
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Checks that enters and exits nest per OS thread, and that an event that names the span it
/// expects to be in (`want`) is in it, according to the registry and to the nesting.
struct Check;

#[derive(Default)]
struct Fields {
    message: String,
    want: Option<u64>,
    id: Option<u64>,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "want" => self.want = Some(value),
            "id" => self.id = Some(value),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Check {
    fn on_enter(&self, id: &Id, _ctx: Context<'_, S>) {
        ENTERED.with(|e| e.borrow_mut().push(id.into_u64()));
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        let top = ENTERED.with(|e| e.borrow_mut().pop());
        if top != Some(id.into_u64()) {
            error(format!(
                "span {} exited on {:?}, whose innermost entered span is {top:?}",
                id.into_u64(),
                std::thread::current().id()
            ));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        if event.metadata().target() == "purloin::sched" {
            seen().lock().unwrap().sched.push((f.message, f.id));
            return;
        }
        let Some(want) = f.want else { return };
        let current = ctx.lookup_current().map(|s| s.id().into_u64());
        let top = ENTERED.with(|e| e.borrow().last().copied());
        if current != Some(want) || top != Some(want) {
            error(format!(
                "event in span {want} on {:?}: the registry's current span is {current:?}, the \
                 innermost entered there {top:?}",
                std::thread::current().id()
            ));
        }
        seen().lock().unwrap().checked += 1;
    }
}

fn install_subscriber() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        tracing_subscriber::registry()
            .with(Check)
            .with(tracing_subscriber::filter::LevelFilter::TRACE)
            .init();
    });
}

/// How many times a green thread resumed on another OS thread than it left (all tests).
static MIGRATIONS: AtomicU64 = AtomicU64::new(0);

/// Runs `step` (a scheduling point) inside two entered spans, then checks where the event
/// after it lands; counts the OS-thread changes.
fn traced_loop(name: u64, mut step: impl FnMut(u64) -> bool) {
    let outer = tracing::info_span!("green", name);
    let _o = outer.enter();
    let inner = tracing::info_span!("work", name);
    let _i = inner.enter();
    let want = inner.id().expect("the subscriber is interested").into_u64();
    let mut round = 0;
    loop {
        let before = std::thread::current().id();
        let more = step(round);
        if std::thread::current().id() != before {
            MIGRATIONS.fetch_add(1, Ordering::Relaxed);
        }
        tracing::info!(want, round, "resumed");
        if !more {
            break;
        }
        round += 1;
    }
}

/// 1,000+ migrations of green threads that yield and park (on channels) inside entered spans,
/// on 2 workers: every exit matches the innermost enter on its OS thread, and every event after
/// a resume is in its green thread's span by the registry's account.
#[test]
fn spans_follow_green_threads_across_migrations() {
    install_subscriber();
    let _w = watchdog("spans_follow_green_threads_across_migrations", Duration::from_secs(300));
    const TARGET: u64 = 1_000;
    // Enough rounds for 1,000 migrations many times over; reaching the cap without them fails.
    const CAP: u64 = 200_000;
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let start = MIGRATIONS.load(Ordering::Relaxed);
    let done = move || MIGRATIONS.load(Ordering::Relaxed) - start >= TARGET;
    rt.block_on(|| {
        let mut hs = Vec::new();
        for pair in 0..4u64 {
            let (to_b, from_a) = purloin::sync::channel::bounded::<bool>(1);
            let (to_a, from_b) = purloin::sync::channel::bounded::<()>(1);
            hs.push(purloin::spawn(move || {
                traced_loop(2 * pair, |round| {
                    let stop = done() || round >= CAP;
                    to_b.send(stop).unwrap();
                    purloin::yield_now();
                    from_b.recv().unwrap();
                    !stop
                })
            }));
            hs.push(purloin::spawn(move || {
                traced_loop(2 * pair + 1, |_| {
                    let stop = from_a.recv().unwrap();
                    purloin::yield_now();
                    to_a.send(()).unwrap();
                    !stop
                })
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
    });
    let migrations = MIGRATIONS.load(Ordering::Relaxed) - start;
    let s = seen().lock().unwrap();
    assert!(s.errors.is_empty(), "{} migrations; problems:\n{}", migrations, s.errors.join("\n"));
    assert!(migrations >= TARGET, "only {migrations} migrations in {CAP} rounds per green thread");
    assert!(s.checked >= 2 * TARGET, "only {} events checked", s.checked);
}

/// The scheduler's events reach the subscriber under `purloin::sched`: a spawn, park and unpark
/// of a known green thread, and a steal by an idle worker.
#[test]
fn scheduler_events_reach_the_subscriber() {
    install_subscriber();
    let _w = watchdog("scheduler_events_reach_the_subscriber", Duration::from_secs(300));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let flag = Arc::new(AtomicU64::new(0));
    let f = flag.clone();
    let h = rt.spawn(move || {
        while f.load(Ordering::Acquire) == 0 {
            purloin::park();
        }
    });
    let id = h.thread().id().0;
    // Unpark from a green thread until the waiter has parked and been woken at least once.
    let count = |what: &str| {
        seen().lock().unwrap().sched.iter().filter(|(m, i)| m == what && *i == Some(id)).count()
    };
    rt.block_on(|| {
        while count("park") == 0 {
            purloin::yield_now();
        }
        flag.store(1, Ordering::Release);
        h.thread().unpark();
    });
    h.join().unwrap();
    assert_eq!(count("spawn"), 1);
    assert!(count("park") >= 1);
    assert!(count("unpark") >= 1);

    // A green thread spawns busy children on its own worker: the other worker, idle, steals.
    let stolen = || seen().lock().unwrap().sched.iter().filter(|(m, _)| m == "steal").count();
    let mut rounds = 0;
    while stolen() == 0 {
        rounds += 1;
        assert!(rounds <= 1_000, "no steal event in 1,000 rounds of 64 spawns");
        rt.block_on(|| {
            let kids: Vec<_> = (0..64u64)
                .map(|i| {
                    purloin::spawn(move || {
                        (0..2_000u64).fold(i, |a, b| std::hint::black_box(a ^ b))
                    })
                })
                .collect();
            for k in kids {
                k.join().unwrap();
            }
        });
    }
}
