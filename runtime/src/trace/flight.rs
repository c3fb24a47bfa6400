//! The flight recorder's thread: instead of streaming batches to a file, it keeps the newest
//! ones in a ring bounded by bytes and by age, and writes the ring as a trace file on demand.
//!
//! # Snapshots
//!
//! The newest records are in the recording threads' own buffers, which only their threads may
//! touch. A snapshot bumps [`FLUSH`]; every recording thread compares it with the last value it
//! saw at each event and, when it changed, hands its buffer over and acknowledges on its
//! [`ThreadFlag`]. The recorder keeps taking batches until every thread that held records has
//! acknowledged (or holds none), or a short grace has passed (a green thread running without
//! a scheduling point, a plain thread that is blocked), then writes the ring. Whatever is
//! missing is counted in the file's `otherData.unflushed_threads`.
//!
//! # Memory
//!
//! The ring counts each batch by its allocation (its capacity times the size of a record; a
//! batch handed over before it was full is shrunk to its length first). After each batch it
//! drops the oldest batches until the total is within the bound, and cuts the oldest records
//! of the last one if that alone is over it; batches whose newest record is older than the age
//! bound go too. The names and labels records point to are shared with the green threads and
//! not counted.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use super::handshake::ThreadFlag;
use super::json;
use super::record::{Msg, Rec};
use crate::loom::{AtomicU64, AtomicUsize, Ordering};

/// Bumped by each snapshot: recording threads that see it change hand their buffers over.
pub(super) static FLUSH: AtomicU64 = AtomicU64::new(0);

/// The ring's bytes now (0 without a flight recorder), for
/// [`FlightRecorder::ring_bytes`](crate::trace::FlightRecorder::ring_bytes).
pub(super) static RING_BYTES: AtomicUsize = AtomicUsize::new(0);

/// How long a snapshot waits for the recording threads' buffers.
const SNAPSHOT_GRACE: Duration = Duration::from_millis(100);

/// What the recorder keeps.
pub(super) struct Bounds {
    pub(super) max_bytes: usize,
    pub(super) max_age: Duration,
}

/// One batch in the ring.
struct Stored {
    tid: u64,
    recs: Vec<Rec>,
    /// Its newest time stamp (ns since the trace started).
    newest: u64,
}

/// The ring of batches, oldest first.
struct Ring {
    batches: VecDeque<Stored>,
    bytes: usize,
    bounds: Bounds,
    /// The recording threads' names, by trace thread id (a name comes with a thread's first
    /// batch only, which the ring may drop).
    names: HashMap<u64, String>,
}

fn bytes_of(recs: &Vec<Rec>) -> usize {
    recs.capacity() * size_of::<Rec>()
}

impl Ring {
    fn push(&mut self, tid: u64, name: Option<String>, mut recs: Vec<Rec>, now: u64) {
        if let Some(name) = name {
            self.names.insert(tid, name);
        }
        if recs.is_empty() {
            return;
        }
        if recs.len() < recs.capacity() {
            recs.shrink_to_fit();
        }
        let newest = recs.iter().map(Rec::newest).max().unwrap_or(0);
        self.bytes += bytes_of(&recs);
        self.batches.push_back(Stored { tid, recs, newest });
        self.trim(now);
    }

    /// Drops what is past the bounds: the oldest batches, then the oldest records of the one
    /// left if it alone is over the byte bound.
    fn trim(&mut self, now: u64) {
        let horizon = now.saturating_sub(self.bounds.max_age.as_nanos() as u64);
        while let Some(front) = self.batches.front() {
            let over = self.bytes > self.bounds.max_bytes && self.batches.len() > 1;
            if !over && front.newest >= horizon {
                break;
            }
            let front = self.batches.pop_front().expect("a front batch");
            self.bytes -= bytes_of(&front.recs);
        }
        if self.bytes > self.bounds.max_bytes
            && let Some(only) = self.batches.front_mut()
        {
            self.bytes -= bytes_of(&only.recs);
            let keep = self.bounds.max_bytes / size_of::<Rec>();
            let cut = only.recs.len().saturating_sub(keep);
            only.recs.drain(..cut);
            only.recs.shrink_to_fit();
            self.bytes += bytes_of(&only.recs);
        }
        RING_BYTES.store(self.bytes, Ordering::Relaxed);
    }

    /// Writes the ring as a trace file; returns the events written.
    fn write(&self, path: &PathBuf, dropped: u64, unflushed: u64) -> io::Result<u64> {
        let file = std::fs::File::create(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create the flight recorder's file {}: {e}", path.display()),
            )
        })?;
        let mut w = json::Writer::new(file)?;
        let mut named: Vec<(&u64, &String)> = self.names.iter().collect();
        named.sort();
        for (tid, name) in named {
            w.thread_name(*tid, name)?;
        }
        for b in &self.batches {
            for rec in &b.recs {
                w.rec(b.tid, rec)?;
            }
        }
        w.finish(dropped, unflushed)
    }
}

/// A snapshot asked for: where to write it, and whom to answer (`None`: an automatic one,
/// reported on stderr with its reason).
pub(super) struct Snapshot {
    pub(super) path: PathBuf,
    pub(super) reply: Option<SyncSender<io::Result<super::Summary>>>,
    pub(super) why: Option<&'static str>,
}

