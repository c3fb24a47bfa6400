//! A trace file of what the scheduler did, in Chrome's trace-event JSON format, for
//! [ui.perfetto.dev](https://ui.perfetto.dev) or `chrome://tracing`.
//!
//! # Turning it on
//!
//! - `PURLOIN_TRACE=out.json` in the environment: the first runtime built while it is set
//!   ([`runtime::Builder::build`](crate::runtime::Builder::build), or the global runtime on the
//!   first [`spawn`](crate::spawn)) starts a trace to that file (later runtimes leave the
//!   variable alone, so the file is not overwritten), and stops it when that runtime
//!   shuts down (dropped, or [`Runtime::shutdown_timeout`](crate::Runtime::shutdown_timeout)),
//!   after its workers have ended, so the file is complete and valid JSON. If the file cannot
//!   be created (a directory that does not exist, no permission), a warning on stderr names
//!   the path and the OS error, and the program runs without a trace: a diagnostic setting
//!   must not stop the program it is meant to observe.
//! - [`runtime::Builder::trace`](crate::runtime::Builder::trace): the same for one runtime;
//!   here a file that cannot be created fails [`build`](crate::runtime::Builder::build).
//! - [`start`] and [`stop`] around any stretch of a program.
//! - [`flight_recorder`]: keep only the last seconds in memory and write them out when
//!   something goes wrong (see [`FlightRecorder`]).
//!
//! One trace records at a time (a file or a flight recorder), and it records every runtime of
//! the process.
//!
//! # Stopping
//!
//! [`stop`], or the shutdown of the runtime that started the trace, completes the file. A
//! trace still recording when the process exits normally (`main` returns, or
//! [`std::process::exit`] is called) is stopped then, so a program on the global runtime
//! (which is never shut down) gets a complete file without calling [`stop`]. A process that
//! ends otherwise (an abort, a signal, `_exit`) leaves the file cut short.
//!
//! The [`Summary`] says how many events were written and how many were dropped; when events
//! were dropped, stopping also says so on stderr, and the file's `otherData` holds the counts
//! (`dropped_events`, `unflushed_threads`).
//!
//! # Opening it
//!
//! - Perfetto: open <https://ui.perfetto.dev>, choose "Open trace file" in the left-hand menu
//!   and pick the file (it is read in the browser, not uploaded). Keys `W`/`S` zoom, `A`/`D`
//!   pan; click a slice for its arguments and its flows.
//! - Chrome: open `chrome://tracing`, press "Load" and pick the file.
//!
//! # What is in it
//!
//! One process (`purloin`) with one track per OS thread that did anything: the workers (named
//! `purloin-worker-N` unless the builder renamed them), and any other thread that spawned or
//! woke green threads (the main thread, the monitor, a blocking pool).
//!
//! - **Run slices** (category `run`): a green thread running on that worker, named `G<id>`
//!   (or `<name> G<id>` for a named one; the id is the one dumps and
//!   [`GreenThread::id`](crate::GreenThread::id) show). A slice ends at every switch out: a
//!   yield, a park, a blocking section's hand-off, the end. Its arguments: `id`; on a green
//!   thread's first slice, `spawned_at`, the spawn's place in the source (`file:line`); and
//!   `labels`, the green thread's [labels](mod@crate::labels) when it was switched in.
//! - **Blocking** slices (category `blocking`), inside a run slice: a blocking section
//!   ([`blocking`](crate::blocking)) during which the worker's OS thread may block.
//! - **Idle** slices (category `worker`): the worker found nothing to run and slept (on its
//!   lot, or blocked in the netpoller) until woken.
//! - **Flows** (arrows): `spawn` from the spawner (inside its run slice, or on a two-nanosecond
//!   `spawn` slice of a thread that is not running a green thread) to the new green thread's
//!   first run slice; `wake` from whoever unparked a green thread (a green thread, a timer, the
//!   poller, a shutdown) to the run slice in which the parked green thread resumed. A child
//!   that its joiner runs inline (join-helping) has its own run slices on the joiner's stack;
//!   when it waits, the joiner is what parks, so its `park`, `unpark` and `wake` carry the
//!   joiner's id.
//! - **Instant events**: `park` (arguments: the green thread, the wait's reason, the object's
//!   address, the holder when known), `unpark` and `spawn` (with `by`, the green thread that
//!   did it, or `null`), `steal` (thief, victim, how many), `global pull` (a batch from the
//!   global queue), `timers fired` (how many), `poller wake` (how many it readied).
//!
//! Timestamps are from `std::time::Instant`, relative to the start of the trace.
//! Stackless tasks ([`sched::spawn_task`](crate::sched::spawn_task), state machines) have
//! their spawns recorded, but their steps are not drawn.
//!
//! # Cost
//!
//! The scheduler reports to the hooks installed in the process (`purloin_sched::hook`); until a
//! trace, a `tracing` subscriber or a hook of the program's own needs one, nothing is installed
//! and each event site costs a load and a predictable branch. Once purloin's hook is installed
//! (it stays for the process's life), every switch and event calls it, and it checks whether a
//! trace records. While one records, each event
//! is a timestamp and a push into a buffer of the OS thread's own (no lock); full buffers
//! go to a writer thread that streams them to the file.
//!
//! A program can make events much faster than the writer turns them into JSON, so what waits
//! for the writer is bounded: at most 32 full buffers of 4096 events. When the writer lags
//! further, a full buffer is dropped and counted ([`Summary::dropped`]) rather than queued.
//! The trace's memory is therefore at most 33 buffers (the queue and the one being written)
//! plus one buffer per OS thread that records, each buffer 4096 events of at most 80 bytes
//! (320 KiB): under 11 MiB for the queue, however long the program runs. While a trace
//! records, every spawn takes its green thread's record at once (no lazy spawn), so that each
//! spawn has an id for its flow.
//!
//! # Examples
//!
//! ```
//! let path = std::env::temp_dir().join(format!("purloin-trace-doc-{}.json", std::process::id()));
//! purloin::trace::start(&path).unwrap();
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| purloin::spawn(purloin::yield_now).join().unwrap());
//! drop(rt);
//! let summary = purloin::trace::stop().unwrap();
//! assert!(summary.events > 0);
//! let text = std::fs::read_to_string(&path).unwrap();
//! assert!(text.starts_with('{') && text.trim_end().ends_with('}'));
//! std::fs::remove_file(&path).unwrap();
//! ```

