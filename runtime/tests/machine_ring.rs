//! Routing by machine id between 10,000 machines: a ring that passes a token around many
//! times, with exactly-once delivery checked per machine.
#![cfg(not(loom))]

mod machine_common;

use std::time::Duration;

use machine_common::{host, watchdog};
use purloin::machine::{Error, EventKind, Events, Machine, MachineId, Payload, StepOutput};

enum Msg {
    /// Who comes after me in the ring.
    Next(MachineId),
    /// The token, with the hops still to go after this one.
    Token(u64),
    /// Everybody stops (goes once around the ring).
    Stop,
}

/// A ring member: forwards the token, counts how often it held it.
struct Member {
    next: Option<MachineId>,
    held: u64,
}

impl Machine for Member {
    fn init(&mut self, method: &str, _input: Payload) -> Result<(), Error> {
        match method {
            "member" => Ok(()),
            other => Err(Error::unknown_method(other, &["member"])),
        }
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        for e in events {
            if e.kind == EventKind::Cancel {
                return Err(e.error.unwrap());
            }
            match e.data.take::<Msg>()? {
                Msg::Next(p) => self.next = Some(p),
                Msg::Token(left) => {
                    self.held += 1;
                    let next = self.next.ok_or_else(|| Error::new("token before Next"))?;
                    let msg = if left == 0 { Msg::Stop } else { Msg::Token(left - 1) };
                    out.host()
                        .send(next, Payload::new(msg))
                        .map_err(|e| Error::new(e.to_string()))?;
                }
                Msg::Stop => {
                    // Forward once around; the originator's successor has already stopped,
                    // which is an error value, not a problem.
                    let _ = out.host().send(self.next.unwrap(), Payload::new(Msg::Stop));
                    out.complete(Payload::new(self.held));
                    return Ok(());
                }
            }
        }
        out.idle();
        Ok(())
    }
}

fn ring(workers: usize, members: usize, rounds: u64) {
    let host = host(workers);
    let ids: Vec<MachineId> = (0..members)
        .map(|_| host.spawn_machine(Member { next: None, held: 0 }, "member", Payload::empty()))
        .collect::<Result<_, _>>()
        .unwrap();
    for (i, id) in ids.iter().enumerate() {
        host.send(*id, Payload::new(Msg::Next(ids[(i + 1) % members]))).unwrap();
    }
    let hops = members as u64 * rounds;
    host.send(ids[0], Payload::new(Msg::Token(hops - 1))).unwrap();
    for id in &ids {
        let held = host.wait(*id).unwrap().downcast::<u64>().unwrap();
        assert_eq!(held, rounds, "{id} held the token {held} times, expected {rounds}");
    }
    assert_eq!(host.live_machines(), 0);
    let report = host.shutdown(Duration::from_secs(5));
    assert_eq!((report.cancelled, report.timed_out, report.unfinished), (0, 0, 0));
}

#[test]
fn a_token_goes_around_a_ring_of_10_000_machines() {
    let _w = watchdog("ring 10k", Duration::from_secs(300));
    ring(2, 10_000, 10);
}

#[test]
fn a_small_ring_on_one_worker_and_on_four() {
    let _w = watchdog("small rings", Duration::from_secs(120));
    ring(1, 3, 1000);
    ring(4, 100, 50);
}
