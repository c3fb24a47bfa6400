//! The g0 switch protocol: switching a claimed G in, and finishing on g0 what it asked for
//! when it switches back out.
//!
//! This file holds `impl M`'s part that runs a G (`M::execute`, `step`, `finish`); the rest
//! of `impl M` is in `worker.rs` (its first lines say where).
//!
//! A worker runs its loop on its own stack (Go's g0). To run a G it resumes the G's context,
//! passing a pointer to its `M`; the G runs until it calls [`switch_out`] with an [`Action`],
//! which resumes g0 with the action's word. The finishing work — re-queue the G (yield), mark
//! it parked (park), release its stack (exit), queue it globally (it lost its P in a blocking
//! section) — runs on g0 *after* the switch, so a G becomes visible to other workers only once
//! its registers are saved (the G state machine's rule, `g.rs`): Go's `park_m` on g0, brpc's "remained" callback.
//!
//! # Thread-locals and migration
//!
//! A G may resume on another worker, so no code here keeps a thread-local *address* across a
//! switch: the G finds its worker again after every resume from the `data` word the resumer
//! passes (a pointer to its `M`), never from a cached thread-local. Thread-local state that
//! belongs to the G (a `tracing` subscriber's span stack) is moved by the switch hook
//! (`hook`), which runs on the G's stack on both sides of every switch in [`switch_out_from`].

use std::io;
use std::panic::{self, AssertUnwindSafe};

use purloin_context::{Context, Transfer};

use crate::g::{GRef, NOT_PINNED};
use crate::p::P;
use crate::ready::Slot;
use crate::stats::bump;
use crate::sync::Ordering;
use crate::worker::{M, NO_P, current_m};

/// What a G asks g0 to do when it switches out. Crosses the context switch as the `data`
/// word of the resume into g0 ([`Action::word`], [`Action::from_word`]); everywhere else it
/// is this enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Re-queue the G (behind other local work, or at once if there is none).
    Yield,
    /// The G began parking (`RUNNING => PARKING`): publish `PARKED` once its context is saved.
    Park,
    /// The G's entry returned: release its stack and recycle its record.
    Exit,
    /// The G lost its P in a blocking section: queue it globally; this worker has no P.
    RequeueGlobal,
}

impl Action {
    /// The word passed through the context switch.
    fn word(self) -> usize {
        match self {
            Action::Yield => 1,
            Action::Park => 2,
            Action::Exit => 3,
            Action::RequeueGlobal => 4,
        }
    }

    /// Decodes the word a G passed to g0.
    fn from_word(word: usize) -> Action {
        match word {
            1 => Action::Yield,
            2 => Action::Park,
            3 => Action::Exit,
            4 => Action::RequeueGlobal,
            other => unreachable!("unknown switch-out action {other}"),
        }
    }
}

