//! purloin::net against tokio, may and std threads, client and server in one process on
//! loopback (`cargo xtask bench -p purloin net`):
//!
//! - `tcp_echo_rtt/1conn_100B`: one connection, one client doing request/response round trips
//!   of 100 bytes with an echo server (time per round trip: the netpoller's wake-up path end
//!   to end, twice per round trip);
//! - `tcp_echo_concurrent/100conns_100B`: 100 connections, each client doing one round trip
//!   per iteration, all at once (time per round of 100 round trips).
//!
//! Each runtime gets 2 workers and runs both the clients and the servers. The cross-process
//! comparison with one client for every server (the table) is the `echo_client`
//! example's `--compare` mode.
#![cfg(not(loom))]
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

const MSG: usize = 100;
const CONNS: usize = 100;

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

// ---- purloin ---------------------------------------------------------------------------------

fn purloin_rt() -> purloin::Runtime {
    purloin::runtime::Builder::new().workers(2).build().unwrap()
}

/// Starts an echo server on `rt` (a green thread per connection).
fn purloin_server(rt: &purloin::Runtime) -> SocketAddr {
    let listener = purloin::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            conn.set_nodelay(true).unwrap();
            purloin::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = conn.read(&mut buf) {
                    if conn.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn purloin_client(addr: SocketAddr) -> purloin::net::TcpStream {
    let c = purloin::net::TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    c
}

fn round_trip<S>(mut s: S, buf: &mut [u8; MSG])
where
    S: Read + Write,
{
    s.write_all(buf).unwrap();
    s.read_exact(buf).unwrap();
}

// ---- tokio -----------------------------------------------------------------------------------

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn tokio_server(rt: &tokio::runtime::Runtime) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                conn.set_nodelay(true).unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = conn.read(&mut buf).await {
                        if conn.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    })
}

async fn tokio_round_trip(s: &mut tokio::net::TcpStream, buf: &mut [u8; MSG]) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(buf).await.unwrap();
    s.read_exact(buf).await.unwrap();
}

// ---- may -------------------------------------------------------------------------------------

