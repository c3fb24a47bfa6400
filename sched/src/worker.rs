//! M: the worker threads and their scheduling loop: finding work, stealing, spinning, parking.
//!
//! `impl M` is split by concern over four files: here the loop and finding work (`run`,
//! `find_runnable`, `steal_work`, `park`, `retire`); `held.rs` the proof of holding a P and
//! the record cache (`M::held`, `alloc_g`, `recycle`); `entry.rs` turning a dequeued entry
//! into a G (`M::accept`, `adopt_job`, `adopt_task`); `switch.rs` running a G and finishing
//! its switch on g0 (`M::execute`, `step`, `finish`).
//!
//! Each worker (an OS thread, Go's M) holds one P and runs a loop on its own stack (Go's g0):
//! find a runnable G, switch to it (`switch`), and when the G switches back, finish what it
//! asked for (also `switch`). Where runnable G's are queued is `ready`.
//!
//! # Finding work (Go's order)
//!
//! ```text
//!  every 61st tick: due timers, then one G from the global queue, else the oldest local G
//!                   (fairness: G's that never leave the local queue cannot starve these)
//!  pinned queue → runnext (at most 3 in a row) → local pop (LIFO) → runnext
//!  → global batch (min(16, len/P + 1)) → due timers → poller (non-blocking)
//!  → steal (the victim's oldest fork job, or half of its green threads: `steal_from`;
//!    random start, coprime stride, 4 passes; on the last, a victim's runnext after
//!    `RUNNEXT_GRACE` unless the victim scheduled meanwhile)
//!  → spin (< 4 tight, 4–15 yield the thread, ≥ 16 park with deadline = the earliest timer
//!    of any P, so a busy P's due timer wakes an idle worker, which fires it on its last
//!    steal pass: Go's timer stealing)
//! ```
//!
//! The monitor polls the poller when busy workers have not for 10 ms, and fires the due
//! timers of P's whose holder is running a green thread (Go's sysmon). A yield
//! with nothing else runnable locally and no fairness tick due resumes the G at once
//! (`switch`).
//!
//! # Thread-locals and migration
//!
//! A G may resume on another worker, so no code here keeps a thread-local *address* across a
//! switch: the worker is found again after every resume from the `data` word the resumer
//! passes (a pointer to its `M`), and [`current_m`] is never inlined (llvm#98479).

use core::cell::Cell;
use std::io;
use std::time::{Duration, Instant};

use purloin_context::Context;
use purloin_deque::{Steal, Stealer, Worker};

use crate::entry::Entry;
use crate::g::GRef;
use crate::p::{self, P};
use crate::registry::registry;
use crate::shared::{PHASE_STOPPED, Shared};
use crate::stats::{add, bump};
use crate::sync::{Arc, Ordering, STAT, Spin, Step, lock, spin_for, thread};

/// Passes over the victims per steal attempt (Go: 4; the last one may take `runnext`).
#[cfg(not(loom))]
const STEAL_PASSES: usize = 4;
#[cfg(loom)]
const STEAL_PASSES: usize = 2;

/// The most green threads one steal moves besides the one it returns (Go steals at most half
/// of its 256-entry run queue).
const STEAL_HALF_LIMIT: usize = 127;

/// How long a thief on its last pass lets a running victim take its own runnext first: long
/// enough for the victim's green thread to block and the victim to run it (a ping-pong pair
/// stays on one core), short against a park.
const RUNNEXT_GRACE: Duration = Duration::from_micros(3);

/// A search polls the poller in its first round and then in every this-many rounds
/// (`M::find_runnable`).
const POLL_EVERY_ROUNDS: u32 = 4;

