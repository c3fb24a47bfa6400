//! Fork-join on green threads: [`join`] runs two closures potentially in parallel, like
//! rayon's `join`, with work-first semantics (Cilk's and rayon's): the second closure becomes a green
//! thread in this worker's local queue (where idle workers can steal it), the first runs right
//! here, and at the join the second is taken back and run inline if nobody stole it.
//!
//! Nothing is allocated: the second closure and its result slot live in a [`StackJob`] on the
//! joiner's stack, and the local queue holds a tagged pointer to it — a *lazy G*. Only a worker
//! that dequeues the job (a thief, or this worker once the joiner parked) gives it a G record
//! and a stack; a job taken back by its joiner never has one, so the common fork costs a queue
//! push and pop and nothing else. The joiner never leaves
//! `join` before the job is done (it waits, also while unwinding), which is what makes lending
//! its stack frame to another worker sound.
//!
//! # Memory ordering
//!
//! The guarantee: the joiner sees the job's result, and the completer never touches the job
//! after the joiner may have left.
//!
//! - (F1) The completer writes the result, then publishes `DONE` (swap/CAS, AcqRel); the
//!   joiner's Acquire load of `DONE` pairs with it.
//! - (F2) A waiting joiner writes its handle into `waiter`, then CASes `PENDING => WAITING`
//!   (Release); the completer reads `WAITING` (Acquire), then the handle, *then* stores `DONE`:
//!   the joiner cannot return before `DONE`, so the handle is read while the frame is alive,
//!   and after `DONE` the completer only uses its copy of the handle.

use core::mem::MaybeUninit;
use core::ptr::NonNull;
use std::panic::{self, AssertUnwindSafe};
use std::thread::Result as ThreadResult;

use crate::GreenThread;
use crate::entry::Entry;
use crate::stats::bump;
use crate::sync::{AtomicU32, Ordering, UnsafeCell};
use crate::task::Runnable;
use crate::worker::{M, current_worker};

const PENDING: u32 = 0;
const WAITING: u32 = 1;
const DONE: u32 = 2;

/// A closure and its result slot, on the joiner's stack.
///
/// The result slot and the waiter are left uninitialised until written (so a job taken back,
/// the common case, never initialises or drops them): `result` holds a value from the
/// completer's write (before `DONE`) until the joiner takes it (`take_result`, or
/// `WaitFor`'s drop when `join` unwinds); `waiter` holds one from the joiner's write (before
/// `WAITING`) on, and is only read by a completer that saw `WAITING`.
struct StackJob<F, T> {
    f: UnsafeCell<Option<F>>,
    result: UnsafeCell<MaybeUninit<ThreadResult<T>>>,
    state: AtomicU32,
    waiter: UnsafeCell<MaybeUninit<GreenThread>>,
}

// SAFETY: `f` is taken once by whoever runs the job (the G's holder or the joiner inline);
// `result` is written before DONE and read after it (F1); `waiter` is written before WAITING and
// read after it (F2). F and T cross threads, hence the Send bounds.
unsafe impl<F: Send, T: Send> Sync for StackJob<F, T> {}

