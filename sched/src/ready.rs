//! Making green threads runnable: every spawn path, every wake-up, and the places an entry
//! is queued on the running worker's P ([`HeldP::enqueue`]; [`HeldP::push_spawn`] for a lazy
//! spawn and [`HeldP::push_fork`] for a fork's job).
//!
//! # Where a runnable entry goes
//!
//! ```text
//!  pinned G                          → its P's pinned queue, and that P's worker is woken
//!  from a worker holding its P:
//!    spawn from a green thread       → runnext, the displaced entry to the local queue
//!                                      (Go's newproc; Slot::Runnext)
//!    lazy spawn from a green thread  → runnext if empty, else the local queue
//!                                      (no read-modify-write; `HeldP::push_spawn`)
//!    wake-up by a running G or task  → runnext (they run as a unit; Slot::Runnext)
//!    a fork's job (`join`)           → the local queue, a wake-up hint (`HeldP::push_fork`)
//!    no-signal spawn                 → the local queue, no wake-up until a flush
//!    anything else                   → the local queue (Slot::Local)
//!  from anywhere else                → the global queue (`Shared::push_global`; a no-signal
//!                                      spawn: `push_global_quiet`, no wake-up until a flush)
//! ```
//!
//! # The notify rule
//!
//! A push that makes work visible on a P that showed none (empty runnext and local queue) runs
//! the submit side of the idle protocol (`idle`): a StoreLoad fence, then a wake-up if nobody
//! searches. A push onto a P that already showed work needs none: when that work became
//! visible, a worker was woken, or one was searching (it takes the work or re-checks every
//! queue before it parks), or none was parked; and a searcher that finds work while others
//! remain wakes the next one (`found_work`). So every non-empty queue has someone coming.
//! A fork's job (`join`) is the exception: its joiner runs it if nobody else does, so its
//! wake-up is a hint without the fence (`idle`, I4). A hint that woke nobody may leave work
//! that nobody is coming for, so the P remembers it (`P::fork_unannounced`) and the next other
//! push onto it notifies with the fence even though work was visible.
//! While a worker queues a batch the poller readied, which it is about to run itself, it does
//! not notify per push (`M::poll_batch`; the batch notifies once).

use std::io;

use crate::GreenThread;
use crate::entry::Entry;
use crate::g::{GRef, NOT_PINNED, SpawnSite, Unparked, Work};
use crate::held::HeldP;
use crate::hook::{self, Event};
use crate::registry::registry;
use crate::shared::Shared;
use crate::stackless::Body;
use crate::stats::bump;
use crate::sync::{Arc, Ordering};
use crate::task::{OwnedTask, TaskRef};
use crate::worker::{M, current_worker};

/// Where [`HeldP::enqueue`] puts an entry on the held P.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// On top of the local queue (overflowing its older half to the global queue).
    Local,
    /// On top of the local queue, without the notify rule: for an entry put back where work
    /// is already visible or about to run here (a yielder with nothing else local, an entry
    /// displaced from runnext, entries a join looked past).
    LocalQuiet,
    /// In runnext; the entry it displaces goes to the local queue (Go's `runqput(pp, gp,
    /// next=true)`). A thief takes runnext only after a grace period, so a child that is
    /// joined soon is usually still here for its joiner to run inline.
    Runnext,
}

/// Which submit-side notification a push needs.
enum Notify {
    No,
    /// The push was a plain store or a deque push: `notify_work_from` (its fence F1).
    AfterStore,
    /// The push was runnext's SeqCst swap, which is F1 itself (`idle`, I3).
    AfterSeqCstSwap,
}

