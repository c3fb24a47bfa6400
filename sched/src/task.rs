//! What a green thread runs, and the one-shot packet its joiner waits on.
//!
//! A spawn allocates one [`TaskCell`]: the entry closure and the packet that will hold its
//! result. Two parties own it: the G record (through an [`OwnedTask`], which runs the closure
//! and completes the packet) and the [`JoinHandle`](crate::JoinHandle) (through a
//! [`PacketRef`], which waits and takes the result). There is no reference count: the packet's
//! state word also says who frees the cell, so a spawn followed by a join costs one allocation
//! (from the size-class cache in [`cells`](crate::cells)) and, when the joiner runs the child
//! itself, no atomic read-modify-write at all.
//!
//! ```text
//!   EMPTY ──(joiner registers its waiter)──▶ WAITING ──(completion)──▶ DONE
//!     └──────────────────(completion)──────────────────────────────────▶ DONE
//!   any state ──(handle dropped: | DETACHED)──▶ ... | DETACHED
//! ```
//!
//! Who frees the cell: the handle, once it has seen `DONE` (the completer never touches the
//! cell after publishing `DONE`); the completer, if it finds `DETACHED` (the handle is gone).
//!
//! A task nobody joins (a scope's handle-less spawn) needs no packet: a [`DetachedCell`] holds
//! the head and the closure only, and its G side, its one owner, frees it after the run.
//!
//! The cell starts with a type-independent [`CellHead`]: the state word, the vtable that runs,
//! fails and frees it, and the identity of a lazily spawned green thread (see `lazy`). So a
//! bare pointer to the cell is a complete queue entry: the G side of a lazy spawn.
//!
//! # Memory ordering
//!
//! The guarantees: a joiner that observes `DONE` sees the result; a waiter registered by the
//! joiner is seen by the completer; whichever party frees the cell sees every write the other
//! made to it.
//!
//! - (T1) The completer writes the result, then publishes `DONE` with a CAS (Release half);
//!   the joiner's Acquire load of `DONE` pairs with it. After T1 the completer does not touch
//!   the cell.
//! - (T2) The joiner writes its waiter, then CASes `EMPTY => WAITING` (Release); the
//!   completer's Acquire load (or failed CAS) that returns `WAITING` pairs with it before it
//!   takes the waiter.
//! - (T3) A dropped handle sets `DETACHED` with an AcqRel `fetch_or`: if it returns `DONE`
//!   (Acquire pairs with T1) the handle frees the cell; otherwise the completer's Acquire load
//!   or failed CAS that sees `DETACHED` pairs with its Release, and the completer frees.

use core::any::Any;
use core::ptr::NonNull;
use std::panic::{self, AssertUnwindSafe};
use std::thread::Result as ThreadResult;

use crate::sync::{AtomicU32, Ordering, UnsafeCell};

const EMPTY: u32 = 0;
const WAITING: u32 = 1;
const DONE: u32 = 2;
const PHASE: u32 = 0b11;
/// The handle was dropped: the completer frees the cell.
const DETACHED: u32 = 0b100;
/// The cell is a [`DetachedCell`] (set at allocation, never changed; a [`TaskCell`] never has
/// it).
const DETACHED_CELL: u32 = 0b1000;
/// The cell is a [`TaskCell`] in a group (set at allocation, never changed): once its handle
/// is dropped (`DETACHED`), a waiter for the group may run it inline as a member
/// ([`detached_key`]).
const GROUPED: u32 = 0b1_0000;

/// What a G record holds to run: a spawned task it co-owns with a join handle, or a job
/// borrowed from its joiner's stack (fork-join; the joiner does not return before the job is
/// done).
pub(crate) enum TaskRef {
    Owned(OwnedTask),
    Borrowed(NonNull<dyn Runnable>),
}

// SAFETY: a `Borrowed` job is `Sync` (Runnable: Sync) and outlives the G (the joiner waits for
// it); an `Owned` task is Send (see there).
unsafe impl Send for TaskRef {}

