//! Child processes for green threads: spawn a [`std::process::Command`], talk to it through
//! its pipes, and wait for it — parking only the calling green thread.
//!
//! ```
//! use std::io::Read;
//! use std::process::{Command, Stdio};
//!
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     let mut child = purloin::process::spawn(
//!         Command::new("sh").args(["-c", "echo hello; exit 3"]).stdout(Stdio::piped()),
//!     )
//!     .unwrap();
//!     let mut out = String::new();
//!     child.stdout.take().unwrap().read_to_string(&mut out).unwrap(); // parks
//!     let status = child.wait().unwrap(); // parks
//!     assert_eq!(out, "hello\n");
//!     assert_eq!(status.code(), Some(3));
//! });
//! ```
//!
//! (Looking for the stackless state machines that used to live here? They are in
//! [`purloin::machine`](crate::machine).)
//!
//! # How waiting works
//!
//! On Linux 5.3 and later, [`spawn`] opens a *pidfd* for the child (`pidfd_open`): a
//! descriptor that becomes readable when the child exits. [`Child::wait`] parks on it through
//! the netpoller like on a socket (an [`Async`]), then reaps the child with `waitpid`. No
//! thread, no SIGCHLD handler, no polling.
//!
//! On older kernels (or where a seccomp filter refuses `pidfd_open`), [`Child::wait`] calls
//! std's blocking `wait` inside [`blocking`](crate::blocking): the worker's other green
//! threads move to another worker while this OS thread waits, so nothing stalls, but each
//! waiting child holds an OS thread. [`Child::wait_timeout`] there checks
//! [`try_wait`](Child::try_wait) with sleeps that grow from 1 to 50 ms.
//!
//! Spawning itself (`fork`/`exec`, which std does with `posix_spawn` or `clone` and which can
//! take milliseconds for a large parent) runs inside [`blocking`](crate::blocking) too.
//!
//! # Pipes
//!
//! With `Stdio::piped()`, [`Child::stdin`], [`Child::stdout`] and [`Child::stderr`] are
//! green I/O: reads and writes park the green thread (they are [`Async`] pipes). Read
//! stdout and stderr from different green threads, or use [`Child::wait_with_output`],
//! so a child that fills one pipe while you wait on the other cannot deadlock.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Command, ExitStatus, Output};
use std::time::{Duration, Instant};

use crate::io::Async;

/// Spawns `command`, its pipes as green I/O and its exit awaitable without blocking a
/// worker.
///
/// # Errors
/// std's spawn error: for example `NotFound` (with the OS error `ENOENT`) when the program
/// does not exist; the open-file limit when the pipes cannot be created.
///
/// # Examples
///
/// ```
/// use std::process::Command;
/// let mut child = purloin::process::spawn(&mut Command::new("true")).unwrap();
/// assert!(child.wait().unwrap().success());
///
/// let err = purloin::process::spawn(&mut Command::new("no-such-program-xyz")).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// ```
pub fn spawn(command: &mut Command) -> io::Result<Child> {
    let mut child = crate::blocking(|| command.spawn())?;
    let pidfd = pidfd_open(child.id());
    let stdin = child.stdin.take().map(|p| pipe(p.into())).transpose()?.map(ChildStdin);
    let stdout = child.stdout.take().map(|p| pipe(p.into())).transpose()?.map(ChildStdout);
    let stderr = child.stderr.take().map(|p| pipe(p.into())).transpose()?.map(ChildStderr);
    Ok(Child { inner: child, pidfd, stdin, stdout, stderr })
}

/// Runs `command` to completion and collects its output (stdout and stderr piped, stdin
/// null unless set), like [`Command::output`], parking instead of blocking.
///
/// # Errors
/// As [`spawn`], or reading the pipes failed.
///
/// # Examples
///
/// ```
/// use std::process::Command;
/// let out = purloin::process::output(Command::new("echo").arg("hi")).unwrap();
/// assert_eq!(out.stdout, b"hi\n");
/// assert!(out.status.success());
/// ```
pub fn output(command: &mut Command) -> io::Result<Output> {
    command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    spawn(command)?.wait_with_output()
}

/// Runs `command` to completion (inheriting stdio) and returns its exit status, like
/// [`Command::status`], parking instead of blocking.
///
/// # Errors
/// As [`spawn`].
pub fn status(command: &mut Command) -> io::Result<ExitStatus> {
    spawn(command)?.wait()
}

fn pipe(fd: OwnedFd) -> io::Result<Async<File>> {
    Async::new(File::from(fd))
}

/// A pidfd for `pid`, registered lazily with the netpoller; `None` when the kernel has no
/// `pidfd_open` (before 5.3) or refuses it.
fn pidfd_open(pid: u32) -> Option<Async<OwnedFd>> {
    // SAFETY: plain system call; the result is checked. `pid` is our unreaped child, so the
    // number cannot have been reused.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a fresh descriptor we own (pidfds are close-on-exec).
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    Async::new(fd).ok()
}

/// A running or exited child process (see the [module docs](self)).
///
/// Like [`std::process::Child`], dropping it neither kills nor reaps the child: call
/// [`wait`](Child::wait) (or [`kill`](Child::kill), then `wait`), or the exited child stays
/// a zombie until the parent exits.
pub struct Child {
    inner: std::process::Child,
    pidfd: Option<Async<OwnedFd>>,
    /// The child's stdin, if it was `Stdio::piped()`. Dropping it closes the pipe (the
    /// child reads end-of-file).
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, if it was `Stdio::piped()`.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, if it was `Stdio::piped()`.
    pub stderr: Option<ChildStderr>,
}

impl Child {
    /// The OS process id.
    pub fn id(&self) -> u32 {
        self.inner.id()
    }

    /// Whether waiting goes through a pidfd and the netpoller (Linux 5.3+) rather than the
    /// fallback (see the [module docs](self)).
    pub fn has_pidfd(&self) -> bool {
        self.pidfd.is_some()
    }

    /// Sends SIGKILL (nothing happens if the child has already exited and been reaped).
    ///
    /// # Errors
    /// The OS refused the signal.
    pub fn kill(&mut self) -> io::Result<()> {
        self.inner.kill()
    }

    /// The exit status if the child has exited (reaping it), without waiting.
    ///
    /// # Errors
    /// `waitpid` failed (`ECHILD` when something else reaped the child).
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.inner.try_wait()
    }

    /// Waits for the child to exit, parking the green thread (blocking a plain OS thread).
    /// Closes stdin first (like std), so a child reading it sees end-of-file.
    ///
    /// # Errors
    /// `waitpid` or the pidfd wait failed.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        match self.wait_until(None)? {
            Some(status) => Ok(status),
            None => unreachable!("a wait without a deadline ends with a status"),
        }
    }

    /// Waits at most `timeout` for the child to exit: `Ok(None)` if it is still running.
    /// Does not close stdin.
    ///
    /// # Errors
    /// As [`wait`](Child::wait).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::process::Command;
    /// use std::time::Duration;
    ///
    /// let mut child = purloin::process::spawn(Command::new("sleep").arg("30")).unwrap();
    /// assert!(child.wait_timeout(Duration::from_millis(10)).unwrap().is_none());
    /// child.kill().unwrap();
    /// assert!(!child.wait().unwrap().success());
    /// ```
    pub fn wait_timeout(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        self.wait_until(Some(Instant::now().checked_add(timeout).unwrap_or_else(far_future)))
    }

    /// Waits until `deadline` for the child to exit: `Ok(None)` if it is still running.
    ///
    /// # Errors
    /// As [`wait`](Child::wait).
    pub fn wait_deadline(&mut self, deadline: Instant) -> io::Result<Option<ExitStatus>> {
        self.wait_until(Some(deadline))
    }

    fn wait_until(&mut self, deadline: Option<Instant>) -> io::Result<Option<ExitStatus>> {
        let mut backoff = Duration::from_millis(1);
        loop {
            if let Some(status) = self.inner.try_wait()? {
                return Ok(Some(status));
            }
            match (&self.pidfd, deadline) {
                (Some(fd), None) => fd.wait_readable()?,
                (Some(fd), Some(d)) => match fd.wait_readable_deadline(d) {
                    Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                        return self.inner.try_wait();
                    }
                    r => r?,
                },
                (None, None) => {
                    let inner = &mut self.inner;
                    return crate::blocking(|| inner.wait()).map(Some);
                }
                (None, Some(d)) => {
                    let now = Instant::now();
                    if now >= d {
                        return Ok(None);
                    }
                    crate::sleep(backoff.min(d - now));
                    backoff = (backoff * 2).min(Duration::from_millis(50));
                }
            }
        }
    }

    /// Closes stdin, reads stdout and stderr to the end (concurrently) and waits, like
    /// [`std::process::Child::wait_with_output`].
    ///
    /// # Errors
    /// Reading a pipe or waiting failed.
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let stderr = self.stderr.take().map(|mut e| {
            let read = move || {
                let mut buf = Vec::new();
                e.read_to_end(&mut buf).map(|_| buf)
            };
            if crate::in_green_thread() {
                Reader::Green(crate::spawn(read))
            } else {
                Reader::Thread(std::thread::spawn(read))
            }
        });
        let mut stdout = Vec::new();
        if let Some(mut o) = self.stdout.take() {
            o.read_to_end(&mut stdout)?;
        }
        let stderr = match stderr {
            None => Vec::new(),
            Some(Reader::Green(h)) => h.join().map_err(reader_panicked)??,
            Some(Reader::Thread(h)) => h.join().map_err(reader_panicked)??,
        };
        let status = self.wait()?;
        Ok(Output { status, stdout, stderr })
    }
}

