//! An echo server that shuts down gracefully: on SIGTERM (or SIGINT) it stops accepting,
//! lets every open connection finish, and exits with status 0.
//!
//! ```text
//! cargo run -p purloin --example graceful_shutdown -- [--addr 127.0.0.1:0]
//! # in another shell: talk to it, then
//! kill -TERM <pid>
//! ```
//!
//! It prints `listening on <addr>`, then `draining <n> connections` when the signal
//! arrives, and `drained` before it exits. The `signal_graceful` test runs this file's
//! [`serve`] in a child process and sends it SIGTERM.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use purloin::net::{SocketClosed, TcpListener};
use purloin::signal::{Signal, Signals};
use purloin::sync::WaitGroup;

fn main() {
    let mut addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--addr", Some(a)) => addr = a.parse().expect("--addr takes IP:PORT"),
            _ => {
                eprintln!("usage: graceful_shutdown [--addr 127.0.0.1:PORT]");
                std::process::exit(2);
            }
        }
    }
    std::process::exit(serve(addr));
}

fn say(line: &str) {
    println!("{line}");
    std::io::stdout().flush().unwrap();
}

/// Serves on `addr` until SIGTERM or SIGINT, drains, and returns the exit status (0).
pub fn serve(addr: SocketAddr) -> i32 {
    // Watch the signals before announcing the address, so that a SIGTERM sent by whoever
    // read the announcement is ours, not the default action's.
    let signals = Signals::new(&[Signal::TERM, Signal::INT]).expect("install signal handlers");
    let rt = purloin::runtime::Builder::new().workers(2).build().expect("runtime");
    rt.block_on(|| {
        let listener = Arc::new(TcpListener::bind(addr).expect("bind"));
        let open = Arc::new(WaitGroup::new());
        let acceptor = {
            let (listener, open) = (listener.clone(), open.clone());
            purloin::spawn(move || {
                loop {
                    match listener.accept() {
                        Ok((conn, _)) => {
                            open.add(1);
                            let open = open.clone();
                            purloin::spawn(move || {
                                echo(conn);
                                open.done();
                            });
                        }
                        Err(e) if SocketClosed::is(&e) => return,
                        // A failed accept (e.g. the open-file limit) should not end the server.
                        Err(e) => eprintln!("accept: {e}"),
                    }
                }
            })
        };
        say(&format!("listening on {}", listener.local_addr().unwrap()));
        let sig = signals.recv();
        // Stop accepting: the acceptor's `accept` fails with SocketClosed and it returns.
        listener.close();
        acceptor.join().unwrap();
        say(&format!("{sig}: draining {} connections", open.count()));
        open.wait();
        say("drained");
    });
    0
}

fn echo(mut conn: purloin::net::TcpStream) {
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
