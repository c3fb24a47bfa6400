//! [`Once`] and [`OnceLock`]: one-time initialisation on one butex; threads that arrive while
//! another initialises park until it finishes.
//!
//! # State (`state`, the butex word)
//!
//! A status in bits 0..2 — `INCOMPLETE => RUNNING` (an initialiser claimed it) `=> COMPLETE`,
//! or back to `POISONED` (the initialiser panicked) or `INCOMPLETE` (a
//! [`OnceLock::get_or_try_init`] closure returned an error: the next caller retries) — plus a
//! `QUEUED` bit set by anyone going to sleep on the word; the initialiser's final swap clears
//! it and wakes them all.
//!
//! # Memory ordering
//!
//! The guarantee: the initialiser's writes happen before every return from `call_once` (and
//! every `OnceLock::get` that sees the value).
//!
//! - (O1) The initialiser's final `swap` to `COMPLETE` is Release; the Acquire loads of
//!   `COMPLETE` (fast path, after waking) pair with it.
//! - (O2) Claiming (`INCOMPLETE => RUNNING`) is Acquire: a re-initialisation after a poisoned
//!   or failed attempt sees that attempt's writes.

use core::cell::{Cell, UnsafeCell};
use core::fmt;
use core::mem::MaybeUninit;

use purloin_sched::WaitKind;

use crate::butex::Butex;
use crate::diagnostics::{Holder, wait_info};
use crate::loom::Ordering;
use crate::waiter::OnInterrupt;

const INCOMPLETE: u32 = 0;
const POISONED: u32 = 1;
const RUNNING: u32 = 2;
const COMPLETE: u32 = 3;
const STATUS: u32 = 3;
/// Someone sleeps on the word: the initialiser's final swap must wake them.
const QUEUED: u32 = 4;

/// Runs a one-time initialisation, like [`std::sync::Once`], parking the green threads that
/// arrive while it runs.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_sync::Once;
///
/// static INIT: Once = Once::new();
/// static RUNS: AtomicUsize = AtomicUsize::new(0);
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let hs: Vec<_> = (0..4)
///     .map(|_| sched.spawn(|| INIT.call_once(|| { RUNS.fetch_add(1, Ordering::SeqCst); })))
///     .collect();
/// for h in hs {
///     h.join().unwrap();
/// }
/// assert_eq!(RUNS.load(Ordering::SeqCst), 1);
/// assert!(INIT.is_completed());
/// ```
pub struct Once {
    state: Butex,
    holder: Holder,
}

/// What [`Once::call_once_force`]'s closure learns about the `Once`.
#[derive(Debug)]
pub struct OnceState {
    poisoned: bool,
    /// The state to publish when the closure returns normally.
    set_state_to: Cell<u32>,
}

impl OnceState {
    /// Whether an earlier initialisation panicked.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }
}

impl Once {
    loom_const_fn! {
        /// A `Once` that has not run.
        pub fn new() -> Once {
            Once { state: Butex::new(INCOMPLETE), holder: Holder::new() }
        }
    }

    /// Runs `f` if no call has completed yet; otherwise returns at once. If another thread is
    /// running its closure, waits for it (parking the green thread).
    ///
    /// # Panics
    ///
    /// If an earlier closure panicked (the `Once` is poisoned; use
    /// [`call_once_force`](Once::call_once_force) to run anyway), and re-raises a panic of `f`.
    pub fn call_once<F: FnOnce()>(&self, f: F) {
        // O1: Acquire pairs with the initialiser's Release.
        if self.state.value().load(Ordering::Acquire) == COMPLETE {
            return;
        }
        let mut f = Some(f);
        self.call(false, &mut |_| (f.take().expect("runs once"))());
    }

    /// Like [`call_once`](Once::call_once), but runs even if poisoned (the closure learns it
    /// through [`OnceState::is_poisoned`]); a successful run clears the poison.
    pub fn call_once_force<F: FnOnce(&OnceState)>(&self, f: F) {
        // O1: as in `call_once`.
        if self.state.value().load(Ordering::Acquire) == COMPLETE {
            return;
        }
        let mut f = Some(f);
        self.call(true, &mut |s| (f.take().expect("runs once"))(s));
    }

    /// Whether a closure has completed.
    #[inline]
    pub fn is_completed(&self) -> bool {
        // O1.
        self.state.value().load(Ordering::Acquire) == COMPLETE
    }

    /// Blocks until a closure has completed (without running one).
    ///
    /// # Panics
    ///
    /// If the `Once` is or becomes poisoned.
    pub fn wait(&self) {
        self.wait_inner(false);
    }

    /// Blocks until a closure has completed, ignoring poison.
    pub fn wait_force(&self) {
        self.wait_inner(true);
    }

