//! The stop handshake (T1) between a recording thread and the thread that stops the trace,
//! over the crate's `loom` shim, so that its model (below) runs this code.
//!
//! ```text
//!  owner (a recording thread)                  stopper (`stop`)
//!  ─────────────────────────────────────────   ──────────────────────────────────────
//!  first record of a buffer (`begin`):         `clear`:
//!    dirty = true                                RECORDING = false
//!    fence(SeqCst)                   (T1a)       fence(SeqCst)                  (T1a)
//!    RECORDING? no: dirty = false, drop it     `wait_clean`: until no dirty flag
//!  more records: push                            (or the grace is over):
//!  hand-over (`hand_over`):                        dirty?                 (T1b acq)
//!    send the batch (or count it dropped)      send Finish
//!    dirty = false                   (T1b rel)
//! ```
//!
//! # Memory ordering
//!
//! The guarantee: a record that a thread keeps (in a buffer `begin` allowed) reaches the sink
//! before the stopper's `Finish`, or is counted in `dropped` before the stopper reads it —
//! unless the stopper gave up waiting (its grace ended), which it reports as a thread whose
//! last records are missing.
//!
//! - (T1a) A Dekker pair: the owner's `dirty = true` then its load of `RECORDING`, against
//!   the stopper's clear of `RECORDING` then its loads of `dirty`, each pair split by a
//!   `fence(SeqCst)`. Either the owner's fence comes first, and the stopper's scan sees the
//!   flag set (or the later `false` of its hand-over) and waits; or the stopper's comes first,
//!   and the owner sees the trace stopped and keeps nothing. Without the check (a record
//!   pushed after a scan that read `false`), the owner's next event hands the batch over
//!   *after* `Finish`: the channel still accepts it until the writer drops its end, and the
//!   record is lost without being counted. Fences rather than SeqCst accesses: loom checks
//!   SeqCst fences, not the store→load order of SeqCst accesses.
//! - (T1b) The owner's Release `dirty = false` after its hand-over pairs with the stopper's
//!   Acquire load: a stopper that reads `false` sends `Finish` after the batch (the channel
//!   orders the two messages from then on) and sees the `dropped` count of that hand-over.
//!   Records pushed while the flag is set need no check of their own: the stopper waits for
//!   the `false` that follows their hand-over.
//!
//! Modelled in `handshake_vs_stop` (below; `cargo xtask loom -p purloin handshake`). Mutations
//! made, run and reverted, each caught:
//! - no `RECORDING` check in `begin` (T1a's owner side): "records \[0\] reached the writer after Finish (lost)";
//! - either `fence(SeqCst)` removed (in `begin` or in `clear`; the pair left Relaxed): the
//!   same failure;
//! - `dirty = false` stored before the hand-over in `hand_over`: "kept \[0, 1, 2\], written
//!   before Finish \[0\], counted dropped 0" (the stopper finished while the batch of 1 and 2
//!   was still being dropped);
//! - `dirty = false` Relaxed instead of Release (T1b): the same (the stopper reads the flag
//!   clear but not the drop count it publishes).

use std::ops::Deref;
use std::sync::mpsc::{SyncSender, TrySendError};

use crate::loom::{AtomicBool, AtomicU64, Ordering, fence};

/// A recording thread, as the stopper sees it.
pub(crate) struct ThreadFlag {
    /// The thread holds records the sink has not got (T1).
    dirty: AtomicBool,
    /// The last flight-recorder snapshot (its number) for which the thread handed its records
    /// over. Not part of T1: a snapshot waits for it with a grace, as the stop does.
    acked: AtomicU64,
}

impl ThreadFlag {
    pub(crate) fn new() -> ThreadFlag {
        ThreadFlag { dirty: AtomicBool::new(false), acked: AtomicU64::new(0) }
    }

    /// The thread handed its records over for snapshot `epoch`.
    #[cfg(not(loom))]
    pub(crate) fn ack_flush(&self, epoch: u64) {
        // Release: a snapshot that reads it (Acquire) finds the batch sent before it.
        self.acked.store(epoch, Ordering::Release);
    }

