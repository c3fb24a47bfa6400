//! Green threads that borrow: the machinery of [`scope`](crate::scope()) (like
//! [`std::thread::scope`]; the function is in `spawn`, with the other entry points), which
//! [`Runtime::block_on`](crate::runtime::Runtime::block_on) uses for its root too.
//!
//! # Soundness
//!
//! A scoped green thread's closure may borrow from the spawner's stack, so the spawner must not
//! return or unwind past that stack before the closure (and everything it captured) is gone.
//! Each scope counts its running green threads in a [`ScopeState`]; the scope's owner waits for
//! the count to reach zero in every exit path, including a panic of the scope's own body (the
//! wait runs in a destructor). For [`Scope::spawn`], the closure and its result slot share one
//! reference-counted allocation whose lifetime is erased for the spawn (what
//! `std::thread::Builder::spawn_unchecked` does with its boxed closure); the count is
//! decremented only after the green thread's reference to it was dropped (and with it, if the
//! handle is gone, the closure's captures and the result), so the erased lifetime is never
//! observed past the scope. A [`Scope::spawn`] whose result has nothing to drop (`()`, numbers,
//! references: `!needs_drop`) takes a cheaper path: the closure and its result live in the
//! scheduler's task cell (`purloin_sched::spawn_grouped_unchecked`), whose handle is the
//! [`ScopedJoinHandle`]'s, and the count is decremented by a field dropped after the closure,
//! as below; the cell (with the result) may outlive the count when the handle was dropped
//! unjoined, which only a result with nothing to drop may. Such a green thread is a member of
//! the scope's group once its handle is gone, so the owner's wait runs it inline like a
//! handle-less one. For [`Scope::spawn_detached`], the closure lives in the
//! scheduler's task cell itself (`purloin_sched::spawn_detached_unchecked`, whose contract is
//! that the closure is run or dropped exactly once and that the caller learns of it only
//! through the closure); the count is decremented by a field dropped after the closure, so
//! after its captures, whether it ran, panicked, or was dropped unrun. The state itself lives
//! in the owner's frame (`scope`'s `Scope`, `block_on`'s local), and green threads point to it
//! without owning it: the owner does not leave that frame before the count is zero, and a
//! green thread's decrement is its last touch of the state (the count protocol on
//! `ScopeState`, loom-modelled below). Green threads cannot be
//! killed, and shutdown unwinds parked ones to completion, so the wait ends.

use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::thread::Result as ThreadResult;

use purloin_sched::{GreenThread, Scheduler, SpawnOptions};

use crate::loom::{AtomicUsize, Ordering, UnsafeCell};

/// The running count of a scope and who waits for it to reach zero.
///
/// # Count protocol
///
/// `running` holds the number of running green threads in units of [`ONE`] and, in its low
/// bit, [`WAITER`]: the owner has stored its handle in `waiter` and parks until the count is
/// zero. The last touch of the state by a finishing green thread is the read-modify-write that
/// takes its unit off: the owner may free the state (leave the frame it lives in) as soon as
/// it sees zero, so a green thread ([`Finish`], [`Body`]) must not read or write it
/// afterwards. So the finisher whose unit is the last one while [`WAITER`] is set
/// copies the owner's handle *before* its decrement (a compare-exchange from `ONE | WAITER` to
/// zero) and unparks the copy after it.
///
/// Memory-ordering pairs:
/// - (S1) A finisher's decrement is Release (AcqRel), the owner's loads of the count are
///   Acquire: everything a green thread did, and the drop of its closure, happens before the
///   owner sees zero.
/// - (S2) The owner stores `waiter` and then sets [`WAITER`] with a Release compare-exchange;
///   a finisher reads `waiter` only after an Acquire load (or failed compare-exchange) showed
///   [`WAITER`], so it reads the owner's store. The owner never writes `waiter` again while
///   [`WAITER`] is set, and the bit is cleared only by the last finisher's compare-exchange to
///   zero.
/// - (S3) The owner's compare-exchange that sets [`WAITER`] and the last finisher's
///   decrement are read-modify-writes of one word: if the bit comes first, the last finisher
///   sees it and unparks the owner; if zero comes first, the owner's compare-exchange fails
///   and it returns without parking. The unpark leaves a token if the owner has not parked
///   yet (sched's park/unpark contract).
pub(crate) struct ScopeState {
    running: AtomicUsize,
    /// Green threads that panicked and whose result was not (yet) taken by a join.
    unjoined_panics: AtomicUsize,
    /// Green threads that never ran (no stack could be leased, or the runtime shut down
    /// first) and whose error was not (yet) taken by a join.
    unjoined_unstarted: AtomicUsize,
    /// Who waits for the count to reach zero: written by the owner before it sets
    /// [`WAITER`], read by the last finisher after it saw [`WAITER`] (S2).
    waiter: UnsafeCell<Option<Waiter>>,
    /// The root of a `block_on`, whose caller waits for idle events (its deadlock check's
    /// wake-ups) and for the root's end at once: its end is signalled as an idle event.
    root: bool,
    /// Under loom, stands for the state's memory: a finisher loads it at each touch of the
    /// state and the model's owner clears it (the free) once `wait_all` returned, so a touch
    /// after the last decrement can load `false` (an atomic, not a cell: loom would let a
    /// cell read that follows a Release with no other step between count as ordered by it).
    #[cfg(all(test, loom))]
    alive: crate::loom::AtomicBool,
}

