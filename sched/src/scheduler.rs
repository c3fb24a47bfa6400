//! The scheduler handle: starting it, spawning on it, observing it, shutting it down (the
//! steps are in `shutdown`).

use core::panic::Location;
use std::io;
use std::sync::Arc as StdArc;
use std::time::Duration;

use crate::builder::{Builder, SpawnOptions};
use crate::g::{self, SpawnSite};
use crate::join::JoinHandle;
use crate::outside::OutsidePermit;
use crate::registry::for_each_parked;
use crate::shared::{Config, PHASE_DRAINING, PHASE_STOPPED, Shared};
use crate::shutdown::{drain_queues, stop_workers, unwind_remaining, wait_all_done};
use crate::stats::{Stats, stats_of};
use crate::sync::{Arc, Ordering, lock};
use crate::task::{DetachedCell, TaskCell};
use crate::worker::{self, current_worker};

impl Scheduler {
    /// Starts the workers and the monitor of a validated configuration (`Builder::build`).
    pub(crate) fn start(config: Config) -> io::Result<Scheduler> {
        #[cfg(not(loom))]
        {
            purloin_stack::overflow::install_handler()?;
            if purloin_context::valgrind::running_on_valgrind() {
                // purloin-stack may not issue client requests (only purloin-context contains
                // assembly): it calls this hook for every slot it hands out.
                let _ = purloin_stack::valgrind::set_stack_register_hook(register_with_valgrind);
            }
        }
        // Green threads stamp their changes of state with the coarse clock from the first
        // spawn on: it must tell the time by then (`clock`).
        crate::clock::refresh();
        let shared = Arc::new(Shared::new(config));
        for p in 0..shared.active().len() {
            if let Err(e) = worker::start_worker(&shared, p) {
                stop_workers(&shared);
                return Err(e);
            }
        }
        let monitor = if shared.config.monitor { start_monitor(&shared)? } else { None };
        #[cfg(not(loom))]
        let number = crate::dump::register(&shared);
        #[cfg(loom)]
        let number = 0;
        Ok(Scheduler { shared, monitor, number })
    }
}

/// Registers a stack slot with valgrind for good (slots are never unmapped).
#[cfg(not(loom))]
fn register_with_valgrind(start: *mut u8, end: *mut u8) {
    core::mem::forget(purloin_context::valgrind::StackRegistration::new(start, end));
}

#[cfg(not(loom))]
fn start_monitor(shared: &Arc<Shared>) -> io::Result<Option<std::thread::JoinHandle<()>>> {
    let parker = purloin_parking::Parker::new();
    let handle = crate::blocking::MonitorHandle::new(parker.unparker());
    let _ = shared.monitor.set(handle);
    let s = shared.clone();
    std::thread::Builder::new()
        .name(format!("{}-monitor", shared.config.thread_name))
        .spawn(move || crate::blocking::monitor_main(s, parker))
        .map(Some)
        .map_err(|e| io::Error::new(e.kind(), format!("could not start the monitor thread: {e}")))
}

#[cfg(loom)]
fn start_monitor(_shared: &Arc<Shared>) -> io::Result<Option<std::thread::JoinHandle<()>>> {
    Ok(None)
}

/// A running G/M/P scheduler. Dropping it shuts it down: runnable green threads finish,
/// parked ones are unwound with [`ForcedUnwind`](crate::ForcedUnwind) so their destructors run
/// (see [`Scheduler::shutdown_timeout`]).
///
/// # Examples
///
/// ```
/// use purloin_sched::Scheduler;
///
/// let sched = Scheduler::new().unwrap();
/// let h = sched.spawn(|| 6 * 7);
/// assert_eq!(h.join().unwrap(), 42);
/// // Dropping the scheduler waits for its green threads.
/// drop(sched);
/// ```
pub struct Scheduler {
    pub(crate) shared: Arc<Shared>,
    monitor: Option<std::thread::JoinHandle<()>>,
    /// See [`Scheduler::number`].
    number: u64,
}

impl core::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Scheduler")
            .field("number", &self.number)
            .field("workers", &self.shared.active().len())
            .finish()
    }
}

/// What shutdown did.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// sched.spawn(|| ()).join().unwrap();
/// // Nothing was left: nothing had to be unwound.
/// let report = sched.shutdown_timeout(Duration::from_secs(1));
/// assert_eq!(report, purloin_sched::ShutdownReport::default());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Parked green threads that were resumed with a forced unwind.
    pub cancelled: usize,
    /// Green threads still alive when shutdown gave up (they never reached a scheduling
    /// point); their workers were detached.
    pub unfinished: usize,
    /// Parked green threads left parked for ever, because the program is built with
    /// `panic = "abort"` and unwinding them would abort it: their stacks and what they own are
    /// leaked, and their `JoinHandle`s never complete. Always 0 in unwinding builds.
    pub leaked: usize,
}

/// A parked green thread (see [`Scheduler::parked`]).
///
/// # Examples
///
/// ```
/// use purloin_sched::{SpawnOptions, WaitInfo, WaitKind};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let opts = SpawnOptions { name: Some("waiter".into()), ..SpawnOptions::default() };
/// let h = sched
///     .spawn_with(opts, || {
///         let me = purloin_sched::current().unwrap();
///         let info = WaitInfo { kind: WaitKind::Message, object: 0, holder: None };
///         me.set_own_wait_info(Some(info));
///         purloin_sched::park();
///     })
///     .unwrap();
/// let parked = loop {
///     match sched.parked().pop() {
///         Some(p) if p.wait.is_some() => break p,
///         _ => std::thread::yield_now(),
///     }
/// };
/// assert_eq!(parked.name.as_deref(), Some("waiter"));
/// assert_eq!(parked.wait.unwrap().kind, WaitKind::Message);
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct ParkedThread {
    /// Its handle.
    pub thread: crate::GreenThread,
    /// Its name, if it has one.
    pub name: Option<StdArc<str>>,
    /// What it waits on, if the primitive it parked in recorded it.
    pub wait: Option<crate::WaitInfo>,
    /// The child it was running inline (join-helping) when it parked: the wait is the
    /// child's.
    pub running_inline: Option<crate::GreenId>,
}