impl HeldP<'_> {
    /// Queues a runnable `entry` on the held P at `slot` and applies the notify rule (module
    /// docs).
    pub(crate) fn enqueue(self, entry: Entry, slot: Slot) {
        let p = self.p();
        let notify = match slot {
            Slot::LocalQuiet => {
                self.push_local(entry);
                Notify::No
            }
            Slot::Local => {
                let was_empty =
                    p.runnext.load(Ordering::Relaxed).is_null() && self.local().is_empty();
                self.push_local(entry);
                if was_empty { Notify::AfterStore } else { self.onto_visible_work() }
            }
            Slot::Runnext => {
                let local_empty = self.local().is_empty();
                match p.put_runnext(entry) {
                    Some(old) => {
                        self.push_local(old);
                        self.onto_visible_work()
                    }
                    None if local_empty => Notify::AfterSeqCstSwap,
                    None => self.onto_visible_work(),
                }
            }
        };
        self.apply(notify);
    }

    /// Queues a lazily spawned task in runnext if it is empty, else on top of the local queue,
    /// without a read-modify-write (in a burst of spawns runnext is always full, and a swap is
    /// a locked instruction that waits for the spawn's stores to the cell to drain); then the
    /// notify rule, as [`HeldP::enqueue`]. The push is inlined into the spawn, the wake-up
    /// (needed only when the P showed no work) stays out of line.
    #[inline]
    pub(crate) fn push_spawn(self, entry: Entry) {
        let notify = self.push_runnext_if_empty(entry);
        if !matches!(notify, Notify::No) {
            self.apply_cold(notify);
        }
    }

    #[inline(always)]
    fn push_runnext_if_empty(self, entry: Entry) -> Notify {
        let p = self.p();
        if !p.runnext.load(Ordering::Relaxed).is_null() {
            self.push_local(entry);
            self.onto_visible_work()
        } else {
            let local_empty = self.local().is_empty();
            // A Release store (R1): only the holder fills runnext and thieves only empty it,
            // so it is still empty here.
            p.fill_empty_runnext(entry);
            if local_empty { Notify::AfterStore } else { self.onto_visible_work() }
        }
    }

    #[inline(never)]
    fn apply_cold(self, notify: Notify) {
        self.apply(notify);
    }

    /// The submit side of the idle protocol after a push, as the push requires.
    #[inline(always)]
    fn apply(self, notify: Notify) {
        let p = self.p();
        let shared = &*self.m().shared;
        match notify {
            Notify::No => {}
            _ if self.m().poll_batch.get() => {}
            Notify::AfterStore => {
                self.announced();
                shared.notify_work_from(p);
            }
            Notify::AfterSeqCstSwap => {
                self.announced();
                shared.notify_work_after_runnext_push(p);
            }
        }
    }

    /// Queues a fork's job (`join`) on top of the local queue. Its joiner runs it if nobody
    /// else does, so the notify rule's wake-up is a hint without the fence (`idle`, I4), sent
    /// if the P showed no work. Inlined into `join`, which
    /// pays it on every fork; the hint itself stays out of line (it is needed only when the
    /// queue was empty: the first fork of a join tree, or after thieves emptied it).
    ///
    /// The local queue is checked first, and runnext only if the queue was empty: in a
    /// fork-join tree the queue holds the jobs of the joins above, so it is empty only on the
    /// tree's last spine. Runnext is read after the push, which cannot hide work: only the
    /// holder (this worker) fills runnext, so one that was empty before the push still is (a
    /// thief emptying it meanwhile only makes a hint more likely).
    #[inline]
    pub(crate) fn push_fork(self, entry: Entry) {
        let queue_was_empty = self.local().is_empty();
        self.push_local(entry);
        if queue_was_empty && self.p().runnext.load(Ordering::Relaxed).is_null() {
            self.fork_hint();
        }
    }

    /// The wake-up hint of a fork onto a P that showed no work (`idle`, I4); a hint that woke
    /// nobody is remembered (`P::fork_unannounced`, module docs).
    #[inline(never)]
    fn fork_hint(self) {
        if self.m().poll_batch.get() {
            return;
        }
        let p = self.p();
        if !self.m().shared.notify_fork_from(p) {
            p.fork_unannounced.store(true, Ordering::Relaxed);
        }
    }

    /// The notify a push onto a P that already showed work needs: none, unless a fork's hint
    /// left work that nobody may be coming for (`P::fork_unannounced`).
    #[inline]
    fn onto_visible_work(self) -> Notify {
        if self.p().fork_unannounced.load(Ordering::Relaxed) {
            Notify::AfterStore
        } else {
            Notify::No
        }
    }

    /// A push with F1 covers every entry visible before it: a fork's missed hint is made up.
    #[inline]
    fn announced(self) {
        let p = self.p();
        if p.fork_unannounced.load(Ordering::Relaxed) {
            p.fork_unannounced.store(false, Ordering::Relaxed);
        }
    }

    /// Queues a no-signal spawn on top of the local queue without the notify rule: its wake-up
    /// is left to a flush (`Shared::flush`). The P is marked as holding work that nobody may
    /// be coming for (`P::fork_unannounced`, as a fork's hint that woke nobody), so the next
    /// push that notifies does so with the fence even though work was visible.
    pub(crate) fn push_nosignal(self, entry: Entry) {
        self.push_local(entry);
        // N1: read by the next notifying push's `onto_visible_work`, which then fences.
        self.p().fork_unannounced.store(true, Ordering::Relaxed);
    }

    /// Pushes on the local queue (overflowing its older half to the global queue).
    #[inline]
    fn push_local(self, entry: Entry) {
        if let Err(entry) = self.local().push(entry) {
            self.overflow(entry);
        }
    }

    /// The local queue is full: `push_or_overflow` moves its older half to the global queue,
    /// on the worker's own stack (the global queue's epoch pin may collect garbage: see
    /// `switch::on_worker_stack`).
    #[cold]
    #[inline(never)]
    fn overflow(self, entry: Entry) {
        let m = self.m();
        crate::switch::on_worker_stack(m, || {
            self.local().push_or_overflow(entry, &m.shared.injector);
        });
    }
}

