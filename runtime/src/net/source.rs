//! A non-blocking socket with blocking-style operations: the loop every socket method runs.
//!
//! ```text
//!  loop:
//!    closed? → error
//!    s = snapshot of the direction's readiness (if registered)
//!    syscall → done (pass the baton if others wait) | WouldBlock → continue below
//!    deadline passed? → TimedOut
//!    on a green thread of runtime R:
//!      not registered yet  → register with R's netpoller, retry (epoll reports readiness
//!                            that predates the registration, and the retry sees it)
//!      registered with R   → park until an edge after s (or close, or the deadline)
//!      registered elsewhere → poll(2) inside `blocking` (the worker's other green threads
//!                            move on; correct, but slower: sockets belong to one runtime)
//!    on a plain OS thread  → poll(2) until ready or the deadline (like a std socket)
//! ```
//!
//! # Memory ordering
//!
//! The guarantee: [`Source::close`] wakes every green thread waiting on the socket, and every
//! later operation fails. Registration is lazy, so `close` can race the first registration.
//!
//! - (C1) `close` stores `closed`, then a SeqCst fence, then reads the registration; the first
//!   registration stores it (a Release inside `OnceLock`), then (C2) a SeqCst fence, then the
//!   retried operation loads `closed`. One fence precedes the other: either `close` sees the
//!   registration and closes its readiness (the waiter's registration is refused or its park
//!   loop sees `CLOSED`), or the operation sees `closed`.
//! - The readiness protocol itself is in `readiness.rs`.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use purloin_sched::{WaitInfo, WaitKind};

use super::driver::{Direction, Driver, Registration};
use super::readiness::{Refused, Snapshot};
use crate::loom::{AtomicBool, AtomicU64, Mutex, Ordering, fence, lock};

/// The error payload of operations on a socket closed with `close` (see
/// [`SocketClosed`](super::SocketClosed)).
pub(crate) fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, super::SocketClosed(()))
}

fn timed_out(dir: Direction) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        match dir {
            Direction::Read => {
                "purloin::net: the read timed out (the socket's read timeout elapsed); retry, \
                 or raise it with set_read_timeout"
            }
            Direction::Write => {
                "purloin::net: the operation timed out (the socket's write or connect timeout \
                 elapsed); retry, or raise the timeout"
            }
        },
    )
}

/// Encodes an optional timeout for an atomic (0 = none).
fn timeout_to_nanos(t: Option<Duration>) -> io::Result<u64> {
    match t {
        None => Ok(0),
        Some(d) if d.is_zero() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot set a 0 duration timeout (use None for no timeout, or set_nonblocking for \
             operations that never wait)",
        )),
        Some(d) => Ok(d.as_nanos().clamp(1, u128::from(u64::MAX)) as u64),
    }
}

fn nanos_to_timeout(n: u64) -> Option<Duration> {
    (n != 0).then(|| Duration::from_nanos(n))
}

/// A socket `S` (a std socket in non-blocking mode) plus its netpoller state.
pub(crate) struct Source<S> {
    // Declared before `sock`: fields drop in declaration order, and the registration must
    // leave epoll before the descriptor is closed (a reused descriptor number would
    // otherwise lose its own registration).
    reg: OnceLock<Registration>,
    /// Serialises the first registration (two green threads may block at once).
    registering: Mutex<()>,
    sock: S,
    closed: AtomicBool,
    /// `set_nonblocking(true)`: return `WouldBlock` instead of waiting.
    nonblocking: AtomicBool,
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
}

impl<S: AsRawFd> Source<S> {
    /// Wraps a socket that is already in non-blocking mode.
    pub(crate) fn new(sock: S) -> Source<S> {
        Source {
            reg: OnceLock::new(),
            registering: Mutex::new(()),
            sock,
            closed: AtomicBool::new(false),
            nonblocking: AtomicBool::new(false),
            read_timeout: AtomicU64::new(0),
            write_timeout: AtomicU64::new(0),
        }
    }

    pub(crate) fn get(&self) -> &S {
        &self.sock
    }

    /// The socket, deregistered from the netpoller.
    pub(crate) fn into_inner(self) -> S {
        let Source { reg, sock, .. } = self;
        drop(reg);
        sock
    }

