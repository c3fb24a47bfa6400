//! The recording side: one buffer per OS thread, filled without locks, handed to the writer
//! thread when full (or when the thread goes idle, exits, or sees the trace stopped).
//!
//! # Protocol
//!
//! - A thread records only while [`RECORDING`] is set, into its thread-local [`Local`]. The
//!   first record of a session fetches the session's channel and start instant (one lock per
//!   thread per session) and registers the thread's [`ThreadFlag`].
//! - A full buffer goes to the writer with `try_send` on a bounded channel: when the writer
//!   lags and `IN_FLIGHT` batches wait, the buffer's records are dropped and counted. Memory
//!   is bounded by `IN_FLIGHT + threads` buffers of `BUFFER` records.
//! - A worker about to sleep hands over what it has (best effort: kept if the channel is
//!   full), so a stop while workers sleep finds their buffers empty.
//! - `dirty` says the buffer holds records the writer has not got. The stopping thread hands
//!   over its own buffer, clears [`RECORDING`], then waits (bounded) for every registered
//!   thread's `dirty` to clear: a thread with records sees the stop at its next event, hands
//!   its buffer over and leaves the session; a thread that exits hands it over from its
//!   thread-local destructor. A thread whose buffer is empty at the stop starts no new one
//!   (`handshake::begin`), so slices it still had open (a sleeping worker's idle slice) are
//!   not written.
//!
//! # Memory ordering
//!
//! - (T1) The stop handshake on `dirty` and [`RECORDING`]: `handshake.rs` (a Dekker pair of
//!   SeqCst fences, then the Release `dirty = false` after each hand-over against the
//!   stopper's Acquire scan), modelled there under loom.
//! - [`RECORDING`] is read Relaxed on the hot path: a thread that misses the stop for a few
//!   events records them into a buffer it flagged before the stop, which the stopper waits
//!   for (T1).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;
use std::time::Instant;

use purloin_sched::{Labels, WaitInfo};

use super::handshake::{self, HandOver, ThreadFlag};
use crate::loom::{AtomicBool, AtomicU64, Ordering};

/// Records per thread buffer.
pub(super) const BUFFER: usize = 4096;

/// Set while a trace records (the recorder's own check, behind the scheduler's hook flag).
pub(super) static RECORDING: AtomicBool = AtomicBool::new(false);

/// The session number (`start` bumps it; 0 is none).
pub(super) static GENERATION: AtomicU64 = AtomicU64::new(0);

/// One recorded event. Times are nanoseconds since the trace started.
#[derive(Debug)]
pub(super) enum Rec {
    /// A green thread ran on this thread from `ts` to `end`.
    Run {
        ts: u64,
        end: u64,
        id: u64,
        name: Option<Arc<str>>,
        /// Its first run: the end of its spawn flow.
        first: bool,
        /// It resumed after a park: the end of the wake flow of this record (the joiner's,
        /// for a child run inline: the one that parked and was woken).
        woke: Option<u64>,
        /// The labels of the record it ran on, when it was switched in.
        labels: Option<Labels>,
        /// Where it was spawned (on its first run's slice).
        site: Option<Site>,
    },
    /// A blocking section of green thread `id`.
    Blocking {
        ts: u64,
        end: u64,
        id: u64,
    },
    /// This worker slept (P `p`).
    Idle {
        ts: u64,
        end: u64,
        p: usize,
    },
    /// Green thread `id` was spawned; `anchored`: inside a run slice of this thread.
    Spawn {
        ts: u64,
        id: u64,
        by: Option<u64>,
        anchored: bool,
    },
    /// Green thread `id` was made runnable after a park.
    Unpark {
        ts: u64,
        id: u64,
        by: Option<u64>,
        anchored: bool,
    },
    /// Green thread `id` parked.
    Park {
        ts: u64,
        id: u64,
        wait: Option<WaitInfo>,
    },
    Steal {
        ts: u64,
        thief: usize,
        victim: usize,
        count: usize,
    },
    GlobalPull {
        ts: u64,
        p: usize,
    },
    Timers {
        ts: u64,
        count: usize,
    },
    Poll {
        ts: u64,
        readied: usize,
    },
}