impl Scheduler {
    /// A scheduler with the default configuration (see [`Builder::new`]).
    ///
    /// # Errors
    /// The OS error if a worker thread cannot be started.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// assert_eq!(sched.spawn(|| 6 * 7).join().unwrap(), 42);
    /// ```
    pub fn new() -> io::Result<Scheduler> {
        Builder::new().build()
    }

    /// Number of processors.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().workers(2).build().unwrap();
    /// assert_eq!(sched.workers(), 2);
    /// ```
    pub fn workers(&self) -> usize {
        // The monitor's spare processors (`Builder::max_spare_workers`) are not counted.
        let spares = self.shared.spare_procs.load(Ordering::Relaxed);
        self.shared.active().len().saturating_sub(spares).max(1)
    }

    /// Changes the number of processors while the scheduler runs (Go's `procresize`, what
    /// `runtime.GOMAXPROCS(n)` does). Growing starts a worker per new processor. Shrinking
    /// stops the world for the removed processors: their workers finish the green thread they
    /// are running (green threads are not preempted), move their runnable green threads to the
    /// global queue and their timers to processor 0, and exit; this call returns when all of
    /// them have. Green threads are not lost and keep running on the remaining processors.
    ///
    /// # Errors
    /// `n` is 0 or above [`Builder::max_workers`]; a removed processor has pinned green
    /// threads (they may not change OS thread); the scheduler is shutting down; a worker thread
    /// cannot be started.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::Builder;
    ///
    /// let sched = Builder::new().workers(1).max_workers(4).build().unwrap();
    /// sched.set_workers(3).unwrap();
    /// assert_eq!(sched.workers(), 3);
    /// sched.set_workers(1).unwrap();
    /// assert_eq!(sched.workers(), 1);
    /// ```
    pub fn set_workers(&self, n: usize) -> io::Result<()> {
        let s = &self.shared;
        let _resize = lock(&s.resize.0);
        let max = s.ps.len() - s.config.max_spare_workers;
        if n == 0 || n > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "purloin-sched: set_workers({n}): use between 1 and max_workers ({max}); \
                     raise Builder::max_workers to grow further"
                ),
            ));
        }
        if !s.is_running() {
            return Err(io::Error::other(
                "purloin-sched: set_workers: the scheduler is shutting down",
            ));
        }
        let old = s.nprocs.load(Ordering::Acquire);
        // The monitor's spare processors (changed only under this lock) stay on top of `n`.
        let asked = n;
        let n = n + s.spare_procs.load(Ordering::Relaxed);
        if n > old {
            // A spare the monitor just removed may still be retiring: its P is reused only
            // once its worker let go of it (R2: the Acquire pairs with `retire`'s Release).
            let mut guard = _resize;
            while s.ps[old..n].iter().any(|p| p.status.load(Ordering::Acquire) != crate::p::RETIRED)
            {
                guard = match s.resize.1.wait_timeout(guard, Duration::from_millis(1)) {
                    Ok((g, _)) => g,
                    Err(e) => e.into_inner().0,
                };
            }
            let _resize = guard;
            for p in &s.ps[old..n] {
                p.status.store(crate::p::RUNNING, Ordering::Release);
            }
            s.idle.add_workers((n - old) as u32);
            s.nprocs.store(n, Ordering::Release);
            // An idle monitor must watch the new workers too (M1, `blocking`).
            s.monitor_kick_idle();
            for p in old..n {
                worker::start_worker(&self.shared, p)?;
            }
            return Ok(());
        }
        if let Some(i) = (n..old).find(|&i| s.ps[i].pinned.load(Ordering::Acquire) > 0) {
            return Err(io::Error::other(format!(
                "purloin-sched: set_workers({asked}): worker {i} has pinned green threads, which may \
                 not move to another OS thread; let them finish first"
            )));
        }
        // From here, no new work goes to processors n..old (spawns, steals and wake-ups only
        // see the active ones); their workers retire at their next scheduling point.
        s.nprocs.store(n, Ordering::Release);
        drop(_resize);
        for p in n..old {
            s.wake_worker(p);
        }
        let mut guard = lock(&s.resize.0);
        while (n..old).any(|i| s.ps[i].status.load(Ordering::Acquire) != crate::p::RETIRED) {
            for p in n..old {
                s.wake_worker(p);
            }
            guard = match s.resize.1.wait_timeout(guard, Duration::from_millis(10)) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        Ok(())
    }

    /// Spawns a green thread running `f`.
    ///
    /// # Errors
    /// The scheduler is shutting down (spawning from outside), or `opts` asks for an invalid
    /// stack size or one that cannot be mapped, or for a pinned spawn from outside a green
    /// thread of this scheduler.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::{Scheduler, SpawnOptions, StackSize};
    ///
    /// let sched = Scheduler::new().unwrap();
    /// let opts = SpawnOptions { stack_size: Some(StackSize::Small), ..SpawnOptions::default() };
    /// let h = sched.spawn_with(opts, || "small stack").unwrap();
    /// assert_eq!(h.join().unwrap(), "small stack");
    ///
    /// // An impossible stack is an error here, not a thread that never runs.
    /// let bad = SpawnOptions { stack_size: Some(StackSize::Bytes(0)), ..SpawnOptions::default() };
    /// assert!(sched.spawn_with(bad, || ()).is_err());
    /// ```
    #[track_caller]
    pub fn spawn_with<F, T>(&self, opts: SpawnOptions, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let at = Location::caller();
        if self.shared.config.max_outside_queued != usize::MAX && !on_own_worker(&self.shared) {
            let Some(permit) = OutsidePermit::take(&self.shared, true) else {
                return Err(shutting_down());
            };
            return spawn_on(
                &self.shared,
                opts,
                move || {
                    drop(permit);
                    f()
                },
                at,
            );
        }
        spawn_on(&self.shared, opts, f, at)
    }

    /// Spawns a green thread running `f` with default options unless that would exceed the
    /// bound on green threads submitted from outside and not yet started
    /// ([`Builder::max_outside_queued`]): then it returns [`TrySpawnError::Full`] with `f`,
    /// for the caller to shed or retry, where [`Scheduler::spawn`] would wait. From one of
    /// the scheduler's own green threads, or without a bound, it never reports `Full`.
    ///
    /// # Errors
    /// [`TrySpawnError::Full`] as above; [`TrySpawnError::Refused`] for the errors of
    /// [`Scheduler::spawn_with`] (the scheduler is shutting down).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::{Builder, TrySpawnError};
    ///
    /// let sched = Builder::new().workers(2).max_outside_queued(64).build().unwrap();
    /// let mut handles = Vec::new();
    /// let mut shed = 0;
    /// for i in 0..100u64 {
    ///     match sched.try_spawn(move || i) {
    ///         Ok(h) => handles.push(h),
    ///         Err(TrySpawnError::Full(_)) => shed += 1, // e.g. answer "busy" to this client
    ///         Err(e) => panic!("{e}"),
    ///     }
    /// }
    /// assert_eq!(handles.len() + shed, 100);
    /// handles.into_iter().for_each(|h| drop(h.join().unwrap()));
    /// ```
    #[track_caller]
    pub fn try_spawn<F, T>(&self, f: F) -> Result<JoinHandle<T>, TrySpawnError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_spawn_wrapped(f, |f| f)
    }

    /// [`Scheduler::try_spawn`] of `wrap(f)`, where `wrap` is applied only once the spawn is
    /// admitted, so that [`TrySpawnError::Full`] gives back the caller's own closure (for a
    /// layer above that wraps every green thread's body).
    #[doc(hidden)]
    #[track_caller]
    pub fn try_spawn_wrapped<F, G, T>(
        &self,
        f: F,
        wrap: impl FnOnce(F) -> G,
    ) -> Result<JoinHandle<T>, TrySpawnError<F>>
    where
        G: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let at = Location::caller();
        let opts = SpawnOptions::default();
        if self.shared.config.max_outside_queued != usize::MAX && !on_own_worker(&self.shared) {
            if !self.shared.is_running() {
                return Err(TrySpawnError::Refused(shutting_down()));
            }
            let Some(permit) = OutsidePermit::take(&self.shared, false) else {
                return Err(TrySpawnError::Full(f));
            };
            let g = wrap(f);
            let g = move || {
                drop(permit);
                g()
            };
            return spawn_on(&self.shared, opts, g, at).map_err(TrySpawnError::Refused);
        }
        spawn_on(&self.shared, opts, wrap(f), at).map_err(TrySpawnError::Refused)
    }

    /// Wakes parked workers for the green threads spawned with
    /// [`SpawnOptions::nosignal`] since the last flush (brpc's `bthread_flush`): one per
    /// green thread, up to every parked worker. Returns how many workers it woke.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::{Scheduler, SpawnOptions};
    ///
    /// let sched = Scheduler::new().unwrap();
    /// let quiet = SpawnOptions { nosignal: true, ..SpawnOptions::default() };
    /// // A batch queued without a wake-up each ...
    /// let batch: Vec<_> =
    ///     (0..8u64).map(|i| sched.spawn_with(quiet.clone(), move || i).unwrap()).collect();
    /// // ... and the workers woken for it once.
    /// sched.flush();
    /// assert_eq!(batch.into_iter().map(|h| h.join().unwrap()).sum::<u64>(), 28);
    /// ```
    pub fn flush(&self) -> usize {
        self.shared.flush()
    }

    /// Spawns a green thread running `f` with default options.
    ///
    /// # Panics
    /// If the scheduler is shutting down (use [`Scheduler::spawn_with`] to get the error).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let handles: Vec<_> = (0..100u64).map(|i| sched.spawn(move || i * i)).collect();
    /// let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(sum, 328_350);
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_with(SpawnOptions::default(), f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Spawns a green thread running `f` that nobody joins and that may borrow (no `'static`
    /// bound), as `std::thread::Builder::spawn_unchecked` does for OS threads. It needs no
    /// join handle and no result slot, so it costs less than [`Scheduler::spawn_with`] with
    /// the handle dropped. A panic of `f` is caught and dropped (after the panic hook
    /// reported it); `f` learns of its own end itself (it may count, or signal, in its body
    /// and in its `Drop`).
    ///
    /// `group` names the tasks one waiter waits for (any number the caller picks, e.g. the
    /// address of its count): while it waits, a green thread may run members of its group
    /// that have not started yet inline with [`run_detached_inline`](crate::run_detached_inline).
    ///
    /// # Errors
    /// The reasons of [`Scheduler::spawn_with`]; `f` has then been dropped, unrun.
    ///
    /// # Safety
    /// - `f` and everything it borrows must stay valid until `f` has been run or dropped. It
    ///   is run or dropped exactly once: dropped unrun if the spawn fails, if the green thread
    ///   cannot get a stack, or if the scheduler shuts down before it starts. The caller
    ///   learns of that end only through `f` (its body and its `Drop`), so it must wait for a
    ///   signal sent from there before it lets the borrowed data go.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::mpsc;
    /// use purloin_sched::{Scheduler, SpawnOptions};
    ///
    /// let sched = Scheduler::new().unwrap();
    /// let flag = AtomicBool::new(false);
    /// let (tx, rx) = mpsc::channel::<()>();
    /// let flag_ref = &flag;
    /// // SAFETY: `flag` outlives the green thread: we wait below until `tx` (captured by the
    /// // closure) is dropped, which is after the closure's last use of `flag_ref`.
    /// unsafe {
    ///     sched.spawn_detached_unchecked(SpawnOptions::default(), 0, move || {
    ///         let _tx = tx;
    ///         flag_ref.store(true, Ordering::Relaxed);
    ///     })
    /// }
    /// .unwrap();
    /// assert!(rx.recv().is_err()); // every sender dropped: the closure is gone
    /// assert!(flag.load(Ordering::Relaxed));
    /// ```
    #[track_caller]
    pub unsafe fn spawn_detached_unchecked<F>(
        &self,
        opts: SpawnOptions,
        group: usize,
        f: F,
    ) -> io::Result<()>
    where
        F: FnOnce() + Send,
    {
        let here = current_worker();
        if self.shared.config.max_outside_queued != usize::MAX
            && !here.is_some_and(|m| Arc::ptr_eq(&m.shared, &self.shared))
        {
            let Some(permit) = OutsidePermit::take(&self.shared, true) else {
                drop(f);
                return Err(shutting_down());
            };
            let task = DetachedCell::allocate(group, move || {
                drop(permit);
                f()
            });
            return spawn_detached_on(here, &self.shared, opts, task, Location::caller());
        }
        let task = DetachedCell::allocate(group, f);
        spawn_detached_on(here, &self.shared, opts, task, Location::caller())
    }

    /// [`spawn_grouped_unchecked`](crate::spawn_grouped_unchecked) on this scheduler (from
    /// any thread).
    ///
    /// # Errors
    /// The reasons of [`Scheduler::spawn_with`]; `f` has then been dropped, unrun.
    ///
    /// # Safety
    /// As for [`spawn_grouped_unchecked`](crate::spawn_grouped_unchecked).
    #[track_caller]
    pub unsafe fn spawn_grouped_unchecked<F, T>(
        &self,
        opts: SpawnOptions,
        group: usize,
        f: F,
    ) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let at = Location::caller();
        if self.shared.config.max_outside_queued != usize::MAX && !on_own_worker(&self.shared) {
            let Some(permit) = OutsidePermit::take(&self.shared, true) else {
                drop(f);
                return Err(shutting_down());
            };
            let (task, packet) = TaskCell::allocate_in(Some(group), move || {
                drop(permit);
                f()
            });
            return spawn_cell(current_worker(), &self.shared, opts, task, packet, at);
        }
        let (task, packet) = TaskCell::allocate_in(Some(group), f);
        spawn_cell(current_worker(), &self.shared, opts, task, packet, at)
    }

    /// A snapshot of the counters (cheap: relaxed loads, no locks except small ones).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::Builder;
    ///
    /// let sched = Builder::new().workers(1).build().unwrap();
    /// sched.spawn(|| ()).join().unwrap();
    /// let stats = sched.stats();
    /// assert_eq!(stats.procs.len(), 1);
    /// assert!(stats.total.switches >= 1);
    /// ```
    pub fn stats(&self) -> Stats {
        stats_of(&self.shared)
    }

    /// This scheduler's number in the process: 1 for the first one started, 2 for the next,
    /// and so on (never reused). Dumps carry it ([`Dump::scheduler`](crate::Dump::scheduler)),
    /// so that a dump of every scheduler ([`dump_all`](crate::dump_all)) tells them apart.
    ///
    /// # Examples
    ///
    /// ```
    /// let a = purloin_sched::Scheduler::new().unwrap();
    /// let b = purloin_sched::Scheduler::new().unwrap();
    /// assert!(b.number() > a.number());
    /// assert_eq!(a.dump().scheduler, a.number());
    /// ```
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The green threads of this scheduler that are parked now, with what each waits on (a
    /// racy snapshot, for diagnostics and deadlock reports).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(purloin_sched::park);
    /// while sched.parked().is_empty() {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(sched.parked()[0].thread.id(), h.thread().id());
    /// h.thread().unpark();
    /// h.join().unwrap();
    /// ```
    pub fn parked(&self) -> Vec<ParkedThread> {
        parked_of(&self.shared)
    }
}

fn parked_of(shared: &Arc<Shared>) -> Vec<ParkedThread> {
    let mut out = Vec::new();
    for_each_parked(Arc::as_ptr(shared), |gref, generation| {
        let inline = gref.inline_child_id.load(crate::sync::STAT);
        out.push(ParkedThread {
            thread: crate::GreenThread { g: gref, generation },
            name: gref.name(),
            wait: crate::thread::wait_info_of(gref),
            running_inline: (inline != 0).then_some(crate::GreenId(inline)),
        });
    });
    out
}

impl Scheduler {
    /// Asks a green thread of this scheduler to unwind, as shutdown does: if it is parked it
    /// resumes at once, and its `park` (or next one) panics with
    /// [`ForcedUnwind`](crate::ForcedUnwind), running its destructors; its joiner receives the
    /// payload as `Err`. Returns false if the green thread has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::{Builder, ForcedUnwind};
    ///
    /// let sched = Builder::new().workers(1).build().unwrap();
    /// let h = sched.spawn(|| loop {
    ///     purloin_sched::park();
    /// });
    /// while sched.parked().is_empty() {
    ///     std::thread::yield_now();
    /// }
    /// assert!(sched.cancel(h.thread()));
    /// let payload = h.join().unwrap_err();
    /// assert!(payload.is::<ForcedUnwind>());
    /// ```
    pub fn cancel(&self, thread: &crate::GreenThread) -> bool {
        match thread.g.cancel(thread.generation) {
            g::Unparked::Queue => {
                let id = thread.id();
                crate::hook::emit(move || crate::hook::Event::Unpark { id, by: None });
                self.shared.push_global(thread.g);
                true
            }
            g::Unparked::Noted | g::Unparked::Forward => true,
            g::Unparked::Stale => false,
        }
    }

    /// Whether nothing can make progress by itself: every worker is parked, no green thread is
    /// queued, no timer is pending, no I/O is awaited, yet green threads are alive (parked).
    /// Only a wake-up from outside the scheduler (a plain OS thread) could change that; the
    /// runtime's deadlock detector uses it (Go's `checkdead`).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
    /// let h = sched.spawn(purloin_sched::park); // parked, and nobody inside will wake it
    /// while !sched.is_quiescent() {
    ///     std::thread::yield_now();
    /// }
    /// h.thread().unpark(); // a wake-up from outside
    /// h.join().unwrap();
    /// ```
    pub fn is_quiescent(&self) -> bool {
        self.shared.quiescent()
    }

    /// OS threads outside the scheduler that wait on one of its green threads now (in
    /// [`JoinHandle::join`], or holding an [`OutsideWait`](crate::OutsideWait)): with
    /// [`Scheduler::is_quiescent`], what tells a deadlock from green threads waiting for an OS
    /// thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// assert_eq!(sched.outside_waiters(), 0);
    /// let guard = sched.outside_wait();
    /// assert_eq!(sched.outside_waiters(), 1);
    /// drop(guard);
    /// assert_eq!(sched.outside_waiters(), 0);
    /// ```
    pub fn outside_waiters(&self) -> usize {
        crate::outside::count(Arc::as_ptr(&self.shared))
    }

    /// How many OS threads of this process could still wake one of this scheduler's green
    /// threads from outside it: every thread except this scheduler's workers and monitor, the
    /// OS threads waiting on it ([`Scheduler::outside_waiters`]), the runtime's helper threads
    /// ([`helper_thread`](crate::helper_thread)) and the stack scavenger. `None` where the
    /// process's threads cannot be listed (off Linux).
    ///
    /// With [`Scheduler::is_quiescent`], what makes a deadlock certain (Go's `checkdead`
    /// counts its M's the same way): every green thread is parked with no timer, I/O wait or
    /// blocking section to wake it, and no thread is left that could. A program's own threads,
    /// a tokio runtime's, or a signal dispatcher's might send on a channel or unpark a green
    /// thread at any time, so while one exists nothing is certain.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let other = std::thread::spawn(|| std::thread::park());
    /// // On Linux, once the scheduler's own threads have started: this thread and `other`.
    /// # let settled = |want| (0..10_000).any(|_| { std::thread::yield_now(); sched.unknown_threads() == want });
    /// assert!(sched.unknown_threads().is_none() || settled(Some(2)));
    /// other.thread().unpark();
    /// other.join().unwrap();
    /// ```
    pub fn unknown_threads(&self) -> Option<usize> {
        crate::outside::unknown_threads(Arc::as_ptr(&self.shared))
    }

    /// Marks the calling OS thread, while the guard lives, as one that waits on this
    /// scheduler without counting it among [`Scheduler::outside_waiters`] (a `block_on` that
    /// watches for a deadlock itself): it is not among the
    /// [`Scheduler::unknown_threads`] that could wake a green thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let mark = sched.mark_waiting_thread();
    /// // On Linux, once the scheduler's own threads have started, no thread is left that
    /// // could wake a green thread: this one is marked as waiting on the scheduler.
    /// # let settled = |want| (0..10_000).any(|_| { std::thread::yield_now(); sched.unknown_threads() == want });
    /// assert!(sched.unknown_threads().is_none() || settled(Some(0)));
    /// assert_eq!(sched.outside_waiters(), 0);
    /// drop(mark);
    /// ```
    pub fn mark_waiting_thread(&self) -> crate::ThreadMark {
        crate::outside::mark_own_thread(Arc::as_ptr(&self.shared))
    }

    /// Counts the calling OS thread as waiting on a green thread of this scheduler while the
    /// guard lives (for waits the layer above implements, such as a scope's owner).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// sched.spawn(move || tx.send("done").unwrap());
    /// // This thread now waits for a green thread by a means the scheduler cannot see.
    /// let _waiting = sched.outside_wait();
    /// assert_eq!(rx.recv().unwrap(), "done");
    /// ```
    pub fn outside_wait(&self) -> crate::OutsideWait {
        crate::OutsideWait::new(Arc::as_ptr(&self.shared))
    }

    /// Attaches data of the layer above to this scheduler, readable from its green threads
    /// with [`with_user_data`]. Can be set once; returns the data back if already set.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// sched.set_user_data(Arc::new(String::from("config"))).unwrap();
    /// assert!(sched.set_user_data(Arc::new(0u8)).is_err()); // set once
    /// let seen = sched.spawn(|| {
    ///     purloin_sched::with_user_data(|d| d.and_then(|d| d.downcast_ref::<String>()).cloned())
    /// });
    /// assert_eq!(seen.join().unwrap().as_deref(), Some("config"));
    /// ```
    pub fn set_user_data(
        &self,
        data: StdArc<dyn core::any::Any + Send + Sync>,
    ) -> Result<(), StdArc<dyn core::any::Any + Send + Sync>> {
        self.shared.user_data.set(data)
    }

    /// Installs the I/O poller the workers poll (the runtime's netpoller).
    pub fn set_poller(&self, poller: StdArc<dyn crate::Poller>) {
        self.shared.poller.install(poller);
    }

    /// Shuts down, waiting at most `timeout` for runnable green threads to finish before
    /// unwinding the parked ones (and as long again for those to finish).
    ///
    /// The steps: (1) spawns from outside start failing; green threads may still spawn;
    /// (2) runnable green threads run to completion, until none is alive, or `timeout`, or
    /// nothing pending can wake the rest ([`Scheduler::is_quiescent`]);
    /// (3) every parked green thread is resumed with a forced unwind, repeatedly (a destructor
    /// may park again), until none is alive or a second timeout; (4) every worker is woken,
    /// leaves its loop and is joined, and the monitor stops. Green threads that never reached a
    /// scheduling point are counted in [`ShutdownReport::unfinished`] and their workers are left
    /// running (detached) rather than hanging the caller.
    ///
    /// # Panics
    /// If called from one of this scheduler's own green threads (it would wait for itself).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use purloin_sched::Scheduler;
    ///
    /// let sched = Scheduler::new().unwrap();
    /// let parked = sched.spawn(|| loop {
    ///     purloin_sched::park();
    /// });
    /// while sched.parked().is_empty() {
    ///     std::thread::yield_now();
    /// }
    /// let report = sched.shutdown_timeout(Duration::from_millis(100));
    /// assert_eq!(report.cancelled, 1);
    /// assert!(parked.join().is_err());
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) -> ShutdownReport {
        self.shutdown_inner(timeout)
    }

    fn shutdown_inner(&mut self, timeout: Duration) -> ShutdownReport {
        let shared = self.shared.clone();
        if shared.phase.load(Ordering::Acquire) == PHASE_STOPPED {
            return ShutdownReport::default();
        }
        if current_worker().is_some_and(|m| Arc::ptr_eq(&m.shared, &shared)) {
            panic!(
                "purloin-sched: a scheduler cannot be shut down from one of its own green \
                 threads (it would wait for itself); drop it from the thread that owns it"
            );
        }
        // Off the process's list first: a dump of every scheduler (`dump_all`) in progress is
        // let finish, and none starts, while this one stops.
        #[cfg(not(loom))]
        crate::dump::unregister(&shared);
        shared.phase.store(PHASE_DRAINING, Ordering::Release);
        shared.wake_all();
        let mut report = ShutdownReport::default();
        if !wait_all_done(&shared, timeout) {
            (report.cancelled, report.unfinished, report.leaked) =
                unwind_remaining(&shared, timeout);
        }
        shared.phase.store(PHASE_STOPPED, Ordering::Release);
        stop_workers(&shared);
        shared.monitor_stop.store(true, Ordering::Release);
        if let Some(mon) = shared.monitor.get() {
            mon.unparker.unpark();
        }
        if let Some(h) = self.monitor.take() {
            let _ = h.join();
        }
        if report.unfinished == 0 {
            let threads = core::mem::take(&mut *lock(&shared.threads));
            for t in threads {
                let _ = t.join();
            }
            drain_queues(&shared, true);
        } else {
            // The workers of the green threads that never yield are detached, but what is
            // queued behind them is failed with `Cancelled`, so its joiners do not wait
            // forever; only the stuck green threads themselves stay unfinished.
            drain_queues(&shared, false);
            report.unfinished = shared.live().saturating_sub(report.leaked);
        }
        // Nothing fires timers any more: drop them now (a ticker's channel disconnects even
        // though its `Timer` handle keeps this scheduler's shared state alive).
        for p in shared.ps.iter() {
            p.timers.clear();
        }
        report
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if std::thread::panicking()
            && current_worker().is_some_and(|m| Arc::ptr_eq(&m.shared, &self.shared))
        {
            // Unwinding from `shutdown_timeout`'s panic on one of our own green threads: a
            // second panic here would abort. The scheduler keeps running (leaked).
            return;
        }
        if self.shared.phase.load(Ordering::Acquire) != PHASE_STOPPED {
            let report = self.shutdown_inner(Duration::from_secs(5));
            if report.unfinished > 0 {
                eprintln!(
                    "purloin: {} green threads did not finish at shutdown (they never reached \
                     a scheduling point); their worker threads were detached",
                    report.unfinished
                );
            }
        }
    }
}

