//! Blocking handoff and the monitor thread (Go's sysmon).
//!
//! This file also holds `impl Shared`'s part for these (the monitor's kicks, the hand-off,
//! spare workers); `Shared` itself is in `shared.rs`.
//!
//! `enter_blocking()` keeps the worker's P (the fast path: a short system call costs two
//! stores, a fence and a CAS). The monitor wakes every 20 µs while some worker is in a blocking
//! section; a P that has stayed in the same blocking section for longer than the threshold is
//! *retaken* (`SYSCALL => HANDOFF`) and handed to another worker thread — a spare one, or a
//! new one (creation is capped). `exit_blocking()` tries `SYSCALL => RUNNING`: if it wins,
//! nothing happened; if it loses, the P now belongs to someone else, so the green thread goes
//! to the global queue and its worker waits as a spare until the monitor hands it a P.
//!
//! The monitor also watches green threads (and the steps of stackless tasks) that run for longer than 10 ms
//! without a scheduling point. It asks such a green thread to yield at its next preemption
//! point (`preemption_point`; a socket operation that did not wait is one), and reports it,
//! once per green thread: as a CPU hog if it runs on for a quarter of the threshold more of
//! CPU time without reaching one (a loop that yields when asked is not reported), as blocking
//! its worker if its OS thread sat in one kernel wait for the threshold. A kernel wait is
//! reported only when seen twice, the threshold apart, with no CPU time used in between: one
//! continuous wait (a sleep, a blocking read, a lock held for long), not waits on locks that
//! other threads hold briefly (a convoy, or a holder the OS preempted on a loaded machine),
//! which are not the green thread's doing.
//!
//! It also polls the poller for busy workers and fires the due timers of P's whose holder is
//! busy.
//!
//! # Spare workers: blocking calls nobody marked, and hogs
//!
//! Most calls that block an OS thread are not wrapped in [`blocking`]: std locks,
//! `std::thread::sleep`, `std::fs`, DNS resolution, a database driver's socket, foreign
//! calls. Their worker keeps its P (nothing tells the scheduler the call started or ended,
//! and taking a P from a thread that may resume user code at any instant would need a
//! handshake at every scheduling point), but the P's queue does not need its owner to move:
//! thieves take from a Chase-Lev deque and from `runnext` while the owner is away. So when
//! the monitor sees a P in one long stretch of one green thread while runnable work waits
//! (its local queue, its runnext, or the global queue) and no worker is idle to take it, it
//! adds a *spare*: one more active processor with a new worker thread, which steals that work
//! (`stall_check`, `Shared::add_spare_proc`). Two kinds of stretch qualify:
//!
//! - blocked: the worker's OS thread was seen in one kernel wait `UNMARKED_WAIT` (1 ms)
//!   apart, with no CPU time used in between (a sleep, a blocking read, a contended lock);
//! - hog: no scheduling point for the long-run threshold (10 ms by default), CPU time used,
//!   and for `UNMARKED_WAIT` its queue and the global one unchanged and no worker taking
//!   anything from another's queue or the global one. A long fork-join computation is not
//!   one (every join is a scheduling point), nor is a green thread spawning a batch (it
//!   feeds the queues), nor a thread the OS does not run (a new thread would not run
//!   either).
//!
//! The stalled green thread keeps its worker, its P, its green-locals and spans, and carries
//! on where it was when its call returns; pinned green threads queued on its P cannot move
//! and wait for it. A spare is itself an ordinary worker: if the green thread it runs
//! blocks too, the monitor adds another, up to `Builder::max_spare_workers`. Spares beyond
//! the P's that are still stalled retire once some worker has been idle for `SPARE_LINGER`
//! (200 ms): the last active P's worker, if it is parked, leaves with its P (its timers go to
//! P 0) and its thread ends (`Shared::retire_spare_proc`).
//!
//! [`blocking`] stays worth it where the call is known to block: the hand-off starts after
//! 20 µs instead of 1 ms, and a blocked worker's P moves on at once instead of a new
//! processor being added.
//!
//! # How the monitor sleeps
//!
//! | what it saw | sleep | who wakes it early |
//! |---|---|---|
//! | a P in a blocking section | 20 µs (the hand-off pace) | nobody |
//! | workers running, none blocking | backing off to 10 ms (after 50 quiet rounds) | a worker entering a blocking section |
//! | every worker parked, none blocking | no deadline (`NAP_IDLE`, Go's `sysmonwait`) | a worker leaving its park, a P added |
//!
//! An idle monitor has nothing to watch: no green thread runs (no long runner, no busy P's
//! timer: parked workers sleep until the earliest timer of every P and fire it themselves), no
//! P is in a blocking section, and a parked worker polls the poller itself. Whatever makes
//! work possible again passes through a worker leaving its park first. The deadlock watch
//! does not need the monitor: the last worker to park signals it (`outside::note_scheduler_idle`).
//!
//! # Memory ordering
//!
//! - (B1) `enter_blocking` stores `SYSCALL` with Release after the holder's last use of the
//!   P's owner-only parts; the monitor's `SYSCALL => HANDOFF` CAS (AcqRel) and the holder's
//!   `SYSCALL => RUNNING` CAS (AcqRel) compete on the same word: exactly one wins.
//! - (B2) The monitor passes a retaken P to a spare through `Spare::p` (a Release swap, read
//!   with an Acquire swap) or to a new thread through thread spawn; either way the new holder
//!   sees the old holder's writes (transitively through B1's Acquire).
//! - (M1) No lost kick (store buffering, SeqCst fences on both sides). The monitor stores its
//!   nap kind in `MonitorHandle::nap`, then a SeqCst fence, then re-checks what it slept on
//!   (no P in `SYSCALL`; for `NAP_IDLE` also every worker parked) and sleeps only if it still
//!   holds. A kicker first makes its change (`SYSCALL` stored; the parked count left, by the
//!   worker itself or by its waker before the signal that woke it), then a SeqCst fence
//!   (`Shared::monitor_kick*`), then reads `nap`. Whichever fence comes first in the single
//!   order, the other side's read after its own fence sees the first side's write: the monitor
//!   skips the sleep, or the kicker sees the nap and unparks it (the parker keeps the token if
//!   the monitor has not parked yet). `sched/src/loom_monitor.rs` models it.
//! - (S1) A spare's P is reused only after its last holder retired: `activate_spare_proc`
//!   loads `RETIRED` with Acquire, which `M::retire` stores with Release after its last use
//!   of the P's owner-only parts; the new worker thread's spawn publishes the rest. So no P
//!   has two holders.
//! - (S2) The monitor retires a spare only while its worker is parked, by taking it off the
//!   sleepers list and shrinking `nprocs` under the sleepers' lock; the worker takes that
//!   lock (`Idle::unpark_self`) when its wait returns, before it looks for work, so it sees
//!   the shrink and retires without taking work for a P nobody steals from. A submitter that
//!   woke it first took it off the list: then the monitor does not retire it.
//!   `sched/src/loom_spare.rs` models both.

