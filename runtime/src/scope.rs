//! Green threads that borrow: [`scope`] (like [`std::thread::scope`]) and [`join`] (fork-join,
//! like rayon's `join`); [`Runtime::block_on`](crate::runtime::Runtime::block_on) uses the same
//! machinery for its root.
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
//! observed past the scope. For [`Scope::spawn_detached`], the closure lives in the
//! scheduler's task cell itself (`purloin_sched::spawn_detached_unchecked`, whose contract is
//! that the closure is run or dropped exactly once and that the caller learns of it only
//! through the closure); the count is decremented by a field dropped after the closure, so
//! after its captures, whether it ran, panicked, or was dropped unrun. Green threads cannot be
//! killed, and shutdown unwinds parked ones to completion, so the wait ends.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Result as ThreadResult;

use purloin_sched::{GreenThread, Scheduler, SpawnOptions};

/// The running count of a scope and who waits for it to reach zero.
pub(crate) struct ScopeState {
    running: AtomicUsize,
    /// Green threads that panicked and whose result was not (yet) taken by a join.
    unjoined_panics: AtomicUsize,
    /// Green threads that never ran (no stack could be leased, or the runtime shut down
    /// first) and whose error was not (yet) taken by a join.
    unjoined_unstarted: AtomicUsize,
    waiter: Mutex<Option<Waiter>>,
    /// The root of a `block_on`, whose caller waits for idle events (the deadlock watch's
    /// wake-ups) and for the root's end at once: its end is signalled as an idle event.
    root: bool,
}

enum Waiter {
    Green(GreenThread),
    Os(std::thread::Thread),
}

impl ScopeState {
    pub(crate) fn new() -> Arc<ScopeState> {
        Self::with_root(false)
    }

    /// The state of a `block_on` root (see `root`).
    pub(crate) fn new_root() -> Arc<ScopeState> {
        Self::with_root(true)
    }

    fn with_root(root: bool) -> Arc<ScopeState> {
        Arc::new(ScopeState {
            running: AtomicUsize::new(0),
            unjoined_panics: AtomicUsize::new(0),
            unjoined_unstarted: AtomicUsize::new(0),
            waiter: Mutex::new(None),
            root,
        })
    }

    /// Whether every green thread of the scope has finished (Acquire: pairs with `finished`).
    pub(crate) fn all_finished(&self) -> bool {
        self.running.load(Ordering::Acquire) == 0
    }

    /// A scoped green thread finished (its closure and captures are dropped).
    fn finished(&self, panicked: bool) {
        if panicked {
            self.unjoined_panics.fetch_add(1, Ordering::Relaxed);
        }
        // Release: everything the green thread did happens before the owner's Acquire load
        // that sees the count reach zero.
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            if self.root {
                // After the count reached zero: a waiter whose snapshot of the idle events
                // predates this sees the event, one whose snapshot follows it sees the count.
                purloin_sched::note_idle_event();
            }
            let who = self.waiter.lock().unwrap_or_else(|p| p.into_inner()).take();
            match who {
                Some(Waiter::Green(g)) => {
                    g.unpark();
                }
                Some(Waiter::Os(t)) => t.unpark(),
                None => {}
            }
        }
    }

    /// The group its handle-less green threads are spawned in (`run_detached_inline`).
    fn group(&self) -> usize {
        self as *const ScopeState as usize
    }

    /// Waits until every green thread of the scope has finished. From a green thread it first
    /// runs the scope's handle-less green threads that have not started yet and that are on
    /// top of its worker's queue inline (`purloin_sched::run_detached_inline`), as rayon's
    /// scope runs its own jobs while it waits.
    pub(crate) fn wait_all(&self) {
        // Acquire: as below.
        while self.running.load(Ordering::Acquire) != 0 {
            if !purloin_sched::run_detached_inline(self.group()) {
                break;
            }
        }
        if self.running.load(Ordering::Acquire) == 0 {
            return;
        }
        let who = match purloin_sched::current() {
            Some(g) => Waiter::Green(g),
            None => Waiter::Os(std::thread::current()),
        };
        *self.waiter.lock().unwrap_or_else(|p| p.into_inner()) = Some(who);
        purloin_sched::set_wait_info(Some(purloin_sched::WaitInfo {
            kind: purloin_sched::WaitKind::Join,
            object: self as *const Self as usize,
            holder: None,
        }));
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
    state: Option<Arc<ScopeState>>,
}

