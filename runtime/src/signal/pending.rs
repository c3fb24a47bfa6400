//! The hand-off between the signal handler and the dispatcher thread: one arrival counter
//! per signal plus a byte in the self-pipe.
//!
//! ```text
//!  handler (any thread, async-signal context)     dispatcher (its own OS thread)
//!  ──────────────────────────────────────────     ─────────────────────────────────
//!  counts[sig].fetch_add(1)            (S1 rel)   loop:
//!  write(pipe, 1 byte)  (nonblocking; a full       read(pipe)            (blocks until a byte)
//!    pipe already holds a byte, so dropping        for each sig:
//!    this one loses nothing)                         c = counts[sig].load()      (S1 acq)
//!                                                    if c != seen[sig]: seen[sig] = c,
//!                                                      deliver to the receivers of sig
//! ```
//!
//! A counter compared with the dispatcher's own copy, rather than a flag the dispatcher
//! clears, keeps the dispatcher to plain loads: only handlers write the shared word. (With a
//! flag cleared by `swap`, loom reports a lost signal: it lets the dispatcher's second swap
//! read its own first swap's `false` although the handler's `true` happened before it
//! through the pipe; in C++'s total modification order that swap must read `true`. Loads
//! do not have the problem.)
//!
//! # Memory ordering
//!
//! The guarantee: a signal whose handler ran is delivered by the dispatcher (several
//! deliveries of one signal before the dispatcher looks may merge into one, as the kernel
//! merges pending standard signals anyway).
//!
//! - (S1) The counter is bumped *before* the byte is written, and the dispatcher reads a
//!   byte *before* it looks at the counters. Every bump is therefore followed by a byte the
//!   dispatcher has not consumed when it last looked, so it looks again and sees the bump.
//!   The pipe's write and read order the two (the kernel's locks); the Release bump and the
//!   Acquire load say the same to the memory model (and to loom, whose pipe is a mutex).
//!   Writing the byte first would lose a signal: the dispatcher could consume the byte and
//!   scan before the handler bumps, then block with nobody left to write (the
//!   `count_then_byte` model's mutation).

use crate::loom::{AtomicU32, Ordering};

/// Signal numbers are 1..=64 on Linux.
#[cfg(not(loom))]
pub(crate) const NSIG: usize = 65;
/// The model raises signals 1 and 2 (and loom explores less with fewer objects).
#[cfg(loom)]
pub(crate) const NSIG: usize = 3;

/// One arrival counter per signal number (wrapping; only its changes matter).
pub(crate) struct Pending {
    counts: [AtomicU32; NSIG],
}

/// The dispatcher's copy of the counters it has delivered.
pub(crate) struct Seen([u32; NSIG]);

impl Seen {
    pub(crate) fn new() -> Seen {
        Seen([0; NSIG])
    }
}

impl Pending {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Pending {
        Pending { counts: [const { AtomicU32::new(0) }; NSIG] }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Pending {
        Pending { counts: core::array::from_fn(|_| AtomicU32::new(0)) }
    }

    /// Counts an arrival of `sig` (the handler's first step; lock-free, so
    /// async-signal-safe).
    pub(crate) fn raise(&self, sig: usize) {
        // S1: Release, read by the Acquire load in `take`.
        self.counts[sig].fetch_add(1, Ordering::Release);
    }

    /// Whether `sig` arrived since the last call with `seen` (the dispatcher's step after a
    /// pipe read).
    pub(crate) fn take(&self, sig: usize, seen: &mut Seen) -> bool {
        // S1: pairs with the Release bump in `raise`.
        let c = self.counts[sig].load(Ordering::Acquire);
        let new = c != seen.0[sig];
        seen.0[sig] = c;
        new
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use crate::loom::{Arc, Condvar, Mutex, lock, thread};

    /// The self-pipe, modelled: a byte count behind a mutex, and a condvar for the blocking
    /// read.
    struct Pipe {
        bytes: Mutex<usize>,
        readable: Condvar,
    }

    impl Pipe {
        fn write(&self) {
            *lock(&self.bytes) += 1;
            self.readable.notify_one();
        }
        /// Blocks until there is a byte, consumes everything (the dispatcher reads in bulk).
        fn read(&self) {
            let mut n = lock(&self.bytes);
            while *n == 0 {
                n = self.readable.wait(n).unwrap();
            }
            *n = 0;
        }
    }

    /// Two signals raised from two "handlers" against the dispatcher loop: the dispatcher
    /// sees both and ends. Mutation caught: in `handler`, write the byte before `raise` —
    /// loom finds the schedule where the dispatcher consumes the byte and scans before the
    /// count moves, then blocks in `read` forever ("deadlock" failure).
    #[test]
    fn count_then_byte() {
        loom::model(|| {
            let pending = Arc::new(Pending::new());
            let pipe = Arc::new(Pipe { bytes: Mutex::new(0), readable: Condvar::new() });
            let handler = |sig: usize| {
                let (pending, pipe) = (pending.clone(), pipe.clone());
                thread::spawn(move || {
                    pending.raise(sig);
                    pipe.write();
                })
            };
            let h1 = handler(1);
            let h2 = handler(2);
            let mut seen = Seen::new();
            let mut delivered = [false; 3];
            while !(delivered[1] && delivered[2]) {
                pipe.read();
                for (sig, d) in delivered.iter_mut().enumerate().skip(1) {
                    if pending.take(sig, &mut seen) {
                        *d = true;
                    }
                }
            }
            h1.join().unwrap();
            h2.join().unwrap();
        });
    }
}
