//! TCP behaviour: echo correctness with many concurrent clients, exactly-once delivery of
//! bytes (checksums), large transfers (full send buffers), half-close, many green threads on
//! one listener, concurrent readers and writers, plain OS threads, errors.
#![cfg(not(loom))]

mod net_common;

use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use net_common::{Rng, echo_server, payload, rt, watchdog};
use purloin::net::{SocketClosed, TcpListener, TcpStream};

#[test]
fn echo_one_connection() {
    let _w = watchdog("echo_one_connection", 60);
    let rt = rt(2);
    rt.block_on(|| {
        let (addr, server) = echo_server();
        let mut c = TcpStream::connect(addr).unwrap();
        for i in 0..1000u32 {
            c.write_all(&i.to_le_bytes()).unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
            assert_eq!(u32::from_le_bytes(b), i);
        }
        drop(c);
        server.stop();
    });
}

/// 300 clients at once, each sending a deterministic pseudo-random stream in random-sized
/// writes and reading it back: every byte comes back exactly once, in order.
#[test]
fn echo_many_clients_exactly_once() {
    let _w = watchdog("echo_many_clients_exactly_once", 120);
    let rt = rt(2);
    rt.block_on(|| {
        let (addr, server) = echo_server();
        let clients: Vec<_> = (0..300u64)
            .map(|id| {
                purloin::spawn(move || {
                    let mut rng = Rng::new(id);
                    let data = payload(id, 20_000 + rng.below(20_000) as usize);
                    let mut c = TcpStream::connect(addr).unwrap();
                    let (mut sent, mut back) = (0, Vec::with_capacity(data.len()));
                    let mut buf = vec![0u8; 4096];
                    while back.len() < data.len() {
                        if sent < data.len() {
                            let n = (1 + rng.below(3000) as usize).min(data.len() - sent);
                            c.write_all(&data[sent..sent + n]).unwrap();
                            sent += n;
                        }
                        // Read whatever is due (never more than was sent).
                        let want = (sent - back.len()).min(buf.len());
                        if want > 0 {
                            let n = c.read(&mut buf[..want]).unwrap();
                            assert!(n > 0, "client {id}: early end-of-file");
                            back.extend_from_slice(&buf[..n]);
                        }
                    }
                    assert!(back == data, "client {id}: echoed bytes differ");
                    data.len()
                })
            })
            .collect();
        let total: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
        let echoed = server.stop();
        assert_eq!(echoed, total, "the server echoed a different number of bytes");
    });
}

/// 8 MiB each way through one connection, with a reader slower than the writer: the writer
/// hits a full send buffer (write readiness) many times.
#[test]
fn large_transfer_with_full_send_buffers() {
    let _w = watchdog("large_transfer_with_full_send_buffers", 120);
    let rt = rt(2);
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let data = Arc::new(payload(7, 8 << 20));
        let d2 = data.clone();
        let writer = purloin::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(&d2).unwrap();
            s.shutdown(Shutdown::Write).unwrap();
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let mut got = Vec::with_capacity(data.len());
        let mut buf = [0u8; 1000];
        loop {
            let n = c.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if got.len() % 64 == 0 {
                purloin::yield_now(); // let the writer run ahead and fill its buffer
            }
        }
        writer.join().unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == *data);
    });
}

#[test]
fn half_close() {
    let _w = watchdog("half_close", 60);
    let rt = rt(2);
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = purloin::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut all = Vec::new();
            s.read_to_end(&mut all).unwrap(); // returns at the client's shutdown(Write)
            // The write side is still open: answer, then close.
            s.write_all(format!("got {} bytes", all.len()).as_bytes()).unwrap();
            all
        });
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(&[1u8; 10_000]).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!(c.write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        assert_eq!(answer, "got 10000 bytes");
        assert_eq!(server.join().unwrap(), vec![1u8; 10_000]);
    });
}

