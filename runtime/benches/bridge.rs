//! The tokio bridge (`cargo bench -p purloin --features tokio --bench bridge`).
//!
//! - `bridge_round_trip`: one bridged future from a green thread (`purloin::tokio::block_on`,
//!   polled on the green thread with tokio's context entered): a ready future; a future woken
//!   once from a tokio thread (`purloin/wake`: a task spawned on tokio completes a oneshot it
//!   awaits), and `tokio::time::sleep(0)`. `tokio/wake` is that same future awaited from a
//!   task on a tokio runtime of its own: the tokio-side floor.
//! - `http_100_conns`: HTTP/1 request/response over loopback with hyper, 100 keep-alive
//!   connections, each making the same number of sequential requests; one element is one
//!   request. Server: hyper on a 1-thread tokio runtime. Clients: (a) `tokio`: 100 tokio tasks
//!   on a default multi-threaded tokio runtime of their own; (b) `purloin_bridge`: 100 green
//!   threads (2 workers), each request one `purloin::tokio::block_on` on the bridge's own
//!   tokio runtime. Each variant's
//!   per-request p50 and p99 latency over all its iterations is printed at the end (criterion
//!   itself reports batch means), with the server's and the clients' CPU time per request
//!   (threads `bench-server`; `bench-tokio` for (a); `purloin-*`, the bridge's tokio runtime and
//!   purloin's threads, for (b)).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::convert::Infallible;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

const CONNS: u64 = 100;

/// Per-request latencies (ns) of one variant, over all of criterion's iterations.
type Latencies = Arc<Mutex<Vec<u64>>>;

/// CPU time (user + system) so far of this process's threads whose name starts with one of
/// `prefixes` (from `/proc/self/task/*/stat`; threads that exited are not counted).
fn thread_cpu(prefixes: &[&str]) -> Duration {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let dir = task.path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else { continue };
        if !prefixes.iter().any(|p| comm.starts_with(p)) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else { continue };
        // After the ")" that ends the name: field 3 (state) first; utime and stime are
        // fields 14 and 15.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().collect();
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    Duration::from_nanos(ticks * 1_000_000_000 / hz)
}

/// Threads of the server, and of the clients (the bridge's tokio runtime, purloin's workers
/// and monitor).
const SERVER: &[&str] = &["bench-server"];
const CLIENT: &[&str] = &["purloin-", "bench-tokio"];

/// Prints the median and the 99th percentile of `lat` (criterion reports means of batches),
/// and the server's and the clients' CPU time per request over the variant's whole run.
fn report(name: &str, lat: &Latencies, server_cpu: Duration, client_cpu: Duration) {
    let mut v = lat.lock().unwrap();
    v.sort_unstable();
    if v.is_empty() {
        return;
    }
    let at = |q: f64| Duration::from_nanos(v[((v.len() - 1) as f64 * q) as usize]);
    let n = v.len() as u32;
    eprintln!(
        "http_100_conns/{name}: {n} requests, latency p50 {:?} p99 {:?}, CPU per request: \
         server {:?}, clients {:?}",
        at(0.50),
        at(0.99),
        server_cpu / n,
        client_cpu / n
    );
}

/// A default multi-threaded tokio runtime of the bench's own (threads `bench-tokio`), not the
/// bridge's: the tokio-only variants measure tokio alone.
fn tokio_alone() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("bench-tokio")
        .enable_all()
        .build()
        .unwrap()
}

fn purloin_rt() -> purloin::Runtime {
    purloin::runtime::Builder::new().workers(2).build().unwrap()
}

