//! What a green thread can do to itself and to others: identify itself, yield, park and be
//! unparked, sleep.

use core::fmt;
use std::time::{Duration, Instant};

use crate::g::{self, GRef, InlineChild};
use crate::switch::{Action, switch_out_from};
use crate::worker::{self, current_worker};

/// A handle to a green thread: its identity, and the means to unpark it.
///
/// Cheap to copy. It stays valid after the green thread ends: operations on an ended green
/// thread are detected (its id's generation has moved on) and do nothing.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let flag = Arc::new(AtomicBool::new(false));
/// let f = flag.clone();
/// let h = sched.spawn(move || {
///     while !f.load(Ordering::Acquire) {
///         purloin_sched::park();
///     }
/// });
/// flag.store(true, Ordering::Release);
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct GreenThread {
    pub(crate) g: GRef,
    pub(crate) generation: u32,
}

/// A green thread's id: `generation << 32 | slot`, unique among the green threads alive at one
/// time, and never equal to the id of an earlier green thread that used the same slot.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let a = sched.spawn(|| ());
/// let b = sched.spawn(|| ());
/// assert_ne!(a.thread().id(), b.thread().id());
/// println!("spawned green thread {}", a.thread().id());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GreenId(pub u64);

impl fmt::Display for GreenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl GreenThread {
    /// This green thread's id.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| purloin_sched::current().unwrap().id());
    /// let id = h.thread().id();
    /// assert_eq!(h.join().unwrap(), id);
    /// ```
    pub fn id(&self) -> GreenId {
        GreenId(self.g.id_with(self.generation))
    }

    /// The name given at spawn, if any, while the green thread is alive (`None` after it
    /// ended).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::SpawnOptions;
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let opts = SpawnOptions { name: Some("poller".into()), ..SpawnOptions::default() };
    /// let h = sched.spawn_with(opts, purloin_sched::park).unwrap();
    /// assert_eq!(h.thread().name().as_deref(), Some("poller"));
    /// h.thread().unpark();
    /// let t = *h.thread();
    /// h.join().unwrap();
    /// while !t.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(t.name(), None); // ended
    /// ```
    pub fn name(&self) -> Option<std::sync::Arc<str>> {
        if !self.g.try_ref() {
            return None;
        }
        let name = if self.g.generation() == self.generation { self.g.name() } else { None };
        if self.g.drop_ref() {
            crate::registry::recycle_anywhere(self.g);
        }
        name
    }

    /// Where in the source it was spawned (the spawn functions are `#[track_caller]`): `None`
    /// for a fork-join job, and once it has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let (h, line) = (sched.spawn(purloin_sched::park), line!());
    /// assert_eq!(h.thread().spawned_at().unwrap().line(), line);
    /// h.thread().unpark();
    /// h.join().unwrap();
    /// ```
    pub fn spawned_at(&self) -> Option<&'static core::panic::Location<'static>> {
        if !self.g.try_ref() {
            return None;
        }
        let at = if self.g.generation() == self.generation { self.g.created_at() } else { None };
        if self.g.drop_ref() {
            crate::registry::recycle_anywhere(self.g);
        }
        at
    }

    /// Makes a [`park`]ed green thread runnable, or makes its next `park` return at once
    /// (a token, like [`std::thread::Thread::unpark`]). Returns `false` if the green thread
    /// has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(purloin_sched::park);
    /// let t = *h.thread();
    /// t.unpark(); // before or after it parks: either way its park returns
    /// h.join().unwrap();
    /// while !t.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// assert!(!t.unpark()); // it has ended
    /// ```
    pub fn unpark(&self) -> bool {
        crate::ready::unpark(self)
    }

    /// Interrupts the green thread, as brpc's `bthread_interrupt` does: the interruptible
    /// wait it is in (a channel operation, a sleep, a condition variable, I/O; each says so
    /// in its docs), or the next one it starts if it is running, returns an "interrupted"
    /// error instead of waiting. The interrupt is a flag, not a count: it is consumed by the
    /// one wait that returns the error. A wait that was woken by its event before the
    /// interrupt arrived returns that event and leaves the interrupt for the next wait (check
    /// with [`interrupted`]). Nothing unwinds: the thread decides what to do. Locks are not
    /// interruptible, as std's are not.
    ///
    /// Returns `false` if the green thread has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     // A wait loop that gives up when interrupted.
    ///     loop {
    ///         if purloin_sched::take_interrupt() {
    ///             return "interrupted";
    ///         }
    ///         purloin_sched::park();
    ///     }
    /// });
    /// h.thread().interrupt();
    /// assert_eq!(h.join().unwrap(), "interrupted");
    /// ```
    pub fn interrupt(&self) -> bool {
        crate::ready::interrupt(self, false)
    }

