//! Padding and spinning: the stack's one rule against false sharing ([`Padded`]) and one
//! policy for waiting on another thread without sleeping ([`Spin`], [`spin_hint`],
//! [`spin_for`]). The scheduler and the `purloin` facade (its locks and channels) use these;
//! the leaf crates (purloin-deque, purloin-parking) keep their own padded type so that they
//! stay free of dependencies, with the same 128-byte rule.
//!
//! # The policy
//!
//! Choose by how long the other thread may take:
//!
//! | the wait | tool | why |
//! |---|---|---|
//! | a few instructions (a lock-free retry of a word another thread just changed, a binder's few stores) | one [`spin_hint`] per look, or [`Spin::retry`] | yielding costs a system call (or a green switch) that is longer than the wait |
//! | possibly longer, but never blocking (a slot another thread is writing, a spin lock whose holder never blocks) | a [`Spin`]: rounds of spin hints, then yields | spinning wins when the other thread is running; the yield lets it run when it was preempted (on a green thread the yield is green, so the worker's other green threads run) |
//! | possibly long, and the caller can sleep (a worker searching for work; the facade's `Mutex` and `RwLock` while the holder runs) | a [`Spin`] that ends in [`Step::Sleep`], or a fixed number of [`spin_hint`]s (the locks: Go's 4 × 30, and 100); the caller then parks | spinning a little hides the wake-up latency of a sleep; spinning long burns a core |
//! | a grace period measured in time | [`spin_for`] | |
//!
//! The flavours ([`Spin::searching`], [`Spin::settling`], [`Spin::backoff`],
//! [`Spin::locking`]) fix the counts for each kind of caller; their numbers are the ones
//! the callers were tuned with.
//!
//! # Loom
//!
//! Under `cfg(loom)` a spin hint is a yield to the model, and every flavour spins at most one
//! round before it yields or sleeps: spinning adds nothing to a protocol and multiplies the
//! interleavings a model explores.

use core::ops::{Deref, DerefMut};

/// Pads and aligns `T` to 128 bytes, so that two values written by different cores never
/// share a cache line: on x86_64 the adjacent-line prefetcher pulls 64-byte lines in pairs,
/// so the unit of false sharing is 128 bytes (crossbeam's `CachePadded` uses the same size
/// there, as does Go's `cpu.CacheLinePad` on its largest targets). Use it for values that sit
/// side by side and are written by different threads: the scheduler's P's, a channel's head
/// and tail.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::AtomicUsize;
/// use purloin_sched::spin::Padded;
///
/// struct Queue {
///     head: Padded<AtomicUsize>, // written by consumers
///     tail: Padded<AtomicUsize>, // written by producers
/// }
/// let q = Queue { head: Padded(AtomicUsize::new(0)), tail: Padded(AtomicUsize::new(0)) };
/// assert_eq!(std::mem::align_of_val(&q.head), 128);
/// let _ = (&*q.head, &*q.tail);
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[repr(align(128))]
pub struct Padded<T>(pub T);

impl<T> Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Padded<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// One spin-loop hint: the CPU's pause instruction (`core::hint::spin_loop`); under loom a
/// yield to the model. Use it in a loop that waits a few instructions of another thread (see
/// the [policy](self)).
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// let ready = AtomicBool::new(true);
/// while !ready.load(Ordering::Acquire) {
///     purloin_sched::spin::spin_hint();
/// }
/// ```
#[inline]
pub fn spin_hint() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    crate::sync::thread::yield_now();
}

/// Spins for `d`: a grace period measured in time (under loom, one yield to the model).
///
/// # Examples
///
/// ```
/// purloin_sched::spin::spin_for(std::time::Duration::from_micros(3));
/// ```
pub fn spin_for(d: core::time::Duration) {
    #[cfg(not(loom))]
    {
        let start = std::time::Instant::now();
        while start.elapsed() < d {
            core::hint::spin_loop();
        }
    }
    #[cfg(loom)]
    {
        let _ = d;
        spin_hint();
    }
}

/// A wait in rounds (see the [policy](self)): rounds of spin hints, then yields, then (for a
/// flavour that ends) [`Step::Sleep`]. Make one per wait with the flavour that fits the
/// caller, and call [`step`](Spin::step) each time the condition is not met yet.
///
/// # Examples
///
/// Waiting for a flag another thread sets within a few stores:
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use purloin_sched::spin::Spin;
///
/// let done = AtomicBool::new(false);
/// std::thread::scope(|s| {
///     s.spawn(|| done.store(true, Ordering::Release));
///     let mut spin = Spin::settling();
///     while !done.load(Ordering::Acquire) {
///         spin.step();
///     }
/// });
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Spin {
    /// The next round.
    round: u32,
    /// The round a flavour starts at (and starts over at after [`Step::Sleep`]).
    first: u32,
    /// Rounds below this spin.
    spin_below: u32,
    /// Rounds from `spin_below` up to this yield; from it on the wait ends ([`Step::Sleep`]).
    /// `u32::MAX`: never ends.
    yield_below: u32,
    /// Hints per spinning round.
    hints: Hints,
    /// What a yielding round yields.
    yields: Yields,
}

#[derive(Clone, Copy, Debug)]
enum Hints {
    /// `2^round` hints.
    Doubling,
    /// One hint.
    One,
}

#[derive(Clone, Copy, Debug)]
enum Yields {
    /// The OS thread (`std::thread::yield_now`).
    OsThread,
    /// The green thread when on one ([`yield_now`](crate::yield_now): the worker's other
    /// green threads run), else the OS thread.
    GreenThread,
}