use std::io;
use std::time::{Duration, Instant};

use crate::g::GRef;
use crate::p::{RUNNING, SYSCALL};
use crate::shared::{PHASE_STOPPED, Shared};
use crate::stats::bump;
use crate::switch::{Action, switch_out};
use crate::sync::{Arc, AtomicU32, AtomicUsize, Ordering, STAT, fence, lock};
use crate::worker::{M, NO_P, current_worker, start_worker};

/// Marks the start of a call that may block the OS thread (a system call, a foreign library
/// call, a std lock). Outside a green thread it does nothing. Pair it with
/// [`exit_blocking`]; prefer [`blocking`](crate::blocking), which pairs them for you.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     purloin_sched::enter_blocking();
///     let ok = std::fs::metadata(".").is_ok(); // may block the OS thread
///     purloin_sched::exit_blocking();
///     ok
/// });
/// assert!(h.join().unwrap());
/// ```
pub fn enter_blocking() {
    let Some(m) = current_worker() else { return };
    if m.current.get().is_none() || m.in_blocking.get() || m.p.get() == NO_P {
        return;
    }
    crate::switch::check_no_switch(m);
    let p = m.p();
    bump(&p.stats.blocking);
    if let Some(g) = m.current.get() {
        g.charge_and_stamp();
    }
    m.set_in_blocking(true);
    crate::hook::emit(|| crate::hook::Event::BlockingEnter { id: running_id(m) });
    // The P runs nothing while its holder blocks (and may be handed off): the monitor must
    // not take this G for a long runner of whoever holds the P next (`exit_blocking` puts it
    // back if this worker keeps the P).
    p.running.store(core::ptr::null_mut(), Ordering::Relaxed);
    // B1: Release ends this holder's use of the P's owner-only parts.
    p.enter_syscall();
    m.shared.monitor_kick();
}

/// Marks the end of a blocking call started with [`enter_blocking`]. If the monitor handed
/// the worker's P to another thread meanwhile, the green thread moves to the global queue and
/// continues on whichever worker picks it up.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     purloin_sched::enter_blocking();
///     std::thread::sleep(std::time::Duration::from_millis(1)); // blocks the OS thread
///     purloin_sched::exit_blocking(); // may now continue on another worker
/// });
/// h.join().unwrap();
/// ```
pub fn exit_blocking() {
    let Some(m) = current_worker() else { return };
    if !m.in_blocking.get() {
        return;
    }
    m.set_in_blocking(false);
    crate::hook::emit(|| crate::hook::Event::BlockingLeave { id: running_id(m) });
    let p = m.p();
    // B1: the CAS races the monitor's retake on the same word.
    if p.try_exit_syscall() {
        if let Some(g) = m.current.get() {
            g.charge_and_stamp();
            p.running.store(g.as_ptr(), Ordering::Relaxed);
        }
        return;
    }
    // Lost the P: this worker no longer holds it. Requeue this G globally; the worker's
    // scheduling loop sees it has no P and waits as a spare.
    m.set_p(NO_P);
    switch_out(Action::RequeueGlobal);
}

/// The id of the green thread running on `m` (for a hook event; 0 if none runs).
#[cold]
fn running_id(m: &M) -> crate::GreenId {
    crate::GreenId(m.current.get().map_or(0, |g| g.id_with(g.generation())))
}

/// A green thread about to switch out (yield, park) inside a blocking section stops blocking
/// its OS thread, so the section ends first: if the monitor handed the P to another thread
/// meanwhile, the P is that thread's now and this worker must not touch it, so the G moves to
/// the global queue and continues on whichever worker takes it (as in [`exit_blocking`]).
/// Returns the worker the G runs on now and whether a section was open; pass that to
/// [`resume_blocking`] after the switch.
pub(crate) fn pause_blocking(m: &M) -> (&M, bool) {
    if !m.in_blocking.get() {
        return (m, false);
    }
    exit_blocking();
    (current_worker().expect("a green thread runs on a worker"), true)
}

/// Re-opens the blocking section [`pause_blocking`] closed, once the G runs again.
pub(crate) fn resume_blocking(was_open: bool) {
    if was_open {
        enter_blocking();
    }
}