    /// Adds a held interrupt to the green thread (`on`), or takes one back: while it holds
    /// any, every interruptible wait returns "interrupted" at once, and nothing consumes them.
    /// This is what a cancelled cancellation token does to each green thread running in its
    /// scope (and takes back when the thread leaves the scope); holds count, so nested scopes
    /// of several cancelled tokens each take back only their own. Returns `false` if the
    /// green thread has ended.
    ///
    /// # Panics
    ///
    /// If the green thread would hold more than 255 interrupts.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     let me = purloin_sched::current().unwrap();
    ///     me.hold_interrupt(true);
    ///     let held = (purloin_sched::take_interrupt(), purloin_sched::take_interrupt());
    ///     me.hold_interrupt(false);
    ///     (held, purloin_sched::interrupted())
    /// });
    /// assert_eq!(h.join().unwrap(), ((true, true), false));
    /// ```
    pub fn hold_interrupt(&self, on: bool) -> bool {
        if on {
            crate::ready::interrupt(self, true)
        } else {
            self.g.clear_interrupt(self.generation, true);
            !self.is_finished()
        }
    }

    /// Whether an interrupt is pending or held on the green thread (without consuming it).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(purloin_sched::park);
    /// assert!(!h.thread().is_interrupted());
    /// h.thread().interrupt();
    /// h.join().unwrap(); // the interrupt woke the park; nothing consumed it
    /// ```
    #[inline]
    pub fn is_interrupted(&self) -> bool {
        self.g.interrupt_bits(self.generation) != 0
    }

    /// Whether the green thread holds an interrupt of a cancelled token (see
    /// [`hold_interrupt`](GreenThread::hold_interrupt)), as opposed to only a one-shot one.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     let me = purloin_sched::current().unwrap();
    ///     me.interrupt();
    ///     me.is_interrupt_held()
    /// });
    /// assert!(!h.join().unwrap());
    /// ```
    #[inline]
    pub fn is_interrupt_held(&self) -> bool {
        self.g.interrupt_bits(self.generation) & g::HOLD_MASK != 0
    }

    /// Consumes a pending interrupt of the green thread; returns whether one was pending or
    /// held (a held one stays).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     let me = purloin_sched::current().unwrap();
    ///     me.interrupt();
    ///     (me.take_interrupt(), me.take_interrupt())
    /// });
    /// assert_eq!(h.join().unwrap(), (true, false));
    /// ```
    pub fn take_interrupt(&self) -> bool {
        let bits = self.g.interrupt_bits(self.generation);
        if bits & g::INTERRUPT != 0 {
            self.g.clear_interrupt(self.generation, false);
        }
        bits != 0
    }

    /// Whether the green thread has ended: returned from its function and left its stack.
    /// The result reaches a joiner just before the green thread leaves its stack, so right
    /// after [`JoinHandle::join`](crate::JoinHandle::join) returns this may still be `false`
    /// for a moment; [`JoinHandle::is_finished`](crate::JoinHandle::is_finished) tells when
    /// the result is ready.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| ());
    /// let t = *h.thread();
    /// h.join().unwrap();
    /// while !t.is_finished() {
    ///     std::thread::yield_now(); // it is leaving its stack
    /// }
    /// ```
    pub fn is_finished(&self) -> bool {
        let w = self.g.state.load(crate::sync::Ordering::Acquire);
        g::generation_of(w) != self.generation || g::status_of(w) == g::DONE
    }

