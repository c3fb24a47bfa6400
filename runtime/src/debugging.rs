//! Debugging a stuck program: where every green thread is, what it waits on, and what the
//! scheduler did.
//!
//! # 1. Dump every green thread
//!
//! [`dump`] lists the green threads of the runtime (the current one on a green thread, the
//! global one elsewhere): id, name, state (running on worker N, in a blocking section,
//! runnable, parked, finished but not joined), how long it has been in that state, what a
//! parked one waits on, which green thread spawned it and where, and a symbolized backtrace of
//! each parked green thread's *own* stack — walked on that stack without running any of its
//! code (see `purloin_sched::Dump` for how). Its `Display` reads like Go's SIGQUIT traceback:
//! a parked green thread's stack starts at the wait its code called (`Receiver::recv`,
//! `Mutex::lock`, `sleep`; the scheduler's park and switch frames above it are hidden), ends
//! with its own entry function (the runtime's way in below it shows as one line, "... runtime
//! entry frames"), and is followed by "created by green thread N at file:line" (or "created
//! by a plain thread at file:line"): every spawn function records its caller's place in the
//! source.
//!
//! The time in a state comes from a coarse clock that the scheduler's monitor refreshes, so
//! that parking and waking never read the OS clock: it is never less than the true time and
//! over by at most 10 ms (see `purloin_sched::GreenDump::in_state_for`).
//!
//! ```
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
//!     // Nobody sends: it parks.
//!     let (stuck, line) = (purloin::spawn(move || rx.recv()), line!());
//!     while purloin::debugging::dump().count(purloin::sched::GreenState::Parked) == 0 {
//!         purloin::yield_now();
//!     }
//!     let dump = purloin::debugging::dump();
//!     println!("{dump}");
//!     // green thread 4294967298 [parked: a channel receive 0x..., for 1.3ms]:
//!     //     0: purloin_sync::channel::Receiver<T>::recv
//!     //            at src/channel/mod.rs:366
//!     //     1: rust_out::main::{{closure}}::{{closure}}
//!     //            at src/main.rs:7
//!     //        ... runtime entry frames (21)
//!     // created by green thread 4294967297 at src/main.rs:7:23
//!     let me = purloin::current().unwrap().id();
//!     let t = dump.threads.iter().find(|t| t.id == stuck.thread().id()).unwrap();
//!     assert_eq!(t.spawned_by, Some(me));
//!     assert_eq!(t.created_at.unwrap().line(), line);
//!     let first = &t.backtrace.as_ref().unwrap().frames[0];
//!     assert!(first.function.as_deref().unwrap().contains("recv"));
//!     assert!(t.in_state_for.is_some());
//!     drop(tx);
//!     let _ = stuck.join();
//! });
//! ```
//!
//! With many green threads, [`dump_grouped`] is the view to take (Go's goroutine profile with
//! `debug=1`): green threads with the same state, wait, stack and spawn site form one group,
//! shown once with its count ("12000 × parked: a channel receive"), largest first. It walks
//! every parked green thread's stack but keeps and symbolizes one per group, so it stays fast
//! and small with a million green threads.
//!
//! # 2. Ask a running program for a dump
//!
//! Set `PURLOIN_DUMP_SIGNAL=SIGQUIT` before the first runtime is built, or call
//! [`dump_on_signal`]: each delivery writes [`dump_all`] — every runtime of the process, the
//! global one and each one built with [`Builder`](crate::runtime::Builder), each in a section
//! of its own — to stderr, and the program keeps running (Go exits on SIGQUIT; purloin does
//! not). Past [`SIGNAL_GROUPED_ABOVE`] green threads it writes [`dump_all_grouped`] instead. A runtime that was never started is not started for it. The dump is written by an
//! ordinary thread fed by [`signal`](crate::signal)'s self-pipe dispatcher, never inside a
//! signal handler. `kill -QUIT <pid>` (or Ctrl-\ in the terminal) then shows where everything
//! is.
//!
//! The variable takes any signal a program may catch, by name or number: `SIGQUIT`, `QUIT`,
//! `sigusr1`, `3`, and the real-time signals as `SIGRTMIN`, `SIGRTMIN+3`, `SIGRTMAX-1` or
//! their numbers (34 to 64 on Linux); the prefix `SIG` is optional and case does not matter.
//! Refused, with a message that lists the valid names: SIGKILL and SIGSTOP (no process can
//! catch them), SIGSEGV and SIGBUS (purloin's stack-overflow detection handles them), the other
//! program faults SIGILL, SIGFPE and SIGTRAP, and signals 32 and 33 (the C library's own). The
//! program then runs without a dump signal.
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
//! 1.024 µs), at the cost of two clock reads per park. How long runnable green threads wait
//! for a worker is always measured, on a sample of about one in
//! [`SCHED_LATENCY_PERIOD`](crate::sched::SCHED_LATENCY_PERIOD) queueings
//! ([`Stats::sched_latency`](crate::sched::Stats::sched_latency), and
//! `purloin_sched_latency_seconds` in the Prometheus text). `PURLOIN_SCHEDTRACE=1000`
//! prints one line of scheduler state per second on stderr (Go's `GODEBUG=schedtrace`).
//!
//! Per green thread, [`GreenThread::cpu_time`](crate::GreenThread::cpu_time) and
//! [`switches`](crate::GreenThread::switches) (also on [`JoinHandle`](crate::JoinHandle), and
//! in dumps as "ran 1.2ms in 3 switches") say how long it has run on a worker and how often it
//! was switched in. The run time is charged with the coarse clock the dumps use, so parking
//! and waking read no OS clock: it is exact over many runs and may show 0 for a green thread
//! that ran less than the clock's step (10 ms); see `purloin_sched::GreenThread::cpu_time`.
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
//! A trace that should be there when something goes wrong, without a file growing for hours,
//! is a flight recorder ([`trace::flight_recorder`](crate::trace::flight_recorder)): the last
//! seconds stay in a bounded ring in memory, written to a file on demand, on the dump signal,
//! when the deadlock watch fires and when a long runner is reported. Green threads labelled
//! with [`labels::with`](crate::labels::with) carry their labels into dumps, grouped dumps
//! and the trace's run slices.
//!
//! # 6. Hooks of your own
//!
//! [`runtime::hook`](crate::runtime::hook) installs an observer of every switch and scheduler
//! event beside the trace and `tracing` (several compose; each keeps its own word across a
//! green thread's switch), and
//! [`Builder::on_worker_start`](crate::runtime::Builder::on_worker_start) /
//! [`on_worker_stop`](crate::runtime::Builder::on_worker_stop) run on each worker thread as
//! it starts and ends (to pin it, name it for a profiler, or give it thread-local state).
//!
//! # Side by side
//!
//! | purloin | Go | brpc | tokio |
//! |---|---|---|---|
//! | [`dump`], `PURLOIN_DUMP_SIGNAL` | SIGQUIT traceback, `pprof.Lookup("goroutine")` `debug=2` | `/bthreads` page | `Handle::dump` (unstable) |
//! | [`dump_grouped`] | goroutine profile `debug=1` | — | — |
//! | [`labels::with`](crate::labels::with), `Builder::label` | `pprof.Do`, `pprof.SetGoroutineLabels` | — | — (spans) |
//! | `GreenThread::cpu_time`, `switches` | — | `bthread` stat `cputime_ns`, `nswitch` | tokio-metrics `total_poll_duration`, `total_poll_count` |
//! | `Stats::sched_latency`, `purloin_sched_latency_seconds` | `/sched/latencies:seconds` | — | tokio-metrics `total_scheduled_duration` |
//! | [`metrics::prometheus`](crate::metrics::prometheus) | `runtime/metrics` | bvar `/vars`, `/brpc_metrics` | `RuntimeMetrics` |
//! | [`trace::start`](crate::trace::start) | `runtime/trace.Start` | — | `tokio-console` |
//! | [`trace::flight_recorder`](crate::trace::flight_recorder) | `trace.FlightRecorder` | — | — |
//! | `runtime::hook::install`, `on_worker_start` / `on_worker_stop` | — | `bthread_set_worker_startfn` | `on_thread_start` / `on_thread_stop`, `on_task_spawn` |
//!
//! `examples/diagnostics.rs` puts them together: a service that serves its own `/metrics` and
//! a grouped dump over HTTP and writes its flight recorder to a file on SIGUSR1.
//!
//! # 7. `tracing`
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

