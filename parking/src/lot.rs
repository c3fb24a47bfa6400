//! [`ParkingLot`]: brpc's "snapshot, look for work, wait on the snapshot" idle protocol, with
//! the waiter count in the same futex word as the signal counter. The protocol, the word
//! layout and the guarantee are documented on [`ParkingLot`]; this block is for maintainers.
//!
//! # Memory ordering
//!
//! Guarantee: if a thread's snapshot precedes a `signal(n)` with `n >= 1` (in the word's
//! modification order), then after the signal some thread looks for work with a snapshot that
//! follows the signal: the waiting thread itself (its wait returns), or another waiter that the
//! signal's wake lands on and that snapshotted after the signal. A signal with no registered
//! waiter issues no syscall.
//!
//! - (P1) [`ParkingLot::signal`]'s `fetch_add(Release)` and [`ParkingLot::stop`]'s
//!   `fetch_or(Release)` synchronise with [`ParkingLot::state`]'s `load(Acquire)`: a snapshot
//!   that includes a signal sees everything the signalling thread wrote before signalling, so
//!   the scan that follows finds the published work (or what became of it).
//! - (P2) The same Release RMWs synchronise with the `Acquire` reads in `wait` that observe a
//!   changed word (the registration compare-and-swap's failure and the re-read after each futex
//!   return), so a wait that returns because of a signal happens-after it.
//! - No fence: the waiter's registration (compare-and-swap `+1 waiter` only if the epoch still
//!   equals the snapshot's) and the signaller's `fetch_add` are read-modify-writes of the same
//!   word. They are totally ordered in its modification order, and an RMW always reads the
//!   latest value, so whichever comes second sees the first: the signaller sees the waiter (and
//!   wakes) or the waiter sees the new epoch (and returns). Between the registration and the
//!   futex sleep the futex's compare-and-sleep covers the gap. There is no store-buffering
//!   window like the one in brpc's separate `_waiter_num` (brpc#2916, brpc#3539).
//! - Relaxed: the successful registration, the `-1 waiter` on exit (it only ever makes a later
//!   signal wake less, and the waiter is already leaving), and [`ParkingLot::waiters`].

use std::time::{Duration, Instant};

use crate::futex::{self, WaitResult};
use crate::stats::{self, Event};
use crate::sync::{AtomicU32, Ordering};

const STOPPED: u32 = 1;
const WAITER_SHIFT: u32 = 1;
const WAITER: u32 = 1 << WAITER_SHIFT;
const MAX_WAITERS: u32 = 0xFF;
const WAITER_MASK: u32 = MAX_WAITERS << WAITER_SHIFT;
const EPOCH: u32 = 1 << 9;

/// How long a waiter that found the waiter count full (255) sleeps at most before returning
/// spuriously, so that it re-registers once the count has room.
pub const SATURATED_POLL: Duration = Duration::from_millis(1);

/// A snapshot of a [`ParkingLot`], from [`ParkingLot::state`], to wait on with
/// [`ParkingLot::wait`]. Equal snapshots mean "no signal and no stop in between".
///
/// # Examples
///
/// ```
/// use purloin_parking::ParkingLot;
///
/// let lot = ParkingLot::new();
/// let s = lot.state();
/// assert_eq!(s, lot.state());
/// lot.signal(1);
/// assert_ne!(s, lot.state());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct State(u32);

impl State {
    /// Whether the lot had been stopped when this snapshot was taken. A stopped lot never
    /// blocks: waits on it return at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_parking::ParkingLot;
    ///
    /// let lot = ParkingLot::new();
    /// assert!(!lot.state().is_stopped());
    /// lot.stop();
    /// assert!(lot.state().is_stopped());
    /// ```
    #[must_use]
    pub fn is_stopped(self) -> bool {
        self.0 & STOPPED != 0
    }

    /// `word` still shows this snapshot: same epoch, and (since a snapshot passed to `wait` is
    /// not stopped) not stopped.
    fn matches(self, word: u32) -> bool {
        word & !WAITER_MASK == self.0
    }
}

