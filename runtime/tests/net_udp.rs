//! UDP: request/response between green threads with exactly-once checks, connected sockets,
//! peeking, OS threads.
#![cfg(not(loom))]

mod net_common;

use std::collections::HashSet;
use std::sync::Arc;

use net_common::{rt, watchdog};
use purloin::net::UdpSocket;

/// 50 client green threads each do 100 request/response rounds with one server socket
/// served by 4 green threads: every reply matches its request, and every request was served
/// exactly once.
#[test]
fn request_response_exactly_once() {
    let _w = watchdog("request_response_exactly_once", 120);
    let rt = rt(2);
    rt.block_on(|| {
        let server = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let addr = server.local_addr().unwrap();
        let servers: Vec<_> = (0..4)
            .map(|_| {
                let s = server.clone();
                purloin::spawn(move || {
                    let mut served = Vec::new();
                    let mut buf = [0u8; 64];
                    loop {
                        let (n, from) = match s.recv_from(&mut buf) {
                            Ok(r) => r,
                            Err(e) if purloin::net::SocketClosed::is(&e) => return served,
                            Err(e) => panic!("recv_from: {e}"),
                        };
                        if n == 8 {
                            served.push(u64::from_le_bytes(buf[..8].try_into().unwrap()));
                        }
                        s.send_to(&buf[..n], from).unwrap();
                    }
                })
            })
            .collect();
        let clients: Vec<_> = (0..50u64)
            .map(|c| {
                purloin::spawn(move || {
                    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                    s.connect(addr).unwrap();
                    assert_eq!(s.peer_addr().unwrap(), addr);
                    for i in 0..100u64 {
                        let id = c << 32 | i;
                        s.send(&id.to_le_bytes()).unwrap();
                        let mut b = [0u8; 8];
                        assert_eq!(s.peek(&mut b).unwrap(), 8);
                        assert_eq!(s.recv(&mut b).unwrap(), 8);
                        assert_eq!(u64::from_le_bytes(b), id);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        server.close();
        let mut all = Vec::new();
        for s in servers {
            all.extend(s.join().unwrap());
        }
        let unique: HashSet<u64> = all.iter().copied().collect();
        assert_eq!(all.len(), 5000);
        assert_eq!(unique.len(), 5000);
    });
}

#[test]
fn peek_from_and_options() {
    let rt = rt(1);
    rt.block_on(|| {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"hi", b.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = b.peek_from(&mut buf).unwrap();
        assert_eq!((n, from), (2, a.local_addr().unwrap()));
        let (n, _) = b.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hi");
        b.set_broadcast(true).unwrap();
        assert!(b.broadcast().unwrap());
        b.set_ttl(9).unwrap();
        assert_eq!(b.ttl().unwrap(), 9);
        b.set_multicast_loop_v4(false).unwrap();
        assert!(!b.multicast_loop_v4().unwrap());
        b.set_multicast_ttl_v4(3).unwrap();
        assert_eq!(b.multicast_ttl_v4().unwrap(), 3);
        assert!(b.take_error().unwrap().is_none());
        let c = b.try_clone().unwrap();
        assert_eq!(c.local_addr().unwrap(), b.local_addr().unwrap());
        let std_sock = c.into_std().unwrap();
        let back = UdpSocket::from_std(std_sock).unwrap();
        back.set_nonblocking(true).unwrap();
        assert_eq!(back.recv(&mut buf).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    });
}

#[test]
fn os_threads_block_like_std() {
    let _w = watchdog("os_threads_block_like_std", 60);
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b_addr = b.local_addr().unwrap();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 8];
        let (n, _) = b.recv_from(&mut buf).unwrap();
        buf[..n].to_vec()
    });
    a.send_to(b"os", b_addr).unwrap();
    assert_eq!(receiver.join().unwrap(), b"os");
}