use std::fmt;
use std::io;

use purloin_sched::{Dump, GroupedDump, Scheduler};

use crate::signal::{Signal, Signals};

/// Every green thread of the runtime running the current green thread (of the global runtime,
/// from a plain thread; empty if it has not started, for a dump never starts a runtime), with
/// backtraces of the parked ones. See the [module docs](self); [`dump_all`] covers every runtime of the process.
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
    note_facade_code();
    purloin_sched::current_dump().unwrap_or_else(|| {
        crate::current::global_scheduler().map(Scheduler::dump).unwrap_or_default()
    })
}

/// Every runtime of the process at one moment, each with the [`Dump`] of its green threads:
/// what the dump signal writes. Its `Display` gives each runtime a section with its label
/// ("the global runtime" or "built with runtime::Builder"), its number and its worker count,
/// and ends with a line of its own.
///
/// # Examples
///
/// ```
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// let all = purloin::debugging::dump_all();
/// let mine = all.runtimes.iter().find(|r| r.dump.scheduler == rt.scheduler().number()).unwrap();
/// assert!(!mine.global);
/// assert_eq!(mine.dump.workers, 2);
/// println!("{all}");
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ProcessDump<D = Dump> {
    /// The runtimes, in the order they started.
    pub runtimes: Vec<RuntimeDump<D>>,
}