/// Runs `f`, a call that may block the OS thread, between [`enter_blocking`] and
/// [`exit_blocking`], so the worker's other green threads move to another OS thread if it
/// blocks for long. Panics in `f` propagate (after `exit_blocking`).
///
/// Unmarked blocking calls do not stop the other green threads either: the monitor adds a
/// spare worker for a worker stalled in one for 1 ms while work waits
/// ([`Builder::max_spare_workers`](crate::Builder::max_spare_workers)). Marking still pays
/// for calls known to block often or long: the hand-off starts after 20 µs instead of 1 ms,
/// and it moves the blocked worker's processor instead of adding one.
///
/// `f` may also yield, park or wait on `purloin` primitives: while the green thread is switched
/// out the section is closed (it blocks no OS thread then), and it is re-opened when the green
/// thread runs again, possibly on another worker.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     // A call that may block the OS thread: the monitor may hand this worker's processor
///     // to another thread meanwhile.
///     purloin_sched::blocking(|| std::fs::metadata(".").is_ok())
/// });
/// assert!(h.join().unwrap());
/// ```
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    struct Exit;
    impl Drop for Exit {
        fn drop(&mut self) {
            exit_blocking();
        }
    }
    enter_blocking();
    let _exit = Exit;
    f()
}

/// A worker thread without a P, waiting to be handed one.
pub(crate) struct Spare {
    /// The P handed over (B2), or `NO_P`.
    p: AtomicUsize,
    unparker: purloin_parking::Unparker,
}

impl Spare {
    /// Wakes the spare (shutdown).
    pub(crate) fn wake(&self) {
        self.unparker.unpark();
    }
}

/// Waits (parked) until the monitor hands this worker a P. Returns false if the scheduler
/// stopped or there are already enough spare threads (the caller's thread then exits).
pub(crate) fn wait_as_spare(m: &M) -> bool {
    let shared = &*m.shared;
    let parker = purloin_parking::Parker::new();
    let unparker = parker.unparker();
    let spare = Arc::new(Spare { p: AtomicUsize::new(NO_P), unparker });
    {
        let mut spares = lock(&shared.spares);
        if spares.len() >= shared.active().len() {
            return false;
        }
        spares.push(spare.clone());
    }
    loop {
        // B2: Acquire pairs with the monitor's Release swap.
        let p = spare.p.swap(NO_P, Ordering::Acquire);
        if p != NO_P {
            take_handed_p(m, p);
            return true;
        }
        if shared.phase.load(Ordering::Acquire) == PHASE_STOPPED {
            let mut spares = lock(&shared.spares);
            spares.retain(|s| !Arc::ptr_eq(s, &spare));
            return false;
        }
        parker.park();
    }
}

/// Becomes the holder of a P the monitor retook (`HANDOFF => RUNNING`).
pub(crate) fn take_handed_p(m: &M, p: usize) {
    m.set_p(p);
    // The Acquire side of B1/B2 happened when the P was handed to us.
    m.shared.ps[p].take_handed();
    m.shared.ps[p].holder.store(crate::os::current_thread(), Ordering::Relaxed);
}

impl Shared {
    /// Kicker side of M1 for a worker that entered a blocking section: wakes the monitor if
    /// it sleeps past the hand-off pace.
    pub(crate) fn monitor_kick(&self) {
        // M1: orders the caller's `SYSCALL` store before the read of `nap` (pairs with the
        // fence in `monitor_nap`).
        fence(Ordering::SeqCst);
        let _ = self.kick_if(|nap| nap != NAP_AWAKE);
    }

    /// Kicker side of M1 for a worker that left the parked count (or processors that were
    /// added): wakes the monitor if it sleeps with no deadline because every worker was
    /// parked. A backed-off monitor is left alone (its 10 ms checks need no kick).
    pub(crate) fn monitor_kick_idle(&self) {
        // M1: orders the parked count's change (this worker's or its waker's, before the
        // signal) before the read of `nap` (pairs with the fence in `monitor_nap`).
        fence(Ordering::SeqCst);
        // The coarse clock stood still while the monitor slept with no deadline (or there is
        // no monitor to advance it): this worker may stamp green threads now (`clock`).
        if self.kick_if(|nap| nap == NAP_IDLE) != Some(false) {
            crate::clock::refresh();
        }
    }

