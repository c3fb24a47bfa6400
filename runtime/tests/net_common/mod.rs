//! Helpers shared by the net tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use purloin::JoinHandle;
use purloin::net::{SocketClosed, TcpListener};

/// A runtime with `workers` workers and deadlock detection on (a test that deadlocks fails
/// with a report instead of hanging).
pub fn rt(workers: usize) -> purloin::Runtime {
    purloin::runtime::Builder::new().workers(workers).build().expect("runtime")
}

/// Aborts the process if the test is still running after `secs` (a hang fails CI instead of
/// blocking it). Disarmed on drop.
pub struct Watchdog(Arc<AtomicBool>);

pub fn watchdog(name: &'static str, secs: u64) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(secs) {
            if d.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("watchdog: test `{name}` still running after {secs} s; aborting");
        std::process::abort();
    });
    Watchdog(done)
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// xorshift64*: deterministic test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `len` deterministic pseudo-random bytes for stream `seed`.
pub fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed ^ 0xABCD);
    (0..len).map(|_| r.next() as u8).collect()
}

/// A running echo server (one green thread per connection).
pub struct EchoServer {
    listener: Arc<TcpListener>,
    acceptor: JoinHandle<()>,
    handlers: Arc<Mutex<Vec<JoinHandle<()>>>>,
    echoed: Arc<AtomicUsize>,
}

/// Starts an echo server on the current runtime (call it from a green thread).
pub fn echo_server() -> (SocketAddr, EchoServer) {
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr = listener.local_addr().unwrap();
    let handlers = Arc::new(Mutex::new(Vec::new()));
    let echoed = Arc::new(AtomicUsize::new(0));
    let (l, h, e) = (listener.clone(), handlers.clone(), echoed.clone());
    let acceptor = purloin::spawn(move || {
        loop {
            match l.accept() {
                Ok((mut s, _)) => {
                    let e = e.clone();
                    h.lock().unwrap().push(purloin::spawn(move || {
                        let mut buf = [0u8; 4096];
                        loop {
                            match s.read(&mut buf) {
                                Ok(0) => return,
                                Ok(n) => {
                                    s.write_all(&buf[..n]).unwrap();
                                    e.fetch_add(n, Ordering::Relaxed);
                                }
                                Err(err) => panic!("echo handler: read failed: {err}"),
                            }
                        }
                    }));
                }
                Err(err) if SocketClosed::is(&err) => return,
                Err(err) => panic!("echo server: accept failed: {err}"),
            }
        }
    });
    (addr, EchoServer { listener, acceptor, handlers, echoed })
}

impl EchoServer {
    /// Stops accepting, waits for every connection to end (clients must have closed theirs),
    /// and returns the number of bytes echoed.
    pub fn stop(self) -> usize {
        self.listener.close();
        self.acceptor.join().unwrap();
        let handlers = std::mem::take(&mut *self.handlers.lock().unwrap());
        for h in handlers {
            h.join().unwrap();
        }
        self.echoed.load(Ordering::Relaxed)
    }
}