/// The flight recorder's thread: runs until `Finish` (or every sender is gone).
pub(super) fn run(
    rx: Receiver<Msg>,
    bounds: Bounds,
    start: Instant,
    dropped: Arc<AtomicU64>,
    threads: impl Fn() -> Vec<Arc<ThreadFlag>>,
) -> io::Result<u64> {
    let now = || start.elapsed().as_nanos() as u64;
    let mut ring = Ring { batches: VecDeque::new(), bytes: 0, bounds, names: HashMap::new() };
    let mut deferred: VecDeque<Msg> = VecDeque::new();
    let result = loop {
        let msg = match deferred.pop_front() {
            Some(m) => m,
            None => match rx.recv() {
                Ok(m) => m,
                Err(_) => break Ok(0),
            },
        };
        match msg {
            Msg::Batch { tid, name, recs } => ring.push(tid, name, recs, now()),
            Msg::Snapshot(snap) => {
                // Every thread that holds records hands them over first.
                let epoch = FLUSH.fetch_add(1, Ordering::Relaxed) + 1;
                let flags = threads();
                let deadline = Instant::now() + SNAPSHOT_GRACE;
                let unflushed = loop {
                    let waiting = flags.iter().filter(|f| !f.flushed_since(epoch)).count();
                    if waiting == 0 || Instant::now() >= deadline {
                        break waiting;
                    }
                    match rx.recv_timeout(Duration::from_millis(1)) {
                        Ok(Msg::Batch { tid, name, recs }) => ring.push(tid, name, recs, now()),
                        Ok(other) => deferred.push_back(other),
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => break waiting,
                    }
                };
                // The batches sent before the acknowledgements seen above are queued by now.
                for _ in 0..2 * super::IN_FLIGHT {
                    let Ok(msg) = rx.try_recv() else { break };
                    match msg {
                        Msg::Batch { tid, name, recs } => ring.push(tid, name, recs, now()),
                        other => deferred.push_back(other),
                    }
                }
                ring.trim(now());
                let dropped = dropped.load(Ordering::Relaxed);
                let written = ring.write(&snap.path, dropped, unflushed as u64).map(|events| {
                    super::Summary {
                        path: snap.path.clone(),
                        events,
                        dropped,
                        unflushed_threads: unflushed,
                    }
                });
                match (snap.reply, snap.why) {
                    (Some(reply), _) => {
                        let _ = reply.send(written);
                    }
                    (None, why) => report(why.unwrap_or("asked"), &written, &ring),
                }
            }
            Msg::Finish { reply, .. } => {
                let _ = reply.send(Ok(0));
                break Ok(0);
            }
        }
    };
    RING_BYTES.store(0, Ordering::Relaxed);
    result
}

/// Says on stderr where an automatic snapshot went (or why it failed).
fn report(why: &str, written: &io::Result<super::Summary>, ring: &Ring) {
    match written {
        Ok(s) => eprintln!(
            "purloin: flight recorder ({why}): {} trace events, the last {:.1} s at most, \
             written to {} (open it at https://ui.perfetto.dev)",
            s.events,
            ring.bounds.max_age.as_secs_f64(),
            s.path.display()
        ),
        Err(e) => eprintln!("purloin: flight recorder ({why}): {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(ts: u64) -> Rec {
        Rec::Idle { ts, end: ts + 1, p: 0 }
    }

    fn ring(max_bytes: usize, max_age: Duration) -> Ring {
        Ring {
            batches: VecDeque::new(),
            bytes: 0,
            bounds: Bounds { max_bytes, max_age },
            names: HashMap::new(),
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_records_within_its_bytes() {
        let per = size_of::<Rec>();
        let mut r = ring(100 * per, Duration::from_secs(3600));
        let mut ts = 0;
        for _ in 0..50 {
            let recs: Vec<Rec> = (0..30)
                .map(|_| {
                    ts += 10;
                    idle(ts)
                })
                .collect();
            r.push(1, None, recs, ts);
            assert!(r.bytes <= 100 * per, "{} bytes", r.bytes);
        }
        let kept: Vec<u64> =
            r.batches.iter().flat_map(|b| b.recs.iter().map(Rec::newest)).collect();
        assert_eq!(kept.last(), Some(&(ts + 1)), "the newest record stays");
        assert!(kept.len() >= 60, "at least two whole batches: {}", kept.len());
        // A single batch over the bound keeps its newest records.
        let mut r = ring(10 * per, Duration::from_secs(3600));
        r.push(1, None, (1..=30).map(idle).collect(), 30);
        let kept: Vec<u64> = r.batches[0].recs.iter().map(Rec::newest).collect();
        assert_eq!(kept, (22..=31).collect::<Vec<_>>());
        assert!(r.bytes <= 10 * per);
    }

    #[test]
    fn the_ring_forgets_batches_older_than_its_age() {
        let mut r = ring(usize::MAX, Duration::from_nanos(200));
        r.push(1, None, vec![idle(10)], 10);
        r.push(1, None, vec![idle(150)], 150);
        assert_eq!(r.batches.len(), 2);
        r.push(1, None, vec![idle(300)], 300);
        let kept: Vec<u64> = r.batches.iter().map(|b| b.newest).collect();
        assert_eq!(kept, vec![151, 301]);
    }
}