    /// Whether the sink has the records the thread held when snapshot `epoch` was asked for:
    /// it holds none now, or it handed them over for `epoch` (or a later one).
    #[cfg(not(loom))]
    pub(crate) fn flushed_since(&self, epoch: u64) -> bool {
        !self.dirty.load(Ordering::Acquire) || self.acked.load(Ordering::Acquire) >= epoch
    }
}

/// Where hand-overs go: the writer's bounded channel (a mock under loom).
pub(crate) trait Sink {
    type Msg;
    /// Queues `msg` without blocking.
    fn try_send(&self, msg: Self::Msg) -> Result<(), TrySendError<Self::Msg>>;
}

impl<M> Sink for SyncSender<M> {
    type Msg = M;
    #[inline]
    fn try_send(&self, msg: M) -> Result<(), TrySendError<M>> {
        SyncSender::try_send(self, msg)
    }
}

/// What became of a hand-over.
pub(crate) enum HandOver<M> {
    /// The sink has it.
    Sent,
    /// The sink was full and the caller may wait: the message comes back, still dirty.
    Kept(M),
    /// The sink was full (or gone): its records were counted in `dropped`. The message
    /// comes back for what else it carries.
    Dropped(M),
}

/// The owner's step before the first record of a buffer: sets the thread's flag and checks
/// that the trace still records (T1a). On `false` the owner keeps nothing (the stop came
/// first, and the stopper may not wait for it).
#[inline]
pub(crate) fn begin(flag: &ThreadFlag, recording: &AtomicBool) -> bool {
    // T1a: Relaxed, ordered before the load below by the fence.
    flag.dirty.store(true, Ordering::Relaxed);
    // T1a: pairs with the fence in `clear`.
    fence(Ordering::SeqCst);
    if recording.load(Ordering::Relaxed) {
        return true;
    }
    // The stop came first. Release: T1b, as after a hand-over.
    flag.dirty.store(false, Ordering::Release);
    false
}

/// The owner hands a batch of `n` records to `sink`. With `must`, a full sink drops the
/// records (counted in `dropped`); without, the batch comes back to wait for the next try.
#[inline]
pub(crate) fn hand_over<S: Sink>(
    flag: &ThreadFlag,
    sink: &S,
    msg: S::Msg,
    n: u64,
    must: bool,
    dropped: &AtomicU64,
) -> HandOver<S::Msg> {
    let done = match sink.try_send(msg) {
        Ok(()) => HandOver::Sent,
        Err(TrySendError::Full(msg)) if !must => return HandOver::Kept(msg),
        Err(TrySendError::Full(msg) | TrySendError::Disconnected(msg)) => {
            // Relaxed: published by the Release store below (T1b).
            dropped.fetch_add(n, Ordering::Relaxed);
            HandOver::Dropped(msg)
        }
    };
    // T1b: after the hand-over; pairs with the Acquire load in `wait_clean`.
    flag.dirty.store(false, Ordering::Release);
    done
}

/// The stopper's first step: no thread keeps a record from now on that it has not flagged.
#[inline]
pub(crate) fn clear(recording: &AtomicBool) {
    // T1a: Relaxed, ordered before the scan by the fence.
    recording.store(false, Ordering::Relaxed);
    // T1a: pairs with the fence in `begin`.
    fence(Ordering::SeqCst);
}

/// The stopper's second step (after `clear`): waits until no thread of `flags` holds
/// records, calling `give_up` between scans (it waits a little, or says to stop waiting).
/// Returns the number of threads still holding records (0 unless it gave up); after 0 the
/// stopper may send `Finish`.
pub(crate) fn wait_clean<F: Deref<Target = ThreadFlag>>(
    flags: &[F],
    mut give_up: impl FnMut() -> bool,
) -> usize {
    loop {
        // T1b: Acquire, pairs with the Release stores in `hand_over` and `begin`.
        let n = flags.iter().filter(|f| f.dirty.load(Ordering::Acquire)).count();
        if n == 0 || give_up() {
            return n;
        }
    }
}

#[cfg(all(test, loom))]
mod model {
    use super::*;
    use crate::loom::{Arc, Mutex, lock, thread};

