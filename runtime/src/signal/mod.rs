//! Unix signals as values: [`Signals`] receives SIGTERM, SIGINT, SIGHUP, SIGUSR1/2,
//! SIGCHLD, … on a channel whose `recv` parks the calling green thread (and blocks a plain OS
//! thread); [`ctrl_c`] waits for one SIGINT.
//!
//! ```
//! use purloin::signal::{Signal, Signals};
//!
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     let signals = Signals::new(&[Signal::USR1, Signal::HUP]).unwrap();
//!     // Somebody (here: we) sends SIGUSR1 to the process.
//!     // SAFETY: plain system call; SIGUSR1 is handled by `signals` from here on.
//!     unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
//!     assert_eq!(signals.recv(), Signal::USR1);
//! });
//! ```
//!
//! Several receivers may watch one signal: each gets every delivery. While at least one
//! receiver watches a signal, purloin's handler is installed for it; when the last one is
//! dropped, the disposition that was in place before the first (normally the default:
//! SIGTERM and SIGINT terminate the process again) is restored. Signals that arrive while no
//! receiver watches them are not queued for later receivers.
//!
//! Like Go's `signal.Notify`, delivery never blocks: each receiver buffers up to 64
//! signals, and a receiver that falls further behind misses the excess (a signal that
//! arrives several times before anybody looked may also be reported once: the kernel merges
//! pending standard signals too). Receive promptly, or drain with
//! [`try_recv`](Signals::try_recv).
//!
//! # How: a self-pipe and one dispatcher thread
//!
//! The handler (installed with `sigaction`, `SA_RESTART | SA_ONSTACK`) only sets a per-signal
//! counter and writes one byte to a non-blocking pipe — both async-signal-safe. One OS thread,
//! `purloin-signal`, started with the first receiver and living as long as the process,
//! blocks in `read` on the pipe, compares the counters with the ones it has delivered and sends each signal into the channels
//! of its receivers. Channels then do what they always do: unpark a green thread on whichever
//! runtime it belongs to, or wake a plain thread. The count-then-byte hand-off is the one new
//! wake-up protocol; `pending.rs` explains it and a loom model checks it.
//!
//! Why not `signalfd`: it only sees a signal that is *blocked in every thread*, otherwise the
//! kernel runs the default action on some thread that does not block it. A library cannot
//! guarantee that — threads created before the first receiver (the test harness, a C
//! library's, the user's) keep their masks, and threads started by `Command` inherit the
//! block and have to undo it — so signalfd misses signals in exactly the programs that mix
//! threads. A self-pipe from a `sigaction` handler is what Go, tokio and libuv do.
//!
//! Why a thread, not the netpoller: a signal belongs to the process, while every runtime has
//! its own netpoller, and receivers may live on several runtimes or on plain threads. One
//! thread blocked in `read` costs nothing while no signal arrives (Go dedicates its
//! `signal_recv` goroutine to the same job).
//!
//! # Which signals
//!
//! Any signal number from 1 to 64 except: SIGKILL and SIGSTOP (they cannot be caught);
//! SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGTRAP (program faults: purloin's stack-overflow
//! detection needs SIGSEGV/SIGBUS, and returning from a fault handler re-runs the fault);
//! and 32 and 33 (glibc's internal real-time signals). Those are refused with
//! `ErrorKind::InvalidInput` and a message that says why.
//!
//! A handler that was installed by someone else before the first receiver (not the default
//! and not "ignore") is replaced while purloin's receivers watch, not chained, and restored
//! after.
//!
//! # In a forked child
//!
//! A child process made with `fork` that does not `exec` has none of its parent's threads,
//! so no dispatcher thread would deliver to receivers there, and purloin's handlers would
//! swallow the signals. Its subscriptions are therefore void: in the child, every signal
//! purloin's receivers watched gets back the disposition it had before the first receiver,
//! as if every receiver had been dropped at the fork (normally the default: SIGTERM and
//! SIGINT terminate the child). A `pthread_atfork` child handler restores the dispositions;
//! a signal that reaches the child before that handler ran is handled the same way (the
//! disposition restored and the signal sent again).
//!
//! In such a child, the receivers it inherited panic when used (`recv`, `try_recv`,
//! `recv_timeout`, `recv_deadline`, `receiver`: no signal could ever arrive) and do nothing
//! when dropped, and [`Signals::new`] fails with `ErrorKind::Unsupported`: handle signals
//! in the parent, or `exec` a program in the child (`exec` resets caught signals to the
//! default, and the new program may use purloin afresh). A child of a process that never
//! created a receiver is not affected.
//!
//! ```
//! use purloin::signal::{Signal, Signals};
//!
//! let signals = Signals::new(&[Signal::TERM]).unwrap();
//! // SAFETY: the child only calls async-signal-safe functions and `_exit`s.
//! let pid = unsafe { libc::fork() };
//! if pid == 0 {
//!     // The child: SIGTERM terminates it, as if it had never been watched.
//!     // SAFETY: sigaction is plain old data; a null new action only reads the current one.
//!     let action = unsafe {
//!         let mut action: libc::sigaction = std::mem::zeroed();
//!         libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut action);
//!         action
//!     };
//!     // SAFETY: ends the child without running the parent's exit handlers.
//!     unsafe { libc::_exit((action.sa_sigaction == libc::SIG_DFL) as i32) };
//! }
//! let mut status = 0;
//! // SAFETY: waits for our own child.
//! assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
//! assert_eq!(libc::WEXITSTATUS(status), 1, "the child's SIGTERM was back to the default");
//! drop(signals);
//! ```