impl<F, T> StackJob<F, T> {
    fn new(f: F) -> Self {
        StackJob {
            f: UnsafeCell::new(Some(f)),
            result: UnsafeCell::new(MaybeUninit::uninit()),
            state: AtomicU32::new(PENDING),
            waiter: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    fn is_done(&self) -> bool {
        // Acquire pairs with the completer's publication of DONE (F1).
        self.state.load(Ordering::Acquire) == DONE
    }

    /// Parks the calling green thread until the job is done (`runner` is the job's G, for
    /// deadlock reports).
    fn wait(&self, runner: Option<crate::GreenId>) {
        let me = crate::current().expect("join waits on a green thread");
        if !self.register(me) {
            return;
        }
        crate::set_wait_info(Some(crate::WaitInfo {
            kind: crate::WaitKind::Join,
            object: self as *const Self as *const u8 as usize,
            holder: runner,
        }));
        while !self.is_done() {
            crate::park();
        }
        crate::set_wait_info(None);
    }

    /// Registers the joiner `me` as the job's waiter (F2). Returns false, registering nothing,
    /// if the job is done already (then the result is ready: F1).
    fn register(&self, me: GreenThread) -> bool {
        // SAFETY: only the joiner writes `waiter`, before publishing WAITING (F2).
        unsafe { self.waiter.with_mut(|w| *w = MaybeUninit::new(me)) };
        // Release publishes the waiter (F2); on failure the job is DONE (Acquire: F1).
        self.state.compare_exchange(PENDING, WAITING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Moves the result out.
    ///
    /// # Safety
    ///
    /// * The caller observed `DONE` (so the completer wrote the result and no longer touches
    ///   it, F1) and takes the result at most once.
    unsafe fn take_result(&self) -> ThreadResult<T> {
        // Relaxed: a check, not the hand-over (the caller's Acquire of DONE is, F1); an
        // Acquire here would order the result in the debug builds the models run and hide
        // a caller's missing one.
        debug_assert_eq!(self.state.load(Ordering::Relaxed), DONE);
        // SAFETY: written before DONE, which the caller observed (F1), and not taken before
        // (this function's contract).
        unsafe { self.result.with_mut(|r| (*r).assume_init_read()) }
    }

    fn complete(&self, result: ThreadResult<T>) {
        // SAFETY: only the completer writes `result`, once, before DONE (F1); the slot was
        // uninitialised, so nothing is overwritten without its drop.
        unsafe { self.result.with_mut(|r| *r = MaybeUninit::new(result)) };
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            let waiter = if cur == WAITING {
                // SAFETY: WAITING was observed (Acquire, F2), so `waiter` was written, and the
                // joiner cannot leave before DONE, so the frame is alive.
                Some(unsafe { self.waiter.with(|w| (*w).assume_init()) })
            } else {
                None
            };
            // AcqRel: Release publishes the result (F1).
            match self.state.compare_exchange(cur, DONE, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // From here on the joiner may be gone: use only the copied handle.
                    if let Some(w) = waiter {
                        w.unpark();
                    }
                    return;
                }
                Err(actual) => cur = actual,
            }
        }
    }
}

impl<F, T> StackJob<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    /// Runs the job on the joiner itself, when no other party can see it, and returns its
    /// result: no atomics, no result slot. The job stays PENDING; nobody else will look at it.
    ///
    /// # Safety
    ///
    /// * The caller took the job's queue entry back itself (so no other party dequeued it, and
    ///   the job has not run), and calls this once.
    #[inline(always)]
    unsafe fn run_exclusive(&self) -> ThreadResult<T> {
        // SAFETY: exclusive access, and `f` is still there: only `run` and `fail` take it, and
        // only a party that dequeued the entry calls them (this function's contract).
        let f = unsafe { self.f.with_mut(|f| (*f).take().unwrap_unchecked()) };
        panic::catch_unwind(AssertUnwindSafe(f))
    }
}

impl<F, T> Runnable for StackJob<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(&self) {
        // SAFETY: taken once, by the holder of the job's G (or the joiner that took it back).
        let Some(f) = (unsafe { self.f.with_mut(|f| (*f).take()) }) else { return };
        // The job runs as a green thread of its own: its locals end with it, before the
        // joiner sees the result (also when `f` unwinds; a destructor's panic is the job's).
        struct EndLocals;
        impl Drop for EndLocals {
            fn drop(&mut self) {
                crate::thread::destroy_current_locals();
            }
        }
        self.complete(panic::catch_unwind(AssertUnwindSafe(|| {
            let _end = EndLocals;
            f()
        })));
    }

