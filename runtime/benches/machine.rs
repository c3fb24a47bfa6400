//! Ring of 10,000 machines passing a token 10^6 hops (hops/s), next to the same ring built
//! from purloin green threads and from tokio tasks, in the same run.
//!
//! - `purloin_machine_ring`: 10,000 [`Machine`]s on a [`Host`]; each hop is a
//!   [`send`](purloin::machine::HostHandle::send) from one machine's step to the next machine
//!   (lock-free id lookup, the CAS that wins the Idle machine, the message handed over
//!   without a queue node, and its step run on the same worker right after the sender's:
//!   the inline hand-off of `runtime/src/machine/chain.rs`, the scheduler not involved
//!   except about once a millisecond).
//! - `green_thread_ring` (the baseline the issue names): 10,000 purloin green threads (32 KiB
//!   stacks); each hop stores the token in the next thread's slot (an `AtomicU64`, the
//!   cheapest channel there is) and unparks it, then parks: the floor under any channel.
//! - `green_channel_ring`: the same green threads linked by purloin's own channels
//!   (`purloin::sync::channel::bounded(1)`): the ring the issue describes ("green threads +
//!   channels").
//! - `tokio_task_ring`: 10,000 tokio tasks on a 2-worker multi-thread runtime, linked by
//!   unbounded `tokio::sync::mpsc` channels.
//!
//! All run on as many workers as there are CPUs (2 on the reference machine). Each iteration
//! is 10^6 hops around an already-built ring; throughput is reported in hops (elements)/s.
//! The Go version of the same ring is `bench-go/process/ring.go`.
#![cfg(not(loom))]
// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use purloin::machine::{Error, EventKind, Events, Host, Machine, MachineId, Payload, StepOutput};
use purloin::runtime::Runtime;
use purloin::sched::SpawnOptions;
use purloin::{GreenThread, StackSize};

const MEMBERS: usize = 10_000;
const HOPS: u64 = 1_000_000;

/// Workers of each runtime: one per CPU, or `PURLOIN_BENCH_WORKERS`.
fn workers() -> usize {
    std::env::var("PURLOIN_BENCH_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

// ------------------------------------------------------------------------------------------
// Machines

enum Msg {
    Next(MachineId),
    Token(u64),
}

struct Member {
    next: Option<MachineId>,
    done: crossbeam_channel::Sender<()>,
}

impl Machine for Member {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        for e in events {
            if e.kind == EventKind::Cancel {
                out.complete(Payload::empty());
                return Ok(());
            }
            match e.data.take::<Msg>()? {
                Msg::Next(p) => self.next = Some(p),
                Msg::Token(0) => self.done.send(()).expect("bench is waiting"),
                Msg::Token(left) => {
                    let next = self.next.expect("linked");
                    if out.host().send(next, Payload::new(Msg::Token(left - 1))).is_err() {
                        return Err(Error::new("ring broken"));
                    }
                }
            }
        }
        out.idle();
        Ok(())
    }
}

struct MachineRing {
    host: Host,
    first: MachineId,
    done: crossbeam_channel::Receiver<()>,
}

impl MachineRing {
    fn new() -> MachineRing {
        let host = Host::new(Runtime::builder().workers(workers()).build().unwrap());
        let (tx, rx) = crossbeam_channel::unbounded();
        let ids: Vec<MachineId> = (0..MEMBERS)
            .map(|_| {
                let m = Member { next: None, done: tx.clone() };
                host.spawn_machine(m, "member", Payload::empty()).unwrap()
            })
            .collect();
        for (i, p) in ids.iter().enumerate() {
            host.send(*p, Payload::new(Msg::Next(ids[(i + 1) % MEMBERS]))).unwrap();
        }
        MachineRing { host, first: ids[0], done: rx }
    }

    fn lap(&self, hops: u64) -> Duration {
        let t = Instant::now();
        self.host.send(self.first, Payload::new(Msg::Token(hops - 1))).unwrap();
        self.done.recv().unwrap();
        t.elapsed()
    }
}

// ------------------------------------------------------------------------------------------
// Green threads

/// Empty slot.
const EMPTY: u64 = u64::MAX;
/// Tells a member to forward the stop and exit.
const STOP: u64 = u64::MAX - 1;

struct Slot {
    token: AtomicU64,
}

struct GreenRing {
    rt: Runtime,
    slots: Arc<Vec<Slot>>,
    threads: Vec<GreenThread>,
    joins: Vec<purloin::JoinHandle<()>>,
    done: crossbeam_channel::Receiver<()>,
}

impl GreenRing {
    fn new() -> GreenRing {
        let rt = Runtime::builder().workers(workers()).build().unwrap();
        let slots: Arc<Vec<Slot>> =
            Arc::new((0..MEMBERS).map(|_| Slot { token: AtomicU64::new(EMPTY) }).collect());
        let (tx, rx) = crossbeam_channel::unbounded();
        // Members learn their successor's handle once every member exists.
        let table: Arc<OnceLock<Vec<GreenThread>>> = Arc::default();
        let opts = || SpawnOptions { stack_size: Some(StackSize::Small), ..Default::default() };
        let joins: Vec<_> = (0..MEMBERS)
            .map(|i| {
                let (slots, table, done) = (slots.clone(), table.clone(), tx.clone());
                rt.scheduler()
                    .spawn_with(opts(), move || {
                        let me = &slots[i];
                        let next_i = (i + 1) % MEMBERS;
                        loop {
                            let v = me.token.swap(EMPTY, Ordering::Acquire);
                            if v == EMPTY {
                                purloin::park();
                                continue;
                            }
                            let next = table.get().expect("set before the first token")[next_i];
                            let forward = match v {
                                STOP => STOP,
                                0 => {
                                    done.send(()).unwrap();
                                    continue;
                                }
                                v => v - 1,
                            };
                            slots[next_i].token.store(forward, Ordering::Release);
                            next.unpark();
                            if v == STOP {
                                return;
                            }
                        }
                    })
                    .unwrap()
            })
            .collect();
        let threads: Vec<GreenThread> = joins.iter().map(|h| *h.thread()).collect();
        assert!(table.set(threads.clone()).is_ok(), "set once");
        GreenRing { rt, slots, threads, joins, done: rx }
    }

    fn lap(&self, hops: u64) -> Duration {
        let t = Instant::now();
        self.slots[0].token.store(hops - 1, Ordering::Release);
        self.threads[0].unpark();
        self.done.recv().unwrap();
        t.elapsed()
    }

    fn stop(self) {
        self.slots[0].token.store(STOP, Ordering::Release);
        self.threads[0].unpark();
        for j in self.joins {
            j.join().unwrap();
        }
        drop(self.rt);
    }
}

/// The ring the issue names: green threads linked by purloin's own channels (bounded, one
/// slot: a member holds at most one token at a time).
struct ChannelRing {
    rt: Runtime,
    first: purloin::sync::channel::Sender<u64>,
    joins: Vec<purloin::JoinHandle<()>>,
    done: crossbeam_channel::Receiver<()>,
}

impl ChannelRing {
    fn new() -> ChannelRing {
        let rt = Runtime::builder().workers(workers()).build().unwrap();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..MEMBERS).map(|_| purloin::sync::channel::bounded::<u64>(1)).unzip();
        let opts = || SpawnOptions { stack_size: Some(StackSize::Small), ..Default::default() };
        let joins = receivers
            .into_iter()
            .enumerate()
            .map(|(i, rx)| {
                let next = senders[(i + 1) % MEMBERS].clone();
                let done = done_tx.clone();
                rt.scheduler()
                    .spawn_with(opts(), move || {
                        while let Ok(v) = rx.recv() {
                            match v {
                                // Forwarded once around; the last send finds the first
                                // member gone, which is fine.
                                STOP => {
                                    let _ = next.send(STOP);
                                    return;
                                }
                                0 => done.send(()).unwrap(),
                                v => next.send(v - 1).unwrap(),
                            }
                        }
                    })
                    .unwrap()
            })
            .collect();
        ChannelRing { rt, first: senders[0].clone(), joins, done: done_rx }
    }

    fn lap(&self, hops: u64) -> Duration {
        let t = Instant::now();
        self.first.send(hops - 1).unwrap();
        self.done.recv().unwrap();
        t.elapsed()
    }

    fn stop(self) {
        self.first.send(STOP).unwrap();
        for j in self.joins {
            j.join().unwrap();
        }
        drop(self.rt);
    }
}

