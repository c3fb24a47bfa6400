//! How idle threads sleep and get woken: word waits with deadlines, a sharded parking lot
//! without lost wake-ups or needless syscalls, and a per-thread parker.
//!
//! This is the sleeping layer of the purloin green-thread runtime, usable on its own:
//!
//! - [`futex`]: block while an [`AtomicU32`](futex::AtomicU32) holds a value, with an optional
//!   absolute deadline; wake one, `n` or all waiters and learn how many woke. `futex` on Linux,
//!   `WaitOnAddress` on Windows, a documented fallback elsewhere, and a loom emulation.
//! - [`ParkingLot`]: brpc's idle protocol. A worker takes a [`State`] snapshot, looks for work,
//!   and waits on the snapshot; any [`signal`](ParkingLot::signal) after the snapshot ends the
//!   wait. The number of sleeping threads lives in the same word as the signal counter, so a
//!   signal with nobody asleep is one `fetch_add` and no syscall, and no store-buffering race
//!   can lose a wake-up (brpc#2916, #3539).
//! - [`ParkingLots`]: lots sharded by worker ([`ParkingLots::for_workers`] picks one per four
//!   workers), with brpc's `signal_task` (wake at most 2, walk the lots round-robin, report
//!   how many woke).
//! - [`Parker`] / [`Unparker`]: std's park/unpark token on one futex word, with
//!   [`park_deadline`](Parker::park_deadline) and an [`unpark`](Unparker::unpark) that reports
//!   whether the thread was asleep.
//! - [`stats`]: counters of waits, wakes, skipped and wasted wakes, spurious returns.
//!
//! # Example: a pool of workers that sleep when idle
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use purloin_parking::ParkingLots;
//!
//! const WORKERS: usize = 4;
//! let lots = ParkingLots::for_workers(WORKERS);
//! let queued = AtomicUsize::new(0); // stands in for a run queue
//! let done = AtomicUsize::new(0);
//!
//! std::thread::scope(|s| {
//!     for worker in 0..WORKERS {
//!         let (lots, queued, done) = (&lots, &queued, &done);
//!         s.spawn(move || {
//!             let lot = lots.lot(lots.lot_for_worker(worker));
//!             loop {
//!                 let state = lot.state(); // 1. snapshot BEFORE looking
//!                 // 2. look for work
//!                 let took = queued
//!                     .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
//!                 if took.is_ok() {
//!                     done.fetch_add(1, Ordering::Relaxed);
//!                     continue;
//!                 }
//!                 if state.is_stopped() {
//!                     return;
//!                 }
//!                 lot.wait(state); // 3. sleep unless signalled since 1.
//!             }
//!         });
//!     }
//!     for task in 0..100 {
//!         queued.fetch_add(1, Ordering::Release); // publish,
//!         lots.signal_task(1, task % lots.len()); // then signal
//!     }
//!     while done.load(Ordering::Relaxed) < 100 {
//!         std::thread::yield_now();
//!     }
//!     lots.stop();
//! });
//! assert_eq!(done.load(Ordering::Relaxed), 100);
//! ```
//!
//! # Safety model
//!
//! The public API is safe. `unsafe` is confined to the OS calls in `src/futex/` (the futex
//! syscall, `clock_gettime`, `WaitOnAddress`), each with a `// SAFETY:` comment. The wake
//! functions take `*const AtomicU32` rather than a reference so that a thread may wake after
//! the word could have been freed (an unlock's last act); the pointer is never dereferenced,
//! so a dangling one at worst wakes a stranger spuriously. Every wait tolerates spurious
//! returns. Each lock-free module (`lot`, `parker`, the atomic-wait platform glue) opens with
//! a *Memory ordering* section listing its Release/Acquire pairs.
//!
//! # Cargo features
//!
//! - `stats` (off by default): record the [`stats`] counters. Off, recording compiles to
//!   nothing; on, each counted event is one relaxed `fetch_add` on a shared line.
//!
//! # Platforms
//!
//! Linux and Android (tested on x86_64 Linux, and on aarch64 Linux under qemu-user), Windows 8+
//! (`WaitOnAddress`; tested on x86_64-pc-windows-gnu under wine), macOS/iOS/watchOS/FreeBSD
//! (atomic-wait plus a condvar table for timed waits; type-checked for macOS, not run), any
//! other `std` platform (condvar table). Wake counts are exact only on Linux, Android and the
//! condvar table ([`futex::WAKE_COUNT_IS_EXACT`]). See [`futex`] for details.
//!
//! # loom
//!
//! Under `RUSTFLAGS="--cfg loom"` every atomic, lock and `Arc` of the crate is loom's (through
//! the crate's one shim, `src/sync.rs`), and [`futex`] becomes an emulation on loom's `Mutex`
//! and `Condvar`, so the loom models run the real protocol code. A crate above (the scheduler)
//! built with the same flag gets the emulation too and can model "publish, signal" against
//! "snapshot, look, wait" end to end. The models live in `tests/loom_*.rs` and in
//! `#[cfg(all(test, loom))]` modules; run them with
//!
//! ```text
//! cargo xtask loom -p purloin-parking
//! ```
//!
//! (`cargo test --release -p purloin-parking --lib --tests` with
//! `RUSTFLAGS="--cfg loom -C debug-assertions"` and `LOOM_MAX_PREEMPTIONS=2`).
#![warn(missing_docs)]

pub mod futex;
mod lot;
mod lots;
mod parker;
pub mod stats;
mod sync;

pub use lot::{ParkingLot, SATURATED_POLL, State};
pub use lots::{MAX_SIGNAL, ParkingLots, WORKERS_PER_LOT};
pub use parker::{Parker, Unparker};