enum Reader {
    Green(crate::JoinHandle<io::Result<Vec<u8>>>),
    Thread(std::thread::JoinHandle<io::Result<Vec<u8>>>),
}

fn reader_panicked<E>(_: E) -> io::Error {
    io::Error::other("purloin::process: the thread reading the child's stderr panicked")
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("id", &self.id())
            .field("pidfd", &self.pidfd.is_some())
            .field("stdin", &self.stdin)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .finish()
    }
}

/// The writable end of a child's stdin pipe (green I/O: a full pipe parks the writer).
#[derive(Debug)]
pub struct ChildStdin(Async<File>);

/// The readable end of a child's stdout pipe (green I/O: an empty pipe parks the reader).
#[derive(Debug)]
pub struct ChildStdout(Async<File>);

/// The readable end of a child's stderr pipe (green I/O).
#[derive(Debug)]
pub struct ChildStderr(Async<File>);

impl Write for ChildStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &ChildStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&self.0).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

macro_rules! pipe_common {
    ($($t:ident),*) => {$(
        impl $t {
            /// The pipe as an [`Async`] (for `wait_readable`/`wait_writable` with timeouts).
            pub fn as_async(&self) -> &Async<File> {
                &self.0
            }

            /// The pipe's descriptor as an `OwnedFd` (it stays non-blocking), e.g. to pass
            /// to another child's `Stdio`.
            pub fn into_owned_fd(self) -> OwnedFd {
                self.0.into_inner().into()
            }
        }

        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.0.as_raw_fd()
            }
        }

        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.0.as_fd()
            }
        }
    )*};
}

pipe_common!(ChildStdin, ChildStdout, ChildStderr);

macro_rules! pipe_read {
    ($($t:ident),*) => {$(
        impl Read for $t {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.0.read(buf)
            }
        }

        impl Read for &$t {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                (&self.0).read(buf)
            }
        }
    )*};
}

pipe_read!(ChildStdout, ChildStderr);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The path for kernels without `pidfd_open` (forced here by dropping the pidfd): the
    /// timed wait polls `try_wait`, the untimed one waits inside `blocking`.
    #[test]
    fn fallback_without_pidfd() {
        let rt = crate::runtime::Builder::new().workers(1).build().unwrap();
        rt.block_on(|| {
            let mut child = spawn(Command::new("sleep").arg("60")).unwrap();
            child.pidfd = None;
            assert!(!child.has_pidfd());
            assert_eq!(child.wait_timeout(Duration::from_millis(5)).unwrap(), None);
            child.kill().unwrap();
            assert!(!child.wait().unwrap().success());
            let mut quick = spawn(&mut Command::new("true")).unwrap();
            quick.pidfd = None;
            let status = quick.wait_timeout(Duration::from_secs(60)).unwrap();
            assert!(status.is_some_and(|s| s.success()));
        });
    }
}