    /// How long the green thread has run on a worker so far, its current run included if it
    /// is running (brpc's `cputime_ns`); `None` once it has ended (read it from the thread
    /// itself, `current()`, before it returns, to keep its total).
    ///
    /// It is the time from each switch-in to the switch-out that follows, as the scheduler's
    /// coarse clock measures it (`clock`: one timestamp the monitor refreshes every 10 ms
    /// while workers run green threads), not a reading of the OS clock at every switch, which
    /// would cost each switch a clock read. So it is *sampled*, like a tick-based CPU
    /// profile: a run is charged the clock's advance during it, which is 0 for a run that no
    /// refresh fell into and a whole refresh interval for a short run that one did. Precisely,
    /// a run is charged its true length plus the clock's lag behind real time at its start
    /// minus the lag at its end, and a lag is between 0 and one refresh interval. Summed over
    /// many runs whose starts and ends fall independently of the refreshes the lags cancel on
    /// average, so the total estimates the time run without bias (each refresh's interval is
    /// charged to the runs it falls into, in proportion to their length); for a green thread
    /// that ran in total for less than a few refresh intervals the value is noise, and it may
    /// well be 0. A run that starts right after the clock was refreshed (a worker that woke
    /// from its park refreshes it) starts with no lag and tends to be undercharged. Without
    /// the monitor ([`Builder::monitor(false)`](crate::Builder::monitor)) the clock rarely
    /// advances while workers are busy, and the value undercounts.
    ///
    /// What counts as running: from switch-in to switch-out, including time in blocking
    /// sections (the OS thread may be blocked in a system call) and time the OS did not run
    /// the worker thread; it is time *on a worker*, as brpc's is, not the OS thread's CPU
    /// time. A child that its joiner runs inline (join-helping) runs on the joiner's record:
    /// its time is the joiner's. Stackless tasks are not timed.
    ///
    /// Read from another thread while the green thread changes state, the value may be off
    /// by the run that is changing (a racy read of two words), so it may also go back once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     for _ in 0..20 {
    ///         let start = Instant::now();
    ///         while start.elapsed() < Duration::from_millis(2) {
    ///             std::hint::spin_loop(); // busy for 2 ms
    ///         }
    ///         purloin_sched::yield_now();
    ///     }
    ///     purloin_sched::current().unwrap().cpu_time().unwrap()
    /// });
    /// // Coarse: within the clock's 10 ms refresh interval or so, more under load.
    /// println!("ran for about {:?}", h.join().unwrap());
    /// ```
    pub fn cpu_time(&self) -> Option<Duration> {
        self.read_record(|g| Duration::from_nanos(g.run_nanos()))
    }

    /// How many times the green thread was switched in so far (brpc's `nswitch`): its first
    /// run, and each resume after a park, a yield or a blocking section's hand-off (a yield
    /// that found nothing else to run and resumed at once counts too, as in
    /// [`ProcStats::switches`](crate::ProcStats::switches)). `None` once it has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
    /// let h = sched.spawn(|| {
    ///     for _ in 0..3 {
    ///         purloin_sched::yield_now();
    ///     }
    ///     purloin_sched::current().unwrap().switches().unwrap()
    /// });
    /// assert_eq!(h.join().unwrap(), 4); // the first run and three yields
    /// ```
    pub fn switches(&self) -> Option<u64> {
        self.read_record(|g| g.switches.load(crate::sync::STAT))
    }

    /// Runs `f` on the record while it holds this green thread (a reference taken, so it is
    /// not recycled meanwhile), or gives `None` once the green thread has ended.
    fn read_record<R>(&self, f: impl FnOnce(&g::G) -> R) -> Option<R> {
        if !self.g.try_ref() {
            return None;
        }
        let live = self.g.generation() == self.generation
            && g::status_of(self.g.state.load(crate::sync::Ordering::Relaxed)) != g::DONE;
        let r = live.then(|| f(&self.g));
        if self.g.drop_ref() {
            crate::registry::recycle_anywhere(self.g);
        }
        r
    }
}

impl fmt::Debug for GreenThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GreenThread").field("id", &self.id()).field("name", &self.name()).finish()
    }
}

/// The green thread running this code, or `None` on a plain OS thread.
///
/// While a joiner runs a child inline (join-helping), this is the child.
///
/// # Examples
///
/// ```
/// assert!(purloin_sched::current().is_none());
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| purloin_sched::current().unwrap().id());
/// let id = h.thread().id();
/// assert_eq!(h.join().unwrap(), id);
/// ```
pub fn current() -> Option<GreenThread> {
    let m = current_worker()?;
    let g = m.current.get()?;
    // SAFETY: the running G's own cells are touched only by itself (we are it).
    let inline = unsafe { g.inline_child.with(|c| *c) };
    Some(match inline {
        None => GreenThread { g, generation: g.generation() },
        Some(InlineChild::Thread(t)) => t,
        Some(InlineChild::Lazy(head)) => bind_inline_child(m, g, head),
    })
}

/// Makes the identity of the lazily spawned child that `host` (the running G) runs inline,
/// and makes it `host`'s inline child from now on.
fn bind_inline_child(
    m: &worker::M,
    host: GRef,
    head: core::ptr::NonNull<crate::task::CellHead>,
) -> GreenThread {
    // SAFETY: the joiner (`host`, running this code) keeps the cell alive while it runs the
    // child inline: its handle is in `join`.
    let identity = unsafe { &head.as_ref().identity };
    let child = identity.get(crate::sync::Arc::as_ptr(&m.shared), || m.alloc_g());
    // SAFETY: the running G's own cells are touched only by itself.
    unsafe { host.inline_child.with_mut(|c| *c = Some(InlineChild::Thread(child))) };
    host.inline_child_id.store(child.id().0, crate::sync::STAT);
    child
}