impl M {
    /// Switches to `g` (claimed, RUNNING) and, when it switches back, finishes what it asked.
    /// Returns a G to run immediately (a parked G whose unpark raced its park).
    pub(crate) fn execute(&self, g: GRef) -> Option<GRef> {
        let pi = self.p.get();
        let p = &self.shared.ps[pi];
        bump(&p.stats.switches);
        p.schedtick.store(p.schedtick.load(Ordering::Relaxed) + 1, Ordering::Relaxed);

        // A precise (odd) stamp: the queueing point timed this wait for a worker.
        let queued = g.since.load(crate::sync::STAT);
        if queued & crate::clock::PRECISE != 0 {
            record_sched_latency(p, g, queued);
        }
        // SAFETY: this worker claimed `g` (RUNNING): it owns the record's cells.
        let task = unsafe {
            g.work.with(|w| match &*w {
                crate::g::Work::Step(t) => Some(&**t as *const dyn crate::Task),
                _ => None,
            })
        };
        if let Some(task) = task {
            // SAFETY: the task stays in the claimed record's cell until `finish` (which runs
            // after the step, on this thread), so the pointer is valid for the step.
            return self.step(g, unsafe { &*task });
        }
        // SAFETY: as above.
        let has_context = unsafe { g.context.with(|c| (*c).is_some()) };
        if !has_context && let Err(e) = self.attach_stack(g) {
            self.fail_start(g, e);
            return None;
        }
        self.current.set(Some(g));
        g.stamp();
        bump(&g.switches);
        p.running.store(g.as_ptr(), Ordering::Relaxed);
        // SAFETY: as above; the context was saved by the G's last switch out (or just made).
        let mut ctx = unsafe { g.take_context() }.expect("a runnable G has a context");
        let (action, t) = loop {
            // SAFETY: `ctx` is a suspended context of a G whose stack is alive (attached to
            // it); it switches back to us with `switch_out`, passing an action's word.
            let t: Transfer = unsafe { ctx.resume(self as *const M as usize) };
            let action = Action::from_word(t.data);
            if action != Action::Yield {
                break (action, t);
            }
            bump(&p.stats.yields);
            let pin = g.pinned_to();
            if (pin == NOT_PINNED || pin == pi) && self.resume_yielder_at_once(p) {
                // A new scheduling round of the same G, without leaving this frame (the
                // record stays RUNNING and current; the monitor sees the tick).
                ctx = t.context;
                bump(&p.stats.switches);
                bump(&g.switches);
                p.schedtick.store(p.schedtick.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                continue;
            }
            break (action, t);
        };
        self.current.set(None);
        p.running.store(core::ptr::null_mut(), Ordering::Relaxed);
        let pin = g.pinned_to();
        match action {
            Action::Yield => {
                // SAFETY: we still own the record until the push below publishes it.
                unsafe { g.context.with_mut(|c| *c = Some(t.context)) };
                g.charge_and_stamp();
                self.sample_queued(g);
                g.publish_runnable();
                if pin != NOT_PINNED {
                    self.shared.ps[pin].push_pinned(g);
                } else if p.has_work() {
                    // Other local work is waiting: go behind all of it, in the global queue
                    // (Go's Gosched), where any worker may pick it up.
                    self.shared.injector.push(g.into());
                } else {
                    // Nothing else here: the fast path, no shared queue touched.
                    self.held_on_g0().enqueue(g.into(), Slot::LocalQuiet);
                }
                None
            }
            Action::Park => {
                // SAFETY: we are g0 of the worker that ran the parking G.
                if unsafe { g.save_context_and_park(t.context) } {
                    None
                } else {
                    // An unpark raced the park: run it again at once (token consumed). The
                    // waker saw a parking G (`Noted`) and reported nothing: report the wake-up
                    // here, so each reported park has its unpark.
                    crate::hook::emit(move || crate::hook::Event::Unpark {
                        id: crate::GreenId(g.id_with(g.generation())),
                        by: None,
                    });
                    g.claim_for_run().then_some(g)
                }
            }
            Action::Exit => {
                // The finished G's context is never resumed; dropping it is a no-op on real
                // stacks and ends its thread on the loom backend.
                let _ = t.context;
                self.finish(g);
                None
            }
            Action::RequeueGlobal => {
                // SAFETY: we own the record until the push publishes it.
                unsafe { g.context.with_mut(|c| *c = Some(t.context)) };
                g.charge_and_stamp();
                self.sample_queued(g);
                g.publish_runnable();
                self.shared.push_global(g);
                None
            }
        }
    }

    /// After a yield: whether to run the yielder again at once. With nothing else runnable on
    /// this P (runnext, local and pinned queues empty) and no fairness tick due, `find_local`
    /// would pop the yielder straight back from the local queue: skip that round trip (a
    /// publish, a push, a pop and a claim: four atomic read-modify-writes). The G stays
    /// RUNNING; a token that arrives meanwhile stays in its state word for its next park.
    /// Global queue, timers and the poller are looked at on the fairness tick, as before.
    fn resume_yielder_at_once(&self, p: &P) -> bool {
        if self.fair_countdown.get() <= 1 || p.has_work() || p.may_have_pinned() {
            return false;
        }
        self.fair_countdown.set(self.fair_countdown.get() - 1);
        true
    }

    /// Runs one step of a stackless task on this worker's own stack (g0) and finishes what it
    /// asked for, like `execute` does for a switched-out G.
    fn step(&self, g: GRef, task: &dyn crate::Task) -> Option<GRef> {
        let p = self.p();
        p.running.store(g.as_ptr(), Ordering::Relaxed);
        // While stepping, a task this one wakes goes to runnext (like a green thread's wake-up):
        // a state-machine ring stays on one core instead of being stolen hop by hop.
        self.stepping.set(true);
        let outcome = if g.is_cancelled() {
            panic::catch_unwind(AssertUnwindSafe(|| task.cancel()))
        } else {
            panic::catch_unwind(AssertUnwindSafe(|| task.step()))
        };
        self.stepping.set(false);
        p.running.store(core::ptr::null_mut(), Ordering::Relaxed);
        match outcome {
            Ok(crate::TaskStep::Yield) => {
                g.publish_runnable();
                self.held_on_g0().enqueue(g.into(), Slot::LocalQuiet);
                None
            }
            Ok(crate::TaskStep::Wait) => {
                // The same token rules as a green thread's park: a wake that arrived during
                // the step (NOTIFIED) makes it run again instead of waiting.
                if g.take_notified() || !g.begin_park() {
                    g.take_notified();
                    return Some(g);
                }
                g.stamp();
                if g.publish_parked() { None } else { g.claim_for_run().then_some(g) }
            }
            Ok(crate::TaskStep::Done) => {
                self.finish(g);
                None
            }
            Err(payload) => {
                task.panicked(payload);
                self.finish(g);
                None
            }
        }
    }

    /// Gives `g` a stack and a fresh context before its first run.
    fn attach_stack(&self, g: GRef) -> io::Result<()> {
        #[cfg(not(loom))]
        {
            // SAFETY: this worker owns the claimed G's cells.
            let (size, has_stack) =
                unsafe { (g.stack_size.with(|s| *s), g.stack.with(|s| (*s).is_some())) };
            if !has_stack {
                let reuse = self.spare_stack.take();
                let stack = match reuse {
                    Some(s) if s.size() == size => s,
                    other => {
                        drop(other);
                        purloin_stack::lease(size)?
                    }
                };
                // SAFETY: as above.
                unsafe { g.stack.with_mut(|s| *s = Some(stack)) };
            }
            // SAFETY: as above; the stack is attached to `g` and outlives its context (the
            // context is dropped on g0 before the stack is detached in `finish`).
            let ctx = unsafe {
                g.stack.with(|s| {
                    let s = (*s).as_ref().expect("stack attached above");
                    s.set_label(g.id_with(g.generation()), g.name().as_deref().unwrap_or(""));
                    Context::new(s.top(), s.limit(), g_entry)
                })
            };
            // SAFETY: as above.
            unsafe { g.context.with_mut(|c| *c = Some(ctx)) };
        }
        #[cfg(loom)]
        {
            // The loom backend of purloin-context runs each context on a loom thread; the
            // stack pointers are not used.
            // SAFETY: the loom backend ignores the pointers; g is owned by this worker.
            let ctx =
                unsafe { Context::new(core::ptr::null_mut(), core::ptr::null_mut(), g_entry) };
            // SAFETY: as above.
            unsafe { g.context.with_mut(|c| *c = Some(ctx)) };
        }
        Ok(())
    }

    /// A G could not get a stack: its joiner receives the error; the G is finished.
    fn fail_start(&self, g: GRef, e: io::Error) {
        // SAFETY: this worker owns the claimed G's cells.
        let task = unsafe { g.work.with_mut(|w| (*w).take_task()) };
        if let Some(task) = task {
            task.fail(Box::new(e));
        }
        self.finish(g);
    }

    /// On g0 after a G exited: release its stack, account for it, recycle the record.
    fn finish(&self, g: GRef) {
        // SAFETY: the G exited: this worker owns its cells and its stack is no longer in use
        // (we are on g0).
        let stack = unsafe { g.stack.with_mut(|s| (*s).take()) };
        if let Some(s) = stack {
            s.clear_label();
            // Keep it for the next G that has none; the previous spare goes back to the pool.
            // A big stack goes back at once: the pool gives its touched pages back.
            if s.worth_keeping() {
                drop(self.spare_stack.replace(Some(s)));
            }
        }
        let pin = g.pinned_to();
        if pin != NOT_PINNED {
            self.shared.ps[pin].pinned.fetch_sub(1, Ordering::Relaxed);
        }
        g.finish_run();
        // SAFETY: as above.
        let counted = !unsafe { g.uncounted.with(|u| *u) };
        if g.drop_ref() {
            self.recycle(g);
        }
        if counted {
            let p = self.held().map(|h| h.p());
            self.shared.note_finished(p);
        }
    }
}

/// Records the wait for a worker of `g`, which a queueing point stamped with a precise reading
/// `queued` (odd: `clock`), on P `p` that switches it in now, and stamps over the reading (a
/// stackless task's step is not stamped at its start otherwise).
#[cold]
#[inline(never)]
fn record_sched_latency(p: &P, g: GRef, queued: u64) {
    let waited = crate::clock::precise().saturating_sub(queued & !crate::clock::PRECISE);
    p.sched_latencies.record_nanos(waited);
    g.stamp();
}

/// First code on a new G's stack. Never returns and never unwinds (an unwind across the
/// context switch would be undefined behaviour): panics of the G's closure are caught by its
/// task; anything else aborts.
extern "C-unwind" fn g_entry(t: Transfer) -> ! {
    let ran = panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the resumer passes a pointer to its live M (see `execute`).
        let m = unsafe { &*(t.data as *const M) };
        adopt_worker(m);
        m.g0.set(Some(t.context));
        let g = m.current.get().expect("a G runs with current set");
        crate::hook::emit(move || crate::hook::Event::Start {
            id: crate::GreenId(g.id_with(g.generation())),
        });
        // SAFETY: this G is RUNNING on this worker: it owns its cells.
        let task = unsafe { g.work.with_mut(|w| (*w).take_task()) };
        if let Some(task) = task {
            task.run();
        }
    }));
    if let Err(payload) = ran {
        // Under loom, a context dropped while suspended unwinds with the backend's private
        // payload so its loom thread can end: let it through (it never happens on real stacks).
        if purloin_context::is_abandon_payload(&*payload) {
            panic::resume_unwind(payload);
        }
        abort_with("purloin: a panic escaped a green thread's entry; aborting");
    }
    // A section left open by a bare `enter_blocking` ends with the G.
    crate::blocking::exit_blocking();
    switch_out(Action::Exit);
    abort_with("purloin: a finished green thread was resumed; aborting")
}

