//! 10,000 concurrent TCP connections on loopback: 10,000 sockets open at once on each side,
//! 10,000 client green threads parked in `read` at the same time, and every byte delivered
//! exactly once.
//!
//! The two ends run in two processes (this test binary re-runs itself as the client, with an
//! environment variable naming the server's address), both on purloin runtimes: 20,000
//! sockets in one process would exceed common hard limits on open files (20,000 where this
//! was written, with no permission to raise it). Each process raises its own open-file
//! limit (`RLIMIT_NOFILE`) with `setrlimit`: the soft limit up to the hard limit, and the hard
//! limit too when it is allowed to (CAP_SYS_RESOURCE). If the limit cannot reach what one
//! side needs, the test says so and is skipped (it passes without running).
#![cfg(not(loom))]

mod net_common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use net_common::watchdog;
use purloin::StackSize;
use purloin::net::{TcpListener, TcpStream};

const CONNS: usize = 10_000;
/// One descriptor per connection on each side, plus the runtime's, the harness's and slack.
const FDS_NEEDED: u64 = CONNS as u64 + 256;
/// Set in the client process: the server's address.
const CLIENT_ENV: &str = "PURLOIN_NET_10K_SERVER";

/// Raises RLIMIT_NOFILE to at least `need`. Returns the limit in force, or an explanation.
fn raise_fd_limit(need: u64) -> Result<u64, String> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid rlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!("getrlimit failed: {}", std::io::Error::last_os_error()));
    }
    if lim.rlim_cur >= need {
        return Ok(lim.rlim_cur);
    }
    let want = libc::rlimit { rlim_cur: need, rlim_max: lim.rlim_max.max(need) };
    // SAFETY: passes a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
        return Ok(need);
    }
    let err = std::io::Error::last_os_error();
    if lim.rlim_max >= need {
        let soft = libc::rlimit { rlim_cur: need, rlim_max: lim.rlim_max };
        // SAFETY: passes a valid rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &soft) } == 0 {
            return Ok(need);
        }
    }
    Err(format!(
        "RLIMIT_NOFILE is {} (hard {}) and could not be raised to {need}: {err}; run as root \
         or raise the hard limit (ulimit -Hn) to run this test",
        lim.rlim_cur, lim.rlim_max
    ))
}

#[test]
fn ten_thousand_concurrent_connections() {
    let role = if std::env::var(CLIENT_ENV).is_ok() { "client" } else { "server" };
    match raise_fd_limit(FDS_NEEDED) {
        Ok(limit) => eprintln!("net_10k ({role}): RLIMIT_NOFILE is {limit} for this process"),
        Err(why) => {
            eprintln!("net_10k ({role}): SKIPPED: {why}");
            assert_eq!(role, "server", "the client process inherits the server's limit");
            return;
        }
    }
    let _w = watchdog("ten_thousand_concurrent_connections", 300);
    let rt =
        purloin::runtime::Builder::new().workers(2).stack_size(StackSize::Small).build().unwrap();
    match std::env::var(CLIENT_ENV) {
        Ok(addr) => rt.block_on(|| clients(addr.parse().expect("a socket address"))),
        Err(_) => rt.block_on(server),
    }
}

/// The server side: accepts every connection first and keeps it — once it holds all of
/// them, all 10,000 connections are open at the same moment, each client parked in `read`
/// waiting for its echo — and only then answers, one green thread per connection.
fn server() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let echoed = Arc::new(AtomicUsize::new(0));
    let e2 = echoed.clone();
    let server = purloin::spawn(move || {
        let mut held = Vec::with_capacity(CONNS);
        while held.len() < CONNS {
            held.push(listener.accept().unwrap().0);
        }
        let handlers: Vec<_> = held
            .into_iter()
            .map(|mut s| {
                let e = e2.clone();
                purloin::spawn(move || {
                    let mut id = [0u8; 8];
                    s.read_exact(&mut id).unwrap();
                    s.write_all(&id).unwrap();
                    e.fetch_add(1, Ordering::Relaxed);
                    // Wait for the client to close (end-of-file).
                    assert_eq!(s.read(&mut [0u8; 1]).unwrap(), 0);
                })
            })
            .collect();
        for h in handlers {
            h.join().unwrap();
        }
    });
    let exe = std::env::current_exe().unwrap();
    let status = purloin::blocking(|| {
        std::process::Command::new(exe)
            .args(["--exact", "ten_thousand_concurrent_connections", "--nocapture"])
            .env(CLIENT_ENV, addr.to_string())
            .status()
    })
    .unwrap();
    assert!(status.success(), "the client process failed: {status}");
    server.join().unwrap();
    assert_eq!(echoed.load(Ordering::Relaxed), CONNS);
}

/// The client side: 10,000 green threads, one connection each.
fn clients(addr: std::net::SocketAddr) {
    let clients: Vec<_> = (0..CONNS as u64)
        .map(|id| {
            purloin::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.write_all(&id.to_le_bytes()).unwrap();
                let mut back = [0u8; 8];
                c.read_exact(&mut back).unwrap();
                assert_eq!(u64::from_le_bytes(back), id);
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}