impl TaskRef {
    /// Runs the task (catching panics) and completes its packet.
    pub(crate) fn run(self) {
        match self {
            TaskRef::Owned(t) => t.run(false),
            // SAFETY: the joiner keeps the job alive until it is done (see `fork`).
            TaskRef::Borrowed(t) => unsafe { t.as_ref() }.run(),
        }
    }

    /// Runs the task on its joiner, the only party that can see its packet (a join that took
    /// back a child nobody started, with no waiter registered): no atomic read-modify-write.
    pub(crate) fn run_by_joiner(self) {
        match self {
            TaskRef::Owned(t) => t.run(true),
            // SAFETY: as in `run`.
            TaskRef::Borrowed(t) => unsafe { t.as_ref() }.run(),
        }
    }

    /// Drops the entry without running it and completes the packet with `Err(payload)`.
    pub(crate) fn fail(self, payload: Box<dyn Any + Send>) {
        match self {
            TaskRef::Owned(t) => t.fail(payload),
            // SAFETY: as in `run`.
            TaskRef::Borrowed(t) => unsafe { t.as_ref() }.fail(payload),
        }
    }
}

/// Type-erased "run me" for a job borrowed from a joiner's stack (fork-join).
pub(crate) trait Runnable: Send + Sync {
    /// Runs the entry (catching panics) and completes the job. Called at most once.
    fn run(&self);
    /// Drops the entry without running it and completes the job with `Err(payload)` (the G
    /// could not start: no stack, or the runtime shut down first).
    fn fail(&self, payload: Box<dyn Any + Send>);
}

/// The payload a joiner receives (as `Err`) when its green thread was never started because
/// the runtime shut down.
#[derive(Debug, Clone, Copy)]
pub struct Cancelled;

impl core::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the green thread was cancelled before it ran: its runtime shut down")
    }
}

/// Who waits for a packet.
pub(crate) enum Waiter {
    /// A green thread, woken with the scheduler's unpark.
    Green(crate::GreenThread),
    /// An OS thread, woken with its own unpark.
    Thread(crate::sync::thread::Thread),
    /// An async task awaiting the handle (see `join_future`).
    Waker(core::task::Waker),
}

impl Waiter {
    /// The calling context as a waiter: the current green thread, else the OS thread.
    pub(crate) fn current() -> Waiter {
        match crate::current() {
            Some(g) => Waiter::Green(g),
            None => Waiter::Thread(crate::sync::thread::current()),
        }
    }

    pub(crate) fn wake(self) {
        match self {
            Waiter::Green(g) => {
                g.unpark();
            }
            Waiter::Thread(t) => t.unpark(),
            Waiter::Waker(w) => w.wake(),
        }
    }
}

/// The type-independent start of every task cell (`repr(C)`, at offset 0): a pointer to the
/// cell is enough to run it (a lazy spawn's queue entry is just that pointer) and to reach a
/// lazily spawned green thread's identity.
#[repr(C)]
pub(crate) struct CellHead {
    state: AtomicU32,
    vtable: &'static TaskVTable,
    pub(crate) identity: crate::lazy::Identity,
}

/// The result slot a joiner waits on: the first field of every [`TaskCell`].
#[repr(C)]
pub(crate) struct Packet<T> {
    head: CellHead,
    /// The group of a `GROUPED` cell (0 otherwise): at the offset of [`DetachedCell::key`],
    /// right after the head.
    key: usize,
    waiter: UnsafeCell<Option<Waiter>>,
    result: UnsafeCell<Option<ThreadResult<T>>>,
}

/// The closure and the packet in one allocation. `repr(C)`: the packet is at offset 0, so a
/// pointer to the cell is a pointer to its packet.
#[repr(C)]
pub(crate) struct TaskCell<F, T> {
    packet: Packet<T>,
    f: UnsafeCell<Option<F>>,
}

/// Run, fail and free for one closure type.
pub(crate) struct TaskVTable {
    /// # Safety: see [`OwnedTask::run`].
    run: unsafe fn(NonNull<()>, bool),
    /// # Safety: see [`OwnedTask::fail`].
    fail: unsafe fn(NonNull<()>, Box<dyn Any + Send>),
    /// Frees the whole cell (knows the closure type, which the handle does not).
    /// # Safety: see [`TaskCell::free_raw`].
    free: unsafe fn(NonNull<()>),
}

