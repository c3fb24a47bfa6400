//! Inline hand-off: a machine woken by a step runs next on the same worker, inside the same
//! scheduler step, without going through the scheduler.
//!
//! A step that sends to an Idle machine (or answers the last yield of a Blocked one) wins the
//! machine's `IDLE/BLOCKED => RUNNING` transition itself (see `cell.rs`) and puts it in this
//! worker's hand-off slot. When the current machine's step is over, the worker steps the
//! machine in the slot at once — it is the next thing the worker does, as with Go's
//! `runnext` — and so on down the chain. The task under a machine handed off this way stays
//! parked in the scheduler: a hop of a token ring costs one state CAS for the wake and one for
//! the park, instead of the scheduler's unpark, queue, claim and park.
//!
//! The slot holds one machine (a step that wakes several hands the others to the scheduler,
//! where other workers can steal them), and a chain has a time slice: every [`CHECK_EVERY`]
//! hand-offs it reads the clock, and once [`SLICE`] has passed since the first reading,
//! wake-ups go through the scheduler again, so timers, the global queue and other green
//! threads on this worker wait at most about `CHECK_EVERY` steps and `SLICE`. (A budget of
//! 128 hand-offs, tried first, cost the 10k-machine ring about 15% in the scheduler's wake-ups
//! of the other worker each time the chain went back to the scheduler.)
//!
//! # Memory ordering
//!
//! No atomics here: the slot is a thread-local, touched only by the worker's own thread. The
//! machine in the slot was won with the cell's AcqRel CAS (W1 in `cell.rs`), which is what
//! orders its owner fields.

use core::cell::Cell;
use core::ptr;
use std::time::{Duration, Instant};

use super::cell::MachineCell;

/// Hand-offs between two readings of the clock.
pub(crate) const CHECK_EVERY: u32 = 256;
/// How long a chain may keep its worker from the scheduler (after the first `CHECK_EVERY`
/// hand-offs, which are not timed).
pub(crate) const SLICE: Duration = Duration::from_millis(1);

struct Chain {
    /// The host whose step runs on this thread (its `HostShared` address), or 0.
    host: Cell<usize>,
    /// The machine to step next (owned: `RUNNING`, won by a wake on this thread), or null.
    next: Cell<*const MachineCell>,
    /// Hand-offs left before the next reading of the clock (0: the slice is spent).
    budget: Cell<u32>,
    /// The first reading of the clock in this chain.
    since: Cell<Option<Instant>>,
}

impl Chain {
    /// No step of any host runs on this thread.
    const fn idle() -> Chain {
        Chain {
            host: Cell::new(0),
            next: Cell::new(ptr::null()),
            budget: Cell::new(0),
            since: Cell::new(None),
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    static CHAIN: Chain = const { Chain::idle() };
}

// loom's `thread_local!` takes no `const` initialiser.
#[cfg(loom)]
crate::loom::thread_local! {
    static CHAIN: Chain = Chain::idle();
}

/// Whether a wake of a machine of `host` made now, on this thread, may be handed off inline:
/// a step of the same host runs here, the slot is free and the budget not spent. A `true`
/// reserves nothing; the caller that then wins a machine passes it to [`put`] before any other
/// wake on this thread.
pub(crate) fn available(host: usize) -> bool {
    CHAIN.with(|c| c.host.get() == host && c.next.get().is_null() && c.budget.get() > 0)
}

/// Whether a chain runs on this thread: then the step that started it holds an epoch pin
/// (`table::pin` in `Task::step`), and lookups need no pin of their own.
#[cfg(not(loom))]
pub(crate) fn pinned() -> bool {
    CHAIN.with(|c| c.host.get() != 0)
}

/// Puts a machine won for an inline hand-off (after [`available`]) in the slot.
pub(crate) fn put(cell: *const MachineCell) {
    CHAIN.with(|c| {
        debug_assert!(c.next.get().is_null(), "the hand-off slot holds one machine");
        c.next.set(cell);
        let mut left = c.budget.get() - 1;
        if left == 0 {
            let now = Instant::now();
            match c.since.get() {
                None => {
                    c.since.set(Some(now));
                    left = CHECK_EVERY;
                }
                Some(t) if now.duration_since(t) < SLICE => left = CHECK_EVERY,
                Some(_) => {} // the slice is spent
            }
        }
        c.budget.set(left);
    });
}

/// Restores the chain of an outer scope; a machine still in the slot (only if the step
/// unwound) goes to the scheduler rather than being lost.
struct Scope {
    host: usize,
    next: *const MachineCell,
    budget: u32,
    since: Option<Instant>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        let left = CHAIN.with(|c| {
            c.host.set(self.host);
            c.budget.set(self.budget);
            c.since.set(self.since);
            c.next.replace(self.next)
        });
        if !left.is_null() {
            // SAFETY: a machine in the slot was won by a wake on this thread and is owned by
            // it (`RUNNING`): nobody else can finish it, so its task (which holds a reference
            // until the machine completes) keeps the cell alive.
            unsafe { (*left).requeue() };
        }
    }
}

/// Runs `first` (a step of a machine of `host`, on this worker) with inline hand-off enabled,
/// then every machine handed off, in turn. The caller holds an epoch pin throughout (see
/// [`pinned`]).
pub(crate) fn run<R>(host: usize, first: impl FnOnce() -> R) -> R {
    let outer = CHAIN.with(|c| Scope {
        host: c.host.replace(host),
        next: c.next.replace(ptr::null()),
        budget: c.budget.replace(CHECK_EVERY),
        since: c.since.replace(None),
    });
    let result = first();
    loop {
        let next = CHAIN.with(|c| c.next.replace(ptr::null()));
        if next.is_null() {
            break;
        }
        // SAFETY: as in `Scope::drop`: the machine was won by this thread and is alive until
        // it completes, which only its owner (this call) can make happen.
        unsafe { (*next).run_inline() };
    }
    drop(outer);
    result
}
