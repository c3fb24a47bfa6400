//! The std-shaped methods the socket types share, written once.
//!
//! Every socket type is a [`Source`](super::source::Source) (the type that owns the shared
//! state: the non-blocking std socket, its netpoller registration, timeouts, the closed and
//! non-blocking flags, and the wait loop) in a field named `src`. What the types repeat is
//! their public surface: one-line methods with the same body and the same contract on TCP,
//! UDP and Unix sockets. The macros below emit that surface, one macro per role:
//!
//! | macro | for | methods |
//! |---|---|---|
//! | `socket!` | every socket | `local_addr`, `try_clone`, `take_error`, `set_nonblocking`, `close`, `is_closed`, `from_std`, `into_std`; `Debug`, `AsRawFd`, `AsFd` |
//! | `listener!` | listeners | `incoming` and its iterator |
//! | `connection!` | streams and datagram sockets | `peer_addr`, the read and write timeouts |
//! | `stream!` | streams | `shutdown`, `Read` and `Write` for the type and its reference |
//! | `datagram!` | datagram sockets | `recv`, `recv_from`, `send` |
//! | `ttl!` | IP sockets | `set_ttl`, `ttl` |
//!
//! What differs between the types (constructors, addresses, socket options) stays in their
//! own files.

/// The methods every socket type has. `$std` is the std type inside the `Source`, `$addr` its
/// address type. The caller imports `Source`, `fmt`, `io` and the fd traits.
macro_rules! socket {
    ($t:ident, $std:ty, $addr:ty) => {
        impl $t {
            /// The local address.
            pub fn local_addr(&self) -> io::Result<$addr> {
                self.src.get().local_addr()
            }

            /// A new handle to the same socket (a duplicated descriptor) that starts with
            /// this handle's timeouts and non-blocking flag, e.g. one green thread reads
            /// while another writes, or several accept. [`close`](Self::close) on one shuts
            /// the socket down for both.
            pub fn try_clone(&self) -> io::Result<$t> {
                let clone = $t { src: Source::new(self.src.get().try_clone()?) };
                self.src.clone_settings_to(&clone.src);
                Ok(clone)
            }

            /// Reads and clears `SO_ERROR`.
            pub fn take_error(&self) -> io::Result<Option<io::Error>> {
                self.src.get().take_error()
            }

            /// In non-blocking mode an operation that would wait (accept, read, write,
            /// send, receive) returns `WouldBlock` instead. The descriptor is always
            /// non-blocking underneath: this is a flag of this handle.
            pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
                self.src.set_nonblocking(nonblocking);
                Ok(())
            }

            /// Closes the socket for everyone using it (Go's `Conn.Close` and
            /// `Listener.Close`, for a socket shared between green threads, e.g. in an
            /// `Arc`): green threads waiting on this handle wake with an error that
            /// [`SocketClosed::is`](crate::net::SocketClosed::is) recognises, as does every
            /// later call on it; the socket is shut down in both directions, so OS threads
            /// and clones blocked on it wake too and a connected peer sees end-of-file. The
            /// descriptor is released when the handle drops, so its number cannot be
            /// reused under a waiter. A server stops its accept loops this way.
            pub fn close(&self) {
                self.src.close();
            }

            /// Whether [`close`](Self::close) was called on this handle.
            pub fn is_closed(&self) -> bool {
                self.src.is_closed()
            }

            /// Wraps a std socket (switching its descriptor to non-blocking mode).
            pub fn from_std(socket: $std) -> io::Result<$t> {
                socket.set_nonblocking(true)?;
                Ok($t { src: Source::new(socket) })
            }

            /// The std socket, in blocking mode (for every handle sharing the descriptor:
            /// do not keep purloin clones of it).
            pub fn into_std(self) -> io::Result<$std> {
                let socket = self.src.into_inner();
                socket.set_nonblocking(false)?;
                Ok(socket)
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self.src.get(), f)
            }
        }

        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.src.get().as_raw_fd()
            }
        }

        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.src.get().as_fd()
            }
        }
    };
}