// SAFETY: the atomics are shared by design; `waiter` is written only by the owner before it
// publishes [`WAITER`] and read by finishers only after they saw it (S2), and `Waiter` is
// `Send + Sync`.
unsafe impl Sync for ScopeState {}

/// `ScopeState::running`: the owner's handle is in `waiter` (S2).
const WAITER: usize = 1;
/// `ScopeState::running`: one running green thread.
const ONE: usize = 2;

#[derive(Clone)]
enum Waiter {
    Green(GreenThread),
    Os(crate::loom::thread::Thread),
}

impl Waiter {
    fn unpark(self) {
        match self {
            Waiter::Green(g) => {
                g.unpark();
            }
            Waiter::Os(t) => t.unpark(),
        }
    }
}

impl ScopeState {
    pub(crate) fn new() -> ScopeState {
        Self::with_root(false)
    }

    /// The state of a `block_on` root (see `root`).
    pub(crate) fn new_root() -> ScopeState {
        Self::with_root(true)
    }

    fn with_root(root: bool) -> ScopeState {
        ScopeState {
            running: AtomicUsize::new(0),
            unjoined_panics: AtomicUsize::new(0),
            unjoined_unstarted: AtomicUsize::new(0),
            waiter: UnsafeCell::new(None),
            root,
            #[cfg(all(test, loom))]
            alive: crate::loom::AtomicBool::new(true),
        }
    }

    /// Under loom, records a touch of the state by a finisher (see `alive`).
    #[inline(always)]
    fn touch(&self) {
        // Relaxed: coherence is the check (a touch ordered before the free cannot see it).
        #[cfg(all(test, loom))]
        assert!(
            self.alive.load(Ordering::Relaxed),
            "a finisher touched a scope's state after its last decrement"
        );
    }

    /// Counts one more running green thread. The caller holds a unit itself (the owner's
    /// body, or a running green thread of the scope), so the count is not zero and the owner
    /// is not past its wait.
    fn started(&self) {
        self.running.fetch_add(ONE, Ordering::Relaxed);
    }

    /// Whether every green thread of the scope has finished (Acquire: S1).
    pub(crate) fn all_finished(&self) -> bool {
        self.running.load(Ordering::Acquire) == 0
    }

    /// A scoped green thread finished (its closure and captures are dropped). Its decrement
    /// is its last touch of the state (see the count protocol).
    #[inline]
    fn finished(&self, panicked: bool) {
        self.touch();
        if panicked {
            self.unjoined_panics.fetch_add(1, Ordering::Relaxed);
        }
        // Acquire: S2 (a count that shows WAITER lets us read `waiter`).
        let count = self.running.load(Ordering::Acquire);
        // Not the last unit with the owner waiting, and not the root's end: just the
        // decrement. AcqRel: S1 (Release) and S2 on failure (Acquire); S3: one word.
        if count != ONE | WAITER
            && !(count == ONE && self.root)
            && self
                .running
                .compare_exchange(count, count - ONE, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // Not a byte of the state from here on: the owner may have freed it.
            return;
        }
        self.finished_slow();
    }

    /// [`finished`](Self::finished) when the count may reach zero with someone to tell, or
    /// its first compare-exchange lost a race.
    #[cold]
    #[inline(never)]
    fn finished_slow(&self) {
        let root = self.root;
        // Acquire: S2.
        let mut count = self.running.load(Ordering::Acquire);
        loop {
            debug_assert!(count >= ONE, "a scope's count went below zero");
            // The owner's handle, copied before our decrement while we still may read it.
            let who = if count == ONE | WAITER {
                // SAFETY: S2: WAITER is set, so the owner wrote `waiter` before and does not
                // write it again while the bit is set.
                unsafe { self.waiter() }
            } else {
                None
            };
            let next = if count == ONE | WAITER { 0 } else { count - ONE };
            // AcqRel: S1 (Release) and S2 on failure (Acquire); S3: one word.
            match self.running.compare_exchange(count, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // Not a byte of the state from here on: the owner may have freed it.
                    if next == 0 && root {
                        // After the count reached zero: a waiter whose snapshot of the idle
                        // events predates this sees the event, one whose snapshot follows it
                        // sees the count.
                        purloin_sched::note_idle_event();
                    }
                    if let Some(who) = who {
                        who.unpark();
                    }
                    return;
                }
                Err(now) => count = now,
            }
        }
    }

    /// A copy of the owner's handle.
    ///
    /// # Safety
    /// [`WAITER`] was seen set with Acquire (S2), and our unit of the count is not taken off.
    unsafe fn waiter(&self) -> Option<Waiter> {
        self.touch();
        // SAFETY: by the caller: the owner's write happened before, and it writes no more.
        unsafe { self.waiter.with(|w| (*w).clone()) }
    }

    /// The group its handle-less green threads are spawned in (`run_detached_inline`).
    fn group(&self) -> usize {
        self as *const ScopeState as usize
    }

    /// Waits until every green thread of the scope has finished. From a green thread it first
    /// runs the scope's handle-less green threads that have not started yet and that are on
    /// top of its worker's queue inline (`purloin_sched::run_detached_inline_while`), as rayon's
    /// scope runs its own jobs while it waits. Called once, by the scope's owner.
    pub(crate) fn wait_all(&self) {
        // Acquire: S1. Asked before each member: the last one ends the drain without a look
        // at the entry below it (a member of the enclosing scope, in a tree of scopes).
        purloin_sched::run_detached_inline_while(self.group(), || {
            self.running.load(Ordering::Acquire) != 0
        });
        let mut count = self.running.load(Ordering::Acquire);
        if count == 0 {
            return;
        }
        let who = match purloin_sched::current() {
            Some(g) => Waiter::Green(g),
            None => Waiter::Os(crate::loom::thread::current()),
        };
        // SAFETY: S2: WAITER is not set yet (only this call sets it, once), so no finisher
        // reads `waiter` now.
        unsafe { self.waiter.with_mut(|w| *w = Some(who)) };
        loop {
            if count == 0 {
                return;
            }
            debug_assert_eq!(count & WAITER, 0, "a scope is waited for once");
            // Release: S2. Acquire: S1 when the count reached zero meanwhile. S3.
            match self.running.compare_exchange(
                count,
                count | WAITER,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => count = now,
            }
        }
        purloin_sched::set_wait_info(Some(purloin_sched::WaitInfo {
            kind: purloin_sched::WaitKind::Join,
            object: self as *const Self as usize,
            holder: None,
        }));
        // Acquire: S1. A wake-up before the count is zero is spurious: park again.
        while self.running.load(Ordering::Acquire) != 0 {
            purloin_sched::park();
        }
        purloin_sched::set_wait_info(None);
    }
}

