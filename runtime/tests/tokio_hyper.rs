//! A real tokio-based crate through the bridge: a hyper (hyper-util) HTTP/1 server and 1,000
//! concurrent clients over loopback, every connection driven from its own purloin green thread
//! (`purloin::tokio::block_on`); every request answered exactly once.
#![cfg(all(not(loom), feature = "tokio"))]

#[path = "rt_common/mod.rs"]
mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

const CLIENTS: usize = 1000;

/// Raises the soft open-file limit to at least `need` (two descriptors per connection).
fn raise_nofile(need: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid rlimit for getrlimit to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    if lim.rlim_cur >= need {
        return;
    }
    let want = libc::rlimit { rlim_cur: need.min(lim.rlim_max), rlim_max: lim.rlim_max };
    // SAFETY: a valid rlimit; lowering nothing.
    let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0;
    assert!(
        ok && want.rlim_cur >= need,
        "RLIMIT_NOFILE is {} (hard {}): this test needs {need} descriptors; raise the hard limit \
         (ulimit -Hn)",
        lim.rlim_cur,
        lim.rlim_max
    );
}

#[test]
fn hyper_client_and_server_1000_concurrent_requests() {
    let _w = common::watchdog("hyper 1000", Duration::from_secs(300));
    raise_nofile(2 * CLIENTS as u64 + 256);
    // A backlog for all clients at once (tokio's `bind` uses 1,024): connects that overflow
    // it are retried by the kernel after 1, 2, 4, ... s.
    let listener = Arc::new(
        purloin::tokio::block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind("127.0.0.1:0".parse().unwrap())?;
            socket.listen(4096)
        })
        .expect("listen"),
    );
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(AtomicUsize::new(0));

    // The server: a green thread accepts, and each connection is served from a green thread.
    let s = served.clone();
    let server = purloin::spawn(move || {
        let mut conns = Vec::with_capacity(CLIENTS);
        for _ in 0..CLIENTS {
            let l = listener.clone();
            let (stream, _) = purloin::tokio::block_on(async move { l.accept().await }).unwrap();
            let s = s.clone();
            conns.push(purloin::spawn(move || {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    s.fetch_add(1, Ordering::SeqCst);
                    let path = req.uri().path().to_owned();
                    async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(path)))) }
                });
                purloin::tokio::block_on(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                )
            }));
        }
        for c in conns {
            c.join().unwrap().expect("a connection served without error");
        }
    });

    // The clients: all connected before any sends (a barrier), so 1,000 are in flight at once.
    let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let b = barrier.clone();
            purloin::spawn(move || {
                purloin::tokio::block_on(async move {
                    let stream = TcpStream::connect(addr).await.expect("connect");
                    let (mut sender, conn) =
                        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
                    let conn = tokio::spawn(conn);
                    b.wait().await;
                    let req = Request::get(format!("/{i}"))
                        .header(hyper::header::HOST, "localhost")
                        .body(Empty::<Bytes>::new())
                        .unwrap();
                    let res = sender.send_request(req).await?;
                    let body = res.into_body().collect().await?.to_bytes();
                    drop(sender);
                    conn.await.unwrap()?;
                    Ok::<_, hyper::Error>(body)
                })
            })
        })
        .collect();

    let counts: Vec<AtomicU32> = (0..CLIENTS).map(|_| AtomicU32::new(0)).collect();
    for (i, c) in clients.into_iter().enumerate() {
        let body = c.join().unwrap().expect("request answered");
        let n: usize = std::str::from_utf8(&body).unwrap()[1..].parse().unwrap();
        assert_eq!(n, i, "client {i} got the answer to its own request");
        counts[n].fetch_add(1, Ordering::Relaxed);
    }
    server.join().unwrap();
    assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "exactly once each");
    assert_eq!(served.load(Ordering::SeqCst), CLIENTS);
}
