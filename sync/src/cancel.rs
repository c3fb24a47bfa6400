//! Cancellation tokens: a tree of "stop this work" signals with deadlines, which the green
//! threads running in a token's scope see as interrupted waits (Go's `context.Context`,
//! tokio's `CancellationToken`).
//!
//! A token is cancelled once, by [`CancelToken::cancel`], by its deadline, or by the
//! cancellation of its parent; it never becomes live again. [`CancelToken::run`] runs a
//! closure *in the token's scope*: while the token is cancelled, every interruptible wait of
//! the calling green thread returns its "interrupted" outcome at once (see
//! [`GreenThread::interrupt`] for the list), so code deep in a call tree stops waiting without
//! a token in every signature. A token that is cancelled while a thread is parked in its
//! scope wakes that thread.
//!
//! # How a cancellation reaches a thread
//!
//! Each token keeps, under its lock, the green threads in its scope. `cancel` marks the token
//! and, under the same lock, adds one held interrupt to each of them
//! ([`GreenThread::hold_interrupt`]); a thread entering the scope of a token that is already
//! cancelled adds one itself, under the lock; a thread leaving the scope takes back the one
//! its entry added, if any. So the held count of a thread is the number of cancelled tokens
//! whose scope it is in, whatever the order of cancels, entries and exits.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use purloin_sched::{GreenThread, Timer};

use crate::butex::Butex;
use crate::loom::Ordering;
use crate::waiter::OnInterrupt;

/// Why a token was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CancelReason {
    /// [`CancelToken::cancel`] was called (on it or on an ancestor).
    Cancelled,
    /// Its deadline (or an ancestor's) passed.
    DeadlineExceeded,
}

impl std::fmt::Display for CancelReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CancelReason::Cancelled => "cancelled",
            CancelReason::DeadlineExceeded => "deadline exceeded",
        })
    }
}

impl std::error::Error for CancelReason {}

/// The butex word: `LIVE`, or the reason + 1.
const LIVE: u32 = 0;

fn reason_word(r: CancelReason) -> u32 {
    match r {
        CancelReason::Cancelled => 1,
        CancelReason::DeadlineExceeded => 2,
    }
}

struct Inner {
    /// `LIVE` until cancelled; then the reason. Waiters of `wait_cancelled` park on it.
    state: Butex,
    deadline: Option<Instant>,
    reg: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    /// Green threads in the token's scope (a slab: a scope's guard keeps its index).
    threads: Vec<Option<Entry>>,
    free: Vec<usize>,
    /// Children to cancel with this token (dead ones pruned when the list doubles).
    children: Vec<Weak<Inner>>,
    prune_at: usize,
    /// The deadline's timer, armed on the first scheduler that sees the token.
    timer: Option<Timer>,
}

struct Entry {
    thread: GreenThread,
    /// Whether this entry added a held interrupt to the thread.
    held: bool,
}

impl Inner {
    fn reason(&self) -> Option<CancelReason> {
        // Acquire: pairs with `cancel`'s Release, so what the canceller wrote before is seen
        // by whoever sees the token cancelled.
        match self.state.value().load(Ordering::Acquire) {
            LIVE => None,
            1 => Some(CancelReason::Cancelled),
            _ => Some(CancelReason::DeadlineExceeded),
        }
    }

    /// Cancels this token and its descendants; returns whether this call did it.
    fn cancel(&self, reason: CancelReason) -> bool {
        let children = {
            let mut reg = self.reg.lock().unwrap_or_else(|e| e.into_inner());
            if self.state.value().load(Ordering::Relaxed) != LIVE {
                return false;
            }
            // Release: see `reason`. Under the lock: a thread entering the scope after this
            // sees it (and holds an interrupt itself); one already in gets it below.
            self.state.value().store(reason_word(reason), Ordering::Release);
            for e in reg.threads.iter_mut().flatten() {
                e.held = e.thread.hold_interrupt(true);
            }
            if let Some(t) = reg.timer.take() {
                t.cancel();
            }
            std::mem::take(&mut reg.children)
        };
        self.state.wake_all();
        for c in children.iter().filter_map(Weak::upgrade) {
            c.cancel(reason);
        }
        true
    }

    /// The deadline passed: cancels, and reports it if the clock says so.
    fn check_deadline(&self) {
        if let Some(d) = self.deadline
            && self.state.value().load(Ordering::Relaxed) == LIVE
            && Instant::now() >= d
        {
            self.cancel(CancelReason::DeadlineExceeded);
        }
    }

