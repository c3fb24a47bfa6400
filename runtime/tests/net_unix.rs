//! Unix domain sockets: echo with many clients (exactly-once bytes), pairs, abstract names,
//! datagrams, timeouts, close, plain-thread behaviour and clear errors. Socket files live
//! in a fresh directory under the system temp dir.
#![cfg(not(loom))]

mod net_common;

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use net_common::{Rng, payload, rt, watchdog};
use purloin::net::{SocketClosed, UnixDatagram, UnixListener, UnixStream};

/// A fresh directory for one test's socket files, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("purloin-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn echo(mut conn: UnixStream) {
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if conn.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

/// 300 clients at once, each streaming up to 256 KiB in random chunks through an echo
/// server (writer and reader on separate green threads of a cloned handle): every client
/// gets back exactly its bytes, in order.
#[test]
fn echo_many_clients_exactly_once() {
    let _w = watchdog("echo_many_clients_exactly_once", 120);
    let dir = TempDir::new("echo");
    let path = dir.path("echo.sock");
    rt(2).block_on(|| {
        let listener = Arc::new(UnixListener::bind(&path).unwrap());
        let l = listener.clone();
        let acceptor = purloin::spawn(move || {
            let mut handlers = Vec::new();
            loop {
                match l.accept() {
                    Ok((c, _)) => handlers.push(purloin::spawn(move || echo(c))),
                    Err(e) if SocketClosed::is(&e) => break,
                    Err(e) => panic!("accept: {e}"),
                }
            }
            handlers
        });
        let clients: Vec<_> = (0..300u64)
            .map(|i| {
                let path = path.clone();
                purloin::spawn(move || {
                    let mut rng = Rng::new(i);
                    let data = payload(i, rng.below(256 << 10) as usize + 1);
                    let c = UnixStream::connect(&path).unwrap();
                    let mut w = c.try_clone().unwrap();
                    let sent = data.clone();
                    let writer = purloin::spawn(move || {
                        let mut rng = Rng::new(i ^ 99);
                        let mut rest = &sent[..];
                        while !rest.is_empty() {
                            let n = (rng.below(8192) as usize + 1).min(rest.len());
                            w.write_all(&rest[..n]).unwrap();
                            rest = &rest[n..];
                        }
                        w.shutdown(Shutdown::Write).unwrap();
                    });
                    let mut got = Vec::new();
                    (&c).read_to_end(&mut got).unwrap();
                    writer.join().unwrap();
                    assert!(
                        got == data,
                        "client {i}: echo differs ({} vs {} bytes)",
                        got.len(),
                        data.len()
                    );
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        listener.close();
        for h in acceptor.join().unwrap() {
            h.join().unwrap();
        }
    });
}

#[test]
fn pair_half_close_and_try_clone() {
    let _w = watchdog("pair_half_close_and_try_clone", 30);
    rt(2).block_on(|| {
        let (a, b) = UnixStream::pair().unwrap();
        let peer = purloin::spawn(move || {
            let mut all = Vec::new();
            (&b).read_to_end(&mut all).unwrap();
            (&b).write_all(&all).unwrap();
        });
        let a2 = a.try_clone().unwrap();
        (&a2).write_all(b"half").unwrap();
        a2.shutdown(Shutdown::Write).unwrap();
        let mut back = String::new();
        (&a).read_to_string(&mut back).unwrap();
        assert_eq!(back, "half");
        peer.join().unwrap();
        assert!(a.peer_addr().unwrap().is_unnamed());
    });
}

#[test]
fn abstract_names() {
    let _w = watchdog("abstract_names", 30);
    rt(2).block_on(|| {
        let name = format!("purloin-test-abstract-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixListener::bind_addr(&addr).unwrap();
        assert_eq!(listener.local_addr().unwrap().as_abstract_name(), Some(name.as_bytes()));
        let e = UnixListener::bind_addr(&addr).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse);
        let server = purloin::spawn(move || {
            let (c, _) = listener.accept().unwrap();
            echo(c);
        });
        let mut c = UnixStream::connect_addr(&addr).unwrap();
        assert_eq!(c.peer_addr().unwrap().as_abstract_name(), Some(name.as_bytes()));
        c.write_all(b"abstract").unwrap();
        let mut back = [0u8; 8];
        c.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"abstract");
        drop(c);
        server.join().unwrap();
    });
}

#[test]
fn datagrams() {
    let _w = watchdog("datagrams", 30);
    let dir = TempDir::new("dgram");
    rt(2).block_on(|| {
        let a = UnixDatagram::bind(dir.path("a")).unwrap();
        let b = UnixDatagram::bind(dir.path("b")).unwrap();
        let receiver = purloin::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..100 {
                let mut buf = [0u8; 8];
                let (n, from) = b.recv_from(&mut buf).unwrap();
                assert_eq!(n, 8);
                assert_eq!(from.as_pathname().unwrap().file_name().unwrap(), "a");
                got.push(u64::from_le_bytes(buf));
            }
            got
        });
        for i in 0..100u64 {
            a.send_to(&i.to_le_bytes(), dir.path("b")).unwrap();
        }
        assert_eq!(receiver.join().unwrap(), (0..100).collect::<Vec<_>>());

        let (x, y) = UnixDatagram::pair().unwrap();
        x.send(b"one").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(y.recv(&mut buf).unwrap(), 3);
        y.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
        assert_eq!(y.recv(&mut buf).unwrap_err().kind(), ErrorKind::TimedOut);

        let c = UnixDatagram::unbound().unwrap();
        c.connect(dir.path("a")).unwrap();
        c.send(b"hi").unwrap();
        let a2 = a.try_clone().unwrap();
        assert_eq!(a2.recv(&mut buf).unwrap(), 2);
        assert_eq!(c.peer_addr().unwrap().as_pathname(), Some(dir.path("a").as_path()));
    });
}

#[test]
fn timeouts_and_close() {
    let _w = watchdog("timeouts_and_close", 30);
    let dir = TempDir::new("timeouts");
    let path = dir.path("t.sock");
    rt(2).block_on(|| {
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(
            a.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        a.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
        assert_eq!(a.read_timeout().unwrap(), Some(Duration::from_millis(5)));
        assert_eq!((&a).read(&mut [0u8; 4]).unwrap_err().kind(), ErrorKind::TimedOut);
        a.set_nonblocking(true).unwrap();
        assert_eq!((&a).read(&mut [0u8; 4]).unwrap_err().kind(), ErrorKind::WouldBlock);

        let listener = Arc::new(UnixListener::bind(&path).unwrap());
        let l = listener.clone();
        let acceptor = purloin::spawn(move || l.accept().map(|_| ()));
        purloin::sleep(Duration::from_millis(5)); // not synchronisation: either order passes
        listener.close();
        assert!(SocketClosed::is(&acceptor.join().unwrap().unwrap_err()));
    });
}

/// Outside a runtime the types block like std sockets.
#[test]
fn plain_threads_block_like_std() {
    let _w = watchdog("unix_plain_threads_block_like_std", 30);
    let dir = TempDir::new("plain");
    let path = dir.path("p.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (c, _) = listener.accept().unwrap();
        echo(c);
    });
    let mut c = UnixStream::connect(&path).unwrap();
    let data = payload(5, 500_000);
    let mut w = c.try_clone().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    writer.join().unwrap();
    server.join().unwrap();
    assert!(got == data);
}

#[test]
fn bad_input_errors_are_clear() {
    let dir = TempDir::new("errors");
    let e = UnixStream::connect(dir.path("nobody.sock")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    let long = dir.path(&"x".repeat(200));
    assert_eq!(UnixListener::bind(&long).unwrap_err().kind(), ErrorKind::InvalidInput);
    let path = dir.path("taken.sock");
    let _l = UnixListener::bind(&path).unwrap();
    let e = UnixListener::bind(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
    assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
}

/// A green thread whose socket operations never wait (it writes a byte and reads it back on a
/// pair) reaches no scheduling point; the monitor's request makes the next operation yield, so
/// the other green thread of its single worker runs. Without the preemption point the loop
/// never ends (the watchdog fails the test).
#[test]
fn a_loop_of_socket_operations_that_never_wait_lets_its_worker_run_others() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let _w = watchdog("preemption point", 30);
    let rt = rt(1);
    let (rounds, other_ran) = rt.block_on(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicU64::new(0));
        let (s, r) = (stop.clone(), rounds.clone());
        let flooder = purloin::spawn(move || {
            // Spawned from here, the other green thread waits in this worker's queue: it runs
            // only if this loop yields.
            let s2 = s.clone();
            let other = purloin::spawn(move || s2.store(true, Ordering::Release));
            let (mut a, mut b) = UnixStream::pair().unwrap();
            let mut byte = [0u8; 1];
            while !s.load(Ordering::Acquire) {
                a.write_all(b"x").unwrap();
                b.read_exact(&mut byte).unwrap();
                r.fetch_add(1, Ordering::Relaxed);
            }
            other.join().is_ok()
        });
        let ok = flooder.join().unwrap();
        (rounds.load(Ordering::Relaxed), ok)
    });
    assert!(other_ran, "the other green thread panicked");
    assert!(rounds > 0, "the loop ran");
}
