//! Joining a green thread, with join-helping: a joiner whose child has not started yet runs
//! it inline on its own stack instead of parking (rayon's trick, for stackful threads).
//!
//! A child with a G is claimed where it is (its queue entry goes stale) or popped from where a
//! join looks first. A lazily spawned child (see `lazy`) can only be taken by dequeuing its
//! entry: from runnext, from below the local queue's top, from the global queue's head (one
//! worker), or from the local queue's far end. Children joined in spawn order are found there,
//! because runnext, the local queue and overflows keep spawn order.

use core::cell::Cell;
use std::thread::Result as ThreadResult;

use crate::GreenThread;
use crate::entry::Entry;
use crate::g::{GRef, InlineChild};
use crate::held::HeldP;
use crate::ready::Slot;
use crate::stats::bump;
use crate::sync::Ordering;
use crate::task::{CellHead, PacketRef, Waiter};
use crate::worker::{M, current_worker};

/// An owned permission to join a green thread (to wait for it and take its result), like
/// [`std::thread::JoinHandle`]. Dropping it detaches the green thread.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| "done");
/// assert_eq!(h.join().unwrap(), "done");
///
/// let h = sched.spawn(|| panic!("boom"));
/// assert!(h.join().is_err());
/// ```
pub struct JoinHandle<T> {
    pub(crate) task: PacketRef<T>,
    /// The green thread's identity: set at spawn, or on first request for a lazily spawned
    /// one (see `lazy`).
    pub(crate) thread: std::sync::OnceLock<GreenThread>,
    /// Spawned lazily: its queue entry is the task cell (see `lazy`).
    pub(crate) lazy: bool,
    /// The scheduler the green thread was spawned on (only compared, never dereferenced here).
    pub(crate) sched: *const crate::shared::Shared,
    /// Stack bytes the child needs if its joiner runs it inline; `None` if it must never run
    /// inline (pinned, or given its own stack at spawn).
    pub(crate) inline_stack: Option<usize>,
    /// Who registered as the packet's waiter (by `wait_timeout`), if anyone did: only that
    /// green or OS thread is woken when the child finishes.
    pub(crate) registered: Option<Registrar>,
}