    /// Copies this handle's settings (timeouts, non-blocking flag) onto a clone.
    pub(crate) fn clone_settings_to<T>(&self, other: &Source<T>) {
        other.read_timeout.store(self.read_timeout.load(Ordering::Relaxed), Ordering::Relaxed);
        other.write_timeout.store(self.write_timeout.load(Ordering::Relaxed), Ordering::Relaxed);
        other.nonblocking.store(self.nonblocking.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.read_timeout.store(timeout_to_nanos(t)?, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.write_timeout.store(timeout_to_nanos(t)?, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        nanos_to_timeout(self.read_timeout.load(Ordering::Relaxed))
    }

    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        nanos_to_timeout(self.write_timeout.load(Ordering::Relaxed))
    }

    pub(crate) fn set_nonblocking(&self, on: bool) {
        self.nonblocking.store(on, Ordering::Relaxed);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Runs `op` until it does not return `WouldBlock`, waiting for readiness in `dir` in
    /// between, for at most the direction's timeout.
    pub(crate) fn read_op<R>(&self, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.op(Direction::Read, self.read_timeout(), op)
    }

    pub(crate) fn write_op<R>(&self, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.op(Direction::Write, self.write_timeout(), op)
    }

    /// A stream read or write of `len` bytes: like [`Source::op`], and a transfer shorter
    /// than `len` marks the direction drained, so the next call waits for an edge without
    /// first making a syscall that would return `WouldBlock` (one syscall per request saved
    /// in a request/response loop).
    pub(crate) fn stream_op(
        &self,
        dir: Direction,
        len: usize,
        op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let timeout = match dir {
            Direction::Read => self.read_timeout(),
            Direction::Write => self.write_timeout(),
        };
        self.run(dir, timeout, true, |n: &usize| *n > 0 && *n < len, op)
    }

    /// The loop in the module docs.
    pub(crate) fn op<R>(
        &self,
        dir: Direction,
        timeout: Option<Duration>,
        op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        self.run(dir, timeout, false, |_: &R| false, op)
    }

    /// The loop. `stream`: the drained rule applies (`short` says whether a result was a
    /// partial transfer).
    fn run<R>(
        &self,
        dir: Direction,
        timeout: Option<Duration>,
        stream: bool,
        short: impl Fn(&R) -> bool,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        let mut deadline: Option<Instant> = None;
        // A drained mark is only trusted after waits through the netpoller (whose edges move
        // the count); after a poll(2) wait, try the syscall.
        let mut trust_drained = true;
        loop {
            if self.closed.load(Ordering::Relaxed) {
                return Err(closed_error());
            }
            let reg = self.reg.get();
            let snap = reg.map(|r| r.io().dir(dir).snapshot());
            let drained = trust_drained
                && stream
                && matches!((reg, snap), (Some(r), Some(s)) if r.io().dir(dir).known_drained(s));
            let result =
                if drained { Err(io::ErrorKind::WouldBlock.into()) } else { op(&self.sock) };
            match result {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.nonblocking.load(Ordering::Relaxed) {
                        return Err(e);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                done => {
                    if let (Some(r), Some(s)) = (reg, snap) {
                        let readiness = r.io().dir(dir);
                        if done.as_ref().is_ok_and(&short) {
                            readiness.mark_drained(s);
                        }
                        if let Some(w) = readiness.pass_baton() {
                            w.unpark();
                        }
                    }
                    // A loop of operations that never wait reaches no scheduling point: yield
                    // here if the monitor asked (a flooding peer must not starve the worker).
                    purloin_sched::preemption_point();
                    return done;
                }
            }
            if deadline.is_none() {
                deadline = timeout.and_then(|t| Instant::now().checked_add(t));
            }
            if let Some(d) = deadline
                && Instant::now() >= d
            {
                return Err(timed_out(dir));
            }
            if let Some(me) = purloin_sched::current()
                && me.is_interrupted()
            {
                return Err(interrupted_error(&me));
            }
            trust_drained = self.wait(dir, reg, snap, deadline)?;
        }
    }

    /// Waits until `dir` may be ready (or the deadline); the caller retries its syscall.
    /// Returns whether the wait went through the netpoller (`false`: through `poll(2)`).
    ///
    /// Inlined into the operation's loop, as is [`wait_green`]: a green thread resumes from
    /// its park after the other green threads ran, when its stack lines are cold, and every
    /// frame it returns through then costs a cache miss and a mispredicted return.
    #[inline(always)]
    fn wait(
        &self,
        dir: Direction,
        reg: Option<&Registration>,
        snap: Option<Snapshot>,
        deadline: Option<Instant>,
    ) -> io::Result<bool> {
        if !purloin_sched::in_green_thread() {
            return poll_fd(self.sock.as_raw_fd(), dir, deadline).map(|()| false);
        }
        // The current runtime's driver, compared by address (no reference count traffic on
        // the common path).
        let current = crate::current::with_current(|d| d.map(|d| Arc::as_ptr(&d.net)));
        match (reg, snap, current) {
            (None, _, Some(_)) => {
                let driver = crate::current::with_current(|d| d.map(|d| d.net.clone()))
                    .expect("on a green thread of a purloin runtime");
                self.register(driver).map(|()| true)
            }
            (Some(r), Some(snap), Some(current))
                if core::ptr::eq(Arc::as_ptr(&r.driver), current) =>
            {
                wait_green(r, dir, snap, deadline).map(|()| true)
            }
            // Registered with another runtime's netpoller (or a bare scheduler without one):
            // wait on the descriptor, off the worker's processor.
            _ => purloin_sched::blocking(|| poll_fd(self.sock.as_raw_fd(), dir, deadline))
                .map(|()| false),
        }
    }

    /// Registers with `driver` (once; a concurrent first registration wins).
    fn register(&self, driver: Arc<Driver>) -> io::Result<()> {
        {
            let _guard = lock(&self.registering);
            if self.reg.get().is_none() {
                let reg = driver.register(self.sock.as_raw_fd())?;
                if self.reg.set(reg).is_err() {
                    unreachable!("registration is serialised by `registering`");
                }
            }
        }
        // C2: publish the registration before the retried operation reads `closed` (pairs
        // with C1 in `close`).
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// Closes the socket for every waiter: marks it closed, wakes the green threads waiting
    /// on it (their operations fail with `SocketClosed`), and shuts the socket down, which
    /// wakes OS threads blocked in `poll(2)` and tells the peer. The descriptor itself is
    /// closed when the handle drops, so its number cannot be reused under a waiter.
    pub(crate) fn close(&self) {
        if self.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        // C1: pairs with C2 in `register`.
        fence(Ordering::SeqCst);
        if let Some(r) = self.reg.get() {
            for w in r.io().dir(Direction::Read).close() {
                w.unpark();
            }
            for w in r.io().dir(Direction::Write).close() {
                w.unpark();
            }
        }
        // SAFETY: plain system call on a descriptor we own. Errors (ENOTCONN on a socket that
        // was never connected) do not matter: the waiters were woken above or by the kernel.
        unsafe { libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_RDWR) };
    }
}

/// Parks the current green thread until an edge after `snap` in `dir` (or a close, or the
/// deadline). The caller retries its syscall. Inlined: see [`Source::wait`].
#[inline(always)]
fn wait_green(
    reg: &Registration,
    dir: Direction,
    snap: Snapshot,
    deadline: Option<Instant>,
) -> io::Result<()> {
    let readiness = reg.io().dir(dir);
    let me = purloin_sched::current().expect("wait_green runs on a green thread");
    // Counted before registering, so the poller never sees a registered waiter uncounted.
    reg.driver.waiter_enter();
    if let Err(why) = readiness.register(snap, me) {
        reg.driver.waiter_leave();
        return if why == Refused::Closed { Err(closed_error()) } else { Ok(()) };
    }
    /// Leaves the wait on every path, including the forced unwind of a runtime shutdown.
    struct Leave<'a> {
        reg: &'a Registration,
        dir: Direction,
        me: purloin_sched::GreenThread,
    }
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.reg.io().dir(self.dir).deregister(&self.me);
            self.reg.driver.waiter_leave();
            purloin_sched::set_wait_info(None);
        }
    }
    let _leave = Leave { reg, dir, me };
    purloin_sched::set_wait_info(Some(WaitInfo {
        kind: WaitKind::Io,
        object: reg.io() as *const _ as usize,
        holder: None,
    }));
    // An interrupt ends the wait; the caller retries its syscall once (an edge that came first
    // is taken: the wait saw the wake, not the interrupt) and then reports it.
    while !readiness.changed_since(snap) && !me.is_interrupted() {
        match deadline {
            None => purloin_sched::park(),
            Some(d) => {
                if Instant::now() >= d {
                    break;
                }
                purloin_sched::park_deadline(d);
            }
        }
    }
    Ok(())
}

/// The error an I/O wait of an interrupted green thread returns: `Interrupted` for a one-shot
/// interrupt (consumed here; brpc's `EINTR`), and `Other` naming the cause for a cancelled
/// token, which is not consumed: std's `read_exact` and `write_all` retry `Interrupted`, and a
/// token's interrupt holds until the thread leaves its scope, so that kind would spin them.
#[cold]
pub(crate) fn interrupted_error(me: &purloin_sched::GreenThread) -> io::Error {
    if me.is_interrupt_held() {
        io::Error::other(
            "the I/O wait was cancelled: the green thread runs in the scope of a cancelled \
             purloin::cancel::CancelToken",
        )
    } else {
        me.take_interrupt();
        io::Error::new(
            io::ErrorKind::Interrupted,
            "the green thread was interrupted (JoinHandle::interrupt) while it waited for I/O",
        )
    }
}

/// Waits with `poll(2)` until `fd` is ready in `dir` or the deadline passes (a plain OS
/// thread's wait, like a blocking std socket). Returns `Ok` either way; the caller retries.
pub(crate) fn poll_fd(fd: RawFd, dir: Direction, deadline: Option<Instant>) -> io::Result<()> {
    let events = match dir {
        Direction::Read => libc::POLLIN | libc::POLLPRI,
        Direction::Write => libc::POLLOUT,
    };
    let mut pfd = libc::pollfd { fd, events, revents: 0 };
    loop {
        let ms = match deadline {
            None => -1,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Ok(());
                }
                (d - now).as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128)
                    as libc::c_int
            }
        };
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(());
    }
}

/// Whether `fd` is ready in `dir` right now (`WouldBlock` if not): the "syscall" of a wait
/// for a non-blocking connect to complete.
pub(crate) fn ready_now(fd: RawFd, dir: Direction) -> io::Result<()> {
    let events = match dir {
        Direction::Read => libc::POLLIN,
        Direction::Write => libc::POLLOUT,
    };
    let mut pfd = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: `pfd` is one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut pfd, 1, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if pfd.revents == 0 { Err(io::ErrorKind::WouldBlock.into()) } else { Ok(()) }
}
