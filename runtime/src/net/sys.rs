//! Socket system calls std does not expose in the form we need: sockets created non-blocking
//! (`SOCK_NONBLOCK | SOCK_CLOEXEC`, no extra `fcntl`), a non-blocking `connect`, `accept4`,
//! and `sockaddr` conversions.

use std::io;
use std::mem::{MaybeUninit, size_of};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

/// Passes EMFILE/ENFILE errors (the most common failure of a server under load) through
/// unchanged, so callers can still match on `raw_os_error()`, and prints the cause and the
/// fix to stderr, once per process and limit.
pub(crate) fn explain(e: io::Error, what: &str) -> io::Error {
    use std::sync::atomic::{AtomicBool, Ordering};
    static PROCESS_LIMIT: AtomicBool = AtomicBool::new(false);
    static SYSTEM_LIMIT: AtomicBool = AtomicBool::new(false);
    let (told, hint) = match e.raw_os_error() {
        Some(libc::EMFILE) => (
            &PROCESS_LIMIT,
            "the process reached its open-file limit (RLIMIT_NOFILE); raise it (ulimit -n) or \
             close sockets",
        ),
        Some(libc::ENFILE) => {
            (&SYSTEM_LIMIT, "the system-wide open-file limit was reached (/proc/sys/fs/file-max)")
        }
        _ => return e,
    };
    // Relaxed: only decides who prints the hint.
    if !told.swap(true, Ordering::Relaxed) {
        eprintln!("purloin::net: {what} failed: {e}: {hint} (said once)");
    }
    e
}

/// A new non-blocking, close-on-exec socket.
pub(crate) fn socket(addr: &SocketAddr, ty: libc::c_int) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: plain system call; the result is checked.
    let fd = cvt(unsafe { libc::socket(family, ty | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })
        .map_err(|e| explain(e, "socket"))?;
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A `sockaddr` for `addr`, with its length.
pub(crate) fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
            unsafe { core::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
            unsafe { core::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The `SocketAddr` in a `sockaddr` the kernel filled.
pub(crate) fn socket_addr(
    storage: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> io::Result<SocketAddr> {
    let len = len as usize;
    match i32::from(storage.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and it is long enough.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Ok(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6, and it is long enough.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "purloin::net: the kernel returned an address that is neither IPv4 nor IPv6",
        )),
    }
}

/// Binds and listens (SO_REUSEADDR like std; the backlog is the kernel's maximum,
/// net.core.somaxconn, like Go, instead of std's 128: a burst of connections should not be
/// dropped while the accepting green threads catch up).
pub(crate) fn listen(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let fd = socket(addr, libc::SOCK_STREAM)?;
    let one: libc::c_int = 1;
    // SAFETY: passes a live c_int of the right size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    let (sa, len) = sockaddr(addr);
    // SAFETY: `sa` holds a valid sockaddr of length `len`.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), (&sa as *const libc::sockaddr_storage).cast(), len) })?;
    // The kernel caps the backlog at net.core.somaxconn.
    // SAFETY: plain system call on our descriptor.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), libc::c_int::MAX) })?;
    Ok(fd)
}

/// Starts a non-blocking connect. `Ok(true)`: connected; `Ok(false)`: in progress.
pub(crate) fn connect_start(fd: RawFd, addr: &SocketAddr) -> io::Result<bool> {
    let (sa, len) = sockaddr(addr);
    // SAFETY: `sa` holds a valid sockaddr of length `len`.
    let r = unsafe { libc::connect(fd, (&sa as *const libc::sockaddr_storage).cast(), len) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // EINTR: a non-blocking connect continues in the background.
        Some(libc::EINPROGRESS) | Some(libc::EINTR) => Ok(false),
        _ => Err(e),
    }
}

/// `accept4` with a non-blocking, close-on-exec result.
pub(crate) fn accept(fd: RawFd) -> io::Result<(OwnedFd, SocketAddr)> {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    loop {
        // SAFETY: `storage` and `len` are valid for writes and describe each other.
        let r = unsafe {
            libc::accept4(
                fd,
                (&mut storage as *mut libc::sockaddr_storage).cast(),
                &mut len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if r >= 0 {
            // SAFETY: `r` is a fresh descriptor we own.
            let stream = unsafe { OwnedFd::from_raw_fd(r) };
            return Ok((stream, socket_addr(&storage, len)?));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // A connection reset before we accepted it: Go and nginx skip it too.
            Some(libc::ECONNABORTED) => continue,
            _ => return Err(explain(e, "accept")),
        }
    }
}

/// Resolves `addr`. On a green thread the lookup (getaddrinfo for host names) runs inside
/// [`purloin_sched::blocking`], so a slow DNS answer does not stall the worker's other
/// green threads.
pub(crate) fn resolve<A: ToSocketAddrs>(addr: A) -> io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = if purloin_sched::in_green_thread() {
        purloin_sched::blocking(|| addr.to_socket_addrs().map(Iterator::collect))?
    } else {
        addr.to_socket_addrs()?.collect()
    };
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any addresses (the name resolved to an empty list)",
        ));
    }
    Ok(addrs)
}

/// Tries `f` on each address, returning the first success or the last error (std's rule).
pub(crate) fn each_addr<T>(
    addrs: &[SocketAddr],
    mut f: impl FnMut(&SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addrs {
        match f(a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("resolve returns at least one address"))
}