/// Runs `f` on the worker's own stack (g0) when called on a green thread's stack with less
/// than [`DEEP_PATH_ROOM`] left, and on the caller's stack otherwise (plenty of room, on g0
/// already, or not on a worker); returns its result. For runtime work whose stack depth the
/// runtime does not control: a crossbeam-epoch pin (every global-queue operation takes one)
/// may run a collection of garbage, whose frames alone are kilobytes, on whatever stack it is
/// on, and a green thread's stack may be small and mostly used by its own frames (Go runs such
/// work on `systemstack`).
///
/// The G does not switch out: `f` is called from the G's frame with the stack pointer moved
/// below g0's frames ([`Context::call_below`], a few instructions), on the same OS thread, so
/// a [`NoSwitch`] section is kept. `f` must not switch out itself (it would panic: g0 is taken
/// out of the worker during the call, which also makes a nested `on_worker_stack` run in
/// place). A panic in `f` is caught on g0's stack and resumed on the G's. Under loom `f` runs
/// in place (a loom context has no stack).
///
/// `m` must be the current worker (`current_worker`).
#[inline]
pub(crate) fn on_worker_stack<R>(m: &M, f: impl FnOnce() -> R) -> R {
    #[cfg(not(loom))]
    if let Some(g) = m.current.get() {
        let probe = 0u8;
        let sp = core::hint::black_box(&probe) as *const u8 as usize;
        // SAFETY: `g` runs on this worker (it is current): the worker owns its cells.
        let limit = unsafe { g.stack.with(|s| (*s).as_ref().map(|s| s.limit() as usize)) };
        if limit.is_some_and(|limit| sp.saturating_sub(limit) < DEEP_PATH_ROOM)
            && let Some(g0) = m.g0.take()
        {
            return run_on_g0(m, g0, f);
        }
    }
    #[cfg(loom)]
    let _ = m;
    f()
}