/// The peer writes a few bytes and shuts down at once, so the data and the end-of-file
/// usually arrive together (one edge): the short read that returns the data must not make the
/// next read wait for an edge that will never come (the end-of-file is already there).
#[test]
fn end_of_file_right_behind_the_data() {
    let _w = watchdog("end_of_file_right_behind_the_data", 60);
    let rt = rt(2);
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = purloin::spawn(move || {
            for _ in 0..200 {
                let (mut s, _) = listener.accept().unwrap();
                let mut all = Vec::new();
                s.read_to_end(&mut all).unwrap();
                assert_eq!(all, b"ping");
                s.write_all(b"pong").unwrap();
            }
        });
        for _ in 0..200 {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"ping").unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut back = Vec::new();
            c.read_to_end(&mut back).unwrap();
            assert_eq!(back, b"pong");
        }
        server.join().unwrap();
    });
}

/// A green thread waiting to read wakes with end-of-file when its own read side is shut down
/// (by another green thread).
#[test]
fn shutdown_read_wakes_a_waiting_reader() {
    let _w = watchdog("shutdown_read_wakes_a_waiting_reader", 60);
    let rt = rt(2);
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = Arc::new(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
        let _server_side = listener.accept().unwrap();
        let c2 = c.clone();
        let reader = purloin::spawn(move || (&*c2).read(&mut [0u8; 16]).unwrap());
        purloin::sleep(Duration::from_millis(20));
        c.shutdown(Shutdown::Read).unwrap();
        assert_eq!(reader.join().unwrap(), 0);
    });
}

/// 16 green threads accept on one listener; 400 connections are each accepted exactly once.
/// Closing the listener then wakes every acceptor with `SocketClosed`.
#[test]
fn many_acceptors_on_one_listener() {
    let _w = watchdog("many_acceptors_on_one_listener", 120);
    let rt = rt(2);
    rt.block_on(|| {
        const CONNS: u32 = 400;
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let acceptors: Vec<_> = (0..16)
            .map(|_| {
                let (l, seen) = (listener.clone(), seen.clone());
                purloin::spawn(move || {
                    let mut mine = 0;
                    loop {
                        match l.accept() {
                            Ok((mut s, _)) => {
                                let mut id = [0u8; 4];
                                s.read_exact(&mut id).unwrap();
                                seen.lock().unwrap().push(u32::from_le_bytes(id));
                                s.write_all(&id).unwrap();
                                mine += 1;
                            }
                            Err(e) if SocketClosed::is(&e) => return mine,
                            Err(e) => panic!("accept failed: {e}"),
                        }
                    }
                })
            })
            .collect();
        let clients: Vec<_> = (0..CONNS)
            .map(|id| {
                purloin::spawn(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    c.write_all(&id.to_le_bytes()).unwrap();
                    let mut back = [0u8; 4];
                    c.read_exact(&mut back).unwrap();
                    assert_eq!(u32::from_le_bytes(back), id);
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        listener.close();
        let accepted: u32 = acceptors.into_iter().map(|a| a.join().unwrap()).sum();
        assert_eq!(accepted, CONNS);
        let ids: HashSet<u32> = seen.lock().unwrap().iter().copied().collect();
        assert_eq!(ids.len(), CONNS as usize, "a connection was accepted twice or lost");
    });
}

/// One green thread writes while another reads the same connection (`try_clone`), and the
/// other side does the same through `&TcpStream` shared in an `Arc`.
#[test]
fn concurrent_reader_and_writer() {
    let _w = watchdog("concurrent_reader_and_writer", 120);
    let rt = rt(2);
    rt.block_on(|| {
        const LEN: usize = 2 << 20;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = purloin::spawn(move || {
            let s = Arc::new(listener.accept().unwrap().0);
            let s2 = s.clone();
            let w = purloin::spawn(move || (&*s2).write_all(&payload(1, LEN)).unwrap());
            let mut got = Vec::new();
            (&*s).take(LEN as u64).read_to_end(&mut got).unwrap();
            w.join().unwrap();
            got == payload(2, LEN)
        });
        let c = TcpStream::connect(addr).unwrap();
        let mut w = c.try_clone().unwrap();
        let writer = purloin::spawn(move || w.write_all(&payload(2, LEN)).unwrap());
        let mut got = Vec::new();
        (&c).take(LEN as u64).read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        assert!(got == payload(1, LEN));
        assert!(server.join().unwrap());
    });
}

/// Outside a runtime the types block like std sockets; an OS-thread client also talks to a
/// green-thread server.
#[test]
fn plain_os_threads_block_like_std() {
    let _w = watchdog("plain_os_threads_block_like_std", 60);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
        peer
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"hello").unwrap();
    let mut back = [0u8; 5];
    c.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"hello");
    assert_eq!(server.join().unwrap(), c.local_addr().unwrap());

    // An OS-thread client of a green-thread server.
    let rt = rt(2);
    let (addr, server) = rt.block_on(echo_server);
    let mut c = TcpStream::connect(addr).unwrap();
    for i in 0..100u8 {
        c.write_all(&[i; 3]).unwrap();
        let mut b = [0u8; 3];
        c.read_exact(&mut b).unwrap();
        assert_eq!(b, [i; 3]);
    }
    drop(c);
    rt.block_on(|| server.stop());
}

/// A socket registered with one runtime keeps working from another runtime's green threads
/// (each wait blocks a worker inside `blocking`) and from an OS thread.
#[test]
fn socket_moved_between_runtimes() {
    let _w = watchdog("socket_moved_between_runtimes", 60);
    let (a, b) = (rt(1), rt(1));
    let (addr, server) = a.block_on(echo_server);
    let mut c = a.block_on(|| {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"a").unwrap();
        let mut x = [0u8; 1];
        c.read_exact(&mut x).unwrap(); // registers with `a`'s netpoller
        c
    });
    let c = b.block_on(move || {
        for i in 0..50u8 {
            c.write_all(&[i]).unwrap();
            let mut x = [0u8; 1];
            c.read_exact(&mut x).unwrap();
            assert_eq!(x, [i]);
        }
        c
    });
    drop(c);
    a.block_on(|| server.stop());
}

