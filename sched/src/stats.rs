//! Counters: per-P (written by the P's holder only, so a bump is a load and a store, not a
//! read-modify-write) and scheduler-wide (read-modify-writes, on paths that are already slow).

use crate::registry::registry;
use crate::shared::Shared;
use std::time::Duration;

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
        /// Spare workers the monitor added for stalled workers
        /// ([`Builder::max_spare_workers`](crate::Builder::max_spare_workers)).
        spares_added,
        /// Spare workers that retired after the stall ended.
        spares_retired,
        /// Green threads reported for running too long without a scheduling point.
        long_runners,
        /// Rounds of the monitor (each follows one of its sleeps).
        monitor_wakeups,
        /// Times the monitor found every worker parked and slept with no deadline, until a
        /// worker left its park.
        monitor_idle_sleeps,
    }
}

/// Durations in log2 buckets: one processor's (or a sum), as a snapshot. What is measured
/// depends on where it comes from: [`ParkHistogram`] (park durations, opt-in) and
/// [`Stats::sched_latencies`] (runnable to running, sampled, always on).
///
/// Bucket `i` counts durations shorter than [`upper_bound(i)`](Self::upper_bound)
/// (2<sup>10+i</sup> ns: 1.024 µs, 2.048 µs, ... 68.7 s) and, but for bucket 0, at least as
/// long as the bound of bucket `i - 1`; the last bucket has no bound. The buckets are not
/// cumulative.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use purloin_sched::DurationHistogram;
///
/// assert_eq!(DurationHistogram::upper_bound(0), Some(Duration::from_nanos(1024)));
/// assert_eq!(DurationHistogram::upper_bound(DurationHistogram::BUCKETS - 1), None);
/// assert_eq!(DurationHistogram::default().count(), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DurationHistogram {
    /// Durations per bucket (see the type's docs).
    pub buckets: [u64; DurationHistogram::BUCKETS],
    /// The durations' total in nanoseconds.
    pub sum_nanos: u64,
}

/// How long green threads stayed parked (a [`DurationHistogram`]): one processor's (or a
/// sum), as a snapshot. Recorded only when the scheduler was built with
/// [`Builder::park_histogram(true)`](crate::Builder::park_histogram).
///
/// A park lasts from the green thread's switch out in [`park`](crate::park) (or any wait built
/// on it: locks, channels, joins, sleeps, I/O) to its switch back in, so it includes the time
/// it was runnable in a queue after its wake-up (that part alone is
/// [`Stats::sched_latencies`]). Both ends are read from the OS clock (`Instant`), so
/// sub-microsecond parks are measured as such. A `park` that returns at once (a pending
/// unpark) is not a park. Each park is recorded by the processor it resumes on.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use purloin_sched::ParkHistogram;
///
/// let sched = purloin_sched::Builder::new().workers(1).park_histogram(true).build().unwrap();
/// let h = sched.spawn(purloin_sched::park);
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// h.thread().unpark();
/// h.join().unwrap();
/// let parks = sched.stats().park_histogram().unwrap();
/// assert_eq!(parks.count(), 1);
/// assert_eq!(ParkHistogram::upper_bound(0), Some(Duration::from_nanos(1024)));
/// assert_eq!(ParkHistogram::upper_bound(ParkHistogram::BUCKETS - 1), None);
/// ```
pub type ParkHistogram = DurationHistogram;

/// One in how many transitions from runnable to running each worker times for
/// [`Stats::sched_latency`] (on average; see there). Each timed one costs two reads of the OS
/// clock; the others a count down.
pub const SCHED_LATENCY_PERIOD: u32 = 64;

/// log2 of the first bucket's upper bound in nanoseconds (1.024 µs).
const HIST_MIN_LOG2: u32 = 10;

impl DurationHistogram {
    /// Number of buckets: 27 bounded ones (1.024 µs to 68.7 s) and one unbounded.
    pub const BUCKETS: usize = 28;

    /// The (exclusive) upper bound of bucket `i`: 2<sup>10+i</sup> ns; `None` for the last
    /// bucket (and past it).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use purloin_sched::DurationHistogram;
    ///
    /// assert_eq!(DurationHistogram::upper_bound(10), Some(Duration::from_nanos(1 << 20)));
    /// ```
    pub fn upper_bound(i: usize) -> Option<Duration> {
        (i + 1 < Self::BUCKETS).then(|| Duration::from_nanos(1 << (HIST_MIN_LOG2 as usize + i)))
    }

    /// The bucket a duration of `nanos` nanoseconds falls in.
    fn bucket_of(nanos: u64) -> usize {
        let bits = u64::BITS - nanos.leading_zeros(); // nanos < 2^bits
        (bits.saturating_sub(HIST_MIN_LOG2) as usize).min(Self::BUCKETS - 1)
    }

    /// Number of durations recorded (the sum of the buckets).
    ///
    /// # Examples
    ///
    /// ```
    /// let stats = purloin_sched::Scheduler::new().unwrap().stats();
    /// assert!(stats.park_histogram().is_none()); // off by default
    /// ```
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The durations' total.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().park_histogram(true).build().unwrap();
    /// assert_eq!(sched.stats().park_histogram().unwrap().sum(), std::time::Duration::ZERO);
    /// ```
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_nanos)
    }
}

impl Default for DurationHistogram {
    fn default() -> Self {
        DurationHistogram { buckets: [0; Self::BUCKETS], sum_nanos: 0 }
    }
}