// SAFETY: `sched` is only compared with the current worker's scheduler (never dereferenced
// through the handle); the packet is Send + Sync for T: Send.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: as above; `&JoinHandle` only reads the packet's done flag.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// Waits for the green thread to finish and returns its result: `Ok(value)`, or `Err` with
    /// the panic payload if it panicked (or [`ForcedUnwind`](crate::ForcedUnwind) /
    /// [`Cancelled`](crate::Cancelled) / an `io::Error` if it could not run to completion).
    ///
    /// From a green thread this parks only the green thread; if the child has not started
    /// yet, the joiner runs it inline instead (join-helping). From a plain OS thread it blocks
    /// the OS thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// assert_eq!(sched.spawn(|| "ok").join().unwrap(), "ok");
    ///
    /// let err = sched.spawn(|| panic!("boom")).join().unwrap_err();
    /// assert_eq!(err.downcast_ref::<&str>(), Some(&"boom"));
    /// ```
    pub fn join(self) -> ThreadResult<T> {
        if let Some(by) = self.registered {
            // A waiter was registered by `wait_timeout`; no inline run any more.
            let _outside = crate::outside::if_os_thread(self.sched);
            while !self.task.is_done() {
                wait_as(by, None);
            }
            return self.task.into_result();
        }
        let packet = &self.task;
        if !packet.is_done()
            && let Some(bytes) = self.inline_stack
        {
            if self.lazy {
                run_lazy_inline(packet.head(), packet.cell(), self.sched, bytes);
            } else if let Some(child) = self.thread.get() {
                run_inline(*child, self.sched, bytes);
            }
        }
        if !packet.is_done() && packet.register(Waiter::current()) {
            // A lazily spawned child that has no identity yet is not made one just for this.
            let holder = self.thread.get().copied().or_else(|| packet.head().identity.peek());
            crate::set_wait_info(Some(crate::WaitInfo {
                kind: crate::WaitKind::Join,
                object: packet as *const _ as *const u8 as usize,
                holder: holder.map(|t| t.id()),
            }));
            let _outside = crate::outside::if_os_thread(self.sched);
            while !packet.is_done() {
                crate::park();
            }
            crate::set_wait_info(None);
        }
        self.task.into_result()
    }

    /// Waits at most `timeout` for the green thread to finish; returns whether it has. Call
    /// [`JoinHandle::join`] afterwards to take the result. Blocks the calling OS thread (or
    /// parks the calling green thread); it never runs the child inline. A timeout too large
    /// to be a deadline (`Duration::MAX`) waits without one.
    ///
    /// A calling green thread that is interrupted ([`GreenThread::interrupt`]) stops waiting:
    /// this returns `false` and leaves the interrupt pending. (`join` itself, which returns
    /// the child's result, is not interruptible: wait with this first.)
    ///
    /// The first call registers its caller as the one to wake when the child finishes. Later
    /// calls, and [`join`](JoinHandle::join), may come from another green or OS thread (the
    /// handle is `Send`); such a caller is not woken by the child and checks every 10 ms.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let mut h = sched.spawn(purloin_sched::park);
    /// assert!(!h.wait_timeout(Duration::from_millis(1))); // still parked
    /// h.thread().unpark();
    /// assert!(h.wait_timeout(Duration::MAX));
    /// h.join().unwrap();
    /// ```
    pub fn wait_timeout(&mut self, timeout: std::time::Duration) -> bool {
        let packet = &self.task;
        if packet.is_done() {
            return true;
        }
        let deadline = std::time::Instant::now().checked_add(timeout);
        let by = match self.registered {
            Some(by) => by,
            None => {
                let by = Registrar::current();
                self.registered = Some(by);
                if !packet.register(Waiter::current()) {
                    return true;
                }
                by
            }
        };
        while !packet.is_done() {
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) || crate::interrupted() {
                return false;
            }
            wait_as(by, deadline);
        }
        true
    }

    /// Whether the green thread has finished (its result is ready).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| 1);
    /// while !h.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(h.join().unwrap(), 1); // does not wait
    /// ```
    pub fn is_finished(&self) -> bool {
        self.task.is_done()
    }

    /// Interrupts the green thread ([`GreenThread::interrupt`]): its current interruptible
    /// wait, or its next one, returns an "interrupted" outcome. Returns `false` if it has
    /// ended.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     while !purloin_sched::take_interrupt() {
    ///         purloin_sched::park();
    ///     }
    /// });
    /// h.interrupt();
    /// h.join().unwrap();
    /// ```
    pub fn interrupt(&self) -> bool {
        self.thread().interrupt()
    }

    /// How long the green thread has run on a worker so far ([`GreenThread::cpu_time`]:
    /// coarse, read its docs); `None` once it has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(purloin_sched::park);
    /// assert!(h.cpu_time().is_some()); // not ended yet
    /// h.thread().unpark();
    /// h.join().unwrap();
    /// ```
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        self.thread().cpu_time()
    }

    /// How many times the green thread was switched in so far
    /// ([`GreenThread::switches`]); `None` once it has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(purloin_sched::park);
    /// while sched.parked().is_empty() {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(h.switches(), Some(1)); // it ran once, then parked
    /// h.thread().unpark();
    /// h.join().unwrap();
    /// ```
    pub fn switches(&self) -> Option<u64> {
        self.thread().switches()
    }

    /// The green thread's handle.
    ///
    /// A green thread spawned from a green thread with default options gets its record (and
    /// with it its id) only when it starts; asked for before that, the record is made now.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(purloin_sched::park);
    /// h.thread().unpark();
    /// h.join().unwrap();
    /// ```
    pub fn thread(&self) -> &GreenThread {
        self.thread
            .get_or_init(|| self.task.head().identity.get(self.sched, crate::ready::alloc_record))
    }
}

/// Which green or OS thread registered as a packet's waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Registrar {
    Green(crate::GreenId),
    Os(crate::sync::thread::ThreadId),
}

impl Registrar {
    fn current() -> Registrar {
        match crate::current() {
            Some(g) => Registrar::Green(g.id()),
            None => Registrar::Os(crate::sync::thread::current().id()),
        }
    }
}