/// Whether an interrupt ([`GreenThread::interrupt`]) is pending or held on the calling green
/// thread, without consuming it. `false` on a plain OS thread.
///
/// # Examples
///
/// ```
/// assert!(!purloin_sched::interrupted());
/// ```
#[inline]
pub fn interrupted() -> bool {
    current().is_some_and(|t| t.is_interrupted())
}

/// Consumes a pending interrupt of the calling green thread ([`GreenThread::take_interrupt`]);
/// returns whether one was pending or held. `false` on a plain OS thread.
///
/// # Examples
///
/// ```
/// assert!(!purloin_sched::take_interrupt());
/// ```
pub fn take_interrupt() -> bool {
    current().is_some_and(|t| t.take_interrupt())
}

/// Whether this code runs on a green thread.
///
/// # Examples
///
/// ```
/// assert!(!purloin_sched::in_green_thread());
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// assert!(sched.spawn(purloin_sched::in_green_thread).join().unwrap());
/// ```
#[inline]
pub fn in_green_thread() -> bool {
    current_worker().is_some_and(|m| m.current.get().is_some())
}

/// Lets the worker run its other green threads before this one continues. On a plain OS
/// thread it yields the OS thread.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
/// let h = sched.spawn(|| {
///     for _ in 0..3 {
///         purloin_sched::yield_now(); // lets the worker's other green threads run
///     }
/// });
/// h.join().unwrap();
/// ```
pub fn yield_now() {
    match current_worker() {
        Some(m) if m.current.get().is_some() => {
            crate::switch::check_no_switch(m);
            let (m, was_blocking) = crate::blocking::pause_blocking(m);
            let m = switch_out_from(m, Action::Yield);
            after_resume_on(m);
            crate::blocking::resume_blocking(was_blocking);
        }
        _ => crate::sync::thread::yield_now(),
    }
}

/// A cooperative preemption point: yields (like [`yield_now`]) if the monitor asked the
/// calling green thread to, because it ran past the long-run threshold
/// ([`Builder::long_run_threshold`](crate::Builder::long_run_threshold)) without a scheduling
/// point; otherwise it costs a worker lookup and one load. Outside a green thread, in a
/// blocking section or inside a [`NoSwitch`](crate::NoSwitch) section it does nothing.
///
/// Operations that usually complete without waiting call it when they do (purloin's sockets
/// after a read or write that did not have to wait), so a loop of them cannot keep the other
/// green threads of its worker from running: a peer that floods a connection gets its handler
/// rotated with the rest, as tokio's cooperative budget and Go's preemption do. Call it in
/// your own loops of such operations.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let mut sum = 0u64;
///     for i in 0..1_000_000u64 {
///         sum = sum.wrapping_add(i);
///         purloin_sched::preemption_point(); // one load unless the monitor asked
///     }
///     sum
/// });
/// assert_eq!(h.join().unwrap(), 499_999_500_000);
/// ```
#[inline]
pub fn preemption_point() {
    let Some(m) = current_worker() else { return };
    if m.current.get().is_none() {
        return;
    }
    let Some(held) = m.held() else { return };
    if held.p().preempt.load(crate::sync::Ordering::Relaxed) {
        preempt(m, held.p());
    }
}

#[cold]
#[inline(never)]
fn preempt(m: &worker::M, p: &crate::p::P) {
    p.preempt.store(false, crate::sync::Ordering::Relaxed);
    // A NoSwitch section must not switch out: the request is dropped (the monitor makes it
    // again in its next round while the stretch goes on).
    let why = m.no_switch.get();
    if why.is_none() {
        yield_now();
    }
}

/// Blocks the current green thread until [`GreenThread::unpark`] is called on it (or returns
/// at once if a token is pending). Like [`std::thread::park`], it may also return spuriously:
/// call it in a loop that checks the condition you wait for. On a plain OS thread it parks the
/// OS thread.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let ready = Arc::new(AtomicBool::new(false));
/// let r = ready.clone();
/// let waiter = sched.spawn(move || {
///     // Park in a loop: a park may return spuriously, or at once for a pending token.
///     while !r.load(Ordering::Acquire) {
///         purloin_sched::park();
///     }
/// });
/// ready.store(true, Ordering::Release);
/// waiter.thread().unpark();
/// waiter.join().unwrap();
/// ```
pub fn park() {
    let Some(m) = current_worker().filter(|m| m.current.get().is_some()) else {
        crate::sync::thread::park();
        return;
    };
    crate::switch::check_no_switch(m);
    let (m, was_blocking) = crate::blocking::pause_blocking(m);
    let m = park_on(m);
    after_resume_on(m);
    crate::blocking::resume_blocking(was_blocking);
}