mod flight;
mod handshake;
mod json;
mod record;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::loom::{AtomicU32, AtomicU64, Ordering};

use handshake::ThreadFlag;
use record::{Attach, GENERATION, Msg, RECORDING};
pub(crate) use record::{event, switch_in, switch_out};

/// Batches waiting for the writer before a full buffer is dropped (the memory bound in the
/// module docs).
const IN_FLIGHT: usize = 32;

/// How long [`stop`] waits for running threads to hand over their buffers.
const STOP_GRACE: Duration = Duration::from_millis(500);

/// What a finished trace holds.
///
/// # Examples
///
/// ```
/// let path = std::env::temp_dir().join(format!("purloin-summary-doc-{}.json", std::process::id()));
/// purloin::trace::start(&path).unwrap();
/// let s = purloin::trace::stop().unwrap();
/// assert_eq!(s.path, path);
/// assert_eq!(s.dropped, 0);
/// std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// The file written.
    pub path: PathBuf,
    /// Trace events written (slices, flows, instants and metadata).
    pub events: u64,
    /// Scheduler events recorded but not written: the writer lagged (more than 32 buffers
    /// waited). Also in the file, as `otherData.dropped_events`.
    pub dropped: u64,
    /// Threads still running when the trace stopped whose last records (up to one buffer
    /// each) did not reach the writer within the stop's grace (a green thread running without
    /// a scheduling point, or a non-worker thread that is blocked). Also in the file, as
    /// `otherData.unflushed_threads`.
    pub unflushed_threads: usize,
}

