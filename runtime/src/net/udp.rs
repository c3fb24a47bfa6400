//! UDP: [`UdpSocket`].

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use super::socket::{connection, datagram, socket, ttl};
use super::source::Source;
use super::sys;

/// A UDP socket.
///
/// Like [`std::net::UdpSocket`], except that on a green thread a receive (or a send with a
/// full buffer) parks only the green thread until the socket is ready. On a plain OS thread
/// it blocks like a std socket. Timeouts end a call with `ErrorKind::TimedOut`.
///
/// # Examples
///
/// ```
/// use purloin::net::UdpSocket;
///
/// let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let a = UdpSocket::bind("127.0.0.1:0").unwrap();
///     let b = UdpSocket::bind("127.0.0.1:0").unwrap();
///     let b_addr = b.local_addr().unwrap();
///     let receiver = purloin::spawn(move || {
///         let mut buf = [0u8; 16];
///         let (n, from) = b.recv_from(&mut buf).unwrap();
///         (buf[..n].to_vec(), from)
///     });
///     a.send_to(b"datagram", b_addr).unwrap();
///     let (got, from) = receiver.join().unwrap();
///     assert_eq!(got, b"datagram");
///     assert_eq!(from, a.local_addr().unwrap());
/// });
/// ```
pub struct UdpSocket {
    src: Source<std::net::UdpSocket>,
}

impl UdpSocket {
    /// Creates a socket bound to `addr` (each resolved address is tried in turn).
    ///
    /// # Errors
    /// Resolution failed, or no address could be bound (the last error is returned).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        let addrs = sys::resolve(addr)?;
        let fd = sys::each_addr(&addrs, |a| {
            let fd = sys::socket(a, libc::SOCK_DGRAM)?;
            let (sa, len) = sys::sockaddr(a);
            // SAFETY: `sa` holds a valid sockaddr of length `len`; the descriptor is ours.
            let r = unsafe {
                libc::bind(fd.as_raw_fd(), (&sa as *const libc::sockaddr_storage).cast(), len)
            };
            if r < 0 { Err(io::Error::last_os_error()) } else { Ok(fd) }
        })?;
        Ok(UdpSocket { src: Source::new(std::net::UdpSocket::from(fd)) })
    }

    /// Like [`recv_from`](UdpSocket::recv_from) without removing the datagram.
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.src.read_op(|s| s.peek_from(buf))
    }

    /// Sends a datagram to `addr` (its first resolved address), waiting while the send
    /// buffer is full.
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let to = sys::resolve(addr)?[0];
        self.src.write_op(|s| s.send_to(buf, to))
    }

    /// Connects: sets the default destination of [`send`](UdpSocket::send) and the only
    /// source [`recv`](UdpSocket::recv) accepts.
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        let addrs = sys::resolve(addr)?;
        sys::each_addr(&addrs, |a| self.src.get().connect(a))
    }

    /// Like [`recv`](UdpSocket::recv) without removing the datagram.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.src.read_op(|s| s.peek(buf))
    }

    /// Sets `SO_BROADCAST`.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.src.get().set_broadcast(on)
    }

    /// Reads `SO_BROADCAST`.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.src.get().broadcast()
    }

    /// Sets `IP_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v4(&self, on: bool) -> io::Result<()> {
        self.src.get().set_multicast_loop_v4(on)
    }

    /// Reads `IP_MULTICAST_LOOP`.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        self.src.get().multicast_loop_v4()
    }

    /// Sets `IP_MULTICAST_TTL`.
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        self.src.get().set_multicast_ttl_v4(ttl)
    }

    /// Reads `IP_MULTICAST_TTL`.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        self.src.get().multicast_ttl_v4()
    }

    /// Sets `IPV6_MULTICAST_LOOP`.
    pub fn set_multicast_loop_v6(&self, on: bool) -> io::Result<()> {
        self.src.get().set_multicast_loop_v6(on)
    }

    /// Reads `IPV6_MULTICAST_LOOP`.
    pub fn multicast_loop_v6(&self) -> io::Result<bool> {
        self.src.get().multicast_loop_v6()
    }

    /// Joins an IPv4 multicast group on `interface`.
    pub fn join_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.src.get().join_multicast_v4(group, interface)
    }

    /// Joins an IPv6 multicast group on interface index `interface`.
    pub fn join_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.src.get().join_multicast_v6(group, interface)
    }

    /// Leaves an IPv4 multicast group.
    pub fn leave_multicast_v4(&self, group: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        self.src.get().leave_multicast_v4(group, interface)
    }

    /// Leaves an IPv6 multicast group.
    pub fn leave_multicast_v6(&self, group: &Ipv6Addr, interface: u32) -> io::Result<()> {
        self.src.get().leave_multicast_v6(group, interface)
    }
}

socket!(UdpSocket, std::net::UdpSocket, SocketAddr);
connection!(UdpSocket, SocketAddr);
datagram!(UdpSocket, SocketAddr);
ttl!(UdpSocket);
