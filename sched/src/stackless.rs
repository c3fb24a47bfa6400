//! Stackless tasks: units of work that run on the same processors, queues, stealing and
//! wake-ups as green threads, but without a stack of their own. A task is *stepped* on the
//! worker's own stack; between steps it waits (parked, like a green thread) until something
//! unparks it. This is what purloin's state-machine host (`purloin::machine`) runs on.

use core::any::Any;
use std::io;
use std::sync::Arc;

/// What a task asks for after a step.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use purloin_sched::{Scheduler, Task, TaskStep};
///
/// /// Waits until its flag is set (and it is unparked), then ends.
/// struct Latch(AtomicBool);
///
/// impl Task for Latch {
///     fn step(&self) -> TaskStep {
///         if self.0.load(Ordering::Acquire) { TaskStep::Done } else { TaskStep::Wait }
///     }
/// }
///
/// let sched = Scheduler::new().unwrap();
/// let latch = Arc::new(Latch(AtomicBool::new(false)));
/// let t = sched.spawn_task(latch.clone()).unwrap();
/// latch.0.store(true, Ordering::Release);
/// t.unpark();
/// while !t.is_finished() {
///     std::thread::yield_now();
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStep {
    /// Run me again after the other runnable work (re-queued at once).
    Yield,
    /// Park me until [`GreenThread::unpark`](crate::GreenThread::unpark) is called on my
    /// handle. An unpark that arrived *during* the step is not lost: the task runs again at
    /// once (the same token rule as [`park`](crate::park)).
    Wait,
    /// I am finished; the scheduler drops its reference to me.
    Done,
}

/// A stackless unit of work (see the module docs).
///
/// `step` runs on a worker thread's own stack and must not block it for long, and must not
/// call green-thread operations that switch ([`park`](crate::park),
/// [`yield_now`](crate::yield_now), joins): there is no green thread to switch out of — it
/// behaves like code on a plain OS thread. To wait, return [`TaskStep::Wait`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use purloin_sched::{Scheduler, Task, TaskStep};
///
/// /// Counts to three, one step per scheduling round.
/// struct Counter(AtomicU32);
///
/// impl Task for Counter {
///     fn step(&self) -> TaskStep {
///         let done = self.0.fetch_add(1, Ordering::Relaxed) + 1 == 3;
///         if done { TaskStep::Done } else { TaskStep::Yield }
///     }
/// }
///
/// let sched = Scheduler::new().unwrap();
/// let task = Arc::new(Counter(AtomicU32::new(0)));
/// let t = sched.spawn_task(task.clone()).unwrap();
/// while !t.is_finished() {
///     std::thread::yield_now();
/// }
/// assert_eq!(task.0.load(Ordering::Relaxed), 3);
/// ```
pub trait Task: Send + Sync + 'static {
    /// Does one step of work.
    fn step(&self) -> TaskStep;

    /// Called (instead of another step) when `step` panicked; the task is then finished.
    fn panicked(&self, payload: Box<dyn Any + Send>) {
        drop(payload);
    }

    /// Called instead of `step` once the scheduler asked the task to stop (shutdown, or
    /// [`Scheduler::cancel`](crate::Scheduler::cancel) on its handle). The default finishes it;
    /// a task may instead do a last step of cleanup, or keep going until it is done.
    fn cancel(&self) -> TaskStep {
        TaskStep::Done
    }
}

/// What a spawn runs.
pub(crate) enum Body {
    Green(crate::task::OwnedTask),
    Step(Arc<dyn Task>),
}

impl crate::Scheduler {
    /// Starts a stackless task. Its handle's [`unpark`](crate::GreenThread::unpark) makes it
    /// step again after it returned [`TaskStep::Wait`].
    ///
    /// # Errors
    /// The scheduler is shutting down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use purloin_sched::{Scheduler, Task, TaskStep};
    ///
    /// struct Hello;
    /// impl Task for Hello {
    ///     fn step(&self) -> TaskStep {
    ///         println!("one step, on a worker's own stack");
    ///         TaskStep::Done
    ///     }
    /// }
    ///
    /// let sched = Scheduler::new().unwrap();
    /// let t = sched.spawn_task(Arc::new(Hello)).unwrap();
    /// while !t.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// ```
    #[track_caller]
    pub fn spawn_task(&self, task: Arc<dyn Task>) -> io::Result<crate::GreenThread> {
        let at = core::panic::Location::caller();
        crate::ready::spawn_g(&self.shared, Body::Step(task), &crate::SpawnOptions::default(), at)
    }
}

/// Starts a stackless task on the scheduler running the current green thread.
///
/// # Errors
/// Not on a green thread or task worker, or the scheduler is shutting down.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use purloin_sched::{Task, TaskStep};
///
/// struct Once;
/// impl Task for Once {
///     fn step(&self) -> TaskStep {
///         TaskStep::Done
///     }
/// }
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| purloin_sched::spawn_task(Arc::new(Once)).is_ok());
/// assert!(h.join().unwrap());
/// // Outside a green thread there is no scheduler to start it on.
/// assert!(purloin_sched::spawn_task(Arc::new(Once)).is_err());
/// ```
#[track_caller]
pub fn spawn_task(task: Arc<dyn Task>) -> io::Result<crate::GreenThread> {
    let Some(m) = crate::worker::current_worker() else {
        return Err(io::Error::other(
            "purloin-sched: spawn_task() outside a worker has no scheduler to use; call \
             Scheduler::spawn_task",
        ));
    };
    let shared = m.shared.clone();
    let at = core::panic::Location::caller();
    crate::ready::spawn_g(&shared, Body::Step(task), &crate::SpawnOptions::default(), at)
}