/// The recording session.
struct Session {
    generation: u64,
    tx: SyncSender<Msg>,
    writer: JoinHandle<io::Result<u64>>,
    start: Instant,
    path: PathBuf,
    /// The process that started it (a forked child has the session but not its writer).
    pid: u32,
    dropped: Arc<AtomicU64>,
    threads: Vec<Arc<ThreadFlag>>,
    next_tid: u64,
    /// A flight recorder's settings (`None`: a trace streamed to `path`).
    flight: Option<FlightState>,
}

/// What a running flight recorder keeps besides its thread.
struct FlightState {
    /// Where automatic snapshots go.
    dir: PathBuf,
    /// The last automatic snapshot, and how many were written.
    last_auto: Option<Instant>,
    written: u64,
}

impl Session {
    /// What records, for messages: "a trace to out.json" or "a flight recorder".
    fn describe(&self) -> String {
        match self.flight {
            Some(_) => "a flight recorder runs (purloin::trace::flight_recorder)".into(),
            None => format!("a trace already records to {}", self.path.display()),
        }
    }
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// The process whose trace records (0: none), read without the lock at exit.
static SESSION_PID: AtomicU32 = AtomicU32::new(0);

fn session() -> std::sync::MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts recording every runtime of the process to the file at `path` (created, or
/// truncated).
///
/// # Errors
/// A trace already records (one at a time: [`stop`] it first); the file cannot be created;
/// the process already has the most scheduler hooks it can have
/// (`purloin_sched::hook::MAX_HOOKS`, all installed by the program itself); the writer thread
/// cannot start.
///
/// # Examples
///
/// ```
/// let path = std::env::temp_dir().join(format!("purloin-start-doc-{}.json", std::process::id()));
/// purloin::trace::start(&path).unwrap();
/// // A second trace cannot start while this one records.
/// assert!(purloin::trace::start(&path).is_err());
/// purloin::trace::stop().unwrap();
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn start(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_path_buf();
    let s = session();
    if let Some(s) = &*s {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "purloin::trace::start({}): {}; call purloin::trace::stop() first (one trace \
                 at a time)",
                path.display(),
                s.describe()
            ),
        ));
    }
    crate::hook::install()?;
    let file = File::create(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("purloin::trace::start: cannot create the trace file {}: {e}", path.display()),
        )
    })?;
    let writer = json::Writer::new(file)?;
    let (tx, rx) = mpsc::sync_channel(IN_FLIGHT);
    let writer = std::thread::Builder::new().name("purloin-trace".into()).spawn(move || {
        // It writes a file and never wakes a green thread.
        let _mark = purloin_sched::helper_thread();
        writer.run(rx)
    })?;
    begin(s, tx, writer, Instant::now(), path, Arc::new(AtomicU64::new(0)), None);
    Ok(())
}

/// Publishes a new session (the caller holds the lock `s` and made the writer) and starts
/// recording.
fn begin(
    mut s: std::sync::MutexGuard<'static, Option<Session>>,
    tx: SyncSender<Msg>,
    writer: JoinHandle<io::Result<u64>>,
    start: Instant,
    path: PathBuf,
    dropped: Arc<AtomicU64>,
    flight: Option<FlightState>,
) {
    stop_at_exit_once();
    let generation = GENERATION.load(Ordering::Relaxed) + 1;
    let pid = std::process::id();
    *s = Some(Session {
        generation,
        tx,
        writer,
        start,
        path,
        pid,
        dropped,
        threads: Vec::new(),
        next_tid: 1,
        flight,
    });
    // Relaxed: only the exit handler reads it, as a hint (it takes the lock to stop).
    SESSION_PID.store(pid, Ordering::Relaxed);
    // Under the session lock: a thread that sees the generation finds its session.
    GENERATION.store(generation, Ordering::Relaxed);
    purloin_sched::hook::set_eager_spawn(true);
    RECORDING.store(true, Ordering::SeqCst);
}

