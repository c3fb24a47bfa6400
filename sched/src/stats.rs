//! Counters: per-P (written by the P's holder only, so a bump is a load and a store, not a
//! read-modify-write) and scheduler-wide (read-modify-writes, on paths that are already slow).

use crate::registry::registry;
use crate::shared::Shared;
use crate::sync::{Ordering, STAT, StatCounter};

/// Bumps an owner-written counter.
#[inline]
pub(crate) fn bump(c: &StatCounter) {
    c.store(c.load(STAT).wrapping_add(1), STAT);
}

/// Adds `n` to an owner-written counter.
#[inline]
pub(crate) fn add(c: &StatCounter, n: u64) {
    c.store(c.load(STAT).wrapping_add(n), STAT);
}

macro_rules! counters {
    ($(#[$m:meta])* $name:ident / $snap:ident { $($(#[$fm:meta])* $field:ident,)* }) => {
        #[derive(Default)]
        pub(crate) struct $name { $(pub(crate) $field: StatCounter,)* }

        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $snap { $($(#[$fm])* pub $field: u64,)* }

        impl $name {
            pub(crate) fn snapshot(&self) -> $snap {
                $snap { $($field: self.$field.load(STAT),)* }
            }
        }

        impl core::ops::AddAssign for $snap {
            fn add_assign(&mut self, o: $snap) { $(self.$field += o.$field;)* }
        }
    };
}

counters! {
    /// Counters of one processor (P), as a snapshot. All counts since the scheduler started.
    PStats / ProcStats {
        /// Green threads switched in (each resume of a G counts once).
        switches,
        /// Green threads spawned from this P (local queue or runnext).
        spawned,
        /// Yields.
        yields,
        /// Successful steals (each moved a batch).
        steals,
        /// Steal attempts (successful or not).
        steal_attempts,
        /// Green threads moved by steals.
        stolen,
        /// Takes from the global queue (each moved a batch).
        global_pulls,
        /// Times the worker holding this P parked its OS thread.
        parks,
        /// Search rounds spent spinning before parking.
        spins,
        /// Children run inline by their joiner (join-helping).
        inline_joins,
        /// Blocking sections entered.
        blocking,
        /// Submissions from this P that needed no wake-up (folded into
        /// [`GlobalStats::wakes_skipped`] by snapshots).
        wakes_skipped,
    }
}

counters! {
    /// Scheduler-wide counters, as a snapshot.
    SharedStats / GlobalStats {
        /// Wake-ups sent to parked workers.
        wakes_sent,
        /// Submissions that needed no wake-up (a worker was searching, or none was parked).
        wakes_skipped,
        /// Processors retaken from blocked workers and handed to another (blocking handoff).
        handoffs,
        /// Worker OS threads started (including ones started for handoffs).
        threads_started,
        /// Green threads reported for running too long without a scheduling point.
        long_runners,
        /// Rounds of the monitor (each follows one of its sleeps).
        monitor_wakeups,
        /// Times the monitor found every worker parked and slept with no deadline, until a
        /// worker left its park.
        monitor_idle_sleeps,
    }
}

/// A snapshot of the scheduler's counters.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Builder::new().workers(2).build().unwrap();
/// let handles: Vec<_> = (0..10).map(|_| sched.spawn(|| ())).collect();
/// handles.into_iter().for_each(|h| h.join().unwrap());
/// let stats = sched.stats();
/// assert_eq!(stats.procs.len(), 2);
/// assert!(stats.total.switches >= 10);
/// println!("{stats:?}");
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Per processor.
    pub procs: Vec<ProcStats>,
    /// Sum over processors.
    pub total: ProcStats,
    /// Scheduler-wide counters.
    pub global: GlobalStats,
    /// Green threads alive (spawned, not finished).
    pub live: usize,
    /// Runnable green threads in each processor's local queue (and runnext).
    pub queue_lens: Vec<usize>,
    /// Green threads in the global queue.
    pub global_queue_len: usize,
    /// Timers pending on each processor (timed waits and callback timers not yet fired or
    /// deleted).
    pub timers_pending: Vec<usize>,
    /// Workers searching for work right now.
    pub searching: u32,
    /// Workers parked right now.
    pub parked: u32,
    /// OS threads running as workers (including blocking-handoff spares).
    pub threads: usize,
    /// G records allocated in this process (all schedulers; recycled, never freed).
    pub g_records: usize,
}

pub(crate) fn stats_of(shared: &Shared) -> Stats {
    let procs: Vec<ProcStats> = shared.active().iter().map(|p| p.stats.snapshot()).collect();
    let mut total = ProcStats::default();
    for p in &procs {
        total += *p;
    }
    let (searching, parked) = shared.idle.counts();
    let mut global = shared.stats.snapshot();
    global.wakes_skipped += total.wakes_skipped;
    Stats {
        total,
        procs,
        global,
        live: shared.live(),
        queue_lens: shared.active().iter().map(|p| p.queue_len()).collect(),
        global_queue_len: shared.injector.len(),
        timers_pending: shared.active().iter().map(|p| p.timers.pending()).collect(),
        searching,
        parked,
        threads: shared.threads_alive.load(Ordering::Relaxed),
        g_records: registry().allocated(),
    }
}
