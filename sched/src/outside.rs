//! OS threads outside a scheduler that wait on one of its green threads (a `join` from
//! `main`, a scope's owner): counted per scheduler, so the runtime's deadlock watch can tell
//! "every green thread is parked and an OS thread waits for one of them" (Go's "all
//! goroutines are asleep") from "every green thread is parked, waiting for an OS thread".
//!
//! A plain mutex-protected list: an OS thread that blocks pays a futex wait anyway.
//!
//! Waiting for a scheduler to go idle needs no polling (Go calls `checkdead` when the last M
//! goes idle). Two process-wide lots carry the events, each to the waiters that need it:
//!
//! - *Idle events* ([`wait_idle_event`]): the last busy worker of a scheduler parked (`M::park`,
//!   after its re-check found nothing), or a runtime's root finished. An OS thread in the
//!   runtime's `block_on` waits on these for its root and for a root that can no longer run.
//! - *Outside events* ([`wait_outside_event`]): an OS thread started waiting on a green thread,
//!   or the last busy worker of a scheduler that such a thread waits on parked. A deadlock
//!   watch waits on these: it has something to report only while an OS thread waits, so the
//!   common idle transition of a runtime entered and left by `block_on` does not wake it.
//!
//! One lot of each serves every scheduler: a waiter woken for another scheduler's event only
//! re-checks. A waiter takes a snapshot ([`idle_events`], [`outside_events`]) before it checks,
//! so an event between its check and its wait is not lost (the lot's P1 in `purloin_parking`).
//!
//! A parking worker signals an outside event only if its scheduler has outside waiters; a
//! thread that starts waiting signals one unconditionally, after it is counted. Both look at
//! the count under the list's mutex, which orders them: if the waiter's count came first, the
//! worker sees it and signals; if the worker's look came first, its park (done before the look)
//! happens before the waiter's unlock and signal, so the watch that the signal wakes sees the
//! worker parked.

use crate::sync::{DiagMutex, DiagMutexGuard};

/// `(scheduler address, OS threads waiting on it)`.
static WAITING: DiagMutex<Vec<(usize, usize)>> = DiagMutex::new(Vec::new());