/// The green-thread side of [`park`] on worker `m`; returns the worker it resumed on.
fn park_on(m: &worker::M) -> &worker::M {
    park_on_unless::<0>(m).0
}

/// [`park_on`] that does not park if any of `FLAGS` is set on the running record (checked
/// with the load `begin_park` makes anyway); returns the worker and whether it did not park
/// because of them.
#[inline(always)]
fn park_on_unless<const FLAGS: u32>(m: &worker::M) -> (&worker::M, bool) {
    let g = m.current.get().expect("park_on runs on a green thread");
    if g.take_notified() {
        return (m, false);
    }
    if !g.begin_park_unless(FLAGS) {
        g.take_notified();
        return (m, FLAGS != 0 && g.interrupt_bits(g.generation()) & FLAGS != 0);
    }
    g.charge_and_stamp();
    crate::hook::emit(move || crate::hook::Event::Park {
        id: GreenId(g.id_with(g.generation())),
        wait: wait_info_of(g),
    });
    if m.time_parks {
        return (park_timed(m), false);
    }
    (switch_out_from(m, Action::Park), false)
}

/// [`park`] for an interruptible wait of `me`, the calling green thread's identity
/// ([`current`]): returns `true` at once, without parking, if `me` has a pending or held
/// interrupt ([`GreenThread::interrupt`]); otherwise parks like [`park`] (an interrupt that
/// arrives while it is parked wakes it) and returns `false`. The check costs nothing beyond
/// the load a park makes anyway. On a plain OS thread it parks the OS thread.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let me = purloin_sched::current().unwrap();
///     // A wait loop that gives up when interrupted (and consumes the interrupt).
///     while !purloin_sched::park_interruptible(&me) {}
///     me.take_interrupt()
/// });
/// h.interrupt();
/// assert!(h.join().unwrap());
/// ```
pub fn park_interruptible(me: &GreenThread) -> bool {
    let Some(m) = current_worker().filter(|m| m.current.get().is_some()) else {
        crate::sync::thread::park();
        return false;
    };
    crate::switch::check_no_switch(m);
    // A child run inline by its joiner parks the joiner's record; its own flags are on its
    // record (where `GreenThread::interrupt` puts them): look there.
    if m.current.get().is_some_and(|g| g != me.g) && me.is_interrupted() {
        return true;
    }
    let (m, was_blocking) = crate::blocking::pause_blocking(m);
    let (m, interrupted) = park_on_unless::<{ g::INTERRUPT | g::HOLD_MASK }>(m);
    after_resume_on(m);
    crate::blocking::resume_blocking(was_blocking);
    interrupted
}

/// [`park_interruptible`] with a deadline, as [`park_deadline`] is to [`park`].
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let me = purloin_sched::current().unwrap();
///     let deadline = Instant::now() + Duration::from_millis(2);
///     while Instant::now() < deadline {
///         if purloin_sched::park_deadline_interruptible(&me, deadline) {
///             return false; // interrupted
///         }
///     }
///     true
/// });
/// assert!(h.join().unwrap());
/// ```
pub fn park_deadline_interruptible(me: &GreenThread, deadline: Instant) -> bool {
    let Some(m) = current_worker().filter(|m| m.current.get().is_some()) else {
        let now = Instant::now();
        if deadline > now {
            park_os_timeout(deadline - now);
        }
        return false;
    };
    if Instant::now() >= deadline {
        return false;
    }
    let g = m.current.get().expect("on a green thread");
    let (p, seq) = add_timer(m, deadline, GreenThread { g, generation: g.generation() });
    let interrupted = park_interruptible(me);
    if let Some(m) = current_worker() {
        m.shared.ps[p].timers.delete(m.shared.epoch, seq);
    }
    interrupted
}

/// [`park_on`]'s switch out when the scheduler records park durations
/// ([`Builder::park_histogram`](crate::Builder::park_histogram)): timed with the OS clock from
/// the switch out to the resume, and recorded by the processor it resumes on. Out of line, so
/// a park without it pays only the branch on `time_parks`.
#[inline(never)]
fn park_timed(m: &worker::M) -> &worker::M {
    let start = Instant::now();
    let m = switch_out_from(m, Action::Park);
    let parked = start.elapsed();
    if let Some(h) = m.held() {
        h.p().park_durations.record(parked);
    }
    m
}