    /// The writer's channel, modelled: bounded to one batch, and it records what reached it
    /// after `Finish` (which the real channel accepts and loses until the writer drops its
    /// receiver).
    #[derive(Default)]
    struct Writer {
        queued: Option<Vec<u32>>,
        written: Vec<u32>,
        finished: bool,
        after_finish: Vec<u32>,
    }

    struct ModelSink(Arc<Mutex<Writer>>);

    impl Sink for ModelSink {
        type Msg = Vec<u32>;
        fn try_send(&self, msg: Vec<u32>) -> Result<(), TrySendError<Vec<u32>>> {
            let mut w = lock(&self.0);
            if w.finished {
                w.after_finish.extend(msg);
                return Ok(());
            }
            if w.queued.is_some() {
                return Err(TrySendError::Full(msg));
            }
            w.queued = Some(msg);
            Ok(())
        }
    }

    impl Writer {
        /// The writer thread takes the queued batch (if any).
        fn drain(&mut self) {
            if let Some(b) = self.queued.take() {
                self.written.extend(b);
            }
        }
    }

    /// One recording thread (three records; buffers of two, a best-effort hand-over as a
    /// worker going idle does, then the hot path's `RECORDING` check and the leave) racing
    /// the stopper (`clear`, `wait_clean` without a grace limit, `Finish`), with a writer
    /// thread draining the channel. Checks: nothing reaches the channel after `Finish`; every
    /// kept record is written before `Finish` or counted in `dropped` as the stopper reads
    /// it, exactly once; records the owner did not keep were refused only after the stop.
    #[test]
    fn handshake_vs_stop() {
        loom::model(|| {
            let recording = Arc::new(AtomicBool::new(true));
            let dropped = Arc::new(AtomicU64::new(0));
            let flag = Arc::new(ThreadFlag::new());
            let writer = Arc::new(Mutex::new(Writer::default()));

            let owner = {
                let (recording, dropped, flag) = (recording.clone(), dropped.clone(), flag.clone());
                let sink = ModelSink(writer.clone());
                thread::spawn(move || {
                    let mut recs = Vec::new();
                    let mut kept = Vec::new();
                    let flush = |recs: &mut Vec<u32>, must: bool| {
                        if recs.is_empty() {
                            return;
                        }
                        let batch = std::mem::take(recs);
                        let n = batch.len() as u64;
                        if let HandOver::Kept(b) = hand_over(&flag, &sink, batch, n, must, &dropped)
                        {
                            *recs = b;
                        }
                    };
                    for id in 0..3u32 {
                        // The hot path's Relaxed check (`record::with`): a stopped trace is
                        // left, the buffer handed over.
                        if !recording.load(Ordering::Relaxed) {
                            break;
                        }
                        // `record::Local::push`.
                        if !recs.is_empty() || begin(&flag, &recording) {
                            recs.push(id);
                            kept.push(id);
                        }
                        if recs.len() >= 2 {
                            flush(&mut recs, true);
                        } else if id == 0 {
                            // A worker going to sleep: best effort.
                            flush(&mut recs, false);
                        }
                    }
                    // Leaving (the stop seen, or the thread exits).
                    flush(&mut recs, true);
                    kept
                })
            };
            let drainer = {
                let writer = writer.clone();
                thread::spawn(move || lock(&writer).drain())
            };

            clear(&recording);
            let unflushed = wait_clean(&[flag.clone()], || {
                thread::yield_now();
                false
            });
            assert_eq!(unflushed, 0);
            let counted = dropped.load(Ordering::Relaxed);
            let written = {
                let mut w = lock(&writer);
                w.drain();
                w.finished = true;
                w.written.clone()
            };

            let kept = owner.join().unwrap();
            drainer.join().unwrap();
            let w = lock(&writer);
            assert!(
                w.after_finish.is_empty(),
                "records {:?} reached the writer after Finish (lost)",
                w.after_finish
            );
            let mut all = written.clone();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), written.len(), "a record written twice: {written:?}");
            assert!(written.iter().all(|r| kept.contains(r)), "written {written:?} kept {kept:?}");
            assert_eq!(
                written.len() as u64 + counted,
                kept.len() as u64,
                "kept {kept:?}, written before Finish {written:?}, counted dropped {counted}"
            );
            assert_eq!(dropped.load(Ordering::Relaxed), counted, "a drop counted after Finish");
        });
    }
}