/// Where idle threads sleep until a producer signals that there is work, without lost
/// wake-ups and without a syscall when nobody sleeps. Typically one per few workers, inside a
/// [`ParkingLots`](crate::ParkingLots).
///
/// A worker that finds nothing to do goes through three steps:
///
/// 1. `let s = lot.state();` (snapshot),
/// 2. look for work everywhere (a producer publishes work *before* calling
///    [`ParkingLot::signal`]),
/// 3. `lot.wait(s);` if nothing was found.
///
/// Any signal after the snapshot makes the wait return at once or wakes the waiter, so work
/// published between steps 1 and 3 is never slept through.
///
/// # Word layout
///
/// One `u32`, the futex word:
///
/// ```text
///  31                              9 8            1   0
/// +---------------------------------+--------------+---+
/// |   epoch (23 bits, wraps)        | waiters (8)  | S |
/// +---------------------------------+--------------+---+
/// ```
///
/// - `S` (bit 0): stopped. Set once by [`ParkingLot::stop`], never cleared.
/// - waiters (bits 1..=8): threads registered in [`ParkingLot::wait`], at most 255. A thread
///   that finds the count full waits unregistered with a short timeout instead (see below).
/// - epoch (bits 9..=31): bumped by every [`ParkingLot::signal`]; wraps modulo 2²³.
///
/// A [`State`] is the word with the waiter bits cleared: two snapshots are equal iff no signal
/// and no stop came between them (modulo wrap).
///
/// **Wrap.** The epoch wraps after 2²³ = 8,388,608 signals. A waiter compares the epoch of its
/// snapshot with the current one, so if *exactly* a multiple of 2²³ signals land between a
/// worker's snapshot and its registration (one scan for work), the worker cannot tell and
/// sleeps although those signals happened. That needs millions of signals during one scan *and*
/// an exact count; brpc's counter has the same property with 31 bits. The waiter count cannot
/// overflow into the epoch: registration is a compare-and-swap that refuses a full count.
///
/// **A full waiter count.** The 256th concurrent waiter cannot register. It waits on the word
/// unregistered with a deadline at most [`SATURATED_POLL`] away and then returns (a spurious
/// return, which callers of `wait` handle anyway). While the count is full a signal does wake
/// (the count is non-zero), so the only cost of saturation is that an unregistered waiter may
/// notice a signal up to 1 ms late if all registered waiters left meanwhile. Shard with
/// [`ParkingLots`](crate::ParkingLots) to stay far below 255 waiters per lot.
///
/// # Guarantee
///
/// If a thread's snapshot precedes a `signal(n)` with `n >= 1`, then after the signal some
/// thread looks for work with a snapshot that follows the signal: the waiting thread itself
/// (its wait returns), or another waiter that the signal's wake lands on and that snapshotted
/// after the signal. Everything the signalling thread wrote before `signal` is visible to a
/// thread whose snapshot follows the signal. A signal with no registered waiter issues no
/// syscall.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_parking::ParkingLot;
///
/// let lot = ParkingLot::new();
/// let work = AtomicUsize::new(0);
/// std::thread::scope(|s| {
///     s.spawn(|| loop {
///         let state = lot.state(); // 1. snapshot
///         if work.load(Ordering::Acquire) > 0 { // 2. look for work
///             break;
///         }
///         lot.wait(state); // 3. sleep unless something was signalled since 1.
///     });
///     work.store(1, Ordering::Release); // publish, then signal
///     lot.signal(1);
/// });
/// ```
pub struct ParkingLot {
    /// `epoch:23 | waiters:8 | stopped:1`, see the [type docs](ParkingLot#word-layout).
    word: AtomicU32,
}

impl ParkingLot {
    /// An empty lot: epoch 0, no waiters, not stopped.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_parking::ParkingLot;
    ///
    /// static IDLE: ParkingLot = ParkingLot::new();
    /// assert_eq!(IDLE.waiters(), 0);
    /// ```
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new() -> Self {
        ParkingLot { word: AtomicU32::new(0) }
    }

    /// An empty lot (loom's atomics have no `const` constructor).
    #[cfg(loom)]
    #[must_use]
    pub fn new() -> Self {
        ParkingLot { word: AtomicU32::new(0) }
    }

    /// Takes the snapshot to wait on. Take it **before** looking for work.
    #[inline]
    #[must_use]
    pub fn state(&self) -> State {
        // P1: Acquire, pairs with the Release RMW in `signal` / `stop`.
        State(self.word.load(Ordering::Acquire) & !WAITER_MASK)
    }

    /// Announces work: bumps the epoch (so every snapshot taken before is stale) and wakes up
    /// to `n` sleeping waiters. Returns how many threads were woken: the count the OS reports
    /// where it does ([`futex::WAKE_COUNT_IS_EXACT`]), else an upper bound, never more than the
    /// registered waiters. Publish the work before calling this.
    ///
    /// With no registered waiter this is one `fetch_add` and no syscall. `signal(0)` only bumps
    /// the epoch: threads between snapshot and wait will look again, nobody is woken.
    ///
    /// A woken count of 0 does not mean nobody will look: a waiter that registered but had not
    /// yet gone to sleep sees the new epoch and returns without being counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_parking::ParkingLot;
    ///
    /// let lot = ParkingLot::new();
    /// assert_eq!(lot.signal(1), 0); // nobody waits: no syscall
    /// ```
    #[inline]
    pub fn signal(&self, n: u32) -> u32 {
        // P1/P2: Release, pairs with the Acquire load in `state` and the Acquire reads in
        // `wait`. The RMW also orders this signal against every registration (no fence).
        let old = self.word.fetch_add(EPOCH, Ordering::Release);
        let waiters = (old & WAITER_MASK) >> WAITER_SHIFT;
        if n == 0 {
            return 0;
        }
        if waiters == 0 {
            stats::record(Event::WakeSkipped);
            return 0;
        }
        self.wake(n.min(waiters))
    }