mod fork;
mod pending;

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::loom::{AtomicU32, Mutex, Ordering, lock};
use crate::sync::channel::{self, Receiver, Sender};
use pending::{NSIG, Pending, Seen};

/// A signal number.
///
/// # Examples
///
/// ```
/// use purloin::signal::Signal;
/// assert_eq!(Signal::TERM.as_raw(), libc::SIGTERM);
/// assert_eq!(Signal::from_raw(libc::SIGINT), Signal::INT);
/// assert_eq!(Signal::HUP.to_string(), "SIGHUP");
/// assert_eq!(Signal::from_raw(40).to_string(), "signal 40");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(libc::c_int);

impl Signal {
    /// SIGHUP: the terminal hung up; daemons take it as "reload the configuration".
    pub const HUP: Signal = Signal(libc::SIGHUP);
    /// SIGINT: Ctrl-C.
    pub const INT: Signal = Signal(libc::SIGINT);
    /// SIGQUIT: Ctrl-\.
    pub const QUIT: Signal = Signal(libc::SIGQUIT);
    /// SIGTERM: the polite request to stop (systemd, Kubernetes, `kill`).
    pub const TERM: Signal = Signal(libc::SIGTERM);
    /// SIGUSR1: user-defined.
    pub const USR1: Signal = Signal(libc::SIGUSR1);
    /// SIGUSR2: user-defined.
    pub const USR2: Signal = Signal(libc::SIGUSR2);
    /// SIGCHLD: a child process stopped or exited.
    pub const CHLD: Signal = Signal(libc::SIGCHLD);
    /// SIGPIPE: a write to a pipe or socket with no reader (Rust programs ignore it by
    /// default).
    pub const PIPE: Signal = Signal(libc::SIGPIPE);
    /// SIGALRM: a timer set with `alarm`/`setitimer` expired.
    pub const ALRM: Signal = Signal(libc::SIGALRM);
    /// SIGWINCH: the terminal window changed size.
    pub const WINCH: Signal = Signal(libc::SIGWINCH);

    /// The signal with number `n` (checked when a [`Signals`] is created).
    pub const fn from_raw(n: libc::c_int) -> Signal {
        Signal(n)
    }

    /// The signal number.
    pub const fn as_raw(self) -> libc::c_int {
        self.0
    }

    fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            libc::SIGHUP => "SIGHUP",
            libc::SIGINT => "SIGINT",
            libc::SIGQUIT => "SIGQUIT",
            libc::SIGILL => "SIGILL",
            libc::SIGTRAP => "SIGTRAP",
            libc::SIGABRT => "SIGABRT",
            libc::SIGBUS => "SIGBUS",
            libc::SIGFPE => "SIGFPE",
            libc::SIGKILL => "SIGKILL",
            libc::SIGUSR1 => "SIGUSR1",
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGUSR2 => "SIGUSR2",
            libc::SIGPIPE => "SIGPIPE",
            libc::SIGALRM => "SIGALRM",
            libc::SIGTERM => "SIGTERM",
            libc::SIGCHLD => "SIGCHLD",
            libc::SIGCONT => "SIGCONT",
            libc::SIGSTOP => "SIGSTOP",
            libc::SIGTSTP => "SIGTSTP",
            libc::SIGWINCH => "SIGWINCH",
            _ => return None,
        })
    }

    /// Why this signal cannot be watched, if it cannot.
    fn refusal(self) -> Option<String> {
        let why = match self.0 {
            n if n < 1 || n as usize >= NSIG => "is not a signal number (1 to 64 on Linux)",
            libc::SIGKILL | libc::SIGSTOP => "cannot be caught by any process",
            libc::SIGSEGV | libc::SIGBUS => {
                "is a program fault that purloin's stack-overflow detection handles; it \
                 cannot be received as a value"
            }
            libc::SIGILL | libc::SIGFPE | libc::SIGTRAP => {
                "is a program fault: returning from its handler would re-run the faulting \
                 instruction"
            }
            32 | 33 => "is reserved by the C library (glibc's internal real-time signals)",
            _ => return None,
        };
        Some(format!("purloin::signal: {self} {why}; watch another signal"))
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "signal {}", self.0),
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Signals that arrived, not yet dispatched (set by the handler).
static PENDING: Pending = Pending::new();
/// The self-pipe's write end plus one (0: not created yet). Read by the handler.
static PIPE_WRITE: AtomicU32 = AtomicU32::new(0);
/// Receivers and installed handlers.
static REGISTRY: Mutex<Registry> = Mutex::new(Registry::new());