    fn wait_inner(&self, ignore_poison: bool) {
        // O1: Acquire pairs with the initialiser's Release.
        let mut state = self.state.value().load(Ordering::Acquire);
        loop {
            match state & STATUS {
                COMPLETE => return,
                POISONED if !ignore_poison => poisoned_panic(),
                _ => {}
            }
            state = self.sleep(state);
        }
    }

    /// Sets QUEUED (if needed) and sleeps while the word holds that value; returns the new
    /// state (O1: loaded with Acquire).
    fn sleep(&self, mut state: u32) -> u32 {
        let word = self.state.value();
        if state & QUEUED == 0 {
            match word.compare_exchange(state, state | QUEUED, Ordering::Relaxed, Ordering::Acquire)
            {
                Ok(_) => state |= QUEUED,
                Err(s) => return s,
            }
        }
        let info = wait_info(WaitKind::Once, self, self.holder.get());
        // Waiters are woken all at once: nothing to pass on when unwound.
        self.state.wait_with(state, None, info, OnInterrupt::Ignore, |_| {});
        // O1.
        word.load(Ordering::Acquire)
    }

    fn call(&self, ignore_poison: bool, f: &mut dyn FnMut(&OnceState)) {
        let word = self.state.value();
        let mut state = word.load(Ordering::Acquire);
        loop {
            match state & STATUS {
                COMPLETE => return,
                POISONED if !ignore_poison => poisoned_panic(),
                RUNNING => state = self.sleep(state),
                _ => {
                    // INCOMPLETE or POISONED. O2: Acquire sees a failed earlier attempt's
                    // writes. Keep QUEUED: sleepers must be woken at the end.
                    if let Err(s) = word.compare_exchange(
                        state,
                        RUNNING | (state & QUEUED),
                        Ordering::Acquire,
                        Ordering::Acquire,
                    ) {
                        state = s;
                        continue;
                    }
                    self.holder.set_current();
                    // Poison if `f` unwinds (a panic, or a forced unwind at shutdown).
                    let mut done = Publish { once: self, state: POISONED };
                    let once_state = OnceState {
                        poisoned: state & STATUS == POISONED,
                        set_state_to: Cell::new(COMPLETE),
                    };
                    f(&once_state);
                    done.state = once_state.set_state_to.get();
                    return;
                }
            }
        }
    }
}

/// Publishes the end of an initialisation (also when it unwinds) and wakes the waiters.
struct Publish<'a> {
    once: &'a Once,
    state: u32,
}

impl Drop for Publish<'_> {
    fn drop(&mut self) {
        self.once.holder.clear();
        // O1: Release publishes the initialiser's writes.
        let prev = self.once.state.value().swap(self.state, Ordering::Release);
        if prev & QUEUED != 0 {
            self.once.state.wake_all();
        }
    }
}

#[cold]
fn poisoned_panic() -> ! {
    panic!(
        "purloin_sync::Once: an earlier initialisation panicked (the Once is poisoned); use \
         call_once_force to initialise anyway"
    )
}

impl Default for Once {
    fn default() -> Self {
        Once::new()
    }
}

impl fmt::Debug for Once {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Once").field("completed", &self.is_completed()).finish_non_exhaustive()
    }
}

/// A cell written once, like [`std::sync::OnceLock`]; threads that read it while another
/// initialises it park until the value is there.
///
/// # Examples
///
/// ```
/// use purloin_sync::OnceLock;
///
/// static CONFIG: OnceLock<String> = OnceLock::new();
///
/// let sched = purloin_sched::Scheduler::new().unwrap();
/// let h = sched.spawn(|| CONFIG.get_or_init(|| "from a green thread".to_string()).len());
/// let len = h.join().unwrap();
/// assert_eq!(CONFIG.get().unwrap().len(), len);
/// assert_eq!(CONFIG.set("too late".to_string()), Err("too late".to_string()));
/// ```
pub struct OnceLock<T> {
    once: Once,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is written once (by the thread that runs the `Once`) before `COMPLETE`
// is published (O1) and then only read through `&T`: sharing needs `T: Sync`, and since any
// thread may be the writer (or take the value by `into_inner`), also `T: Send`.
unsafe impl<T: Sync + Send> Sync for OnceLock<T> {}
// SAFETY: owning the lock owns the value.
unsafe impl<T: Send> Send for OnceLock<T> {}

impl<T> OnceLock<T> {
    loom_const_fn! {
        /// An empty cell.
        pub fn new() -> OnceLock<T> {
            OnceLock { once: Once::new(), value: UnsafeCell::new(MaybeUninit::uninit()) }
        }
    }