    /// The syscall half of `signal`, out of line so the no-waiter path stays a few
    /// instructions when `signal` is inlined into a caller.
    #[inline(never)]
    fn wake(&self, n: u32) -> u32 {
        let woken = futex::wake(&self.word, n);
        // `woken` is capped at `n <= 255`, so the cast is lossless.
        woken.min(n as usize) as u32
    }

    /// Sleeps until a [`signal`](Self::signal) or [`stop`](Self::stop) that came after the
    /// snapshot `state`, or returns at once if one already came. Returns immediately if `state`
    /// is stopped.
    ///
    /// May return spuriously (only when 255 threads already wait on this lot, see the
    /// [type docs](ParkingLot#word-layout)), so take a new snapshot and look for work again after
    /// every return.
    pub fn wait(&self, state: State) {
        self.wait_until(state, None);
    }

    /// Like [`wait`](Self::wait), but also returns when `deadline` passes. Returns `true` if it
    /// returned because of the deadline with no signal or stop after the snapshot, `false`
    /// otherwise (signalled, stopped, or spurious).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use purloin_parking::ParkingLot;
    ///
    /// let lot = ParkingLot::new();
    /// let deadline = Instant::now() + Duration::from_millis(5);
    /// while !lot.wait_deadline(lot.state(), deadline) {}
    /// assert!(Instant::now() >= deadline);
    /// ```
    pub fn wait_deadline(&self, state: State, deadline: Instant) -> bool {
        self.wait_until(state, Some(deadline))
    }

    /// Stops the lot: wakes every waiter, and every later wait returns at once. Idempotent.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_parking::ParkingLot;
    ///
    /// let lot = ParkingLot::new();
    /// lot.stop();
    /// lot.wait(lot.state()); // returns at once
    /// ```
    pub fn stop(&self) {
        // P1/P2: Release, pairs with the Acquire reads in `state` and `wait`.
        let old = self.word.fetch_or(STOPPED, Ordering::Release);
        if old & WAITER_MASK != 0 {
            futex::wake_all(&self.word);
        } else {
            stats::record(Event::WakeSkipped);
        }
    }

    /// Whether [`stop`](Self::stop) has been called.
    #[must_use]
    pub fn is_stopped(&self) -> bool {
        self.state().is_stopped()
    }

    /// How many threads are registered as waiting right now (a racy snapshot, for diagnostics
    /// and tests; at most 255).
    #[must_use]
    pub fn waiters(&self) -> u32 {
        (self.word.load(Ordering::Relaxed) & WAITER_MASK) >> WAITER_SHIFT
    }

    /// Registers, sleeps until the word leaves `state` or the deadline passes, unregisters.
    /// Returns "timed out".
    fn wait_until(&self, state: State, deadline: Option<Instant>) -> bool {
        if state.is_stopped() {
            return false;
        }
        // P2: Acquire, pairs with the Release RMW in `signal` / `stop`.
        let mut word = self.word.load(Ordering::Acquire);
        let mut expected = loop {
            if !state.matches(word) {
                return false;
            }
            if word & WAITER_MASK == WAITER_MASK {
                return self.wait_unregistered(word, deadline);
            }
            // +1 waiter, only if no signal or stop came since the snapshot. Success Relaxed
            // (no data to publish); failure Acquire: P2, pairs with the Release RMW in
            // `signal` / `stop`.
            match self.word.compare_exchange(
                word,
                word + WAITER,
                Ordering::Relaxed,
                Ordering::Acquire,
            ) {
                Ok(_) => break word + WAITER,
                Err(current) => word = current,
            }
        };
        let timed_out = loop {
            let result = futex::wait(&self.word, expected, deadline);
            // P2: Acquire, pairs with the Release RMW in `signal` / `stop`.
            let now = self.word.load(Ordering::Acquire);
            if !state.matches(now) {
                break false;
            }
            if result == WaitResult::TimedOut {
                break true;
            }
            // Nothing we wait for changed: another waiter came or went (the word moved under
            // our futex wait), or a wake meant for an earlier epoch landed on us, or the OS
            // returned spuriously. We are still registered: sleep again on the current word.
            expected = now;
        };
        self.word.fetch_sub(WAITER, Ordering::Relaxed);
        timed_out
    }

    /// The waiter count is full: sleep unregistered, briefly. Returns "timed out" (only if the
    /// caller's own deadline passed).
    fn wait_unregistered(&self, word: u32, deadline: Option<Instant>) -> bool {
        let poll = Instant::now() + SATURATED_POLL;
        let until = deadline.map_or(poll, |d| d.min(poll));
        futex::wait(&self.word, word, Some(until));
        deadline.is_some_and(|d| Instant::now() >= d)
    }
}

impl Default for ParkingLot {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for ParkingLot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let word = self.word.load(Ordering::Relaxed);
        f.debug_struct("ParkingLot")
            .field("epoch", &(word >> 9))
            .field("waiters", &((word & WAITER_MASK) >> WAITER_SHIFT))
            .field("stopped", &(word & STOPPED != 0))
            .finish()
    }
}
