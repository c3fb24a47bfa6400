//! Green-thread-aware synchronisation: locks, condition variables, one-time initialisation,
//! barriers, wait groups, semaphores and MPMC channels with [`select!`] that park the waiting
//! **green thread** of a [`purloin_sched`] scheduler — never its worker's OS thread — and
//! work the same from plain OS threads.
//!
//! A green thread that waits on a `std::sync::Mutex` blocks its worker's OS thread; if the
//! holder is a green thread queued on the same worker, the worker deadlocks (brpc#1741,
//! brpc#1099, may's caveats). The types here wait the way brpc's bthreads and Go's goroutines
//! do: the waiter records itself in the object's wait queue and parks; the worker runs other
//! green threads; the thread that releases the object makes the waiter runnable again.
//!
//! The `purloin` runtime re-exports this crate as `purloin::sync` (and the macro as
//! `purloin::select!`, the timer channels as `purloin::time::{after, at, never}`); depend on
//! it directly when you build on `purloin-sched` without the facade.
//!
//! ```
//! use std::sync::Arc;
//! use purloin_sync::channel::bounded;
//! use purloin_sync::{Mutex, WaitGroup};
//!
//! let sched = purloin_sched::Builder::new().workers(2).build().unwrap();
//! let totals = Arc::new(Mutex::new(Vec::new()));
//! let wg = Arc::new(WaitGroup::new());
//! let (jobs, inbox) = bounded::<u64>(16);
//! for _ in 0..4 {
//!     wg.add(1);
//!     let (inbox, totals, wg) = (inbox.clone(), totals.clone(), wg.clone());
//!     sched.spawn(move || {
//!         let sum: u64 = inbox.iter().sum(); // parks the green thread while the channel is empty
//!         totals.lock().unwrap().push(sum);
//!         wg.done();
//!     });
//! }
//! for job in 1..=100 {
//!     jobs.send(job).unwrap(); // blocks this OS thread while the channel is full
//! }
//! drop(jobs); // disconnect: the green threads' iterators end after the last job
//! wg.wait();
//! assert_eq!(totals.lock().unwrap().iter().sum::<u64>(), 5050);
//! ```
//!
//! # What is here
//!
//! | type | like | notes |
//! |---|---|---|
//! | [`Mutex`] / [`MutexGuard`] | `std::sync::Mutex` | spins briefly, then parks; barging with Go's 1 ms starvation hand-off; poisoning as std |
//! | [`Condvar`] | `std::sync::Condvar` | `wait`, `wait_while`, `wait_timeout(_while)`, `notify_one/all` |
//! | [`RwLock`] | `std::sync::RwLock` | writer-preferring: readers queue behind a waiting writer |
//! | [`Once`], [`OnceLock`] | std's | late arrivals park until the initialiser finishes; poisoning as std |
//! | [`Barrier`] | `std::sync::Barrier` | one leader per round |
//! | [`WaitGroup`] | Go's `sync.WaitGroup` | `add`, `done`, `wait`, `wait_timeout` |
//! | [`Semaphore`] | tokio's | FIFO: released permits go to the oldest request first |
//! | [`Butex`] | brpc's butex, a futex word | the primitive under everything: `wait(expected, deadline)`, `wake_one/all/(n)` |
//! | [`channel`] | crossbeam-channel | `bounded(n)` (0 = rendezvous), `unbounded()`, timer channels (`after`, `at`, `never`), timeouts, disconnection, [`select!`] |
//!
//! # One waiting primitive
//!
//! Every blocking operation waits the same way. The waiter puts a small record (a *waiter*,
//! plus one *node* per object it waits on) **on its own stack** — Go's sudog, brpc's
//! `ButexWaiter` — links the node into the object's intrusive wait list, and parks: a green
//! thread with the scheduler's `park`, an OS thread on a futex word inside its waiter
//! ([`purloin_parking::futex`]). Both kinds share one FIFO list. Waiting never allocates (a
//! `select` over rendezvous channels allocates one small packet per operation).
//!
//! A waker *claims* a queued waiter with one CAS (so exactly one of several operations of a
//! `select` wins, and a waiter that timed out cannot also be woken), unlinks it, completes the
//! hand-off, and wakes it. A green thread woken by another green thread goes into the waker's
//! `runnext` slot, so two green threads that pass messages back and forth run as a unit on one
//! worker, without a trip through the run queues (Go's rule).
//!
//! # Safety model
//!
//! The public API is safe. `unsafe` is confined to the wait lists (raw pointers to nodes on
//! other threads' stacks) and to the channels' slots; every block says which invariant makes it
//! sound and where it is established, and each protocol module opens with a *Memory ordering*
//! section. The rule that makes on-stack nodes sound: a waker touches a waiter only while
//! holding the lock of a list its node is linked in, or between its claim and its final
//! `DONE` store; a waiter returns only when none of its nodes is linked and no claim is in
//! flight. Each wait keeps its nodes in a guard whose destructor gives up the wait (and passes
//! a claim it can no longer use on to the next waiter), so a green thread **unwound** at
//! scheduler shutdown while it waits (the scheduler resumes it with a forced-unwind panic)
//! leaves no dangling node behind.
//!
//! # Deadlock reports
//!
//! Waits always record what they wait on (a [`purloin_sched::WaitInfo`]: a few relaxed stores
//! into the waiting green thread's record), so [`Scheduler::parked`] says what each parked
//! green thread waits for in every build. In debug builds, or with the `deadlock-detection`
//! cargo feature, locks also record their holder (mutex and write lock owners, `Once`
//! initialisers, in [`WaitInfo::holder`]), so the `purloin` runtime's `detect_deadlock` and
//! its deadlock report print wait-for cycles between green threads, by name. A green thread
//! that blocks its OS thread instead (in a std lock or `std::thread::sleep`) past the
//! monitor's threshold is reported by the scheduler's monitor, by name.
//!
//! [`Scheduler::parked`]: purloin_sched::Scheduler::parked
//! [`WaitInfo::holder`]: purloin_sched::WaitInfo::holder
//!
//! # Not supported, and why
//!
//! - **Requeue** (moving waiters from a condition variable to its mutex): a waiter's node may
//!   only live in a queue whose lifetime covers the wait, which a safe `Butex::requeue` cannot
//!   guarantee for the target; `notify_all` wakes everyone instead (as std and Go do), which
//!   costs only a park per waiter that finds the mutex taken.
//! - **Timed lock acquisition** (`try_lock_for`): not in std's API; use `try_lock` in a loop
//!   with [`purloin_sched::sleep`], or a [`Semaphore`] with `acquire_timeout`.
//! - **`Select::ready`** (readiness without an operation): select and complete an operation
//!   instead.
//! - **Blocking in stackless tasks** ([`purloin_sched::Task`]): they have no stack to park;
//!   use the `try_*` methods there.
//! - **Periodic timer channels** (`tick`): a ticker needs a runtime to fire it; the `purloin`
//!   runtime has `purloin::time::{tick, Ticker}`. The one-shot timer channels here need none.
//! - Holding a `std::sync::MutexGuard` (or any OS lock) across a park of these types: the other
//!   green threads of that worker keep running and may want the same OS lock. Use
//!   [`Mutex`] instead.
//!
//! # Cargo features
//!
//! - `deadlock-detection`: record lock holders in release builds too (always on in debug
//!   builds), for wait-for cycles. Costs a thread-local lookup per lock acquisition. The
//!   `purloin` runtime's feature of the same name turns this one on.
//!
//! # Loom
//!
//! ```text
//! cargo xtask loom -p purloin-sync
//! ```
//!
//! runs the models in `tests/loom_sync.rs` (and the internal ones under
//! `#[cfg(all(test, loom))]`) against the real code: every atomic comes from the crate's loom
//! shim, OS-thread waits use purloin-parking's futex emulation (which lets a timed wait expire
//! at any point), and green threads run on purloin-sched's scheduler on loom.
#![warn(missing_docs)]

#[macro_use]
mod loom;
mod diagnostics;
mod poison;
mod raw_lock;
mod waiter;

mod barrier;
mod butex;
#[cfg(not(loom))]
mod cancel;
pub mod channel;
mod condvar;
mod mutex;
mod once;
mod rwlock;
mod semaphore;
mod waitgroup;

pub use barrier::{Barrier, BarrierWaitResult};
pub use butex::{Butex, ButexWait};
#[cfg(not(loom))]
pub use cancel::{CancelReason, CancelScope, CancelToken};
pub use condvar::{Condvar, WaitTimeoutResult};
#[cfg(not(loom))]
#[doc(hidden)]
pub use diagnostics::note_runtime_code;
pub use mutex::{Mutex, MutexGuard};
pub use once::{Once, OnceLock, OnceState};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};
pub use waitgroup::WaitGroup;