/// "No P" in `M::p`.
pub(crate) const NO_P: usize = usize::MAX;

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A worker's own state. Lives on the worker thread's stack (g0) for the thread's lifetime;
/// green threads running on this worker reach it through the `data` word of each resume.
/// Only code running on this OS thread touches it (g0, or the G it is running).
pub(crate) struct M {
    pub(crate) shared: Arc<Shared>,
    /// The P this worker holds, or `NO_P`. Set with [`M::set_p`] (which keeps `held_p`).
    pub(crate) p: Cell<usize>,
    /// `&shared.ps[p]` while this worker holds `p` outside a blocking section, else null: what
    /// [`M::held`] checks, as one load (kept by [`M::set_p`] and [`M::set_in_blocking`]).
    held_p: Cell<*const P>,
    /// The scheduling context, while a G runs.
    pub(crate) g0: Cell<Option<Context>>,
    /// The G being run.
    pub(crate) current: Cell<Option<GRef>>,
    /// Inside a blocking section (the P may be retaken: do not touch its owner-only parts).
    /// Set with [`M::set_in_blocking`].
    pub(crate) in_blocking: Cell<bool>,
    /// Schedules left until the next fairness tick (counts down from `global_queue_interval`).
    pub(crate) fair_countdown: Cell<u32>,
    pub(crate) runnext_streak: Cell<u32>,
    pub(crate) rng: Cell<u64>,
    pub(crate) searching: Cell<bool>,
    /// Set by `find_runnable` for a search round that does not poll the poller.
    skip_poll: Cell<bool>,
    /// A stackless task is being stepped on this worker (wakes it makes use runnext).
    pub(crate) stepping: Cell<bool>,
    /// Set while this worker queues a batch of green threads the poller readied, which it is
    /// about to run itself: pushes do not wake another worker; the batch notifies once, for
    /// the green threads beyond the first (Go's findRunnable runs one and injects the rest).
    pub(crate) poll_batch: Cell<bool>,
    /// This worker retired with its removed P (`set_workers`): its thread ends.
    pub(crate) retired: Cell<bool>,
    /// Set while the running G is in a [`NoSwitch`](crate::NoSwitch) section: why it must not
    /// switch out (checked by `switch_out_from`).
    pub(crate) no_switch: Cell<Option<&'static str>>,
    /// A finished G's stack, handed to the next G that has none (brpc's ending_sched).
    pub(crate) spare_stack: Cell<Option<purloin_stack::Stack>>,
    /// Where this worker's joins look for their children, and their back-off
    /// (`join::find_child`).
    pub(crate) looks: crate::join::Looks,
    /// Queueings of green threads left until this worker times one's wait for a worker
    /// (`M::sample_queued`, `Stats::sched_latency`).
    latency_countdown: Cell<u32>,
    /// Time the parks of the green threads this worker runs (`Builder::park_histogram`; a
    /// copy kept here, in the cache line a park touches anyway).
    pub(crate) time_parks: bool,
}

/// The worker this OS thread runs, or null. Each call reads the thread-local afresh: the
/// access is behind a never-inlined call (`sync::current_worker_ptr`), since a G may resume
/// on another thread and an inlined access could reuse a thread pointer computed before a
/// switch.
#[inline]
pub(crate) fn current_m() -> *const M {
    crate::sync::current_worker_ptr().cast()
}

/// The worker this OS thread runs, if any.
///
/// The reference is only good until the calling green thread next switches (a park, yield,
/// join, or any user code that may do one): after that the green thread may run on another
/// worker. Fetch it again after every such call — a stale one touches another OS thread's
/// owner-only state (`fork::take_back` fetches it again after running `a`).
#[inline]
pub(crate) fn current_worker<'a>() -> Option<&'a M> {
    let m = current_m();
    // SAFETY: the current-worker slot is set by `worker_main` to an M that lives on that thread's stack for
    // as long as the pointer is set, and only this thread reads it; the returned reference is
    // used by the caller before it can switch threads (callers re-fetch after switches).
    unsafe { m.as_ref() }
}

impl M {
    pub(crate) fn new(shared: Arc<Shared>, p: usize, id: usize) -> M {
        let interval = shared.config.global_queue_interval;
        let time_parks = shared.config.park_histogram;
        let m = M {
            shared,
            p: Cell::new(NO_P),
            held_p: Cell::new(core::ptr::null()),
            g0: Cell::new(None),
            current: Cell::new(None),
            in_blocking: Cell::new(false),
            fair_countdown: Cell::new(interval),
            runnext_streak: Cell::new(0),
            rng: Cell::new(
                0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
            ),
            searching: Cell::new(false),
            skip_poll: Cell::new(false),
            spare_stack: Cell::new(None),
            retired: Cell::new(false),
            no_switch: Cell::new(None),
            stepping: Cell::new(false),
            poll_batch: Cell::new(false),
            looks: crate::join::Looks::new(),
            latency_countdown: Cell::new(1 + id as u32 % crate::stats::SCHED_LATENCY_PERIOD),
            time_parks,
        };
        m.set_p(p);
        m
    }