/// One wait for a packet whose registered waiter is `by`: a park until woken (or until
/// `deadline`) if that is the caller, else a check every 10 ms (nobody wakes this caller).
fn wait_as(by: Registrar, deadline: Option<std::time::Instant>) {
    const POLL: std::time::Duration = std::time::Duration::from_millis(10);
    let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
    match (by == Registrar::current(), left) {
        (true, None) => crate::park(),
        (true, Some(left)) => crate::park_timeout(left),
        (false, left) => crate::park_timeout(left.map_or(POLL, |l| l.min(POLL))),
    }
}

impl<T> core::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Without making a record for a child that has none yet.
        let thread = self.thread.get().copied().or_else(|| self.task.head().identity.peek());
        f.debug_struct("JoinHandle").field("thread", &thread).finish_non_exhaustive()
    }
}

/// Runs the not-yet-started `child` inline on the calling green thread, if allowed: the caller
/// is a green thread of the same scheduler, the child is not pinned, and enough of the
/// caller's stack remains for the stack the child asked for. Returns whether it ran.
pub(crate) fn run_inline(
    child: GreenThread,
    child_sched: *const crate::shared::Shared,
    stack_bytes: usize,
) -> bool {
    let Some((m, host)) = inline_host(child_sched, stack_bytes) else { return false };
    if !claim(m, child) {
        return false;
    }
    // We won RUNNABLE => CLAIMED: we hold the child's scheduling reference and own its cells.
    child.g.host.store(host.as_ptr(), Ordering::Release);
    // SAFETY: we own the claimed child's cells.
    let task = unsafe { child.g.work.with_mut(|w| (*w).take_task()) };
    as_inline_child(m, host, InlineChild::Thread(child), || {
        crate::hook::emit(|| crate::hook::Event::Start { id: child.id() });
        if let Some(task) = task {
            // The joiner (in `JoinHandle::join`, no waiter registered) is the only party that
            // can see the child's packet now.
            task.run_by_joiner();
        }
    });
    crate::hook::emit(|| crate::hook::Event::InlineEnd { id: child.id() });
    crate::lazy::release_inline(child);
    finish_inline(child_sched);
    true
}

/// The worker and the running G that may run a child of `child_sched` needing `stack_bytes`
/// inline: a green thread of the same scheduler with enough stack left.
fn inline_host<'a>(
    child_sched: *const crate::shared::Shared,
    stack_bytes: usize,
) -> Option<(&'a M, GRef)> {
    let m = current_worker()?;
    let host = m.current.get()?;
    (core::ptr::eq(child_sched, &*m.shared) && stack_room(host, stack_bytes)).then_some((m, host))
}