impl Body {
    fn run(mut self) {
        let job = self.job.take().expect("a scoped body runs once");
        let panicked = job.run();
        drop(job);
        let state = self.state.take().expect("a scoped body runs once");
        state.finished(panicked);
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        drop(self.job.take());
        if let Some(state) = self.state.take() {
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
struct Finish {
    state: Arc<ScopeState>,
    started: bool,
    panicked: bool,
}

impl Drop for Finish {
    fn drop(&mut self) {
        if !self.started {
            self.state.unjoined_unstarted.fetch_add(1, Ordering::Relaxed);
        }
        self.state.finished(self.panicked);
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
/// As for [`spawn_scoped`].
pub(crate) unsafe fn spawn_scoped_detached<'a, F>(
    sched: Option<&Scheduler>,
    opts: SpawnOptions,
    state: &Arc<ScopeState>,
    f: F,
) -> std::io::Result<()>
where
    F: FnOnce() + Send + 'a,
{
    state.running.fetch_add(1, Ordering::Relaxed);
    let body = Detached {
        f: Some(f),
        finish: Finish { state: state.clone(), started: false, panicked: false },
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

/// Waits for the scope's green threads when dropped (every exit path of the owner).
pub(crate) struct WaitAll(pub(crate) Arc<ScopeState>);

impl Drop for WaitAll {
    fn drop(&mut self) {
        self.0.wait_all();
    }
}

/// One scoped green thread's closure and result slot, in one allocation shared by the green
/// thread (as a [`Job`]) and its handle (as a [`ResultSlot`]).
struct Scoped<F, T> {
    /// Taken once, by the green thread (`Job::run`).
    f: UnsafeCell<Option<F>>,
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
pub(crate) unsafe fn spawn_scoped<'a, F, T>(
    sched: Option<&Scheduler>,
    opts: SpawnOptions,
    state: &Arc<ScopeState>,
    f: F,
) -> std::io::Result<ScopedParts<'a, T>>
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let scoped = Arc::new(Scoped { f: UnsafeCell::new(Some(f)), result: Mutex::new(None) });
    let packet: Arc<dyn ResultSlot<T> + 'a> = scoped.clone();
    let job: Arc<dyn Job + 'a> = scoped;
    // SAFETY: only the lifetime changes. The closure's borrows live for 'a, and 'a outlives
    // the green thread's use of `job`: the caller waits (WaitAll) until `finished` ran, which
    // is after `Body` dropped `job` (Safety section above).
    let job: Arc<dyn Job + 'static> =
        unsafe { core::mem::transmute::<Arc<dyn Job + 'a>, Arc<dyn Job + 'static>>(job) };
    state.running.fetch_add(1, Ordering::Relaxed);
    let body = Body { job: Some(job), state: Some(state.clone()) };
    let spawned = match sched {
        Some(s) => s.spawn_with(opts, move || body.run()),
        None => purloin_sched::spawn_with(opts, move || body.run()),
    };
    match spawned {
        Ok(handle) => {
            Ok(ScopedParts { handle, packet, state: state.clone(), _borrow: PhantomData })
        }
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
    state: Arc<ScopeState>,
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
        take_result(&*packet, &state)
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

/// A scope for spawning green threads that borrow (see [`scope`]).
pub struct Scope<'scope, 'env: 'scope> {
    state: Arc<ScopeState>,
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
    parts: ScopedParts<'scope, T>,
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
        self.parts.join()
    }

    /// Whether it has finished.
    pub fn is_finished(&self) -> bool {
        self.parts.is_finished()
    }

    /// Its handle.
    pub fn thread(&self) -> &GreenThread {
        self.parts.thread()
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
        let ScopedParts { handle, packet, state, _borrow } = self.parts;
        ScopedJoinFuture { inner: handle.into_future(), packet, state, _borrow }
    }
}

/// The future of a [`ScopedJoinHandle`] (see its [`IntoFuture`](core::future::IntoFuture)
/// impl).
#[must_use = "futures do nothing unless polled"]
pub struct ScopedJoinFuture<'scope, T> {
    inner: purloin_sched::JoinFuture<()>,
    packet: Arc<dyn ResultSlot<T> + 'scope>,
    state: Arc<ScopeState>,
    _borrow: PhantomData<&'scope ()>,
}

impl<T> core::future::Future for ScopedJoinFuture<'_, T> {
    type Output = ThreadResult<T>;

    fn poll(
        self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<ThreadResult<T>> {
        let this = self.get_mut();
        match core::pin::Pin::new(&mut this.inner).poll(cx) {
            core::task::Poll::Pending => core::task::Poll::Pending,
            core::task::Poll::Ready(Err(e)) => {
                // The awaiter sees this error: it no longer makes the scope panic.
                this.state.unjoined_unstarted.fetch_sub(1, Ordering::Relaxed);
                core::task::Poll::Ready(Err(e))
            }
            core::task::Poll::Ready(Ok(())) => {
                core::task::Poll::Ready(take_result(&*this.packet, &this.state))
            }
        }
    }
}

impl<T> core::fmt::Debug for ScopedJoinFuture<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScopedJoinFuture").field("finished", &self.inner.is_finished()).finish()
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
    /// it, and if it panics, [`scope`] panics after joining all. Without a handle there is no
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
        // SAFETY: `scope` holds a WaitAll for `self.state` until after 'scope ends.
        let parts = unsafe { spawn_scoped(sched, opts, &self.state, f) }?;
        Ok(ScopedJoinHandle { parts })
    }
}

/// Creates a scope for spawning green threads that borrow non-`'static` data, like
/// [`std::thread::scope`]: every green thread spawned in it is joined before `scope` returns,
/// and if any of them panicked (and was not joined), `scope` panics after joining all. So
/// does a green thread that never ran (its stack could not be leased, or the runtime shut
/// down first); joining its handle returns that error instead.
///
/// From a green thread the scope's threads run on the same runtime; from a plain thread, on
/// the global runtime.
///
/// # Examples
///
/// ```
/// let mut data = vec![1, 2, 3];
/// let total = purloin::scope(|s| {
///     let (a, b) = data.split_at_mut(1);
///     let h = s.spawn(|| a.iter().sum::<i32>());
///     b[0] += 10; // mutate another part meanwhile
///     h.join().unwrap() + b.iter().sum::<i32>()
/// });
/// assert_eq!(total, 1 + 12 + 3);
/// data.push(4);
/// ```
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let sched = if purloin_sched::in_green_thread() {
        SchedRef::Current
    } else {
        let rt = crate::rt::global();
        rt.check_usable();
        SchedRef::Runtime(rt.scheduler())
    };
    let scope = Scope { state: ScopeState::new(), sched, _scope: PhantomData, _env: PhantomData };
    let wait = WaitAll(scope.state.clone());
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

/// Runs `a` and `b` potentially in parallel and returns both results (fork-join, like
/// `rayon::join`): `b` becomes a green thread other workers can steal, `a` runs right here,
/// and if nobody took `b` meanwhile it runs here too, inline (join-helping). Both may borrow.
/// A panic in either is resumed after both finished. Called from a plain OS thread, it runs
/// the fork-join on the global runtime and blocks until both finished.
///
/// # Examples
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 2 { return n }
///     let (a, b) = purloin::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// assert_eq!(purloin::Runtime::run(|| fib(20)), 6765);
/// ```
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    // Allocation-free fork-join: `b` waits on our stack, `a` runs here. A `b` stolen by
    // another worker has green-locals of its own, freed by the scheduler when it ends
    // (`Builder::locals_destructor`). Off the runtime, both run on the global runtime
    // (`join_or_else` finds out with the lookup the fork needs anyway).
    purloin_sched::join_or_else(a, b, |a, b| {
        crate::rt::global().block_on(|| purloin_sched::join(a, b))
    })
}