/// One runtime's part of a [`ProcessDump`]: a [`Dump`] (every green thread) or a
/// [`GroupedDump`] (green threads grouped by stack, with counts).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RuntimeDump<D = Dump> {
    /// Whether it is the global runtime (the one `purloin::spawn` starts outside green
    /// threads); otherwise it was built with [`Builder`](crate::runtime::Builder) (or is a
    /// bare `purloin_sched::Scheduler`).
    pub global: bool,
    /// Its green threads; its `scheduler` field is the runtime's number.
    pub dump: D,
}

impl ProcessDump<GroupedDump> {
    /// Number of green threads in all the runtimes.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(purloin::debugging::ProcessDump::<purloin::sched::GroupedDump>::default().threads(), 0);
    /// ```
    pub fn threads(&self) -> usize {
        self.runtimes.iter().map(|r| r.dump.threads).sum()
    }
}

/// Writes a process dump: a header, one section per runtime (`header` gives its number,
/// workers and green threads), and an end line.
fn write_process<D: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    runtimes: &[RuntimeDump<D>],
    grouped: bool,
    header: impl Fn(&D) -> (u64, usize, usize),
) -> fmt::Result {
    let n = runtimes.len();
    let how = if grouped { ", green threads grouped by stack" } else { "" };
    writeln!(f, "purloin: dump of {n} runtime{}{how}", if n == 1 { "" } else { "s" })?;
    for r in runtimes {
        let label = if r.global { "the global runtime" } else { "built with runtime::Builder" };
        let (number, workers, threads) = header(&r.dump);
        writeln!(f)?;
        writeln!(
            f,
            "=== runtime #{number} ({label}), {workers} workers, {threads} green threads ==="
        )?;
        write!(f, "{}", r.dump)?;
    }
    writeln!(f)?;
    writeln!(f, "=== end of the purloin dump ===")
}

impl fmt::Display for ProcessDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_process(f, &self.runtimes, false, |d| (d.scheduler, d.workers, d.threads.len()))
    }
}

impl fmt::Display for ProcessDump<GroupedDump> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_process(f, &self.runtimes, true, |d| (d.scheduler, d.workers, d.threads))
    }
}

/// Every runtime of the process, with the green threads of each and the backtraces of the
/// parked ones (see [`ProcessDump`]). A runtime that was never started is not started for it,
/// and one whose shutdown has begun is left out.
///
/// # Examples
///
/// ```
/// let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
/// let h = rt.spawn(purloin::park);
/// while rt.scheduler().parked().is_empty() {
///     std::thread::yield_now();
/// }
/// let all = purloin::debugging::dump_all();
/// assert!(all.runtimes.iter().any(|r| r.dump.threads.iter().any(|t| t.id == h.thread().id())));
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
pub fn dump_all() -> ProcessDump {
    note_facade_code();
    let global = crate::current::global_scheduler().map(Scheduler::number);
    let runtimes = purloin_sched::dump_all()
        .into_iter()
        .map(|dump| RuntimeDump { global: Some(dump.scheduler) == global, dump })
        .collect();
    ProcessDump { runtimes }
}