/// Stops the trace: every thread's records go to the writer (threads that are running get a
/// short grace to reach their next event), and the file is completed and closed. If events
/// were dropped, a line on stderr says how many (and the file's `otherData` holds the count).
/// A running flight recorder is stopped too (its [`Summary`] then names no file and counts no
/// events).
///
/// # Errors
/// No trace records; writing the file failed (the error names the cause: a full disk, …);
/// the trace was started by the parent of this forked process (only the parent, which runs
/// the writer thread, can complete the file; here the trace just stops recording).
///
/// # Examples
///
/// ```
/// let path = std::env::temp_dir().join(format!("purloin-stop-doc-{}.json", std::process::id()));
/// purloin::trace::start(&path).unwrap();
/// let h = purloin::spawn(|| 6 * 7);
/// assert_eq!(h.join().unwrap(), 42);
/// let summary = purloin::trace::stop().unwrap();
/// assert!(summary.events > 0);
/// // Nothing records now.
/// assert!(purloin::trace::stop().is_err());
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn stop() -> io::Result<Summary> {
    stop_session(None)
}

/// [`stop`], of session `generation` only if given (a runtime stops the trace it started,
/// not one started after the user stopped that).
fn stop_session(generation: Option<u64>) -> io::Result<Summary> {
    let mut guard = session();
    let taken = match (generation, &*guard) {
        (Some(g), Some(s)) if s.generation != g => None,
        _ => guard.take(),
    };
    let Some(s) = taken else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "purloin::trace::stop: no trace records (start one with purloin::trace::start, \
             Builder::trace or PURLOIN_TRACE=file.json)",
        ));
    };
    SESSION_PID.store(0, Ordering::Relaxed);
    if s.pid != std::process::id() {
        // A forked child: the writer thread and the other recording threads are the parent's
        // and do not run here (waiting for them would hang). Stop recording and let go.
        handshake::clear(&RECORDING);
        purloin_sched::hook::set_eager_spawn(false);
        let path = s.path.clone();
        // Not joined, nor detached: the handle names a thread of the parent process.
        std::mem::forget(s.writer);
        return Err(io::Error::other(format!(
            "purloin::trace::stop: the trace to {} was started by process {} before it forked; \
             only that process can complete the file",
            path.display(),
            s.pid
        )));
    }
    // This thread's records first: after the clear it would keep none it has not flagged.
    record::leave_here();
    // T1 (`handshake`): from here no thread keeps a record it has not flagged.
    handshake::clear(&RECORDING);
    purloin_sched::hook::set_eager_spawn(false);
    drop(guard);
    let deadline = Instant::now() + STOP_GRACE;
    let unflushed = handshake::wait_clean(&s.threads, || {
        if Instant::now() >= deadline {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
        false
    });
    // Every hand-over's drop count is visible once its thread's flag is clean (T1b); a thread
    // still dirty after the grace is counted as unflushed instead.
    let dropped = s.dropped.load(Ordering::Relaxed);
    let (reply_tx, reply_rx) = mpsc::sync_channel(1);
    let sent = s.tx.send(Msg::Finish { reply: reply_tx, dropped, unflushed: unflushed as u64 });
    drop(s.tx);
    let written = match sent {
        Ok(()) => reply_rx.recv().unwrap_or_else(|_| {
            Err(io::Error::other("purloin::trace::stop: the trace writer thread panicked"))
        }),
        Err(_) => Err(io::Error::other("purloin::trace::stop: the trace writer thread ended")),
    };
    let joined = s.writer.join();
    let events = match (written, joined) {
        (Ok(n), _) => n,
        (Err(e), _) => {
            return Err(io::Error::new(
                e.kind(),
                format!("purloin::trace::stop: writing {} failed: {e}", s.path.display()),
            ));
        }
    };
    let flight = s.flight.is_some();
    let summary = Summary { path: s.path, events, dropped, unflushed_threads: unflushed };
    // A flight recorder writes no file at its stop: nothing to say about one.
    if !flight && (summary.dropped > 0 || summary.unflushed_threads > 0) {
        eprintln!(
            "purloin: trace written to {} ({} events); {} scheduler events dropped because the \
             trace writer lagged (at most {IN_FLIGHT} buffers of {} events wait for it), {} \
             threads' last events missing",
            summary.path.display(),
            summary.events,
            summary.dropped,
            record::BUFFER,
            summary.unflushed_threads
        );
    }
    Ok(summary)
}