/// What a scoped green thread runs: its job (lifetime erased) and the scope that counts it. If
/// it is dropped without running (the green thread could not get a stack, or the runtime shut
/// down before it started) it counts itself finished and unstarted, so the scope's owner does
/// not wait forever. Either way the job is dropped *before* the count, so the closure's
/// captures and the result never outlive the scope.
struct Body {
    job: Option<Arc<dyn Job>>,
    /// The scope's state, not owned: as for [`Finish`].
    state: Option<core::ptr::NonNull<ScopeState>>,
}

// SAFETY: `ScopeState` is `Sync`; `Body` only calls its `&self` methods, from whichever thread
// runs or drops the green thread; the job is `Send`.
unsafe impl Send for Body {}

impl Body {
    fn run(mut self) {
        let job = self.job.take().expect("a scoped body runs once");
        let panicked = job.run();
        drop(job);
        let state = self.state.take().expect("a scoped body runs once");
        // SAFETY: our unit of the count is not taken off yet, so the owner still holds the
        // state (count protocol); `finished` is our last touch.
        unsafe { state.as_ref() }.finished(panicked);
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        drop(self.job.take());
        if let Some(state) = self.state.take() {
            // SAFETY: as in `run`.
            let state = unsafe { state.as_ref() };
            state.unjoined_unstarted.fetch_add(1, Ordering::Relaxed);
            state.finished(false);
        }
    }
}

/// What a scoped green thread spawned without a handle ([`Scope::spawn_detached`]) runs: the
/// closure, stored in the scheduler's task cell itself (no separate allocation, no result
/// slot), and the scope's count. Fields drop in order: the closure (with its captures) first,
/// then [`Finish`], which counts the green thread finished; so even a capture whose `Drop`
/// panics is gone before the count lets the scope end.
struct Detached<F> {
    f: Option<F>,
    finish: Finish,
}

/// Counts a scoped green thread finished when dropped: unstarted if its closure never ran,
/// panicked if it panicked.
///
/// It points to the scope's state without owning it: the state lives in the owner's frame,
/// and the owner waits for this green thread's unit of the count before it leaves; the
/// decrement in [`ScopeState::finished`] is the last touch (the count protocol). So a spawn
/// costs no reference-count increment and no decrement.
struct Finish {
    state: core::ptr::NonNull<ScopeState>,
    started: bool,
    panicked: bool,
}

// SAFETY: `ScopeState` is `Sync`; `Finish` only calls its `&self` methods, from whichever
// thread runs or drops the green thread.
unsafe impl Send for Finish {}

impl Drop for Finish {
    fn drop(&mut self) {
        // SAFETY: our unit of the count is not taken off yet, so the owner is still waiting
        // in the frame the state lives in (count protocol).
        let state = unsafe { self.state.as_ref() };
        if !self.started {
            state.unjoined_unstarted.fetch_add(1, Ordering::Relaxed);
        }
        state.finished(self.panicked);
    }
}

impl<F: FnOnce() + Send> Detached<F> {
    fn run(mut self) {
        let f = self.f.take().expect("a scoped body runs once");
        self.finish.started = true;
        // The closure's captures are dropped inside (a panicking `Drop` of one is caught too).
        let result = panic::catch_unwind(AssertUnwindSafe(crate::local::with_locals(f)));
        self.finish.panicked = result.is_err();
        // The payload goes before the count (`self`, dropped next).
        drop(result);
    }
}

