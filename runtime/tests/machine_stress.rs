//! Exactly-once delivery under contention: plain threads and green threads send to many
//! machines at once while handlers answer yields; every message is seen once, every payload
//! and machine is dropped once.
#![cfg(not(loom))]

mod machine_common;

use std::sync::Arc;
use std::time::Duration;

use machine_common::{Counted, DropCounter, host, watchdog};
use purloin::machine::{Error, EventKind, Events, Machine, MachineId, Payload, StepOutput, Yield};

const MACHINES: usize = 64;
const SENDERS: u64 = 6;
const PER_SENDER: u64 = 2_000;

/// Records every message id it gets; every 16th message also yields a command (answered on
/// a green thread) so answers and messages interleave. Completes on Cancel with what it saw.
struct Sink {
    seen: Vec<u64>,
    answers: u64,
    next_tag: u64,
    _drop: Counted,
}

impl Machine for Sink {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        let mut cancelled = false;
        for e in events {
            match e.kind {
                EventKind::Message => {
                    let (id, _token) = e.data.take::<(u64, Counted)>()?;
                    if id.is_multiple_of(16) {
                        self.next_tag += 1;
                        out.yield_command("echo", self.next_tag, Payload::new(id));
                    }
                    self.seen.push(id);
                }
                EventKind::YieldComplete => {
                    e.into_result()?.take::<u64>()?;
                    self.answers += 1;
                }
                EventKind::Cancel => cancelled = true,
            }
        }
        if cancelled {
            let seen = core::mem::take(&mut self.seen);
            out.complete(Payload::new((seen, self.answers)));
        } else {
            out.idle();
        }
        Ok(())
    }
}

#[test]
fn concurrent_senders_exactly_once_and_nothing_leaks() {
    let _w = watchdog("stress", Duration::from_secs(300));
    let host = host(2);
    host.register("echo", |mut y: Yield| {
        let v = y.take_data();
        purloin::yield_now();
        let _ = y.complete(Ok(v));
    });
    let machine_drops = DropCounter::default();
    let message_drops = DropCounter::default();
    let ids: Arc<Vec<MachineId>> = Arc::new(
        (0..MACHINES)
            .map(|_| {
                let sink = Sink {
                    seen: Vec::new(),
                    answers: 0,
                    next_tag: 0,
                    _drop: machine_drops.token(),
                };
                host.spawn_machine(sink, "sink", Payload::empty()).unwrap()
            })
            .collect(),
    );
    // Half the senders are plain threads, half green threads of the host's runtime.
    let send_all =
        |sender: u64, ids: &[MachineId], h: &purloin::machine::HostHandle, d: &DropCounter| {
            for i in 0..PER_SENDER {
                let id = sender * PER_SENDER + i;
                let to = ids[(id as usize * 7 + sender as usize) % ids.len()];
                h.send(to, Payload::new((id, d.token()))).unwrap();
            }
        };
    let mut threads = Vec::new();
    let mut greens = Vec::new();
    for s in 0..SENDERS {
        let (ids, h, d) = (ids.clone(), host.handle(), message_drops.clone());
        if s % 2 == 0 {
            threads.push(std::thread::spawn(move || send_all(s, &ids, &h, &d)));
        } else {
            greens.push(host.runtime().spawn(move || send_all(s, &ids, &h, &d)));
        }
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    greens.into_iter().for_each(|g| g.join().unwrap());

    // Every message is queued now; a cancel queued after them ends each machine after it
    // has seen all of its messages. Wait until each has also received its answers.
    let mut all = Vec::new();
    let mut answers = 0;
    for id in ids.iter() {
        host.cancel(*id).unwrap();
        let (seen, a) = host.wait(*id).unwrap().downcast::<(Vec<u64>, u64)>().unwrap();
        all.extend(seen);
        answers += a;
    }
    all.sort_unstable();
    let expected: Vec<u64> = (0..SENDERS * PER_SENDER).collect();
    assert_eq!(all, expected, "every message delivered exactly once");
    // Answers that arrived before the cancel were counted; none was answered twice.
    assert!(answers <= SENDERS * PER_SENDER / 16);
    let report = host.shutdown(Duration::from_secs(5));
    assert_eq!((report.cancelled, report.timed_out, report.unfinished), (0, 0, 0));
    assert_eq!(message_drops.drops() as u64, SENDERS * PER_SENDER);
    assert_eq!(machine_drops.drops(), MACHINES);
}

/// Forwards tokens from its steps (so a step wakes Idle machines: the inline hand-off of
/// `chain.rs`) while plain threads ping it; completes on Cancel with what it counted.
struct Relay {
    index: usize,
    peers: Option<Arc<Vec<MachineId>>>,
    pings: u64,
    relayed: u64,
    arrived: std::sync::mpsc::Sender<u64>,
}

enum RelayMsg {
    Peers(Arc<Vec<MachineId>>),
    Token { id: u64, hops: u64 },
    Ping,
}

impl Machine for Relay {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        for e in events {
            if e.kind == EventKind::Cancel {
                out.complete(Payload::new((self.pings, self.relayed)));
                return Ok(());
            }
            match e.data.take::<RelayMsg>()? {
                RelayMsg::Peers(p) => self.peers = Some(p),
                RelayMsg::Ping => self.pings += 1,
                RelayMsg::Token { id, hops } => {
                    self.relayed += 1;
                    if hops == 0 {
                        self.arrived.send(id).expect("the test waits for every token");
                        continue;
                    }
                    let peers = self.peers.as_ref().expect("peers arrive first");
                    let to = peers[(self.index * 31 + hops as usize) % peers.len()];
                    let token = RelayMsg::Token { id, hops: hops - 1 };
                    out.host()
                        .send(to, Payload::new(token))
                        .map_err(|e| Error::new(e.to_string()))?;
                }
            }
        }
        out.idle();
        Ok(())
    }
}