/// Registers [`stop_at_exit`] with the C library, once per process.
fn stop_at_exit_once() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: `stop_at_exit` is an `extern "C" fn()` that does not unwind.
        if unsafe { libc::atexit(stop_at_exit) } != 0 {
            eprintln!(
                "purloin: cannot register the trace's exit handler; a trace still recording \
                 when the process exits is cut short (call purloin::trace::stop before exiting)"
            );
        }
    });
}

/// Runs when the process exits normally (`main` returned, or `exit` was called): stops a trace
/// that still records, so its file is complete.
///
/// Other threads may still run (workers, threads that record): the stop is the same as
/// [`stop`]'s, which lets them hand over their buffers within its grace and copes with
/// threads that never do. It takes the session lock, which no thread holds for longer than
/// a few instructions. A forked child that did not exec inherits the session but not the
/// writer thread: it leaves the trace alone (its parent completes the file).
extern "C" fn stop_at_exit() {
    // Relaxed: a hint; `stop_session` decides under the lock.
    let pid = SESSION_PID.load(Ordering::Relaxed);
    if pid == 0 || pid != std::process::id() {
        return;
    }
    // Nothing may unwind out of an `extern "C"` function.
    let _ = std::panic::catch_unwind(|| {
        if let Err(e) = stop_session(None)
            && e.kind() != io::ErrorKind::NotFound
        {
            eprintln!("purloin: the trace could not be completed at exit: {e}");
        }
    });
}

/// Where automatic flight-recorder snapshots go at most once per this interval (a snapshot
/// already holds the last seconds: a burst of reports would write the same events again).
const AUTO_INTERVAL: Duration = Duration::from_secs(10);

