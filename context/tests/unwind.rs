//! Panics inside contexts: caught at the entry function's `catch_unwind`, including a forced
//! unwind injected with `resume_ontop` (the unwinding passes out of the target's `resume` call
//! and through its frames, running their destructors).
#![cfg(not(loom))]

mod common;

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{TestStack, Watchdog};
use purloin_context::{Context, Transfer};

/// Counts drops of values that lived on context stacks.
static DROPS: AtomicUsize = AtomicUsize::new(0);

/// The tests in this file share `DROPS`: each holds this lock while it counts.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The payload of a forced unwind (what a runtime would use at shutdown).
struct ForcedUnwind;

const PANICKED: usize = 1;
const FORCED: usize = 2;
const FINISHED: usize = 3;

/// How the context parks in `park_at_depth`.
#[derive(Clone, Copy)]
enum Park {
    Resume,
    ResumeOntop,
}

/// Runs `body` under `catch_unwind` and reports how it ended, like a scheduler's trampoline.
fn run_caught(t: Transfer, body: fn(&Cell<Option<Context>>, usize)) -> ! {
    let parent = Cell::new(Some(t.context));
    let arg = t.data;
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| body(&parent, arg)));
    let code = match outcome {
        Ok(()) => FINISHED,
        Err(payload) if payload.is::<ForcedUnwind>() => FORCED,
        Err(payload) => {
            assert!(!purloin_context::is_abandon_payload(&*payload), "only loom abandons");
            assert_eq!(message(&*payload), "boom at the bottom");
            PANICKED
        }
    };
    // After a forced unwind the context to return to was handed over by `force_unwind`
    // (the unwinding started before `park_at_depth` could put it back in the cell).
    let parent =
        parent.take().or_else(|| RETURN_TO.with(Cell::take)).expect("a context to return to");
    // SAFETY: `parent` is suspended in `resume`/`resume_ontop`; we are never resumed again.
    unsafe { parent.resume(code) };
    unreachable!("a finished context was resumed");
}

fn message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string payload>")
}

fn identity(t: Transfer) -> Transfer {
    t
}

#[inline(never)]
fn park_at_depth(depth: usize, parent: &Cell<Option<Context>>, how: Park, then_panic: bool) {
    let _guard = Guard;
    if depth == 0 {
        let ctx = parent.take().unwrap();
        // SAFETY: `ctx` is the test thread, suspended in `resume`.
        let t = unsafe {
            match how {
                Park::Resume => ctx.resume(0),
                Park::ResumeOntop => ctx.resume_ontop(0, identity),
            }
        };
        parent.set(Some(t.context));
        if then_panic {
            panic!("boom at the bottom");
        }
    } else {
        park_at_depth(depth - 1, parent, how, then_panic);
    }
}

extern "C-unwind" fn panics_after_one_park(t: Transfer) -> ! {
    run_caught(t, |parent, _| park_at_depth(3, parent, Park::Resume, true))
}

extern "C-unwind" fn parks_with_resume(t: Transfer) -> ! {
    run_caught(t, |parent, _| park_at_depth(3, parent, Park::Resume, false))
}

extern "C-unwind" fn parks_with_resume_ontop(t: Transfer) -> ! {
    run_caught(t, |parent, _| park_at_depth(3, parent, Park::ResumeOntop, false))
}

thread_local! {
    /// Where `force_unwind` leaves the context that injected it, for the unwound context's
    /// last switch (a runtime keeps its scheduler context in its worker record instead). The
    /// unwound context runs on the same OS thread as the injector until it switches away.
    static RETURN_TO: Cell<Option<Context>> = const { Cell::new(None) };
}

fn force_unwind(t: Transfer) -> Transfer {
    RETURN_TO.with(|r| r.set(Some(t.context)));
    // `resume_unwind` does not run the panic hook: nothing is printed.
    panic::resume_unwind(Box::new(ForcedUnwind))
}

#[test]
fn a_panic_inside_a_context_is_caught_by_its_entry_function() {
    let _dog = Watchdog::new("panic caught", 60);
    let _serial = serial();
    let stack = TestStack::new(256 * 1024);
    let before = DROPS.load(Ordering::Relaxed);
    // SAFETY: the stack outlives the context.
    let ctx = unsafe { Context::new(stack.top(), stack.limit(), panics_after_one_park) };
    // SAFETY: fresh context.
    let t = unsafe { ctx.resume(0) };
    assert_eq!(t.data, 0, "parked at depth 3");
    // Silence the default hook's message for this expected panic.
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    // SAFETY: the context is suspended in `resume`.
    let t = unsafe { t.context.resume(0) };
    panic::set_hook(hook);
    assert_eq!(t.data, PANICKED);
    assert_eq!(DROPS.load(Ordering::Relaxed) - before, 4, "the four frames' guards dropped");
}

fn forced_unwind_case(entry: purloin_context::Entry) {
    let _serial = serial();
    let stack = TestStack::new(256 * 1024);
    let before = DROPS.load(Ordering::Relaxed);
    // SAFETY: the stack outlives the context.
    let ctx = unsafe { Context::new(stack.top(), stack.limit(), entry) };
    // SAFETY: fresh context.
    let t = unsafe { ctx.resume(0) };
    assert_eq!(t.data, 0, "parked at depth 3");
    assert_eq!(DROPS.load(Ordering::Relaxed), before, "nothing dropped while parked");
    // SAFETY: the context is suspended in `resume`/`resume_ontop` and its entry catches
    // every panic, so `force_unwind` may panic on its stack.
    let t = unsafe { t.context.resume_ontop(0, force_unwind) };
    assert_eq!(t.data, FORCED, "the entry function caught the ForcedUnwind payload");
    assert_eq!(DROPS.load(Ordering::Relaxed) - before, 4, "every frame's guard was dropped");
}

#[test]
fn a_forced_unwind_through_resume_ontop_reaches_the_entry_catch_unwind() {
    let _dog = Watchdog::new("forced unwind", 60);
    forced_unwind_case(parks_with_resume);
}

#[test]
fn a_forced_unwind_also_works_on_a_context_parked_in_resume_ontop() {
    let _dog = Watchdog::new("forced unwind ontop", 60);
    forced_unwind_case(parks_with_resume_ontop);
}

#[test]
fn forced_unwinds_of_many_contexts_drop_everything_exactly_once() {
    let _dog = Watchdog::new("many forced unwinds", 120);
    let _serial = serial();
    const N: usize = 300;
    let stacks: Vec<TestStack> = (0..N).map(|_| TestStack::new(64 * 1024)).collect();
    let before = DROPS.load(Ordering::Relaxed);
    let mut parked = Vec::new();
    for (i, s) in stacks.iter().enumerate() {
        let entry = if i % 2 == 0 { parks_with_resume } else { parks_with_resume_ontop };
        // SAFETY: the stacks outlive the contexts.
        let ctx = unsafe { Context::new(s.top(), s.limit(), entry) };
        // SAFETY: fresh context.
        parked.push(unsafe { ctx.resume(0) }.context);
    }
    // Unwind them in reverse order, from another OS thread.
    let codes = std::thread::spawn(move || {
        parked
            .into_iter()
            .rev()
            // SAFETY: each context is parked and its entry catches every panic.
            .map(|ctx| unsafe { ctx.resume_ontop(0, force_unwind) }.data)
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    assert!(codes.iter().all(|&c| c == FORCED));
    assert_eq!(DROPS.load(Ordering::Relaxed) - before, 4 * N);
}