impl core::ops::AddAssign for DurationHistogram {
    fn add_assign(&mut self, o: DurationHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        self.sum_nanos += o.sum_nanos;
    }
}

/// One processor's duration buckets (owner-written, like `PStats`: a duration is recorded by
/// the worker holding the P, when the green thread it measures switches in there).
pub(crate) struct DurationBuckets {
    buckets: [StatCounter; DurationHistogram::BUCKETS],
    sum_nanos: StatCounter,
}

impl DurationBuckets {
    pub(crate) fn new() -> DurationBuckets {
        DurationBuckets {
            buckets: core::array::from_fn(|_| StatCounter::new(0)),
            sum_nanos: StatCounter::new(0),
        }
    }

    /// Records a duration of `d` (the caller holds the P).
    #[inline]
    pub(crate) fn record(&self, d: Duration) {
        self.record_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records a duration of `nanos` nanoseconds (the caller holds the P).
    #[inline]
    pub(crate) fn record_nanos(&self, nanos: u64) {
        bump(&self.buckets[DurationHistogram::bucket_of(nanos)]);
        add(&self.sum_nanos, nanos);
    }

    pub(crate) fn snapshot(&self) -> DurationHistogram {
        DurationHistogram {
            buckets: core::array::from_fn(|i| self.buckets[i].load(STAT)),
            sum_nanos: self.sum_nanos.load(STAT),
        }
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
/// // Two processors, and any spare the monitor added for a worker it found stalled.
/// assert!(stats.procs.len() >= 2);
/// assert!(stats.total.switches >= 10);
/// println!("{stats:?}");
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Per active processor, the spares the monitor added for stalled workers included
    /// ([`Builder::max_spare_workers`](crate::Builder::max_spare_workers)).
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
    /// How long green threads stayed parked, per processor (see [`ParkHistogram`]); empty
    /// unless the scheduler was built with
    /// [`Builder::park_histogram(true)`](crate::Builder::park_histogram).
    pub park_durations: Vec<ParkHistogram>,
    /// Scheduling latencies, per processor: how long green threads waited in a run queue,
    /// from being made runnable to being switched in (Go's `/sched/latencies:seconds`),
    /// recorded by the processor they were switched in on. Always on, and sampled: see
    /// [`Stats::sched_latency`].
    pub sched_latencies: Vec<DurationHistogram>,
}

impl Stats {
    /// The park-duration histogram summed over processors, or `None` if the scheduler does
    /// not record one ([`Builder::park_histogram`](crate::Builder::park_histogram)).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().workers(2).park_histogram(true).build().unwrap();
    /// let h = sched.spawn(|| purloin_sched::sleep(std::time::Duration::from_millis(1)));
    /// h.join().unwrap();
    /// let parks = sched.stats().park_histogram().unwrap();
    /// assert!(parks.count() >= 1); // the sleep parked (maybe more than once)
    /// assert!(parks.sum() > std::time::Duration::ZERO);
    /// ```
    pub fn park_histogram(&self) -> Option<ParkHistogram> {
        if self.park_durations.is_empty() {
            return None;
        }
        let mut total = ParkHistogram::default();
        for h in &self.park_durations {
            total += *h;
        }
        Some(total)
    }

    /// The scheduling latencies ([`sched_latencies`](Self::sched_latencies)) summed over
    /// processors: how long runnable green threads waited for a worker (Go's
    /// `/sched/latencies:seconds`, tokio-metrics' scheduling delay). Separate from park
    /// durations: a park's wait for its wake-up is not in it.
    ///
    /// A transition is a green thread made runnable through a run queue (spawned, woken, a
    /// yield that queues it, a blocking section's requeue) and switched in later. Measuring
    /// one takes two reads of the OS clock, so only a sample is timed, as Go times one in
    /// eight: each worker times one of about every
    /// [`SCHED_LATENCY_PERIOD`](crate::SCHED_LATENCY_PERIOD) transitions it queues, at a pseudo-random point in each period (so a pattern that
    /// repeats with the period is not always timed at the same green thread), and threads
    /// that are not workers time the same share with one process-wide count. The counts are
    /// samples: [`count`](DurationHistogram::count) is the number of transitions timed, not
    /// of transitions; the distribution and the mean (`sum / count`) are estimates of the
    /// whole. Not timed: a lazily spawned green thread's first run (it has no record to stamp
    /// while queued), a yield resumed at once because nothing else was runnable (it was never
    /// queued), and stackless tasks queued by their own steps.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
    /// for _ in 0..1000 {
    ///     sched.spawn(purloin_sched::yield_now).join().unwrap();
    /// }
    /// let lat = sched.stats().sched_latency();
    /// // About one in 64 of the 1000 spawns from this thread was timed (the yields found
    /// // nothing else to run and went on at once: never queued).
    /// assert!(lat.count() >= 1 && lat.count() < 2000, "{lat:?}");
    /// ```
    pub fn sched_latency(&self) -> DurationHistogram {
        let mut total = DurationHistogram::default();
        for h in &self.sched_latencies {
            total += *h;
        }
        total
    }
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
        park_durations: if shared.config.park_histogram {
            shared.active().iter().map(|p| p.park_durations.snapshot()).collect()
        } else {
            Vec::new()
        },
        sched_latencies: shared.active().iter().map(|p| p.sched_latencies.snapshot()).collect(),
    }
}