/// A spawn's place in the source.
pub(super) type Site = &'static core::panic::Location<'static>;

/// What a thread hands the writer.
pub(super) enum Msg {
    Batch {
        tid: u64,
        name: Option<String>,
        recs: Vec<Rec>,
    },
    /// The stopper's last message: the counts for the file's `otherData`, and where to send
    /// the number of events written (or the write's failure).
    Finish {
        reply: SyncSender<std::io::Result<u64>>,
        dropped: u64,
        unflushed: u64,
    },
    /// Write the flight recorder's ring to a file (only a flight recorder takes it).
    Snapshot(super::flight::Snapshot),
}

impl Rec {
    /// Its newest time stamp (a slice's end).
    pub(super) fn newest(&self) -> u64 {
        match *self {
            Rec::Run { end, .. } | Rec::Blocking { end, .. } | Rec::Idle { end, .. } => end,
            Rec::Spawn { ts, .. }
            | Rec::Unpark { ts, .. }
            | Rec::Park { ts, .. }
            | Rec::Steal { ts, .. }
            | Rec::GlobalPull { ts, .. }
            | Rec::Timers { ts, .. }
            | Rec::Poll { ts, .. } => ts,
        }
    }
}

/// What a thread needs from its session.
pub(super) struct Attach {
    pub(super) generation: u64,
    pub(super) tx: SyncSender<Msg>,
    pub(super) start: Instant,
    pub(super) dropped: Arc<AtomicU64>,
    pub(super) tid: u64,
    pub(super) flag: Arc<ThreadFlag>,
}

/// An open run slice.
struct OpenRun {
    ts: u64,
    id: u64,
    name: Option<Arc<str>>,
    first: bool,
    woke: Option<u64>,
    labels: Option<Labels>,
    site: Option<Site>,
}

/// One thread's recorder.
struct Local {
    session: Option<Attach>,
    /// The thread's name, until it went to the writer with a batch.
    name: Option<String>,
    recs: Vec<Rec>,
    run: Option<OpenRun>,
    blocking: Option<(u64, u64)>,
    idle: Option<(u64, usize)>,
    /// The running green thread announced a park: its switch-out is a park's.
    parking: bool,
    /// The last flight-recorder snapshot this thread handed its records over for.
    flushed: u64,
}

thread_local! {
    static LOCAL: RefCell<Local> = const {
        RefCell::new(Local {
            session: None,
            name: None,
            recs: Vec::new(),
            run: None,
            blocking: None,
            idle: None,
            parking: false,
            flushed: 0,
        })
    };
}

impl Drop for Local {
    fn drop(&mut self) {
        // The thread exits: its records go to the writer (T1).
        let now = self.now();
        self.leave(now);
    }
}

impl Local {
    fn now(&self) -> u64 {
        self.session.as_ref().map_or(0, |s| s.start.elapsed().as_nanos() as u64)
    }

    /// Joins the current session if this thread is not in it (or in an older one). Returns
    /// whether it records.
    fn attach(&mut self) -> bool {
        let generation = GENERATION.load(Ordering::Relaxed);
        if self.session.as_ref().is_some_and(|s| s.generation == generation) {
            return true;
        }
        let now = self.now();
        self.leave(now);
        match super::attach() {
            Some(a) => {
                self.name = Some(
                    std::thread::current()
                        .name()
                        .map_or_else(|| format!("thread {}", a.tid), str::to_owned),
                );
                self.session = Some(a);
                true
            }
            None => false,
        }
    }