#[test]
fn steps_and_threads_send_at_once_exactly_once() {
    const RELAYS: usize = 64;
    const TOKENS: u64 = 16;
    const HOPS: u64 = 5_000;
    const PINGERS: u64 = 3;
    const PINGS: u64 = 20_000;
    let _w = watchdog("relay stress", Duration::from_secs(300));
    let host = host(2);
    let (arrived, tokens_back) = std::sync::mpsc::channel();
    let ids: Arc<Vec<MachineId>> = Arc::new(
        (0..RELAYS)
            .map(|index| {
                let r =
                    Relay { index, peers: None, pings: 0, relayed: 0, arrived: arrived.clone() };
                host.spawn_machine(r, "relay", Payload::empty()).unwrap()
            })
            .collect(),
    );
    for id in ids.iter() {
        host.send(*id, Payload::new(RelayMsg::Peers(ids.clone()))).unwrap();
    }
    let pingers: Vec<_> = (0..PINGERS)
        .map(|s| {
            let (ids, h) = (ids.clone(), host.handle());
            std::thread::spawn(move || {
                for i in 0..PINGS {
                    let to = ids[((s * PINGS + i) as usize * 13) % ids.len()];
                    h.send(to, Payload::new(RelayMsg::Ping)).unwrap();
                }
            })
        })
        .collect();
    for id in 0..TOKENS {
        let token = RelayMsg::Token { id, hops: HOPS };
        host.send(ids[id as usize % RELAYS], Payload::new(token)).unwrap();
    }
    let mut back: Vec<u64> = (0..TOKENS).map(|_| tokens_back.recv().unwrap()).collect();
    back.sort_unstable();
    assert_eq!(back, (0..TOKENS).collect::<Vec<_>>(), "every token arrives once");
    pingers.into_iter().for_each(|t| t.join().unwrap());
    let (mut pings, mut relayed) = (0, 0);
    for id in ids.iter() {
        host.cancel(*id).unwrap();
        let (p, r) = host.wait(*id).unwrap().downcast::<(u64, u64)>().unwrap();
        pings += p;
        relayed += r;
    }
    assert_eq!(pings, PINGERS * PINGS, "every ping counted once");
    assert_eq!(relayed, TOKENS * (HOPS + 1), "every hop counted once");
    let report = host.shutdown(Duration::from_secs(5));
    assert_eq!((report.cancelled, report.timed_out, report.unfinished), (0, 0, 0));
}
