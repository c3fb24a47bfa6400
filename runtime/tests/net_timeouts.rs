//! Read, write and connect timeouts, on green threads (through the scheduler's timers) and on
//! plain OS threads (`poll(2)`).
#![cfg(not(loom))]

mod net_common;

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use net_common::{rt, watchdog};
use purloin::net::{TcpListener, TcpStream, UdpSocket};

const T: Duration = Duration::from_millis(30);

/// A connected pair (client, server side) whose server side never writes.
fn silent_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (s, _) = listener.accept().unwrap();
    (c, s)
}

#[test]
fn read_timeout_on_a_green_thread() {
    let _w = watchdog("read_timeout_on_a_green_thread", 60);
    let rt = rt(2);
    rt.block_on(|| {
        let (mut c, mut s) = silent_pair();
        c.set_read_timeout(Some(T)).unwrap();
        assert_eq!(c.read_timeout().unwrap(), Some(T));
        let start = Instant::now();
        let e = c.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert!(start.elapsed() >= T, "a timeout never fires early");
        // The socket still works after a timeout.
        s.write_all(b"late").unwrap();
        let mut b = [0u8; 4];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"late");
        c.set_read_timeout(None).unwrap();
        assert_eq!(c.read_timeout().unwrap(), None);
    });
}

/// Other green threads keep running while one waits for its timeout (the worker is not
/// blocked), even with a single worker; the worker sleeps in the netpoller with the timers'
/// deadline.
#[test]
fn timeout_wait_does_not_block_the_worker() {
    let _w = watchdog("timeout_wait_does_not_block_the_worker", 60);
    let rt = rt(1);
    rt.block_on(|| {
        let (c, _s) = silent_pair();
        c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let waiter = purloin::spawn(move || (&c).read(&mut [0u8; 1]).unwrap_err().kind());
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let ticker = purloin::spawn(move || {
            let mut ticks = 0u32;
            while !d2.load(Ordering::Relaxed) {
                purloin::sleep(Duration::from_millis(1));
                ticks += 1;
            }
            ticks
        });
        assert_eq!(waiter.join().unwrap(), ErrorKind::TimedOut);
        done.store(true, Ordering::Relaxed);
        assert!(ticker.join().unwrap() > 0, "the ticker ran while the reader waited");
    });
}

#[test]
fn read_timeout_on_an_os_thread() {
    let _w = watchdog("read_timeout_on_an_os_thread", 60);
    let (mut c, _s) = silent_pair();
    c.set_read_timeout(Some(T)).unwrap();
    let start = Instant::now();
    assert_eq!(c.read(&mut [0u8; 8]).unwrap_err().kind(), ErrorKind::TimedOut);
    assert!(start.elapsed() >= T);
}

/// The peer never reads: writes fill both socket buffers, then time out.
#[test]
fn write_timeout_when_the_peer_does_not_read() {
    let _w = watchdog("write_timeout_when_the_peer_does_not_read", 60);
    let rt = rt(2);
    rt.block_on(|| {
        let (mut c, _s) = silent_pair();
        c.set_write_timeout(Some(T)).unwrap();
        assert_eq!(c.write_timeout().unwrap(), Some(T));
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 0usize;
        let e = loop {
            match c.write(&chunk) {
                Ok(n) => written += n,
                Err(e) => break e,
            }
        };
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert!(written > 0);
    });
    // The same on an OS thread.
    let (mut c, _s) = silent_pair();
    c.set_write_timeout(Some(T)).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    let e = loop {
        if let Err(e) = c.write(&chunk) {
            break e;
        }
    };
    assert_eq!(e.kind(), ErrorKind::TimedOut);
}

/// A listener whose accept queue is full (backlog 1, never accepted) drops further SYNs, so
/// a connect to it cannot complete: `connect_timeout` gives up with `TimedOut`.
#[test]
fn connect_timeout() {
    let _w = watchdog("connect_timeout", 60);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: plain system call on a listening socket we own (shrinks its backlog).
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    let addr = listener.local_addr().unwrap();
    let rt = rt(2);
    rt.block_on(|| {
        // Fill the accept queue (the kernel admits backlog + 1); keep them open.
        let mut held = Vec::new();
        let e = loop {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 64, "the accept queue never filled up");
        };
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        assert!(!held.is_empty());
    });
    // And on an OS thread.
    let mut held = Vec::new();
    let e = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(e) => break e,
        }
        assert!(held.len() < 64, "the accept queue never filled up");
    };
    assert_eq!(e.kind(), ErrorKind::TimedOut);
}

#[test]
fn udp_recv_timeout() {
    let _w = watchdog("udp_recv_timeout", 60);
    let rt = rt(1);
    rt.block_on(|| {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        assert_eq!(s.read_timeout().unwrap(), Some(T));
        let e = s.recv_from(&mut [0u8; 8]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        s.set_write_timeout(Some(T)).unwrap();
        assert_eq!(s.write_timeout().unwrap(), Some(T));
    });
}

/// Clones start with a copy of the timeouts and change them independently.
#[test]
fn timeouts_are_per_handle() {
    let (c, _s) = silent_pair();
    c.set_read_timeout(Some(T)).unwrap();
    let d = c.try_clone().unwrap();
    assert_eq!(d.read_timeout().unwrap(), Some(T));
    d.set_read_timeout(None).unwrap();
    assert_eq!(c.read_timeout().unwrap(), Some(T));
}