impl<F, T> TaskCell<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    const VTABLE: TaskVTable =
        TaskVTable { run: Self::run_raw, fail: Self::fail_raw, free: Self::free_raw };

    /// Allocates a cell for `f`; returns its two owners.
    pub(crate) fn allocate(f: F) -> (OwnedTask, PacketRef<T>) {
        Self::allocate_in(None, f)
    }

    /// [`TaskCell::allocate`] in group `key`, if any (see `GROUPED`).
    pub(crate) fn allocate_in(key: Option<usize>, f: F) -> (OwnedTask, PacketRef<T>) {
        let cell = crate::cells::alloc(core::alloc::Layout::new::<Self>()).cast::<Self>();
        // SAFETY: fresh memory with the layout of `Self`.
        unsafe {
            cell.as_ptr().write(TaskCell {
                packet: Packet {
                    head: CellHead {
                        state: AtomicU32::new(if key.is_some() { GROUPED } else { EMPTY }),
                        vtable: &Self::VTABLE,
                        identity: crate::lazy::Identity::new(),
                    },
                    key: key.unwrap_or(0),
                    waiter: UnsafeCell::new(None),
                    result: UnsafeCell::new(None),
                },
                f: UnsafeCell::new(Some(f)),
            })
        };
        (OwnedTask { cell: cell.cast(), vtable: &Self::VTABLE }, PacketRef { packet: cell.cast() })
    }

    /// # Safety
    /// `cell` is a live `TaskCell<F, T>` whose G side the caller owns (see `OwnedTask::run`).
    unsafe fn run_raw(cell: NonNull<()>, by_joiner: bool) {
        let cell = cell.cast::<TaskCell<F, T>>();
        // SAFETY: the G side owns `f` and takes it once; the cell is live (we have not
        // completed it yet, so the handle has not freed it).
        let f = unsafe { (*cell.as_ptr()).f.with_mut(|f| (*f).take()) };
        let Some(f) = f else { return };
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        // SAFETY: still not completed: live; the caller's `by_joiner` promise is passed on.
        unsafe { complete(cell.cast::<Packet<T>>(), result, by_joiner) };
    }

    /// # Safety
    /// As for `run_raw`.
    unsafe fn fail_raw(cell: NonNull<()>, payload: Box<dyn Any + Send>) {
        let cell = cell.cast::<TaskCell<F, T>>();
        // SAFETY: as in `run_raw`.
        let f = unsafe { (*cell.as_ptr()).f.with_mut(|f| (*f).take()) };
        drop(f);
        // SAFETY: as in `run_raw`; not by the joiner.
        unsafe { complete(cell.cast::<Packet<T>>(), Err(payload), false) };
    }

    /// # Safety
    /// `cell` is a live `TaskCell<F, T>` allocated by `allocate`, and the caller is the last
    /// party that may touch it.
    unsafe fn free_raw(cell: NonNull<()>) {
        let cell = cell.cast::<Self>();
        // SAFETY: written in `allocate` (packet at offset 0) with `cells::alloc` of this
        // layout; the caller is its last user, so it is dropped and freed once.
        unsafe {
            core::ptr::drop_in_place(cell.as_ptr());
            crate::cells::free(cell.cast(), core::alloc::Layout::new::<Self>());
        }
    }
}

/// A task nobody joins: the cell's head and the closure, with no packet. Its G side is its only
/// owner, so running or failing it frees the cell with no atomic read-modify-write (a
/// [`TaskCell`] whose handle was dropped costs the handle's detaching `fetch_or` and the
/// completer's CAS). What the closure returns and a panic's payload are dropped: a caller that
/// needs to learn how the closure ended does it inside the closure (the facade's scopes count
/// their green threads there).
///
/// `key` names a group of such tasks, chosen by the spawner: a waiter for the group may run
/// members it finds in its own queues inline ([`detached_key`], `help`).
#[repr(C)]
pub(crate) struct DetachedCell<F> {
    head: CellHead,
    key: usize,
    f: UnsafeCell<Option<F>>,
}

