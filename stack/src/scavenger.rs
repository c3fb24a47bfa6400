//! The scavenger: one background thread per process that gives the memory of stacks returned
//! beyond the pools' bounds back to the kernel, in bulk, so that returning a stack never makes
//! a system call.
//!
//! A return beyond a class's `pool_capacity` leaves the stack resident in the class's
//! `excess` list and wakes the scavenger (`pool.rs`). The scavenger lets a burst of returns
//! settle (it waits while `excess` keeps growing, [`SETTLE`] at a time, at most
//! [`MAX_DELAY`] from its wake-up), then takes `excess` in batches of [`BATCH`] and gives the
//! memory back with one `madvise` per run of adjacent slots (`ClassPool::scavenge`). So the
//! memory of a burst is given back at most [`MAX_DELAY`] plus one pass after its last return,
//! and [`trim`](crate::trim) still gives everything back at once, waiting for a batch the
//! scavenger holds.
//!
//! It lives in this crate, not in a scheduler's monitor, because the pool is process-wide and
//! used without a scheduler (or with several); it is started on the first deferred return and
//! sleeps on a condition variable while there is nothing to give back, so an idle process
//! pays nothing for it. If the thread cannot be started, the returning thread scavenges
//! itself (memory is given back late rather than never).
//!
//! `fork`: a `pthread_atfork` handler makes a fork wait for the batch in progress (so the
//! child never inherits a class lock held by a thread it does not have; a round releases its
//! hold between batches, so a fork never waits for a whole round), and a child that returns
//! stacks beyond the bound starts its own scavenger thread.
//!
//! # Memory ordering
//!
//! The guarantee: a stack pushed to `excess` before [`Wakeup::notify`] is taken by a
//! scavenger round that starts after that notify, so none is left behind while the
//! scavenger sleeps (no lost wake-up).
//!
//! - (S1) A returner pushes to `excess` (Release CAS, `pool.rs` P1) and then swaps `pending`
//!   to true with AcqRel; only the returner that turns it from false to true takes the mutex
//!   and sets `woken`. The scavenger, after waking (mutex), swaps `pending` to false with
//!   AcqRel *before* it pops. Either the returner's swap comes first in `pending`'s
//!   modification order, so the scavenger's swap reads it (or a later value in the same
//!   release sequence) and its pops, after the swap, see the push; or it comes after the
//!   scavenger's, reads false, and wakes the scavenger for another round.
//! - `woken` is only touched under the mutex, which orders the notify with the wait.

use crate::sync::{AtomicBool, Condvar, Mutex, Ordering, lock};

/// Slots one scavenger step takes (and gives back) at once; `trim` waits for at most one.
pub(crate) const BATCH: usize = 4096;
/// How long the scavenger waits for a burst of returns to pause before giving memory back.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const SETTLE: std::time::Duration = std::time::Duration::from_millis(10);
/// The longest the scavenger waits after a wake-up before giving memory back, even while
/// returns continue: the bound on how long a returned stack beyond the pool's bounds stays
/// resident (plus the time to give back what came before it).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const MAX_DELAY: std::time::Duration = std::time::Duration::from_millis(200);

