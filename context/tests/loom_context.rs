//! loom models of the loom backend (`cargo xtask loom -p purloin-context`).
//!
//! Every context is a loom thread; these models check that a switch hands control over
//! completely (exactly one side runs: the shared `UnsafeCell`s below are accessed from both
//! sides with no synchronisation but the switches, so an overlap or a missing happens-before
//! edge would be a causality violation loom reports),
//! that a context can be resumed from another thread, that `resume_ontop` runs its function
//! on the target after the source is suspended, and that abandoned contexts end their threads.
//!
//! Mutation checks (each made as a scratch change in `src/loom.rs`, run, seen to fail, then
//! reverted) are listed next to the model that caught them.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use purloin_context::{Context, MIN_STACK_SIZE, Transfer};

/// Stack bounds for `Context::new` (the loom backend checks but does not use them).
struct FakeStack(Vec<u8>);

impl FakeStack {
    fn new() -> FakeStack {
        FakeStack(vec![0; MIN_STACK_SIZE + 16])
    }

    /// # Safety
    /// As `Context::new`; the buffer is not used by the loom backend.
    unsafe fn context(&mut self, entry: purloin_context::Entry) -> Context {
        let r = self.0.as_mut_ptr_range();
        // SAFETY: the caller's obligations; the loom backend never touches the memory.
        unsafe { Context::new(r.end, r.start, entry) }
    }
}

/// A non-atomic cell shared by contexts that only the switches order.
struct Shared(UnsafeCell<usize>);

// SAFETY: the models access the cell only from the side that runs; loom checks exactly that.
unsafe impl Sync for Shared {}

impl Shared {
    fn bump(&self) -> usize {
        self.0.with_mut(|p| {
            // SAFETY: loom reports a race if another thread accesses the cell concurrently.
            unsafe {
                *p += 1;
                *p
            }
        })
    }
}

fn shared(addr: usize) -> &'static Shared {
    // SAFETY: every `data` given to these entries is the address of a `Shared` kept alive by
    // the model until all contexts have finished or been abandoned.
    unsafe { &*(addr as *const Shared) }
}

/// Bumps the shared cell and replies with its value, twice, then returns for the last time.
extern "C-unwind" fn pong(t: Transfer) -> ! {
    let cell = shared(t.data);
    let mut t = t;
    for _ in 0..2 {
        let v = cell.bump();
        // SAFETY: `t.context` is the resumer, suspended in `resume`.
        t = unsafe { t.context.resume(v) };
    }
    let v = cell.bump();
    // SAFETY: as above. Never resumed again: the resumer drops our context (abandon).
    unsafe { t.context.resume(v) };
    unreachable!("abandoned contexts are never resumed");
}

/// Ping-pong between the model thread and one context; both sides bump one non-atomic cell.
///
/// Mutations that fail it: (1) `switch` returning right after posting its message instead of
/// waiting on its own baton (both sides run at once) -> "assertion `left == right` failed"
/// (the resumer runs on with its own data); (2) notifying the target before writing its
/// state, outside the lock (a lost wake-up) -> loom: "deadlock; threads = [(Id(0), Blocked),
/// (Id(1), Blocked)]"; (3) `Handle::drop` not abandoning -> loom: "deadlock; threads =
/// [(Id(0), Terminated), (Id(1), Blocked)]" when the model ends.
#[test]
fn ping_pong_between_two_contexts() {
    loom::model(|| {
        let cell = Arc::new(Shared(UnsafeCell::new(0)));
        // Under loom the stack is ignored: null pointers are fine (as a scheduler without
        // stacks in its models passes them).
        // SAFETY: fresh context; `pong` only resumes its resumer.
        let mut ctx = unsafe { Context::new(std::ptr::null_mut(), std::ptr::null_mut(), pong) };
        let addr = Arc::as_ptr(&cell) as usize;
        for round in 0..3 {
            let mine = cell.bump();
            assert_eq!(mine, 2 * round + 1);
            // SAFETY: `ctx` is fresh or suspended in `resume`.
            let t = unsafe { ctx.resume(addr) };
            assert_eq!(t.data, 2 * round + 2);
            ctx = t.context;
        }
        // `pong` is suspended for good: dropping its context ends its loom thread.
        drop(ctx);
    });
}

