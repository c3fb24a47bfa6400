//! The loom backend: the same API, with every context a loom thread.
//!
//! Under `cfg(loom)`, [`Context::new`](crate::Context::new) spawns a loom thread that waits
//! for its first switch, and a switch hands control from one loom thread to another through a
//! mutex-protected mailbox (a [`Baton`]) and a condition variable. Exactly one of the threads
//! taking part runs user code at a time: the suspending thread, after it has posted the
//! message to its target, only waits on its own baton. So the scheduler's loom models run its
//! real park/yield/publish code, with loom exploring the interleavings of the *other* threads
//! (other workers) around them.
//!
//! # Memory ordering
//!
//! The guarantee: everything the suspending execution did before a switch happens-before
//! everything the resumed execution does after it, as with a real switch (program order on one
//! OS thread, or the scheduler's own synchronisation when a context migrates).
//!
//! - (P1) The suspending thread writes the message into the target's baton under the baton's
//!   mutex and unlocks (Release); the target's thread locks the same mutex (Acquire) before
//!   reading the message and running.
//!
//! Nothing else is shared: the abandon flag is written and read under the same mutex (P1).
//!
//! # Abandoned contexts
//!
//! A real context that is never resumed again simply stays suspended. A loom thread that never
//! finishes makes loom report a deadlock when the model ends, so dropping a [`Handle`] (a
//! [`Context`](crate::Context)) that was not resumed marks its baton `Abandoned` and wakes its
//! thread. That thread then unwinds with a private payload through
//! [`std::panic::resume_unwind`] (which does not run the panic hook: nothing is printed), and
//! the top of every context thread catches that payload and ends the thread quietly. The
//! unwinding runs the destructors on the abandoned context's stack (the assembly backend would
//! leak them instead). Code that catches panics on a context's stack should re-raise it
//! ([`crate::is_abandon_payload`] recognises it). It is also sticky: if user code catches the
//! payload and switches again, the switch raises it again at once, so the thread still ends.
//! A destructor that switches *while* the abandon unwinding runs therefore panics during a
//! panic, which aborts: under loom, keep switches out of destructors of values that can be
//! on an abandoned context's stack. An abandoned thread that is not a
//! context thread (the model's main thread, or a thread the model spawned) cannot be ended
//! that way; it panics with a message saying its context was dropped.

use std::boxed::Box;
use std::cell::Cell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;

use crate::context::{Context, Entry, Transfer, run_ontop};
use crate::sync::{Arc, Condvar, Mutex, spawn, thread_local};

/// The mailbox of one suspended execution.
pub(crate) struct Baton {
    state: Mutex<State>,
    wake: Condvar,
}

enum State {
    /// Suspended, waiting for a switch.
    Waiting,
    /// A switch arrived: `Waiting => Resumed` by the resumer (P1).
    Resumed { from: Handle, data: usize, ontop: usize },
    /// The handle was dropped without a switch: `Waiting => Abandoned` by `Handle::drop`.
    Abandoned,
}

/// The loom representation of a [`Context`](crate::Context): the baton of a blocked loom
/// thread, as a pointer obtained from [`Arc::into_raw`] (one strong reference, owned by the
/// handle). `None` is [`Context::placeholder`](crate::Context::placeholder).
///
/// A pointer rather than an `Arc` so that `Context` stays FFI-safe under loom too: [`Entry`]
/// functions take a [`Transfer`] by value in an `extern "C-unwind"` signature.
#[repr(transparent)]
pub(crate) struct Handle(Option<NonNull<Baton>>);

// SAFETY: the pointer is an owned strong reference to a `Baton`, whose fields (a loom `Mutex`
// and `Condvar`) are `Send + Sync`; moving the reference to another thread is what `Arc<Baton>:
// Send` allows.
unsafe impl Send for Handle {}

/// The private payload an abandoned context thread unwinds with.
struct Abandon;

/// What the current loom thread is, for the sticky abandon.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The model's main thread or a thread the model spawned.
    Plain,
    /// A thread made by `init` to run a context.
    Context,
    /// A context thread whose handle was dropped: it is unwinding to its end.
    Abandoned,
}

thread_local! {
    static ROLE: Cell<Role> = Cell::new(Role::Plain);
}

impl Baton {
    fn new() -> Arc<Baton> {
        Arc::new(Baton { state: Mutex::new(State::Waiting), wake: Condvar::new() })
    }