/// The group key of the task cell `cell` if it is a [`DetachedCell`], or a `GROUPED`
/// [`TaskCell`] whose handle was dropped: a task nobody joins, which its G side owns alone
/// (the handle that could bind its identity or wait for it is gone), so a waiter for the
/// group may run it inline and free it as it frees a detached cell ([`free_detached`]).
///
/// # Safety
/// The caller owns `cell`'s G side (it dequeued its entry): the cell is live.
pub(crate) unsafe fn detached_key(cell: NonNull<()>) -> Option<usize> {
    let head = cell.cast::<CellHead>().as_ptr();
    // SAFETY: live (the caller's obligation); the head is at offset 0 of every cell. Acquire:
    // a `DETACHED` seen here pairs with the handle's Release (T3), so whatever the handle did
    // before it let go (a binding of the identity) is seen. DETACHED_CELL, GROUPED and `key`
    // were written at allocation, before the spawn published the entry that the caller
    // dequeued (the queue's Release/Acquire pair).
    let state = unsafe { (*head).state.load(Ordering::Acquire) };
    if state & DETACHED_CELL == 0 && state & (GROUPED | DETACHED) != GROUPED | DETACHED {
        return None;
    }
    // SAFETY: a DetachedCell and a TaskCell's packet are `repr(C)` with the key right after
    // the head.
    Some(unsafe { (*cell.cast::<DetachedCell<()>>().as_ptr()).key })
}

/// Frees a detached cell that its G side ran inline ([`OwnedTask::run_by_joiner`] leaves it).
///
/// # Safety
/// `cell` is a [`DetachedCell`] whose G side the caller consumed with `run_by_joiner`, and the
/// caller no longer uses it.
pub(crate) unsafe fn free_detached(cell: NonNull<()>) {
    // SAFETY: live until now (the caller's obligation); the vtable was written at allocation.
    unsafe { ((*cell.cast::<CellHead>().as_ptr()).vtable.free)(cell) };
}

impl<F> DetachedCell<F>
where
    F: FnOnce() + Send,
{
    const VTABLE: TaskVTable =
        TaskVTable { run: Self::run_raw, fail: Self::fail_raw, free: Self::free_raw };

    /// Allocates a cell for `f` in group `key`; returns its one owner.
    pub(crate) fn allocate(key: usize, f: F) -> OwnedTask {
        let cell = crate::cells::alloc(core::alloc::Layout::new::<Self>()).cast::<Self>();
        // SAFETY: fresh memory with the layout of `Self`.
        unsafe {
            cell.as_ptr().write(DetachedCell {
                head: CellHead {
                    state: AtomicU32::new(DETACHED_CELL),
                    vtable: &Self::VTABLE,
                    identity: crate::lazy::Identity::new(),
                },
                key,
                f: UnsafeCell::new(Some(f)),
            })
        };
        OwnedTask { cell: cell.cast(), vtable: &Self::VTABLE }
    }

    /// Takes the closure out (once).
    ///
    /// # Safety
    /// `cell` is a live `DetachedCell<F>` whose G side the caller owns and consumes.
    unsafe fn take(cell: NonNull<()>) -> Option<F> {
        // SAFETY: the G side owns `f` and takes it once; the caller is the cell's only user.
        unsafe { (*cell.cast::<Self>().as_ptr()).f.with_mut(|f| (*f).take()) }
    }

    /// Runs the closure (a panic is caught and its payload dropped: the panic hook has
    /// reported it), then frees the cell, unless `inline`: a waiter running it inline
    /// ([`help`](crate::help)) still reads the cell's identity afterwards and frees it itself
    /// ([`free_detached`]). The cell stays while the closure runs: `current()` inside an inline
    /// run makes its identity in the cell's head.
    ///
    /// # Safety
    /// As for [`DetachedCell::take`].
    unsafe fn run_raw(cell: NonNull<()>, inline: bool) {
        // SAFETY: the caller's obligation.
        if let Some(f) = unsafe { Self::take(cell) } {
            drop(panic::catch_unwind(AssertUnwindSafe(f)));
        }
        if !inline {
            // SAFETY: the G side's owner (the caller) is the cell's last user; `f` is out.
            unsafe { Self::free_raw(cell) };
        }
    }

    /// # Safety
    /// As for [`DetachedCell::take`].
    unsafe fn fail_raw(cell: NonNull<()>, payload: Box<dyn Any + Send>) {
        drop(payload);
        // SAFETY: the caller's obligation.
        let f = unsafe { Self::take(cell) };
        // SAFETY: as in `run_raw`: the cell goes first, so a panicking drop of the closure
        // cannot leak it.
        unsafe { Self::free_raw(cell) };
        drop(f);
    }

    /// # Safety
    /// As for [`TaskCell::free_raw`], for a cell made by [`DetachedCell::allocate`].
    unsafe fn free_raw(cell: NonNull<()>) {
        let cell = cell.cast::<Self>();
        // SAFETY: written in `allocate` with `cells::alloc` of this layout; the caller is its
        // last user, so it is dropped and freed once.
        unsafe {
            core::ptr::drop_in_place(cell.as_ptr());
            crate::cells::free(cell.cast(), core::alloc::Layout::new::<Self>());
        }
    }
}