/// The stack a green thread must have left for [`on_worker_stack`] to run its work in place:
/// room for an epoch collection under the global queue's frames, with a margin (the
/// unoptimised frames are several times larger).
#[cfg(not(loom))]
const DEEP_PATH_ROOM: usize = if cfg!(debug_assertions) { 64 << 10 } else { 16 << 10 };

#[cfg(not(loom))]
#[cold]
#[inline(never)]
fn run_on_g0<R, F: FnOnce() -> R>(m: &M, g0: Context, f: F) -> R {
    struct Job<F, R> {
        f: Option<F>,
        out: Option<std::thread::Result<R>>,
    }
    extern "C" fn run<F: FnOnce() -> R, R>(job: usize) {
        // SAFETY: `job` is the address of the `Job` in `run_on_g0`'s frame, which waits for
        // this call and touches the job only after it.
        let job = unsafe { &mut *(job as *mut Job<F, R>) };
        let f = job.f.take().expect("a g0 job runs once");
        job.out = Some(panic::catch_unwind(AssertUnwindSafe(f)));
    }
    let mut job = Job { f: Some(f), out: None };
    // SAFETY: g0 is this worker's scheduling context, suspended in `execute` while this G
    // runs on the same OS thread; nothing else resumes it or uses its stack until this G
    // switches out, which it does not do during the call (`f` cannot: g0 is out of `m`).
    unsafe { g0.call_below(&mut job as *mut Job<F, R> as usize, run::<F, R>) };
    m.g0.set(Some(g0));
    match job.out.expect("the g0 job ran") {
        Ok(r) => r,
        Err(payload) => panic::resume_unwind(payload),
    }
}