    fn fail(&self, payload: Box<dyn core::any::Any + Send>) {
        // SAFETY: as in `run`.
        if unsafe { self.f.with_mut(|f| (*f).take()) }.is_some() {
            self.complete(Err(payload));
        }
    }
}

/// Waits for the job if `join` unwinds before joining it (a panic in the first closure is
/// caught, so this only guards against the unexpected: the frame must outlive the job), then
/// drops its result. The normal paths `forget` it.
struct WaitFor<'a, F, T>(&'a StackJob<F, T>);

impl<F, T> Drop for WaitFor<'_, F, T> {
    fn drop(&mut self) {
        if !self.0.is_done() {
            self.0.wait(None);
        }
        // SAFETY: DONE was observed above, and the normal paths, which take the result,
        // forget this guard first.
        drop(unsafe { self.0.take_result() });
    }
}

/// Runs `a` and `b` potentially in parallel and returns both results (see the module docs).
/// Both may borrow. A panic in either is resumed after both have finished.
///
/// On a plain OS thread (no scheduler to fork onto) it runs `a` then `b`.
///
/// # Examples
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 2 {
///         return n;
///     }
///     let (a, b) = purloin_sched::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// assert_eq!(sched.spawn(|| fib(15)).join().unwrap(), 610);
/// // On a plain thread it runs `a` then `b`.
/// assert_eq!(fib(10), 55);
/// ```
#[inline]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    join_or_else(a, b, |a, b| (a(), b()))
}

