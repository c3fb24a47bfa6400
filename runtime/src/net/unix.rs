//! Unix domain sockets: [`UnixListener`], [`UnixStream`] and [`UnixDatagram`].
//!
//! The std types (`std::os::unix::net`) in non-blocking mode inside the same [`Source`] loop
//! as TCP and UDP. Addresses are std's [`SocketAddr`]: a path, an unnamed socket, or on Linux
//! an abstract name (`std::os::linux::net::SocketAddrExt::from_abstract_name`, used with the
//! `*_addr` functions).
//!
//! Connecting to a Unix socket completes at once unless the listener's backlog is full, so
//! [`UnixStream::connect`] runs std's connect inside [`blocking`](crate::blocking) (free
//! when it does not block; when the backlog is full, the worker's other green threads move
//! to another worker while it waits).

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::driver::Direction;
use super::socket::{connection, datagram, listener, socket, stream};
use super::source::Source;
use super::sys;

type StdListener = std::os::unix::net::UnixListener;
type StdStream = std::os::unix::net::UnixStream;
type StdDatagram = std::os::unix::net::UnixDatagram;

/// A Unix domain socket server, listening for connections.
///
/// Like [`std::os::unix::net::UnixListener`], except that [`accept`](UnixListener::accept) on
/// a green thread parks only the green thread. Any number of green threads may accept on one
/// listener. On a plain OS thread it blocks like the std listener. Dropping the listener does
/// not remove its socket file (std does not either): remove it yourself.
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use purloin::net::{UnixListener, UnixStream};
///
/// let dir = std::env::temp_dir().join(format!("purloin-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("echo.sock");
/// let _ = std::fs::remove_file(&path);
///
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let listener = UnixListener::bind(&path).unwrap();
///     let server = purloin::spawn(move || {
///         let (mut s, _) = listener.accept().unwrap();
///         let mut buf = [0u8; 5];
///         s.read_exact(&mut buf).unwrap();
///         s.write_all(&buf).unwrap();
///     });
///     let mut c = UnixStream::connect(&path).unwrap();
///     c.write_all(b"hello").unwrap();
///     let mut back = [0u8; 5];
///     c.read_exact(&mut back).unwrap();
///     assert_eq!(&back, b"hello");
///     server.join().unwrap();
/// });
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub struct UnixListener {
    src: Source<StdListener>,
}

/// An iterator over the connections of a [`UnixListener`] (see [`UnixListener::incoming`]).
/// It never returns `None`.
#[derive(Debug)]
pub struct UnixIncoming<'a> {
    listener: &'a UnixListener,
}

impl UnixListener {
    /// Creates a listener bound to the socket file `path` (which must not exist).
    ///
    /// # Errors
    /// The path is too long for a `sockaddr_un` (`InvalidInput`), exists (`AddrInUse`: remove
    /// a stale socket file first), or its directory is missing or not writable; the OS error
    /// is kept.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        UnixListener::from_std(StdListener::bind(path)?)
    }

    /// Creates a listener bound to `addr` (for example an abstract name on Linux).
    ///
    /// # Errors
    /// As [`bind`](UnixListener::bind); `AddrInUse` when the abstract name is taken.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::linux::net::SocketAddrExt;
    /// use std::os::unix::net::SocketAddr;
    /// use purloin::net::{UnixListener, UnixStream};
    ///
    /// let name = format!("purloin-doc-abstract-{}", std::process::id());
    /// let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    /// let listener = UnixListener::bind_addr(&addr).unwrap();
    /// let client = UnixStream::connect_addr(&addr).unwrap();
    /// let (_server_side, _) = listener.accept().unwrap();
    /// assert_eq!(client.peer_addr().unwrap().as_abstract_name(), Some(name.as_bytes()));
    /// ```
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        UnixListener::from_std(StdListener::bind_addr(addr)?)
    }

    /// Accepts a connection, parking the green thread (or blocking the OS thread) until one
    /// arrives.
    ///
    /// # Errors
    /// The listener was [`close`](UnixListener::close)d ([`SocketClosed`](super::SocketClosed)),
    /// it is in non-blocking mode and no connection is pending (`WouldBlock`), or the OS
    /// refused (for example the open-file limit: the OS error, `EMFILE`, is returned as it
    /// is, and the cause and fix are printed to stderr once).
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (s, addr) = self.src.read_op(|l| l.accept()).map_err(|e| sys::explain(e, "accept"))?;
        Ok((UnixStream::from_std(s)?, addr))
    }
}

socket!(UnixListener, StdListener, SocketAddr);
listener!(UnixListener, UnixIncoming, UnixStream);

/// A connected Unix stream socket.
///
/// Like [`std::os::unix::net::UnixStream`] — [`Read`] and [`Write`] for `UnixStream` and
/// `&UnixStream`, [`pair`](UnixStream::pair), [`shutdown`](UnixStream::shutdown), timeouts,
/// [`try_clone`](UnixStream::try_clone) — except that on a green thread a read or write that
/// would block parks the green thread. On a plain OS thread it blocks like std. Timeouts end
/// a call with `ErrorKind::TimedOut` (std: `WouldBlock`) and belong to the handle.
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use purloin::net::UnixStream;
///
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let (mut a, mut b) = UnixStream::pair().unwrap();
///     let peer = purloin::spawn(move || {
///         let mut buf = [0u8; 4];
///         b.read_exact(&mut buf).unwrap();
///         b.write_all(&buf).unwrap();
///     });
///     a.write_all(b"ping").unwrap();
///     let mut back = [0u8; 4];
///     a.read_exact(&mut back).unwrap();
///     assert_eq!(&back, b"ping");
///     peer.join().unwrap();
/// });
/// ```
pub struct UnixStream {
    src: Source<StdStream>,
}