pub(crate) fn abort_with(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::abort()
}

/// Switches from the running G back to its worker's g0 with `action`, and returns when some
/// worker resumes the G. Must be called on a G's stack.
#[inline(never)]
pub(crate) fn switch_out(action: Action) {
    // SAFETY: only called from a G's stack, where the current-worker slot names the worker
    // running it.
    switch_out_from(unsafe { &*current_m() }, action);
}

/// [`switch_out`] for a caller that already fetched its worker `m` (since its last switch).
/// Returns the worker that resumed the G (it may be another one: use it, not `m`, after).
#[inline]
pub(crate) fn switch_out_from<'a>(m: &M, action: Action) -> &'a M {
    let g0 = m.g0.take().expect("switch_out called outside a green thread");
    debug_assert!(m.no_switch.get().is_none(), "a switch inside a NoSwitch section");
    if std::thread::panicking() {
        // An unwinding G must not migrate: std's panic count is per OS thread.
        pin_current(m);
    }
    // The switch hooks (`hook`): one load and a branch on each side when none is installed.
    // With hooks, the whole switch runs out of line, in a frame on the G's stack that keeps
    // the words they carry across it (one per hook).
    if crate::hook::installed() {
        return switch_hooked(g0, action);
    }
    let m = resume_g0(g0, action);
    if crate::hook::installed() {
        // Installed while this G was switched out: its hooks see it come back (`saved == 0`).
        crate::hook::switch_in(&crate::hook::Saved::new());
    }
    m
}

/// Resumes `g0` with `action`; returns, once some worker resumed the G, that worker (with its
/// g0 kept for the next switch).
#[inline(always)]
fn resume_g0<'a>(g0: Context, action: Action) -> &'a M {
    // SAFETY: g0 is this worker's scheduling context, suspended in `execute`, on the worker's
    // own stack which outlives the G's run.
    let t = unsafe { g0.resume(action.word()) };
    // SAFETY: the resumer passes a pointer to its live M, which outlives the G's run on it.
    let m = unsafe { &*(t.data as *const M) };
    adopt_worker(m);
    m.g0.set(Some(t.context));
    m
}

/// [`switch_out_from`] with hooks installed: their `switch_out`s, the switch, their
/// `switch_in`s, each with its own word kept in this frame.
#[cold]
#[inline(never)]
fn switch_hooked<'a>(g0: Context, action: Action) -> &'a M {
    let mut saved = crate::hook::Saved::new();
    crate::hook::switch_out(action == Action::Exit, &mut saved);
    let m = resume_g0(g0, action);
    crate::hook::switch_in(&saved);
    m
}

/// The check of every way a G can switch out (park, yield, entering a blocking section, which
/// may lose the processor), made before anything changed: inside a [`NoSwitch`] section it
/// panics, after ending the section (so the unwinding may park).
#[inline(always)]
pub(crate) fn check_no_switch(m: &M) {
    if let Some(why) = m.no_switch.take() {
        no_switch_violated(why);
    }
}

#[cold]
#[inline(never)]
fn no_switch_violated(why: &'static str) -> ! {
    panic!(
        "purloin: a green thread tried to park, yield or block inside {why}, where it must stay on \
         its OS thread; finish the wait outside it"
    )
}