/// Whether the calling thread is one of `shared`'s workers (a submission from it is not an
/// outside one).
fn on_own_worker(shared: &Arc<Shared>) -> bool {
    current_worker().is_some_and(|m| Arc::ptr_eq(&m.shared, shared))
}

/// The error of a spawn from outside a scheduler that is shutting down.
fn shutting_down() -> io::Error {
    io::Error::other(
        "cannot spawn: the runtime is shutting down (spawn before dropping the runtime, or from \
         one of its green threads)",
    )
}

/// Why [`Scheduler::try_spawn`] did not spawn.
pub enum TrySpawnError<F> {
    /// The bound on green threads submitted from outside and not yet started
    /// ([`Builder::max_outside_queued`]) is reached; here is the closure back, unrun. Shed
    /// the work (answer "busy"), or try again once some have started.
    Full(F),
    /// The scheduler refused the spawn (it is shutting down); the closure was dropped.
    Refused(io::Error),
}

impl<F> TrySpawnError<F> {
    /// Whether the bound was reached ([`TrySpawnError::Full`]).
    pub fn is_full(&self) -> bool {
        matches!(self, TrySpawnError::Full(_))
    }
}

impl<F> core::fmt::Debug for TrySpawnError<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TrySpawnError::Full(_) => f.write_str("Full(..)"),
            TrySpawnError::Refused(e) => f.debug_tuple("Refused").field(e).finish(),
        }
    }
}