// ------------------------------------------------------------------------------------------
// tokio

struct TokioRing {
    rt: tokio::runtime::Runtime,
    first: tokio::sync::mpsc::UnboundedSender<u64>,
    done: crossbeam_channel::Receiver<()>,
}

impl TokioRing {
    fn new() -> TokioRing {
        let rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(workers()).build().unwrap();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..MEMBERS).map(|_| tokio::sync::mpsc::unbounded_channel::<u64>()).unzip();
        for (i, mut rx) in receivers.into_iter().enumerate() {
            let next = senders[(i + 1) % MEMBERS].clone();
            let done = done_tx.clone();
            rt.spawn(async move {
                while let Some(v) = rx.recv().await {
                    if v == 0 {
                        done.send(()).unwrap();
                    } else if next.send(v - 1).is_err() {
                        return;
                    }
                }
            });
        }
        TokioRing { rt, first: senders[0].clone(), done: done_rx }
    }

    fn lap(&self, hops: u64) -> Duration {
        let t = Instant::now();
        self.first.send(hops - 1).unwrap();
        self.done.recv().unwrap();
        t.elapsed()
    }
}

// ------------------------------------------------------------------------------------------

fn ring(c: &mut Criterion) {
    let mut g = c.benchmark_group("token_ring_10k");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(HOPS));

    let machines = MachineRing::new();
    g.bench_with_input(BenchmarkId::new("purloin_machine_ring", HOPS), &HOPS, |b, &hops| {
        b.iter_custom(|iters| (0..iters).map(|_| machines.lap(hops)).sum())
    });
    machines.host.shutdown(Duration::from_secs(5));

    let greens = GreenRing::new();
    g.bench_with_input(BenchmarkId::new("green_thread_ring", HOPS), &HOPS, |b, &hops| {
        b.iter_custom(|iters| (0..iters).map(|_| greens.lap(hops)).sum())
    });
    greens.stop();

    let channels = ChannelRing::new();
    g.bench_with_input(BenchmarkId::new("green_channel_ring", HOPS), &HOPS, |b, &hops| {
        b.iter_custom(|iters| (0..iters).map(|_| channels.lap(hops)).sum())
    });
    channels.stop();

    let tokio = TokioRing::new();
    g.bench_with_input(BenchmarkId::new("tokio_task_ring", HOPS), &HOPS, |b, &hops| {
        b.iter_custom(|iters| (0..iters).map(|_| tokio.lap(hops)).sum())
    });
    drop(tokio.first);
    tokio.rt.shutdown_timeout(Duration::from_secs(5));
    g.finish();
}

criterion_group!(benches, ring);
criterion_main!(benches);