/// While a `NoSwitch` lives, the green thread that made it must not switch out: a park (also
/// one that would return at once, and every wait built on parks: locks, channels, joins,
/// sleeps), a yield or entering a blocking section (which may lose the processor) panics
/// instead, before anything changed, with a message naming `why`. For code that holds OS-thread state (a thread-local context,
/// an OS-thread lock) for a short stretch and must not migrate or let another green thread
/// run on its OS thread meanwhile: `purloin::tokio` polls futures inside one with tokio's
/// context entered. On a plain OS thread it does nothing. Sections do not nest (the inner one
/// ends the outer).
///
/// The check costs one load and a predictable branch on every park, yield and blocking
/// section.
///
/// # Examples
///
/// ```
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| {
///     let _section = purloin_sched::NoSwitch::new("a thread-local section");
///     purloin_sched::yield_now(); // panics: it would switch out
/// });
/// let err = h.join().unwrap_err();
/// let msg = err.downcast_ref::<String>().unwrap();
/// assert!(msg.contains("inside a thread-local section"));
/// ```
#[must_use = "the section ends when the value is dropped"]
pub struct NoSwitch {
    m: *const M,
}

impl NoSwitch {
    /// Starts a section on the current green thread (see [`NoSwitch`]); `why` names it in the
    /// panic message.
    pub fn new(why: &'static str) -> NoSwitch {
        let m = current_m();
        // SAFETY: a non-null `current_m` is this OS thread's live worker; its G cannot switch
        // to another worker while the section lives (that is what the section forbids).
        if let Some(m) = unsafe { m.as_ref() }.filter(|m| m.current.get().is_some()) {
            m.no_switch.set(Some(why));
            return NoSwitch { m };
        }
        NoSwitch { m: core::ptr::null() }
    }
}

impl Drop for NoSwitch {
    fn drop(&mut self) {
        // SAFETY: as in `new`: the G never left this worker while the section lived (a switch
        // attempt panicked before switching and cleared the flag).
        if let Some(m) = unsafe { self.m.as_ref() } {
            m.no_switch.set(None);
        }
    }
}

/// After a G resumes: under loom every context is its own loom thread, so the G's thread must
/// adopt the current-worker slot of the worker that resumed it (on real stacks the G runs on
/// the worker's own OS thread and the slot is already right).
#[inline(always)]
fn adopt_worker(m: &M) {
    #[cfg(loom)]
    crate::sync::set_current_worker_ptr((m as *const M).cast());
    #[cfg(not(loom))]
    let _ = m;
}

/// Pins the running G to the P of the worker running it (no-op if already pinned).
fn pin_current(m: &M) {
    let Some(g) = m.current.get() else { return };
    let pi = m.p.get();
    if pi != NO_P && g.pin_if_unpinned(pi) {
        m.shared.ps[pi].pinned.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::panic::{self, AssertUnwindSafe};

    use super::on_worker_stack;
    use crate::worker::current_worker;
    use crate::{SpawnOptions, StackSize};

    /// The address of a local of the calling frame.
    #[inline(never)]
    fn here() -> usize {
        let x = 0u8;
        std::hint::black_box(&x) as *const u8 as usize
    }

    /// Calls `f` below `kib` KiB of frames of its own.
    #[inline(never)]
    fn below_frames<R>(kib: usize, f: &mut dyn FnMut() -> R) -> R {
        if kib == 0 {
            return f();
        }
        let mut frame = [0u8; 1024];
        std::hint::black_box(&mut frame);
        let r = below_frames(kib - 1, f);
        std::hint::black_box(&mut frame);
        r
    }

    /// A shallow green thread runs the work in place.
    #[test]
    fn with_room_left_a_job_runs_in_place() {
        let sched = crate::Scheduler::new().unwrap();
        let normal = SpawnOptions { stack_size: Some(StackSize::Normal), ..Default::default() };
        let (g, job) = sched
            .spawn_with(normal, || {
                let m = current_worker().expect("on a worker");
                (here(), on_worker_stack(m, here))
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(g.abs_diff(job) < 4 << 10, "{g:#x} {job:#x}");
    }

    #[test]
    fn a_job_runs_off_the_green_stack_and_its_panic_reaches_the_green_thread() {
        let sched = crate::Scheduler::new().unwrap();
        let small = SpawnOptions { stack_size: Some(StackSize::Small), ..Default::default() };
        let (g, job, after, panicked) = sched
            .spawn_with(small, || {
                // Less room left than `on_worker_stack` runs work in place with.
                below_frames(16, &mut || {
                    let m = current_worker().expect("on a worker");
                    let g = here();
                    let job = on_worker_stack(m, here);
                    let after = here();
                    let panicked = panic::catch_unwind(AssertUnwindSafe(|| {
                        on_worker_stack(m, || panic!("from g0"));
                    }))
                    .expect_err("the job's panic is resumed on the green thread");
                    (g, job, after, panicked.downcast_ref::<&str>().copied())
                })
            })
            .unwrap()
            .join()
            .unwrap();
        // Every address of a 32 KiB stack is within 32 KiB of every other.
        assert!(g.abs_diff(job) > 32 << 10, "the job ran on the green stack: {g:#x} {job:#x}");
        assert_eq!(g, after, "the green thread goes on on its own stack");
        assert_eq!(panicked, Some("from g0"));
    }
}
