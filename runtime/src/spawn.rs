//! Starting green threads from anywhere: [`spawn`] as easy as `go`, [`Builder`] for names,
//! stack sizes and pinning, shaped like `std::thread`, [`scope`] for green threads that
//! borrow, and [`join`] for fork-join. From a green thread they use its runtime; from a plain
//! thread, the global one (`rt`). What a scope is and how it waits is `scope`.

use std::io;

use purloin_sched::{JoinHandle, SpawnOptions, StackSize, TrySpawnError};

use crate::Scope;

/// Spawns a green thread running `f` and returns a handle to join it.
///
/// Works anywhere: from a green thread it spawns on the same runtime (into the worker's local
/// queue); from a plain thread or `main` it spawns on the global runtime, which starts on first
/// use with one worker per CPU.
///
/// # Examples
///
/// ```
/// let h = purloin::spawn(|| 6 * 7);
/// assert_eq!(h.join().unwrap(), 42);
/// ```
///
/// # Panics
/// If the runtime is shutting down, or the global runtime cannot start (use
/// [`Builder::spawn`] to get these as errors).
#[track_caller]
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    spawn_with_options(SpawnOptions::default(), f).unwrap_or_else(|e| panic!("purloin::spawn: {e}"))
}

/// The body of [`spawn`] and [`Builder::spawn`] (without the builder's labels, which a plain
/// spawn does not carry).
#[track_caller]
#[inline]
fn spawn_with_options<F, T>(opts: SpawnOptions, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let f = crate::local::with_locals(f);
    if purloin_sched::in_green_thread() {
        purloin_sched::spawn_with(opts, f)
    } else if opts.pinned {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a pinned green thread can only be spawned from a green thread (it is pinned to the \
             spawner's worker)",
        ))
    } else {
        let rt = crate::rt::global();
        rt.check_not_forked()?;
        rt.scheduler().spawn_with(opts, f)
    }
}

/// Spawns a green thread and switches to it at once; the caller is re-queued and continues
/// when a worker picks it up again (brpc's `start_urgent`: lower latency for the new green
/// thread). From a plain thread it is the same as [`spawn`].
///
/// # Examples
///
/// ```
/// let answer = purloin::Runtime::run(|| {
///     // The child runs before this line continues (the parent waits in the queue).
///     let h = purloin::spawn_urgent(|| purloin::current().unwrap().id());
///     let child = h.thread().id();
///     assert_eq!(h.join().unwrap(), child);
///     42
/// });
/// assert_eq!(answer, 42);
/// ```
///
/// # Panics
/// As [`spawn`].
#[track_caller]
pub fn spawn_urgent<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let mut b = Builder::new();
    b.opts.urgent = true;
    b.spawn(f).unwrap_or_else(|e| panic!("purloin::spawn_urgent: {e}"))
}

/// Spawns a green thread running `f` unless the runtime's bound on green threads submitted
/// from outside and not yet started is reached
/// ([`runtime::Builder::max_outside_queued`](crate::runtime::Builder::max_outside_queued)):
/// then it gives `f` back in [`TrySpawnError::Full`], for the caller to shed (answer "busy")
/// or retry, where [`spawn`] would wait for room. From a green thread it spawns on that
/// green thread's runtime and is never refused as full (only outside submissions are
/// bounded); from a plain thread, on the global runtime.
///
/// # Errors
/// [`TrySpawnError::Full`] as above; [`TrySpawnError::Refused`] with the error of
/// [`Builder::spawn`] otherwise.
///
/// # Examples
///
/// ```
/// use purloin::TrySpawnError;
///
/// let rt = purloin::runtime::Builder::new().max_outside_queued(1000).build().unwrap();
/// // A server's accept loop: shed what the runtime cannot start soon enough.
/// let mut served = Vec::new();
/// for request in 0..100u32 {
///     match rt.try_spawn(move || request * 2) {
///         Ok(h) => served.push(h),
///         Err(TrySpawnError::Full(_)) => { /* reply "busy" */ }
///         Err(e) => panic!("{e}"),
///     }
/// }
/// assert!(served.into_iter().all(|h| h.join().unwrap() % 2 == 0));
/// // Without a bound (the global runtime's default), nothing is refused as full.
/// assert_eq!(purloin::try_spawn(|| 7).unwrap().join().unwrap(), 7);
/// ```
#[track_caller]
pub fn try_spawn<F, T>(f: F) -> Result<JoinHandle<T>, TrySpawnError<F>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if purloin_sched::in_green_thread() {
        purloin_sched::spawn_with(SpawnOptions::default(), crate::local::with_locals(f))
            .map_err(TrySpawnError::Refused)
    } else {
        let rt = crate::rt::global();
        if let Err(e) = rt.check_not_forked() {
            return Err(TrySpawnError::Refused(e));
        }
        rt.scheduler().try_spawn_wrapped(f, crate::local::with_locals)
    }
}

/// Wakes workers for the green threads spawned with [`Builder::nosignal`] since the last
/// flush (brpc's `bthread_flush`): one parked worker per green thread, up to every parked
/// one. From a green thread it flushes that green thread's runtime; from a plain thread, the
/// global runtime, if it has started. Returns how many workers it woke.
///
/// # Examples
///
/// See [`Builder::nosignal`].
pub fn flush() -> usize {
    if purloin_sched::in_green_thread() {
        purloin_sched::flush()
    } else {
        crate::current::global_scheduler().map_or(0, |s| s.flush())
    }
}