impl<F> core::fmt::Display for TrySpawnError<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TrySpawnError::Full(_) => f.write_str(
                "purloin-sched: too many green threads submitted from outside the runtime are \
                 waiting to start (the bound set with Builder::max_outside_queued); shed this \
                 work, try again once some have started, or raise the bound",
            ),
            TrySpawnError::Refused(e) => e.fmt(f),
        }
    }
}

impl<F> std::error::Error for TrySpawnError<F> {}

impl<F> From<TrySpawnError<F>> for io::Error {
    /// `Full` becomes [`io::ErrorKind::WouldBlock`] with the same message.
    fn from(e: TrySpawnError<F>) -> io::Error {
        match e {
            TrySpawnError::Full(_) => io::Error::new(io::ErrorKind::WouldBlock, e.to_string()),
            TrySpawnError::Refused(e) => e,
        }
    }
}

/// Wakes parked workers for the green threads spawned with [`SpawnOptions::nosignal`] on the
/// scheduler running the current green thread (see [`Scheduler::flush`]). Returns how many
/// workers it woke; 0 outside a green thread.
///
/// # Examples
///
/// ```
/// use purloin_sched::{Scheduler, SpawnOptions};
///
/// let sched = Scheduler::new().unwrap();
/// let total = sched.spawn(|| {
///     let quiet = SpawnOptions { nosignal: true, ..SpawnOptions::default() };
///     let kids: Vec<_> = (0..4u64)
///         .map(|i| purloin_sched::spawn_with(quiet.clone(), move || i).unwrap())
///         .collect();
///     purloin_sched::flush();
///     kids.into_iter().map(|k| k.join().unwrap()).sum::<u64>()
/// });
/// assert_eq!(total.join().unwrap(), 6);
/// ```
pub fn flush() -> usize {
    current_worker().map_or(0, |m| m.shared.flush())
}