/// A flight recorder: a trace that keeps only its last seconds (or megabytes) in memory and
/// writes them to a file when asked, or when something goes wrong — Go's
/// `trace.FlightRecorder`.
///
/// [`flight_recorder`] makes one with the defaults (the last 10 s, at most 16 MiB; automatic
/// snapshots to the temporary directory); [`start`](Self::start) starts it. While it runs,
/// the scheduler's events go into each thread's buffer as for a trace file, but the buffers
/// go to a ring in memory instead of a file; the ring keeps the newest records within the
/// bounds. [`write_to`](Self::write_to) writes the ring as a trace file (the same format:
/// open it at <https://ui.perfetto.dev>). It is also written, to
/// `purloin-flight-<pid>-<n>.json` in its [`dir`](Self::dir), with a line on stderr saying
/// where and why, at most once per 10 s:
///
/// - on the dump signal ([`dump_on_signal`](crate::debugging::dump_on_signal),
///   `PURLOIN_DUMP_SIGNAL`), after the dump;
/// - when the deadlock watch unwinds the green threads of a deadlocked runtime (for an OS
///   thread that waits on one of them);
/// - when the scheduler reports a long runner (a green thread that ran or blocked its worker
///   for long: the monitor's message on stderr).
///
/// A snapshot first asks every recording thread for the records it still holds; each hands
/// them over at its next event. A thread that reaches none within a tenth of a second (a
/// worker running a green thread without a scheduling point, such as the long runner that
/// caused the snapshot; a plain thread blocked meanwhile) keeps its newest records out of the
/// file, which counts it in `otherData.unflushed_threads`.
///
/// One trace at a time: a flight recorder cannot start while a trace records to a file, nor
/// the other way round; [`stop`] stops either.
///
/// # Memory and cost
///
/// The ring holds at most [`max_bytes`](Self::max_bytes) of records (80 bytes each; the names
/// and labels they point to are shared with the green threads and not counted), counted by
/// their allocations: once a new batch of records makes it larger, the oldest go. Besides the
/// ring, as for a trace file, each recording thread fills a buffer of its own (4096 records,
/// 320 KiB) and at most 32 full buffers wait for the recorder's thread, which only moves
/// them into the ring. Records older than [`max_age`](Self::max_age) go too.
///
/// Recording costs what a trace to a file costs on the recording threads: a time stamp and a
/// push per event, and every spawn takes its green thread's record at once (no lazy spawn),
/// so that each spawn has an id. When nothing records, each scheduler event site costs a load
/// and a predictable branch.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let fr = purloin::trace::flight_recorder().max_age(Duration::from_secs(5)).max_bytes(4 << 20);
/// fr.start().unwrap();
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     for _ in 0..100 {
///         purloin::spawn(purloin::yield_now).join().unwrap();
///     }
/// });
/// let path = std::env::temp_dir().join(format!("purloin-flight-doc-{}.json", std::process::id()));
/// let summary = fr.write_to(&path).unwrap();
/// assert!(summary.events > 0);
/// assert!(fr.ring_bytes() <= 4 << 20);
/// fr.stop().unwrap();
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct FlightRecorder {
    max_bytes: usize,
    max_age: Duration,
    dir: Option<PathBuf>,
}

/// A [`FlightRecorder`] with the defaults: the last 10 s, at most 16 MiB, automatic snapshots
/// to [`std::env::temp_dir`]. Its [`write_to`](FlightRecorder::write_to) and
/// [`stop`](FlightRecorder::stop) act on the process's running flight recorder, whatever
/// settings it was started with.
///
/// # Examples
///
/// ```no_run
/// // At start-up:
/// purloin::trace::flight_recorder().start().unwrap();
/// // Later, when a request was slow:
/// purloin::trace::flight_recorder().write_to("slow-request.json").unwrap();
/// ```
pub fn flight_recorder() -> FlightRecorder {
    FlightRecorder { max_bytes: 16 << 20, max_age: Duration::from_secs(10), dir: None }
}

impl FlightRecorder {
    /// Keeps at most `bytes` of records in the ring (the oldest go first).
    ///
    /// # Examples
    ///
    /// ```
    /// let fr = purloin::trace::flight_recorder().max_bytes(64 << 20);
    /// # drop(fr);
    /// ```
    pub fn max_bytes(mut self, bytes: usize) -> FlightRecorder {
        self.max_bytes = bytes;
        self
    }

    /// Keeps the records of the last `age` only.
    ///
    /// # Examples
    ///
    /// ```
    /// let fr = purloin::trace::flight_recorder().max_age(std::time::Duration::from_secs(30));
    /// # drop(fr);
    /// ```
    pub fn max_age(mut self, age: Duration) -> FlightRecorder {
        self.max_age = age;
        self
    }

    /// Writes the automatic snapshots (dump signal, deadlock watch, long runner) into `dir`
    /// instead of the temporary directory.
    ///
    /// # Examples
    ///
    /// ```
    /// let fr = purloin::trace::flight_recorder().dir("/var/tmp");
    /// # drop(fr);
    /// ```
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> FlightRecorder {
        self.dir = Some(dir.into());
        self
    }

    /// Starts recording every runtime of the process into the ring.
    ///
    /// # Errors
    /// A trace or a flight recorder already records (one at a time: stop it first);
    /// `max_bytes` or `max_age` is zero; the process already has the most scheduler hooks it
    /// can have (`purloin_sched::hook::MAX_HOOKS`); the recorder's thread cannot start.
    ///
    /// # Examples
    ///
    /// ```
    /// let fr = purloin::trace::flight_recorder();
    /// fr.start().unwrap();
    /// assert!(fr.start().is_err()); // one at a time
    /// fr.stop().unwrap();
    /// ```
    pub fn start(&self) -> io::Result<()> {
        if self.max_bytes == 0 || self.max_age.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin::trace::flight_recorder: max_bytes ({}) and max_age ({:?}) must \
                     not be zero: the ring would keep nothing",
                    self.max_bytes, self.max_age
                ),
            ));
        }
        let s = session();
        if let Some(s) = &*s {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "purloin::trace::flight_recorder().start(): {}; call \
                     purloin::trace::stop() first (one trace at a time)",
                    s.describe()
                ),
            ));
        }
        crate::hook::install()?;
        purloin_sched::on_long_runner(|| flight_on_trouble("a long runner was reported"));
        let (tx, rx) = mpsc::sync_channel(IN_FLIGHT);
        let start = Instant::now();
        let dropped = Arc::new(AtomicU64::new(0));
        let bounds = flight::Bounds { max_bytes: self.max_bytes, max_age: self.max_age };
        let d = dropped.clone();
        let writer =
            std::thread::Builder::new().name("purloin-flight".into()).spawn(move || {
                // It keeps records and writes files; it never wakes a green thread.
                let _mark = purloin_sched::helper_thread();
                flight::run(rx, bounds, start, d, || {
                    session().as_ref().map(|s| s.threads.clone()).unwrap_or_default()
                })
            })?;
        let state = FlightState {
            dir: self.dir.clone().unwrap_or_else(std::env::temp_dir),
            last_auto: None,
            written: 0,
        };
        begin(s, tx, writer, start, PathBuf::new(), dropped, Some(state));
        Ok(())
    }

    /// Writes the running flight recorder's ring to the file at `path` (created, or
    /// truncated), as a trace file. The recording threads hand over their newest records first
    /// (within a tenth of a second; `unflushed_threads` counts the ones that did not). Blocks
    /// the caller while the file is written (a green thread in a blocking section, so its
    /// worker runs the others meanwhile); recording goes on.
    ///
    /// # Errors
    /// No flight recorder runs (or a trace to a file records instead); the file cannot be
    /// created or written.
    ///
    /// # Examples
    ///
    /// ```
    /// let fr = purloin::trace::flight_recorder();
    /// let path = std::env::temp_dir().join(format!("purloin-fr-doc-{}.json", std::process::id()));
    /// assert!(fr.write_to(&path).is_err()); // not started
    /// fr.start().unwrap();
    /// purloin::spawn(|| ()).join().unwrap();
    /// let summary = fr.write_to(&path).unwrap();
    /// assert_eq!(summary.path, path);
    /// fr.stop().unwrap();
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn write_to(&self, path: impl AsRef<Path>) -> io::Result<Summary> {
        let path = path.as_ref().to_path_buf();
        let tx = match &*session() {
            Some(s) if s.flight.is_some() && s.pid == std::process::id() => s.tx.clone(),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "purloin::trace::FlightRecorder::write_to({}): no flight recorder runs \
                         in this process (start one with purloin::trace::flight_recorder()\
                         .start())",
                        path.display()
                    ),
                ));
            }
        };
        // This thread waits for the snapshot: its own records go first.
        record::flush_here();
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let snap = flight::Snapshot { path: path.clone(), reply: Some(reply_tx), why: None };
        let ended = || {
            io::Error::other(format!(
                "purloin::trace::FlightRecorder::write_to({}): the flight recorder stopped \
                 meanwhile",
                path.display()
            ))
        };
        // On a green thread the wait is a blocking section: the worker's other green threads
        // move on while the recorder's thread writes the file.
        let reply = purloin_sched::blocking(|| {
            tx.send(Msg::Snapshot(snap)).ok()?;
            reply_rx.recv().ok()
        });
        reply.ok_or_else(ended)?.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("purloin::trace::FlightRecorder::write_to({}): {e}", path.display()),
            )
        })
    }

    /// Stops the running flight recorder and frees its ring (nothing is written).
    ///
    /// # Errors
    /// No flight recorder runs (a trace to a file is stopped with [`stop`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let fr = purloin::trace::flight_recorder();
    /// fr.start().unwrap();
    /// fr.stop().unwrap();
    /// assert!(fr.stop().is_err());
    /// ```
    pub fn stop(&self) -> io::Result<()> {
        let generation = match &*session() {
            Some(s) if s.flight.is_some() => s.generation,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "purloin::trace::FlightRecorder::stop: no flight recorder runs",
                ));
            }
        };
        stop_session(Some(generation)).map(drop)
    }

    /// The bytes of records the running flight recorder's ring holds now (0 if none runs).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(purloin::trace::flight_recorder().ring_bytes(), 0);
    /// ```
    pub fn ring_bytes(&self) -> usize {
        flight::RING_BYTES.load(Ordering::Relaxed)
    }
}