/// Wakes the scavenger once per round, however many stacks are returned meanwhile.
pub(crate) struct Wakeup {
    /// A round is due (S1).
    pub(crate) pending: AtomicBool,
    /// Set under the mutex by the notify that made `pending` true.
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wakeup {
    pub(crate) fn new() -> Wakeup {
        Wakeup { pending: AtomicBool::new(false), woken: Mutex::new(false), cv: Condvar::new() }
    }

    /// After a push to `excess`: makes sure a scavenger round starts after it. Takes the
    /// mutex only when no round was due yet. Returns whether it woke the scavenger.
    pub(crate) fn notify(&self) -> bool {
        // AcqRel (S1): pairs with the scavenger's swap in `begin_round`.
        if self.pending.swap(true, Ordering::AcqRel) {
            return false;
        }
        let mut woken = lock(&self.woken);
        *woken = true;
        self.cv.notify_one();
        true
    }

    /// The scavenger: sleeps until notified (at once if a notify came since the last wait).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn wait(&self) {
        let mut woken = lock(&self.woken);
        while !*woken {
            woken = match self.cv.wait(woken) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
        *woken = false;
    }

    /// The scavenger, before it pops: later notifies wake it for another round.
    pub(crate) fn begin_round(&self) {
        // AcqRel (S1): pairs with the returners' swaps in `notify`.
        self.pending.swap(false, Ordering::AcqRel);
    }
}

/// One scavenger round over `classes`, after [`Wakeup::wait`]: clears `pending` first (S1),
/// then takes every class's `excess` in batches, each under a guard from `hold` (the thread's
/// [`InRound`], so that a `fork` waits for one batch, not for the whole round).
pub(crate) fn round<'a, H>(
    wake: &Wakeup,
    classes: impl Iterator<Item = &'a crate::pool::ClassPool>,
    hold: impl Fn() -> H,
) -> usize {
    wake.begin_round();
    let mut taken = 0;
    for class in classes {
        loop {
            let n = {
                let _held = hold();
                class.scavenge(BATCH)
            };
            taken += n;
            if n < BATCH {
                break;
            }
        }
    }
    taken
}

/// Set while the scavenger thread gives back a batch (and so may hold a class's `scavenging`
/// lock), or while a `fork` is under way (see [`before_fork`]).
#[cfg(not(loom))]
static IN_ROUND: crate::sync::real::AtomicBool = crate::sync::real::AtomicBool::new(false);

/// Takes [`IN_ROUND`], waiting for a round or a fork in progress to end.
#[cfg(not(loom))]
fn enter_round() {
    use crate::sync::real::Ordering as RealOrdering;
    // Acquire: pairs with the Release in `leave_round` (the previous holder's writes).
    while IN_ROUND
        .compare_exchange_weak(false, true, RealOrdering::Acquire, RealOrdering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
}

#[cfg(not(loom))]
fn leave_round() {
    // Release: pairs with the Acquire in `enter_round`.
    IN_ROUND.store(false, crate::sync::real::Ordering::Release);
}

/// [`IN_ROUND`] held for one batch of a round.
#[cfg(not(loom))]
struct InRound;

#[cfg(not(loom))]
impl InRound {
    fn enter() -> InRound {
        enter_round();
        InRound
    }
}

#[cfg(not(loom))]
impl Drop for InRound {
    fn drop(&mut self) {
        leave_round();
    }
}

/// Serializes starting the scavenger thread (see [`wake`]).
#[cfg(not(loom))]
static STARTING: crate::sync::real::Mutex<()> = crate::sync::real::Mutex::new(());

#[cfg(not(loom))]
std::thread_local! {
    /// The locks the forking thread holds across `fork` (taken by [`before_fork`], released by
    /// the parent and child handlers; the child is a copy of the forking thread, so it finds
    /// them here too).
    static HELD_ACROSS_FORK: core::cell::RefCell<Option<ForkLocks>> =
        const { core::cell::RefCell::new(None) };
}

/// The scavenger's mutexes, held by the forking thread so that no other thread holds them at
/// the fork: the child, which has only the forking thread, would wait on them forever.
#[cfg(not(loom))]
struct ForkLocks {
    _starting: std::sync::MutexGuard<'static, ()>,
    _woken: std::sync::MutexGuard<'static, bool>,
}

/// `pthread_atfork` prepare handler: a fork waits for a scavenger batch to end, so the child
/// never inherits a class's `scavenging` lock held by a thread it does not have, and takes the
/// scavenger's own mutexes for the same reason. The order (`STARTING`, a batch's hold, `woken`)
/// is the order [`wake`] takes them in; the scavenger thread holds `woken` only inside
/// [`Wakeup::wait`], never with a batch.
#[cfg(not(loom))]
extern "C" fn before_fork() {
    let starting = crate::sync::real::lock(&STARTING);
    enter_round();
    let woken = lock(&crate::global::global().scavenger.woken);
    HELD_ACROSS_FORK
        .with(|h| *h.borrow_mut() = Some(ForkLocks { _starting: starting, _woken: woken }));
}

/// Releases what [`before_fork`] took.
#[cfg(not(loom))]
fn release_fork_locks() {
    leave_round();
    HELD_ACROSS_FORK.with(|h| drop(h.borrow_mut().take()));
}

#[cfg(not(loom))]
extern "C" fn after_fork_in_parent() {
    release_fork_locks();
}

/// `pthread_atfork` child handler: the parent's scavenger thread does not exist here; a
/// round that was due in the parent is forgotten so the child's next deferred return wakes
/// (and starts) its own.
#[cfg(not(loom))]
extern "C" fn after_fork_in_child() {
    // AcqRel (S1): as `begin_round`; the child has one thread, so any ordering would do.
    crate::global::global().scavenger.pending.swap(false, Ordering::AcqRel);
    release_fork_locks();
}

/// The process whose scavenger thread is running (0: none yet).
#[cfg(not(loom))]
static RUNNING_IN: crate::sync::real::AtomicU32 = crate::sync::real::AtomicU32::new(0);

/// Wakes the process-wide scavenger after a deferred return, starting it on first use in
/// this process (a forked child starts its own: its parent's thread does not exist there).
#[cfg(not(loom))]
pub(crate) fn wake() {
    use crate::sync::real::{Ordering as RealOrdering, lock};
    static AT_FORK: std::sync::Once = std::sync::Once::new();
    let g = crate::global::global();
    if !g.scavenger.notify() {
        return;
    }
    // Once per round, not per return: `notify` let this caller through.
    let pid = std::process::id();
    // Relaxed: a cache of the check made under `STARTING` below.
    if RUNNING_IN.load(RealOrdering::Relaxed) == pid {
        return;
    }
    let _starting = lock(&STARTING);
    if RUNNING_IN.load(RealOrdering::Relaxed) == pid {
        return;
    }
    AT_FORK.call_once(|| {
        // SAFETY: the handlers are `extern "C"` functions that live forever and only touch
        // atomics; registering them has no other precondition. On failure (ENOMEM) a fork
        // during a round could leave a child's `trim` waiting: nothing else changes.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_in_parent),
                Some(after_fork_in_child),
            )
        };
    });
    let started =
        std::thread::Builder::new().name("purloin-stack-scavenger".into()).spawn(run).is_ok();
    if started {
        // Relaxed: the `STARTING` mutex orders the starts.
        RUNNING_IN.store(pid, RealOrdering::Relaxed);
    } else {
        // No thread (this time): give the memory back here, late rather than never.
        g.scavenger.wait();
        round(&g.scavenger, g.classes(), InRound::enter);
    }
}