fn round_trip(c: &mut Criterion) {
    let mut g = c.benchmark_group("bridge_round_trip");
    let rt = purloin_rt();
    g.bench_function("purloin/ready", |b| {
        b.iter_custom(|n| {
            rt.block_on(move || {
                let start = Instant::now();
                for _ in 0..n {
                    black_box(purloin::tokio::block_on(async { black_box(1u64) }));
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("purloin/sleep0", |b| {
        b.iter_custom(|n| {
            rt.block_on(move || {
                let start = Instant::now();
                for _ in 0..n {
                    purloin::tokio::block_on(async {
                        tokio::time::sleep(Duration::ZERO).await;
                    });
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("purloin/wake", |b| {
        b.iter_custom(|n| {
            rt.block_on(move || {
                let start = Instant::now();
                for _ in 0..n {
                    purloin::tokio::block_on(woken_from_tokio());
                }
                start.elapsed()
            })
        })
    });
    let tokio_rt = tokio_alone();
    let handle = tokio_rt.handle();
    g.bench_function("tokio/wake", |b| {
        b.iter_custom(|n| {
            handle
                .block_on(handle.spawn(async move {
                    let start = Instant::now();
                    for _ in 0..n {
                        woken_from_tokio().await;
                    }
                    start.elapsed()
                }))
                .unwrap()
        })
    });
    g.finish();
}

/// A future woken once from a tokio thread: a task spawned there completes a oneshot.
async fn woken_from_tokio() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move { tx.send(black_box(1u64)) });
    black_box(rx.await.unwrap());
}

/// An echo-the-path server on its own 1-thread tokio runtime; returns its address.
fn start_server() -> (tokio::runtime::Runtime, SocketAddr) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-server")
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let service = service_fn(|req: Request<hyper::body::Incoming>| async move {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(
                        req.uri().path().to_owned(),
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (rt, addr)
}

async fn connect(addr: SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    sender
}

async fn request(sender: &mut SendRequest<Empty<Bytes>>) -> usize {
    // The connection task may still be finishing the previous exchange.
    sender.ready().await.unwrap();
    let req = Request::get("/x")
        .header(hyper::header::HOST, "localhost")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let res = sender.send_request(req).await.unwrap();
    res.into_body().collect().await.unwrap().to_bytes().len()
}

fn http(c: &mut Criterion) {
    let (_server, addr) = start_server();
    let mut g = c.benchmark_group("http_100_conns");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20);
    // (a) is hyper on tokio alone.
    let tokio_rt = tokio_alone();
    let handle = tokio_rt.handle();
    // One criterion iteration is CONNS requests (one per connection): time / CONNS per request.
    // Timed from when all connections are up (a barrier) to when the last one is done.
    let lat_tokio = Latencies::default();
    let (s0, c0) = (thread_cpu(SERVER), thread_cpu(CLIENT));
    g.bench_function("tokio", |b| {
        b.iter_custom(|n| {
            let rounds = n.div_ceil(CONNS);
            let lat = lat_tokio.clone();
            let ready = Arc::new(tokio::sync::Barrier::new(CONNS as usize));
            handle.block_on(async move {
                let tasks: Vec<_> = (0..CONNS)
                    .map(|_| {
                        let (lat, ready) = (lat.clone(), ready.clone());
                        tokio::spawn(async move {
                            let mut s = connect(addr).await;
                            ready.wait().await;
                            let start = Instant::now();
                            let mut mine = Vec::with_capacity(rounds as usize);
                            for _ in 0..rounds {
                                let t = Instant::now();
                                black_box(request(&mut s).await);
                                mine.push(t.elapsed().as_nanos() as u64);
                            }
                            lat.lock().unwrap().extend(mine);
                            start.elapsed()
                        })
                    })
                    .collect();
                let mut longest = Duration::ZERO;
                for t in tasks {
                    longest = longest.max(t.await.unwrap());
                }
                longest.mul_f64(n as f64 / (rounds * CONNS) as f64)
            })
        })
    });
    let (tokio_server, tokio_client) = (thread_cpu(SERVER) - s0, thread_cpu(CLIENT) - c0);
    let rt = purloin_rt();
    let lat_bridge = Latencies::default();
    let (s0, c0) = (thread_cpu(SERVER), thread_cpu(CLIENT));
    g.bench_function("purloin_bridge", |b| {
        b.iter_custom(|n| {
            let rounds = n.div_ceil(CONNS);
            let lat = lat_bridge.clone();
            let ready = Arc::new(purloin::sync::Barrier::new(CONNS as usize));
            rt.block_on(move || {
                let threads: Vec<_> = (0..CONNS)
                    .map(|_| {
                        let (lat, ready) = (lat.clone(), ready.clone());
                        purloin::spawn(move || {
                            let mut s = purloin::tokio::block_on(connect(addr));
                            ready.wait();
                            let start = Instant::now();
                            let mut mine = Vec::with_capacity(rounds as usize);
                            for _ in 0..rounds {
                                let t = Instant::now();
                                let len = purloin::tokio::block_on(request(&mut s));
                                mine.push(t.elapsed().as_nanos() as u64);
                                black_box(len);
                            }
                            lat.lock().unwrap().extend(mine);
                            start.elapsed()
                        })
                    })
                    .collect();
                let mut longest = Duration::ZERO;
                for t in threads {
                    longest = longest.max(t.join().unwrap());
                }
                longest.mul_f64(n as f64 / (rounds * CONNS) as f64)
            })
        })
    });
    let (bridge_server, bridge_client) = (thread_cpu(SERVER) - s0, thread_cpu(CLIENT) - c0);
    g.finish();
    report("tokio", &lat_tokio, tokio_server, tokio_client);
    report("purloin_bridge", &lat_bridge, bridge_server, bridge_client);
}

criterion_group!(benches, round_trip, http);
criterion_main!(benches);