#[test]
fn connect_refused_is_an_error() {
    let _w = watchdog("connect_refused_is_an_error", 60);
    // A port nobody listens on: bind one, note it, drop it.
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let rt = rt(1);
    rt.block_on(|| {
        let e = TcpStream::connect(addr).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    });
    assert_eq!(TcpStream::connect(addr).unwrap_err().kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn nonblocking_mode_returns_would_block() {
    let _w = watchdog("nonblocking_mode_returns_would_block", 60);
    let rt = rt(1);
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
        let mut c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        c.set_nonblocking(true).unwrap();
        assert_eq!(c.read(&mut [0u8; 4]).unwrap_err().kind(), ErrorKind::WouldBlock);
        c.set_nonblocking(false).unwrap();
        listener.set_nonblocking(false).unwrap();
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(b"ok").unwrap();
        let mut b = [0u8; 2];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"ok");
    });
}

#[test]
fn socket_options_and_addresses() {
    let _w = watchdog("socket_options_and_addresses", 60);
    let rt = rt(1);
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let c = TcpStream::connect(addr).unwrap();
        let (s, peer) = listener.accept().unwrap();
        assert_eq!(c.peer_addr().unwrap(), addr);
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());
        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        c.set_ttl(42).unwrap();
        assert_eq!(c.ttl().unwrap(), 42);
        assert!(c.take_error().unwrap().is_none());
        listener.set_ttl(7).unwrap();
        assert_eq!(listener.ttl().unwrap(), 7);
        assert!(format!("{c:?}").contains("TcpStream"));
        // std round trip.
        let std_stream = c.into_std().unwrap();
        let back = TcpStream::from_std(std_stream).unwrap();
        assert_eq!(back.peer_addr().unwrap(), addr);
        let l2 = TcpListener::from_std(listener.into_std().unwrap()).unwrap();
        assert_eq!(l2.local_addr().unwrap(), addr);
    });
}

#[test]
fn ipv6_loopback() {
    let _w = watchdog("ipv6_loopback", 60);
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        eprintln!("ipv6_loopback: skipped: this machine has no IPv6 loopback");
        return;
    };
    let rt = rt(1);
    rt.block_on(|| {
        let addr: SocketAddr = listener.local_addr().unwrap();
        assert!(addr.is_ipv6());
        let server = purloin::spawn(move || {
            let (mut s, peer) = listener.accept().unwrap();
            s.write_all(b"v6").unwrap();
            peer.is_ipv6()
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let mut b = [0u8; 2];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"v6");
        assert!(server.join().unwrap());
    });
}

