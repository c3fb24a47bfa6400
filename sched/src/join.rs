//! Joining a green thread, with join-helping: a joiner whose child has not started yet runs
//! it inline on its own stack instead of parking (rayon's trick, for stackful threads).
//!
//! A child with a G is claimed where it is (its queue entry goes stale) or popped from where a
//! join looks first. A lazily spawned child (see `lazy`) can only be taken by dequeuing its
//! entry: from runnext, from below the local queue's top, from the global queue's head (one
//! worker), or from the local queue's far end. Children joined in spawn order are found there,
//! because runnext, the local queue and overflows keep spawn order.

use std::thread::Result as ThreadResult;

use crate::GreenThread;
use crate::g::{GRef, InlineChild};
use crate::stats::bump;
use crate::sync::Ordering;
use crate::task::{CellHead, PacketRef, Waiter};
use crate::worker::current_worker;

/// An owned permission to join a green thread (to wait for it and take its result), like
/// [`std::thread::JoinHandle`]. Dropping it detaches the green thread.
pub struct JoinHandle<T> {
    pub(crate) task: PacketRef<T>,
    /// The green thread's identity: set at spawn, or on first request for a lazily spawned
    /// one (see `lazy`).
    pub(crate) thread: std::sync::OnceLock<GreenThread>,
    /// Spawned lazily: its queue entry is the task cell (see `lazy`).
    pub(crate) lazy: bool,
    /// The scheduler the green thread was spawned on (only compared, never dereferenced here).
    pub(crate) sched: *const crate::worker::Shared,
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
                run_lazy_inline(packet.head(), GRef::for_task(packet.cell()), self.sched, bytes);
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
    /// The first call registers its caller as the one to wake when the child finishes. Later
    /// calls, and [`join`](JoinHandle::join), may come from another green or OS thread (the
    /// handle is `Send`); such a caller is not woken by the child and checks every 10 ms.
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
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return false;
            }
            wait_as(by, deadline);
        }
        true
    }

    /// Whether the green thread has finished (its result is ready).
    pub fn is_finished(&self) -> bool {
        self.task.is_done()
    }

    /// The green thread's handle.
    ///
    /// A green thread spawned from a green thread with default options gets its record (and
    /// with it its id) only when it starts; asked for before that, the record is made now.
    pub fn thread(&self) -> &GreenThread {
        self.thread
            .get_or_init(|| self.task.head().identity.get(self.sched, crate::worker::alloc_record))
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
    child_sched: *const crate::worker::Shared,
    stack_bytes: usize,
) -> bool {
    let Some((m, host)) = inline_host(child_sched, stack_bytes) else { return false };
    if !claim(m, child) {
        return false;
    }
    // We won RUNNABLE => CLAIMED: we hold the child's scheduling reference and own its cells.
    child.g.host.store(host.as_ptr(), Ordering::Release);
    // SAFETY: we own the claimed child's cells.
    let task = unsafe { child.g.task.with_mut(|t| (*t).take()) };
    as_inline_child(m, host, InlineChild::Thread(child), || {
        if let Some(task) = task {
            // The joiner (in `JoinHandle::join`, no waiter registered) is the only party that
            // can see the child's packet now.
            task.run_by_joiner();
        }
    });
    crate::lazy::release_inline(child);
    finish_inline(child_sched);
    true
}

/// The worker and the running G that may run a child of `child_sched` needing `stack_bytes`
/// inline: a green thread of the same scheduler with enough stack left.
fn inline_host<'a>(
    child_sched: *const crate::worker::Shared,
    stack_bytes: usize,
) -> Option<(&'a crate::worker::M, GRef)> {
    let m = current_worker()?;
    let host = m.current.get()?;
    (core::ptr::eq(child_sched, &*m.shared) && stack_room(host, stack_bytes)).then_some((m, host))
}