/// Spawns on `shared` (the body of every spawn function); `at` is the spawn's place in the
/// source, shown by dumps.
pub(crate) fn spawn_on<F, T>(
    shared: &Arc<Shared>,
    opts: SpawnOptions,
    f: F,
    at: SpawnSite,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (task, packet) = TaskCell::allocate(f);
    let inline_stack = if opts.pinned || opts.stack_size.is_some() {
        None
    } else {
        Some(shared.config.stack_size.bytes())
    };
    // Before `spawn_g`: an urgent spawn switches, after which `shared` (possibly borrowed from
    // the spawning worker) is not to be used.
    let sched = Arc::as_ptr(shared);
    let (thread, lazy) = match crate::ready::spawn_lazy(shared, &opts, task, at) {
        Ok(()) => (std::sync::OnceLock::new(), true),
        // On an error `task` is dropped unrun (its packet completes with `Cancelled`) and so
        // is `packet`, which then frees the cell.
        Err(task) => {
            let t = crate::ready::spawn_g(shared, crate::stackless::Body::Green(task), &opts, at)?;
            (std::sync::OnceLock::from(t), false)
        }
    };
    Ok(JoinHandle { task: packet, thread, lazy, sched, inline_stack, registered: None })
}

/// [`spawn_on`] for a closure already in its cell, from `here`, the calling thread's worker
/// as its caller looked it up (`None`: not a worker); inlined into the scoped spawn, whose
/// default options fold.
#[inline(always)]
fn spawn_cell<T>(
    here: Option<&crate::worker::M>,
    shared: &Arc<Shared>,
    opts: SpawnOptions,
    task: crate::task::OwnedTask,
    packet: crate::task::PacketRef<T>,
    at: SpawnSite,
) -> io::Result<JoinHandle<T>> {
    let inline_stack = if opts.pinned || opts.stack_size.is_some() {
        None
    } else {
        Some(shared.config.stack_size.bytes())
    };
    // Before `spawn_g`: an urgent spawn switches, after which `shared` (possibly borrowed from
    // the spawning worker) is not to be used.
    let sched = Arc::as_ptr(shared);
    let (thread, lazy) = match crate::ready::spawn_lazy_from(here, shared, &opts, task, at) {
        Ok(()) => (std::sync::OnceLock::new(), true),
        // On an error `task` is dropped unrun (its packet completes with `Cancelled`) and so
        // is `packet`, which then frees the cell.
        Err(task) => {
            let t = crate::ready::spawn_g(shared, crate::stackless::Body::Green(task), &opts, at)?;
            (std::sync::OnceLock::from(t), false)
        }
    };
    Ok(JoinHandle { task: packet, thread, lazy, sched, inline_stack, registered: None })
}