    /// Wakes the monitor if its nap satisfies `asleep`. Returns whether it did, or `None`
    /// without a monitor.
    fn kick_if(&self, asleep: impl Fn(u32) -> bool) -> Option<bool> {
        let mon = self.monitor.get()?;
        let nap = mon.nap.load(Ordering::Relaxed);
        // Relaxed: the unpark's token carries the wake-up; only one kicker unparks.
        let kick = asleep(nap)
            && mon
                .nap
                .compare_exchange(nap, NAP_AWAKE, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if kick {
            mon.unparker.unpark();
        }
        Some(kick)
    }

    /// Whether some active P is in a blocking section.
    #[cfg_attr(all(loom, not(test)), allow(dead_code))] // only the monitor thread and the models
    fn any_blocking(&self) -> bool {
        self.active().iter().any(|p| p.status.load(Ordering::Relaxed) == SYSCALL)
    }

    /// Whether every active P's worker is parked (none runs a green thread).
    #[cfg_attr(all(loom, not(test)), allow(dead_code))] // only the monitor thread and the models
    fn all_parked(&self) -> bool {
        let (_, parked) = self.idle.counts();
        parked as usize >= self.active().len()
    }

    /// Hands retaken P `p` to a spare worker, or starts a new worker thread for it.
    #[cfg(not(loom))]
    fn hand_off(this: &Arc<Self>, p: usize) -> io::Result<()> {
        this.stats.handoffs.fetch_add(1, STAT);
        if this.hand_to_spare(p) { Ok(()) } else { start_worker(this, p) }
    }

    /// Hands retaken P `p` to a waiting spare worker; false if none waits.
    #[cfg_attr(all(loom, not(test)), allow(dead_code))] // only the monitor thread and the models
    pub(crate) fn hand_to_spare(&self, p: usize) -> bool {
        let Some(s) = lock(&self.spares).pop() else {
            return false;
        };
        // B2: Release publishes the P to the spare.
        s.p.swap(p, Ordering::Release);
        s.unparker.unpark();
        true
    }
}

// -------------------------------------------------------------------------------------------
// Spare workers for stalled ones

/// A worker's OS thread seen in one kernel wait for this long (no CPU time used in between),
/// with runnable work waiting that no idle worker can take, gets a spare worker.
#[cfg_attr(loom, allow(dead_code))]
const UNMARKED_WAIT: Duration = Duration::from_millis(1);

/// The monitor's pace while it watches a possible stall.
#[cfg_attr(loom, allow(dead_code))]
const STALL_PACE: Duration = Duration::from_micros(250);

/// How long the monitor waits for a spare's thread to start before it adds another for a
/// stall that is still there (a thread that has not started cannot have taken the work).
#[cfg_attr(loom, allow(dead_code))]
const SPARE_START: Duration = Duration::from_millis(20);

/// How long spares beyond the stalled workers stay while some worker is idle, before they
/// retire (a burst of blocking calls reuses them meanwhile).
#[cfg_attr(loom, allow(dead_code))]
const SPARE_LINGER: Duration = Duration::from_millis(200);

impl Shared {
    /// S1: adds a spare processor and starts its worker, which steals the stalled workers'
    /// queues; returns the processor's index. `None` if the cap
    /// (`Builder::max_spare_workers`, `max_threads`) is reached or the next processor is
    /// still retiring.
    #[cfg(not(loom))]
    fn add_spare_proc(this: &Arc<Self>) -> io::Result<Option<usize>> {
        if this.threads_alive.load(Ordering::Relaxed) >= this.config.max_threads {
            return Ok(None);
        }
        let Some(p) = this.activate_spare_proc() else { return Ok(None) };
        // The new worker stores its thread here when it starts (`worker_main`): until then
        // the monitor knows help is on its way (`SPARE_START`).
        this.ps[p].holder.store(0, Ordering::Relaxed);
        if let Err(e) = start_worker(this, p) {
            this.undo_spare_proc(p);
            return Err(e);
        }
        Ok(Some(p))
    }

    /// The bookkeeping of S1, without the thread: makes the next processor active as a spare
    /// and returns its index, for a new worker to hold. The processor is reused only once its
    /// last holder retired (R2: the Acquire load of `RETIRED` pairs with `M::retire`'s
    /// Release store, after which that holder touches none of its parts); it is counted
    /// unparked before it is published in `nprocs`, as `set_workers` does.
    #[cfg_attr(all(loom, not(test)), allow(dead_code))] // the monitor thread and the models
    pub(crate) fn activate_spare_proc(&self) -> Option<usize> {
        let _resize = self.resize.0.try_lock().ok()?;
        let spares = self.spare_procs.load(Ordering::Relaxed);
        if spares >= self.config.max_spare_workers || !self.is_running() {
            return None;
        }
        let n = self.nprocs.load(Ordering::Relaxed);
        let p = self.ps.get(n)?;
        if p.status.load(Ordering::Acquire) != crate::p::RETIRED {
            return None;
        }
        p.status.store(RUNNING, Ordering::Relaxed);
        self.idle.add_workers(1);
        self.spare_procs.store(spares + 1, Ordering::Relaxed);
        self.nprocs.store(n + 1, Ordering::Release);
        self.stats.spares_added.fetch_add(1, STAT);
        Some(n)
    }

    /// Undoes [`Shared::activate_spare_proc`] when its worker thread could not start (nobody
    /// holds the processor; thieves found it empty).
    #[cfg(not(loom))]
    fn undo_spare_proc(&self, p: usize) {
        let _resize = lock(&self.resize.0);
        self.nprocs.store(p, Ordering::Release);
        self.idle.retire(p, false);
        self.spare_procs.fetch_sub(1, Ordering::Relaxed);
        self.ps[p].status.store(crate::p::RETIRED, Ordering::Release);
    }

    /// S2: retires the last active processor, a spare's worth, if its worker is parked and it
    /// has no pinned green threads. Returns whether it did.
    ///
    /// The worker is taken off the sleepers list and `nprocs` shrinks under the sleepers'
    /// lock ([`Idle::take_sleeper_then`](crate::idle::Idle::take_sleeper_then)); the worker
    /// takes that lock when its wait returns (`Idle::unpark_self`), before it looks for work,
    /// so it sees the shrink and retires (`M::retire`: its timers to P 0, its P `RETIRED`)
    /// without taking work for a processor nobody steals from any more. A worker that left
    /// the list first is awake for work and stays. Work submitted meanwhile is not lost: it
    /// is in a queue the remaining workers see, and the monitor adds a spare again if none
    /// of them can take it.
    #[cfg_attr(all(loom, not(test)), allow(dead_code))] // the monitor thread and the models
    pub(crate) fn retire_spare_proc(&self) -> bool {
        let Ok(_resize) = self.resize.0.try_lock() else { return false };
        let spares = self.spare_procs.load(Ordering::Relaxed);
        let n = self.nprocs.load(Ordering::Relaxed);
        if spares == 0 || n <= 1 {
            return false;
        }
        let last = n - 1;
        if self.ps[last].pinned.load(Ordering::Acquire) > 0 {
            return false;
        }
        // S2: the shrink is published under the sleepers' lock.
        if !self.idle.take_sleeper_then(last, || self.nprocs.store(last, Ordering::Release)) {
            return false;
        }
        self.spare_procs.store(spares - 1, Ordering::Relaxed);
        self.lots.lot(last).signal(1);
        self.poller.wake_if_blocked(last);
        self.stats.spares_retired.fetch_add(1, STAT);
        true
    }