/// Under loom no thread is started: models run [`round`] themselves.
#[cfg(loom)]
pub(crate) fn wake() {}

/// The kernel thread id of the running scavenger thread (0: none in this process; only
/// Linux has one to tell).
#[cfg(all(target_os = "linux", not(loom)))]
static THREAD_ID: crate::sync::real::AtomicU64 = crate::sync::real::AtomicU64::new(0);

/// See [`crate::scavenger_thread_id`].
pub(crate) fn thread_id() -> Option<u64> {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        use crate::sync::real::Ordering as RealOrdering;
        // Relaxed: an identifier, read by a diagnostic that re-checks what it sees. A forked
        // child has no scavenger until it starts its own: the pid check drops the parent's.
        let pid = std::process::id();
        let running = RUNNING_IN.load(RealOrdering::Relaxed) == pid;
        let tid = THREAD_ID.load(RealOrdering::Relaxed);
        (running && tid != 0).then_some(tid)
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    None
}

/// The scavenger thread's loop.
#[cfg(not(loom))]
fn run() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        // Relaxed: see `thread_id`.
        THREAD_ID.store(tid as u64, crate::sync::real::Ordering::Relaxed);
    }
    let g = crate::global::global();
    loop {
        g.scavenger.wait();
        settle(|| g.classes().map(|c| c.excess()).sum());
        round(&g.scavenger, g.classes(), InRound::enter);
    }
}

/// Waits while `excess()` keeps growing, [`SETTLE`] at a time, for at most [`MAX_DELAY`].
#[cfg(not(loom))]
fn settle(excess: impl Fn() -> usize) {
    let start = std::time::Instant::now();
    let mut last = excess();
    while start.elapsed() + SETTLE <= MAX_DELAY {
        std::thread::sleep(SETTLE);
        let now = excess();
        if now <= last {
            break;
        }
        last = now;
    }
}