/// Runs `run` as `child`, inline on the running G `host` (held by `m`): counts the inline
/// join and `current()` is the child meanwhile.
#[inline]
pub(crate) fn as_inline_child(m: &M, host: GRef, child: InlineChild, run: impl FnOnce()) {
    if let Some(h) = m.held() {
        let p = h.p();
        bump(&p.stats.inline_joins);
        // A join is a scheduling point, even when it runs the child inline.
        p.schedtick.store(p.schedtick.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
    // SAFETY: the running G's own cells are touched only by itself.
    let prev = unsafe { host.inline_child.with_mut(|c| (*c).replace(child)) };
    // The enclosing inline child's id (0: none, or none yet). It cannot change while this
    // child runs: its identity is made only by `current()` inside it (its frames wait below
    // this one), by its handle (held by its joiner: this G), or never (detached).
    let prev_id = host.inline_child_id.load(crate::sync::STAT);
    // A child that is still `Lazy` here has no id: its runner just took it from UNBOUND, and
    // only the runner makes it one (L3).
    let id = match child {
        InlineChild::Thread(t) => t.id().0,
        InlineChild::Lazy(_) => 0,
    };
    host.inline_child_id.store(id, crate::sync::STAT);
    // The stack's label already names `Some(prev_id)` when nested in an inline child with the
    // same id (two without ids yet, in nested scopes or joins): leave it.
    let relabel = prev.is_none() || prev_id != id;
    if relabel {
        label_inline(host, Some(id));
    }
    run();
    // SAFETY: as above (we may be on another worker now, but we are still the same G).
    unsafe { host.inline_child.with_mut(|c| *c = prev) };
    host.inline_child_id.store(prev_id, crate::sync::STAT);
    if relabel {
        label_inline(host, prev.map(|_| prev_id));
    }
}

/// Tells the host's stack which child runs inline on it (its id, 0 for one that has none
/// yet; or `None`), so a stack overflow in the child names the child, not only its joiner.
fn label_inline(host: GRef, child_id: Option<u64>) {
    // SAFETY: the running G's own cells are touched only by itself.
    unsafe {
        host.stack.with(|s| {
            if let Some(s) = (*s).as_ref() {
                s.set_inline(child_id);
            }
        })
    };
}

/// Counts an inline run's child as finished. Returns the worker now running the joiner if it
/// belongs to the child's scheduler (the joiner may be on another worker now: it is fetched
/// again), for a caller that goes on running children there.
#[inline]
pub(crate) fn finish_inline<'a>(child_sched: *const crate::shared::Shared) -> Option<&'a M> {
    // SAFETY: the child's scheduler outlives its live green threads, and the child counts as
    // live until `note_finished` below.
    let shared = unsafe { &*child_sched };
    let m = current_worker().filter(|m| core::ptr::eq(&*m.shared, shared));
    shared.note_finished_under_live_host(m.and_then(|m| m.held()).map(|h| h.p()));
    m
}

/// Runs the lazily spawned child whose queue entry is `entry` inline on the calling green
/// thread, if allowed (as for `run_inline`) and if the entry is in one of this worker's
/// queues where a join looks: dequeuing it makes the child ours (see `lazy`).
fn run_lazy_inline(
    head: &CellHead,
    cell: core::ptr::NonNull<()>,
    child_sched: *const crate::shared::Shared,
    stack_bytes: usize,
) -> bool {
    let Some((m, host)) = inline_host(child_sched, stack_bytes) else { return false };
    let Some(held) = m.held() else { return false };
    let entry = Entry::task(cell);
    if !find_child(held, Wanted { entry, generation: 0 }) {
        return false;
    }
    let Ok(bound) = head.identity.start_inline(host) else {
        // A handle made the child's G and it has an unpark or cancel pending: a worker runs
        // it (the entry goes back).
        held.enqueue(entry, Slot::Local);
        return false;
    };
    let me = match bound {
        Some(child) => InlineChild::Thread(child),
        None => InlineChild::Lazy(core::ptr::NonNull::from(head)),
    };
    // SAFETY: we dequeued the entry: we own the cell's G side.
    let task = unsafe { crate::task::OwnedTask::from_cell(cell) };
    // The joiner (in `JoinHandle::join`, no waiter registered) is the only party that can see
    // the packet.
    as_inline_child(m, host, me, || task.run_by_joiner());
    // The handle (in `join`) keeps the cell alive, also after the run completed the packet.
    if let Some(child) = bound.or_else(|| head.identity.end_inline()) {
        crate::lazy::release_inline(child);
    }
    finish_inline(child_sched);
    true
}

/// Claims `child` for an inline run. The child is usually one of the newest entries of our own
/// local queue (fork then join): then pop it, so no stale entry is left behind; otherwise
/// claim it where it is and let its entry go stale (for a worker that pulls it, or for
/// [`drop_stale_at_global_head`], to drop).
fn claim(m: &M, child: GreenThread) -> bool {
    if let Some(held) = m.held()
        && find_child(held, Wanted { entry: child.g.into(), generation: child.generation })
    {
        return true;
    }
    if !child.g.claim_inline(child.generation) {
        return false;
    }
    if m.looks.note_stale()
        && let Some(held) = m.held()
    {
        drop_stale_at_global_head(held);
    }
    true
}

/// A child's queue entry that a join looks for: a G (claimed once popped) or a lazily spawned
/// task (owned once popped).
#[derive(Clone, Copy)]
struct Wanted {
    entry: Entry,
    /// The G's generation (unused for a task).
    generation: u32,
}

impl Wanted {
    /// Claims the child whose entry the caller just popped: its only entry (a FRESH G or a
    /// task has one), so no stale entry remains.
    fn claim_popped(self) -> bool {
        self.entry.record().is_none_or(|g| g.claim_popped_inline(self.generation))
    }

    fn is_task(self) -> bool {
        self.entry.record().is_none()
    }
}

/// Where a child's entry can be when its joiner looks, in the order a join looks ([`PLACES`]).
/// Runnext, the local queue and overflows keep spawn order, so children joined in spawn order
/// are found in these places.
///
/// | place        | whose entry is there                          | looked for          |
/// |--------------|-----------------------------------------------|---------------------|
/// | `Runnext`    | the last G spawned, or a task spawned into an empty runnext | any child |
/// | `BelowTop`   | a child with younger siblings above it        | any child           |
/// | `GlobalHead` | children that overflowed, oldest first        | with one worker     |
/// | `FarEnd`     | the oldest entry of the local queue           | a task              |
///
/// Below the top means at most [`BELOW_TOP_DEPTH`] entries deep.
///
/// The global head is looked at only with one worker: then nobody else takes from the global
/// queue while the joiner runs; with more, the joiner's takes compete with other workers'
/// batch pulls at the head and move runnable siblings into the joiner's queue. The far end is
/// for tasks only: a G that is not found is claimed where it is, a task can only be taken by
/// dequeuing it. Every place but runnext (one load) costs pops and pushes, so a look there that
/// misses makes the next looks there back off ([`Looks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Runnext,
    BelowTop,
    GlobalHead,
    FarEnd,
}

/// The order a join looks in.
const PLACES: [Place; 4] = [Place::Runnext, Place::BelowTop, Place::GlobalHead, Place::FarEnd];

impl Place {
    /// Whether a look here may find `child` (see the table on [`Place`]).
    fn applies(self, held: HeldP<'_>, child: Wanted) -> bool {
        match self {
            Place::Runnext => held.p().runnext.load(Ordering::Relaxed) == child.entry.as_ptr(),
            Place::BelowTop => true,
            Place::GlobalHead => held.m().shared.nprocs.load(Ordering::Relaxed) == 1,
            Place::FarEnd => child.is_task(),
        }
    }

    /// The back-off slot of a place whose look costs pops and pushes.
    fn backoff(self) -> Option<usize> {
        match self {
            Place::Runnext => None,
            Place::BelowTop => Some(0),
            Place::GlobalHead => Some(1),
            Place::FarEnd => Some(2),
        }
    }

    /// Looks here; on a hit the child is popped and claimed.
    fn take(self, held: HeldP<'_>, child: Wanted) -> bool {
        match self {
            Place::Runnext => take_from_runnext(held, child),
            Place::BelowTop => take_from_below_top(held, child),
            Place::GlobalHead => take_from_global_head(held, child),
            Place::FarEnd => take_from_far_end(held, child),
        }
    }
}

/// Finds `child`'s entry in one of the [`PLACES`], pops it and claims the child.
fn find_child(held: HeldP<'_>, child: Wanted) -> bool {
    let looks = &held.m().looks;
    PLACES.into_iter().any(|place| {
        if !place.applies(held, child) {
            return false;
        }
        let Some(slot) = place.backoff() else { return place.take(held, child) };
        if looks.skip(slot) {
            return false;
        }
        let hit = place.take(held, child);
        looks.record(slot, hit);
        hit
    })
}

/// The back-off of a worker's joins (one per [`Place`] that has one): a look that missed makes
/// the next 1, 2, 4, ... up to 64 looks there skip; a hit resets it. For joiners whose
/// children are not where a look finds them (a joiner of 100,000 children: they overflowed to
/// the global queue long ago) would otherwise pop and push back entries on every join.
pub(crate) struct Looks {
    misses: [Cell<u32>; 3],
    skip: [Cell<u32>; 3],
    /// Children claimed where they were since the last [`drop_stale_at_global_head`].
    stale: Cell<u32>,
}

/// After `k` misses in a row, the next `2^(k-1)` looks (at most 64) skip.
const MAX_SKIP_LOG: u32 = 7;

impl Looks {
    pub(crate) const fn new() -> Looks {
        Looks {
            misses: [Cell::new(0), Cell::new(0), Cell::new(0)],
            skip: [Cell::new(0), Cell::new(0), Cell::new(0)],
            stale: Cell::new(0),
        }
    }

    /// Counts a child claimed where it was (its entry is stale now); true every
    /// [`STALE_DRAIN`]th time: the joiner then drops the stale entries at the global queue's
    /// head.
    fn note_stale(&self) -> bool {
        let n = self.stale.get() + 1;
        self.stale.set(n % STALE_DRAIN);
        n == STALE_DRAIN
    }

    /// Whether to skip this look (counts it down).
    fn skip(&self, slot: usize) -> bool {
        let skip = self.skip[slot].get();
        if skip > 0 {
            self.skip[slot].set(skip - 1);
        }
        skip > 0
    }

    fn record(&self, slot: usize, hit: bool) {
        let misses = if hit { 0 } else { (self.misses[slot].get() + 1).min(MAX_SKIP_LOG) };
        self.misses[slot].set(misses);
        self.skip[slot].set((1 << misses) >> 1);
    }
}

/// Takes the child out of runnext (where a child spawned into an empty runnext, or the last G
/// spawned, waits).
fn take_from_runnext(held: HeldP<'_>, child: Wanted) -> bool {
    let p = held.p();
    let Some(next) = p.take_runnext() else { return false };
    if next == child.entry && child.claim_popped() {
        return true;
    }
    // Taken meanwhile by a thief and replaced, or not claimable: put it back.
    if let Some(old) = p.put_runnext(next) {
        held.enqueue(old, Slot::LocalQuiet);
    }
    false
}

/// How deep a join looks below the top of its own local queue. Without it, a parent that joins
/// its children in spawn order (the usual `for h in handles { h.join() }`) finds the youngest
/// on top and claims the others where they are: each leaves a stale entry (a reference on a
/// finished record) for some worker to pop and drop later, on another core once it has been
/// stolen or overflowed to the global queue.
const BELOW_TOP_DEPTH: usize = 16;

/// Looks for the child among the top [`BELOW_TOP_DEPTH`] entries of the local queue; the
/// entries above it go back in their order. Out of line: a child joined right after its spawn
/// is found in runnext, before this.
#[inline(never)]
fn take_from_below_top(held: HeldP<'_>, child: Wanted) -> bool {
    let local = held.local();
    let mut above = [None::<Entry>; BELOW_TOP_DEPTH];
    let mut n = 0;
    let mut claimed = false;
    while n < BELOW_TOP_DEPTH
        && let Some(entry) = local.pop()
    {
        if entry == child.entry && child.claim_popped() {
            claimed = true;
            break;
        }
        above[n] = Some(entry);
        n += 1;
        if entry == child.entry {
            // Its entry, but not claimable: leave it be.
            break;
        }
    }
    for (i, entry) in above[..n].iter().rev().flatten().enumerate() {
        // The first push back: the queue may have looked empty meanwhile (to a worker about to
        // park), so it follows the notify rule.
        held.enqueue(*entry, if i == 0 { Slot::Local } else { Slot::LocalQuiet });
    }
    claimed
}

/// Entries a join takes from the global queue's head looking for its child.
const GLOBAL_HEAD_LOOKS: usize = 4;

/// Takes the child from the head of the global queue, if it is there (one worker only; see
/// [`Place`]). Taken from there, it leaves no stale entry; claimed in place, it would leave
/// one, which the worker must later pop and drop after everything queued before it (the next
/// root would wait behind the stale entries of a whole spawn-and-join burst). Stale entries
/// found at the head (siblings claimed in place earlier) are dropped on the way, as a worker
/// would drop them; runnable entries that are not the child go to the local queue. At most
/// [`GLOBAL_HEAD_LOOKS`] entries per join.
///
/// It runs on the worker's own stack: each steal's epoch pin may collect garbage
/// (`switch::on_worker_stack`).
#[inline(never)]
fn take_from_global_head(held: HeldP<'_>, child: Wanted) -> bool {
    crate::switch::on_worker_stack(held.m(), || take_from_global_head_here(held, child))
}

fn take_from_global_head_here(held: HeldP<'_>, child: Wanted) -> bool {
    let m = held.m();
    for _ in 0..GLOBAL_HEAD_LOOKS {
        let purloin_deque::Steal::Success(entry) = m.shared.injector.steal() else { break };
        // The entry was the child's only one (a FRESH G has one): once popped, the inline
        // run takes over its reference.
        if entry == child.entry && child.claim_popped() {
            return true;
        }
        if let Some(g) = entry.record()
            && !g.is_runnable()
        {
            // Stale: its G left the RUNNABLE state this entry was queued for (any later
            // RUNNABLE state comes with an entry of its own). Drop the entry's reference.
            if g.drop_ref() {
                m.recycle(g);
            }
            continue;
        }
        // Runnable work that is not our child (a sibling nobody joined yet): now local. The
        // global queue may have looked non-empty to a worker about to park, which then finds
        // it here: the notify rule applies. Then look on: overflows keep spawn order
        // (`push_or_overflow`), so the child is often right behind it.
        held.enqueue(entry, Slot::Local);
    }
    false
}

/// Children a joiner claims where they are between two [`drop_stale_at_global_head`]s.
const STALE_DRAIN: u32 = 64;

/// Drops the stale entries at the head of the global queue, up to the first live one (which
/// goes to the local queue). A joiner calls it every [`STALE_DRAIN`] children it claimed where
/// they were: children that overflowed to the global queue and were then joined in spawn order
/// leave their stale entries there, at its head, each holding its finished G's record. A
/// worker that pulls from the global queue drops them, but while the joiner runs its children
/// inline without ever switching, and no other worker pulls (one worker, or the others asleep
/// or searching elsewhere), nobody does: a parent that spawns and joins waves of children
/// would grow the queue, and the records, by a wave's worth each time. Each stale entry is
/// dropped once, so the cost is a constant per claim.
///
/// It runs on the worker's own stack: each steal's epoch pin may collect garbage
/// (`switch::on_worker_stack`).
#[inline(never)]
fn drop_stale_at_global_head(held: HeldP<'_>) {
    crate::switch::on_worker_stack(held.m(), || {
        let m = held.m();
        while let purloin_deque::Steal::Success(entry) = m.shared.injector.steal() {
            if let Some(g) = entry.record()
                && !g.is_runnable()
            {
                // Stale, as in `take_from_global_head_here`: drop the entry's reference.
                if g.drop_ref() {
                    m.recycle(g);
                }
                continue;
            }
            // Live work: now local. The global queue may have looked non-empty to a worker
            // about to park, which then finds it here: the notify rule applies.
            held.enqueue(entry, Slot::Local);
            break;
        }
    });
}

/// Takes a lazily spawned child from the far end of the local queue (where the oldest entry
/// waits: a parent joining its children in spawn order wants that one), by stealing from
/// itself. Any other entry taken goes back, at the owner's end.
#[inline(never)]
fn take_from_far_end(held: HeldP<'_>, child: Wanted) -> bool {
    match held.p().stealer.steal() {
        purloin_deque::Steal::Success(entry) if entry == child.entry => true,
        purloin_deque::Steal::Success(entry) => {
            // The queue may have looked empty meanwhile (to a worker about to park).
            held.enqueue(entry, Slot::Local);
            false
        }
        _ => false,
    }
}

/// Whether the running host's remaining stack can hold a child that asked for `want` bytes:
/// at least three quarters of it must remain below the current stack pointer.
pub(crate) fn stack_room(host: GRef, want: usize) -> bool {
    if cfg!(loom) {
        return true;
    }
    // SAFETY: the host is the running G: its own cells are touched only by itself.
    let limit = unsafe { host.stack.with(|s| (*s).as_ref().map(|s| s.limit() as usize)) };
    let Some(limit) = limit else { return false };
    let marker = 0u8;
    let sp = core::ptr::addr_of!(marker) as usize;
    sp.saturating_sub(limit) >= want / 4 * 3
}
