//! Networking for green threads: [`TcpListener`], [`TcpStream`], [`UdpSocket`] and the Unix
//! domain sockets [`UnixListener`], [`UnixStream`] and [`UnixDatagram`] with the std API,
//! whose blocking-style operations park only the calling green thread until the runtime's
//! netpoller reports the socket ready (Go's netpoll). Any other descriptor gets the same
//! through [`io::Async`](crate::io::Async).
//!
//! Write a server the simple way — one green thread per connection, blocking reads and
//! writes — and it scales like an event loop: a green thread waiting for a socket costs its
//! stack and a few words, not an OS thread.
//!
//! ```
//! use std::io::{Read, Write};
//! use purloin::net::{TcpListener, TcpStream};
//!
//! let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
//! rt.block_on(|| {
//!     // An echo server: one green thread per connection.
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     purloin::spawn(move || {
//!         for conn in listener.incoming() {
//!             let mut conn = conn.unwrap();
//!             purloin::spawn(move || {
//!                 let mut buf = [0u8; 1024];
//!                 loop {
//!                     match conn.read(&mut buf) {
//!                         Ok(0) | Err(_) => return,
//!                         Ok(n) => conn.write_all(&buf[..n]).unwrap(),
//!                     }
//!                 }
//!             });
//!         }
//!     });
//!     // 100 clients at once.
//!     let clients: Vec<_> = (0..100u32)
//!         .map(|i| {
//!             purloin::spawn(move || {
//!                 let mut c = TcpStream::connect(addr).unwrap();
//!                 let msg = i.to_le_bytes();
//!                 c.write_all(&msg).unwrap();
//!                 let mut back = [0u8; 4];
//!                 c.read_exact(&mut back).unwrap();
//!                 assert_eq!(back, msg);
//!             })
//!         })
//!         .collect();
//!     for c in clients {
//!         c.join().unwrap();
//!     }
//! });
//! ```
//!
//! # How it works
//!
//! Each runtime has one netpoller: an epoll instance (edge-triggered, each socket registered
//! once for both directions) plus an eventfd to interrupt a blocked `epoll_wait`. The
//! scheduler calls it in its find-work loop (local queue, global queue, **netpoller**,
//! steal): without blocking in every search, and — when workers run out of work — one worker
//! blocks in it with a deadline equal to its next timer while the others sleep on their
//! parking lots; a submission from anywhere wakes it through the eventfd.
//!
//! Every socket is non-blocking underneath. An operation tries the syscall; on `WouldBlock`
//! the green thread registers as a waiter of that socket's read or write side and parks; the
//! edge that makes the socket ready unparks it, and it retries. A sequence number per side,
//! snapshotted *before* the syscall, makes sure an edge that arrives between "the syscall
//! said `WouldBlock`" and "the green thread parked" is never lost, and each edge wakes one
//! waiter that registered before it (many green threads may accept on one listener without a
//! thundering herd; whoever finishes an operation passes the baton to the next waiter).
//! A stream read or write that moves fewer bytes than asked marks its side drained, so the
//! next call parks without first making a syscall that would say `WouldBlock` (one syscall
//! per request saved in a request/response loop, tokio's rule) — unless the kernel already
//! reported an end-of-file, hang-up or error, which stays readable without a new edge.
//! Sockets register lazily, with the runtime of the first green thread that has to wait.
//!
//! Outside a runtime (a plain OS thread), the same types block like std sockets (`poll(2)`
//! on the descriptor). A socket used from a green thread of *another* runtime than the one
//! it registered with still works, but each wait blocks a worker thread (inside
//! [`blocking`](crate::blocking)): keep a socket within one runtime.
//!
//! # Differences from std
//!
//! - Timeouts end an operation with `ErrorKind::TimedOut` (std on Unix: `WouldBlock`), and
//!   they are per handle (a clone starts with a copy), not socket options.
//! - `set_nonblocking` is a flag of the handle; the descriptor is always non-blocking.
//! - [`TcpStream::close`], [`TcpListener::close`] and [`UdpSocket::close`] close a socket
//!   that other green threads use (Go's `Close`): their waits end with an error that
//!   [`SocketClosed::is`] recognises.
//! - The listen backlog is the kernel maximum (`net.core.somaxconn`), like Go.
//!
//! # Why epoll through libc, not mio or polling
//!
//! The poller is about 300 lines of direct epoll, and the scheduler needs things the crates
//! shape differently: any worker may poll at any time through `&self` (mio's `Poll::poll`
//! takes `&mut self`, so it needs one owner or a lock around every poll), registrations are
//! edge-triggered once for the socket's lifetime (polling's default oneshot mode re-arms with
//! an `epoll_ctl` per wait, a second syscall per blocking read), the waker must be
//! level-triggered so a non-blocking poll cannot consume the wake-up meant for the blocked
//! worker, and under loom the selector is swapped for a model so the scheduler and the
//! poller are checked together. It is also one dependency fewer (libc is already used).
//!
//! # Platforms
//!
//! Linux only (epoll; `epoll_pwait2` for sub-millisecond poll deadlines on Linux 5.11+, with
//! a millisecond fallback). kqueue and IOCP backends would slot in behind `selector.rs`.
//!
//! # Loom
//!
//! `cargo xtask loom -p purloin` runs this module's models (about a minute in all): the
//! per-socket readiness protocol (`readiness.rs`: a waiter racing an edge, an edge's data
//! seen through the snapshot, the baton between two waiters, a slow poller's stale edge
//! against a newer registration, close while waiting), the eventfd wake-up protocol against
//! a blocking poll over several rounds, and the poller inside a real one-worker runtime
//! (`driver_loom.rs`: I/O readiness delivered to a parked green thread, a submission while
//! the worker blocks in the poller). Each model's comment names the mutation that makes it
//! fail. Run only these with `cargo xtask loom -p purloin net::`.

use std::fmt;
use std::io;
use std::sync::Arc;

mod driver;
#[cfg(all(test, loom))]
mod driver_loom;
mod readiness;
#[cfg(not(loom))]
mod selector;
#[cfg(loom)]
mod selector_loom;
mod socket;
pub(crate) mod source;
pub(crate) mod sys;
mod tcp;
mod udp;
mod unix;

pub(crate) use driver::{Direction, Driver};
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};

#[cfg(not(any(target_os = "linux", loom)))]
compile_error!(
    "purloin::net supports Linux only (epoll); kqueue (macOS, the BSDs) and IOCP (Windows) \
     backends are not written yet"
);

/// The error inside the `io::Error` (kind `NotConnected`) returned by operations on a socket
/// that was closed with `close` — including the operations that were waiting when it was
/// closed.
///
/// # Examples
///
/// ```
/// use purloin::net::{SocketClosed, UdpSocket};
///
/// let s = UdpSocket::bind("127.0.0.1:0").unwrap();
/// s.close();
/// let err = s.recv(&mut [0u8; 8]).unwrap_err();
/// assert!(SocketClosed::is(&err));
/// assert_eq!(err.kind(), std::io::ErrorKind::NotConnected);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketClosed(());

impl SocketClosed {
    /// Whether `err` reports an operation on a closed socket.
    pub fn is(err: &io::Error) -> bool {
        err.get_ref().is_some_and(|e| e.is::<SocketClosed>())
    }
}

impl fmt::Display for SocketClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the socket was closed with close() (by this or another green thread); stop using \
             it, or check SocketClosed::is to end a loop",
        )
    }
}

impl std::error::Error for SocketClosed {}

/// Installs the runtime's netpoller into `sched` (called once when a runtime is built) and
/// returns it for the runtime's data.
///
/// Under loom the driver is created but not installed: the models of other modules keep
/// exploring the parking-lot path they were written for, and this module's models install
/// it themselves (`driver_loom.rs`).
pub(crate) fn install(sched: &purloin_sched::Scheduler) -> io::Result<Arc<Driver>> {
    let driver = Arc::new(Driver::new()?);
    #[cfg(not(loom))]
    sched.set_poller(Arc::new(driver::SchedPoller(driver.clone())));
    #[cfg(loom)]
    let _ = sched;
    Ok(driver)
}