/// The green threads of the runtime running the current green thread (of the global runtime,
/// from a plain thread) grouped by state, wait, stack and spawn site, with counts, largest
/// group first: Go's goroutine profile with `debug=1`. Fast with a million green threads:
/// one stack is symbolized per group, and nothing is kept or formatted per green thread.
///
/// # Examples
///
/// ```
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let (tx, rx) = purloin::sync::channel::bounded::<()>(0);
///     let hs: Vec<_> = (0..100)
///         .map(|_| {
///             let rx = rx.clone();
///             purloin::spawn(move || rx.recv())
///         })
///         .collect();
///     while purloin::debugging::dump_grouped().count(purloin::sched::GreenState::Parked) < 100 {
///         purloin::yield_now();
///     }
///     let grouped = purloin::debugging::dump_grouped();
///     // "100 × parked: a channel receive", then its stack and spawn site.
///     let biggest = &grouped.groups[0];
///     assert_eq!(biggest.count, 100);
///     assert_eq!(biggest.wait, Some(purloin::sched::WaitKind::ChannelRecv));
///     println!("{grouped}");
///     drop(tx);
///     for h in hs {
///         let _ = h.join();
///     }
/// });
/// ```
pub fn dump_grouped() -> GroupedDump {
    note_facade_code();
    purloin_sched::current_dump_grouped().unwrap_or_else(|| {
        crate::current::global_scheduler().map(Scheduler::dump_grouped).unwrap_or_default()
    })
}

/// [`dump_all`] grouped: every runtime of the process, each with its green threads grouped
/// as [`dump_grouped`] does.
///
/// # Examples
///
/// ```
/// let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
/// let h = rt.spawn(purloin::park);
/// while rt.scheduler().parked().is_empty() {
///     std::thread::yield_now();
/// }
/// let all = purloin::debugging::dump_all_grouped();
/// assert!(all.threads() >= 1);
/// println!("{all}");
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
pub fn dump_all_grouped() -> ProcessDump<GroupedDump> {
    note_facade_code();
    let global = crate::current::global_scheduler().map(Scheduler::number);
    let runtimes = purloin_sched::dump_all_grouped()
        .into_iter()
        .map(|dump| RuntimeDump { global: Some(dump.scheduler) == global, dump })
        .collect();
    ProcessDump { runtimes }
}

/// Past this many green threads in the process, the dump signal writes the grouped form
/// ([`dump_all_grouped`]) instead of every green thread ([`dump_all`]). A green thread takes
/// a few KiB of text in the full form, so a thousand of them already make megabytes on
/// stderr, more than a reader goes through; past that the groups say the same in a page.
pub const SIGNAL_GROUPED_ABOVE: usize = 1000;

/// What the dump signal writes: [`dump_all`] for up to [`SIGNAL_GROUPED_ABOVE`] green threads,
/// else [`dump_all_grouped`] (taken first: it is the cheap one to take for many).
pub(crate) fn signal_dump_text() -> String {
    let grouped = dump_all_grouped();
    if grouped.threads() > SIGNAL_GROUPED_ABOVE {
        grouped.to_string()
    } else {
        dump_all().to_string()
    }
}

/// From now on, each delivery of `signal` writes [`dump_all`] to stderr (the program keeps
/// running); past [`SIGNAL_GROUPED_ABOVE`] green threads, [`dump_all_grouped`] instead.
/// Returns an error if the signal cannot be watched.
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
    // This thread only prints: neither it nor its receiver wakes a green thread, so neither
    // keeps a deadlock report from being made.
    let signals = Signals::new(&[signal])?.for_helper();
    std::thread::Builder::new().name("purloin-dump".into()).spawn(move || {
        let _mark = purloin_sched::helper_thread();
        loop {
            signals.recv();
            eprintln!("{}", signal_dump_text());
            crate::trace::flight_on_trouble("the dump signal");
        }
    })?;
    Ok(())
}