/// Spawns a green thread running `f`, which may borrow (no `'static` bound), as a member of
/// `group` (as [`spawn_detached_unchecked`] does), and returns its handle: the handle joins
/// it for its result as any [`JoinHandle`] does; once the handle is dropped unjoined, the
/// green thread is a detached member of its group, which a waiter for the group may run
/// inline ([`run_detached_inline_while`](crate::run_detached_inline_while)). This is a
/// scope's spawn with a handle (`std::thread::Scope::spawn`'s shape).
///
/// # Errors
/// Not on a green thread, or the reasons of [`Scheduler::spawn_with`]; `f` has then been
/// dropped, unrun.
///
/// # Safety
/// - `f` and everything it borrows must stay valid until `f` has been run or dropped, which
///   happens exactly once; the caller learns of it only through `f` (its body and its
///   `Drop`) or through the handle, as for [`spawn_detached_unchecked`].
/// - `f`'s result is dropped by whoever frees the green thread's cell: the handle's join
///   (which returns it), or, once the handle was dropped unjoined, the scheduler, at some
///   point after `f` returned. A result that must not be dropped that late (one whose `Drop`
///   uses what `f` borrowed) must be taken by a join.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_sched::{Scheduler, SpawnOptions};
///
/// let sched = Scheduler::new().unwrap();
/// let total = sched.spawn(|| {
///     let done = AtomicUsize::new(0);
///     let group = &done as *const AtomicUsize as usize;
///     let d = &done;
///     // SAFETY: `done` outlives the green thread: it is joined before this closure returns,
///     // and its result (a u32) has nothing to drop.
///     let h = unsafe {
///         purloin_sched::spawn_grouped_unchecked(SpawnOptions::default(), group, move || {
///             d.fetch_add(1, Ordering::SeqCst);
///             7u32
///         })
///     }
///     .unwrap();
///     h.join().unwrap()
/// });
/// assert_eq!(total.join().unwrap(), 7);
/// ```
#[inline]
#[track_caller]
pub unsafe fn spawn_grouped_unchecked<F, T>(
    opts: SpawnOptions,
    group: usize,
    f: F,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let Some(m) = current_worker() else {
        drop(f);
        return Err(io::Error::other(
            "purloin-sched: spawn() outside a green thread has no scheduler to use; call \
             Scheduler::spawn_grouped_unchecked on a Scheduler (or use the purloin facade, \
             which starts one)",
        ));
    };
    let (task, packet) = TaskCell::allocate_in(Some(group), f);
    spawn_cell(Some(m), &m.shared, opts, task, packet, Location::caller())
}

