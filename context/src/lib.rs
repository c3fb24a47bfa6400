//! A context switch for stackful coroutines and green threads (TODO: crate docs).
#![cfg_attr(not(loom), no_std)]

#[cfg(loom)]
extern crate std;

#[cfg(not(loom))]
mod arch;
mod context;
#[cfg(loom)]
mod loom;
mod sync;
pub mod valgrind;

pub use crate::context::{Context, Entry, MIN_STACK_SIZE, Transfer};