/// Spawns `f`, which may borrow data living for `'a`, as a green thread counted by `state`,
/// with no handle.
///
/// # Safety
/// As for [`spawn_scoped`]; and the caller keeps `state` alive until its count is zero (its
/// [`WaitAll`] borrows it), since the green thread points to it without owning it.
#[track_caller]
pub(crate) unsafe fn spawn_scoped_detached<'a, F>(
    sched: Option<&Scheduler>,
    opts: SpawnOptions,
    state: &ScopeState,
    f: F,
) -> std::io::Result<()>
where
    F: FnOnce() + Send + 'a,
{
    state.started();
    let body = Detached {
        f: Some(f),
        finish: Finish { state: core::ptr::NonNull::from(state), started: false, panicked: false },
    };
    let group = state.group();
    // SAFETY: `body` (and `f`'s borrows, which live for 'a) are run or dropped before
    // `Finish` counts the green thread finished (field order, and `Detached::run` drops the
    // closure inside), and the caller does not let 'a end before the count is zero.
    let spawned = unsafe {
        match sched {
            Some(s) => s.spawn_detached_unchecked(opts, group, move || body.run()),
            None => purloin_sched::spawn_detached_unchecked(opts, group, move || body.run()),
        }
    };
    if spawned.is_err() {
        // The refused closure was dropped inside the spawn: its `Finish` counted it finished
        // and unstarted. The caller sees this error, so it does not make the scope panic.
        state.unjoined_unstarted.fetch_sub(1, Ordering::Relaxed);
    }
    spawned
}

/// What a scoped green thread with a handle whose result lives in the scheduler's task cell
/// runs ([`spawn_scoped_cell`]): the closure, then [`Finish`], in this field order, as for
/// [`Detached`]. It returns the closure's result with its panic caught (the scope counts an
/// unjoined panic, so the scheduler must not see one).
struct CellJob<F> {
    f: Option<F>,
    finish: Finish,
}

impl<F: FnOnce() -> T + Send, T> CellJob<F> {
    fn run(mut self) -> ThreadResult<T> {
        let f = self.f.take().expect("a scoped body runs once");
        self.finish.started = true;
        let result = panic::catch_unwind(AssertUnwindSafe(crate::local::with_locals(f)));
        self.finish.panicked = result.is_err();
        // `self` (its `Finish`) is dropped here: the count goes after the closure and its
        // captures, before the result is handed over.
        result
    }
}

/// Spawns `f`, which may borrow data living for `'a`, as a green thread counted by `state`,
/// with its result in the scheduler's task cell (one allocation, no result slot of ours),
/// in `state`'s group: once its handle is dropped unjoined, the scope's owner runs it inline
/// while it waits, as it runs handle-less ones.
///
/// The cell outlives the count: a handle dropped unjoined leaves the result to the
/// scheduler, which drops it after the count let the scope end. So only for a result with
/// nothing to drop (`!needs_drop::<T>()`: dropping it late touches nothing); a panic's
/// payload is `'static`.
///
/// # Safety
/// As for [`spawn_scoped_detached`]; and `T` has no drop glue.
#[track_caller]
unsafe fn spawn_scoped_cell<'a, F, T>(
    sched: Option<&Scheduler>,
    opts: SpawnOptions,
    state: &'a ScopeState,
    f: F,
) -> std::io::Result<CellParts<'a, T>>
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    debug_assert!(!core::mem::needs_drop::<T>());
    state.started();
    let job = CellJob {
        f: Some(f),
        finish: Finish { state: core::ptr::NonNull::from(state), started: false, panicked: false },
    };
    let group = state.group();
    // SAFETY: `job` (and `f`'s borrows, which live for 'a) is run or dropped before `Finish`
    // counts the green thread finished (field order, and `CellJob::run` drops the closure
    // inside), the caller does not let 'a end before the count is zero, and the result the
    // scheduler may drop after that has no drop glue (a panic's payload is 'static).
    let spawned = unsafe {
        match sched {
            Some(s) => s.spawn_grouped_unchecked(opts, group, move || job.run()),
            None => purloin_sched::spawn_grouped_unchecked(opts, group, move || job.run()),
        }
    };
    match spawned {
        Ok(handle) => Ok(CellParts { handle, state }),
        Err(e) => {
            // The refused closure was dropped inside the spawn: its `Finish` counted it
            // finished and unstarted. The caller sees this error, so it does not make the
            // scope panic.
            state.unjoined_unstarted.fetch_sub(1, Ordering::Relaxed);
            Err(e)
        }
    }
}

/// A scoped green thread spawned by [`spawn_scoped_cell`]: its handle, whose result is the
/// closure's with its panic caught.
pub(crate) struct CellParts<'a, T> {
    handle: purloin_sched::JoinHandle<ThreadResult<T>>,
    state: &'a ScopeState,
}

impl<T> CellParts<'_, T> {
    fn join(self) -> ThreadResult<T> {
        cell_result(self.handle.join(), self.state)
    }
}