/// Configures a green thread before spawning it, like [`std::thread::Builder`].
///
/// # Examples
///
/// ```
/// use purloin::{Builder, StackSize};
///
/// let h = Builder::new()
///     .name("worker-1".into())
///     .stack_size(StackSize::Large) // deep recursion ahead
///     .spawn(|| purloin::current().unwrap().name())
///     .unwrap();
/// assert_eq!(h.join().unwrap().as_deref(), Some("worker-1"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Builder {
    opts: SpawnOptions,
    labels: Option<crate::labels::Labels>,
}

impl Builder {
    /// Default options: unnamed, the runtime's default stack size, not pinned.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the green thread (shown by `current().name()`, overflow and deadlock reports).
    ///
    /// Takes a `String`, as [`std::thread::Builder::name`] does, so that code written for
    /// std threads (`.name("worker".into())`, `.name(format!(..))`) builds unchanged.
    pub fn name(mut self, name: String) -> Builder {
        self.opts.name = Some(name.into());
        self
    }

    /// Stack size (default 128 KiB, see [`StackSize::default`]): a class (`Small` 32 KiB,
    /// `Normal` 1 MiB, `Large` 8 MiB) or bytes (a multiple of the page size;
    /// [`StackSize::at_least`] rounds up). An explicit size is allocated at spawn, so failures
    /// are errors of [`Builder::spawn`].
    pub fn stack_size(mut self, size: StackSize) -> Builder {
        self.opts.stack_size = Some(size);
        self
    }

    /// Pins the green thread to the spawner's worker: it never moves to another OS thread
    /// (Go's `LockOSThread`). Only possible from a green thread.
    ///
    /// # Examples
    ///
    /// ```
    /// purloin::Runtime::run(|| {
    ///     let h = purloin::Builder::new()
    ///         .pinned(true)
    ///         .spawn(|| {
    ///             let before = std::thread::current().id();
    ///             purloin::yield_now(); // a pinned thread resumes on the same OS thread
    ///             before == std::thread::current().id()
    ///         })
    ///         .unwrap();
    ///     assert!(h.join().unwrap());
    /// });
    ///
    /// // Outside a green thread there is no spawner's worker to pin to.
    /// assert!(purloin::Builder::new().pinned(true).spawn(|| ()).is_err());
    /// ```
    pub fn pinned(mut self, pinned: bool) -> Builder {
        self.opts.pinned = pinned;
        self
    }

    /// Queues the green thread without waking an idle worker for it (brpc's
    /// `BTHREAD_NOSIGNAL`): a producer that spawns a batch wakes the workers once, with
    /// [`flush`], instead of once per spawn. Until the flush the batch runs only when a worker
    /// comes by for other reasons (the spawning green thread's own worker once it parks or
    /// yields, or a worker woken for other work), so always flush after the batch.
    ///
    /// # Examples
    ///
    /// ```
    /// purloin::Runtime::run(|| {
    ///     let batch: Vec<_> = (0..100u64)
    ///         .map(|i| purloin::Builder::new().nosignal(true).spawn(move || i).unwrap())
    ///         .collect();
    ///     purloin::flush(); // wake the idle workers for the whole batch at once
    ///     assert_eq!(batch.into_iter().map(|h| h.join().unwrap()).sum::<u64>(), 4950);
    /// });
    /// ```
    pub fn nosignal(mut self, nosignal: bool) -> Builder {
        self.opts.nosignal = nosignal;
        self
    }

    /// Adds the label `key` = `value` to the green thread (see [`labels`](mod@crate::labels)):
    /// it runs with the labels it inherits from its spawner plus these (these win for a key
    /// both have), and passes them on to the green threads it spawns.
    ///
    /// # Examples
    ///
    /// ```
    /// let h = purloin::Builder::new()
    ///     .label("route", "/login")
    ///     .label("tenant", 7)
    ///     .spawn(purloin::labels::current)
    ///     .unwrap();
    /// let labels = h.join().unwrap().unwrap();
    /// assert_eq!(labels.to_string(), "route=/login, tenant=7");
    /// ```
    pub fn label(mut self, key: impl std::fmt::Display, value: impl std::fmt::Display) -> Builder {
        let add = crate::labels::Labels::new([(key.to_string(), value.to_string())]);
        self.labels = Some(match self.labels {
            Some(l) => l.merged(&add),
            None => add,
        });
        self
    }

    /// Spawns the green thread.
    ///
    /// # Errors
    /// The runtime is shutting down; the stack size is invalid or cannot be mapped (the
    /// message names the cause and the fix); a pinned spawn outside a green thread; a spawn
    /// from outside in a child process forked after the global runtime started (its worker
    /// threads exist only in the parent).
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // The builder's labels are the spawner's for the spawn, which the child inherits as
        // any spawn does (the closure stays as it is: no cost without labels).
        let _labelled = self.labels.map(crate::labels::Region::enter);
        spawn_with_options(self.opts, f)
    }

    /// Spawns a scoped green thread (see [`scope`](crate::scope)) with these options.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut hits = 0;
    /// purloin::scope(|s| {
    ///     let h = purloin::Builder::new()
    ///         .name("counter".into())
    ///         .spawn_scoped(s, || hits += 1)
    ///         .unwrap();
    ///     h.join().unwrap();
    /// });
    /// assert_eq!(hits, 1);
    /// ```
    ///
    /// # Errors
    /// As [`Builder::spawn`].
    #[track_caller]
    pub fn spawn_scoped<'scope, 'env, F, T>(
        self,
        scope: &'scope crate::Scope<'scope, 'env>,
        f: F,
    ) -> io::Result<crate::ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let _labelled = self.labels.map(crate::labels::Region::enter);
        scope.spawn_with(self.opts, f)
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
    if purloin_sched::in_green_thread() {
        crate::scope::scope_on(None, f)
    } else {
        let rt = crate::rt::global();
        rt.check_usable();
        crate::scope::scope_on(Some(rt.scheduler()), f)
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