    /// The value, if initialised.
    #[inline]
    pub fn get(&self) -> Option<&T> {
        if self.once.is_completed() {
            // SAFETY: COMPLETE (seen with Acquire, O1) means the value was written.
            Some(unsafe { self.get_unchecked() })
        } else {
            None
        }
    }

    /// The value through a unique borrow, if initialised.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        if self.once.is_completed() {
            // SAFETY: initialised (COMPLETE), and `&mut self` is unique.
            Some(unsafe { (*self.value.get()).assume_init_mut() })
        } else {
            None
        }
    }

    /// Blocks (parks) until the value is initialised, and returns it.
    pub fn wait(&self) -> &T {
        self.once.wait_force();
        // SAFETY: `wait_force` returns only once COMPLETE.
        unsafe { self.get_unchecked() }
    }

    /// Initialises with `value` if empty.
    ///
    /// # Errors
    ///
    /// `Err(value)` if the cell was already initialised (or another thread won a concurrent
    /// initialisation).
    pub fn set(&self, value: T) -> Result<(), T> {
        let mut value = Some(value);
        self.get_or_init(|| value.take().expect("taken once"));
        match value {
            None => Ok(()),
            Some(v) => Err(v),
        }
    }

    /// The value, initialising it with `f` first if empty. If several threads call this at
    /// once, one runs `f` and the others park until it finishes.
    ///
    /// # Panics
    ///
    /// Re-raises a panic of `f` (the cell stays empty and the next caller initialises it).
    pub fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        match self.get_or_try_init(|| Ok::<T, core::convert::Infallible>(f())) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// The value, initialising it with `f` first if empty; if `f` fails, the cell stays empty
    /// (the next caller tries again) and the error is returned. (std has this as unstable.)
    ///
    /// # Errors
    ///
    /// `f`'s error.
    pub fn get_or_try_init<E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        if let Some(v) = self.get() {
            return Ok(v);
        }
        let mut f = Some(f);
        let mut result = Ok(());
        let slot = &self.value;
        self.once.call(true, &mut |state| {
            match (f.take().expect("runs once"))() {
                // SAFETY: we run the `Once`'s closure, so no one else touches the slot, and it
                // is published by the `COMPLETE` store after we return (O1).
                Ok(v) => unsafe {
                    (*slot.get()).write(v);
                },
                Err(e) => {
                    result = Err(e);
                    state.set_state_to.set(INCOMPLETE);
                }
            }
        });
        result?;
        // SAFETY: `call` returned without error, so the value is initialised (by us or by
        // another thread, COMPLETE seen with Acquire).
        Ok(unsafe { self.get_unchecked() })
    }

    /// Consumes the cell and returns the value, if initialised.
    pub fn into_inner(mut self) -> Option<T> {
        self.take()
    }

    /// Takes the value out, leaving the cell empty.
    pub fn take(&mut self) -> Option<T> {
        if self.once.is_completed() {
            self.once = Once::new();
            // SAFETY: it was initialised, and resetting `once` marks it empty so it is not
            // read or dropped again.
            Some(unsafe { (*self.value.get()).assume_init_read() })
        } else {
            None
        }
    }

    /// # Safety
    ///
    /// - The value is initialised (the `Once` completed).
    #[inline]
    unsafe fn get_unchecked(&self) -> &T {
        // SAFETY: initialised per the obligation, and never written again while shared.
        unsafe { (*self.value.get()).assume_init_ref() }
    }
}

impl<T> Drop for OnceLock<T> {
    fn drop(&mut self) {
        if self.once.is_completed() {
            // SAFETY: initialised, and dropped once (we are being dropped).
            unsafe { (*self.value.get()).assume_init_drop() };
        }
    }
}

impl<T> Default for OnceLock<T> {
    fn default() -> Self {
        OnceLock::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_tuple("OnceLock");
        match self.get() {
            Some(v) => d.field(v),
            None => d.field(&format_args!("<uninit>")),
        };
        d.finish()
    }
}

impl<T: Clone> Clone for OnceLock<T> {
    fn clone(&self) -> Self {
        let cell = OnceLock::new();
        if let Some(v) = self.get() {
            let _ = cell.set(v.clone());
        }
        cell
    }
}

impl<T> From<T> for OnceLock<T> {
    fn from(value: T) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(value);
        cell
    }
}

impl<T: PartialEq> PartialEq for OnceLock<T> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<T: Eq> Eq for OnceLock<T> {}

impl<T: std::panic::RefUnwindSafe + std::panic::UnwindSafe> std::panic::RefUnwindSafe
    for OnceLock<T>
{
}
impl<T: std::panic::UnwindSafe> std::panic::UnwindSafe for OnceLock<T> {}