/// What a [`CellParts`]' join returned, with the scope's counts of unjoined panics and
/// green threads that never ran updated (this joiner sees them).
fn cell_result<T>(joined: ThreadResult<ThreadResult<T>>, state: &ScopeState) -> ThreadResult<T> {
    match joined {
        Ok(result) => {
            if result.is_err() {
                state.unjoined_panics.fetch_sub(1, Ordering::Relaxed);
            }
            result
        }
        Err(e) => {
            state.unjoined_unstarted.fetch_sub(1, Ordering::Relaxed);
            Err(e)
        }
    }
}

/// Waits for the scope's green threads when dropped (every exit path of the owner).
pub(crate) struct WaitAll<'a>(pub(crate) &'a ScopeState);

impl Drop for WaitAll<'_> {
    fn drop(&mut self) {
        self.0.wait_all();
    }
}

/// One scoped green thread's closure and result slot, in one allocation shared by the green
/// thread (as a [`Job`]) and its handle (as a [`ResultSlot`]).
struct Scoped<F, T> {
    /// Taken once, by the green thread (`Job::run`).
    f: core::cell::UnsafeCell<Option<F>>,
    result: Mutex<Option<ThreadResult<T>>>,
}

// SAFETY: `f` is touched only by the one `Job::run` call (on the green thread) and by the drop
// of the last reference; `result` is behind a mutex. F and T cross threads: hence `Send`.
unsafe impl<F: Send, T: Send> Sync for Scoped<F, T> {}

/// The green thread's side of a [`Scoped`].
trait Job: Send + Sync {
    /// Runs the closure once and stores its result; returns whether it panicked.
    fn run(&self) -> bool;
}

/// The handle's side of a [`Scoped`].
trait ResultSlot<T>: Send + Sync {
    fn slot(&self) -> &Mutex<Option<ThreadResult<T>>>;
}

impl<F, T> Job for Scoped<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(&self) -> bool {
        // SAFETY: the one call of `run` (`Body::run` consumes its body): nothing else touches
        // `f` while the green thread holds a reference.
        let f = unsafe { (*self.f.get()).take() }.expect("a scoped job runs once");
        let result = panic::catch_unwind(AssertUnwindSafe(crate::local::with_locals(f)));
        let panicked = result.is_err();
        *self.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        panicked
    }
}

impl<F: Send, T: Send> ResultSlot<T> for Scoped<F, T> {
    fn slot(&self) -> &Mutex<Option<ThreadResult<T>>> {
        &self.result
    }
}

/// Spawns `f`, which may borrow data living for `'a`, as a green thread counted by `state`.
///
/// # Safety
/// - The caller must not let `'a` end before `state` counts zero running green threads (it
///   holds a [`WaitAll`] for `state` in every exit path).
#[track_caller]
pub(crate) unsafe fn spawn_scoped<'a, F, T>(
    sched: Option<&Scheduler>,
    opts: SpawnOptions,
    state: &'a ScopeState,
    f: F,
) -> std::io::Result<ScopedParts<'a, T>>
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let scoped =
        Arc::new(Scoped { f: core::cell::UnsafeCell::new(Some(f)), result: Mutex::new(None) });
    let packet: Arc<dyn ResultSlot<T> + 'a> = scoped.clone();
    let job: Arc<dyn Job + 'a> = scoped;
    // SAFETY: only the lifetime changes. The closure's borrows live for 'a, and 'a outlives
    // the green thread's use of `job`: the caller waits (WaitAll) until `finished` ran, which
    // is after `Body` dropped `job` (Safety section above).
    let job: Arc<dyn Job + 'static> =
        unsafe { core::mem::transmute::<Arc<dyn Job + 'a>, Arc<dyn Job + 'static>>(job) };
    state.started();
    let body = Body { job: Some(job), state: Some(core::ptr::NonNull::from(state)) };
    let spawned = match sched {
        Some(s) => s.spawn_with(opts, move || body.run()),
        None => purloin_sched::spawn_with(opts, move || body.run()),
    };
    match spawned {
        Ok(handle) => Ok(ScopedParts { handle, packet, state, _borrow: PhantomData }),
        Err(e) => {
            // The refused closure was dropped inside the spawn: its `Body` counted itself
            // finished and unstarted. The caller sees this error, so it does not make the
            // scope panic.
            state.unjoined_unstarted.fetch_sub(1, Ordering::Relaxed);
            Err(e)
        }
    }
}

/// A spawned scoped green thread: its scheduler handle and its result slot.
pub(crate) struct ScopedParts<'a, T> {
    handle: purloin_sched::JoinHandle<()>,
    packet: Arc<dyn ResultSlot<T> + 'a>,
    state: &'a ScopeState,
    _borrow: PhantomData<&'a ()>,
}

