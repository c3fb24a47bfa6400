//! An echo server on loopback, one green thread per connection — or, for comparison, the
//! same server written with tokio, may or std threads.
//!
//! ```text
//! cargo run --release --example echo_server --
//!     [--server purloin|purloin-nomon|tokio|may|std|epoll] [--addr 127.0.0.1:7878]
//!     [--workers 2] [--for 300] [--unix PATH]
//! ```
//!
//! `--unix PATH` serves on a Unix domain socket at PATH instead (purloin, purloin-nomon,
//! tokio, std and epoll; it prints `listening on unix:PATH`).
//!
//! It prints `listening on <addr>` (the address really bound: port 0 picks a free one),
//! serves until `--for` seconds have passed (default 300), then exits. Only loopback
//! addresses are accepted: this is a benchmark target, not a server to expose. Drive it with
//! the `echo_client` example, which can also start it for you (`--spawn-server`).
//!
//! The shapes compared (every server echoes whatever it reads, with `TCP_NODELAY` on):
//! - `purloin`: a runtime with `--workers` workers; a green thread accepts and spawns a green
//!   thread per connection that loops `read` → `write_all` (blocking-style code).
//!   `purloin-nomon` is the same with the scheduler's monitor thread off
//!   (`Builder::monitor(false)`: no blocking handoff, no long-runner reports).
//! - `tokio`: a multi-thread runtime with `--workers` workers; `TcpListener` + `spawn` per
//!   connection, `read` → `write_all` (tokio's echo example).
//! - `may`: `--workers` workers; `may::net::TcpListener` + `go!` per connection (may's echo
//!   example).
//! - `std`: a thread per connection.
//! - `epoll`: no runtime, the floor a readiness-based server can reach: `--workers` threads,
//!   each with its own edge-triggered epoll instance; the accepting thread deals connections
//!   out in turn, and a thread echoes every ready connection until a short read.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Args {
    server: String,
    addr: SocketAddr,
    workers: usize,
    run_for: Duration,
    unix: Option<PathBuf>,
}

fn usage() -> ! {
    eprintln!(
        "usage: echo_server [--server purloin|purloin-nomon|tokio|may|std|epoll] \
         [--addr 127.0.0.1:PORT] \
         [--workers N] [--for SECONDS] [--unix PATH]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        server: "purloin".into(),
        addr: "127.0.0.1:7878".parse().unwrap(),
        workers: 2,
        run_for: Duration::from_secs(300),
        unix: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--server" => a.server = value(),
            "--addr" => a.addr = value().parse().unwrap_or_else(|_| usage()),
            "--workers" => a.workers = value().parse().unwrap_or_else(|_| usage()),
            "--for" => a.run_for = Duration::from_secs(value().parse().unwrap_or_else(|_| usage())),
            "--unix" => a.unix = Some(value().into()),
            _ => usage(),
        }
    }
    if !a.addr.ip().is_loopback() {
        eprintln!("echo_server: {} is not a loopback address; use 127.0.0.1 or [::1]", a.addr);
        std::process::exit(2);
    }
    if a.workers == 0 {
        eprintln!("echo_server: --workers must be at least 1");
        std::process::exit(2);
    }
    a
}

fn announce(addr: SocketAddr) {
    println!("listening on {addr}");
    std::io::stdout().flush().unwrap();
}

fn main() {
    let args = parse_args();
    match &args.unix {
        Some(path) => serve_unix(&args.server, path, args.workers, args.run_for),
        None => serve(&args.server, args.addr, args.workers, args.run_for),
    }
}

/// Runs server `name` on `addr` (loopback) for `run_for`, then exits the process. Also used
/// by `echo_client --spawn-server` and `--compare` (which include this file as a module).
pub fn serve(name: &str, addr: SocketAddr, workers: usize, run_for: Duration) {
    // Bounded in time whatever happens to the client.
    std::thread::spawn(move || {
        std::thread::sleep(run_for);
        eprintln!("echo_server: --for elapsed; exiting");
        std::process::exit(0);
    });
    let args = Args { server: name.into(), addr, workers, run_for, unix: None };
    match name {
        "purloin" => purloin_server(&args, true),
        "purloin-nomon" => purloin_server(&args, false),
        "tokio" => tokio_server(&args),
        "may" => may_server(&args),
        "std" => std_server(&args),
        "epoll" => {
            let listener = std::net::TcpListener::bind(args.addr).unwrap();
            announce(listener.local_addr().unwrap());
            epoll_server(
                workers,
                listener.incoming().filter_map(|c| c.ok()).map(|c| {
                    c.set_nodelay(true).unwrap();
                    std::os::fd::OwnedFd::from(c)
                }),
            );
        }
        other => {
            eprintln!(
                "echo_server: unknown server {other:?} (purloin, purloin-nomon, tokio, may, std \
                 or epoll)"
            );
            std::process::exit(2);
        }
    }
}

fn purloin_server(args: &Args, monitor: bool) {
    let rt =
        purloin::runtime::Builder::new().workers(args.workers).monitor(monitor).build().unwrap();
    rt.block_on(|| {
        let listener = purloin::net::TcpListener::bind(args.addr).unwrap();
        announce(listener.local_addr().unwrap());
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            conn.set_nodelay(true).unwrap();
            purloin::spawn(move || echo_loop(conn));
        }
    });
}

