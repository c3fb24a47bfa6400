//! TCP: [`TcpListener`] and [`TcpStream`].

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use super::driver::Direction;
use super::socket::{connection, listener, socket, stream, ttl};
use super::source::{Source, ready_now};
use super::sys;

/// A TCP socket server, listening for connections.
///
/// Like [`std::net::TcpListener`], except that [`accept`](TcpListener::accept) on a green
/// thread parks only the green thread: its worker runs other green threads until a
/// connection arrives. Any number of green threads may accept on one listener (share it by
/// reference or in an `Arc`); each connection wakes one of them. On a plain OS thread it
/// blocks like a std listener.
///
/// The backlog is the kernel's maximum (`net.core.somaxconn`), not std's 128.
///
/// # Examples
///
/// ```
/// use std::io::{Read, Write};
/// use purloin::net::{TcpListener, TcpStream};
///
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
///     let addr = listener.local_addr().unwrap();
///     let server = purloin::spawn(move || {
///         let (mut s, _) = listener.accept().unwrap();
///         let mut buf = [0u8; 5];
///         s.read_exact(&mut buf).unwrap();
///         s.write_all(&buf).unwrap();
///     });
///     let mut c = TcpStream::connect(addr).unwrap();
///     c.write_all(b"hello").unwrap();
///     let mut back = [0u8; 5];
///     c.read_exact(&mut back).unwrap();
///     assert_eq!(&back, b"hello");
///     server.join().unwrap();
/// });
/// ```
///
/// Stopping an accept loop from another green thread with [`close`](TcpListener::close):
///
/// ```
/// use std::sync::Arc;
/// use purloin::net::{SocketClosed, TcpListener};
///
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
///     let l2 = listener.clone();
///     let acceptor = purloin::spawn(move || l2.accept().map(|_| ()));
///     purloin::sleep(std::time::Duration::from_millis(10));
///     listener.close();
///     let err = acceptor.join().unwrap().unwrap_err();
///     assert!(SocketClosed::is(&err));
/// });
/// ```
pub struct TcpListener {
    src: Source<std::net::TcpListener>,
}

/// An iterator over the connections of a [`TcpListener`] (see [`TcpListener::incoming`]).
/// It never returns `None`.
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl TcpListener {
    /// Creates a listener bound to `addr` (each resolved address is tried in turn; the first
    /// that binds is used). Port 0 asks the OS for a free port: see
    /// [`local_addr`](TcpListener::local_addr).
    ///
    /// # Errors
    /// Resolution failed, or no address could be bound (the last error is returned).
    ///
    /// # Examples
    ///
    /// ```
    /// let listener = purloin::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// assert_ne!(listener.local_addr().unwrap().port(), 0);
    /// ```
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        let addrs = sys::resolve(addr)?;
        let fd = sys::each_addr(&addrs, sys::listen)?;
        Ok(TcpListener::from_fd(fd))
    }

    fn from_fd(fd: OwnedFd) -> TcpListener {
        TcpListener { src: Source::new(std::net::TcpListener::from(fd)) }
    }

    /// Accepts a connection, parking the green thread (or blocking the OS thread) until one
    /// arrives. Connections reset before they were accepted are skipped.
    ///
    /// # Errors
    /// The listener was [`close`](TcpListener::close)d ([`SocketClosed`](super::SocketClosed)),
    /// it is in non-blocking mode and no connection is pending (`WouldBlock`), or the OS
    /// refused (for example the open-file limit: the OS error, `EMFILE`, is returned as it
    /// is, and the cause and fix are printed to stderr once).
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (fd, addr) = self.src.read_op(|l| sys::accept(l.as_raw_fd()))?;
        Ok((TcpStream::from_fd(fd), addr))
    }
}

socket!(TcpListener, std::net::TcpListener, SocketAddr);
listener!(TcpListener, Incoming, TcpStream);
ttl!(TcpListener);