/// Dropping the runtime while green threads wait on sockets unwinds them (their sockets are
/// dropped and deregistered) instead of hanging.
#[test]
fn runtime_shutdown_unwinds_io_waiters() {
    let _w = watchdog("runtime_shutdown_unwinds_io_waiters", 60);
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    struct Count;
    impl Drop for Count {
        fn drop(&mut self) {
            DROPPED.fetch_add(1, Ordering::SeqCst);
        }
    }
    let rt = rt(2);
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    // Connections to this one complete in the kernel's backlog; nobody accepts them.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let mut parked = Vec::new();
    for _ in 0..4 {
        let l = listener.clone();
        parked.push(rt.spawn(move || {
            let _c = Count;
            let _ = l.accept();
        }));
    }
    let readers: Vec<_> = (0..4)
        .map(|_| {
            rt.spawn(move || {
                let _c = Count;
                let mut s = TcpStream::connect(addr).unwrap();
                let _ = s.read(&mut [0u8; 1]);
            })
        })
        .collect();
    // Wait until every green thread is parked (no sleeping as synchronisation).
    while rt.scheduler().parked().len() < 8 {
        std::thread::yield_now();
    }
    drop(rt);
    assert_eq!(DROPPED.load(Ordering::SeqCst), 8);
    for h in parked.into_iter().chain(readers) {
        assert!(h.join().is_err(), "the green thread was unwound");
    }
}

/// A green thread waiting for I/O for longer than the deadlock grace is not a deadlock: the
/// netpoller reports it as an I/O waiter.
#[test]
fn io_wait_is_not_a_deadlock() {
    let _w = watchdog("io_wait_is_not_a_deadlock", 60);
    let rt = purloin::runtime::Builder::new()
        .workers(2)
        .deadlock_detection(true, Duration::from_millis(100))
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::thread::spawn(move || {
        // Longer than the grace: the detector looks at least once while the root waits.
        std::thread::sleep(Duration::from_millis(500));
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"late").unwrap();
    });
    let got = rt.block_on(|| {
        let (mut s, _) = listener.accept().unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        b
    });
    assert_eq!(&got, b"late");
    client.join().unwrap();
}

/// Bad input gets clear errors.
#[test]
fn invalid_input_errors() {
    let rt = rt(1);
    rt.block_on(|| {
        let e = TcpStream::connect_timeout(&"127.0.0.1:9".parse().unwrap(), Duration::ZERO)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let e = c.set_read_timeout(Some(Duration::ZERO)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains("0 duration"));
        assert!(TcpListener::bind("not an address").is_err());
    });
}

/// A green thread that only yields must not starve I/O waiters on its worker: the worker polls
/// only when its queues are empty, so the monitor polls when nobody did for a while (Go's
/// sysmon). One worker; a plain OS thread writes to the socket once the reading green thread
/// is parked on it, while the other green thread yields until the reader got the byte.
#[test]
fn a_yield_loop_does_not_starve_io_waiters() {
    let _w = watchdog("a_yield_loop_does_not_starve_io_waiters", 60);
    let rt = rt(1);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::scope(|s| {
        let rt = &rt;
        s.spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            // The reader is parked on the socket (nothing else in this runtime parks).
            while rt.scheduler().parked().is_empty() {
                std::thread::yield_now();
            }
            conn.write_all(b"x").unwrap();
            let mut b = [0u8; 1];
            let _ = conn.read(&mut b); // hold the connection open until the reader is done
        });
        rt.block_on(|| {
            let got = Arc::new(AtomicUsize::new(0));
            let g = got.clone();
            let reader = purloin::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                let mut b = [0u8; 1];
                c.read_exact(&mut b).unwrap();
                g.store(1, Ordering::Release);
                c
            });
            while got.load(Ordering::Acquire) == 0 {
                purloin::yield_now();
            }
            drop(reader.join().unwrap());
        });
    });
}