/// Reads `PURLOIN_DUMP_SIGNAL` (see the [module docs](self#2-ask-a-running-program-for-a-dump))
/// once per process and starts [`dump_on_signal`] for it; a value that names no signal a dump
/// may use is reported on stderr, with the valid ones, and ignored.
pub(crate) fn start_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        note_facade_code();
        let Ok(v) = std::env::var("PURLOIN_DUMP_SIGNAL") else { return };
        let result = parse_dump_signal(&v)
            .map_err(|e| e.to_string())
            .and_then(|signal| dump_on_signal(signal).map_err(|e| e.to_string()));
        if let Err(e) = result {
            eprintln!("purloin: PURLOIN_DUMP_SIGNAL={v}: {e}; running without a dump signal");
        }
    });
}

/// Tells the scheduler's dumps where this crate's and purloin-sync's code is, so that they
/// count their inlined frames (which optimized builds describe by bare names and files only)
/// as the runtime's.
fn note_facade_code() {
    purloin_sched::note_runtime_code("purloin", note_facade_code as fn() as usize);
    purloin_sync::note_runtime_code();
}

/// Signal names and numbers (Linux), without the `SIG` prefix; aliases after their signal.
const SIGNAL_NAMES: [(&str, libc::c_int); 34] = [
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("IOT", libc::SIGIOT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("POLL", libc::SIGPOLL),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// Why a dump cannot be asked for with a parsed `PURLOIN_DUMP_SIGNAL`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadDumpSignal(String);

impl fmt::Display for BadDumpSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; use one of {}", self.0, valid_dump_signals())
    }
}

/// The name of signal `n` as the variable accepts it (`SIGQUIT`, `SIGRTMIN+2`, or the number).
fn signal_name(n: libc::c_int) -> String {
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    if let Some((name, _)) = SIGNAL_NAMES.iter().find(|(_, m)| *m == n) {
        format!("SIG{name}")
    } else if n == min {
        "SIGRTMIN".into()
    } else if n > min && n <= max {
        format!("SIGRTMIN+{}", n - min)
    } else {
        format!("signal {n}")
    }
}

/// Why signal `n` cannot carry a dump, if it cannot.
fn refusal(n: libc::c_int) -> Option<String> {
    let name = signal_name(n);
    Some(match n {
        libc::SIGKILL | libc::SIGSTOP => format!("{name} cannot be caught by any process"),
        libc::SIGSEGV | libc::SIGBUS => {
            format!("{name} is taken by purloin's stack-overflow detection")
        }
        libc::SIGILL | libc::SIGFPE | libc::SIGTRAP => format!(
            "{name} is a program fault (returning from its handler re-runs the faulting \
             instruction)"
        ),
        n if n < 1 || n > libc::SIGRTMAX() => {
            format!("{n} is not a signal number (1 to {})", libc::SIGRTMAX())
        }
        n if n < libc::SIGRTMIN() && n > libc::SIGSYS => {
            format!("signal {n} is reserved by the C library for its own threads")
        }
        _ => return None,
    })
}

/// The signals a dump can be asked with, as the error message lists them.
fn valid_dump_signals() -> String {
    let mut names: Vec<String> = SIGNAL_NAMES
        .iter()
        .filter(|(name, n)| refusal(*n).is_none() && signal_name(*n) == format!("SIG{name}"))
        .map(|(name, _)| format!("SIG{name}"))
        .collect();
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    names.push(format!(
        "the real-time signals SIGRTMIN, SIGRTMIN+n, SIGRTMAX-n and SIGRTMAX ({min} to {max}); \
         by name, with or without SIG, in any case, or by number"
    ));
    names.join(", ")
}