impl UnixStream {
    /// Connects to the socket file `path`.
    ///
    /// # Errors
    /// Nobody listens there (`NotFound` or `ConnectionRefused`; the OS error is kept), or the
    /// path is too long for a `sockaddr_un` (`InvalidInput`).
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        UnixStream::connect_addr(&SocketAddr::from_pathname(path)?)
    }

    /// Connects to `addr` (for example an abstract name on Linux).
    ///
    /// # Errors
    /// As [`connect`](UnixStream::connect).
    pub fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        let s = crate::blocking(|| StdStream::connect_addr(addr))
            .map_err(|e| sys::explain(e, "connect"))?;
        UnixStream::from_std(s)
    }

    /// A connected pair of anonymous sockets (`socketpair(2)`).
    ///
    /// # Errors
    /// The open-file limit (the OS error, `EMFILE`, as it is; the cause and fix are printed
    /// to stderr once).
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = StdStream::pair().map_err(|e| sys::explain(e, "socketpair"))?;
        Ok((UnixStream::from_std(a)?, UnixStream::from_std(b)?))
    }
}

socket!(UnixStream, StdStream, SocketAddr);
connection!(UnixStream, SocketAddr);
stream!(UnixStream);

/// A Unix datagram socket.
///
/// Like [`std::os::unix::net::UnixDatagram`], except that on a green thread a receive (or a
/// send to a full peer) parks only the green thread. On a plain OS thread it blocks like std.
///
/// # Examples
///
/// ```
/// use purloin::net::UnixDatagram;
///
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let (a, b) = UnixDatagram::pair().unwrap();
///     let receiver = purloin::spawn(move || {
///         let mut buf = [0u8; 16];
///         let n = b.recv(&mut buf).unwrap();
///         buf[..n].to_vec()
///     });
///     a.send(b"datagram").unwrap();
///     assert_eq!(receiver.join().unwrap(), b"datagram");
/// });
/// ```
pub struct UnixDatagram {
    src: Source<StdDatagram>,
}

impl UnixDatagram {
    /// A socket bound to the socket file `path`.
    ///
    /// # Errors
    /// As [`UnixListener::bind`].
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixDatagram> {
        UnixDatagram::from_std(StdDatagram::bind(path)?)
    }

    /// A socket bound to `addr` (for example an abstract name on Linux).
    ///
    /// # Errors
    /// As [`UnixListener::bind_addr`].
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixDatagram> {
        UnixDatagram::from_std(StdDatagram::bind_addr(addr)?)
    }

    /// A socket bound to no address (it can send, and receive once connected or from a
    /// peer that knows it through a pair).
    ///
    /// # Errors
    /// The open-file limit (the OS error, `EMFILE`, as it is; the cause and fix are printed
    /// to stderr once).
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::from_std(StdDatagram::unbound().map_err(|e| sys::explain(e, "socket"))?)
    }

    /// A connected pair of anonymous datagram sockets.
    ///
    /// # Errors
    /// The open-file limit (the OS error, `EMFILE`, as it is; the cause and fix are printed
    /// to stderr once).
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = StdDatagram::pair().map_err(|e| sys::explain(e, "socketpair"))?;
        Ok((UnixDatagram::from_std(a)?, UnixDatagram::from_std(b)?))
    }

    /// Sets the default destination of [`send`](UnixDatagram::send) and the only source
    /// [`recv`](UnixDatagram::recv) accepts.
    ///
    /// # Errors
    /// Nobody is bound at `path` (the OS error is kept).
    pub fn connect<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        self.src.get().connect(path)
    }

    /// [`connect`](UnixDatagram::connect) to an address (for example an abstract name).
    ///
    /// # Errors
    /// As `connect`.
    pub fn connect_addr(&self, addr: &SocketAddr) -> io::Result<()> {
        self.src.get().connect_addr(addr)
    }

    /// Sends to the socket file `path`, waiting while its receive queue is full.
    pub fn send_to<P: AsRef<Path>>(&self, buf: &[u8], path: P) -> io::Result<usize> {
        let addr = SocketAddr::from_pathname(path)?;
        self.send_to_addr(buf, &addr)
    }

    /// Sends to `addr`, waiting while its receive queue is full.
    pub fn send_to_addr(&self, buf: &[u8], addr: &SocketAddr) -> io::Result<usize> {
        self.src.write_op(|s| s.send_to_addr(buf, addr))
    }

    /// Shuts down the read side, the write side or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.src.get().shutdown(how)
    }
}

socket!(UnixDatagram, StdDatagram, SocketAddr);
connection!(UnixDatagram, SocketAddr);
datagram!(UnixDatagram, SocketAddr);