/// Spawns a detached task on `shared`: lazily if it may be, else with a G. `here` is the
/// calling thread's worker, looked up by the caller (`None`: not a worker). Inlined into the
/// spawn, so that constant options (the default ones of a scope's spawn) fold.
#[inline(always)]
fn spawn_detached_on(
    here: Option<&crate::worker::M>,
    shared: &Arc<Shared>,
    opts: SpawnOptions,
    task: crate::task::OwnedTask,
    at: SpawnSite,
) -> io::Result<()> {
    if let Err(task) = crate::ready::spawn_lazy_from(here, shared, &opts, task, at) {
        // On an error `task` is dropped unrun (its closure with it).
        crate::ready::spawn_g(shared, crate::stackless::Body::Green(task), &opts, at)?;
    }
    Ok(())
}

/// [`Scheduler::spawn_detached_unchecked`] on the scheduler running the current green thread.
///
/// # Errors
/// Not on a green thread, or the reasons of [`Scheduler::spawn_with`]; `f` has then been
/// dropped, unrun.
///
/// # Safety
/// As for [`Scheduler::spawn_detached_unchecked`].
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_sched::{Scheduler, SpawnOptions};
///
/// let sched = Scheduler::new().unwrap();
/// let n = sched.spawn(|| {
///     static RAN: AtomicUsize = AtomicUsize::new(0);
///     // SAFETY: the closure borrows nothing.
///     unsafe {
///         purloin_sched::spawn_detached_unchecked(SpawnOptions::default(), 0, || {
///             RAN.fetch_add(1, Ordering::Relaxed);
///         })
///     }
///     .unwrap();
///     while RAN.load(Ordering::Relaxed) == 0 {
///         purloin_sched::yield_now();
///     }
///     RAN.load(Ordering::Relaxed)
/// });
/// assert_eq!(n.join().unwrap(), 1);
/// // Outside a green thread there is no scheduler to spawn on.
/// // SAFETY: as above.
/// assert!(unsafe { purloin_sched::spawn_detached_unchecked(SpawnOptions::default(), 0, || ()) }
///     .is_err());
/// ```
#[inline]
#[track_caller]
pub unsafe fn spawn_detached_unchecked<F>(opts: SpawnOptions, group: usize, f: F) -> io::Result<()>
where
    F: FnOnce() + Send,
{
    let Some(m) = current_worker() else {
        drop(f);
        return Err(io::Error::other(
            "purloin-sched: spawn() outside a green thread has no scheduler to use; call \
             Scheduler::spawn_detached_unchecked on a Scheduler (or use the purloin facade, \
             which starts one)",
        ));
    };
    spawn_detached_on(
        Some(m),
        &m.shared,
        opts,
        DetachedCell::allocate(group, f),
        Location::caller(),
    )
}

