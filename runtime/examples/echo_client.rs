//! A load generator for echo servers on loopback: N connections, each a purloin green thread
//! sending M requests of B bytes and waiting for each echo (request/response), printing
//! requests per second and latency percentiles. Bounded in count (`--requests`) and time
//! (`--max-secs`).
//!
//! ```text
//! # against a running server
//! cargo run --release -p purloin --example echo_client -- --addr 127.0.0.1:7878
//! # start a server (purloin, tokio, may or std, from echo_server.rs) and measure it
//! cargo run --release -p purloin --example echo_client -- --spawn-server tokio
//! # the comparison table: every server, interleaved rounds, medians, ratios to tokio
//! cargo run --release -p purloin --example echo_client -- --compare purloin,tokio,may,std
//! # Unix domain sockets: append -unix to a server name (purloin, purloin-nomon, tokio, std)
//! cargo run --release -p purloin --example echo_client -- --compare purloin-unix,tokio-unix
//! # ... with Go's net package too (go build -o /tmp/echo-go bench-go/net/echo_server.go)
//! cargo run --release -p purloin --example echo_client -- \
//!     --compare purloin,tokio,may,std,go --go-server /tmp/echo-go
//! ```
//!
//! Options: `--conns 100`, `--msg 100` (bytes), `--requests 10000` (per connection, after
//! `--warmup 200`), `--max-secs 30`, `--workers 2` (the client's), `--server-workers 2`,
//! `--rounds 3` (compare mode). The client checks every echo byte for byte.
//!
//! Both processes share the machine: on a 2-core box the client's two workers compete with
//! the server's, so absolute numbers say little; compare servers within one run. Because the
//! client takes about half of the machine, req/s is bounded by the client and the kernel as
//! much as by the server; the compare mode therefore also reads each server's CPU time
//! (`/proc/PID/stat`, user + system) over its run and prints the server CPU per request — the
//! server's own cost, which the shared machine does not hide.

#[allow(dead_code)]
#[path = "echo_server.rs"]
mod echo_server;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use purloin::net::{TcpStream, UnixStream};

/// Where the server listens.
#[derive(Clone, Debug)]
enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::str::FromStr for Target {
    type Err = std::net::AddrParseError;
    fn from_str(s: &str) -> Result<Target, Self::Err> {
        match s.strip_prefix("unix:") {
            Some(path) => Ok(Target::Unix(path.into())),
            None => s.parse().map(Target::Tcp),
        }
    }
}

#[derive(Clone)]
struct Args {
    addr: Option<Target>,
    spawn: Option<String>,
    compare: Vec<String>,
    go_server: Option<String>,
    conns: usize,
    msg: usize,
    requests: usize,
    warmup: usize,
    max_secs: u64,
    workers: usize,
    server_workers: usize,
    rounds: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: echo_client (--addr 127.0.0.1:PORT|unix:PATH | --spawn-server NAME | --compare a,b,..) \
         [--go-server PATH] [--conns N] [--msg BYTES] [--requests N] [--warmup N] \
         [--max-secs S] [--workers N] [--server-workers N] [--rounds N]\n\
         servers: purloin, purloin-nomon, tokio, may, std, epoll (built in), go (needs \
         --go-server); purloin-unix, purloin-nomon-unix, tokio-unix, std-unix, epoll-unix over a \
         Unix socket"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        addr: None,
        spawn: None,
        compare: Vec::new(),
        go_server: None,
        conns: 100,
        msg: 100,
        requests: 10_000,
        warmup: 200,
        max_secs: 30,
        workers: 2,
        server_workers: 2,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        let num = |v: String| v.parse::<usize>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--addr" => a.addr = Some(value().parse().unwrap_or_else(|_| usage())),
            "--spawn-server" => a.spawn = Some(value()),
            "--compare" => a.compare = value().split(',').map(str::to_owned).collect(),
            "--go-server" => a.go_server = Some(value()),
            "--conns" => a.conns = num(value()),
            "--msg" => a.msg = num(value()),
            "--requests" => a.requests = num(value()),
            "--warmup" => a.warmup = num(value()),
            "--max-secs" => a.max_secs = num(value()) as u64,
            "--workers" => a.workers = num(value()),
            "--server-workers" => a.server_workers = num(value()),
            "--rounds" => a.rounds = num(value()),
            // Hidden: the server mode `--spawn-server` and `--compare` start.
            "--serve" => {
                let name = value();
                let workers = std::env::var("ECHO_SERVER_WORKERS")
                    .ok()
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(2);
                match name.strip_suffix("-unix") {
                    Some(base) => {
                        let path = std::env::temp_dir()
                            .join(format!("purloin-echo-{}.sock", std::process::id()));
                        echo_server::serve_unix(base, &path, workers, Duration::from_secs(600));
                    }
                    None => echo_server::serve(
                        &name,
                        "127.0.0.1:0".parse().unwrap(),
                        workers,
                        Duration::from_secs(600),
                    ),
                }
                std::process::exit(0);
            }
            _ => usage(),
        }
    }
    if a.conns == 0 || a.msg == 0 || a.workers == 0 || a.rounds == 0 {
        eprintln!("echo_client: --conns, --msg, --workers and --rounds must be at least 1");
        std::process::exit(2);
    }
    if let Some(Target::Tcp(addr)) = a.addr
        && !addr.ip().is_loopback()
    {
        eprintln!("echo_client: {addr} is not a loopback address; use 127.0.0.1 or [::1]");
        std::process::exit(2);
    }
    if a.addr.is_none() && a.spawn.is_none() && a.compare.is_empty() {
        usage();
    }
    a
}