/// [`park`] with a deadline: returns at the latest shortly after `deadline` (or spuriously).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let deadline = Instant::now() + Duration::from_millis(5);
///     // Park until the deadline, ignoring spurious returns.
///     while Instant::now() < deadline {
///         purloin_sched::park_deadline(deadline);
///     }
/// });
/// h.join().unwrap();
/// ```
pub fn park_deadline(deadline: Instant) {
    let Some(m) = current_worker().filter(|m| m.current.get().is_some()) else {
        let now = Instant::now();
        if deadline > now {
            park_os_timeout(deadline - now);
        }
        return;
    };
    if Instant::now() >= deadline {
        return;
    }
    // The timer wakes the record that parks: the running one (the host, when it runs a child
    // inline).
    let g = m.current.get().expect("on a green thread");
    let (p, seq) = add_timer(m, deadline, GreenThread { g, generation: g.generation() });
    park();
    // A wait that ended before its deadline (an unpark, a spurious wake-up) deletes its
    // timer, so the heap holds only live timers (the first `m` may be stale: this
    // green thread may have resumed on another worker).
    if let Some(m) = current_worker() {
        m.shared.ps[p].timers.delete(m.shared.epoch, seq);
    }
}

/// [`park`] for at most `timeout`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let start = Instant::now();
///     // Nobody unparks it: it returns after the timeout (or spuriously: loop on a condition).
///     while start.elapsed() < Duration::from_millis(5) {
///         purloin_sched::park_timeout(Duration::from_millis(5));
///     }
/// });
/// h.join().unwrap();
/// ```
pub fn park_timeout(timeout: Duration) {
    match Instant::now().checked_add(timeout) {
        Some(deadline) => park_deadline(deadline),
        None => park(),
    }
}

/// Sleeps until `deadline`. On a green thread it parks (its worker runs other green threads);
/// on a plain OS thread it sleeps the OS thread.
///
/// A green thread's sleep ends early when it is interrupted ([`GreenThread::interrupt`], or
/// a cancelled token it runs under); the interrupt stays pending (see [`interrupted`]).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let deadline = Instant::now() + Duration::from_millis(2);
/// sched.spawn(move || purloin_sched::sleep_until(deadline)).join().unwrap();
/// assert!(Instant::now() >= deadline);
/// ```
pub fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let Some(me) = current() else {
            std::thread::sleep(deadline - now);
            continue;
        };
        if me.is_interrupted() {
            return;
        }
        set_wait_info(Some(WaitInfo { kind: WaitKind::Sleep, object: 0, holder: None }));
        park_deadline(deadline);
        set_wait_info(None);
    }
}

/// Sleeps for `duration` (see [`sleep_until`]; an interrupt ends it early).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let start = Instant::now();
///     purloin_sched::sleep(Duration::from_millis(2)); // parks; the worker runs others
///     start.elapsed()
/// });
/// assert!(h.join().unwrap() >= Duration::from_millis(2));
/// ```
pub fn sleep(duration: Duration) {
    match Instant::now().checked_add(duration) {
        Some(deadline) => sleep_until(deadline),
        None => {
            while !interrupted() {
                park();
            }
        }
    }
}

/// The record of the running green thread (the host when running a child inline).
pub(crate) fn running_g() -> Option<GRef> {
    current_worker()?.current.get()
}

/// Adds a timer waking `g` at `deadline`; returns the P whose heap holds it and its sequence
/// (for the deletion when the wait ends).
fn add_timer(m: &worker::M, deadline: Instant, g: GreenThread) -> (usize, u64) {
    let wake = crate::timer_heap::Action::Wake(g);
    if let Some(h) = m.held() {
        (m.p.get(), h.p().timers.add(m.shared.epoch, deadline, wake))
    } else {
        // In a blocking section (or without a P): use P 0's heap; its holder or a searcher
        // fires it. A timer never needs the P's owner-only parts.
        let seq = m.shared.ps[0].timers.add(m.shared.epoch, deadline, wake);
        m.shared.wake_worker(0);
        (0, seq)
    }
}

#[cfg(not(loom))]
fn park_os_timeout(d: Duration) {
    std::thread::park_timeout(d);
}
#[cfg(loom)]
fn park_os_timeout(_d: Duration) {
    // loom has no time; a timed park may return at once (a spurious wake-up).
}

/// After a green thread resumes from a yield or park: honour a shutdown's request to unwind.
fn after_resume_on(m: &worker::M) {
    let Some(g) = m.current.get() else { return };
    if g.is_cancelled() && !std::thread::panicking() {
        // Unwind the green thread's stack so its destructors run; its entry catches this.
        std::panic::resume_unwind(Box::new(crate::ForcedUnwind));
    }
}