/// How many signals a receiver buffers before it misses some.
const BUFFER: usize = 64;

struct Watcher {
    id: u64,
    /// Bit `n - 1` set: watches signal `n`.
    mask: u64,
    tx: Sender<Signal>,
}

struct Registry {
    watchers: Vec<Watcher>,
    next_id: u64,
    /// Receivers per signal number (purloin's handler is installed while it is not zero).
    counts: [usize; NSIG],
    /// The dispatcher thread runs (and the pipe exists).
    started: bool,
}

impl Registry {
    const fn new() -> Registry {
        Registry { watchers: Vec::new(), next_id: 0, counts: [0; NSIG], started: false }
    }
}

/// A receiver of one or more signals (see the [module docs](self)). Dropping the last
/// receiver of a signal restores that signal's previous disposition.
///
/// # Examples
///
/// Graceful shutdown: stop on the first SIGTERM or SIGINT.
///
/// ```no_run
/// use purloin::signal::{Signal, Signals};
///
/// let signals = Signals::new(&[Signal::TERM, Signal::INT]).unwrap();
/// let server = purloin::spawn(|| { /* serve */ });
/// let sig = signals.recv();
/// eprintln!("{sig}: shutting down");
/// // ... close listeners, wait for connections to drain ...
/// # drop(server);
/// ```
pub struct Signals {
    id: u64,
    mask: u64,
    rx: Receiver<Signal>,
    /// Held by a helper thread of the runtime that never wakes a green thread
    /// ([`Signals::for_helper`]).
    helper: bool,
}

/// Receivers held by the runtime's helper threads (see [`receivers_that_may_wake`]).
static HELPER_RECEIVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Receivers alive that a green thread may be waiting on, or whose signal may make a thread
/// wake one: a deadlock is not certain while any exists (the signal may still come).
pub(crate) fn receivers_that_may_wake() -> usize {
    let all = lock(&REGISTRY).watchers.len();
    // A helper's receiver is counted as a helper's only after it is in the registry, and
    // uncounted before it leaves it, so reading the helpers after the registry errs towards
    // "may wake" (Relaxed is enough: the registry's lock orders the rest).
    all.saturating_sub(HELPER_RECEIVERS.load(std::sync::atomic::Ordering::Relaxed))
}