/// Parses a `PURLOIN_DUMP_SIGNAL` value: a signal name with or without `SIG`, in any case
/// (`SIGQUIT`, `usr1`, `SigRtMin+3`, `RTMAX-2`), or a number; refuses the signals a dump
/// cannot use (see [`refusal`]).
pub(crate) fn parse_dump_signal(value: &str) -> Result<Signal, BadDumpSignal> {
    let upper = value.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    let offset = |rest: &str, sign: char| -> Option<libc::c_int> {
        if rest.is_empty() {
            return Some(0);
        }
        let digits = rest.strip_prefix(sign)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    };
    let not_a_signal = || BadDumpSignal(format!("{:?} is not a signal name or number", value));
    let n = if let Some(rest) = name.strip_prefix("RTMIN") {
        let k = offset(rest, '+').ok_or_else(not_a_signal)?;
        if k > max - min {
            return Err(BadDumpSignal(format!("SIGRTMIN+{k} is past SIGRTMAX ({max})")));
        }
        min + k
    } else if let Some(rest) = name.strip_prefix("RTMAX") {
        let k = offset(rest, '-').ok_or_else(not_a_signal)?;
        if k > max - min {
            return Err(BadDumpSignal(format!("SIGRTMAX-{k} is before SIGRTMIN ({min})")));
        }
        max - k
    } else if let Some((_, n)) = SIGNAL_NAMES.iter().find(|(known, _)| *known == name) {
        *n
    } else if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        name.parse().unwrap_or(libc::c_int::MAX)
    } else {
        return Err(not_a_signal());
    };
    match refusal(n) {
        Some(why) => Err(BadDumpSignal(why)),
        None => Ok(Signal::from_raw(n)),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_catchable_signal_is_accepted_by_name_and_number() {
        let ok = |v: &str| parse_dump_signal(v).unwrap_or_else(|e| panic!("{v}: {e}")).as_raw();
        assert_eq!(ok("SIGQUIT"), libc::SIGQUIT);
        assert_eq!(ok("quit"), libc::SIGQUIT);
        assert_eq!(ok(" SigUsr1 "), libc::SIGUSR1);
        assert_eq!(ok("sigwinch"), libc::SIGWINCH);
        assert_eq!(ok("SIGSYS"), libc::SIGSYS);
        assert_eq!(ok("cld"), libc::SIGCHLD);
        assert_eq!(ok("12"), libc::SIGUSR2);
        assert_eq!(ok("SIGRTMIN"), libc::SIGRTMIN());
        assert_eq!(ok("sigrtmin+3"), libc::SIGRTMIN() + 3);
        assert_eq!(ok("RTMAX"), libc::SIGRTMAX());
        assert_eq!(ok("SIGRTMAX-2"), libc::SIGRTMAX() - 2);
        assert_eq!(ok(&libc::SIGRTMAX().to_string()), libc::SIGRTMAX());
        // Every name of the table that a process may catch, with and without the prefix.
        for (name, n) in SIGNAL_NAMES {
            if refusal(n).is_none() {
                assert_eq!(ok(name), n);
                assert_eq!(ok(&format!("SIG{name}")), n);
                assert_eq!(ok(&format!("sig{}", name.to_lowercase())), n);
                assert_eq!(ok(&n.to_string()), n);
            }
        }
        for n in libc::SIGRTMIN()..=libc::SIGRTMAX() {
            assert_eq!(ok(&n.to_string()), n);
            assert_eq!(ok(&signal_name(n)), n);
        }
    }

    #[test]
    fn uncatchable_and_reserved_signals_are_refused_naming_the_valid_ones() {
        for (v, why) in [
            ("SIGKILL", "cannot be caught"),
            ("stop", "cannot be caught"),
            ("9", "cannot be caught"),
            ("SIGSEGV", "stack-overflow detection"),
            ("bus", "stack-overflow detection"),
            ("SIGFPE", "program fault"),
            ("32", "reserved by the C library"),
            ("0", "not a signal number"),
            ("65", "not a signal number"),
            ("SIGRTMIN+31", "past SIGRTMAX"),
            ("SIGRTMAX-31", "before SIGRTMIN"),
            ("SIGRTMIN-1", "not a signal name"),
            ("SIGRTMIN+", "not a signal name"),
            ("SIGFOO", "not a signal name"),
            ("-3", "not a signal name"),
            ("", "not a signal name"),
        ] {
            let e = parse_dump_signal(v).expect_err(v).to_string();
            assert!(e.contains(why), "{v}: {e}");
            assert!(e.contains("use one of SIGHUP, SIGINT, SIGQUIT, SIGABRT"), "{v}: {e}");
            assert!(e.contains("SIGRTMIN+n"), "{v}: {e}");
            assert!(!e.contains("SIGKILL,") && !e.contains("SIGSEGV,"), "{v}: {e}");
        }
    }
}