/// The panic payload a green thread unwinds with when its runtime shuts down while it is
/// parked. Its joiner receives it as `Err`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| loop {
///     purloin_sched::park();
/// });
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// sched.shutdown_timeout(Duration::from_millis(10));
/// assert!(h.join().unwrap_err().is::<purloin_sched::ForcedUnwind>());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ForcedUnwind;

impl fmt::Display for ForcedUnwind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the green thread was unwound because its runtime shut down while it waited")
    }
}

/// What a parked green thread waits for, recorded for deadlock reports (see
/// [`Scheduler::parked`](crate::Scheduler::parked)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitKind {
    /// A plain [`park`].
    Park,
    /// Joining another green thread.
    Join,
    /// Sleeping until a deadline.
    Sleep,
    /// A mutex (or the write side of a read-write lock).
    Mutex,
    /// The read side of a read-write lock.
    RwLockRead,
    /// A condition variable.
    Condvar,
    /// Sending on a channel.
    ChannelSend,
    /// Receiving from a channel.
    ChannelRecv,
    /// A `select!` over several channel operations.
    Select,
    /// A wait group, barrier or semaphore.
    Group,
    /// One-time initialisation by another green thread.
    Once,
    /// I/O readiness.
    Io,
    /// A message (the state machines of `purloin::machine`).
    Message,
}

impl WaitKind {
    const ALL: [WaitKind; 13] = [
        WaitKind::Park,
        WaitKind::Join,
        WaitKind::Sleep,
        WaitKind::Mutex,
        WaitKind::RwLockRead,
        WaitKind::Condvar,
        WaitKind::ChannelSend,
        WaitKind::ChannelRecv,
        WaitKind::Select,
        WaitKind::Group,
        WaitKind::Once,
        WaitKind::Io,
        WaitKind::Message,
    ];

    /// A short human description ("a mutex", "a channel receive", ...).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::WaitKind;
    ///
    /// assert_eq!(WaitKind::ChannelRecv.describe(), "a channel receive");
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            WaitKind::Park => "park",
            WaitKind::Join => "joining a green thread",
            WaitKind::Sleep => "sleep",
            WaitKind::Mutex => "a mutex",
            WaitKind::RwLockRead => "a read lock",
            WaitKind::Condvar => "a condition variable",
            WaitKind::ChannelSend => "a channel send",
            WaitKind::ChannelRecv => "a channel receive",
            WaitKind::Select => "a select",
            WaitKind::Group => "a wait group, barrier or semaphore",
            WaitKind::Once => "a one-time initialisation",
            WaitKind::Io => "I/O",
            WaitKind::Message => "a message",
        }
    }
}

/// What a green thread waits on: the kind of wait, the address of the object (to find who
/// else waits on it), and — where the primitive knows it — the green thread that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitInfo {
    /// The kind of wait.
    pub kind: WaitKind,
    /// Address of the object waited on (0 if none).
    pub object: usize,
    /// The green thread holding the object (a mutex owner, a joined thread), if known.
    pub holder: Option<GreenId>,
}

/// Records what the current green thread is about to wait for (or clears it with `None`).
/// Sync primitives call this before parking; it is two or three relaxed stores.
///
/// # Examples
///
/// ```
/// use purloin_sched::{WaitInfo, WaitKind};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let info = WaitInfo { kind: WaitKind::Sleep, object: 0, holder: None };
///     purloin_sched::set_wait_info(Some(info));
///     purloin_sched::park();
///     purloin_sched::set_wait_info(None);
/// });
/// while sched.parked().is_empty() {
///     std::thread::yield_now();
/// }
/// assert_eq!(sched.parked()[0].wait.map(|w| w.kind), Some(WaitKind::Sleep));
/// h.thread().unpark();
/// h.join().unwrap();
/// ```
pub fn set_wait_info(info: Option<WaitInfo>) {
    let Some(g) = running_g() else { return };
    store_wait_info(g, info);
}