fn may_server() -> SocketAddr {
    may::config().set_workers(2);
    let listener = may::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    may::go!(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            conn.set_nodelay(true).unwrap();
            may::go!(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = conn.read(&mut buf) {
                    if conn.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

// ---- std -------------------------------------------------------------------------------------

fn std_server() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            conn.set_nodelay(true).unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = conn.read(&mut buf) {
                    if conn.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

// ---- benches ---------------------------------------------------------------------------------

fn rtt(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_echo_rtt");
    let id = "1conn_100B";

    let rt = purloin_rt();
    let addr = purloin_server(&rt);
    let client = purloin_client(addr);
    g.bench_function(format!("purloin/{id}"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(|| {
                let mut buf = [7u8; MSG];
                let start = Instant::now();
                for _ in 0..iters {
                    round_trip(&client, &mut buf);
                }
                start.elapsed()
            })
        })
    });
    drop(client);

    let trt = tokio_rt();
    let taddr = tokio_server(&trt);
    let mut tclient = Some(trt.block_on(async {
        let s = tokio::net::TcpStream::connect(taddr).await.unwrap();
        s.set_nodelay(true).unwrap();
        s
    }));
    g.bench_function(format!("tokio/{id}"), |b| {
        b.iter_custom(|iters| {
            let mut s = tclient.take().unwrap();
            let task = trt.spawn(async move {
                let mut buf = [7u8; MSG];
                let start = Instant::now();
                for _ in 0..iters {
                    tokio_round_trip(&mut s, &mut buf).await;
                }
                (s, start.elapsed())
            });
            let (s, d) = trt.block_on(task).unwrap();
            tclient = Some(s);
            d
        })
    });

    let maddr = may_server();
    let mut mclient = Some(may::net::TcpStream::connect(maddr).unwrap());
    mclient.as_ref().unwrap().set_nodelay(true).unwrap();
    g.bench_function(format!("may/{id}"), |b| {
        b.iter_custom(|iters| {
            let mut s = mclient.take().unwrap();
            let (s, d) = may::go!(move || {
                let mut buf = [7u8; MSG];
                let start = Instant::now();
                for _ in 0..iters {
                    round_trip(&mut s, &mut buf);
                }
                (s, start.elapsed())
            })
            .join()
            .unwrap();
            mclient = Some(s);
            d
        })
    });

    let saddr = std_server();
    let sclient = std::net::TcpStream::connect(saddr).unwrap();
    sclient.set_nodelay(true).unwrap();
    g.bench_function(format!("std/{id}"), |b| {
        b.iter_custom(|iters| {
            let mut buf = [7u8; MSG];
            let start = Instant::now();
            for _ in 0..iters {
                round_trip(&sclient, &mut buf);
            }
            start.elapsed()
        })
    });
    g.finish();
}

fn concurrent(c: &mut Criterion) {
    let mut g = c.benchmark_group("tcp_echo_concurrent");
    let id = "100conns_100B";

    let rt = purloin_rt();
    let addr = purloin_server(&rt);
    let clients: Arc<Vec<purloin::net::TcpStream>> =
        Arc::new((0..CONNS).map(|_| purloin_client(addr)).collect());
    g.bench_function(format!("purloin/{id}"), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            let hs: Vec<_> = (0..CONNS)
                .map(|i| {
                    let cs = clients.clone();
                    rt.spawn(move || {
                        let mut buf = [7u8; MSG];
                        for _ in 0..iters {
                            round_trip(&cs[i], &mut buf);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            start.elapsed()
        })
    });

    let trt = tokio_rt();
    let taddr = tokio_server(&trt);
    let mut tclients: Option<Vec<tokio::net::TcpStream>> = Some(trt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..CONNS {
            let s = tokio::net::TcpStream::connect(taddr).await.unwrap();
            s.set_nodelay(true).unwrap();
            v.push(s);
        }
        v
    }));
    g.bench_function(format!("tokio/{id}"), |b| {
        b.iter_custom(|iters| {
            let conns = tclients.take().unwrap();
            let start = Instant::now();
            let back = trt.block_on(async {
                let hs: Vec<_> = conns
                    .into_iter()
                    .map(|mut s| {
                        tokio::spawn(async move {
                            let mut buf = [7u8; MSG];
                            for _ in 0..iters {
                                tokio_round_trip(&mut s, &mut buf).await;
                            }
                            s
                        })
                    })
                    .collect();
                let mut back = Vec::new();
                for h in hs {
                    back.push(h.await.unwrap());
                }
                back
            });
            let d = start.elapsed();
            tclients = Some(back);
            d
        })
    });

    let maddr = may_server();
    let mut mclients: Option<Vec<may::net::TcpStream>> = Some(
        (0..CONNS)
            .map(|_| {
                let s = may::net::TcpStream::connect(maddr).unwrap();
                s.set_nodelay(true).unwrap();
                s
            })
            .collect(),
    );
    g.bench_function(format!("may/{id}"), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            let hs: Vec<_> = mclients
                .take()
                .unwrap()
                .into_iter()
                .map(|mut s| {
                    may::go!(move || {
                        let mut buf = [7u8; MSG];
                        for _ in 0..iters {
                            round_trip(&mut s, &mut buf);
                        }
                        s
                    })
                })
                .collect();
            let back: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
            let d = start.elapsed();
            mclients = Some(back);
            d
        })
    });

    let saddr = std_server();
    let sclients: Arc<Vec<std::net::TcpStream>> = Arc::new(
        (0..CONNS)
            .map(|_| {
                let s = std::net::TcpStream::connect(saddr).unwrap();
                s.set_nodelay(true).unwrap();
                s
            })
            .collect(),
    );
    g.bench_function(format!("std/{id}"), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            let hs: Vec<_> = (0..CONNS)
                .map(|i| {
                    let cs = sclients.clone();
                    std::thread::spawn(move || {
                        let mut buf = [7u8; MSG];
                        for _ in 0..iters {
                            round_trip(&cs[i], &mut buf);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            start.elapsed()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = rtt, concurrent
}
criterion_main!(benches);