    /// Blocks until a switch (or an abandon) arrives, then returns the switch's message.
    fn wait(&self) -> (Handle, usize, usize) {
        let mut state = self.state.lock().unwrap();
        loop {
            match std::mem::replace(&mut *state, State::Waiting) {
                State::Waiting => state = self.wake.wait(state).unwrap(),
                State::Resumed { from, data, ontop } => return (from, data, ontop),
                State::Abandoned => {
                    drop(state);
                    abandon_current_thread();
                }
            }
        }
    }
}

/// See [`crate::is_abandon_payload`].
pub(crate) fn is_abandon_payload(payload: &(dyn std::any::Any + Send)) -> bool {
    payload.is::<Abandon>()
}

fn abandon_current_thread() -> ! {
    if ROLE.with(Cell::get) == Role::Plain {
        panic!(
            "purloin-context (loom): the Context of this thread was dropped without being \
             resumed, so this thread can never continue; keep the Context and resume it \
             before the model ends"
        );
    }
    ROLE.with(|r| r.set(Role::Abandoned));
    panic::resume_unwind(Box::new(Abandon))
}

/// Spawns the loom thread of a fresh context; it waits for the first switch, then runs
/// `ontop` (if any) and `entry`.
///
/// # Safety
///
/// None beyond what `Context::new` checked: the stack is not used under loom.
pub(crate) unsafe fn init(_stack_top: *mut u8, _stack_limit: *mut u8, entry: Entry) -> Handle {
    let baton = Baton::new();
    let mine = baton.clone();
    spawn(move || {
        ROLE.with(|r| r.set(Role::Context));
        let outcome = panic::catch_unwind(AssertUnwindSafe(move || {
            let (from, data, ontop) = mine.wait();
            drop(mine);
            let transfer = Transfer { context: Context::from_raw(from), data };
            // SAFETY: `ontop` came from `switch`, which only sends 0 or a
            // `fn(Transfer) -> Transfer`.
            let transfer = unsafe { run_ontop(transfer, ontop) };
            entry(transfer)
        }));
        match outcome {
            Err(payload) if payload.is::<Abandon>() => {}
            Err(payload) => {
                // The assembly backend aborts here ("panic in a function that cannot
                // unwind"); under loom, fail the model with the original panic instead.
                panic::resume_unwind(payload)
            }
        }
    });
    Handle::new(baton)
}

/// Posts `(our new handle, data, ontop)` to `target` and blocks until this execution is
/// resumed.
///
/// # Safety
///
/// - `target` is a suspended context (not a placeholder) that nothing else resumes.
pub(crate) unsafe fn switch(target: Handle, data: usize, ontop: usize) -> (Handle, usize, usize) {
    if ROLE.with(Cell::get) == Role::Abandoned {
        // Sticky abandon: someone caught the payload and switched again.
        panic::resume_unwind(Box::new(Abandon));
    }
    let target = target.into_baton().expect(
        "purloin-context (loom): resumed Context::placeholder(); a placeholder stands for \
         \"no context\" and can never be resumed",
    );
    let me = Baton::new();
    {
        // P1 (Release side): the message is written under the target's lock.
        let mut state = target.state.lock().unwrap();
        assert!(
            matches!(*state, State::Waiting),
            "purloin-context (loom): resumed a context that is not suspended"
        );
        *state = State::Resumed { from: Handle::new(me.clone()), data, ontop };
        target.wake.notify_one();
    }
    drop(target);
    // P1 (Acquire side): `wait` reads our message under our lock.
    me.wait()
}

impl Handle {
    /// The handle of [`Context::placeholder`](crate::Context::placeholder).
    pub(crate) const fn placeholder() -> Handle {
        Handle(None)
    }

    fn new(baton: Arc<Baton>) -> Handle {
        // SAFETY: `Arc::into_raw` never returns null.
        Handle(Some(unsafe { NonNull::new_unchecked(Arc::into_raw(baton).cast_mut()) }))
    }

    /// Takes the baton out without abandoning it.
    fn into_baton(mut self) -> Option<Arc<Baton>> {
        self.take_baton()
    }

    /// Takes the owned reference out, leaving `None` (so `drop` does nothing more).
    fn take_baton(&mut self) -> Option<Arc<Baton>> {
        let ptr = self.0.take()?;
        // SAFETY: the pointer came from `Arc::into_raw` and its strong reference is owned by
        // this handle, which gives it up here (`take` left `None` behind).
        Some(unsafe { Arc::from_raw(ptr.as_ptr().cast_const()) })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Some(baton) = self.take_baton() {
            let mut state = baton.state.lock().unwrap();
            if matches!(*state, State::Waiting) {
                *state = State::Abandoned;
                baton.wake.notify_one();
            }
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(baton) => write!(f, "loom thread baton {baton:p}"),
            None => f.write_str("placeholder"),
        }
    }
}
