//! The graceful-shutdown example under a real SIGTERM: this test binary re-runs itself as a
//! child that serves (`examples/graceful_shutdown.rs`, the same code), connects, sends the
//! child SIGTERM, checks that the open connection still works while new ones are refused,
//! closes it, and expects exit status 0.
#![cfg(not(loom))]

#[allow(dead_code)]
#[path = "../examples/graceful_shutdown.rs"]
mod graceful;

mod net_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};

use net_common::watchdog;

const CHILD: &str = "PURLOIN_GRACEFUL_CHILD";

/// The child's body: serves until SIGTERM (does nothing when run as a normal test).
#[test]
fn graceful_child() {
    if std::env::var_os(CHILD).is_some() {
        // Bounded even if the parent dies without signalling (a watchdog abort).
        std::thread::spawn(|| {
            std::thread::sleep(std::time::Duration::from_secs(120));
            std::process::exit(3);
        });
        std::process::exit(graceful::serve("127.0.0.1:0".parse().unwrap()));
    }
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let _w = watchdog("sigterm_drains_and_exits_zero", 120);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "graceful_child", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut expect_line = |prefix: &str| -> String {
        loop {
            let mut line = String::new();
            assert_ne!(out.read_line(&mut line).unwrap(), 0, "the child ended before {prefix:?}");
            // libtest prints "test graceful_child ... " without a newline first.
            if let Some(at) = line.find(prefix) {
                return line[at + prefix.len()..].trim_end().to_owned();
            }
        }
    };
    let addr: SocketAddr = expect_line("listening on ").parse().unwrap();
    let mut conn = TcpStream::connect(addr).unwrap();
    let mut back = [0u8; 5];
    conn.write_all(b"hello").unwrap();
    conn.read_exact(&mut back).unwrap(); // accepted and served
    assert_eq!(&back, b"hello");

    // SAFETY: plain system call to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    assert_eq!(expect_line("SIGTERM: draining "), "1 connections");
    // Draining: the open connection is still served; the listener is closed.
    conn.write_all(b"after").unwrap();
    conn.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"after");
    let refused = TcpStream::connect(addr).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    drop(conn);
    expect_line("drained");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
}