impl Signals {
    /// Starts receiving `signals` (from now on: earlier deliveries are not reported).
    ///
    /// # Errors
    /// `InvalidInput` for an empty list or a signal that cannot be watched (the message
    /// names it and says why; see the [module docs](self)); `Unsupported` in a child process
    /// forked without `exec` from one that created receivers (see
    /// [In a forked child](self#in-a-forked-child)); the OS error if the self-pipe, the
    /// dispatcher thread or `sigaction` fails.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin::signal::{Signal, Signals};
    /// let err = Signals::new(&[Signal::from_raw(libc::SIGKILL)]).err().unwrap();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// assert!(err.to_string().contains("SIGKILL cannot be caught"));
    /// ```
    pub fn new(signals: &[Signal]) -> io::Result<Signals> {
        if signals.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "purloin::signal: Signals::new needs at least one signal",
            ));
        }
        let mut mask = 0u64;
        for &s in signals {
            if let Some(why) = s.refusal() {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
            }
            mask |= bit(s.0 as usize);
        }
        if fork::forked() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "purloin::signal: this process is a fork of one that received signals with \
                 purloin, whose dispatcher thread exists only in the parent, so a receiver \
                 created here would never get a signal; handle signals in the parent, or exec a \
                 program in the child",
            ));
        }
        let mut reg = lock(&REGISTRY);
        if !reg.started {
            start_dispatcher()?;
            reg.started = true;
        }
        for sig in bits(mask) {
            if reg.counts[sig] == 0
                && let Err(e) = fork::install(sig)
            {
                // Undo the signals counted so far (restoring their dispositions).
                release(&mut reg, mask & (bit(sig) - 1));
                return Err(e);
            }
            reg.counts[sig] += 1;
        }
        let (tx, rx) = channel::bounded(BUFFER);
        let id = reg.next_id;
        reg.next_id += 1;
        reg.watchers.push(Watcher { id, mask, tx });
        Ok(Signals { id, mask, rx, helper: false })
    }

    /// Waits for the next signal: parks the green thread (blocks a plain OS thread). Not
    /// interruptible (it must return a signal): [`recv_timeout`](Signals::recv_timeout) and
    /// [`recv_deadline`](Signals::recv_deadline) end early when the green thread is
    /// interrupted.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin::signal::{Signal, Signals};
    /// let s = Signals::new(&[Signal::USR2]).unwrap();
    /// // SAFETY: plain system call; SIGUSR2 is handled by `s`.
    /// unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) };
    /// assert_eq!(s.recv(), Signal::USR2);
    /// ```
    ///
    /// # Panics
    ///
    /// In a child process forked without `exec` (see
    /// [In a forked child](self#in-a-forked-child)), as do the other receiving methods.
    pub fn recv(&self) -> Signal {
        let rx = self.rx();
        // A selection without a deadline is not interruptible.
        let mut sel = channel::Select::new();
        sel.recv(rx);
        let op = sel.select();
        op.recv(rx).expect("the registry holds the sender while the receiver lives")
    }

    /// The next signal if one is buffered now.
    pub fn try_recv(&self) -> Option<Signal> {
        self.rx().try_recv().ok()
    }

    /// Waits for the next signal for at most `timeout`: `None` if none came in time, or the
    /// calling green thread was interrupted first (the interrupt stays pending: see
    /// [`interrupted`](crate::interrupted)).
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Signal> {
        let rx = self.rx();
        let mut sel = channel::Select::new();
        sel.recv(rx);
        let op = sel.select_timeout(timeout).ok()?;
        Some(op.recv(rx).expect("the registry holds the sender while the receiver lives"))
    }

    /// Waits for the next signal until `deadline` (see [`recv_timeout`](Signals::recv_timeout)).
    pub fn recv_deadline(&self, deadline: Instant) -> Option<Signal> {
        self.recv_timeout(deadline.saturating_duration_since(Instant::now()))
    }

    /// The channel the signals arrive on, to wait on them in a
    /// [`select!`](crate::select) with other channels.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin::signal::{Signal, Signals};
    /// use purloin::sync::channel;
    ///
    /// // SIGWINCH: a signal no other example sends (doctests share one process).
    /// let signals = Signals::new(&[Signal::WINCH]).unwrap();
    /// let (tx, work) = channel::unbounded::<u32>();
    /// tx.send(7).unwrap();
    /// purloin::select! {
    ///     recv(work) -> job => assert_eq!(job, Ok(7)),
    ///     recv(signals.receiver()) -> sig => panic!("unexpected {sig:?}"),
    /// }
    /// ```
    pub fn receiver(&self) -> &Receiver<Signal> {
        self.rx()
    }

    /// The channel, refused in a forked child (nothing could ever arrive on it there).
    fn rx(&self) -> &Receiver<Signal> {
        if fork::forked() {
            panic!(
                "purloin::signal: this receiver was created before this process was forked; a \
                 forked child's subscriptions are void (the signals' previous dispositions are \
                 back) and the dispatcher thread exists only in the parent, so no signal can \
                 arrive here; handle signals in the parent, or exec a program in the child"
            );
        }
        &self.rx
    }

    /// The signals this receiver watches.
    pub fn signals(&self) -> Vec<Signal> {
        bits(self.mask).map(|n| Signal(n as libc::c_int)).collect()
    }
}

impl fmt::Debug for Signals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signals").field("signals", &self.signals()).finish()
    }
}

