//! Readiness for any file descriptor: [`Async<T>`] registers a descriptor (a pipe, a socket of
//! a type purloin does not wrap, a pidfd, a tty, an eventfd, …) with the runtime's netpoller
//! and gives it blocking-style operations that park only the calling green thread.
//!
//! ```
//! use std::io::{Read, Write};
//! use purloin::io::Async;
//!
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     let (r, w) = std::io::pipe().unwrap();
//!     let mut r = Async::new(r).unwrap();
//!     let mut w = Async::new(w).unwrap();
//!     let reader = purloin::spawn(move || {
//!         let mut s = String::new();
//!         r.read_to_string(&mut s).unwrap(); // parks until the writer closes
//!         s
//!     });
//!     w.write_all(b"through a pipe").unwrap();
//!     drop(w);
//!     assert_eq!(reader.join().unwrap(), "through a pipe");
//! });
//! ```
//!
//! It is the building block under [`net`](crate::net) (the TCP, UDP and Unix socket types run
//! the same loop) and under [`process`](crate::process) (child pipes and pidfds).
//!
//! # The edge-triggered re-arm rule
//!
//! The netpoller registers each descriptor once, edge-triggered: it reports a descriptor
//! when it *becomes* ready, not while it *is* ready. purloin therefore only waits after the
//! descriptor said so: an operation ([`read_with`](Async::read_with),
//! [`write_with`](Async::write_with), [`Read`]/[`Write`]) first tries the system call, and
//! only on `WouldBlock` parks until the next edge; a readiness count taken *before* the
//! system call makes sure an edge that arrives between the `WouldBlock` and the park is not
//! lost. [`wait_readable`](Async::wait_readable) and [`wait_writable`](Async::wait_writable)
//! do the same with a zero-timeout `poll(2)` as their "system call", so they return at once
//! when the descriptor is ready now.
//!
//! What this asks of the closures you pass: return `WouldBlock` only when the OS returned
//! it. A closure that invents `WouldBlock` (say, "not enough bytes yet" while the kernel
//! buffer still holds data) may wait for an edge that never comes, because the kernel only
//! signals again after the buffer was drained. After `wait_readable` returns, read until
//! `WouldBlock` (or until you have what you need and will call `read_with` again, which tries
//! the system call before waiting).
//!
//! # Ownership
//!
//! `Async<T>` owns `T`, and so the descriptor: it is registered lazily, by the first green
//! thread that has to wait (with that thread's runtime), and deregistered when the `Async`
//! drops, *before* `T` is dropped and closes it, so a reused descriptor number can never
//! inherit the registration. Do not close the descriptor behind `T`'s back (for example
//! with `libc::close` on [`as_raw_fd`](std::os::fd::AsRawFd::as_raw_fd)), and do not wrap
//! the same descriptor twice in one runtime: epoll refuses the second registration (`EEXIST`)
//! — use `try_clone`/`dup` first (a duplicate is a separate registration).
//!
//! [`Async::new`] switches the descriptor to non-blocking mode. That flag belongs to the
//! *open file description*, so every duplicate shares it — including copies in other
//! processes (a terminal's stdin, for one): other users of it then see `WouldBlock`.
//! [`into_inner`](Async::into_inner) leaves it non-blocking.
//!
//! Outside a runtime (on a plain OS thread) the same calls block the thread in `poll(2)`,
//! like std I/O. On a green thread of another runtime than the one the descriptor
//! registered with, they still work, but each wait blocks a worker (inside
//! [`blocking`](crate::blocking)): keep a descriptor within one runtime.
//!
//! Regular files are always "ready" for epoll (which refuses them with `EPERM`): use
//! [`fs`](crate::fs) for disk I/O.

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use crate::net::Direction;
use crate::net::source::{Source, ready_now};

/// A file descriptor registered with the runtime's netpoller: blocking-style waits and I/O
/// that park the calling green thread (see the [module docs](self) for the re-arm rule and
/// ownership).
///
/// # Examples
///
/// Wait for a pipe to become readable, with a timeout:
///
/// ```
/// use std::io::ErrorKind;
/// use std::time::Duration;
/// use purloin::io::Async;
///
/// let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let (r, _w) = std::io::pipe().unwrap();
///     let r = Async::new(r).unwrap();
///     let err = r.wait_readable_timeout(Duration::from_millis(10)).unwrap_err();
///     assert_eq!(err.kind(), ErrorKind::TimedOut);
/// });
/// ```
pub struct Async<T: AsRawFd> {
    src: Source<T>,
}