/// `incoming` on listener `$t`, whose iterator `$incoming` (a struct with a `listener: &$t`
/// field, declared and documented by the caller) yields `$stream`s.
macro_rules! listener {
    ($t:ident, $incoming:ident, $stream:ty) => {
        impl $t {
            /// An iterator of accepted connections (`accept` in a loop).
            pub fn incoming(&self) -> $incoming<'_> {
                $incoming { listener: self }
            }
        }

        impl Iterator for $incoming<'_> {
            type Item = io::Result<$stream>;

            fn next(&mut self) -> Option<io::Result<$stream>> {
                Some(self.listener.accept().map(|(s, _)| s))
            }
        }
    };
}

/// The peer and the per-handle timeouts of a socket that carries data.
macro_rules! connection {
    ($t:ident, $addr:ty) => {
        impl $t {
            /// The connected peer's address (unnamed for a Unix client that did not bind).
            pub fn peer_addr(&self) -> io::Result<$addr> {
                self.src.get().peer_addr()
            }

            /// Sets the timeout of each read or receive (`None`: wait forever). A call that
            /// runs out ends with `ErrorKind::TimedOut`.
            ///
            /// # Errors
            /// `Some(Duration::ZERO)` is `InvalidInput`, like std.
            pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
                self.src.set_read_timeout(timeout)
            }

            /// Sets the timeout of each write or send (`None`: wait forever). A call that
            /// runs out ends with `ErrorKind::TimedOut`.
            ///
            /// # Errors
            /// `Some(Duration::ZERO)` is `InvalidInput`, like std.
            pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
                self.src.set_write_timeout(timeout)
            }

            /// The read (receive) timeout.
            pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
                Ok(self.src.read_timeout())
            }

            /// The write (send) timeout.
            pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
                Ok(self.src.write_timeout())
            }
        }
    };
}

/// Half-close and `Read`/`Write` for a stream socket, for the type and for its reference.
macro_rules! stream {
    ($t:ident) => {
        impl $t {
            /// Shuts down the read side, the write side or both (half-close). After
            /// `Shutdown::Write` the peer reads end-of-file once it has read everything
            /// sent; after `Shutdown::Read` reads return `Ok(0)`. A green thread waiting to
            /// read wakes when the read side shuts down.
            pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
                self.src.get().shutdown(how)
            }
        }

        impl Read for &$t {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let len = buf.len();
                self.src.stream_op(Direction::Read, len, |mut s| s.read(buf))
            }

            fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
                let len = bufs.iter().map(|b| b.len()).sum();
                self.src.stream_op(Direction::Read, len, |mut s| s.read_vectored(bufs))
            }
        }

        impl Write for &$t {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.src.stream_op(Direction::Write, buf.len(), |mut s| s.write(buf))
            }

            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                let len = bufs.iter().map(|b| b.len()).sum();
                self.src.stream_op(Direction::Write, len, |mut s| s.write_vectored(bufs))
            }

            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }

        impl Read for $t {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                (&*self).read(buf)
            }

            fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
                (&*self).read_vectored(bufs)
            }
        }

        impl Write for $t {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                (&*self).write(buf)
            }

            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                (&*self).write_vectored(bufs)
            }

            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
    };
}

/// The datagram operations UDP and Unix datagram sockets share.
macro_rules! datagram {
    ($t:ident, $addr:ty) => {
        impl $t {
            /// Receives a datagram (only from the connected peer, once connected), waiting
            /// for one; returns its length, truncated to `buf`.
            pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
                self.src.read_op(|s| s.recv(buf))
            }

            /// Receives a datagram and its sender's address, waiting for one; the length is
            /// truncated to `buf`.
            pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, $addr)> {
                self.src.read_op(|s| s.recv_from(buf))
            }

            /// Sends a datagram to the connected peer, waiting while the send buffer (or the
            /// Unix peer's receive queue) is full.
            pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
                self.src.write_op(|s| s.send(buf))
            }
        }
    };
}

/// `IP_TTL` of a TCP or UDP socket.
macro_rules! ttl {
    ($t:ident) => {
        impl $t {
            /// Sets `IP_TTL`.
            pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
                self.src.get().set_ttl(ttl)
            }

            /// Reads `IP_TTL`.
            pub fn ttl(&self) -> io::Result<u32> {
                self.src.get().ttl()
            }
        }
    };
}

pub(super) use {connection, datagram, listener, socket, stream, ttl};