impl<T> ScopedParts<'_, T> {
    pub(crate) fn thread(&self) -> &GreenThread {
        self.handle.thread()
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the green thread (running it inline if it has not started: join-helping)
    /// and returns its result.
    pub(crate) fn join(self) -> ThreadResult<T> {
        // The body catches panics itself, so the scheduler-level result is Ok unless the
        // green thread never ran (no stack, or cancelled at shutdown).
        let ScopedParts { handle, packet, state, .. } = self;
        if let Err(e) = handle.join() {
            // The joiner sees this error: it no longer makes the scope panic.
            state.unjoined_unstarted.fetch_sub(1, Ordering::Relaxed);
            return Err(e);
        }
        take_result(&*packet, state)
    }

    /// The result of a green thread that its scope already counted finished, without waiting
    /// for the scheduler to end the green thread: its body stored the result before the count
    /// (a `block_on` root, whose caller saw the count reach zero). A green thread that never
    /// ran stored none: then this is [`join`](Self::join), which reports why.
    pub(crate) fn join_counted_finished(self) -> ThreadResult<T> {
        // Acquire (the mutex): the body's store happened before its count decrement, which
        // the caller saw.
        let stored = self.packet.slot().lock().unwrap_or_else(|p| p.into_inner()).take();
        match stored {
            Some(result) => {
                if result.is_err() {
                    // The joiner sees this panic: it no longer makes the scope panic.
                    self.state.unjoined_panics.fetch_sub(1, Ordering::Relaxed);
                }
                // The handle is dropped: the green thread ends on its own (it only has its
                // own task cell left to release).
                result
            }
            None => self.join(),
        }
    }
}

/// The result a finished scoped green thread stored.
fn take_result<T>(packet: &dyn ResultSlot<T>, state: &ScopeState) -> ThreadResult<T> {
    let result = packet
        .slot()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .expect("a scoped green thread stored its result before finishing");
    if result.is_err() {
        // The joiner sees this panic: it no longer makes the scope panic.
        state.unjoined_panics.fetch_sub(1, Ordering::Relaxed);
    }
    result
}

/// A scope for spawning green threads that borrow (see [`scope`](crate::scope())).
pub struct Scope<'scope, 'env: 'scope> {
    state: ScopeState,
    sched: SchedRef<'scope>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// Which scheduler a scope spawns on: the caller's (inside a green thread) or the global one.
enum SchedRef<'a> {
    Current,
    Runtime(&'a Scheduler),
}

/// An owned permission to join a scoped green thread.
pub struct ScopedJoinHandle<'scope, T> {
    parts: Parts<'scope, T>,
}

/// Where a scoped green thread's result lives: in the scheduler's task cell (a result with
/// nothing to drop), or in a result slot of ours shared with the green thread.
enum Parts<'scope, T> {
    Cell(CellParts<'scope, T>),
    Shared(ScopedParts<'scope, T>),
}

impl<'scope, T> ScopedJoinHandle<'scope, T> {
    /// Waits for the green thread and returns its result (`Err` with the panic payload if it
    /// panicked). Runs it inline if it has not started yet.
    ///
    /// # Examples
    ///
    /// ```
    /// purloin::scope(|s| {
    ///     let ok = s.spawn(|| 1);
    ///     let bad = s.spawn(|| -> i32 { panic!("boom") });
    ///     assert_eq!(ok.join().unwrap(), 1);
    ///     assert!(bad.join().is_err()); // joined: the scope itself does not panic
    /// });
    /// ```
    pub fn join(self) -> ThreadResult<T> {
        match self.parts {
            Parts::Cell(p) => p.join(),
            Parts::Shared(p) => p.join(),
        }
    }

    /// Whether it has finished.
    pub fn is_finished(&self) -> bool {
        match &self.parts {
            Parts::Cell(p) => p.handle.is_finished(),
            Parts::Shared(p) => p.is_finished(),
        }
    }

    /// Its handle.
    pub fn thread(&self) -> &GreenThread {
        match &self.parts {
            Parts::Cell(p) => p.handle.thread(),
            Parts::Shared(p) => p.thread(),
        }
    }
}

/// Awaiting a scoped green thread resolves to what [`ScopedJoinHandle::join`] returns (never
/// running it inline). Sound for any `'scope`: the scope waits for its green threads whatever
/// happens to the future, and the future holds only the result slot, which the green thread
/// fills before the scope's count lets the scope end.
impl<'scope, T> core::future::IntoFuture for ScopedJoinHandle<'scope, T> {
    type Output = ThreadResult<T>;
    type IntoFuture = ScopedJoinFuture<'scope, T>;

    fn into_future(self) -> ScopedJoinFuture<'scope, T> {
        match self.parts {
            Parts::Cell(CellParts { handle, state }) => {
                ScopedJoinFuture { inner: FutureParts::Cell(handle.into_future()), state }
            }
            Parts::Shared(ScopedParts { handle, packet, state, _borrow }) => ScopedJoinFuture {
                inner: FutureParts::Shared { inner: handle.into_future(), packet, _borrow },
                state,
            },
        }
    }
}

/// The future of a [`ScopedJoinHandle`] (see its [`IntoFuture`](core::future::IntoFuture)
/// impl).
#[must_use = "futures do nothing unless polled"]
pub struct ScopedJoinFuture<'scope, T> {
    inner: FutureParts<'scope, T>,
    state: &'scope ScopeState,
}

/// A [`ScopedJoinFuture`]'s scheduler future, for each kind of [`Parts`].
enum FutureParts<'scope, T> {
    Cell(purloin_sched::JoinFuture<ThreadResult<T>>),
    Shared {
        inner: purloin_sched::JoinFuture<()>,
        packet: Arc<dyn ResultSlot<T> + 'scope>,
        _borrow: PhantomData<&'scope ()>,
    },
}