impl<T: AsRawFd> Async<T> {
    /// Wraps `inner`, switching its descriptor to non-blocking mode (`O_NONBLOCK`, shared by
    /// every duplicate of the descriptor). Registration with the netpoller happens on the
    /// first wait.
    ///
    /// # Errors
    /// - `InvalidInput` for a regular file or a directory (epoll cannot poll them; the
    ///   message points to [`fs`](crate::fs)).
    /// - The OS error of `fstat` or `fcntl`, unchanged, so that
    ///   [`raw_os_error`](io::Error::raw_os_error) answers: `EBADF` ("Bad file descriptor
    ///   (os error 9)") when `inner` does not hold an open descriptor.
    ///
    /// A descriptor that is already registered with the runtime (wrapped twice) is refused
    /// at the first wait, with an error that says so (see [Ownership](self#ownership)).
    ///
    /// # Examples
    ///
    /// ```
    /// let (r, _w) = std::io::pipe().unwrap();
    /// let r = purloin::io::Async::new(r).unwrap();
    /// assert!(r.get_ref().try_clone().is_ok());
    /// ```
    ///
    /// A closed descriptor keeps its OS error:
    ///
    /// ```
    /// use std::os::fd::{AsRawFd, RawFd};
    ///
    /// struct Closed;
    /// impl AsRawFd for Closed {
    ///     fn as_raw_fd(&self) -> RawFd {
    ///         -1
    ///     }
    /// }
    /// let err = purloin::io::Async::new(Closed).err().unwrap();
    /// assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    /// ```
    pub fn new(inner: T) -> io::Result<Async<T>> {
        refuse_regular_file(inner.as_raw_fd())?;
        set_nonblocking(inner.as_raw_fd())?;
        Ok(Async { src: Source::new(inner) })
    }

    /// The inner value.
    pub fn get_ref(&self) -> &T {
        self.src.get()
    }

    /// The inner value, deregistered from the netpoller (its descriptor stays non-blocking).
    ///
    /// # Examples
    ///
    /// ```
    /// let (r, _w) = std::io::pipe().unwrap();
    /// let r = purloin::io::Async::new(r).unwrap().into_inner();
    /// drop(r);
    /// ```
    pub fn into_inner(self) -> T {
        self.src.into_inner()
    }

    /// Parks until the descriptor is readable (returns at once if it is readable now),
    /// including end-of-file, a hang-up or an error condition. See the re-arm rule in the
    /// [module docs](self).
    ///
    /// # Errors
    /// The `Async` was [`close`](Async::close)d, or `poll(2)` failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    /// let (r, mut w) = std::io::pipe().unwrap();
    /// let r = purloin::io::Async::new(r).unwrap();
    /// w.write_all(b"x").unwrap();
    /// r.wait_readable().unwrap(); // ready now: no wait
    /// ```
    pub fn wait_readable(&self) -> io::Result<()> {
        self.wait(Direction::Read, None)
    }