    /// Arms the deadline's timer on the calling thread's scheduler, if it has a deadline, no
    /// timer yet, and the caller runs on a scheduler (else a later caller arms it; the clock
    /// check in `reason` covers observers meanwhile).
    fn arm(self: &Arc<Self>, reg: &mut Registry) {
        let Some(d) = self.deadline else { return };
        if reg.timer.is_some() || self.state.value().load(Ordering::Relaxed) != LIVE {
            return;
        }
        let weak = Arc::downgrade(self);
        let fire = move || {
            if let Some(t) = weak.upgrade() {
                t.cancel(CancelReason::DeadlineExceeded);
            }
        };
        if let Ok(t) = purloin_sched::call_at(d, fire) {
            reg.timer = Some(t);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The deadline's timer goes with the token (it holds only a weak reference).
        let reg = self.reg.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = reg.timer.take() {
            t.cancel();
        }
    }
}

/// A cancellation signal shared by a tree of work: Go's `context.Context` (cancel and
/// deadline), tokio's `CancellationToken`.
///
/// Clones share one token. [`child`](CancelToken::child) makes a token that is cancelled with
/// its parent (but not the other way); [`with_timeout`](CancelToken::with_timeout) and
/// [`with_deadline`](CancelToken::with_deadline) make a child that also cancels itself when
/// its time is up (through the scheduler's timers; the timer is deleted when the token is
/// dropped). Green threads that run [`run`](CancelToken::run) see a cancelled token as
/// interrupted waits: a cancellation adds a held interrupt to each green thread in its scope
/// (see [`GreenThread::hold_interrupt`]), which ends every interruptible wait of that thread
/// until it leaves the scope.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use purloin_sync::CancelToken;
/// use purloin_sync::channel::{RecvError, unbounded};
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let root = CancelToken::new();
/// let request = root.with_timeout(Duration::from_secs(30));
/// let (_tx, rx) = unbounded::<u32>();
/// let r = request.clone();
/// let handler = sched.spawn(move || r.run(|| rx.recv()));
/// root.cancel(); // e.g. the server shuts down: every request under it stops waiting
/// assert_eq!(handler.join().unwrap(), Err(RecvError::Interrupted));
/// assert_eq!(request.reason(), Some(purloin_sync::CancelReason::Cancelled));
/// ```
#[derive(Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl CancelToken {
    /// A new live token without a deadline or parent.
    ///
    /// # Examples
    ///
    /// ```
    /// let t = purloin_sync::CancelToken::new();
    /// assert!(!t.is_cancelled());
    /// t.cancel();
    /// assert!(t.is_cancelled());
    /// ```
    pub fn new() -> CancelToken {
        Self::make(None)
    }

    fn make(deadline: Option<Instant>) -> CancelToken {
        CancelToken {
            inner: Arc::new(Inner {
                state: Butex::new(LIVE),
                deadline,
                reg: Mutex::new(Registry::default()),
            }),
        }
    }

    /// A child token: cancelled when this one is (at once if this one already is), and
    /// cancellable on its own without affecting this one. It inherits this token's deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// let parent = purloin_sync::CancelToken::new();
    /// let child = parent.child();
    /// child.cancel();
    /// assert!(!parent.is_cancelled());
    /// let other = parent.child();
    /// parent.cancel();
    /// assert!(other.is_cancelled());
    /// ```
    pub fn child(&self) -> CancelToken {
        self.child_with(self.inner.deadline)
    }

    /// A child token that is also cancelled when `timeout` has passed (Go's
    /// `context.WithTimeout`), with reason [`CancelReason::DeadlineExceeded`]. A timeout too
    /// long to represent means no deadline of its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use purloin_sync::{CancelReason, CancelToken};
    ///
    /// let t = CancelToken::new().with_timeout(Duration::from_millis(1));
    /// t.wait_cancelled();
    /// assert_eq!(t.reason(), Some(CancelReason::DeadlineExceeded));
    /// ```
    pub fn with_timeout(&self, timeout: Duration) -> CancelToken {
        match Instant::now().checked_add(timeout) {
            Some(d) => self.with_deadline(d),
            None => self.child(),
        }
    }

    /// A child token that is also cancelled at `deadline` (Go's `context.WithDeadline`); the
    /// earlier of it and this token's deadline applies.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    ///
    /// let t = purloin_sync::CancelToken::new().with_deadline(Instant::now());
    /// assert!(t.is_cancelled()); // already past
    /// ```
    pub fn with_deadline(&self, deadline: Instant) -> CancelToken {
        let d = self.inner.deadline.map_or(deadline, |p| p.min(deadline));
        self.child_with(Some(d))
    }

    fn child_with(&self, deadline: Option<Instant>) -> CancelToken {
        let child = Self::make(deadline);
        {
            let mut reg = self.inner.reg.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(r) = self.inner.reason() {
                drop(reg);
                child.inner.cancel(r);
                return child;
            }
            if reg.children.len() >= reg.prune_at {
                reg.children.retain(|c| c.strong_count() > 0);
                reg.prune_at = (reg.children.len() * 2).max(8);
            }
            reg.children.push(Arc::downgrade(&child.inner));
        }
        if deadline.is_some() {
            let mut reg = child.inner.reg.lock().unwrap_or_else(|e| e.into_inner());
            child.inner.arm(&mut reg);
        }
        child.inner.check_deadline();
        child
    }

    /// Cancels the token and every descendant; wakes the green threads waiting in their
    /// scopes. Returns whether this call cancelled it (`false` if it already was).
    ///
    /// # Examples
    ///
    /// ```
    /// let t = purloin_sync::CancelToken::new();
    /// assert!(t.cancel());
    /// assert!(!t.cancel());
    /// ```
    pub fn cancel(&self) -> bool {
        self.inner.cancel(CancelReason::Cancelled)
    }