    /// Leaves the session: closes the open slices at `now` and hands everything over.
    fn leave(&mut self, now: u64) {
        if self.session.is_none() {
            return;
        }
        self.close_run(now);
        if let Some((ts, p)) = self.idle.take() {
            self.recs.push(Rec::Idle { ts, end: now, p });
        }
        self.flush(true);
        self.session = None;
    }

    fn push(&mut self, rec: Rec) {
        let Some(s) = &self.session else { return };
        if self.recs.is_empty() {
            // T1: a buffer starts only while the trace records (or the stopper waits for it).
            if !handshake::begin(&s.flag, &RECORDING) {
                return;
            }
            if self.recs.capacity() == 0 {
                self.recs.reserve_exact(BUFFER);
            }
        }
        self.recs.push(rec);
        if self.recs.len() >= BUFFER {
            self.flush(true);
        }
    }

    /// Hands the buffer to the writer. With `must`, a full channel drops the records
    /// (counted); without, they stay for later.
    fn flush(&mut self, must: bool) {
        let Some(s) = &self.session else { return };
        if self.recs.is_empty() {
            return;
        }
        let recs = std::mem::replace(&mut self.recs, Vec::with_capacity(BUFFER));
        let n = recs.len() as u64;
        let msg = Msg::Batch { tid: s.tid, name: self.name.take(), recs };
        // T1: the flag clears after the hand-over.
        match handshake::hand_over(&s.flag, &s.tx, msg, n, must, &s.dropped) {
            HandOver::Sent | HandOver::Dropped(Msg::Finish { .. } | Msg::Snapshot(_)) => {}
            HandOver::Kept(Msg::Batch { name, recs, .. }) => {
                self.recs = recs;
                self.name = name;
            }
            HandOver::Dropped(Msg::Batch { name, .. }) => self.name = name,
            HandOver::Kept(Msg::Finish { .. } | Msg::Snapshot(_)) => {
                unreachable!("a thread hands over batches only")
            }
        }
    }

    fn close_run(&mut self, now: u64) {
        if let Some((ts, id)) = self.blocking.take() {
            self.recs_push_raw(Rec::Blocking { ts, end: now, id });
        }
        if let Some(r) = self.run.take() {
            let rec = Rec::Run {
                ts: r.ts,
                end: now,
                id: r.id,
                name: r.name,
                first: r.first,
                woke: r.woke,
                labels: r.labels,
                site: r.site,
            };
            self.recs_push_raw(rec);
        }
    }

    /// `push` without the hand-over when full (closing slices while leaving).
    fn recs_push_raw(&mut self, rec: Rec) {
        if let Some(s) = &self.session
            && self.recs.is_empty()
            && !handshake::begin(&s.flag, &RECORDING)
        {
            return;
        }
        self.recs.push(rec);
    }
}

/// Runs `f` on this thread's recorder if a trace records (and this thread is in it); a
/// thread that sees the trace stopped leaves it.
#[inline]
fn with(f: impl FnOnce(&mut Local, u64)) {
    let _ = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else { return };
        if !RECORDING.load(Ordering::Relaxed) {
            if l.session.is_some() {
                let now = l.now();
                l.leave(now);
            }
            l.parking = false;
            return;
        }
        if !l.attach() {
            return;
        }
        // A flight recorder's snapshot wants every thread's records now.
        let flush = super::flight::FLUSH.load(Ordering::Relaxed);
        if flush != l.flushed {
            l.flushed = flush;
            l.flush(true);
            if let Some(s) = &l.session {
                s.flag.ack_flush(flush);
            }
        }
        let now = l.now();
        f(&mut l, now);
    });
}

fn open_run(l: &mut Local, now: u64, first: bool, woke: bool) {
    l.close_run(now);
    if let Some(t) = purloin_sched::current() {
        // The wake flow is the parked record's (the joiner's, while it runs a child inline).
        let woke = if woke { purloin_sched::hook::running_record().map(|r| r.0) } else { None };
        l.run = Some(OpenRun {
            ts: now,
            id: t.id().0,
            name: t.name(),
            first,
            woke,
            labels: purloin_sched::current_labels(),
            // Constant for its life: on its first slice only.
            site: if first { t.spawned_at() } else { None },
        });
    }
}