/// A context created on the model thread, first resumed on a second loom thread, then resumed
/// again on the model thread while the second thread goes on with other work.
///
/// Mutations that fail it: the same three as `ping_pong_between_two_contexts`, with the same
/// reports (the second thread is `Terminated` in the deadlock reports).
#[test]
fn a_context_created_on_one_thread_is_resumed_on_another() {
    loom::model(|| {
        let cell = Arc::new(Shared(UnsafeCell::new(0)));
        let other = Arc::new(AtomicUsize::new(0));
        let mut stack = FakeStack::new();
        // SAFETY: fresh context.
        let ctx = unsafe { stack.context(pong) };
        let addr = Arc::as_ptr(&cell) as usize;
        let (cell2, other2) = (cell.clone(), other.clone());
        let handle = thread::spawn(move || {
            // SAFETY: fresh context; `pong` holds no thread-local state.
            let t = unsafe { ctx.resume(addr) };
            assert_eq!(t.data, 1);
            other2.fetch_add(1, Ordering::Relaxed);
            drop(cell2);
            t.context
        });
        let ctx = handle.join().unwrap();
        // SAFETY: `pong` is suspended in `resume` (on the other thread, which has ended).
        let t = unsafe { ctx.resume(addr) };
        assert_eq!(t.data, 2);
        assert_eq!(cell.bump(), 3);
        assert_eq!(other.load(Ordering::Relaxed), 1);
        drop(t.context);
    });
}

/// The "publish" slot of the ontop model, shared with a worker thread.
struct Board {
    log: Shared,
    slot: Mutex<Option<Context>>,
    /// The loom thread of the target (the model thread): `publish` must run there.
    target: thread::ThreadId,
}

fn board(addr: usize) -> &'static Board {
    // SAFETY: `data` in the ontop model is the address of a `Board` kept alive by the model.
    unsafe { &*(addr as *const Board) }
}

/// Runs on the target (the model thread's stack) after the parking context is suspended:
/// records itself in the log and publishes the parked context for the worker.
fn publish(t: Transfer) -> Transfer {
    let b = board(t.data);
    assert_eq!(thread::current().id(), b.target, "publish runs on the target's side");
    assert_eq!(b.log.bump(), 2, "publish runs after the context parked");
    *b.slot.lock().unwrap() = Some(t.context);
    Transfer { context: Context::placeholder(), data: 100 }
}

/// Parks once with `resume_ontop(publish)`, is resumed by the worker, then returns to it.
extern "C-unwind" fn parks_via_publish(t: Transfer) -> ! {
    let b = board(t.data);
    assert_eq!(b.log.bump(), 1);
    // SAFETY: `t.context` is the model thread, suspended in `resume`; `publish` cannot panic.
    let t = unsafe { t.context.resume_ontop(t.data, publish) };
    // Resumed by the worker: the publish (and everything before it) happened before.
    assert_eq!(b.log.bump(), 3);
    // SAFETY: `t.context` is the worker, suspended in `resume`; never resumed again.
    unsafe { t.context.resume(7) };
    unreachable!();
}

/// `resume_ontop` as a scheduler uses it: the parking context is published by a function that
/// runs on the target's side, and a second thread that finds it resumes it.
///
/// Mutations that fail it: (1) running the `ontop` function on the *source* thread before the
/// switch (publishing a context that is not suspended yet) -> "publish runs on the target's
/// side" assertion; (2) dropping the `ontop` function in `switch` (never calling it) -> the
/// target receives the source's data instead of publish's, assertion "the target receives
/// what publish returned".
#[test]
fn resume_ontop_publishes_only_after_the_switch() {
    loom::model(|| {
        let b = Arc::new(Board {
            log: Shared(UnsafeCell::new(0)),
            slot: Mutex::new(None),
            target: thread::current().id(),
        });
        let addr = Arc::as_ptr(&b) as usize;
        let b2 = b.clone();
        let worker = thread::spawn(move || {
            // Take the published context as soon as it appears.
            let ctx = loop {
                if let Some(ctx) = b2.slot.lock().unwrap().take() {
                    break ctx;
                }
                thread::yield_now();
            };
            // SAFETY: the context is suspended in `resume_ontop`.
            let t = unsafe { ctx.resume(addr) };
            assert_eq!(t.data, 7);
            drop(t.context); // finished: abandon it
        });
        let mut stack = FakeStack::new();
        // SAFETY: fresh context.
        let ctx = unsafe { stack.context(parks_via_publish) };
        // SAFETY: fresh context.
        let t = unsafe { ctx.resume(addr) };
        assert_eq!(t.data, 100, "the target receives what publish returned");
        // (No access to the log here: the parked context may already run on the worker.)
        drop(t.context); // the placeholder
        worker.join().unwrap();
        assert_eq!(b.log.bump(), 4);
    });
}