/// The result of one load run.
struct Run {
    requests: usize,
    elapsed: Duration,
    /// Sorted round-trip latencies in nanoseconds.
    latencies: Vec<u32>,
    /// Server CPU time (user + system) per request, warm-up included, when measured.
    server_cpu_per_req: Option<Duration>,
    /// The user-space part of that time, when measured.
    server_user_per_req: Option<Duration>,
}

/// User and system CPU time of process `pid` so far, from `/proc/PID/stat` (Linux).
fn cpu_time(pid: u32) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    let user: u64 = fields.get(11)?.parse().ok()?;
    let sys: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let secs = |ticks: u64| Duration::from_secs_f64(ticks as f64 / hz as f64);
    (hz > 0).then(|| (secs(user), secs(sys)))
}

impl Run {
    fn rps(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
    fn pct(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() as f64 * p).ceil() as usize).clamp(1, self.latencies.len());
        Duration::from_nanos(u64::from(self.latencies[i - 1]))
    }
}

/// Runs the load against `target` on a fresh purloin runtime.
fn load(args: &Args, target: &Target) -> Run {
    let rt = purloin::runtime::Builder::new().workers(args.workers).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(args.max_secs);
    let (conns, msg, warmup, requests) = (args.conns, args.msg, args.warmup, args.requests);
    let per_conn: Vec<(Instant, Instant, Vec<u32>)> = rt.block_on(|| {
        let handles: Vec<_> = (0..conns)
            .map(|c| {
                let target = target.clone();
                purloin::spawn(move || {
                    let connect_failed = |e: std::io::Error| -> ! {
                        eprintln!("echo_client: connect to {target:?} failed: {e}");
                        std::process::exit(1)
                    };
                    let mut s: Box<dyn ReadWrite> = match &target {
                        Target::Tcp(addr) => {
                            let s = TcpStream::connect(addr).unwrap_or_else(|e| connect_failed(e));
                            s.set_nodelay(true).unwrap();
                            Box::new(s)
                        }
                        Target::Unix(path) => Box::new(
                            UnixStream::connect(path).unwrap_or_else(|e| connect_failed(e)),
                        ),
                    };
                    let mut out = vec![(c & 0xff) as u8; msg];
                    let mut back = vec![0u8; msg];
                    let mut lat = Vec::with_capacity(requests);
                    let mut start = Instant::now();
                    for i in 0..warmup + requests {
                        if i == warmup {
                            start = Instant::now();
                        }
                        let n = out.len().min(8);
                        out[..n].copy_from_slice(&(i as u64).to_le_bytes()[..n]);
                        let t = Instant::now();
                        s.write_all(&out).unwrap();
                        s.read_exact(&mut back).unwrap();
                        if i >= warmup {
                            lat.push(t.elapsed().as_nanos().min(u128::from(u32::MAX)) as u32);
                        }
                        assert!(back == out, "connection {c}: the echo differs from the request");
                        if t > deadline {
                            break;
                        }
                    }
                    (start, Instant::now(), lat)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = per_conn.iter().map(|r| r.0).min().unwrap();
    let last = per_conn.iter().map(|r| r.1).max().unwrap();
    let mut latencies: Vec<u32> = per_conn.into_iter().flat_map(|r| r.2).collect();
    latencies.sort_unstable();
    Run {
        requests: latencies.len(),
        elapsed: last - first,
        latencies,
        server_cpu_per_req: None,
        server_user_per_req: None,
    }
}

/// A connection of either kind (one virtual call per request is noise next to two system
/// calls).
trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

fn print_run(name: &str, args: &Args, r: &Run) {
    let cpu = match (r.server_cpu_per_req, r.server_user_per_req) {
        (Some(c), Some(u)) => format!("   server CPU {c:.1?}/req (user {u:.1?})"),
        _ => String::new(),
    };
    println!(
        "{name:<12} {:>10.0} req/s   p50 {:>9.1?}   p99 {:>9.1?}   p999 {:>9.1?}{cpu}   \
         ({} conns x {} req x {} B in {:.2?})",
        r.rps(),
        r.pct(0.50),
        r.pct(0.99),
        r.pct(0.999),
        args.conns,
        r.requests / args.conns,
        args.msg,
        r.elapsed
    );
}

/// Runs the load against a server started for it, measuring the server's CPU time.
fn load_measured(args: &Args, server: &Server) -> Run {
    let pid = server.child.id();
    let before = cpu_time(pid);
    let mut r = load(args, &server.addr);
    if let (Some((bu, bs)), Some((au, as_))) = (before, cpu_time(pid)) {
        let total = (r.requests + args.conns * args.warmup).max(1) as f64;
        let user = au.saturating_sub(bu);
        r.server_cpu_per_req = Some((user + as_.saturating_sub(bs)).div_f64(total));
        r.server_user_per_req = Some(user.div_f64(total));
    }
    r
}

/// A server process started for a run (killed on drop).
struct Server {
    child: Child,
    addr: Target,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Target::Unix(path) = &self.addr {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn start_server(name: &str, args: &Args) -> Server {
    let mut cmd = if name == "go" {
        let Some(path) = &args.go_server else {
            eprintln!(
                "echo_client: the go server needs --go-server PATH \
                 (go build -o /tmp/echo-go bench-go/net/echo_server.go)"
            );
            std::process::exit(2)
        };
        let mut c = Command::new(path);
        c.args(["-addr", "127.0.0.1:0"]).env("GOMAXPROCS", args.server_workers.to_string());
        c
    } else {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--serve", name]).env("ECHO_SERVER_WORKERS", args.server_workers.to_string());
        c
    };
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap_or_else(|e| {
        eprintln!("echo_client: could not start the {name} server: {e}");
        std::process::exit(1)
    });
    let mut line = Vec::new();
    let mut out = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&line).into_owned();
    let addr = line.strip_prefix("listening on ").and_then(|a| a.trim().parse::<Target>().ok());
    let Some(addr) = addr else {
        let _ = child.kill();
        eprintln!("echo_client: the {name} server did not announce its address (got {line:?})");
        std::process::exit(1)
    };
    Server { child, addr }
}

fn main() {
    let args = parse_args();
    println!(
        "echo_client: {} conns x {} requests of {} B (after {} warm-up), client workers {}, \
         max {} s",
        args.conns, args.requests, args.msg, args.warmup, args.workers, args.max_secs
    );
    if let Some(addr) = &args.addr {
        let r = load(&args, addr);
        print_run("server", &args, &r);
        return;
    }
    if let Some(name) = &args.spawn {
        let server = start_server(name, &args);
        let r = load_measured(&args, &server);
        print_run(name, &args, &r);
        return;
    }
    // Compare: interleaved rounds so drift on a busy machine hits every server alike.
    let mut results: Vec<(String, Vec<Run>)> =
        args.compare.iter().map(|n| (n.clone(), Vec::new())).collect();
    for round in 1..=args.rounds {
        println!("-- round {round}/{}", args.rounds);
        for (name, runs) in &mut results {
            let server = start_server(name, &args);
            let r = load_measured(&args, &server);
            drop(server);
            print_run(name, &args, &r);
            runs.push(r);
        }
    }
    println!(
        "\nmedian of {} rounds (server workers {}, client workers {}):",
        args.rounds, args.server_workers, args.workers
    );
    // Medians of each measure across the rounds (not necessarily of the same round).
    let median = |runs: &mut Vec<Run>| -> (f64, Duration, Option<Duration>) {
        runs.sort_by(|a, b| a.rps().total_cmp(&b.rps()));
        let m = &runs[runs.len() / 2];
        let mut cpus: Vec<Duration> = runs.iter().filter_map(|r| r.server_cpu_per_req).collect();
        cpus.sort();
        (m.rps(), m.pct(0.99), cpus.get(cpus.len() / 2).copied())
    };
    let table: Vec<(String, f64, Duration, Option<Duration>)> = results
        .iter_mut()
        .map(|(n, runs)| {
            let (rps, p99, cpu) = median(runs);
            (n.clone(), rps, p99, cpu)
        })
        .collect();
    // Each row against tokio over the same transport (`x-unix` rows against `tokio-unix`).
    let baseline = |name: &str| {
        let tokio = if name.ends_with("-unix") { "tokio-unix" } else { "tokio" };
        table.iter().find(|t| t.0 == tokio).map(|t| (t.1, t.2, t.3))
    };
    println!(
        "{:<12} {:>10} {:>11} {:>14} {:>14} {:>13} {:>13}",
        "server", "req/s", "p99", "req/s vs tokio", "p99 vs tokio", "CPU/req", "CPU vs tokio"
    );
    for (name, rps, p99, cpu) in &table {
        let (r, l, c) = match baseline(name) {
            Some((t_rps, t_p99, t_cpu)) => (
                format!("{:.2}x", rps / t_rps),
                format!("{:.2}x", p99.as_secs_f64() / t_p99.as_secs_f64()),
                match (cpu, t_cpu) {
                    (Some(c), Some(t)) => format!("{:.2}x", c.as_secs_f64() / t.as_secs_f64()),
                    _ => "-".into(),
                },
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let cpu = cpu.map_or("-".into(), |c| format!("{c:.1?}"));
        println!("{name:<12} {rps:>10.0} {:>11.1?} {r:>14} {l:>14} {cpu:>13} {c:>13}", p99);
    }
}