/// Spawns on the scheduler running the current green thread.
///
/// # Errors
/// Not on a green thread (use [`Scheduler::spawn_with`] from plain threads), or the reasons of
/// [`Scheduler::spawn_with`].
///
/// # Examples
///
/// ```
/// use purloin_sched::{Scheduler, SpawnOptions};
///
/// let sched = Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let child = purloin_sched::spawn_with(SpawnOptions::default(), || 1).unwrap();
///     child.join().unwrap() + 1
/// });
/// assert_eq!(h.join().unwrap(), 2);
/// // Outside a green thread there is no scheduler to spawn on.
/// assert!(purloin_sched::spawn_with(SpawnOptions::default(), || ()).is_err());
/// ```
#[track_caller]
pub fn spawn_with<F, T>(opts: SpawnOptions, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let Some(m) = current_worker() else {
        return Err(io::Error::other(
            "purloin-sched: spawn() outside a green thread has no scheduler to use; call \
             Scheduler::spawn on a Scheduler (or use the purloin facade, which starts one)",
        ));
    };
    // No clone of the Arc: a read-modify-write of the scheduler's shared reference count on
    // every spawn would bounce its cache line between the workers.
    spawn_on(&m.shared, opts, f, Location::caller())
}

/// Calls `f` with the data attached (by [`Scheduler::set_user_data`]) to the scheduler running
/// the current green thread, or with `None` outside a green thread (or if none was attached).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use purloin_sched::Scheduler;
///
/// let sched = Scheduler::new().unwrap();
/// sched.set_user_data(Arc::new(String::from("config"))).unwrap();
/// let h = sched.spawn(|| {
///     purloin_sched::with_user_data(|d| d.and_then(|d| d.downcast_ref::<String>()).cloned())
/// });
/// assert_eq!(h.join().unwrap().as_deref(), Some("config"));
/// ```
pub fn with_user_data<R>(f: impl FnOnce(Option<&(dyn core::any::Any + Send + Sync)>) -> R) -> R {
    match current_worker() {
        Some(m) => f(m.shared.user_data.get().map(|a| &**a)),
        None => f(None),
    }
}

/// A snapshot of the counters of the scheduler running the current green thread (or whose
/// worker runs this code), or `None` elsewhere.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// assert!(purloin_sched::current_stats().is_none());
/// assert!(sched.spawn(|| purloin_sched::current_stats().is_some()).join().unwrap());
/// ```
pub fn current_stats() -> Option<Stats> {
    current_worker().map(|m| stats_of(&m.shared))
}

/// The parked green threads of the scheduler running the current green thread (see
/// [`Scheduler::parked`]), or `None` outside a worker.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// assert!(purloin_sched::current_parked().is_none());
/// let n = sched.spawn(|| purloin_sched::current_parked().unwrap().len()).join().unwrap();
/// assert_eq!(n, 0);
/// ```
pub fn current_parked() -> Option<Vec<ParkedThread>> {
    current_worker().map(|m| parked_of(&m.shared))
}