/// Something went wrong (`why`): a running flight recorder writes its ring to a new file in its
/// directory, unless it did so less than [`AUTO_INTERVAL`] ago. Never blocks: the recorder's
/// thread writes the file and reports it on stderr.
pub(crate) fn flight_on_trouble(why: &'static str) {
    let mut guard = session();
    let Some(s) = guard.as_mut() else { return };
    if s.pid != std::process::id() {
        return;
    }
    let Some(f) = s.flight.as_mut() else { return };
    if f.last_auto.is_some_and(|t| t.elapsed() < AUTO_INTERVAL) {
        return;
    }
    f.last_auto = Some(Instant::now());
    f.written += 1;
    let path = f.dir.join(format!("purloin-flight-{}-{}.json", s.pid, f.written));
    let snap = flight::Snapshot { path, reply: None, why: Some(why) };
    if s.tx.try_send(Msg::Snapshot(snap)).is_err() {
        eprintln!(
            "purloin: flight recorder ({why}): its thread is busy; no snapshot written this time"
        );
    }
}

/// Whether a trace records now.
///
/// # Examples
///
/// ```
/// assert!(!purloin::trace::is_recording());
/// ```
pub fn is_recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// A thread joins the current session (`None` if none records).
fn attach() -> Option<Attach> {
    let mut guard = session();
    let s = guard.as_mut()?;
    let flag = Arc::new(ThreadFlag::new());
    s.threads.push(flag.clone());
    let tid = s.next_tid;
    s.next_tid += 1;
    Some(Attach {
        generation: s.generation,
        tx: s.tx.clone(),
        start: s.start,
        dropped: s.dropped.clone(),
        tid,
        flag,
    })
}