    /// Whether the token is cancelled (a passed deadline counts, also before its timer ran).
    ///
    /// # Examples
    ///
    /// ```
    /// let t = purloin_sync::CancelToken::new();
    /// assert!(!t.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.reason().is_some()
    }

    /// Why the token was cancelled, or `None` while it is live.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_sync::{CancelReason, CancelToken};
    ///
    /// let t = CancelToken::new();
    /// assert_eq!(t.reason(), None);
    /// t.cancel();
    /// assert_eq!(t.reason(), Some(CancelReason::Cancelled));
    /// ```
    pub fn reason(&self) -> Option<CancelReason> {
        self.inner.check_deadline();
        self.inner.reason()
    }

    /// The token's deadline, if it has one.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let t = purloin_sync::CancelToken::new();
    /// assert!(t.deadline().is_none());
    /// assert!(t.with_timeout(Duration::from_secs(1)).deadline().is_some());
    /// ```
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.inner.deadline
    }

    /// Blocks (parks the green thread) until the token is cancelled. Not itself
    /// interruptible.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let t = purloin_sync::CancelToken::new();
    /// let t2 = t.clone();
    /// let h = sched.spawn(move || t2.wait_cancelled());
    /// t.cancel();
    /// h.join().unwrap();
    /// ```
    pub fn wait_cancelled(&self) {
        loop {
            if self.reason().is_some() {
                return;
            }
            let deadline = self.inner.deadline;
            if purloin_sched::in_green_thread() {
                let mut reg = self.inner.reg.lock().unwrap_or_else(|e| e.into_inner());
                self.inner.arm(&mut reg);
            }
            self.inner.state.wait_with(LIVE, deadline, None, OnInterrupt::Ignore, |_| {});
        }
    }

    /// Runs `f` in the token's scope on the calling green thread: while the token is
    /// cancelled, the thread's interruptible waits return their "interrupted" outcome at once
    /// (and a wait it is parked in when the token is cancelled is woken to return it). Scopes
    /// nest: a thread is held interrupted while any token whose scope it is in is cancelled.
    ///
    /// On a plain OS thread (or off a scheduler) `f` just runs: OS-thread waits are not
    /// interruptible; check [`is_cancelled`](CancelToken::is_cancelled).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use purloin_sync::CancelToken;
    /// use purloin_sync::channel::{RecvTimeoutError, unbounded};
    ///
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     let t = CancelToken::new().with_timeout(Duration::from_millis(5));
    ///     let (_tx, rx) = unbounded::<()>();
    ///     // Waits at most until the token's deadline, whatever the call's own timeout.
    ///     t.run(|| rx.recv_timeout(Duration::from_secs(3600)))
    /// });
    /// assert_eq!(h.join().unwrap(), Err(RecvTimeoutError::Interrupted));
    /// ```
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let _scope = self.enter();
        f()
    }

    /// Enters the token's scope for the calling green thread until the returned guard is
    /// dropped (what [`run`](CancelToken::run) does around its closure).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = purloin_sched::Scheduler::new().unwrap();
    /// let h = sched.spawn(|| {
    ///     let t = purloin_sync::CancelToken::new();
    ///     let _in = t.enter();
    ///     t.cancel();
    ///     purloin_sched::interrupted()
    /// });
    /// assert!(h.join().unwrap());
    /// ```
    pub fn enter(&self) -> CancelScope<'_> {
        let Some(me) = purloin_sched::current() else {
            return CancelScope { token: self, slot: None };
        };
        let mut reg = self.inner.reg.lock().unwrap_or_else(|e| e.into_inner());
        self.inner.arm(&mut reg);
        let held =
            self.inner.state.value().load(Ordering::Relaxed) != LIVE && me.hold_interrupt(true);
        let entry = Some(Entry { thread: me, held });
        let slot = match reg.free.pop() {
            Some(i) => {
                reg.threads[i] = entry;
                i
            }
            None => {
                reg.threads.push(entry);
                reg.threads.len() - 1
            }
        };
        drop(reg);
        self.inner.check_deadline();
        CancelScope { token: self, slot: Some(slot) }
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("reason", &self.inner.reason())
            .field("deadline", &self.inner.deadline)
            .finish()
    }
}

/// A green thread's stay in a token's scope ([`CancelToken::enter`]); leaving it (drop) takes
/// back the held interrupt the token gave the thread, if it did.
#[must_use = "the scope ends when the guard is dropped"]
pub struct CancelScope<'a> {
    token: &'a CancelToken,
    slot: Option<usize>,
}

impl Drop for CancelScope<'_> {
    fn drop(&mut self) {
        let Some(slot) = self.slot else { return };
        let entry = {
            let mut reg = self.token.inner.reg.lock().unwrap_or_else(|e| e.into_inner());
            let e = reg.threads[slot].take();
            reg.free.push(slot);
            e
        };
        if let Some(e) = entry
            && e.held
        {
            e.thread.hold_interrupt(false);
        }
    }
}

impl std::fmt::Debug for CancelScope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelScope").field("token", self.token).finish()
    }
}