fn lock() -> DiagMutexGuard<'static, Vec<(usize, usize)>> {
    WAITING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An OS thread waiting on a green thread of one scheduler, while it lives (see
/// [`Scheduler::outside_wait`](crate::Scheduler::outside_wait)).
#[derive(Debug)]
#[must_use = "the wait is counted while the guard lives"]
pub struct OutsideWait {
    sched: usize,
    _mark: ThreadMark,
}

impl OutsideWait {
    /// Counts the calling OS thread as waiting on `sched` (a `Shared` address).
    pub(crate) fn new(sched: *const crate::shared::Shared) -> OutsideWait {
        let sched = sched as usize;
        let mark = ThreadMark::new(sched);
        let mut list = lock();
        match list.iter_mut().find(|(s, _)| *s == sched) {
            Some((_, n)) => *n += 1,
            None => list.push((sched, 1)),
        }
        drop(list);
        note_outside_event();
        OutsideWait { sched, _mark: mark }
    }
}

impl Drop for OutsideWait {
    fn drop(&mut self) {
        let mut list = lock();
        if let Some(i) = list.iter().position(|(s, _)| *s == self.sched) {
            list[i].1 -= 1;
            if list[i].1 == 0 {
                list.swap_remove(i);
            }
        }
    }
}

/// OS threads that cannot wake a scheduler's green threads by surprise: `(kernel thread id,
/// owner)`, where the owner is a scheduler's `Shared` address (its workers and monitor, and
/// the OS threads waiting on it) or [`ANY`] (a helper of the runtime that never wakes a green
/// thread). Every other thread of the process might (a program's own thread holding a
/// channel's sender, a tokio runtime's driver, the signal dispatcher): see
/// [`Scheduler::unknown_threads`](crate::Scheduler::unknown_threads).
static MARKED: DiagMutex<Vec<(u64, usize)>> = DiagMutex::new(Vec::new());

/// The owner of a [`helper_thread`] mark: known to every scheduler.
const ANY: usize = 0;

fn marked() -> DiagMutexGuard<'static, Vec<(u64, usize)>> {
    MARKED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The mark of an OS thread that cannot wake green threads by surprise (see [`helper_thread`]),
/// while it lives. Dropping it on another thread removes the mark of the thread that made it.
#[derive(Debug)]
#[must_use = "the thread is marked while the guard lives"]
pub struct ThreadMark {
    tid: u64,
    owner: usize,
}

impl ThreadMark {
    /// Marks the calling thread for `owner` (unknown thread ids, off Linux, mark nothing).
    pub(crate) fn new(owner: usize) -> ThreadMark {
        let tid = crate::os::current_thread_cached();
        if tid != 0 {
            marked().push((tid, owner));
        }
        ThreadMark { tid, owner }
    }
}

impl Drop for ThreadMark {
    fn drop(&mut self) {
        if self.tid == 0 {
            return;
        }
        let mut list = marked();
        if let Some(i) = list.iter().position(|m| *m == (self.tid, self.owner)) {
            list.swap_remove(i);
        }
    }
}

/// Marks the calling OS thread, while the guard lives, as a helper of the runtime that never
/// wakes a green thread (a trace writer, a deadlock watch, a thread printing statistics), so a
/// deadlock check does not count it among the threads that might
/// ([`Scheduler::unknown_threads`](crate::Scheduler::unknown_threads)). Mark nothing else: a
/// thread marked by mistake can make a check report a deadlock that this thread would have
/// ended.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let helper = std::thread::spawn(|| {
///     let _mark = purloin_sched::helper_thread();
///     std::thread::park();
/// });
/// let other = std::thread::spawn(|| std::thread::park());
/// // On Linux, once the threads have started (and the scheduler's own have marked themselves),
/// // only this thread and `other` could wake a green thread: not the helper.
/// # let settled = |want| (0..10_000).any(|_| { std::thread::yield_now(); sched.unknown_threads() == want });
/// assert!(sched.unknown_threads().is_none() || settled(Some(2)));
/// # helper.thread().unpark(); other.thread().unpark();
/// # helper.join().unwrap(); other.join().unwrap();
/// ```
pub fn helper_thread() -> ThreadMark {
    ThreadMark::new(ANY)
}

/// How many threads carry a [`helper_thread`] mark now.
#[doc(hidden)]
pub fn helper_threads() -> usize {
    marked().iter().filter(|(_, o)| *o == ANY).count()
}

/// Marks the calling thread as a worker or the monitor of `sched`.
pub(crate) fn mark_own_thread(sched: *const crate::shared::Shared) -> ThreadMark {
    ThreadMark::new(sched as usize)
}

/// The threads of this process that are not marked for `sched` nor as helpers (and are not the
/// stack scavenger); `None` where the process's threads cannot be listed.
pub(crate) fn unknown_threads(sched: *const crate::shared::Shared) -> Option<usize> {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        let sched = sched as usize;
        let scavenger = purloin_stack::scavenger_thread_id();
        // The marks first, then the listing: a thread that starts meanwhile is listed without
        // its mark and counted, and one that ends was counted either way; both err towards
        // "a thread might wake it".
        let known: Vec<u64> = marked()
            .iter()
            .filter(|(_, owner)| *owner == ANY || *owner == sched)
            .map(|(tid, _)| *tid)
            .collect();
        let mut unknown = 0;
        for entry in std::fs::read_dir("/proc/self/task").ok()? {
            let tid: u64 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            if !known.contains(&tid) && Some(tid) != scavenger {
                unknown += 1;
            }
        }
        Some(unknown)
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    {
        let _ = sched;
        None
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// The waits counted for this OS thread's [`BlockingOnFutures`] (`None` outside one).
    static FUTURE_WAITS: core::cell::RefCell<Option<Vec<OutsideWait>>> =
        const { core::cell::RefCell::new(None) };
}

/// Marks the calling OS thread as blocked on futures while it lives (an executor's
/// `block_on`): a [`JoinFuture`](crate::JoinFuture) polled `Pending` meanwhile counts the
/// thread as waiting on its scheduler, as a [`JoinHandle::join`](crate::JoinHandle::join) from
/// the thread would, so a deadlock watch sees the wait. Nested guards share the outermost one's
/// counts, which end with it. On a green thread it does nothing.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(purloin_sched::park);
/// let t = *h.thread();
/// let _blocking = purloin_sched::blocking_on_futures();
/// let mut fut = std::pin::pin!(std::future::IntoFuture::into_future(h));
/// let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// assert!(std::future::Future::poll(fut.as_mut(), &mut cx).is_pending());
/// assert_eq!(sched.outside_waiters(), 1); // this thread now waits on `sched`
/// t.unpark();
/// ```
#[derive(Debug)]
#[must_use = "the waits are counted while the guard lives"]
pub struct BlockingOnFutures {
    outermost: bool,
}

/// Starts a [`BlockingOnFutures`] section on the calling OS thread.
pub fn blocking_on_futures() -> BlockingOnFutures {
    #[cfg(not(loom))]
    let outermost = FUTURE_WAITS.with(|w| {
        let mut w = w.borrow_mut();
        w.is_none().then(|| *w = Some(Vec::new())).is_some()
    });
    #[cfg(loom)]
    let outermost = false;
    BlockingOnFutures { outermost }
}

impl Drop for BlockingOnFutures {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        if self.outermost {
            // Dropped outside the borrow: an `OutsideWait`'s drop takes the list's lock.
            let waits = FUTURE_WAITS.with(|w| w.borrow_mut().take());
            drop(waits);
        }
    }
}

/// A [`JoinFuture`](crate::JoinFuture) of scheduler `sched` was polled `Pending`: inside a
/// [`BlockingOnFutures`] section of an OS thread, count the thread as waiting on `sched` (once
/// per scheduler).
pub(crate) fn note_future_wait(sched: usize) {
    #[cfg(not(loom))]
    if !crate::in_green_thread() {
        FUTURE_WAITS.with(|w| {
            if let Some(waits) = w.borrow_mut().as_mut()
                && !waits.iter().any(|o| o.sched == sched)
            {
                waits.push(OutsideWait::new(sched as *const crate::shared::Shared));
            }
        });
    }
    #[cfg(loom)]
    let _ = sched;
}

/// How many OS threads wait on green threads of `sched` now.
pub(crate) fn count(sched: *const crate::shared::Shared) -> usize {
    lock().iter().find(|(s, _)| *s == sched as usize).map_or(0, |(_, n)| *n)
}

/// Counts the caller while it waits if it is an OS thread (not a green thread).
pub(crate) fn if_os_thread(sched: *const crate::shared::Shared) -> Option<OutsideWait> {
    (!crate::in_green_thread()).then(|| OutsideWait::new(sched))
}

/// One process-wide lot of events (see the module docs). Under loom, where a process-wide lot
/// cannot live across models, it holds nothing: a wait is a timed thread park bounded by
/// [`LOOM_WAIT`] and a signal does nothing.
struct EventLot(#[cfg(not(loom))] purloin_parking::ParkingLot);

/// What a snapshot of an [`EventLot`] holds.
#[cfg(not(loom))]
type Snap = purloin_parking::State;
#[cfg(loom)]
type Snap = ();

/// The bound of a wait under loom (see [`EventLot`]).
#[cfg(loom)]
const LOOM_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

impl EventLot {
    #[cfg(not(loom))]
    const fn new() -> EventLot {
        EventLot(purloin_parking::ParkingLot::new())
    }

    #[cfg(loom)]
    const fn new() -> EventLot {
        EventLot()
    }

    fn state(&self) -> Snap {
        #[cfg(not(loom))]
        return self.0.state();
        #[cfg(loom)]
        return ();
    }

    fn wait(&self, since: Snap, deadline: Option<std::time::Instant>) {
        #[cfg(not(loom))]
        match deadline {
            Some(d) => {
                self.0.wait_deadline(since, d);
            }
            None => self.0.wait(since),
        }
        #[cfg(loom)]
        {
            let _ = since;
            let left = deadline
                .map_or(LOOM_WAIT, |d| d.saturating_duration_since(std::time::Instant::now()));
            std::thread::park_timeout(left.min(LOOM_WAIT));
        }
    }

    fn signal(&self) {
        #[cfg(not(loom))]
        self.0.signal(u32::MAX);
    }
}

/// Process-wide idle events (see the module docs).
static IDLE_EVENTS: EventLot = EventLot::new();

/// Process-wide outside events (see the module docs).
static OUTSIDE_EVENTS: EventLot = EventLot::new();

/// A snapshot of the idle events, from [`idle_events`], to wait on with [`wait_idle_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleEvents(Snap);

/// Takes the snapshot to wait on. Take it **before** checking
/// [`Scheduler::is_quiescent`](crate::Scheduler::is_quiescent) or whatever the caller waits for.
///
/// # Examples
///
/// ```
/// let since = purloin_sched::idle_events();
/// purloin_sched::note_idle_event();
/// purloin_sched::wait_idle_event(since, None); // returns at once: an event came after `since`
/// ```
#[must_use]
pub fn idle_events() -> IdleEvents {
    IdleEvents(IDLE_EVENTS.state())
}

/// Blocks the calling OS thread until an idle event came after `since` (the last busy worker of
/// some scheduler parked, or [`note_idle_event`]: a runtime's root finished), or until
/// `deadline`. May return spuriously: check again after every return. (Under loom, where the
/// process-wide lot cannot live, it is a bounded timed park.)
pub fn wait_idle_event(since: IdleEvents, deadline: Option<std::time::Instant>) {
    IDLE_EVENTS.wait(since.0, deadline);
}

/// Signals an idle event: every thread in [`wait_idle_event`] returns and checks again (a
/// finished root, or any change its waiters must look at).
pub fn note_idle_event() {
    IDLE_EVENTS.signal();
}

/// A snapshot of the outside events, from [`outside_events`], to wait on with
/// [`wait_outside_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutsideEvents(Snap);

/// Takes the snapshot to wait on. Take it **before** checking
/// [`Scheduler::outside_waiters`](crate::Scheduler::outside_waiters) and
/// [`Scheduler::is_quiescent`](crate::Scheduler::is_quiescent): a deadlock watch's loop.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let since = purloin_sched::outside_events();
/// let waiting = sched.outside_wait(); // an OS thread starts waiting: an outside event
/// purloin_sched::wait_outside_event(since, None); // returns at once
/// drop(waiting);
/// ```
#[must_use]
pub fn outside_events() -> OutsideEvents {
    OutsideEvents(OUTSIDE_EVENTS.state())
}

/// Blocks the calling OS thread until an outside event came after `since` (an OS thread
/// started waiting on a green thread, the last busy worker of a scheduler with such waiters
/// parked, or [`note_outside_event`]), or until `deadline`. May return spuriously: check again
/// after every return. (Under loom, as [`wait_idle_event`], a bounded timed park.)
pub fn wait_outside_event(since: OutsideEvents, deadline: Option<std::time::Instant>) {
    OUTSIDE_EVENTS.wait(since.0, deadline);
}

/// Signals an outside event: every thread in [`wait_outside_event`] returns and checks again
/// (a deadlock watch that is asked to stop).
pub fn note_outside_event() {
    OUTSIDE_EVENTS.signal();
}

/// The last busy worker of `sched` parked: wake the waiters on the scheduler's idleness
/// (`block_on` roots, and deadlock watches if an OS thread waits on it; see the module docs).
pub(crate) fn note_scheduler_idle(sched: *const crate::shared::Shared) {
    note_idle_event();
    // Under the list's mutex (see the module docs for why that orders it against a new
    // waiter's count and signal).
    if count(sched) > 0 {
        note_outside_event();
    }
}

// Back-pressure on outside submissions (`Builder::max_outside_queued`, brpc's full remote
// queue). A green thread submitted from a thread that is not one of the scheduler's workers
// holds one unit of `Shared::outside_queued` from its spawn until it starts (or is dropped
// unrun): an [`OutsidePermit`] moved into its closure, dropped first thing when it runs. A
// submitter takes the unit with a compare-exchange below the bound, so the count never
// exceeds it; when it is full, `try_spawn` gives the closure back, and `spawn` waits on
// `outside_room` for a release.
//
// O1, no lost wake-up for a waiting submitter: it takes the lot's snapshot before it reads the
// count, and every release signals the lot after its decrement (a Release read-modify-write
// of the lot's word; the snapshot is an Acquire load). If the snapshot saw that signal, the
// count it reads next shows the decrement; if not, the signal came after the snapshot and the
// wait returns at once.

impl crate::shared::Shared {
    /// Takes a unit of the outside bound, waiting for room if `wait`, else failing when the
    /// bound is reached. Only called under a bound.
    pub(crate) fn reserve_outside(&self, wait: bool) -> bool {
        use crate::sync::Ordering;
        let bound = self.config.max_outside_queued;
        loop {
            // O1: the snapshot before the count.
            let snapshot = wait.then(|| self.outside_room.state());
            let mut n = self.outside_queued.load(Ordering::Relaxed);
            while n < bound {
                // Relaxed: the count orders nothing but itself.
                match self.outside_queued.compare_exchange_weak(
                    n,
                    n + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => n = now,
                }
            }
            match snapshot {
                Some(s) if self.is_running() => self.outside_room.wait(s),
                _ => return false,
            }
        }
    }

    /// Gives back a unit of the outside bound and wakes a submitter waiting for room.
    pub(crate) fn release_outside(&self) {
        use crate::sync::Ordering;
        self.outside_queued.fetch_sub(1, Ordering::Relaxed);
        self.outside_room.signal(1);
    }
}

/// A green thread's unit of the outside bound, from its submission until it starts; moved
/// into its closure, which drops it first (or drops it unrun, with the closure).
pub(crate) struct OutsidePermit(crate::sync::Arc<crate::shared::Shared>);

impl OutsidePermit {
    /// Takes a unit for a submission to `shared` from outside its workers (see
    /// [`Shared::reserve_outside`](crate::shared::Shared::reserve_outside)); `None` when the
    /// bound is reached and `wait` is false, or the scheduler stopped while it waited.
    pub(crate) fn take(
        shared: &crate::sync::Arc<crate::shared::Shared>,
        wait: bool,
    ) -> Option<OutsidePermit> {
        shared.reserve_outside(wait).then(|| OutsidePermit(shared.clone()))
    }
}

impl Drop for OutsidePermit {
    fn drop(&mut self) {
        self.0.release_outside();
    }
}