impl<T> core::future::Future for ScopedJoinFuture<'_, T> {
    type Output = ThreadResult<T>;

    fn poll(
        self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<ThreadResult<T>> {
        let this = self.get_mut();
        let state = this.state;
        match &mut this.inner {
            FutureParts::Cell(inner) => match core::pin::Pin::new(inner).poll(cx) {
                core::task::Poll::Pending => core::task::Poll::Pending,
                core::task::Poll::Ready(joined) => {
                    core::task::Poll::Ready(cell_result(joined, state))
                }
            },
            FutureParts::Shared { inner, packet, .. } => {
                match core::pin::Pin::new(inner).poll(cx) {
                    core::task::Poll::Pending => core::task::Poll::Pending,
                    core::task::Poll::Ready(Err(e)) => {
                        // The awaiter sees this error: it no longer makes the scope panic.
                        state.unjoined_unstarted.fetch_sub(1, Ordering::Relaxed);
                        core::task::Poll::Ready(Err(e))
                    }
                    core::task::Poll::Ready(Ok(())) => {
                        core::task::Poll::Ready(take_result(&**packet, state))
                    }
                }
            }
        }
    }
}

impl<T> core::fmt::Debug for ScopedJoinFuture<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let finished = match &self.inner {
            FutureParts::Cell(inner) => inner.is_finished(),
            FutureParts::Shared { inner, .. } => inner.is_finished(),
        };
        f.debug_struct("ScopedJoinFuture").field("finished", &finished).finish()
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Spawns a green thread that may borrow anything that outlives the scope.
    ///
    /// # Examples
    ///
    /// ```
    /// let words = ["green", "threads"];
    /// let lens: Vec<usize> = purloin::scope(|s| {
    ///     let hs: Vec<_> = words.iter().map(|w| s.spawn(move || w.len())).collect();
    ///     hs.into_iter().map(|h| h.join().unwrap()).collect()
    /// });
    /// assert_eq!(lens, [5, 7]);
    /// ```
    ///
    /// # Panics
    /// If the runtime refuses the spawn (it is shutting down); use
    /// [`Builder::spawn_scoped`](crate::Builder::spawn_scoped) to get the error instead.
    #[track_caller]
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        self.spawn_with(SpawnOptions::default(), f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Spawns a green thread that may borrow anything that outlives the scope, with no
    /// handle: like [`Scope::spawn`] with the handle dropped at once (std's way to detach a
    /// thread), and like rayon's `Scope::spawn`, which returns `()`. The scope still waits for
    /// it, and if it panics, [`scope`](crate::scope()) panics after joining all. Without a handle there is no
    /// result slot to allocate and no join state to keep, so this is the cheaper way to
    /// spawn work that reports through what it borrows.
    ///
    /// While a scope opened on a green thread waits for its green threads, that green thread
    /// runs those spawned here that no worker has started yet itself, on its own stack (when
    /// enough of it is left), as rayon's scope runs its own jobs: no record, stack or switch
    /// for them. Each still behaves as a green thread of its own: it may park (its host waits
    /// with it), `current()` inside it is its own, and so are its green-locals. Children that
    /// other workers took meanwhile run there in parallel.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut parts = [0u64; 4];
    /// purloin::scope(|s| {
    ///     for (i, p) in parts.iter_mut().enumerate() {
    ///         s.spawn_detached(move || *p = (i as u64 + 1) * 10);
    ///     }
    /// });
    /// assert_eq!(parts, [10, 20, 30, 40]);
    /// ```
    ///
    /// # Panics
    /// If the runtime refuses the spawn (it is shutting down).
    #[track_caller]
    pub fn spawn_detached<F>(&'scope self, f: F)
    where
        F: FnOnce() + Send + 'scope,
    {
        let sched = match &self.sched {
            SchedRef::Runtime(s) => Some(*s),
            SchedRef::Current => None,
        };
        // SAFETY: `scope` holds a WaitAll for `self.state` until after 'scope ends.
        unsafe { spawn_scoped_detached(sched, SpawnOptions::default(), &self.state, f) }
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[track_caller]
    pub(crate) fn spawn_with<F, T>(
        &'scope self,
        opts: SpawnOptions,
        f: F,
    ) -> std::io::Result<ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let sched = match &self.sched {
            SchedRef::Runtime(s) => Some(*s),
            SchedRef::Current => None,
        };
        if !core::mem::needs_drop::<T>() {
            // SAFETY: `scope` holds a WaitAll for `self.state` until after 'scope ends; `T`
            // has no drop glue (checked above).
            let parts = unsafe { spawn_scoped_cell(sched, opts, &self.state, f) }?;
            return Ok(ScopedJoinHandle { parts: Parts::Cell(parts) });
        }
        // SAFETY: `scope` holds a WaitAll for `self.state` until after 'scope ends.
        let parts = unsafe { spawn_scoped(sched, opts, &self.state, f) }?;
        Ok(ScopedJoinHandle { parts: Parts::Shared(parts) })
    }
}

/// [`scope`](crate::scope()) on `sched` (`None`: the current green thread's runtime).
pub(crate) fn scope_on<'env, F, R>(sched: Option<&'static Scheduler>, f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let sched = match sched {
        Some(s) => SchedRef::Runtime(s),
        None => SchedRef::Current,
    };
    let scope = Scope { state: ScopeState::new(), sched, _scope: PhantomData, _env: PhantomData };
    let wait = WaitAll(&scope.state);
    let result = panic::catch_unwind(AssertUnwindSafe(|| f(&scope)));
    // An OS thread waiting for the scope's green threads: the deadlock watch counts it.
    let _outside = match &scope.sched {
        SchedRef::Runtime(s) => Some(s.outside_wait()),
        SchedRef::Current => None,
    };
    drop(wait);
    match result {
        Err(payload) => panic::resume_unwind(payload),
        Ok(_) if scope.state.unjoined_panics.load(Ordering::Relaxed) > 0 => {
            panic!("a scoped green thread panicked")
        }
        Ok(_) if scope.state.unjoined_unstarted.load(Ordering::Relaxed) > 0 => {
            panic!(
                "purloin: scope: a scoped green thread never ran (its stack could not be leased, \
                 or the runtime shut down first); spawn it with Scope::spawn and join its handle \
                 to get the error instead"
            )
        }
        Ok(r) => r,
    }
}

