//! `close` while green threads (or OS threads) wait on the socket: every waiter wakes with
//! `SocketClosed`, later calls fail the same way, and the peer sees end-of-file.
#![cfg(not(loom))]

mod net_common;

use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;

use net_common::{rt, watchdog};
use purloin::net::{SocketClosed, TcpListener, TcpStream, UdpSocket};

/// Waits until `n` green threads of `rt` are parked (no sleeping as synchronisation).
fn wait_parked(rt: &purloin::Runtime, n: usize) {
    while rt.scheduler().parked().len() < n {
        std::thread::yield_now();
    }
}

#[test]
fn close_wakes_green_readers_and_writers() {
    let _w = watchdog("close_wakes_green_readers_and_writers", 60);
    let rt = rt(2);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = Arc::new(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
    let (mut peer, _) = listener.accept().unwrap();
    // Fill the send buffer so a writer has to wait too.
    c.set_nonblocking(true).unwrap();
    while (&*c).write(&[0u8; 65536]).is_ok() {}
    c.set_nonblocking(false).unwrap();
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let c = c.clone();
            rt.spawn(move || (&*c).read(&mut [0u8; 8]).unwrap_err())
        })
        .collect();
    let c2 = c.clone();
    let writer = rt.spawn(move || (&*c2).write(&[1u8; 65536]).unwrap_err());
    wait_parked(&rt, 4);
    c.close();
    for r in readers {
        let e = r.join().unwrap();
        assert!(SocketClosed::is(&e), "{e}");
        assert_eq!(e.kind(), ErrorKind::NotConnected);
    }
    assert!(SocketClosed::is(&writer.join().unwrap()));
    assert!(c.is_closed());
    // Later calls fail the same way, on green and OS threads.
    assert!(SocketClosed::is(&(&*c).read(&mut [0u8; 1]).unwrap_err()));
    rt.block_on(|| assert!(SocketClosed::is(&(&*c).write(b"x").unwrap_err())));
    // The peer sees end-of-file after the buffered data.
    let mut sink = Vec::new();
    peer.read_to_end(&mut sink).unwrap();
}

#[test]
fn close_wakes_every_acceptor() {
    let _w = watchdog("close_wakes_every_acceptor", 60);
    let rt = rt(2);
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let acceptors: Vec<_> = (0..10)
        .map(|_| {
            let l = listener.clone();
            rt.spawn(move || l.accept().map(|_| ()).unwrap_err())
        })
        .collect();
    wait_parked(&rt, 10);
    listener.close();
    for a in acceptors {
        assert!(SocketClosed::is(&a.join().unwrap()));
    }
    assert!(SocketClosed::is(&listener.accept().map(|_| ()).unwrap_err()));
}

#[test]
fn close_wakes_an_os_thread_reader() {
    let _w = watchdog("close_wakes_an_os_thread_reader", 60);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = Arc::new(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
    let _peer = listener.accept().unwrap();
    let c2 = c.clone();
    let reader = std::thread::spawn(move || (&*c2).read(&mut [0u8; 8]).unwrap_err());
    // The reader may not have blocked yet: close works either way (it is sticky).
    c.close();
    assert!(SocketClosed::is(&reader.join().unwrap()));
}

#[test]
fn close_wakes_an_os_thread_acceptor() {
    let _w = watchdog("close_wakes_an_os_thread_acceptor", 60);
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let l2 = listener.clone();
    let acceptor = std::thread::spawn(move || l2.accept().map(|_| ()).unwrap_err());
    listener.close();
    assert!(SocketClosed::is(&acceptor.join().unwrap()));
}

#[test]
fn close_wakes_udp_receivers() {
    let _w = watchdog("close_wakes_udp_receivers", 60);
    let rt = rt(2);
    let s = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    let green: Vec<_> = (0..3)
        .map(|_| {
            let s = s.clone();
            rt.spawn(move || s.recv_from(&mut [0u8; 8]).unwrap_err())
        })
        .collect();
    let s2 = s.clone();
    let os = std::thread::spawn(move || s2.recv(&mut [0u8; 8]).unwrap_err());
    wait_parked(&rt, 3);
    s.close();
    for g in green {
        assert!(SocketClosed::is(&g.join().unwrap()));
    }
    assert!(SocketClosed::is(&os.join().unwrap()));
    assert!(SocketClosed::is(&s.send_to(b"x", "127.0.0.1:9").unwrap_err()));
}

/// Closing a socket that never waited (not registered with any netpoller yet).
#[test]
fn close_before_any_wait() {
    let rt = rt(1);
    rt.block_on(|| {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.close();
        assert!(s.is_closed());
        assert!(SocketClosed::is(&s.recv(&mut [0u8; 1]).unwrap_err()));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.close();
        assert!(SocketClosed::is(&listener.accept().map(|_| ()).unwrap_err()));
    });
}

/// `close` on one handle shuts the socket down: a clone blocked in `read` sees end-of-file
/// (the kernel's view), the peer too.
#[test]
fn close_shuts_down_for_clones_and_the_peer() {
    let _w = watchdog("close_shuts_down_for_clones_and_the_peer", 60);
    let rt = rt(2);
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        let mut clone = c.try_clone().unwrap();
        let reader = purloin::spawn(move || clone.read(&mut [0u8; 8]).unwrap());
        purloin::sleep(std::time::Duration::from_millis(10));
        c.close();
        assert_eq!(reader.join().unwrap(), 0);
        assert_eq!(peer.read(&mut [0u8; 8]).unwrap(), 0);
    });
}