    /// Binds this worker to P `pi` (`NO_P`: to none), keeping [`M::held`]'s cache.
    #[inline]
    pub(crate) fn set_p(&self, pi: usize) {
        self.p.set(pi);
        self.refresh_held();
    }

    /// Enters or leaves a blocking section's window (see `in_blocking`), keeping
    /// [`M::held`]'s cache.
    #[inline]
    pub(crate) fn set_in_blocking(&self, on: bool) {
        self.in_blocking.set(on);
        self.refresh_held();
    }

    fn refresh_held(&self) {
        let pi = self.p.get();
        let held = if pi != NO_P && !self.in_blocking.get() {
            &*self.shared.ps[pi] as *const P
        } else {
            core::ptr::null()
        };
        self.held_p.set(held);
    }

    /// The P [`M::held`] proves held, or null: see `held_p`.
    #[inline]
    pub(crate) fn held_p(&self) -> *const P {
        self.held_p.get()
    }

    /// The P this worker is bound to, for its shared parts (counters, status, runnext);
    /// the owner-only parts need a [`HeldP`](crate::held::HeldP) (`M::held`). Panics (a
    /// broken invariant) if it has none.
    pub(crate) fn p(&self) -> &P {
        &self.shared.ps[self.p.get()]
    }

    /// Samples the scheduling latency (`Stats::sched_latency`) of `g`, which this worker is
    /// queueing and has just stamped: on one of about every `SCHED_LATENCY_PERIOD` calls the
    /// stamp is replaced by a precise reading, which the switch-in that finds it turns into a
    /// latency. Otherwise a count down (a load and a store of a field of this worker).
    #[inline(always)]
    pub(crate) fn sample_queued(&self, g: GRef) {
        let left = self.latency_countdown.get().wrapping_sub(1);
        self.latency_countdown.set(left);
        if left == 0 {
            self.stamp_precise(g);
        }
    }

    /// [`M::sample_queued`]'s sample: the precise stamp, and the count down to the next one,
    /// drawn uniformly from `[P/2, 3P/2)` queueings (`P` = `SCHED_LATENCY_PERIOD`, the mean),
    /// so that a pattern of queueings that repeats with the period is not timed always at the
    /// same green thread.
    #[cold]
    #[inline(never)]
    fn stamp_precise(&self, g: GRef) {
        g.since.store(crate::clock::precise() | crate::clock::PRECISE, crate::sync::STAT);
        let period = crate::stats::SCHED_LATENCY_PERIOD;
        self.latency_countdown.set(period / 2 + (self.next_rand() % u64::from(period)) as u32);
    }