impl Signals {
    /// Marks this receiver as held by a helper thread of the runtime that only reports (a
    /// dump on a signal) and never wakes a green thread, so it does not keep a deadlock
    /// uncertain.
    pub(crate) fn for_helper(mut self) -> Signals {
        // Relaxed: a count read by the deadlock check, which errs towards "may wake".
        HELPER_RECEIVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.helper = true;
        self
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        if fork::forked() {
            // Void since the fork: the dispositions were restored then, and the registry's
            // lock may have been held by a thread that does not exist here.
            return;
        }
        if self.helper {
            // Before the receiver goes (see `receivers_that_may_wake`).
            HELPER_RECEIVERS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        let mut reg = lock(&REGISTRY);
        reg.watchers.retain(|w| w.id != self.id);
        release(&mut reg, self.mask);
    }
}

/// Uncounts one receiver of each signal in `mask`, restoring the previous disposition of
/// those left without receivers.
fn release(reg: &mut Registry, mask: u64) {
    for sig in bits(mask) {
        reg.counts[sig] -= 1;
        if reg.counts[sig] == 0 {
            fork::restore(sig);
        }
    }
}

/// Waits for one SIGINT (Ctrl-C), parking the green thread. SIGINT's previous disposition
/// is restored when it returns (unless other receivers watch it).
///
/// # Errors
/// As [`Signals::new`].
///
/// # Examples
///
/// ```no_run
/// purloin::spawn(|| { /* serve */ });
/// purloin::signal::ctrl_c().unwrap();
/// eprintln!("interrupted; exiting");
/// ```
pub fn ctrl_c() -> io::Result<()> {
    Signals::new(&[Signal::INT])?.recv();
    Ok(())
}

fn bits(mask: u64) -> impl Iterator<Item = usize> {
    (1..NSIG).filter(move |&n| mask & bit(n) != 0)
}

/// Signal `n`'s bit in a mask (`n` in 1..=64).
fn bit(n: usize) -> u64 {
    1 << (n - 1)
}

/// The handler: count, then byte (S1 in `pending.rs`). Async-signal-safe: an atomic store, an
/// atomic load and `write(2)`; `errno` is saved and restored around the write. In a forked
/// child it hands the signal back to its previous disposition instead (`fork.rs`).
extern "C" fn on_signal(sig: libc::c_int) {
    let sig = sig as usize;
    if sig >= NSIG || fork::forward(sig) {
        return;
    }
    PENDING.raise(sig);
    let fd = PIPE_WRITE.load(Ordering::Acquire);
    if fd != 0 {
        // SAFETY: reading this thread's errno location is always valid.
        let saved = unsafe { *libc::__errno_location() };
        let byte = 1u8;
        // SAFETY: `fd - 1` is the pipe's write end, open for the life of the process (the
        // dispatcher never closes it); a full pipe (EAGAIN) is fine, see `pending.rs`.
        unsafe { libc::write((fd - 1) as RawFd, (&byte as *const u8).cast(), 1) };
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = saved };
    }
}

/// Creates the self-pipe and starts the dispatcher thread.
fn start_dispatcher() -> io::Result<()> {
    fork::start();
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is valid for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(crate::net::sys::explain(io::Error::last_os_error(), "purloin::signal: pipe2"));
    }
    // SAFETY: `pipe2` returned two fresh descriptors that we own.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The handler must never block: a full pipe drops the byte (one is already there).
    crate::io::set_nonblocking(write.as_raw_fd())?;
    std::thread::Builder::new()
        .name("purloin-signal".into())
        .stack_size(64 * 1024)
        .spawn(move || dispatch(read))
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("purloin::signal: could not start the dispatcher thread: {e}"),
            )
        })?;
    // The write end lives as long as the process (the handler may run at any time).
    let write = std::mem::ManuallyDrop::new(write);
    PIPE_WRITE.store(write.as_raw_fd() as u32 + 1, Ordering::Release);
    Ok(())
}

/// The dispatcher: wait for a byte, then deliver every flagged signal (S1).
fn dispatch(read: OwnedFd) {
    // It wakes green threads only through receivers, which the deadlock check counts
    // (`receivers_that_may_wake`); with none alive it only waits.
    let _mark = purloin_sched::helper_thread();
    let mut buf = [0u8; 64];
    let mut seen = Seen::new();
    loop {
        // SAFETY: `buf` is valid for `buf.len()` bytes; `read` is our descriptor.
        let n = unsafe { libc::read(read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            let e = io::Error::last_os_error();
            if n < 0 && e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // The write end is never closed: a broken invariant.
            panic!("purloin::signal: reading the self-pipe failed: {e} (a bug in purloin)");
        }
        for sig in 1..NSIG {
            if PENDING.take(sig, &mut seen) {
                let reg = lock(&REGISTRY);
                for w in reg.watchers.iter().filter(|w| w.mask & bit(sig) != 0) {
                    // Full: this receiver misses one (Go's rule: delivery never blocks).
                    let _ = w.tx.try_send(Signal(sig as libc::c_int));
                }
            }
        }
    }
}