    /// Like [`wait_readable`](Async::wait_readable), giving up after `timeout` with
    /// `ErrorKind::TimedOut`.
    ///
    /// # Errors
    /// As `wait_readable`, or the timeout.
    pub fn wait_readable_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.wait(Direction::Read, Some(timeout))
    }

    /// Like [`wait_readable`](Async::wait_readable), giving up at `deadline` with
    /// `ErrorKind::TimedOut` (a deadline in the past still reports a descriptor that is
    /// ready now).
    ///
    /// # Errors
    /// As `wait_readable`, or the deadline.
    pub fn wait_readable_deadline(&self, deadline: Instant) -> io::Result<()> {
        self.wait(Direction::Read, Some(deadline.saturating_duration_since(Instant::now())))
    }

    /// Parks until the descriptor is writable (returns at once if it is writable now).
    ///
    /// # Errors
    /// The `Async` was [`close`](Async::close)d, or `poll(2)` failed.
    ///
    /// # Examples
    ///
    /// ```
    /// let (_r, w) = std::io::pipe().unwrap();
    /// let w = purloin::io::Async::new(w).unwrap();
    /// w.wait_writable().unwrap(); // an empty pipe is writable
    /// ```
    pub fn wait_writable(&self) -> io::Result<()> {
        self.wait(Direction::Write, None)
    }

    /// Like [`wait_writable`](Async::wait_writable), giving up after `timeout` with
    /// `ErrorKind::TimedOut`.
    ///
    /// # Errors
    /// As `wait_writable`, or the timeout.
    pub fn wait_writable_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.wait(Direction::Write, Some(timeout))
    }

    /// Like [`wait_writable`](Async::wait_writable), giving up at `deadline` with
    /// `ErrorKind::TimedOut`.
    ///
    /// # Errors
    /// As `wait_writable`, or the deadline.
    pub fn wait_writable_deadline(&self, deadline: Instant) -> io::Result<()> {
        self.wait(Direction::Write, Some(deadline.saturating_duration_since(Instant::now())))
    }

    fn wait(&self, dir: Direction, timeout: Option<Duration>) -> io::Result<()> {
        let fd = self.src.get().as_raw_fd();
        match timeout {
            // Already past: one look, no wait.
            Some(t) if t.is_zero() => ready_now(fd, dir).map_err(|e| {
                if e.kind() == io::ErrorKind::WouldBlock { timed_out(dir) } else { e }
            }),
            _ => self
                .src
                .op(dir, timeout, |_| ready_now(fd, dir))
                .map_err(|e| if e.kind() == io::ErrorKind::TimedOut { timed_out(dir) } else { e }),
        }
    }

    /// Runs `op` until it returns something other than `WouldBlock`, parking for readability
    /// in between (for at most the read timeout). `op` must return `WouldBlock` only when the
    /// OS did (the re-arm rule in the [module docs](self)).
    ///
    /// # Errors
    /// `op`'s error, `TimedOut` after the read timeout, or the `Async` was closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use purloin::io::Async;
    ///
    /// let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let (r, w) = std::io::pipe().unwrap();
    ///     let r = Async::new(r).unwrap();
    ///     let writer = purloin::spawn(move || {
    ///         let mut w = w;
    ///         w.write_all(b"hi").unwrap();
    ///     });
    ///     let mut buf = [0u8; 2];
    ///     let n = r.read_with(|mut p| p.read(&mut buf)).unwrap();
    ///     assert!(n > 0);
    ///     writer.join().unwrap();
    /// });
    /// ```
    pub fn read_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.src.read_op(op)
    }

    /// Runs `op` until it returns something other than `WouldBlock`, parking for writability
    /// in between (for at most the write timeout).
    ///
    /// # Errors
    /// `op`'s error, `TimedOut` after the write timeout, or the `Async` was closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    /// let (_r, w) = std::io::pipe().unwrap();
    /// let w = purloin::io::Async::new(w).unwrap();
    /// assert_eq!(w.write_with(|mut p| p.write(b"abc")).unwrap(), 3);
    /// ```
    pub fn write_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.src.write_op(op)
    }

    /// Sets the timeout of [`read_with`](Async::read_with) and [`Read`] (`None`: wait
    /// forever). Timed-out calls end with `ErrorKind::TimedOut`.
    ///
    /// # Errors
    /// `Some(Duration::ZERO)` is `InvalidInput`, like std sockets.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.src.set_read_timeout(timeout)
    }

    /// Sets the timeout of [`write_with`](Async::write_with) and [`Write`].
    ///
    /// # Errors
    /// `Some(Duration::ZERO)` is `InvalidInput`.
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.src.set_write_timeout(timeout)
    }

    /// Ends every wait on this `Async` (theirs and later calls fail with an error that
    /// [`SocketClosed::is`](crate::net::SocketClosed::is) recognises). For a socket it also
    /// shuts the socket down. The descriptor is closed when the `Async` drops.
    pub fn close(&self) {
        self.src.close();
    }
}

fn timed_out(dir: Direction) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        match dir {
            Direction::Read => {
                "purloin::io: waiting for the descriptor to become readable timed out; retry, \
                 or wait longer"
            }
            Direction::Write => {
                "purloin::io: waiting for the descriptor to become writable timed out; retry, \
                 or wait longer"
            }
        },
    )
}

/// epoll refuses regular files and directories (`EPERM`: they are always ready); say so at
/// construction instead of at the first wait.
fn refuse_regular_file(fd: RawFd) -> io::Result<()> {
    // SAFETY: `stat` is plain old data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is valid for writes; an invalid descriptor is reported as EBADF.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let kind = st.st_mode & libc::S_IFMT;
    if kind == libc::S_IFREG || kind == libc::S_IFDIR {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "purloin::io::Async::new: regular files and directories cannot be polled (epoll \
             refuses them: they are always ready); use purloin::fs, which runs file I/O inside \
             purloin::blocking",
        ));
    }
    Ok(())
}

/// Sets `O_NONBLOCK` on `fd` (one `fcntl` when it is already set: `F_GETFL` only). Errors
/// are the OS error unchanged: an `io::Error` with a message of its own would drop
/// `raw_os_error`, which callers match on.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain system call; an invalid descriptor is reported as EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK == 0 {
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl<T: AsRawFd> Read for Async<T>
where
    for<'a> &'a T: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        (&*self).read_vectored(bufs)
    }
}

impl<T: AsRawFd> Read for &Async<T>
where
    for<'a> &'a T: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.src.read_op(|mut t| t.read(buf))
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        self.src.read_op(|mut t| t.read_vectored(bufs))
    }
}

impl<T: AsRawFd> Write for Async<T>
where
    for<'a> &'a T: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

impl<T: AsRawFd> Write for &Async<T>
where
    for<'a> &'a T: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.src.write_op(|mut t| t.write(buf))
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.src.write_op(|mut t| t.write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.src.write_op(|mut t| t.flush())
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for Async<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Async").field(self.src.get()).finish()
    }
}

impl<T: AsRawFd> AsRawFd for Async<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.src.get().as_raw_fd()
    }
}

impl<T: AsRawFd + AsFd> AsFd for Async<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.src.get().as_fd()
    }
}