/// Completes the packet with `result` and gives up the G side's ownership (T1); frees the cell
/// if the handle is gone (T3).
///
/// # Safety
/// `packet` belongs to a live cell whose G side the caller owns and has not completed yet. With
/// `by_joiner`, the caller is also the joiner: the handle is alive (in `join`), has no waiter
/// registered, and nobody else can see the packet.
unsafe fn complete<T>(packet: NonNull<Packet<T>>, result: ThreadResult<T>, by_joiner: bool) {
    let p = packet.as_ptr();
    // SAFETY: only the completer writes `result`, before publishing DONE (T1).
    unsafe { (*p).result.with_mut(|r| *r = Some(result)) };
    if by_joiner {
        // SAFETY: live (caller). The joiner is this thread: program order suffices.
        unsafe { (*p).head.state.store(DONE, Ordering::Relaxed) };
        return;
    }
    // The cell stays live until we publish DONE (only then may the handle free it) or until we
    // free it ourselves, so every dereference of `p` below is of a live cell.
    // SAFETY: live (above). Acquire pairs with T2 (waiter) and T3 (detached).
    let mut cur = unsafe { (*p).head.state.load(Ordering::Acquire) };
    let mut waiter = None;
    loop {
        if cur & DETACHED != 0 {
            // The handle is gone (T3): nobody will read the result; we own the cell.
            drop(waiter);
            // SAFETY: the handle gave up the cell and we are its last user.
            unsafe { ((*p).head.vtable.free)(packet.cast()) };
            return;
        }
        if cur & PHASE == WAITING && waiter.is_none() {
            // SAFETY: WAITING was observed with Acquire (T2): the joiner wrote `waiter` and
            // does not touch it again; the handle cannot free the cell before DONE.
            waiter = unsafe { (*p).waiter.with_mut(|w| (*w).take()) };
        }
        // The allocation's kind bit stays (`GROUPED`: never changed).
        let done = (cur & GROUPED) | DONE;
        // SAFETY: live (above). AcqRel: Release publishes the result (T1); Acquire on failure
        // pairs with T2/T3.
        match unsafe {
            (*p).head.state.compare_exchange(cur, done, Ordering::AcqRel, Ordering::Acquire)
        } {
            Ok(_) => break,
            Err(actual) => cur = actual,
        }
    }
    // DONE is published: the cell may be gone already. Only our copy of the waiter is used.
    if let Some(w) = waiter {
        w.wake();
    }
}

/// The G side of a spawned task: runs or fails it exactly once.
pub(crate) struct OwnedTask {
    cell: NonNull<()>,
    vtable: &'static TaskVTable,
}

// SAFETY: the closure and result types are Send (checked in `TaskCell::allocate`'s bounds);
// the G side's accesses are ordered with the handle's by T1–T3.
unsafe impl Send for OwnedTask {}

impl OwnedTask {
    /// Gives up the G side as the bare cell pointer (a lazy spawn's queue entry); see
    /// [`OwnedTask::from_cell`].
    pub(crate) fn into_cell(self) -> NonNull<()> {
        core::mem::ManuallyDrop::new(self).cell
    }