    /// Takes from other workers' queues so far (steals and global pulls of every active P):
    /// a hog's queue is stuck only if this does not move.
    #[cfg(not(loom))]
    fn takes(&self) -> u64 {
        self.active().iter().fold(0u64, |n, p| {
            n.wrapping_add(p.stats.steals.load(STAT)).wrapping_add(p.stats.global_pulls.load(STAT))
        })
    }
}

/// What `stall_check` compares between two looks at a P.
#[cfg(not(loom))]
#[derive(Clone, Copy, PartialEq, Eq)]
struct StallSeen {
    /// The worker thread's CPU time.
    cpu: Option<Duration>,
    /// Every worker's takes from others' queues and the global one (`Shared::takes`).
    takes: u64,
    /// The P's queue length (with runnext) and the global queue's.
    queues: (usize, usize),
}

/// What the monitor makes of a P in one long stretch of one green thread.
#[cfg(not(loom))]
enum Stall {
    /// Nothing waits behind it that an idle worker could not take.
    No,
    /// Work waits and no worker is idle: look again soon.
    Watch,
    /// Still so, and its OS thread sat in one kernel wait for `UNMARKED_WAIT`, or it ran
    /// for the long-run threshold while no worker took anything from anyone: add a spare.
    Help,
}

/// Decides whether the P `p`, whose worker has run one green thread without a scheduling
/// point for `stretch`, needs a spare worker. `idle` is the idle protocol's (searching,
/// parked) at the start of the round.
#[cfg(not(loom))]
fn stall_check(
    shared: &Shared,
    p: &crate::p::P,
    s: &mut Seen,
    now: Instant,
    stretch: Duration,
    (searching, parked): (u32, u32),
) -> Stall {
    let waiting = p.has_work() || !shared.injector.is_empty();
    if !waiting || searching > 0 {
        return Stall::No;
    }
    if parked > 0 {
        // A worker sleeps while work waits behind a stalled one: a fork's job announced with
        // a hint (`idle`, I4) may have woken nobody. Waking one is all it takes.
        shared.notify_work();
        return Stall::No;
    }
    let holder = p.holder.load(Ordering::Relaxed);
    let seen = StallSeen {
        cpu: crate::os::thread_cpu_time(holder),
        takes: shared.takes(),
        queues: (p.queue_len(), shared.injector.len()),
    };
    let Some((mut frozen_since, mut no_cpu_since, then)) = s.stall else {
        s.stall = Some((now, now, seen));
        return Stall::Watch;
    };
    if (seen.takes, seen.queues) != (then.takes, then.queues) {
        frozen_since = now;
    }
    if seen.cpu != then.cpu {
        no_cpu_since = now;
    }
    s.stall = Some((frozen_since, no_cpu_since, seen));
    // One continuous kernel wait: no CPU time used for `UNMARKED_WAIT`, and waiting now.
    let blocked = seen.cpu.is_some()
        && now.duration_since(no_cpu_since) >= UNMARKED_WAIT
        && crate::os::thread_kernel_wait(holder).is_some();
    // A hog: no scheduling point for the long-run threshold, running on the CPU (a thread
    // the OS does not run gets no help: another thread would not run either), its queue and
    // the global one unchanged (a green thread that spawns is feeding them, not holding them
    // up), and no worker took anything from anyone meanwhile.
    let on_cpu = match (seen.cpu, then.cpu) {
        (Some(now), Some(before)) => now > before,
        _ => true,
    };
    let hog = stretch >= shared.config.long_run_threshold
        && on_cpu
        && now.duration_since(frozen_since) >= UNMARKED_WAIT;
    if blocked || hog {
        s.stall = None;
        Stall::Help
    } else {
        Stall::Watch
    }
}

/// `MonitorHandle::nap`: the monitor is awake, or sleeps at the 20 µs hand-off pace.
pub(crate) const NAP_AWAKE: u32 = 0;
/// The monitor sleeps up to 10 ms: entering a blocking section kicks it.
#[cfg_attr(all(loom, not(test)), allow(dead_code))] // only the monitor thread and the models
pub(crate) const NAP_BACKED_OFF: u32 = 1;
/// Every worker was parked: the monitor sleeps with no deadline until a worker leaves its park.
pub(crate) const NAP_IDLE: u32 = 2;

/// The monitor's handle (for kicking it awake and stopping it).
pub(crate) struct MonitorHandle {
    /// How the monitor sleeps (`NAP_*`; M1). A kicker that sees a nap it must end swaps it to
    /// `NAP_AWAKE` and unparks.
    pub(crate) nap: AtomicU32,
    pub(crate) unparker: purloin_parking::Unparker,
}

impl MonitorHandle {
    #[cfg_attr(all(loom, not(test)), allow(dead_code))] // only the monitor thread and the models
    pub(crate) fn new(unparker: purloin_parking::Unparker) -> MonitorHandle {
        MonitorHandle { nap: AtomicU32::new(NAP_AWAKE), unparker }
    }
}

/// How long the monitor sleeps next.
#[cfg_attr(loom, allow(dead_code))] // the models nap only `Idle`
pub(crate) enum Nap {
    /// The hand-off pace (a P is in a blocking section): no kick needed.
    Pace(Duration),
    /// Backed off: until a worker enters a blocking section, or the duration passes.
    BackedOff(Duration),
    /// Every worker parked: until a worker leaves its park.
    Idle,
}

/// Sleeper side of M1: the monitor sleeps as `nap` says, unless a re-check after the fence
/// shows that what it would sleep on has already changed.
#[cfg_attr(all(loom, not(test)), allow(dead_code))] // only the monitor thread and the models
pub(crate) fn monitor_nap(
    shared: &Shared,
    mon: &MonitorHandle,
    parker: &purloin_parking::Parker,
    nap: Nap,
) {
    let (kind, timeout) = match nap {
        Nap::Pace(d) => {
            parker.park_timeout(d);
            return;
        }
        Nap::BackedOff(d) => (NAP_BACKED_OFF, Some(d)),
        Nap::Idle => (NAP_IDLE, None),
    };
    mon.nap.store(kind, Ordering::Relaxed);
    // M1: orders the store above before the re-check (pairs with the kickers' fences).
    fence(Ordering::SeqCst);
    let still = !shared.any_blocking() && (kind != NAP_IDLE || shared.all_parked());
    if still {
        match timeout {
            Some(d) => {
                parker.park_timeout(d);
            }
            None => {
                shared.stats.monitor_idle_sleeps.fetch_add(1, STAT);
                parker.park();
            }
        }
    }
    mon.nap.store(NAP_AWAKE, Ordering::Relaxed);
}

/// What the monitor remembers about a P between its wake-ups.
#[cfg(not(loom))]
#[derive(Clone, Copy)]
struct Seen {
    syscall_tick: u64,
    syscall_since: Instant,
    schedtick: u64,
    sched_since: Instant,
    /// CPU time of the P's worker thread when `schedtick` last changed.
    cpu_at_tick: Option<Duration>,
    reported_tick: u64,
    /// In this tick, when the worker thread was first seen in a kernel wait, and its CPU time
    /// then (a wait is reported once it is still on, with no CPU used, a threshold later).
    waiting_since: Option<(Instant, Option<Duration>)>,
    /// In this tick, while runnable work waits behind this P with no worker idle to take it:
    /// since when the queues and takes stood still, since when the worker thread's CPU time
    /// stood still, and what the monitor saw at its last look (`stall_check`).
    stall: Option<(Instant, Instant, StallSeen)>,
    /// In this tick, when the running green thread was first asked to yield (it passed the
    /// threshold), and its worker thread's CPU time then.
    asked_since: Option<(Instant, Option<Duration>)>,
}

/// Why the monitor reports a green thread.
#[cfg(not(loom))]
enum LongRun {
    /// It ran on the CPU this long without a scheduling point.
    Cpu(Duration),
    /// It blocked its worker's OS thread in the kernel this long, waiting as said.
    Blocked(Duration, crate::os::KernelWait),
}

/// The monitor thread body (not under loom: the models drive the retake protocol directly).
#[cfg(not(loom))]
pub(crate) fn monitor_main(shared: Arc<Shared>, parker: purloin_parking::Parker) {
    let _mark = crate::outside::mark_own_thread(Arc::as_ptr(&shared));
    let cfg = shared.config.clone();
    let now = Instant::now();
    let mut seen = vec![
        Seen {
            syscall_tick: 0,
            syscall_since: now,
            schedtick: 0,
            sched_since: now,
            cpu_at_tick: None,
            reported_tick: u64::MAX,
            waiting_since: None,
            stall: None,
            asked_since: None,
        };
        shared.ps.len()
    ];
    // Since when spares beyond the stalled workers have been idle (they retire after
    // `SPARE_LINGER`).
    let mut idle_spares_since: Option<Instant> = None;
    // The last spare added and when, until its thread starts (see `SPARE_START`).
    let mut starting_spare: Option<(usize, Instant)> = None;
    let mut delay = Duration::from_micros(20);
    let mut quiet_rounds = 0u32;
    // Green threads already reported (by id): each is reported once, not once per long
    // stretch (a loop of long stretches would print a line every 10 ms).
    let mut reported = std::collections::HashSet::new();
    let mon = shared.monitor.get().expect("monitor handle is set before the thread starts");
    let mut nap = Nap::Pace(delay);
    while !shared.monitor_stop.load(Ordering::Acquire) {
        monitor_nap(&shared, mon, &parker, nap);
        shared.stats.monitor_wakeups.fetch_add(1, STAT);
        let now = Instant::now();
        crate::clock::refresh_at(now);
        // A worker is in a blocking section (the 20 µs handoff threshold needs a fast pace),
        // or running green threads (the 10 ms long-runner and I/O checks do not).
        let mut blocking = false;
        let mut busy = false;
        // Spare workers: a P stalled with work waiting behind it (`wants_help`), a P watched
        // for that (`suspect`: the monitor keeps a fast pace), P's in one long stretch.
        let mut wants_help = false;
        let mut suspect = false;
        let mut stalled = 0usize;
        let idle_counts = shared.idle.counts();
        for (i, p) in shared.active().iter().enumerate() {
            let s = &mut seen[i];
            let status = p.status.load(Ordering::Acquire);
            if status == SYSCALL {
                blocking = true;
                busy = true;
                let tick = p.syscall_tick.load(Ordering::Relaxed);
                if tick != s.syscall_tick {
                    s.syscall_tick = tick;
                    s.syscall_since = now;
                } else {
                    let long = now.duration_since(s.syscall_since);
                    let (searching, parked) = shared.idle.counts();
                    let worth_it = p.has_work()
                        || (searching == 0 && parked == 0)
                        || long >= Duration::from_millis(10);
                    if long >= cfg.blocking_threshold
                        && worth_it
                        && p.pinned.load(Ordering::Relaxed) == 0
                        && shared.threads_alive.load(Ordering::Relaxed) < cfg.max_threads
                        && p.try_retake()
                    {
                        if let Err(e) = Shared::hand_off(&shared, i) {
                            eprintln!("purloin: blocking handoff failed: {e}");
                            // Give the P back to the blocked holder: it will find RUNNING.
                            p.status.store(RUNNING, Ordering::Release);
                        }
                        s.syscall_since = now;
                    }
                }
            } else {
                let tick = p.schedtick.load(Ordering::Relaxed);
                let running = p.running.load(Ordering::Relaxed);
                // Ask a green thread past the threshold to yield at its next preemption point
                // (a socket operation that did not wait is one): again every round, so a
                // request dropped inside a `NoSwitch` section is made again.
                if tick == s.schedtick
                    && !running.is_null()
                    && now.duration_since(s.sched_since) >= cfg.long_run_threshold
                {
                    p.preempt.store(true, Ordering::Relaxed);
                    if s.asked_since.is_none() {
                        let cpu = crate::os::thread_cpu_time(p.holder.load(Ordering::Relaxed));
                        s.asked_since = Some((now, cpu));
                    }
                }
                if tick != s.schedtick || running.is_null() {
                    // A stretch of a green thread starts with a switch-in, which bumps the
                    // tick: the CPU clock (a system call) is read only then, not every round
                    // of an idle P.
                    if tick != s.schedtick {
                        s.cpu_at_tick =
                            crate::os::thread_cpu_time(p.holder.load(Ordering::Relaxed));
                    }
                    s.schedtick = tick;
                    s.sched_since = now;
                    s.waiting_since = None;
                    s.stall = None;
                    s.asked_since = None;
                } else {
                    let stretch = now.duration_since(s.sched_since);
                    if stretch >= UNMARKED_WAIT {
                        stalled += 1;
                    }
                    match stall_check(&shared, p, s, now, stretch, idle_counts) {
                        Stall::No => s.stall = None,
                        Stall::Watch => suspect = true,
                        Stall::Help => {
                            suspect = true;
                            wants_help = true;
                        }
                    }
                }
                if tick == s.schedtick
                    && !running.is_null()
                    && now.duration_since(s.sched_since) >= cfg.long_run_threshold
                    && s.reported_tick != tick
                {
                    let holder = p.holder.load(Ordering::Relaxed);
                    let wall = now.duration_since(s.sched_since);
                    let cpu_now = crate::os::thread_cpu_time(holder);
                    let cpu =
                        cpu_now.zip(s.cpu_at_tick).map(|(now, then)| now.saturating_sub(then));
                    // Tell a green thread that hogs its worker (CPU time advanced), or blocks
                    // its OS thread in the kernel (a std lock, a sleep, blocking I/O), from a
                    // worker the OS simply did not schedule (neither: not the green thread's
                    // fault, not reported). A hog is one that was asked to yield (above) and
                    // ran on for `grace` more without reaching a preemption point: a loop of
                    // socket operations that did not wait yields when asked, and is no hog.
                    let grace = cfg.long_run_threshold / 4;
                    let ignored_the_ask = match s.asked_since {
                        Some((_, Some(then))) => {
                            cpu_now.is_some_and(|now| now.saturating_sub(then) >= grace)
                        }
                        Some((at, None)) => now.duration_since(at) >= grace,
                        None => false,
                    };
                    let verdict = match cpu {
                        Some(c) if c >= cfg.long_run_threshold => {
                            ignored_the_ask.then_some(LongRun::Cpu(c))
                        }
                        _ => match (crate::os::thread_kernel_wait(holder), cpu) {
                            // A wait is blamed only if it is one continuous wait: still on a
                            // threshold after it was first seen, with no CPU time used since
                            // (no wake-up between). Short waits on locks other threads hold
                            // (a convoy, a preempted holder) do not pass.
                            (Some(how), _) => match s.waiting_since {
                                Some((at, cpu_then))
                                    if cpu_then == cpu_now
                                        && now.duration_since(at) >= cfg.long_run_threshold =>
                                {
                                    Some(LongRun::Blocked(wall, how))
                                }
                                Some((_, cpu_then)) if cpu_then == cpu_now => None,
                                _ => {
                                    s.waiting_since = Some((now, cpu_now));
                                    None
                                }
                            },
                            (None, None) => ignored_the_ask.then_some(LongRun::Cpu(wall)),
                            (None, Some(_)) => {
                                s.waiting_since = None;
                                None
                            }
                        },
                    };
                    if let Some(verdict) = verdict {
                        s.reported_tick = tick;
                        // SAFETY: `running` names a record (records are never freed while the
                        // scheduler lives).
                        if let Some(g) = unsafe { GRef::from_ptr(running) } {
                            report_long_runner(&shared, g, verdict, &mut reported);
                        }
                    }
                }
                if !running.is_null() {
                    busy = true;
                }
            }
        }
        // Workers poll for I/O only when their queues run dry: if busy green threads keep them
        // from it for long, poll here so I/O waiters are not starved (Go's sysmon, 10 ms).
        if busy {
            crate::poll::poll_if_stale(&shared, now, Duration::from_millis(10));
            // Due timers of workers busy running a green thread (`timer_heap`).
            crate::timer_heap::fire_for_busy(shared.active(), shared.epoch);
        }
        let spares = shared.spare_procs.load(Ordering::Relaxed);
        // A spare added for an earlier look whose thread has not started yet (its P has no
        // holder) will take the waiting work: no second one for the same stall.
        let spare_starting = starting_spare.is_some_and(|(p, since)| {
            shared.ps[p].holder.load(Ordering::Relaxed) == 0
                && now.duration_since(since) < SPARE_START
        });
        if wants_help {
            if !spare_starting {
                match Shared::add_spare_proc(&shared) {
                    Ok(Some(p)) => starting_spare = Some((p, now)),
                    Ok(None) => {}
                    Err(e) => {
                        eprintln!("purloin: could not add a spare worker for a stalled one: {e}")
                    }
                }
            }
            idle_spares_since = None;
        } else if spares > stalled && shared.idle.counts().1 > 0 {
            // More spares than stalled workers, and some worker idle: once that has lasted
            // `SPARE_LINGER`, the spares beyond the stalled workers retire while their
            // workers are parked.
            let since = *idle_spares_since.get_or_insert(now);
            if now.duration_since(since) >= SPARE_LINGER {
                while shared.spare_procs.load(Ordering::Relaxed) > stalled
                    && shared.retire_spare_proc()
                {}
            }
        } else {
            idle_spares_since = None;
        }
        // Busy workers alone do not keep the 20 µs pace: the monitor would wake ~10^4 times
        // a second in a busy server (each a futex wait and a thread switch) for checks that
        // only need 10 ms.
        if blocking {
            quiet_rounds = 0;
            delay = Duration::from_micros(20);
        } else if suspect {
            // A stall is being watched: the next look comes soon.
            quiet_rounds = 0;
            delay = STALL_PACE;
        } else {
            quiet_rounds += 1;
            if quiet_rounds > 50 {
                delay = (delay * 2).min(Duration::from_millis(10));
            }
        }
        nap = if blocking || delay <= Duration::from_micros(20) {
            Nap::Pace(delay)
        } else if !busy && shared.spare_procs.load(Ordering::Relaxed) == 0 && shared.all_parked() {
            // (Spares still to retire keep the monitor at its backed-off pace.)
            Nap::Idle
        } else {
            Nap::BackedOff(delay)
        };
    }
}

/// Called on the monitor thread after each long runner's first report (see
/// [`on_long_runner`]).
#[cfg(not(loom))]
static ON_LONG_RUNNER: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets the function the monitor calls after it reports a long runner on stderr (the facade's
/// flight recorder writes its ring then). The first call sets it; later ones are ignored. It
/// runs on the monitor thread, so it must not block.
///
/// # Examples
///
/// ```
/// purloin_sched::on_long_runner(|| {});
/// ```
#[doc(hidden)]
#[cfg(not(loom))]
pub fn on_long_runner(f: fn()) {
    let _ = ON_LONG_RUNNER.set(f);
}

#[cfg(not(loom))]
fn report_long_runner(
    shared: &Shared,
    g: GRef,
    why: LongRun,
    reported: &mut std::collections::HashSet<u64>,
) {
    if !g.try_ref() {
        return;
    }
    let generation = g.generation();
    let name = g.name();
    let step = g.is_step();
    if g.drop_ref() {
        crate::registry::recycle_anywhere(g);
    }
    if reported.len() >= 4096 {
        reported.clear(); // bounded memory; a very old offender may be reported again
    }
    if !reported.insert(g.id_with(generation)) {
        return;
    }
    shared.stats.long_runners.fetch_add(1, STAT);
    if let Some(f) = ON_LONG_RUNNER.get() {
        f();
    }
    let name = name.as_deref().unwrap_or("<unnamed>");
    let id = g.id_with(generation);
    if step {
        // A stackless task (a `purloin::machine` machine, for one): one step runs on the worker's own
        // stack, so the advice for green threads (yield, `blocking()`) does not apply.
        match why {
            LongRun::Cpu(ran) => eprintln!(
                "purloin: a task step (stackless task {id} '{name}') has run for {ran:?} of CPU time; \
                 it delays the other tasks and green threads of its worker — do less per \
                 step (return and continue in the next one)"
            ),
            LongRun::Blocked(for_, crate::os::KernelWait::Sleeping) => eprintln!(
                "purloin: a task step (stackless task {id} '{name}') has blocked its worker's OS \
                 thread for {for_:?} (a std lock, std::thread::sleep or blocking I/O); a step \
                 must not block: yield a command whose handler (on a green thread) does the \
                 blocking work (see purloin::machine)"
            ),
            LongRun::Blocked(for_, crate::os::KernelWait::Uninterruptible) => eprintln!(
                "purloin: a task step (stackless task {id} '{name}') has kept its worker's OS thread \
                 in an uninterruptible kernel wait for {for_:?} (page faults on fresh or \
                 swapped memory, or disk I/O: usually memory pressure); if it is file I/O, \
                 yield a command whose handler does it"
            ),
        }
        return;
    }
    let who = format!("green thread {id} '{name}'");
    match why {
        LongRun::Cpu(ran) => eprintln!(
            "purloin: {who} has run for {ran:?} of CPU time without a scheduling point (yield, \
             park, lock, channel or I/O wait); it delays the other green threads of its worker \
             (a spare worker thread takes them if they wait for long) — call \
             purloin::yield_now() in long loops"
        ),
        LongRun::Blocked(for_, crate::os::KernelWait::Sleeping) => eprintln!(
            "purloin: {who} has blocked its worker's OS thread for {for_:?} (a std lock, \
             std::thread::sleep or blocking I/O); the other green threads move to a spare \
             worker meanwhile, but purloin::sync / purloin::sleep (which do not block it) or \
             purloin::blocking() around the call (a hand-off after 20 µs) cost less (see \
             \"Using async crates from green threads\" in the docs of purloin::future)"
        ),
        LongRun::Blocked(for_, crate::os::KernelWait::Uninterruptible) => eprintln!(
            "purloin: {who} has kept its worker's OS thread in an uninterruptible kernel wait \
             for {for_:?} (page faults on fresh or swapped memory, or disk I/O: usually memory \
             pressure, not a blocking call in the green thread); if it is file I/O, wrap it in \
             purloin::blocking()"
        ),
    }
}