fn tokio_server(args: &Args) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr).await.unwrap();
        announce(listener.local_addr().unwrap());
        loop {
            let Ok((conn, _)) = listener.accept().await else { continue };
            conn.set_nodelay(true).unwrap();
            tokio::spawn(tokio_echo_loop(conn));
        }
    });
}

fn may_server(args: &Args) {
    may::config().set_workers(args.workers);
    let listener = may::net::TcpListener::bind(args.addr).unwrap();
    announce(listener.local_addr().unwrap());
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        conn.set_nodelay(true).unwrap();
        may::go!(move || echo_loop(conn));
    }
}

fn std_server(args: &Args) {
    let listener = std::net::TcpListener::bind(args.addr).unwrap();
    announce(listener.local_addr().unwrap());
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        conn.set_nodelay(true).unwrap();
        std::thread::spawn(move || echo_loop(conn));
    }
}

/// The per-connection loop of the blocking-style servers: echo until end-of-file or error.
fn echo_loop(mut conn: impl Read + Write) {
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

/// tokio's per-connection loop (its echo example).
async fn tokio_echo_loop(mut conn: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if conn.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Like [`serve`], on a Unix domain socket at `path` (a stale socket file there is removed
/// first). Servers: purloin, purloin-nomon, tokio, std, epoll. Prints `listening on unix:PATH`.
pub fn serve_unix(name: &str, path: &Path, workers: usize, run_for: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(run_for);
        eprintln!("echo_server: --for elapsed; exiting");
        std::process::exit(0);
    });
    let _ = std::fs::remove_file(path);
    let announce_unix = || {
        println!("listening on unix:{}", path.display());
        std::io::stdout().flush().unwrap();
    };
    match name {
        "purloin" | "purloin-nomon" => {
            let rt = purloin::runtime::Builder::new()
                .workers(workers)
                .monitor(name == "purloin")
                .build()
                .unwrap();
            rt.block_on(|| {
                let listener = purloin::net::UnixListener::bind(path).unwrap();
                announce_unix();
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    purloin::spawn(move || echo_loop(conn));
                }
            });
        }
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let listener = tokio::net::UnixListener::bind(path).unwrap();
                announce_unix();
                loop {
                    let Ok((conn, _)) = listener.accept().await else { continue };
                    tokio::spawn(tokio_echo_loop(conn));
                }
            });
        }
        "std" => {
            let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
            announce_unix();
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                std::thread::spawn(move || echo_loop(conn));
            }
        }
        "epoll" => {
            let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
            announce_unix();
            epoll_server(workers, listener.incoming().filter_map(|c| c.ok()).map(Into::into));
        }
        other => {
            eprintln!(
                "echo_server: no Unix-socket variant of server {other:?} (purloin, \
                 purloin-nomon, tokio, std or epoll)"
            );
            std::process::exit(2);
        }
    }
}

/// The `epoll` server: `workers` threads, each looping on its own edge-triggered epoll
/// instance; connections from `conns` are dealt out in turn and never move.
fn epoll_server(workers: usize, conns: impl Iterator<Item = std::os::fd::OwnedFd>) {
    use std::os::fd::{AsRawFd, IntoRawFd};
    // SAFETY: plain system calls on descriptors this function creates and owns.
    let eps: Vec<i32> = (0..workers).map(|_| unsafe { libc::epoll_create1(0) }).collect();
    assert!(eps.iter().all(|&ep| ep >= 0), "epoll_create1: {}", std::io::Error::last_os_error());
    for &ep in &eps {
        std::thread::spawn(move || epoll_loop(ep));
    }
    for (i, conn) in conns.enumerate() {
        let fd = conn.as_raw_fd();
        // SAFETY: `fd` is a valid socket we own.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        let mut ev =
            libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLET) as u32, u64: fd as u64 };
        // SAFETY: both descriptors are valid; `ev` outlives the call.
        let r = unsafe { libc::epoll_ctl(eps[i % workers], libc::EPOLL_CTL_ADD, fd, &mut ev) };
        assert_eq!(r, 0, "epoll_ctl: {}", std::io::Error::last_os_error());
        // The loop owns it from now on and closes it when the peer does.
        let _ = conn.into_raw_fd();
    }
}

fn epoll_loop(ep: i32) {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: `events` is writable for its length.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        for ev in &events[..n.max(0) as usize] {
            let fd = ev.u64 as i32;
            loop {
                // SAFETY: `buf` is writable for its length; `fd` is open until we close it.
                let got = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                if got <= 0 {
                    if got == 0
                        || std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock
                    {
                        // SAFETY: closing the descriptor this loop owns (removes it from epoll).
                        unsafe { libc::close(fd) };
                    }
                    break;
                }
                let mut sent = 0;
                while sent < got as usize {
                    // SAFETY: `buf[sent..got]` is initialised.
                    let w = unsafe {
                        libc::write(fd, buf[sent..].as_ptr().cast(), got as usize - sent)
                    };
                    if w > 0 {
                        sent += w as usize;
                    } else {
                        // A full send buffer (rare with echoes this small): wait for room.
                        let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
                        // SAFETY: one valid pollfd.
                        unsafe { libc::poll(&mut p, 1, -1) };
                    }
                }
                if (got as usize) < buf.len() {
                    break; // a short read: drained until the next edge
                }
            }
        }
    }
}