/// What a [`Spin`] round did.
///
/// # Examples
///
/// ```
/// use purloin_sched::spin::{Spin, Step};
/// assert_eq!(Spin::locking().step(), Step::Spun); // a lock waiter never gives up
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Spun or yielded: look again.
    Spun,
    /// Done spinning: the caller sleeps (the count starts over).
    Sleep,
}

impl Spin {
    /// A worker searching for work, which parks when the search ends: rounds 1–3 spin 2, 4
    /// and 8 hints, rounds 4–15 yield the OS thread, round 16 is [`Step::Sleep`] (adaptive
    /// spinning: spin, then yield, then sleep). Under loom the first round sleeps.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::spin::{Spin, Step};
    /// let mut spin = Spin::searching();
    /// let rounds = (1..).find(|_| spin.step() == Step::Sleep).unwrap();
    /// assert_eq!(rounds, 16);
    /// ```
    #[inline]
    pub const fn searching() -> Spin {
        let (spin_below, yield_below) = if cfg!(loom) { (1, 1) } else { (4, 16) };
        Spin::new(1, spin_below, yield_below, Hints::Doubling, Yields::OsThread)
    }

    /// A wait that another thread ends in a few stores and never blocks: one hint per round
    /// for 63 rounds, then OS-thread yields; never sleeps. Under loom, hints only.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::spin::{Spin, Step};
    /// let mut spin = Spin::settling();
    /// assert!((0..1000).all(|_| spin.step() == Step::Spun));
    /// ```
    #[inline]
    pub const fn settling() -> Spin {
        let spin_below = if cfg!(loom) { u32::MAX } else { 64 };
        Spin::new(1, spin_below, u32::MAX, Hints::One, Yields::OsThread)
    }

    /// A lock-free structure's backoff (crossbeam's `Backoff`): [`step`](Spin::step) waits
    /// for another thread to finish a step (a slot being written) with rounds of 1, 2, 4, …,
    /// 64 hints and then green-thread yields, never sleeping; [`retry`](Spin::retry) backs
    /// off a failed CAS with the same doubling, capped at 64 hints, never yielding. Under
    /// loom one hint, then yields.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use purloin_sched::spin::Spin;
    ///
    /// let counter = AtomicUsize::new(0);
    /// let mut backoff = Spin::backoff();
    /// let mut seen = counter.load(Ordering::Relaxed);
    /// while let Err(now) =
    ///     counter.compare_exchange_weak(seen, seen + 1, Ordering::AcqRel, Ordering::Relaxed)
    /// {
    ///     seen = now;
    ///     backoff.retry();
    /// }
    /// assert_eq!(counter.load(Ordering::Relaxed), 1);
    /// ```
    #[inline]
    pub const fn backoff() -> Spin {
        let spin_below = if cfg!(loom) { 1 } else { 7 };
        Spin::new(0, spin_below, u32::MAX, Hints::Doubling, Yields::GreenThread)
    }

    /// A spin lock whose holder never blocks while holding it: rounds of 1, 2, 4, …, 32
    /// hints, then OS-thread yields (the holder runs on another OS thread, or was preempted
    /// and the yield lets it run); never sleeps. Under loom, yields only.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use purloin_sched::spin::Spin;
    ///
    /// let locked = AtomicBool::new(false);
    /// let mut spin = Spin::locking();
    /// while locked.swap(true, Ordering::Acquire) {
    ///     spin.step();
    /// }
    /// locked.store(false, Ordering::Release);
    /// ```
    #[inline]
    pub const fn locking() -> Spin {
        let spin_below = if cfg!(loom) { 0 } else { 6 };
        Spin::new(0, spin_below, u32::MAX, Hints::Doubling, Yields::OsThread)
    }

    #[inline]
    const fn new(
        first: u32,
        spin_below: u32,
        yield_below: u32,
        hints: Hints,
        yields: Yields,
    ) -> Spin {
        Spin { round: first, first, spin_below, yield_below, hints, yields }
    }

    /// One round of waiting: spin, yield, or (once a flavour that ends has run out)
    /// [`Step::Sleep`], after which the count starts over.
    #[inline]
    pub fn step(&mut self) -> Step {
        let round = self.round;
        if round < self.spin_below {
            self.round = round + 1;
            self.hint(round);
            Step::Spun
        } else if round < self.yield_below {
            // A flavour that never ends stops counting here (`round + 1 <= yield_below`: no
            // overflow).
            if self.yield_below != u32::MAX {
                self.round = round + 1;
            }
            match self.yields {
                Yields::OsThread => crate::sync::thread::yield_now(),
                Yields::GreenThread => crate::yield_now(),
            }
            Step::Spun
        } else {
            self.round = self.first;
            Step::Sleep
        }
    }

    /// Backs off a lock-free retry (a CAS lost to another thread): the hints of the current
    /// round, at most those of the last spinning round; never yields. Later
    /// [`step`](Spin::step)s continue from the rounds counted here.
    #[inline]
    pub fn retry(&mut self) {
        let last = self.spin_below.saturating_sub(1);
        self.hint(self.round.min(last));
        if self.round < self.spin_below {
            self.round += 1;
        }
    }

    #[inline]
    fn hint(&self, round: u32) {
        let hints = match self.hints {
            Hints::Doubling => 1u32 << round,
            Hints::One => 1,
        };
        for _ in 0..hints {
            spin_hint();
        }
    }
}