    fn next_rand(&self) -> u64 {
        // xorshift64*: cheap and good enough for victim selection.
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// The scheduling loop. Returns when the scheduler stops (or this worker loses its P and
    /// must become a spare: then the caller decides).
    pub(crate) fn run(&self) {
        let mut next: Option<GRef> = None;
        loop {
            if self.p.get() == NO_P {
                return;
            }
            if next.is_none() && self.p.get() >= self.shared.nprocs.load(Ordering::Acquire) {
                self.retire();
                return;
            }
            let g = match next.take() {
                Some(g) => g,
                None => match self.find_runnable() {
                    Some(g) => g,
                    None => return,
                },
            };
            next = self.execute(g);
        }
    }

    /// This worker's P was removed by `Scheduler::set_workers`: hand its work to the others
    /// (global queue; timers to P 0), leave the idle counts, and let the thread end.
    fn retire(&self) {
        let shared = &*self.shared;
        let pi = self.p.get();
        let held = self.held_on_g0();
        let (p, local) = (held.p(), held.local());
        let mut moved = Vec::new();
        moved.extend(p.take_runnext());
        while let Some(g) = local.pop() {
            moved.push(g);
        }
        if !moved.is_empty() {
            shared.injector.push_batch(moved);
        }
        p.timers.move_to(&shared.ps[0].timers, shared.epoch);
        shared.idle.retire(pi, self.searching.replace(false));
        registry().give_free(held.take_cache());
        // The holding ends here (R2: Release).
        p.status.store(p::RETIRED, Ordering::Release);
        self.set_p(NO_P);
        self.retired.set(true);
        let _guard = lock(&shared.resize.0);
        shared.resize.1.notify_all();
        drop(_guard);
        shared.notify_work();
    }

    // ---------------------------------------------------------------------------------------
    // Finding work

    /// One pass over this worker's own sources (no stealing). Returns a claimed G.
    fn find_local(&self) -> Option<GRef> {
        let held = self.held_on_g0();
        let (p, local) = (held.p(), held.local());
        // A countdown, not `tick % interval`: a division costs more than the rest of a yield.
        let fair = self.fair_countdown.get() <= 1;
        self.fair_countdown.set(if fair {
            self.shared.config.global_queue_interval
        } else {
            self.fair_countdown.get() - 1
        });
        if let Some(g) = p.pop_pinned() {
            return self.accept(g.into()).or_else(|| self.find_local());
        }
        if fair {
            // Fairness: due timers fire, and a G in the global queue, or the oldest local G,
            // runs at least this often (otherwise G's that never leave the local queue, like a
            // yield loop, would starve them: timers are otherwise checked only when it is
            // empty).
            p.timers.fire_due(self.shared.epoch);
            if let Some(g) = self.take_global(1) {
                return Some(g);
            }
            if let Some(g) = steal_success(p.stealer.steal()).and_then(|g| self.accept(g)) {
                return Some(g);
            }
        }
        if self.runnext_streak.get() < self.shared.config.max_runnext_streak
            && let Some(g) = p.take_runnext()
        {
            self.runnext_streak.set(self.runnext_streak.get() + 1);
            if let Some(g) = self.accept(g) {
                return Some(g);
            }
        }
        self.runnext_streak.set(0);
        while let Some(g) = local.pop() {
            if let Some(g) = self.accept(g) {
                return Some(g);
            }
        }
        if let Some(g) = p.take_runnext().and_then(|g| self.accept(g)) {
            return Some(g);
        }
        let n = (self.shared.injector.len() / self.shared.active().len() + 1).min(16);
        if let Some(g) = self.take_global(n) {
            return Some(g);
        }
        if p.timers.fire_due(self.shared.epoch) > 0 {
            return self.find_local();
        }
        if !self.skip_poll.get() && crate::poll::poll_nonblocking(self) > 0 {
            return self.find_local();
        }
        None
    }

    /// Takes one G from the global queue and moves up to `n - 1` more into the local queue.
    fn take_global(&self, n: usize) -> Option<GRef> {
        if self.shared.injector.is_empty() {
            return None;
        }
        let held = self.held_on_g0();
        let (p, local) = (held.p(), held.local());
        for _ in 0..4 {
            match self.shared.injector.steal_batch_with_limit_and_pop(local, n.max(1)) {
                Steal::Success(g) => {
                    bump(&p.stats.global_pulls);
                    let pi = self.p.get();
                    crate::hook::emit(move || crate::hook::Event::GlobalPull { p: pi });
                    if let Some(g) = self.accept(g) {
                        return Some(g);
                    }
                    // A stale entry: the batch (if any) is now local.
                    return local.pop().and_then(|g| self.accept(g));
                }
                Steal::Empty => return None,
                Steal::Retry => crate::sync::spin_hint(),
            }
        }
        None
    }

    /// Steals from other P's (`steal_from` says what one steal takes): random start, coprime
    /// stride, 4 passes; the victim's runnext only on the last pass, after a short back-off if
    /// the victim is running (Go's rule).
    fn steal_work(&self) -> Option<GRef> {
        let shared = &*self.shared;
        let n = shared.active().len();
        if n == 1 {
            return None;
        }
        let me = self.p.get();
        let held = self.held_on_g0();
        let (p, local) = (held.p(), held.local());
        for pass in 0..STEAL_PASSES {
            let last = pass == STEAL_PASSES - 1;
            let r = self.next_rand() as usize;
            // A stride coprime with n visits every P once (n is small: the loop is short).
            let mut stride = 1 + (r >> 16) % n;
            while gcd(stride, n) != 1 {
                stride = stride % n + 1;
            }
            let mut victim = r % n;
            for _ in 0..n {
                victim = (victim + stride) % n;
                if victim == me {
                    continue;
                }
                let v = &shared.ps[victim];
                if last
                    && v.timers.fire_due(shared.epoch) > 0
                    && let Some(g) = local.pop().and_then(|g| self.accept(g))
                {
                    return Some(g);
                }
                if !v.stealer.is_empty() {
                    bump(&p.stats.steal_attempts);
                    let before = local.len();
                    if let Steal::Success(g) = steal_from(&v.stealer, local) {
                        bump(&p.stats.steals);
                        let count = local.len() - before + 1;
                        add(&p.stats.stolen, count as u64);
                        crate::hook::emit(move || crate::hook::Event::Steal {
                            thief: me,
                            victim,
                            count,
                        });
                        if let Some(g) = self.accept(g) {
                            return Some(g);
                        }
                        if let Some(g) = local.pop().and_then(|g| self.accept(g)) {
                            return Some(g);
                        }
                    }
                }
                if last && !v.runnext.load(Ordering::Relaxed).is_null() {
                    // The victim's running G probably just readied it and is about to block;
                    // give it `RUNNEXT_GRACE` to run it itself (many hand-offs' worth). If it
                    // scheduled meanwhile, it is making progress through its runnext (a
                    // ping-pong pair): stealing would split the pair across cores. (Go steals
                    // whatever sits there after the wait; the park re-check sees a runnext
                    // that stays, so nothing is stranded.)
                    if v.status.load(Ordering::Relaxed) == p::RUNNING {
                        let tick = v.schedtick.load(Ordering::Relaxed);
                        spin_for(RUNNEXT_GRACE);
                        if v.schedtick.load(Ordering::Relaxed) != tick {
                            continue;
                        }
                    }
                    bump(&p.stats.steal_attempts);
                    if let Some(g) = v.take_runnext() {
                        bump(&p.stats.steals);
                        bump(&p.stats.stolen);
                        crate::hook::emit(move || crate::hook::Event::Steal {
                            thief: me,
                            victim,
                            count: 1,
                        });
                        if let Some(g) = self.accept(g) {
                            return Some(g);
                        }
                    }
                }
            }
        }
        None
    }

    /// The whole search: local sources, then stealing with adaptive spinning, then parking.
    /// Returns `None` when the scheduler stops (or this worker lost its P).
    ///
    /// The poller is polled (without blocking) in the first round and every
    /// [`POLL_EVERY_ROUNDS`]th after it, not in every round: a poll is a system call, and the
    /// rounds between are a few spins or OS-thread yields apart. Readiness is never missed for
    /// it: a worker about to park polls again, then blocks in the poller or parks while
    /// another worker blocks in it.
    pub(crate) fn find_runnable(&self) -> Option<GRef> {
        let mut spin = Spin::searching();
        let mut round = 0u32;
        loop {
            self.skip_poll.set(!round.is_multiple_of(POLL_EVERY_ROUNDS));
            round += 1;
            let found = self.find_local();
            self.skip_poll.set(false);
            if let Some(g) = found {
                self.found_work();
                return Some(g);
            }
            if self.shared.phase.load(Ordering::Acquire) == PHASE_STOPPED {
                self.leave_searching();
                return None;
            }
            if self.p.get() >= self.shared.nprocs.load(Ordering::Acquire) {
                // Removed by `set_workers`: back to `run`, which retires this worker.
                return None;
            }
            if self.searching.get() || self.shared.idle.try_start_searching() {
                self.searching.set(true);
                if let Some(g) = self.steal_work() {
                    self.found_work();
                    return Some(g);
                }
            }
            bump(&self.p().stats.spins);
            if spin.step() == Step::Sleep {
                self.park();
                if self.p.get() == NO_P {
                    return None;
                }
                if self.p.get() >= self.shared.nprocs.load(Ordering::Acquire) {
                    // Retired while parked (a spare the monitor removed, S2 in `blocking`, or
                    // `set_workers`): take no work for a P nobody steals from any more.
                    return None;
                }
                round = 0;
            }
        }
    }

    /// Found work while (possibly) searching: stop searching; the last searcher wakes another
    /// so a burst keeps ramping up (Go's resetspinning).
    pub(crate) fn found_work(&self) {
        if self.searching.replace(false) && self.shared.idle.stop_searching() {
            self.shared.notify_work();
        }
    }

    fn leave_searching(&self) {
        if self.searching.replace(false) {
            self.shared.idle.stop_searching();
        }
    }

    /// Parks this worker's OS thread until woken, a timer is due, or the scheduler stops.
    fn park(&self) {
        let shared = &*self.shared;
        let pi = self.p.get();
        let lot = shared.lots.lot(pi);
        // The snapshot comes before joining the sleepers: a waker can only pick us after it.
        let snapshot = lot.state();
        let last = shared.idle.transition_to_parked(pi, self.searching.replace(false));
        shared.idle.fence_before_recheck();
        // F2 is also the fence of this worker's finishes since its last park (L2).
        shared.notify_if_draining();
        let p = &shared.ps[pi];
        // Every P's earliest timer, not only this one's: a timer of a P whose holder is busy
        // running a green thread is fired by a worker that wakes for it and steals it (the
        // last steal pass), Go's `stealWork` timer stealing.
        let due = crate::timer_heap::earliest(shared.active(), shared.epoch);
        let recheck = shared.any_work(pi)
            || shared.phase.load(Ordering::Acquire) == PHASE_STOPPED
            || due.is_some_and(|d| d <= Instant::now())
            || crate::poll::poll_nonblocking(self) > 0;
        if recheck {
            // Work appeared between giving up and parking: search for it (as Go does after
            // `checkRunqsNoP`), even past the half-of-the-workers limit.
            if !shared.idle.unpark_self(pi) {
                shared.idle.start_searching_unconditionally();
            }
            // The monitor may have seen every worker parked meanwhile (M1, `blocking`).
            shared.monitor_kick_idle();
            self.searching.set(true);
            crate::sync::spin_hint();
            return;
        }
        bump(&p.stats.parks);
        if last {
            // Every worker parks: the scheduler may be quiescent now (a deadlock watch checks;
            // Go's `checkdead` when the last M goes idle).
            crate::outside::note_scheduler_idle(shared);
        }
        crate::hook::emit(move || crate::hook::Event::WorkerPark { p: pi });
        let readied = crate::poll::poll_blocking(self, due, &snapshot);
        if readied.is_none() {
            match due {
                Some(d) => {
                    lot.wait_deadline(snapshot, d);
                }
                None => lot.wait(snapshot),
            }
        }
        crate::hook::emit(move || crate::hook::Event::WorkerWake { p: pi });
        self.searching.set(shared.idle.unpark_self(pi));
        // An idle monitor watches again: this worker may run green threads now (M1,
        // `blocking`).
        shared.monitor_kick_idle();
        if readied.is_some_and(|n| n > 1) {
            // This worker runs one of them; someone else may take the rest.
            shared.notify_work_from(p);
        }
    }
}

/// One steal from a victim's local queue: its oldest entry, and if that is a green thread
/// (a G or a lazily spawned task), about half of the rest into `local` as well.
///
/// Two rules for two program shapes:
///
/// - **Fork-join** (`join`): the victim's queue is a stack of fork jobs whose joiners are
///   frames on the victim's own stack, the oldest (the root of the largest subtree) at the
///   head. A thief takes that one job, as rayon does: it carries most of the remaining work,
///   and every job left behind is one its joiner takes back inline for the cost of a pop.
///   Taking half would take jobs the victim reaches in a few microseconds; it then waits for
///   them (a park and a switch each), while the thief runs them as green threads of their own.
/// - **Green threads** (spawn): the oldest half moves, as Go's `runqsteal` does: a burst of
///   spawns spreads over the workers in a few steals instead of one steal per thread.
///
/// The deque reads no slot before claiming it, so the kind of the oldest entry is known only
/// once it is taken: a green-thread steal is two claims (one entry, then half of the rest),
/// and a queue that mixes both kinds is judged by its oldest entry (fork jobs in the second
/// claim's half run as green threads on the thief, as every stolen job does).
/// Each is the deque's exactly-once claim; between them the owner or another thief may take
/// entries, which only changes how many the second claim finds.
fn steal_from(victim: &Stealer<Entry>, local: &Worker<Entry>) -> Steal<Entry> {
    let oldest = victim.steal();
    if let Steal::Success(entry) = oldest
        && !entry.is_job()
    {
        // Together about half of what the victim held (Go's `n - n/2`, at most 128): with
        // `rest` left, `rest / 2` more. `Empty` or `Retry` is fine: the thief has its entry.
        let more = (victim.len() / 2).min(STEAL_HALF_LIMIT);
        if more > 0 {
            let _ = victim.steal_batch_with_limit(local, more);
        }
    }
    oldest
}

fn steal_success<T>(s: Steal<T>) -> Option<T> {
    match s {
        Steal::Success(t) => Some(t),
        _ => None,
    }
}

// -------------------------------------------------------------------------------------------
// Worker threads

/// Starts the worker thread that holds P `p` first.
pub(crate) fn start_worker(shared: &Arc<Shared>, p: usize) -> io::Result<()> {
    let shared2 = shared.clone();
    let id = shared.stats.threads_started.fetch_add(1, STAT) as usize;
    shared.threads_alive.fetch_add(1, Ordering::Relaxed);
    let name = format!("{}-{}", shared.config.thread_name, id);
    let spawn = thread::Builder::new().name(name).spawn(move || worker_main(shared2, p, id));
    match spawn {
        Ok(h) => {
            let mut threads = lock(&shared.threads);
            // Threads of retired workers (spares come and go) have ended: drop their handles.
            #[cfg(not(loom))]
            threads.retain(|t| !t.is_finished());
            threads.push(h);
            Ok(())
        }
        Err(e) => {
            shared.threads_alive.fetch_sub(1, Ordering::Relaxed);
            Err(io::Error::new(e.kind(), format!("could not start a worker thread: {e}")))
        }
    }
}

fn worker_main(shared: Arc<Shared>, p: usize, id: usize) {
    use crate::builder::WorkerHooks;
    #[cfg(not(loom))]
    let _alt = purloin_stack::overflow::AltStack::install_current_thread().ok();
    let _mark = crate::outside::mark_own_thread(Arc::as_ptr(&shared));
    if shared.ps[p].status.load(Ordering::Acquire) == p::HANDOFF {
        // Started by the monitor for a retaken P (blocking handoff).
        shared.ps[p].take_handed();
    }
    shared.ps[p].holder.store(crate::os::current_thread(), Ordering::Relaxed);
    // Before the thread becomes a worker (`Builder::on_worker_start`).
    WorkerHooks::run(&shared.config.worker_hooks.start, "start", id);
    let m = M::new(shared, p, id);
    crate::sync::set_current_worker_ptr((&m as *const M).cast());
    loop {
        m.run();
        if m.shared.phase.load(Ordering::Acquire) == PHASE_STOPPED {
            break;
        }
        if m.p.get() == NO_P && m.retired.get() {
            break;
        }
        if m.p.get() == NO_P {
            // Lost the P in a blocking section: wait as a spare until handed one.
            if !crate::blocking::wait_as_spare(&m) {
                break;
            }
        }
    }
    m.leave_searching();
    crate::sync::set_current_worker_ptr(core::ptr::null());
    drop(m.spare_stack.take());
    // No longer a worker, and still counted alive: a shutdown joins this thread after it.
    WorkerHooks::run(&m.shared.config.worker_hooks.stop, "stop", id);
    m.shared.threads_alive.fetch_sub(1, Ordering::Relaxed);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use core::ptr::NonNull;

    use purloin_deque::{Steal, Worker};

    use super::steal_from;
    use crate::entry::Entry;

    /// Entries over distinct 8-aligned words; `steal_from` only moves them, never decodes
    /// their targets.
    fn entries(words: &mut [u64], job: bool) -> Vec<Entry> {
        words
            .iter_mut()
            .map(|w| {
                let ptr = NonNull::from(w).cast::<()>();
                if job { Entry::job(ptr.cast()) } else { Entry::task(ptr) }
            })
            .collect()
    }

    fn queue(items: &[Entry]) -> Worker<Entry> {
        let q = Worker::bounded(256);
        for &e in items {
            q.push(e).unwrap();
        }
        q
    }

    #[test]
    fn a_thief_takes_one_fork_job() {
        let mut words = [0u64; 8];
        let jobs = entries(&mut words, true);
        let (victim, thief) = (queue(&jobs), Worker::bounded(256));
        // The oldest job (the largest subtree); its joiner's younger jobs stay for it.
        assert_eq!(steal_from(&victim.stealer(), &thief), Steal::Success(jobs[0]));
        assert_eq!((victim.len(), thief.len()), (7, 0));
    }

    #[test]
    fn a_thief_takes_half_of_the_green_threads() {
        for n in 1..=9 {
            let mut words = vec![0u64; n];
            let tasks = entries(&mut words, false);
            let (victim, thief) = (queue(&tasks), Worker::bounded(256));
            assert_eq!(steal_from(&victim.stealer(), &thief), Steal::Success(tasks[0]), "{n}");
            // Go's `n - n/2`, counting the one returned.
            assert_eq!(thief.len() + 1, n - n / 2, "{n} queued");
            assert_eq!(victim.len(), n / 2, "{n} queued");
        }
    }

    #[test]
    fn an_empty_victim_gives_nothing() {
        let (victim, thief) = (Worker::<Entry>::bounded(4), Worker::bounded(4));
        assert_eq!(steal_from(&victim.stealer(), &thief), Steal::Empty);
    }
}

#[cfg(all(test, loom))]
mod loom_steal {
    use core::ptr::NonNull;