/// A plain std atomic (loom atomics cannot be statics); loom does not need to see it.
static GUARD_DROPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The same for the forced-unwind model (the models run in parallel).
static FORCED_GUARD_DROPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts its drop in the counter it points to.
struct Guard(&'static std::sync::atomic::AtomicUsize);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Parks with a guard on its stack inside a `catch_unwind` that swallows everything, then
/// (after the catch) tries to switch again: the abandon must still end the thread.
extern "C-unwind" fn parks_forever(t: Transfer) -> ! {
    let back = t.context;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _guard = Guard(&GUARD_DROPS);
        // SAFETY: `back` is the model thread, suspended in `resume`.
        unsafe { back.resume(1) }
    }));
    let payload = caught.expect_err("only an abandon gets here");
    assert!(purloin_context::is_abandon_payload(&*payload), "the abandon payload is recognisable");
    // A second switch from an abandoned context re-raises the abandon at once (sticky).
    // SAFETY: never actually switches: the loom backend re-raises before touching it.
    unsafe { Context::placeholder().resume(0) };
    unreachable!("the sticky abandon unwinds out of the entry function");
}

/// Dropping contexts that will never be resumed (never started, parked with destructors on
/// their stack, finished) lets their loom threads end: no deadlock report.
///
/// Mutation that fails it: making `Handle::drop` do nothing -> loom: "Model exceeded maximum
/// number of branches" (the model waits for the guard's drop forever); the other models
/// report "deadlock" for the same mutation.
#[test]
fn abandoned_contexts_end_their_threads() {
    loom::model(|| {
        GUARD_DROPS.store(0, std::sync::atomic::Ordering::Relaxed);
        let mut s1 = FakeStack::new();
        let mut s2 = FakeStack::new();
        // Never started.
        // SAFETY: never resumed.
        drop(unsafe { s1.context(pong) });
        // Parked with a guard on its stack.
        // SAFETY: fresh context.
        let t = unsafe { s2.context(parks_forever).resume(0) };
        assert_eq!(t.data, 1);
        assert_eq!(GUARD_DROPS.load(std::sync::atomic::Ordering::Relaxed), 0);
        drop(t.context);
        // The loom backend runs the abandoned stack's destructors (the assembly backend
        // would leak them); wait for that thread's unwinding by yielding until it shows.
        while GUARD_DROPS.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            thread::yield_now();
        }
    });
}

/// The payload of a forced unwind.
struct Forced;

fn slot(addr: usize) -> &'static Mutex<Option<Context>> {
    // SAFETY: `data` in the forced-unwind model is the address of this slot, kept alive by
    // the model.
    unsafe { &*(addr as *const Mutex<Option<Context>>) }
}

/// Runs on the parked context's side (its loom thread), inside its pending `resume`.
fn force_unwind(t: Transfer) -> Transfer {
    *slot(t.data).lock().unwrap() = Some(t.context);
    std::panic::resume_unwind(Box::new(Forced))
}

extern "C-unwind" fn parks_then_is_unwound(t: Transfer) -> ! {
    let (back, addr) = (t.context, t.data);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _guard = Guard(&FORCED_GUARD_DROPS);
        // SAFETY: `back` is the model thread, suspended in `resume`.
        unsafe { back.resume(1) };
    }));
    let code = match outcome {
        Err(p) if p.is::<Forced>() => 2,
        _ => 3,
    };
    let back = slot(addr).lock().unwrap().take().expect("force_unwind left the way back");
    // SAFETY: `back` is the model thread, suspended in `resume_ontop`; never resumed again.
    unsafe { back.resume(code) };
    unreachable!();
}

/// A forced unwind under loom, as the runtime's shutdown does it: `resume_ontop` with a
/// panicking function unwinds the parked context to its entry's `catch_unwind`, running its
/// destructors, and the context reports back.
#[test]
fn a_forced_unwind_through_resume_ontop_is_caught_by_the_entry() {
    loom::model(|| {
        FORCED_GUARD_DROPS.store(0, std::sync::atomic::Ordering::Relaxed);
        let slot = Arc::new(Mutex::new(None::<Context>));
        let addr = Arc::as_ptr(&slot) as usize;
        let mut stack = FakeStack::new();
        // SAFETY: fresh context.
        let t = unsafe { stack.context(parks_then_is_unwound).resume(addr) };
        assert_eq!(t.data, 1);
        // SAFETY: parked in `resume`; its entry catches the panic of `force_unwind`.
        let t = unsafe { t.context.resume_ontop(addr, force_unwind) };
        assert_eq!(t.data, 2, "the entry caught the Forced payload");
        assert_eq!(FORCED_GUARD_DROPS.load(std::sync::atomic::Ordering::Relaxed), 1);
        drop(t.context); // finished: abandon it
    });
}
