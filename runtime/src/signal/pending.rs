//! The hand-off between the signal handler and the dispatcher thread: one flag per signal
//! plus a byte in the self-pipe.
//!
//! ```text
//!  handler (any thread, async-signal context)     dispatcher (its own OS thread)
//!  ──────────────────────────────────────────     ─────────────────────────────────
//!  flags[sig].store(true)              (S1 rel)   loop:
//!  write(pipe, 1 byte)  (nonblocking; a full       read(pipe)            (blocks until a byte)
//!    pipe already holds a byte, so dropping        for each sig:
//!    this one loses nothing)                         flags[sig].swap(false)  (S1 acq)
//!                                                    → deliver to the receivers of sig
//! ```
//!
//! # Memory ordering
//!
//! The guarantee: a signal whose handler ran is delivered by the dispatcher (several
//! deliveries of one signal before the dispatcher looks may merge into one, as the kernel
//! merges pending standard signals anyway).
//!
//! - (S1) The flag is set *before* the byte is written, and the dispatcher reads a byte
//!   *before* it looks at the flags. Every flag set is therefore followed by a byte the
//!   dispatcher has not consumed yet when it last looked, so it looks again. The pipe's write
//!   and read order the two (the kernel's locks); the Release store and Acquire swap say the
//!   same to the memory model (and to loom, whose pipe is a mutex). Writing the byte first
//!   would lose a signal: the dispatcher could consume the byte and scan the flags before
//!   the handler sets one, then block with nobody left to write (the `flag_then_byte`
//!   model's mutation).

use crate::loom::{AtomicBool, Ordering};

/// Signal numbers are 1..=64 on Linux.
pub(crate) const NSIG: usize = 65;

/// One "arrived, not yet dispatched" flag per signal number.
pub(crate) struct Pending {
    flags: [AtomicBool; NSIG],
}

impl Pending {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Pending {
        Pending { flags: [const { AtomicBool::new(false) }; NSIG] }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Pending {
        Pending { flags: core::array::from_fn(|_| AtomicBool::new(false)) }
    }

    /// Marks `sig` arrived (the handler's first step; lock-free, so async-signal-safe).
    pub(crate) fn raise(&self, sig: usize) {
        // S1: Release, read by the Acquire swap in `take`.
        self.flags[sig].store(true, Ordering::Release);
    }

    /// Whether `sig` arrived since the last call (the dispatcher's step after a pipe read).
    pub(crate) fn take(&self, sig: usize) -> bool {
        // S1: pairs with the Release store in `raise`.
        self.flags[sig].swap(false, Ordering::Acquire)
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
    /// flag is set, then blocks in `read` forever ("deadlock" failure).
    #[test]
    fn flag_then_byte() {
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
            let mut seen = [false; 3];
            while !(seen[1] && seen[2]) {
                pipe.read();
                for (sig, s) in seen.iter_mut().enumerate().skip(1) {
                    if pending.take(sig) {
                        *s = true;
                    }
                }
            }
            h1.join().unwrap();
            h2.join().unwrap();
        });
    }
}