/// A TCP connection.
///
/// Like [`std::net::TcpStream`] — [`Read`] and [`Write`] for `TcpStream` and `&TcpStream`,
/// [`shutdown`](TcpStream::shutdown), timeouts, [`try_clone`](TcpStream::try_clone) — except
/// that on a green thread a read or write that would block parks the green thread until the
/// socket is ready (Go's netpoller), so thousands of connections each get a simple
/// blocking-style green thread. On a plain OS thread it blocks like a std stream.
///
/// Timeouts set with [`set_read_timeout`](TcpStream::set_read_timeout) and
/// [`set_write_timeout`](TcpStream::set_write_timeout) apply to each call and end it with
/// `ErrorKind::TimedOut` (std on Unix reports `WouldBlock`). They belong to this handle (a
/// clone starts with a copy), not to the socket.
///
/// # Examples
///
/// Half-close: the client says it is done sending, the server echoes everything and closes.
///
/// ```
/// use std::io::{Read, Write};
/// use std::net::Shutdown;
/// use purloin::net::{TcpListener, TcpStream};
///
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
///     let addr = listener.local_addr().unwrap();
///     purloin::spawn(move || {
///         let (mut s, _) = listener.accept().unwrap();
///         let mut all = Vec::new();
///         s.read_to_end(&mut all).unwrap(); // until the client's shutdown(Write)
///         s.write_all(&all).unwrap();
///     });
///     let mut c = TcpStream::connect(addr).unwrap();
///     c.write_all(b"ping").unwrap();
///     c.shutdown(Shutdown::Write).unwrap();
///     let mut back = String::new();
///     c.read_to_string(&mut back).unwrap();
///     assert_eq!(back, "ping");
/// });
/// ```
///
/// A read timeout on a silent peer:
///
/// ```
/// use std::io::{ErrorKind, Read};
/// use std::time::Duration;
/// use purloin::net::{TcpListener, TcpStream};
///
/// let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
///     let mut c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
///     let _server_side = listener.accept().unwrap(); // connected, but silent
///     c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
///     let err = c.read(&mut [0u8; 8]).unwrap_err();
///     assert_eq!(err.kind(), ErrorKind::TimedOut);
/// });
/// ```
pub struct TcpStream {
    src: Source<std::net::TcpStream>,
}

impl TcpStream {
    fn from_fd(fd: OwnedFd) -> TcpStream {
        TcpStream { src: Source::new(std::net::TcpStream::from(fd)) }
    }

    /// Opens a connection to `addr` (each resolved address is tried in turn). On a green
    /// thread the connection handshake parks only the green thread; host names are resolved
    /// inside [`blocking`](crate::blocking).
    ///
    /// # Errors
    /// Resolution failed, or every address refused (the last error is returned).
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        let addrs = sys::resolve(addr)?;
        sys::each_addr(&addrs, |a| TcpStream::connect_addr(a, None))
    }

    /// Opens a connection to `addr`, giving up after `timeout` with `ErrorKind::TimedOut`.
    ///
    /// # Errors
    /// A zero `timeout` is `InvalidInput` (like std); otherwise as
    /// [`connect`](TcpStream::connect), or the timeout.
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot set a 0 duration timeout (use connect for no timeout)",
            ));
        }
        TcpStream::connect_addr(addr, Some(timeout))
    }

    fn connect_addr(addr: &SocketAddr, timeout: Option<Duration>) -> io::Result<TcpStream> {
        let fd = sys::socket(addr, libc::SOCK_STREAM)?;
        let raw = fd.as_raw_fd();
        let stream = TcpStream::from_fd(fd);
        if !sys::connect_start(raw, addr)? {
            stream
                .src
                .op(Direction::Write, timeout, |s| ready_now(s.as_raw_fd(), Direction::Write))?;
            if let Some(e) = stream.src.get().take_error()? {
                return Err(e);
            }
        }
        Ok(stream)
    }

    /// Reads without consuming (`MSG_PEEK`), waiting like [`Read::read`].
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.src.read_op(|s| s.peek(buf))
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm: small writes go out at once).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.src.get().set_nodelay(nodelay)
    }

    /// Reads `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.src.get().nodelay()
    }
}

socket!(TcpStream, std::net::TcpStream, SocketAddr);
connection!(TcpStream, SocketAddr);
stream!(TcpStream);
ttl!(TcpStream);