    use purloin_deque::{Steal, Worker};

    use super::steal_from;
    use crate::entry::Entry;
    use crate::sync::thread;

    /// An entry over a made-up aligned address: `steal_from` only moves entries.
    fn entry(k: usize, job: bool) -> Entry {
        let ptr = NonNull::new(core::ptr::without_provenance_mut::<()>(8 * k)).unwrap();
        if job { Entry::job(ptr.cast()) } else { Entry::task(ptr) }
    }

    /// A thief's `steal_from` (two claims when the oldest entry is a green thread) against the
    /// owner popping at the other end, as a joiner taking its jobs back does: every entry is
    /// taken exactly once, and a thief whose steal is a fork job took nothing else. Mutation
    /// check: moving the second claim's batch into a queue that is then dropped (instead of
    /// the thief's own) fails this model (an entry is lost).
    #[test]
    fn steal_from_vs_owner_pops() {
        loom::model(|| {
            let all = [entry(1, false), entry(2, false), entry(3, true), entry(4, true)];
            let victim = Worker::bounded(8);
            for e in all {
                victim.push(e).unwrap();
            }
            let stealer = victim.stealer();
            let thief = thread::spawn(move || {
                let local = Worker::bounded(8);
                let got = steal_from(&stealer, &local);
                let mut rest = Vec::new();
                while let Some(e) = local.pop() {
                    rest.push(e);
                }
                (got, rest)
            });
            let mut taken: Vec<Entry> = (0..2).filter_map(|_| victim.pop()).collect();
            let (got, rest) = thief.join().unwrap();
            if let Steal::Success(e) = got {
                assert!(!e.is_job() || rest.is_empty(), "a fork job is stolen alone");
                taken.push(e);
            }
            taken.extend(rest);
            while let Some(e) = victim.pop() {
                taken.push(e);
            }
            for e in all {
                assert_eq!(taken.iter().filter(|&&t| t == e).count(), 1, "{e:?} taken once");
            }
            assert_eq!(taken.len(), all.len());
        });
    }
}