/// Queues a G that just became RUNNABLE (unpark, timer, cancel): on its pinned P, else on the
/// current worker's P (in runnext if `use_runnext` and a G or task readied it: they run as a
/// unit; else the local queue), else the global queue.
pub(crate) fn schedule(g: GRef, shared: &Shared, use_runnext: bool) {
    let here = current_worker();
    stamp_queued(g, here);
    let pin = g.pinned_to();
    if pin != NOT_PINNED {
        shared.push_pinned(pin, g);
        return;
    }
    if let Some(m) = here
        && core::ptr::eq(&*m.shared, shared)
        && let Some(h) = m.held()
    {
        let slot = if use_runnext && (m.current.get().is_some() || m.stepping.get()) {
            Slot::Runnext
        } else {
            Slot::Local
        };
        h.enqueue(g.into(), slot);
        return;
    }
    shared.push_global(g);
}

/// Stamps `g`, which a wake-up or spawn is queueing, with the coarse clock on worker `here`
/// (and samples its scheduling latency there: `M::sample_queued`). On a thread that is not a
/// worker every worker may be parked and the coarse clock standing still (`clock`): stamp it
/// with a fresh reading instead (such a wake-up wakes a worker anyway); that reading is
/// precise, and one of every `SCHED_LATENCY_PERIOD` such stamps, counted process-wide, is
/// marked as a sample.
fn stamp_queued(g: GRef, here: Option<&M>) {
    match here {
        Some(m) => {
            g.stamp();
            m.sample_queued(g);
        }
        None => {
            static OUTSIDE: crate::sync::DiagU32 = crate::sync::DiagU32::new(0);
            let nth = OUTSIDE.fetch_add(1, crate::sync::STAT);
            let sample = nth.is_multiple_of(crate::stats::SCHED_LATENCY_PERIOD);
            let tag = if sample { crate::clock::PRECISE } else { 0 };
            g.since.store(crate::clock::refresh() | tag, crate::sync::STAT);
        }
    }
}

/// Wakes a green thread (the body of `GreenThread::unpark`).
#[inline]
pub(crate) fn unpark(t: &GreenThread) -> bool {
    let mut t = *t;
    loop {
        match t.g.unpark(t.generation) {
            Unparked::Queue => {
                // SAFETY: we won PARKED => RUNNABLE, so the G is alive and so is its scheduler
                // (shutdown waits for every live G).
                let shared = unsafe { &*t.g.sched.with(|s| *s) };
                hook::emit(move || Event::Unpark { id: t.id(), by: running_id() });
                schedule(t.g, shared, true);
                return true;
            }
            Unparked::Noted => return true,
            Unparked::Stale => return false,
            Unparked::Forward => {
                let host = t.g.host.load(Ordering::Acquire);
                // SAFETY: host pointers always name live records.
                match unsafe { GRef::from_ptr(host) } {
                    Some(h) => t = GreenThread { g: h, generation: h.generation() },
                    None => return true,
                }
            }
        }
    }
}

