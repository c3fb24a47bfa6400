//! The crate's one synchronisation shim: the only module that names `core::sync::atomic`,
//! `std::thread` or `loom`. Under plain `cfg(loom)` every atomic, cell and thread below is
//! loom's, so the loom models run the crate's real code.
#![allow(unused_imports, dead_code)]

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
