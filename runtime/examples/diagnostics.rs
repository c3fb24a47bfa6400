//! A service that explains itself: it serves its own metrics in the Prometheus text format
//! and a grouped dump of its green threads over HTTP, keeps a flight recorder of the last
//! seconds of scheduling, and writes it to a file when it gets SIGUSR1.
//!
//! ```text
//! cargo run --release --example diagnostics -- [--addr 127.0.0.1:9464] [--for 60] [--dir DIR]
//! ```
//!
//! It prints the address it really bound (port 0 picks a free one) and its process id, then
//! runs a small request workload (handlers labelled with their route, each doing some work, a
//! round trip to a backend pool and a short sleep) until `--for` seconds have passed. Meanwhile:
//!
//! ```text
//! curl -s http://127.0.0.1:9464/metrics          # Prometheus text: counters, gauges,
//!                                                # purloin_sched_latency_seconds histogram
//! curl -s http://127.0.0.1:9464/debug/threads    # green threads grouped by stack and labels
//! kill -USR1 <pid>                               # writes DIR/purloin-flight-<pid>-usr1-<n>.json
//! ```
//!
//! Open the flight-recorder file in <https://ui.perfetto.dev>: each run slice carries the
//! green thread's labels and the place it was spawned. Only loopback addresses are accepted:
//! the pages show the program's internals and are not meant to be exposed.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use purloin::net::{TcpListener, TcpStream};
use purloin::signal::{Signal, Signals};
use purloin::sync::channel;

struct Args {
    addr: SocketAddr,
    run_for: Duration,
    dir: PathBuf,
}

fn usage() -> ! {
    eprintln!("usage: diagnostics [--addr 127.0.0.1:PORT] [--for SECONDS] [--dir DIR]");
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        addr: "127.0.0.1:9464".parse().unwrap(),
        run_for: Duration::from_secs(60),
        dir: std::env::temp_dir(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--addr" => a.addr = value.parse().unwrap_or_else(|_| usage()),
            "--for" => a.run_for = Duration::from_secs(value.parse().unwrap_or_else(|_| usage())),
            "--dir" => a.dir = value.into(),
            _ => usage(),
        }
    }
    if !a.addr.ip().is_loopback() {
        eprintln!("diagnostics: {} is not a loopback address", a.addr);
        std::process::exit(2);
    }
    a
}

fn main() {
    let args = parse_args();
    // The flight recorder first, so that it sees the runtime from its start: the last 5 s, at
    // most 32 MiB of records.
    let recorder = purloin::trace::flight_recorder()
        .max_age(Duration::from_secs(5))
        .max_bytes(32 << 20)
        .dir(args.dir.clone());
    recorder.start().expect("start the flight recorder");

    let started = Arc::new(AtomicU64::new(0));
    let counted = started.clone();
    let rt = purloin::runtime::Builder::new()
        .workers(2)
        .on_worker_start(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
        })
        .build()
        .expect("build the runtime");

    rt.block_on(|| {
        let listener = TcpListener::bind(args.addr).expect("bind the metrics address");
        let addr = listener.local_addr().unwrap();
        println!("listening on http://{addr}/metrics and http://{addr}/debug/threads");
        println!(
            "pid {}: `kill -USR1 {}` writes a flight-recorder file into {}",
            std::process::id(),
            std::process::id(),
            args.dir.display()
        );

        let deadline = Instant::now() + args.run_for;
        purloin::spawn(move || serve(listener));
        let dir = args.dir.clone();
        purloin::spawn(move || write_on_signal(recorder, dir));
        run_workload(deadline);
        println!(
            "ran for {:?} on {} worker threads; exiting",
            args.run_for,
            started.load(Ordering::Relaxed)
        );
    });
}

/// The HTTP side: one green thread per connection, one request per connection.
fn serve(listener: TcpListener) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                purloin::spawn(move || {
                    if let Err(e) = answer(stream) {
                        eprintln!("diagnostics: a metrics request failed: {e}");
                    }
                });
            }
            Err(e) => eprintln!("diagnostics: accept: {e}"),
        }
    }
}

fn answer(stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Read the headers up to the blank line; a GET has no body.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    let (status, content_type, body) = match path {
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", purloin::metrics::prometheus()),
        "/debug/threads" => {
            ("200 OK", "text/plain; charset=utf-8", purloin::debugging::dump_grouped().to_string())
        }
        _ => ("404 Not Found", "text/plain", "try /metrics or /debug/threads\n".to_string()),
    };
    let mut stream = reader.into_inner();
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// SIGUSR1 writes the flight recorder's ring to a new file.
fn write_on_signal(recorder: purloin::trace::FlightRecorder, dir: PathBuf) {
    let signals = Signals::new(&[Signal::USR1]).expect("listen for SIGUSR1");
    for n in 1.. {
        signals.recv();
        // The recorder's own snapshots (a long runner, a deadlock) are named
        // purloin-flight-<pid>-<n>.json: these get a name of their own.
        let path = dir.join(format!("purloin-flight-{}-usr1-{n}.json", std::process::id()));
        match recorder.write_to(&path) {
            Ok(summary) => println!("wrote {} events to {}", summary.events, path.display()),
            Err(e) => eprintln!("diagnostics: {e}"),
        }
    }
}

/// Requests arrive every 500 µs; each handler runs under its route's labels, which the green
/// threads it spawns inherit.
fn run_workload(deadline: Instant) {
    let (to_backend, requests) = channel::bounded::<channel::Sender<u64>>(64);
    for _ in 0..4 {
        let requests = requests.clone();
        purloin::labels::with(purloin::labels!("role" => "backend"), || {
            purloin::spawn(move || {
                while let Ok(reply) = requests.recv() {
                    let _ = reply.send(spin(2_000));
                }
            })
        });
    }
    let routes = ["/search", "/cart", "/checkout"];
    let mut n = 0u64;
    while Instant::now() < deadline {
        let route = routes[(n % 3) as usize];
        let to_backend = to_backend.clone();
        purloin::labels::with(purloin::labels!("route" => route), || {
            purloin::spawn(move || {
                let (tx, rx) = channel::bounded(1);
                let _ = to_backend.send(tx);
                let _ = rx.recv();
                purloin::sleep(Duration::from_millis(2));
                spin(5_000)
            })
        });
        n += 1;
        purloin::sleep(Duration::from_micros(500));
    }
}

/// Some CPU work the optimiser cannot remove.
fn spin(rounds: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..rounds {
        x = std::hint::black_box(x.rotate_left(5) ^ i);
    }
    x
}