/// Interrupts a green thread (the body of `GreenThread::interrupt`, or with `hold` of a
/// cancelled token's held interrupt) and wakes it as `unpark` does. Returns false if it has
/// ended.
pub(crate) fn interrupt(t: &GreenThread, hold: bool) -> bool {
    match t.g.interrupt(t.generation, hold) {
        Unparked::Queue => {
            // SAFETY: we won PARKED => RUNNABLE, so the G is alive and so is its scheduler
            // (shutdown waits for every live G).
            let shared = unsafe { &*t.g.sched.with(|s| *s) };
            let t = *t;
            hook::emit(move || Event::Unpark { id: t.id(), by: running_id() });
            schedule(t.g, shared, true);
            true
        }
        Unparked::Noted => true,
        Unparked::Stale => false,
        Unparked::Forward => {
            // A joiner runs it inline: the flag is on the child's record, where its waits
            // look; wake the joiner, whose park the child's wait is in.
            let host = t.g.host.load(Ordering::Acquire);
            // SAFETY: host pointers always name live records.
            if let Some(h) = unsafe { GRef::from_ptr(host) } {
                unpark(&GreenThread { g: h, generation: h.generation() });
            }
            true
        }
    }
}

/// The running green thread's id, for an event's `by` (the record running: a host, while it
/// runs a child inline).
fn running_id() -> Option<crate::GreenId> {
    let g = current_worker()?.current.get()?;
    Some(crate::GreenId(g.id_with(g.generation())))
}

/// A FREE record for an identity made on demand (`lazy`): this worker's cache, else the
/// global list.
pub(crate) fn alloc_record() -> GRef {
    match current_worker() {
        Some(m) => m.alloc_g(),
        None => registry().alloc(),
    }
}

/// Spawns `task` lazily if it may be (see `lazy`): from a green thread of `shared` on a worker
/// holding its P, with default options; `at` is the spawn's place in the source. Gives the
/// task back otherwise.
pub(crate) fn spawn_lazy(
    shared: &Arc<Shared>,
    opts: &crate::SpawnOptions,
    task: OwnedTask,
    at: SpawnSite,
) -> Result<(), OwnedTask> {
    spawn_lazy_from(current_worker(), shared, opts, task, at)
}

/// [`spawn_lazy`] from `here`, the calling thread's worker as its caller just looked it up
/// (`None`: not a worker), for a caller that needed the lookup anyway.
#[inline(always)]
pub(crate) fn spawn_lazy_from(
    here: Option<&crate::worker::M>,
    shared: &Arc<Shared>,
    opts: &crate::SpawnOptions,
    task: OwnedTask,
    at: SpawnSite,
) -> Result<(), OwnedTask> {
    let default_opts = !opts.pinned
        && !opts.urgent
        && !opts.nosignal
        && opts.stack_size.is_none()
        && opts.name.is_none();
    // A hook that wants every spawn's id (`hook::set_eager_spawn`): the flag is read only
    // when a hook is installed.
    if hook::installed() && hook::eager_spawn() {
        return Err(task);
    }
    let Some((h, me)) = here
        .filter(|m| default_opts && Arc::ptr_eq(&m.shared, shared))
        .and_then(|m| Some((m.held()?, m.current.get()?)))
    else {
        return Err(task);
    };
    // A labelled spawner's child needs a record for the labels it inherits.
    if me.has_labels() {
        return Err(task);
    }
    let p = h.p();
    shared.note_started(Some(p));
    bump(&p.stats.spawned);
    hook::emit(move || Event::Spawn { id: None, by: running_id() });
    let cell = task.into_cell();
    // SAFETY: the cell is ours until the push below publishes it; its head is at offset 0.
    let head = unsafe { &*cell.cast::<crate::task::CellHead>().as_ptr() };
    // SAFETY: the entry is not queued yet (above).
    unsafe { head.identity.set_spawner(me.id_with(me.generation()), at) };
    h.push_spawn(Entry::task(cell));
    Ok(())
}