/// Loom models of the count protocol (`ScopeState`), on its real code: owners and finishers
/// are loom threads, the owner's park is a loom park. Run with
/// `cargo xtask loom -p purloin scope_count`.
///
/// Mutation checks (each made in this file, run, and reverted; what loom reported, for both
/// models):
/// - the owner's handle read after the last decrement instead of before (the shape of a
///   finisher that unlocks a waiter slot after its `fetch_sub`): "Causality violation:
///   Concurrent read and write accesses" (the read races with the owner's free);
/// - the finisher's first load and failed compare-exchange Relaxed instead of Acquire (S2):
///   the same causality violation on `waiter`;
/// - the owner setting WAITER with `fetch_or` even when the count reached zero meanwhile
///   (S3): "deadlock" (the owner parks, nobody is left to unpark it);
/// - the fast path of `finished` without its `count != ONE | WAITER` guard: "deadlock".
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::loom::thread;

    /// Runs `f` in every interleaving: no preemption bound (the models are small; at a bound
    /// of 2 or 3 loom never schedules the finisher between the owner's setting of WAITER and
    /// its next load, where a touch after the last decrement shows).
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = None;
        b.check(f);
    }

    /// What a finisher writes and the owner reads after its wait.
    struct Out(UnsafeCell<usize>);

    // SAFETY: written by one finisher, read by the owner after `wait_all` (S1, checked by
    // loom).
    unsafe impl Sync for Out {}

    fn out() -> Arc<Out> {
        Arc::new(Out(UnsafeCell::new(0)))
    }

    /// A handle-less green thread's end: what it wrote, then its [`Finish`] dropped.
    fn finisher(state: &ScopeState, out: Arc<Out>, panicked: bool) -> thread::JoinHandle<()> {
        state.started();
        let finish = Finish { state: core::ptr::NonNull::from(state), started: true, panicked };
        thread::spawn(move || {
            // SAFETY: only this thread writes `out` before its finish; the owner reads it
            // after `wait_all` (S1 orders them; loom reports it if not).
            unsafe { out.0.with_mut(|v| *v += 1) };
            drop(finish);
        })
    }

    /// The owner's side after `wait_all`: reads what the finishers wrote (S1) and frees the
    /// state's memory (its `waiter` and `alive`): a finisher that touched the state after its
    /// decrement races with this.
    fn free(state: &ScopeState, out: &[Arc<Out>]) {
        for o in out {
            // SAFETY: S1: the finisher's write happened before the count reached zero.
            assert_eq!(unsafe { o.0.with(|v| *v) }, 1);
        }
        // SAFETY: the count is zero: no finisher touches the state any more (count protocol).
        unsafe { state.waiter.with_mut(|w| *w = None) };
        state.alive.store(false, Ordering::Relaxed);
    }

    /// One owner waiting for two handle-less green threads that finish on other threads:
    /// no lost wake-up (loom reports a deadlock), their writes are seen, and no touch of the
    /// state follows the last decrement.
    #[test]
    fn scope_count_two_finishers() {
        model(|| {
            let state = Arc::new(ScopeState::new());
            let out: Vec<_> = (0..2).map(|_| out()).collect();
            let ts: Vec<_> =
                out.iter().enumerate().map(|(i, o)| finisher(&state, o.clone(), i == 1)).collect();
            state.wait_all();
            free(&state, &out);
            assert_eq!(state.unjoined_panics.load(Ordering::Relaxed), 1);
            for t in ts {
                t.join().unwrap();
            }
        });
    }

    /// A root state (`block_on`'s): the last finisher also signals an idle event.
    #[test]
    fn scope_count_root_one_finisher() {
        model(|| {
            let state = Arc::new(ScopeState::new_root());
            let out = vec![out()];
            let t = finisher(&state, out[0].clone(), false);
            state.wait_all();
            assert!(state.all_finished());
            free(&state, &out);
            t.join().unwrap();
        });
    }
}