impl GreenThread {
    /// [`set_wait_info`] for the calling green thread, given its handle (from [`current`]):
    /// no thread-local lookup, so waits can afford to record themselves in every build. A
    /// child run inline records on its host's record (the one that parks).
    ///
    /// Call it only from the green thread `self` names.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sched::{WaitInfo, WaitKind};
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     let me = purloin_sched::current().unwrap();
    ///     me.set_own_wait_info(Some(WaitInfo { kind: WaitKind::Io, object: 0, holder: None }));
    ///     purloin_sched::park();
    ///     me.set_own_wait_info(None);
    /// });
    /// let kind = loop {
    ///     if let Some(w) = sched.parked().first().and_then(|p| p.wait) {
    ///         break w.kind;
    ///     }
    ///     std::thread::yield_now();
    /// };
    /// assert_eq!(kind, WaitKind::Io);
    /// h.thread().unpark();
    /// h.join().unwrap();
    /// ```
    #[inline]
    pub fn set_own_wait_info(&self, info: Option<WaitInfo>) {
        use crate::sync::STAT as Relaxed;
        // Relaxed: `host` is written by this same green thread when it starts or ends an
        // inline run (program order).
        let host = self.g.host.load(Relaxed);
        // SAFETY: a non-null `host` names the live record of the joiner running us inline.
        let g = unsafe { GRef::from_ptr(host) }.unwrap_or(self.g);
        store_wait_info(g, info);
    }
}

/// Writes `info` into `g`'s wait fields (Relaxed: racy diagnostics).
#[inline]
fn store_wait_info(g: GRef, info: Option<WaitInfo>) {
    use crate::sync::STAT as Relaxed;
    match info {
        Some(i) => {
            // The declaration order is `ALL`'s order (checked in debug builds).
            let k = i.kind as u8 + 1;
            debug_assert_eq!(WaitKind::ALL[k as usize - 1], i.kind);
            g.wait_object.store(i.object, Relaxed);
            g.wait_holder.store(i.holder.map_or(0, |h| h.0), Relaxed);
            g.wait_kind.store(k, Relaxed);
        }
        None => g.wait_kind.store(0, Relaxed),
    }
}

/// Reads a record's wait info (racy snapshot).
pub(crate) fn wait_info_of(g: GRef) -> Option<WaitInfo> {
    use crate::sync::STAT as Relaxed;
    let k = g.wait_kind.load(Relaxed) as usize;
    let kind = *WaitKind::ALL.get(k.checked_sub(1)?)?;
    let holder = g.wait_holder.load(Relaxed);
    Some(WaitInfo {
        kind,
        object: g.wait_object.load(Relaxed),
        holder: (holder != 0).then_some(GreenId(holder)),
    })
}

/// The local-storage pointer of the current green thread (its identity: the child while a
/// joiner runs it inline), or `None` outside a green thread. The pointer belongs to the layer
/// above (the runtime's `green_local!`), which must free it before the green thread ends.
pub fn current_locals() -> Option<*mut ()> {
    let g = match identity_record()? {
        Ok(g) => g,
        // A lazily spawned child run inline without an identity has set no locals.
        Err(_) => return Some(core::ptr::null_mut()),
    };
    // SAFETY: the identity record's cells are owned by the running green thread (it runs, or
    // runs it inline after claiming it).
    Some(unsafe { g.locals.with(|l| *l) })
}

/// Sets the current green thread's local-storage pointer (see [`current_locals`]). Returns
/// false outside a green thread.
pub fn set_current_locals(ptr: *mut ()) -> bool {
    let g = match identity_record() {
        None => return false,
        Some(Ok(g)) => g,
        // Nothing to clear on a child that has no record yet.
        Some(Err(_)) if ptr.is_null() => return true,
        // Locals live on the record: give the child one.
        Some(Err(_)) => match current() {
            Some(t) => t.g,
            None => return false,
        },
    };
    // SAFETY: as in `current_locals`.
    unsafe { g.locals.with_mut(|l| *l = ptr) };
    true
}

/// Runs the scheduler's locals destructor on the current green thread's locals until none are
/// left (a destructor may set new ones); see
/// [`Builder::locals_destructor`](crate::Builder::locals_destructor).
pub(crate) fn destroy_current_locals() {
    let Some(destroy) = current_worker().and_then(|m| m.shared.config.locals_destructor) else {
        return;
    };
    while let Some(ptr) = current_locals().filter(|p| !p.is_null()) {
        set_current_locals(core::ptr::null_mut());
        // SAFETY: `ptr` is non-null, was stored by this green thread with `set_current_locals`
        // and is detached now: the destructor's contract (`Builder::locals_destructor`).
        unsafe { destroy(ptr) };
    }
}

/// The record that holds the current green thread's identity (the child's while a joiner runs
/// it inline), or `Err` with the running G for a lazily spawned child run inline that has no
/// record yet.
fn identity_record() -> Option<Result<GRef, GRef>> {
    let g = running_g()?;
    // SAFETY: the running G's own cells are touched only by itself.
    let inline = unsafe { g.inline_child.with(|c| *c) };
    Some(match inline {
        None => Ok(g),
        Some(InlineChild::Thread(t)) => Ok(t.g),
        Some(InlineChild::Lazy(_)) => Err(g),
    })
}