/// Spawns a G on `shared` (the body of the public spawn functions); `at` is the spawn's place
/// in the source.
pub(crate) fn spawn_g(
    shared: &Arc<Shared>,
    body: Body,
    opts: &crate::SpawnOptions,
    at: SpawnSite,
) -> io::Result<GreenThread> {
    let here = current_worker().filter(|m| Arc::ptr_eq(&m.shared, shared));
    if !shared.is_running() && here.is_none() {
        return Err(io::Error::other(
            "cannot spawn: the runtime is shutting down (spawn before dropping the runtime, \
             or from one of its green threads)",
        ));
    }
    let held = here.and_then(|m| m.held());
    if opts.pinned && held.is_some_and(|h| h.m().p.get() >= shared.nprocs.load(Ordering::Acquire)) {
        return Err(io::Error::other(
            "cannot spawn a pinned green thread on a worker that is being removed \
             (Scheduler::set_workers is shrinking the runtime)",
        ));
    }
    if opts.pinned && held.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a pinned green thread can only be spawned from a green thread of the same \
             runtime (it is pinned to the spawner's worker)",
        ));
    }
    let stack = match opts.stack_size {
        Some(size) if !cfg!(loom) => Some(purloin_stack::lease(size)?),
        _ => None,
    };
    let g = match here {
        Some(m) => m.alloc_g(),
        None => registry().alloc(),
    };
    let size = opts.stack_size.unwrap_or(shared.config.stack_size);
    // SAFETY: the record is FREE and not yet published: we own it. Its optional fields were
    // emptied by `recycle` (or never set), so plain writes (no drop of the old value, and no
    // load of a cold cache line) are right.
    unsafe {
        match body {
            Body::Green(task) => g.work.with_mut(|w| w.write(Work::Task(TaskRef::Owned(task)))),
            Body::Step(task) => g.work.with_mut(|w| w.write(Work::Step(task))),
        }
        g.name.with_mut(|n| n.write(opts.name.clone()));
        g.stack_size.with_mut(|s| s.write(size));
        g.stack.with_mut(|s| s.write(stack));
        g.sched.with_mut(|s| s.write(Arc::as_ptr(shared)));
    }
    let me = here.and_then(|m| m.current.get());
    match me {
        // Inherited: the spawner owns its own record, and the child is not published yet.
        Some(me) if me.has_labels() => drop(g.replace_own_labels(me.own_labels())),
        Some(_) => {}
        // A plain thread's labels (a worker between green threads has none).
        None if here.is_none() => drop(g.replace_own_labels(crate::labels::plain_labels())),
        None => {}
    }
    let spawner = me.map_or(0, |me| me.id_with(me.generation()));
    let generation = g.prepare_spawn_at(spawner, Some(at));
    match here {
        Some(m) => m.sample_queued(g),
        None => stamp_queued(g, None),
    }
    shared.note_started(held.map(|h| h.p()));
    let handle = GreenThread { g, generation };
    hook::emit(move || Event::Spawn { id: Some(handle.id()), by: running_id() });
    if opts.pinned {
        let h = held.expect("checked above");
        let pi = h.m().p.get();
        g.set_pinned_to(pi);
        h.p().pinned.fetch_add(1, Ordering::Relaxed);
        shared.push_pinned(pi, g);
        return Ok(handle);
    }
    match held {
        Some(h) if opts.nosignal => {
            bump(&h.p().stats.spawned);
            h.push_nosignal(g.into());
            // N2 (see `Shared::push_global_quiet`).
            shared.unsignalled.fetch_add(1, Ordering::Release);
        }
        None if opts.nosignal => shared.push_global_quiet(g),
        Some(h) => {
            bump(&h.p().stats.spawned);
            if h.m().current.get().is_some() {
                h.enqueue(g.into(), Slot::Runnext);
                if opts.urgent {
                    crate::yield_now();
                }
            } else {
                h.enqueue(g.into(), Slot::Local);
            }
        }
        None => shared.push_global(g),
    }
    Ok(handle)
}
