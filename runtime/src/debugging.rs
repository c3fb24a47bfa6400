//! Debugging a stuck program: where every green thread is, what it waits on, and what the
//! scheduler did.
//!
//! # 1. Dump every green thread
//!
//! [`dump`] lists the green threads of the runtime (the current one on a green thread, the
//! global one elsewhere): id, name, state (running on worker N, in a blocking section,
//! runnable, parked, finished but not joined), how long it has been in that state, what a
//! parked one waits on, which green thread spawned it, and a symbolized backtrace of each
//! parked green thread's *own* stack — walked on that stack without running any of its code
//! (see `purloin_sched::Dump` for how). Its `Display` reads like Go's SIGQUIT traceback.
//!
//! The time in a state comes from a coarse clock that the scheduler's monitor refreshes, so
//! that parking and waking never read the OS clock: it is never less than the true time and
//! over by at most 10 ms (see `purloin_sched::GreenDump::in_state_for`).
//!
//! ```
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
//!     let stuck = purloin::spawn(move || rx.recv()); // nobody sends: it parks
//!     while purloin::debugging::dump().count(purloin::sched::GreenState::Parked) == 0 {
//!         purloin::yield_now();
//!     }
//!     let dump = purloin::debugging::dump();
//!     println!("{dump}");
//!     // green thread 4294967298 [parked: a channel receive 0x..., for 1.3ms]:
//!     //     0: purloin_sched::switch::switch_out_from
//!     //     ...
//!     //     5: rust_out::main::{{closure}}::{{closure}}
//!     // spawned by green thread 4294967297
//!     let me = purloin::current().unwrap().id();
//!     let t = dump.threads.iter().find(|t| t.id == stuck.thread().id()).unwrap();
//!     assert_eq!(t.spawned_by, Some(me));
//!     assert!(t.in_state_for.is_some());
//!     drop(tx);
//!     let _ = stuck.join();
//! });
//! ```
//!
//! # 2. Ask a running program for a dump
//!
//! Set `PURLOIN_DUMP_SIGNAL=SIGQUIT` (or `SIGUSR1`, ...; a number works too) before the first
//! runtime is built, or call [`dump_on_signal`]: each delivery writes the dump to stderr and
//! the program keeps running (Go exits on SIGQUIT; purloin does not). The dump is written by
//! an ordinary thread fed by [`signal`](crate::signal)'s self-pipe dispatcher, never inside a
//! signal handler. `kill -QUIT <pid>` (or Ctrl-\ in the terminal) then shows where everything
//! is.
//!
//! # 3. The deadlock report
//!
//! When every green thread of a runtime is parked and nothing can wake them (no timer, no I/O,
//! no plain thread holding a handle), `block_on` reports the deadlock
//! ([`DeadlockReport`](crate::DeadlockReport): who waits on what, and the wait-for cycles
//! among them), followed by the dump, so the report shows the stacks of the green threads in
//! the cycle. [`detect_deadlock`](crate::detect_deadlock) builds the report on demand.
//!
//! # 4. Metrics
//!
//! [`stats`](crate::stats) snapshots the scheduler's counters;
//! [`metrics::prometheus`](crate::metrics::prometheus) renders them, with queue depths, timers
//! pending and green threads by state, in the Prometheus text format for whatever serves your
//! `/metrics`. For the latency of waits, turn on the park-duration histogram
//! ([`Builder::park_histogram`](crate::runtime::Builder::park_histogram) or
//! `PURLOIN_PARK_HISTOGRAM=1`): each park is timed with the OS clock (log2 buckets from
//! 1.024 µs), at the cost of two clock reads per park. `PURLOIN_SCHEDTRACE=1000`
//! prints one line of scheduler state per second on stderr (Go's `GODEBUG=schedtrace`).
//!
//! # 5. A trace file: what the scheduler did, over time
//!
//! When the question is not "where is everything now" but "what happened" (why a request
//! waited, which worker ran what, who woke whom), record a trace: run the program with
//! `PURLOIN_TRACE=out.json` (the first runtime built records until it shuts down), or call
//! [`trace::start`](crate::trace::start) and [`trace::stop`](crate::trace::stop) around the
//! interesting stretch, or use [`Builder::trace`](crate::runtime::Builder::trace). Then open
//! the file at <https://ui.perfetto.dev> ("Open trace file"; the file stays in the browser)
//! or in `chrome://tracing` ("Load").
//!
//! Each worker is a track. On it, each green thread's runs are slices named `G<id>` (its
//! name first if it has one), with `blocking` slices inside them and `idle` slices where the
//! worker slept. Arrows (flows) lead from each spawn to the new green thread's first run, and
//! from each wake-up (a green thread's unpark, a timer, the poller) to the run it caused.
//! Instants mark each park (click it: the reason, the object, the holder, as in a dump),
//! unpark (`by` whom), steal, global-queue pull, timers fired and poller wake-up. A green
//! thread that waits too long shows as a park whose wake arrow starts late; a green thread
//! that hogs a worker as one long run slice; work that never spreads as steals that never
//! happen. See [`trace`](crate::trace) for the details and the cost.
//!
//! ```
//! let path = std::env::temp_dir().join(format!("purloin-debugging-{}.json", std::process::id()));
//! purloin::trace::start(&path).unwrap();
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     let (tx, rx) = purloin::sync::channel::bounded::<u32>(0);
//!     let child = purloin::spawn(move || rx.recv().unwrap()); // parks until the send
//!     tx.send(7).unwrap(); // unparks it: a wake flow in the trace
//!     assert_eq!(child.join().unwrap(), 7);
//! });
//! drop(rt);
//! let summary = purloin::trace::stop().unwrap();
//! assert!(summary.events > 0 && summary.dropped == 0);
//! # std::fs::remove_file(&path).unwrap();
//! ```
//!
//! # 6. `tracing`
//!
//! With the `tracing` feature, spans work on green threads as they do on OS threads. A
//! subscriber keeps the stack of entered spans per OS thread, and a green thread that waits
//! inside a span may resume on another worker; so at every switch the runtime exits the green
//! thread's entered spans on the OS thread it leaves and enters them again, in the same order,
//! on the one that resumes it (a layer sees these as `on_exit` / `on_enter` pairs). Events and
//! new spans on a green thread get its own current span as their parent, whichever worker runs
//! it. The scheduler also reports what it does as `TRACE` events under the `purloin::sched`
//! target: `spawn` (`id`, `by`), `park` (`id`), `unpark` (`id`, `by`) and `steal` (`thief`,
//! `victim`, `count`); a filter such as `purloin::sched=trace` turns them on. Set the
//! subscriber before the first runtime is built (the first `spawn` builds the global one):
//! the runtime built then installs the span mover for the whole process. Without it, a
//! switch or an event site costs one load and a predictable branch.
//!
//! ```
//! # #[cfg(feature = "tracing")] {
//! use tracing_subscriber::prelude::*;
//!
//! tracing_subscriber::registry().init();
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     let span = tracing::info_span!("request", id = 7);
//!     let _entered = span.enter();
//!     // The wait may resume this green thread on the other worker: the span is still current
//!     // there, and no longer entered on the worker it left.
//!     purloin::sleep(std::time::Duration::from_millis(1));
//!     assert_eq!(tracing::Span::current().id(), span.id());
//! });
//! # }
//! ```