/// Runs `run` as `child`, inline on the running G `host` (held by `m`): counts the inline
/// join and `current()` is the child meanwhile.
fn as_inline_child(m: &crate::worker::M, host: GRef, child: InlineChild, run: impl FnOnce()) {
    if m.holds_p() {
        let p = m.p();
        bump(&p.stats.inline_joins);
        // A join is a scheduling point, even when it runs the child inline.
        p.schedtick.store(p.schedtick.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
    // SAFETY: the running G's own cells are touched only by itself.
    let prev = unsafe { host.inline_child.with_mut(|c| (*c).replace(child)) };
    host.inline_child_id.store(child.known_id(), crate::sync::STAT);
    label_inline(host, Some(child));
    run();
    // SAFETY: as above (we may be on another worker now, but we are still the same G).
    unsafe { host.inline_child.with_mut(|c| *c = prev) };
    host.inline_child_id.store(prev.map_or(0, InlineChild::known_id), crate::sync::STAT);
    label_inline(host, prev);
}

/// Tells the host's stack which child runs inline on it (or none), so a stack overflow in
/// the child names the child, not only its joiner.
fn label_inline(host: GRef, child: Option<InlineChild>) {
    // SAFETY: the running G's own cells are touched only by itself.
    unsafe {
        host.stack.with(|s| {
            if let Some(s) = (*s).as_ref() {
                s.set_inline(child.map(InlineChild::known_id));
            }
        })
    };
}

/// Counts an inline run's child as finished.
fn finish_inline(child_sched: *const crate::worker::Shared) {
    // SAFETY: the child's scheduler outlives its live green threads, and the child counts as
    // live until `note_finished` below.
    let shared = unsafe { &*child_sched };
    // The joiner may be on another worker now: fetch it again.
    let holder = current_worker().filter(|m| m.holds_p() && core::ptr::eq(&*m.shared, shared));
    shared.note_finished_under_live_host(holder.map(|m| m.p()));
}

/// Runs the lazily spawned child whose queue entry is `entry` inline on the calling green
/// thread, if allowed (as for `run_inline`) and if the entry is in one of this worker's
/// queues where a join looks: dequeuing it makes the child ours (see `lazy`).
fn run_lazy_inline(
    head: &CellHead,
    entry: GRef,
    child_sched: *const crate::worker::Shared,
    stack_bytes: usize,
) -> bool {
    let Some((m, host)) = inline_host(child_sched, stack_bytes) else { return false };
    if !m.holds_p() {
        return false;
    }
    let p = m.p();
    if !take_popped(m, p, Wanted { entry, generation: 0 }) {
        return false;
    }
    let Ok(bound) = head.identity.start_inline(host) else {
        // A handle made the child's G and it has an unpark or cancel pending: a worker runs
        // it (the entry goes back).
        m.push_local_and_notify(entry);
        return false;
    };
    let me = match bound {
        Some(child) => InlineChild::Thread(child),
        None => InlineChild::Lazy(core::ptr::NonNull::from(head)),
    };
    // SAFETY: we dequeued the entry: we own the cell's G side.
    let task = unsafe { crate::task::OwnedTask::from_cell(entry.task_cell().expect("a task")) };
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
/// local queue (fork then join): then pop it, so no stale entry is left behind (the entries
/// above it go back in order); otherwise claim it where it is and let its entry go stale.
fn claim(m: &crate::worker::M, child: GreenThread) -> bool {
    if m.holds_p() && take_popped(m, m.p(), Wanted { entry: child.g, generation: child.generation })
    {
        return true;
    }
    child.g.claim_inline(child.generation)
}

/// A child's queue entry that a join looks for: a G (claimed once popped) or a lazily spawned
/// task (owned once popped).
#[derive(Clone, Copy)]
struct Wanted {
    entry: GRef,
    /// The G's generation (unused for a task).
    generation: u32,
}

impl Wanted {
    /// Claims the child whose entry the caller just popped: its only entry (a FRESH G or a
    /// task has one), so no stale entry remains.
    fn claim_popped(self) -> bool {
        !self.entry.is_record() || self.entry.claim_popped_inline(self.generation)
    }
}

/// Takes the wanted entry out of runnext (where a child spawned into an empty runnext, or the
/// last G spawned, waits), from below the top of the local queue, or from the global queue's
/// head (one worker), and claims it.
fn take_popped(m: &crate::worker::M, p: &crate::p::P, child: Wanted) -> bool {
    if p.runnext.load(Ordering::Relaxed) == child.entry.as_ptr()
        && let Some(next) = p.take_runnext()
    {
        if next == child.entry && child.claim_popped() {
            return true;
        }
        // Taken meanwhile by a thief and replaced, or not claimable: put it back.
        if let Some(old) = p.put_runnext(next) {
            m.push_local(old);
        }
    }
    take_back_from_below(m, p, child)
        || take_from_global_head(m, child)
        || take_from_local_top(m, p, child)
}

/// Takes a lazily spawned `child` from the top of this worker's local queue (where the oldest
/// entry waits: a parent joining its children in spawn order wants that one), by stealing
/// from itself. Any other entry taken goes back, at the bottom. A G has no need of this: it
/// is claimed where it is; a task can only be taken by dequeuing it. Out of line, with the
/// same back-off as `take_back_from_below`.
#[inline(never)]
fn take_from_local_top(m: &crate::worker::M, p: &crate::p::P, child: Wanted) -> bool {
    if child.entry.is_record() || m.local_top.skip() {
        return false;
    }
    let claimed = match p.stealer.steal() {
        purloin_deque::Steal::Success(entry) if entry == child.entry => true,
        purloin_deque::Steal::Success(entry) => {
            // The queue may have looked empty meanwhile (to a worker about to park).
            m.push_local_and_notify(entry);
            false
        }
        _ => false,
    };
    m.local_top.record(claimed);
    claimed
}

/// Takes `child` from the head of the global queue, if it is there. Children that overflowed
/// from a local queue wait in the global queue in spawn order, and a parent usually joins them
/// in that order, so a child nobody started is often the head: taken from there, it leaves no
/// stale entry (claimed in place, it would leave one, which some worker must later pop and
/// drop, after everything queued before it: with one worker, the next root waited ~6 ms
/// behind the 100,000 stale entries of a spawn-and-join burst). Stale entries found at the
/// head (siblings claimed in place earlier) are dropped on the way, as a worker would drop
/// them; runnable entries that are not the child go to this worker's local queue. At most
/// [`GLOBAL_HEAD_LOOKS`] entries per join; out of line, with the same back-off as
/// `take_back_from_below`.
///
/// Only with one worker: then nobody else takes from the global queue while the joiner runs.
/// With two, the joiner's steals competed with the other worker's batch pulls at the head and
/// moved runnable siblings into the joiner's queue: spawn_join_100k went from 6.9 to 23 ms and
/// skynet from 58 to 86 ms (A/B). With one, the 100k burst went from 16.7 to 12.2 ms.
#[inline(never)]
fn take_from_global_head(m: &crate::worker::M, child: Wanted) -> bool {
    if m.shared.nprocs.load(Ordering::Relaxed) != 1 || m.global_head.skip() {
        return false;
    }
    let mut claimed = false;
    for _ in 0..GLOBAL_HEAD_LOOKS {
        let purloin_deque::Steal::Success(entry) = m.shared.injector.steal() else { break };
        // The entry was the child's only one (a FRESH G has one): once popped, the inline
        // run takes over its reference.
        if entry == child.entry && child.claim_popped() {
            claimed = true;
            break;
        }
        if entry.is_record() && !entry.is_runnable() {
            // Stale: its G left the RUNNABLE state this entry was queued for (any later
            // RUNNABLE state comes with an entry of its own). Drop the entry's reference.
            if entry.drop_ref() {
                m.recycle(entry);
            }
            continue;
        }
        // Runnable work that is not our child (a sibling nobody joined yet): now local. The
        // global queue may have looked non-empty to a worker about to park, which then finds
        // it here: notify as any push to an empty queue does. Then look on: overflows keep
        // spawn order (`push_or_overflow`), so the child is often right behind it.
        m.push_local_and_notify(entry);
    }
    m.global_head.record(claimed);
    claimed
}

/// Entries a join takes from the global queue's head looking for its child (stale ones are
/// dropped on the way).
const GLOBAL_HEAD_LOOKS: usize = 4;

/// A look that missed makes the next 1, 2, 4, ... up to 64 looks skip; a hit resets it. For
/// joiners whose children are not where a look finds them (a look costs a pop and a push).
pub(crate) struct LookBackoff {
    misses: core::cell::Cell<u32>,
    skip: core::cell::Cell<u32>,
}

impl LookBackoff {
    pub(crate) const fn new() -> LookBackoff {
        LookBackoff { misses: core::cell::Cell::new(0), skip: core::cell::Cell::new(0) }
    }

    /// Whether to skip this look (counts it down).
    fn skip(&self) -> bool {
        let skip = self.skip.get();
        if skip > 0 {
            self.skip.set(skip - 1);
        }
        skip > 0
    }

    fn record(&self, hit: bool) {
        let misses = if hit { 0 } else { (self.misses.get() + 1).min(TAKE_BACK_MAX_SKIP_LOG) };
        self.misses.set(misses);
        self.skip.set((1 << misses) >> 1);
    }
}

/// Looks for `child`'s entry among the top [`TAKE_BACK_DEPTH`] entries of the local queue of
/// `p` (held by `m`) and claims it if found; the entries above it go back in their order.
/// Out of line: a child joined right after its spawn is found in runnext, before this.
#[inline(never)]
fn take_back_from_below(m: &crate::worker::M, p: &crate::p::P, child: Wanted) -> bool {
    // A joiner whose children are not there (a joiner of 100,000 children: they overflowed
    // to the global queue long ago) would pop and push back 16 entries per join for nothing:
    // after a miss, skip the next 1, 2, 4, ... up to 64 looks; a hit resets it.
    if m.take_back.skip() {
        return false;
    }
    // SAFETY: this worker holds its P (holds_p) and we run on it.
    let local = unsafe { p.local() };
    // Children joined in spawn order sit below their younger siblings: look a few entries
    // deep, then put the others back in their order.
    let mut above = [None::<GRef>; TAKE_BACK_DEPTH];
    let mut n = 0;
    let mut claimed = false;
    while n < TAKE_BACK_DEPTH
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
    m.take_back.record(claimed);
    for (i, entry) in above[..n].iter().rev().flatten().enumerate() {
        if i == 0 {
            // The queue may have looked empty meanwhile (to a worker about to park).
            m.push_local_and_notify(*entry);
        } else {
            m.push_local(*entry);
        }
    }
    claimed
}

/// How deep `claim` looks into its own local queue for the child being joined. Without it, a
/// parent that joins its children in spawn order (the usual `for h in handles { h.join() }`)
/// finds the youngest on top and claims the others where they are: each leaves a stale entry
/// (a reference on a finished record) for some worker to pop and drop later, on another core
/// once it has been stolen or overflowed to the global queue. In skynet, 8 of every 10
/// children were claimed that way, and the other worker spent its time stealing stale entries.
const TAKE_BACK_DEPTH: usize = 16;
/// After `k` take-back misses in a row, the next `2^(k-1)` joins (at most 64) do not look.
const TAKE_BACK_MAX_SKIP_LOG: u32 = 7;

/// Whether the running host's remaining stack can hold a child that asked for `want` bytes:
/// at least three quarters of it must remain below the current stack pointer.
fn stack_room(host: GRef, want: usize) -> bool {
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