    /// The G side again, from a pointer [`OwnedTask::into_cell`] gave up.
    ///
    /// # Safety
    /// `cell` came from `into_cell` and this is the only `OwnedTask` made from it.
    pub(crate) unsafe fn from_cell(cell: NonNull<()>) -> OwnedTask {
        // SAFETY: the cell is live (its G side was never consumed) and starts with its
        // `CellHead` (repr(C)); the vtable is written once at allocation.
        let vtable = unsafe { (*cell.cast::<CellHead>().as_ptr()).vtable };
        OwnedTask { cell, vtable }
    }

    pub(crate) fn run_by_joiner(self) {
        self.run(true)
    }

    fn run(self, by_joiner: bool) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: we own the G side and consume it here, once; `by_joiner` is the caller's
        // promise (TaskRef::run_by_joiner).
        unsafe { (this.vtable.run)(this.cell, by_joiner) };
    }

    fn fail(self, payload: Box<dyn Any + Send>) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: as in `run`.
        unsafe { (this.vtable.fail)(this.cell, payload) };
    }
}

impl Drop for OwnedTask {
    /// A task dropped without running (its G never started): the joiner gets `Cancelled`.
    fn drop(&mut self) {
        // SAFETY: we own the G side; `drop` runs once and the task was neither run nor failed
        // (both consume `self` without dropping it).
        unsafe { (self.vtable.fail)(self.cell, Box::new(Cancelled)) };
    }
}

/// The handle side of a spawned task: waits for it and takes its result. Dropping it detaches.
pub(crate) struct PacketRef<T> {
    packet: NonNull<Packet<T>>,
}

// SAFETY: the handle side's accesses are ordered with the completer's by T1–T3; the result
// crosses threads, hence `T: Send`.
unsafe impl<T: Send> Send for PacketRef<T> {}
// SAFETY: `&PacketRef` only loads the state word.
unsafe impl<T: Send> Sync for PacketRef<T> {}

impl<T> PacketRef<T> {
    fn packet(&self) -> &Packet<T> {
        // SAFETY: the cell lives at least as long as the handle side (only a DONE the handle
        // saw, or the handle's own detach, lets it be freed).
        unsafe { self.packet.as_ref() }
    }

    /// The cell's head (a lazily spawned green thread's identity lives there).
    pub(crate) fn head(&self) -> &CellHead {
        &self.packet().head
    }

    /// The cell, as a lazy spawn's queue entry names it (`Entry::task`).
    pub(crate) fn cell(&self) -> NonNull<()> {
        self.packet.cast()
    }

    /// Whether the result is ready (Acquire: pairs with T1).
    pub(crate) fn is_done(&self) -> bool {
        self.packet().head.state.load(Ordering::Acquire) & PHASE == DONE
    }