use std::io;

use purloin_sched::Dump;

use crate::signal::{Signal, Signals};

/// Every green thread of the runtime running the current green thread (of the global runtime,
/// from a plain thread), with backtraces of the parked ones. See the [module docs](self).
///
/// # Examples
///
/// ```
/// let h = purloin::spawn(purloin::park);
/// while purloin::debugging::dump().count(purloin::sched::GreenState::Parked) == 0 {
///     std::thread::yield_now();
/// }
/// let dump = purloin::debugging::dump();
/// let me = dump.threads.iter().find(|t| t.id == h.thread().id()).unwrap();
/// assert!(me.backtrace.as_ref().unwrap().contains("park"));
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
pub fn dump() -> Dump {
    purloin_sched::current_dump().unwrap_or_else(|| crate::rt::global().scheduler().dump())
}

/// From now on, each delivery of `signal` writes [`dump`] of the global runtime to stderr
/// (the program keeps running). Returns an error if the signal cannot be watched.
///
/// # Errors
/// `signal` is one that cannot be caught or is reserved (see [`signal`](crate::signal)), or
/// the dispatcher thread could not be started.
///
/// # Examples
///
/// ```no_run
/// purloin::debugging::dump_on_signal(purloin::signal::Signal::QUIT).unwrap();
/// // `kill -QUIT <pid>` now prints every green thread's stack to stderr.
/// ```
pub fn dump_on_signal(signal: Signal) -> io::Result<()> {
    let signals = Signals::new(&[signal])?;
    std::thread::Builder::new().name("purloin-dump".into()).spawn(move || {
        loop {
            signals.recv();
            let dump = crate::rt::global().scheduler().dump();
            eprintln!("{dump}");
        }
    })?;
    Ok(())
}

/// Reads `PURLOIN_DUMP_SIGNAL` (a name such as `SIGQUIT` or `QUIT`, or a number) once per
/// process and starts [`dump_on_signal`] for it.
pub(crate) fn start_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(v) = std::env::var("PURLOIN_DUMP_SIGNAL") else { return };
        let name = v.trim().trim_start_matches("SIG");
        let n = match name {
            "QUIT" => libc::SIGQUIT,
            "USR1" => libc::SIGUSR1,
            "USR2" => libc::SIGUSR2,
            "HUP" => libc::SIGHUP,
            "INT" => libc::SIGINT,
            "TERM" => libc::SIGTERM,
            other => match other.parse() {
                Ok(n) => n,
                Err(_) => {
                    eprintln!("purloin: PURLOIN_DUMP_SIGNAL={v}: not a signal name or number");
                    return;
                }
            },
        };
        if let Err(e) = dump_on_signal(Signal::from_raw(n)) {
            eprintln!("purloin: PURLOIN_DUMP_SIGNAL={v}: {e}");
        }
    });
}