/// The trace a runtime starts (`PURLOIN_TRACE` or `Builder::trace`) and stops at its
/// shutdown (unless it was stopped before: then nothing).
pub(crate) struct OwnedTrace {
    generation: u64,
}

impl OwnedTrace {
    /// The trace of a runtime being built: to `path` (`Builder::trace`), whose failure to
    /// start fails the build; else to the `PURLOIN_TRACE` file if this runtime takes the
    /// variable (see [`from_env`]), whose failure to start is a warning on stderr: the
    /// runtime then runs without a trace.
    pub(crate) fn for_runtime(path: Option<&Path>) -> io::Result<Option<OwnedTrace>> {
        if let Some(path) = path {
            return OwnedTrace::start(path).map(Some);
        }
        let Some(path) = from_env() else { return Ok(None) };
        match OwnedTrace::start(&path) {
            Ok(t) => Ok(Some(t)),
            Err(e) => {
                eprintln!(
                    "purloin: PURLOIN_TRACE={}: {e}; the program runs without a trace (set \
                     PURLOIN_TRACE to a file in a writable directory)",
                    path.display()
                );
                Ok(None)
            }
        }
    }

    /// Starts a trace to `path` for a runtime being built.
    fn start(path: &Path) -> io::Result<OwnedTrace> {
        start(path)?;
        let generation = session().as_ref().map_or(0, |s| s.generation);
        Ok(OwnedTrace { generation })
    }

    /// Stops it (after the runtime's workers ended); a failure is reported on stderr (drops
    /// are, by the stop).
    pub(crate) fn finish(self) {
        match stop_session(Some(self.generation)) {
            // Already stopped with `stop` (and maybe another trace started since).
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Ok(_) => {}
            Err(e) => eprintln!("purloin: the trace could not be completed: {e}"),
        }
    }
}

/// The `PURLOIN_TRACE` file, for the first runtime built while it is set and no trace
/// records (later runtimes would truncate the file it wrote).
fn from_env() -> Option<PathBuf> {
    use crate::loom::AtomicBool;
    static TAKEN: AtomicBool = AtomicBool::new(false);
    let v = std::env::var_os("PURLOIN_TRACE")?;
    // Relaxed: only decides which runtime takes the variable.
    if v.is_empty() || is_recording() || TAKEN.swap(true, Ordering::Relaxed) {
        return None;
    }
    Some(PathBuf::from(v))
}