    /// Registers the calling context as the waiter. Returns false if the packet is already
    /// done (nothing registered). May be called once per packet.
    pub(crate) fn register(&self, waiter: Waiter) -> bool {
        let packet = self.packet();
        // SAFETY: only the (single) joiner writes `waiter`, before publishing WAITING (T2).
        unsafe { packet.waiter.with_mut(|w| *w = Some(waiter)) };
        // The allocation's kind bit (`GROUPED`, set before the cell was shared, never
        // changed), kept in both states. Relaxed: written before this handle existed.
        let kind = packet.head.state.load(Ordering::Relaxed) & GROUPED;
        // Release pairs with the completer's Acquire (T2); Acquire pairs with T1 on failure.
        packet
            .head
            .state
            .compare_exchange(EMPTY | kind, WAITING | kind, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Takes the result and frees the cell. Must only be called after `DONE` was observed
    /// with Acquire (`is_done` returned true, or `register` failed).
    pub(crate) fn into_result(self) -> ThreadResult<T> {
        // Relaxed: a check, not the hand-over (the caller's Acquire of DONE is, T1); an
        // Acquire here would order the result in the debug builds the models run and hide
        // a caller's missing one.
        debug_assert_eq!(self.packet().head.state.load(Ordering::Relaxed) & PHASE, DONE);
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: DONE was observed with Acquire (T1): the completer wrote the result and no
        // longer touches the cell, so the handle is its only user.
        let result = unsafe { this.packet().result.with_mut(|r| (*r).take()) };
        // SAFETY: as above; freed once (`this` is not dropped).
        unsafe { (this.packet().head.vtable.free)(this.packet.cast()) };
        result.expect("a finished green thread's packet holds its result")
    }
}

impl<T> Drop for PacketRef<T> {
    fn drop(&mut self) {
        // T3: AcqRel — Release hands our writes (a registered waiter) to a completer that will
        // free; Acquire pairs with T1 when the completer is done and we free.
        let prev = self.packet().head.state.fetch_or(DETACHED, Ordering::AcqRel);
        if prev & PHASE == DONE {
            // SAFETY: the completer published DONE and no longer touches the cell.
            unsafe { (self.packet().head.vtable.free)(self.packet.cast()) };
        }
    }
}

/// Loom models of the task cell's ownership protocol (T1–T3) on the real code.
#[cfg(all(test, loom))]
mod loom_cell {
    use super::*;
    use crate::sync::thread;
    use crate::sync::{Arc, AtomicUsize};

    /// Counts its drops: the result and the closure's capture.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A value whose drop reads a loom cell made with it: loom reports a drop on a thread that
    /// is not ordered after the value was made (a cell freed without seeing the result). In a
    /// result, it goes before any field whose drop synchronises (a `Counted`), which would
    /// hide the race.
    struct Made(UnsafeCell<u32>);
    impl Drop for Made {
        fn drop(&mut self) {
            // SAFETY: the value is being dropped: nobody else touches it.
            assert_eq!(unsafe { self.0.with(|v| *v) }, 7);
        }
    }

    /// The handle is dropped while the G side completes: the cell is freed exactly once (the
    /// result and the closure's capture are each dropped once, by whichever side frees), and
    /// a handle that frees sees the result it drops. Mutation checks (each tried, each fails
    /// this model): the completer publishing DONE with a plain store instead of the CAS
    /// (erasing a racing DETACHED) leaks the cell ("the capture and the result dropped once"
    /// fails); the handle also freeing when it finds EMPTY (not only DONE) makes the
    /// completer touch a freed cell (loom panics in its object store); the handle's
    /// `fetch_or` without Acquire (T3) drops the result unordered (a causality violation).
    #[test]
    fn detach_racing_completion_frees_once() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let capture = Counted(drops.clone());
            let d2 = drops.clone();
            let (task, handle) = TaskCell::allocate(move || {
                let _keep = capture;
                (Made(UnsafeCell::new(7)), Counted(d2))
            });
            let g_side = thread::spawn(move || task.run(false));
            drop(handle);
            g_side.join().unwrap();
            assert_eq!(drops.load(Ordering::SeqCst), 2, "the capture and the result dropped once");
        });
    }

    /// A joiner that registered as waiter races the completion: it is woken (or sees DONE),
    /// takes the result, and the cell is freed once. Mutation checks: the plain-store DONE of
    /// the first model fails this one too: the waiter registered between the load and the
    /// store is never woken (loom reports a deadlock); `register`'s CAS without Release (T2),
    /// or without Acquire on failure (a packet already done, T1), and the completer's load
    /// and failed CAS without Acquire (T2) each fail it (a causality violation).
    #[test]
    fn waiter_registered_racing_completion() {
        loom::model(|| {
            let (task, handle) = TaskCell::allocate(|| 7u32);
            let g_side = thread::spawn(move || task.run(false));
            if handle.register(Waiter::current()) {
                while !handle.is_done() {
                    thread::park();
                }
            }
            assert_eq!(handle.into_result().unwrap(), 7);
            g_side.join().unwrap();
        });
    }

    /// A task dropped without running (its G was recycled) completes with `Cancelled` and is
    /// freed by the handle.
    #[test]
    fn unrun_task_cancels() {
        loom::model(|| {
            let (task, handle) = TaskCell::allocate(|| 1u8);
            let g_side = thread::spawn(move || drop(task));
            g_side.join().unwrap();
            assert!(handle.is_done());
            assert!(handle.into_result().unwrap_err().is::<Cancelled>());
        });
    }
}
