//! What a green thread can do to itself and to others: identify itself, yield, park and be
//! unparked, sleep.

use core::fmt;
use std::time::{Duration, Instant};

use crate::g::{self, GRef};
use crate::worker::{self, ACT_PARK, ACT_YIELD, current_worker, switch_out};

/// A handle to a green thread: its identity, and the means to unpark it.
///
/// Cheap to copy. It stays valid after the green thread ends: operations on an ended green
/// thread are detected (its id's generation has moved on) and do nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct GreenThread {
    pub(crate) g: GRef,
    pub(crate) generation: u32,
}

/// A green thread's id: `generation << 32 | slot`, unique among the green threads alive at one
/// time, and never equal to the id of an earlier green thread that used the same slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GreenId(pub u64);

impl fmt::Display for GreenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl GreenThread {
    /// This green thread's id.
    pub fn id(&self) -> GreenId {
        GreenId(self.g.id_with(self.generation))
    }

    /// The name given at spawn, if any, while the green thread is alive (`None` after it
    /// ended).
    pub fn name(&self) -> Option<std::sync::Arc<str>> {
        if !self.g.try_ref() {
            return None;
        }
        let name = if self.g.generation() == self.generation { self.g.name() } else { None };
        if self.g.drop_ref() {
            g::recycle_anywhere(self.g);
        }
        name
    }

    /// Makes a [`park`]ed green thread runnable, or makes its next `park` return at once
    /// (a token, like [`std::thread::Thread::unpark`]). Returns `false` if the green thread
    /// has ended.
    pub fn unpark(&self) -> bool {
        worker::unpark(self)
    }

    /// Whether the green thread has ended (its slot has moved on).
    pub fn is_finished(&self) -> bool {
        let w = self.g.state.load(crate::sync::Ordering::Acquire);
        g::generation_of(w) != self.generation || g::status_of(w) == g::DONE
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
pub fn current() -> Option<GreenThread> {
    let m = current_worker()?;
    let g = m.current.get()?;
    // SAFETY: the running G's own cells are touched only by itself (we are it).
    let inline = unsafe { g.inline_child.with(|c| *c) };
    Some(inline.unwrap_or(GreenThread { g, generation: g.generation() }))
}

/// Whether this code runs on a green thread.
pub fn in_green_thread() -> bool {
    current_worker().is_some_and(|m| m.current.get().is_some())
}

/// Lets the worker run its other green threads before this one continues. On a plain OS
/// thread it yields the OS thread.
pub fn yield_now() {
    if !in_green_thread() {
        crate::sync::thread::yield_now();
        return;
    }
    switch_out(ACT_YIELD);
    after_resume();
}

/// Blocks the current green thread until [`GreenThread::unpark`] is called on it (or returns
/// at once if a token is pending). Like [`std::thread::park`], it may also return spuriously:
/// call it in a loop that checks the condition you wait for. On a plain OS thread it parks the
/// OS thread.
pub fn park() {
    let Some(g) = running_g() else {
        crate::sync::thread::park();
        return;
    };
    if g.take_notified() {
        after_resume();
        return;
    }
    if !g.begin_park() {
        g.take_notified();
        after_resume();
        return;
    }
    switch_out(ACT_PARK);
    after_resume();
}

/// [`park`] with a deadline: returns at the latest shortly after `deadline` (or spuriously).
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
    add_timer(m, deadline, GreenThread { g, generation: g.generation() });
    park();
}

/// [`park`] for at most `timeout`.
pub fn park_timeout(timeout: Duration) {
    match Instant::now().checked_add(timeout) {
        Some(deadline) => park_deadline(deadline),
        None => park(),
    }
}

/// Sleeps until `deadline`. On a green thread it parks (its worker runs other green threads);
/// on a plain OS thread it sleeps the OS thread.
pub fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        if !in_green_thread() {
            std::thread::sleep(deadline - now);
            continue;
        }
        park_deadline(deadline);
    }
}

/// Sleeps for `duration` (see [`sleep_until`]).
pub fn sleep(duration: Duration) {
    match Instant::now().checked_add(duration) {
        Some(deadline) => sleep_until(deadline),
        None => loop {
            park();
        },
    }
}

/// The record of the running green thread (the host when running a child inline).
pub(crate) fn running_g() -> Option<GRef> {
    current_worker()?.current.get()
}

fn add_timer(m: &worker::M, deadline: Instant, g: GreenThread) {
    if m.holds_p() {
        m.p().add_timer(&m.shared, deadline, g);
    } else {
        // In a blocking section (or without a P): use P 0's heap; its holder or a searcher
        // fires it. A timer never needs the P's owner-only parts.
        m.shared.ps[0].add_timer(&m.shared, deadline, g);
        m.shared.wake_worker(0);
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
fn after_resume() {
    let Some(g) = running_g() else { return };
    if g.is_cancelled() && !std::thread::panicking() {
        // Unwind the green thread's stack so its destructors run; its entry catches this.
        std::panic::resume_unwind(Box::new(crate::ForcedUnwind));
    }
}

/// The panic payload a green thread unwinds with when its runtime shuts down while it is
/// parked. Its joiner receives it as `Err`.
#[derive(Debug, Clone, Copy)]
pub struct ForcedUnwind;

impl fmt::Display for ForcedUnwind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the green thread was unwound because its runtime shut down while it waited")
    }
}