/// The hook's `switch_out`: closes the run slice. Returns whether the switch-out is a park's
/// (the resumed run then ends a wake flow).
pub(crate) fn switch_out(_finished: bool) -> bool {
    let mut parked = false;
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            parked = std::mem::take(&mut l.parking);
        }
    });
    with(|l, now| {
        l.close_run(now);
        if l.recs.len() >= BUFFER {
            l.flush(true);
        }
    });
    parked
}

/// The hook's `switch_in`: opens a run slice (`woke`: it resumes after a park).
pub(crate) fn switch_in(woke: bool) {
    with(|l, now| open_run(l, now, false, woke));
}

/// The hook's `event`.
pub(crate) fn event(event: purloin_sched::hook::Event) {
    use purloin_sched::hook::Event;
    if let Event::Park { .. } = event {
        // Also while not recording: a park before the start resumes after it.
        let _ = LOCAL.try_with(|l| {
            if let Ok(mut l) = l.try_borrow_mut() {
                l.parking = true;
            }
        });
    }
    with(|l, ts| {
        let anchored = l.run.is_some();
        match event {
            Event::Start { .. } => open_run(l, ts, true, false),
            // The joiner's run goes on (it is `current` again).
            Event::InlineEnd { .. } => open_run(l, ts, false, false),
            Event::Spawn { id: Some(id), by } => {
                l.push(Rec::Spawn { ts, id: id.0, by: by.map(|b| b.0), anchored })
            }
            Event::Unpark { id, by } => {
                l.push(Rec::Unpark { ts, id: id.0, by: by.map(|b| b.0), anchored })
            }
            Event::Park { id, wait } => l.push(Rec::Park { ts, id: id.0, wait }),
            Event::Steal { thief, victim, count } => {
                l.push(Rec::Steal { ts, thief, victim, count })
            }
            Event::GlobalPull { p } => l.push(Rec::GlobalPull { ts, p }),
            Event::TimersFired { count } => l.push(Rec::Timers { ts, count }),
            Event::PollerWake { readied } => l.push(Rec::Poll { ts, readied }),
            Event::BlockingEnter { id } => l.blocking = Some((ts, id.0)),
            Event::BlockingLeave { .. } => {
                if let Some((start, id)) = l.blocking.take() {
                    l.push(Rec::Blocking { ts: start, end: ts, id });
                }
            }
            Event::WorkerPark { p } => {
                l.close_run(ts);
                l.idle = Some((ts, p));
                // Sleeping: hand over what there is (kept if the writer lags).
                l.flush(false);
            }
            Event::WorkerWake { .. } => {
                if let Some((start, p)) = l.idle.take() {
                    l.push(Rec::Idle { ts: start, end: ts, p });
                }
            }
            _ => {}
        }
    });
}

/// The calling thread hands over its buffer now (a flight recorder's snapshot asked from a
/// thread that records: it waits for the snapshot and would not see the request).
pub(super) fn flush_here() {
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            let flush = super::flight::FLUSH.load(Ordering::Relaxed);
            l.flush(true);
            if let Some(s) = &l.session {
                s.flag.ack_flush(flush);
            }
        }
    });
}

/// The stopping thread hands over its own buffer.
pub(super) fn leave_here() {
    let _ = LOCAL.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            let now = l.now();
            l.leave(now);
        }
    });
}

#[cfg(test)]
mod tests {
    /// The memory bound in the module docs of `trace` counts records of at most 80 bytes.
    #[test]
    fn a_record_fits_the_documented_bound() {
        assert!(size_of::<super::Rec>() <= 80, "{} bytes", size_of::<super::Rec>());
    }
}