/// Loom models of the wake-up protocol and of the scavenger against `trim` and leases, on the
/// real pool code.
///
/// Mutations checked (each made, run, seen to fail, reverted): see the model docs.
#[cfg(all(test, loom))]
mod models {
    use super::*;
    use crate::arena::{RES_CLEAN, RES_MASK};
    use crate::options::Options;
    use crate::os;
    use crate::pool::ClassPool;
    use crate::sync::{Arc, model, thread};

    fn pool() -> ClassPool {
        let opts = Options::new().pool_capacity(0).resident_capacity(0).keep_resident(0);
        ClassPool::new(0, os::page_size(), os::probe_backend().unwrap(), &opts, false)
    }

    /// A returner returns two stacks beyond the bound (each a deferred return and a notify)
    /// while the scavenger runs rounds until told to stop; once it has stopped, no stack is
    /// left in `excess`: every deferred return was followed by a round that saw it.
    ///
    /// Mutation caught: `round` calling `begin_round` after the scavenging loop instead of
    /// before ("a deferred return was left behind": the second notify finds `pending` still
    /// true, the round that clears it has already popped).
    #[test]
    fn no_deferred_return_is_left_behind() {
        model(|| {
            let p = Arc::new(pool());
            let wake = Arc::new(Wakeup::new());
            let stop = Arc::new(AtomicBool::new(false));
            let a = p.lease().unwrap();
            let b = p.lease().unwrap();
            let (p1, w1) = (p.clone(), wake.clone());
            let returner = thread::spawn(move || {
                for s in [a, b] {
                    if p1.give_back(s) {
                        w1.notify();
                    }
                }
            });
            let (p2, w2, st) = (p.clone(), wake.clone(), stop.clone());
            let scavenger = thread::spawn(move || {
                // `Wakeup::wait` with a way out: a notify's round runs before a stop is
                // looked at, so stopping means every notify so far had its round.
                let mut woken = lock(&w2.woken);
                loop {
                    if *woken {
                        *woken = false;
                        drop(woken);
                        round(&w2, std::iter::once(&*p2), || ());
                        woken = lock(&w2.woken);
                    // Relaxed: written under the same mutex.
                    } else if st.load(Ordering::Relaxed) {
                        break;
                    } else {
                        woken = w2.cv.wait(woken).unwrap();
                    }
                }
            });
            returner.join().unwrap();
            {
                let _woken = lock(&wake.woken);
                // Relaxed: read under the same mutex.
                stop.store(true, Ordering::Relaxed);
                wake.cv.notify_one();
            }
            scavenger.join().unwrap();
            assert_eq!(p.excess(), 0, "a deferred return was left behind");
        });
    }

    /// `trim` while the scavenger takes a batch and another thread leases: when `trim`
    /// returns, no slot that was in `excess` when it was called is still resident (each is
    /// clean, or leased by the other thread).
    ///
    /// Mutation caught: `ClassPool::scavenge` without its `scavenging` lock ("trim returned
    /// while a pooled stack was resident": the scavenger held a popped, not yet given back
    /// slot).
    #[test]
    fn trim_waits_for_the_scavengers_batch() {
        model(|| {
            let p = Arc::new(pool());
            let a = p.lease().unwrap();
            let b = p.lease().unwrap();
            assert!(p.give_back(a) && p.give_back(b), "beyond the bound: deferred");
            let p1 = p.clone();
            let scavenger = thread::spawn(move || {
                p1.scavenge(BATCH);
            });
            let p2 = p.clone();
            let leaser = thread::spawn(move || p2.lease().unwrap().slot);
            p.trim();
            let leased = leaser.join().unwrap();
            for s in [a.slot, b.slot] {
                let state = p.meta(s).state.load(Ordering::Relaxed) & RES_MASK;
                assert!(
                    s == leased || state == RES_CLEAN,
                    "trim returned while a pooled stack was resident"
                );
            }
            scavenger.join().unwrap();
        });
    }
}