/// [`join`], except that on a thread that is not running a green thread it returns
/// `outside(a, b)` instead of running `a` then `b`: for a layer that has somewhere better to
/// run them (the `purloin` facade enters its global runtime). It tells the two cases apart with
/// the worker lookup `join` does anyway, so the caller needs no lookup of its own.
///
/// A green thread that cannot fork (inside a blocking section, where its worker has handed
/// its scheduler slot on) runs `a` then `b` itself, as [`join`] does; `outside` is not called.
///
/// # Examples
///
/// ```
/// use purloin_sched::join_or_else;
///
/// // On a plain thread: `outside` decides (here: run them in the other order).
/// let (a, b) = join_or_else(|| 1, || 2, |a, b| {
///     let rb = b();
///     (a(), rb)
/// });
/// assert_eq!((a, b), (1, 2));
///
/// // On a green thread: forks as `join` does; `outside` is not called.
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let r = sched.spawn(|| join_or_else(|| 3, || 4, |_, _| unreachable!())).join().unwrap();
/// assert_eq!(r, (3, 4));
/// ```
pub fn join_or_else<A, B, RA, RB, O>(a: A, b: B, outside: O) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
    O: FnOnce(A, B) -> (RA, RB),
{
    let Some(m) = current_worker().filter(|m| m.current.get().is_some()) else {
        return cold(|| outside(a, b));
    };
    let Some(held) = m.held() else {
        return cold(|| (a(), b()));
    };
    let job = StackJob::new(b);
    let dyn_job: &(dyn Runnable + '_) = &job;
    // SAFETY: only the lifetime is erased: `job` lives in this frame, and this function does
    // not return or unwind before the job is done (`WaitFor` below, and the explicit waits)
    // or was taken back from the queue (then no other party ever saw it).
    let ptr: NonNull<dyn Runnable> = unsafe {
        core::mem::transmute::<NonNull<dyn Runnable + '_>, NonNull<dyn Runnable + 'static>>(
            NonNull::from(dyn_job),
        )
    };
    // The queue entry points at `ptr` in this frame (a lazy G: a worker that dequeues it gives
    // it a G; see `entry`).
    let entry = Entry::job(NonNull::from(&ptr));
    bump(&held.p().stats.spawned);
    held.push_fork(entry);
    let guard = WaitFor(&job);
    let ra = panic::catch_unwind(AssertUnwindSafe(a));
    let rb = match take_back(entry, &job) {
        Some(rb) => {
            // Taken back and run here, unseen by any other party: nothing to wait for (the
            // job stays PENDING, and nobody looks at it again).
            core::mem::forget(guard);
            rb
        }
        None => {
            // Taken by another worker (or buried under entries `a` left in our queue): wait.
            // The job's G is made by whoever dequeues it, so its id is not known here.
            if !job.is_done() {
                job.wait(None);
            }
            core::mem::forget(guard);
            // SAFETY: DONE was observed (`is_done` or `wait`), and the result is taken once.
            unsafe { job.take_result() }
        }
    };
    match (ra, rb) {
        (Ok(ra), Ok(rb)) => (ra, rb),
        (Err(p), _) | (_, Err(p)) => panic::resume_unwind(p),
    }
}

/// Calls `f` out of line: keeps `join`'s rare paths from crowding its fork path (the fork's
/// own code, and `a`, inline into the caller).
#[cold]
#[inline(never)]
fn cold<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// At the join: takes the job back and runs it inline if it is still the newest entry of our
/// local queue (nobody dequeued it, so no G was made for it and nobody else can see it), and
/// returns its result; `None` if someone else has it.
#[inline(always)]
fn take_back<F, T>(entry: Entry, job: &StackJob<F, T>) -> Option<ThreadResult<T>>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    // `a` may have switched workers: find ours again.
    let held = current_worker().and_then(M::held)?;
    let p = held.p();
    // A join is a scheduling point, even when its job runs inline (the monitor's long-runner
    // check counts these ticks).
    p.schedtick.store(p.schedtick.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    // Our own entry on top (entries are unique: a job's entry is dequeued once, and its
    // slot's address is not reused before the job is done, so this also tells a job that
    // another worker took, or already finished, from one still queued): no other party can
    // run the job, so run it without the job's atomics. Anything else on top stays there.
    held.local().pop_if(|top| *top == entry)?;
    bump(&p.stats.inline_joins);
    // SAFETY: we just took the job's entry back, once.
    Some(unsafe { job.run_exclusive() })
}

/// Loom models of the job's hand-over (F1, F2) on the real code.
#[cfg(all(test, loom))]
mod loom_job {
    use super::*;
    use crate::registry::registry;
    use crate::sync::{Arc, thread};

    /// A job completed by another worker while its joiner looks for the result and registers
    /// as its waiter (the joiner's side of `join` after the take-back failed): the joiner
    /// takes the result once it saw `DONE` (F1: the completer's result write is ordered before
    /// the read, or loom reports the race), and a registered joiner is woken, the completer
    /// having read the handle the joiner wrote (F2: loom reports an unordered read of
    /// `waiter`). The joiner is a G record that stays `RUNNING`, so the wake-up leaves a token
    /// it can check. Mutation checks: the completer's CAS to `DONE` without Release, the
    /// joiner's load of `DONE` without Acquire, `register`'s CAS without Release, and the
    /// completer's load of `WAITING` (or its failed CAS) without Acquire, and `register`'s
    /// CAS without Acquire on failure (a job already done, F1) each fail this model (a
    /// causality violation).
    #[test]
    fn completion_racing_the_joiner() {
        loom::model(|| {
            let g = registry().alloc();
            let generation = g.prepare_spawn(0);
            assert!(g.claim_for_run());
            let job = Arc::new(StackJob::new(|| 7u32));
            let j2 = job.clone();
            // The worker that dequeued the job runs it.
            let completer = thread::spawn(move || j2.run());
            let registered = !job.is_done() && job.register(GreenThread { g, generation });
            if registered {
                while !job.is_done() {
                    thread::yield_now();
                }
            }
            // SAFETY: DONE was observed (by `is_done` or `register`'s failure), taken once.
            assert_eq!(unsafe { job.take_result() }.unwrap(), 7);
            completer.join().unwrap();
            if registered {
                assert!(g.take_notified(), "the registered joiner was not woken");
            }
        });
    }
}
