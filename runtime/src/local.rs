//! Green-local storage: a value per green thread, like `thread_local!` per OS thread
//! (bthread's bthread-local, may's coroutine-local storage).
//!
//! # Thread-locals and migration
//!
//! A green thread can stop on one OS thread and continue on another, so a `thread_local!`
//! value seen before a yield, park, channel wait or I/O wait may belong to another green
//! thread afterwards, and a reference to it kept across that point may dangle (may#6,
//! generator#58, llvm#98479). Use [`green_local!`](crate::green_local) for per-green-thread
//! state; access thread-locals afresh after every scheduling point; and spawn the green thread
//! *pinned* ([`Builder::pinned`](crate::Builder::pinned)) when a library needs one OS thread.

use core::any::Any;

use crate::loom::{Ordering, ProcessFlag};

/// Declares green-thread-local storage: each green thread that accesses the key gets its own
/// value, initialised on first access and dropped when the green thread ends.
///
/// ```
/// use std::cell::Cell;
///
/// purloin::green_local! {
///     static COUNTER: Cell<u32> = Cell::new(0);
/// }
///
/// let h = purloin::spawn(|| {
///     COUNTER.with(|c| c.set(c.get() + 1));
///     purloin::yield_now(); // may move to another OS thread: the value moves with us
///     COUNTER.with(|c| c.get())
/// });
/// assert_eq!(h.join().unwrap(), 1);
/// ```
#[macro_export]
macro_rules! green_local {
    ($($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr;)+) => {$(
        $(#[$attr])*
        $vis static $name: $crate::LocalKey<$t> = {
            fn __purloin_green_local_init() -> $t { $init }
            $crate::LocalKey::new(__purloin_green_local_init)
        };
    )+};
}

/// A key for green-local storage, declared with [`green_local!`](crate::green_local).
pub struct LocalKey<T: 'static> {
    init: fn() -> T,
}

/// Accessing a green-local outside a green thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessError;

impl std::fmt::Display for AccessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "green-local storage is only available on a green thread (spawn one with \
             purloin::spawn); on plain OS threads use thread_local!",
        )
    }
}

impl std::error::Error for AccessError {}

impl<T: 'static> LocalKey<T> {
    #[doc(hidden)]
    pub const fn new(init: fn() -> T) -> LocalKey<T> {
        LocalKey { init }
    }

    /// Calls `f` with this green thread's value (initialising it on first access).
    ///
    /// # Panics
    /// Outside a green thread (see [`LocalKey::try_with`]).
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        self.try_with(f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`LocalKey::with`], but returns an error outside a green thread.
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        let map = current_map().ok_or(AccessError)?;
        let key = self as *const Self as *const ();
        // SAFETY: `map` is this green thread's map (only it touches it); values are boxed, so
        // the reference below stays valid when other keys are added during `f`.
        let value: *const T = unsafe {
            match (*map).iter().find(|(k, _)| *k == key) {
                Some((_, v)) => v.downcast_ref::<T>().expect("green-local type matches its key"),
                None => {
                    let boxed: Box<dyn Any> = Box::new((self.init)());
                    (*map).push((key, boxed));
                    (*map).last().and_then(|(_, v)| v.downcast_ref::<T>()).expect("just pushed")
                }
            }
        };
        // SAFETY: the value lives until the green thread ends (after `f` returns).
        Ok(f(unsafe { &*value }))
    }
}

type Map = Vec<(*const (), Box<dyn Any>)>;

/// Set when a green thread first makes a green-locals map ([`current_map`]); until then no
/// green thread has one, so a green thread's end skips looking for its map (one load instead
/// of a scheduler lookup: what every spawned, scoped or stolen green thread of a program that
/// uses no green-locals pays at its end). Relaxed: a green thread that made a map reads its
/// own store (program order, also when it moved between workers, which is a Release/Acquire
/// hand-off); any other green thread has no map to find, whatever it reads.
static MAPS_MADE: ProcessFlag = ProcessFlag::new(false);

/// The current green thread's map, created on first use.
fn current_map() -> Option<*mut Map> {
    let ptr = purloin_sched::current_locals()?;
    if !ptr.is_null() {
        return Some(ptr.cast());
    }
    if !MAPS_MADE.load(Ordering::Relaxed) {
        MAPS_MADE.store(true, Ordering::Relaxed);
    }
    let map: *mut Map = Box::into_raw(Box::new(Map::new()));
    purloin_sched::set_current_locals(map.cast());
    Some(map)
}

/// Frees a green-locals map the scheduler hands back (`Builder::locals_destructor`: the
/// second half of a `join` that ran as a green thread of its own).
///
/// # Safety
/// `ptr` came from `current_map` (a `Box<Map>` stored with `set_current_locals`) and was
/// detached from its green thread, so this is its only free.
pub(crate) unsafe fn free_map(ptr: *mut ()) {
    // SAFETY: the caller's contract: a detached `Box<Map>` from `current_map`.
    drop(unsafe { Box::from_raw(ptr.cast::<Map>()) });
}

/// Frees the current green thread's green-locals (repeatedly: a destructor may create more).
#[inline]
fn free_current() {
    if MAPS_MADE.load(Ordering::Relaxed) {
        free_current_maps();
    }
}

/// [`free_current`] once some green thread has made a map.
#[cold]
#[inline(never)]
fn free_current_maps() {
    loop {
        let Some(ptr) = purloin_sched::current_locals() else { return };
        if ptr.is_null() {
            return;
        }
        // Detach first: a destructor that touches green-locals gets a fresh map, freed by the
        // next round of this loop.
        purloin_sched::set_current_locals(core::ptr::null_mut());
        // SAFETY: the pointer came from `current_map` and was detached above.
        unsafe { free_map(ptr) };
    }
}

/// Wraps a green thread's body so its green-locals are dropped when it ends (on its own stack,
/// even if it panics).
pub(crate) fn with_locals<F, T>(f: F) -> impl FnOnce() -> T + Send
where
    F: FnOnce() -> T + Send,
{
    move || {
        struct Free;
        impl Drop for Free {
            #[inline]
            fn drop(&mut self) {
                free_current();
            }
        }
        let _free = Free;
        f()
    }
}
