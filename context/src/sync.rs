//! The crate's one synchronisation shim: the only module that names `core::sync::atomic`,
//! `std::thread` or `loom`. Under plain `cfg(loom)` the loom backend (`crate::loom`) gets its
//! threads, locks and thread-locals from here, so the models run the crate's real code.
//!
//! The assembly backend needs no synchronisation at all: a switch is a jump on one OS thread,
//! and moving a [`Context`](crate::Context) between threads is the caller's synchronisation.

#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex};
#[cfg(loom)]
pub(crate) use loom::thread::spawn;
#[cfg(loom)]
pub(crate) use loom::thread_local;
