//! The netpoller of one runtime: the selector (epoll), the per-socket readiness records, and
//! the [`purloin_sched::Poller`] implementation the workers call.
//!
//! # Records and stale events
//!
//! Each registered socket owns one [`IoState`] in a slab of fixed chunks that are never freed
//! while the driver lives (Go's `pollCache` is type-stable for the same reason). The epoll
//! token is `generation << 32 | slot`. A worker may read an event from `epoll_wait` and then
//! look up its record while another thread deregisters that socket and a third registers a
//! new one in the same slot: the memory is still an `IoState` (never freed), and the
//! generation check drops nearly every such stale event. One that slips through (read the
//! generation just before the bump) is a spurious edge on the new socket, which the
//! readiness protocol tolerates: its waiter retries the syscall and waits again.
//!
//! # Polling
//!
//! Workers poll without blocking in every search; when they would park, sched lets one of them
//! block here (see `purloin_sched::Poller`). A non-blocking poll is skipped when no green
//! thread waits for I/O (nothing to deliver), when a worker is blocked in `epoll_wait` (it
//! gets every event at once: Go's `lastpoll == 0` rule), or when another non-blocking poll is
//! running.
//!
//! # Memory ordering
//!
//! The guarantee: a [`Driver::wake`] interrupts a blocking poll that is running or the next
//! one to start.
//!
//! - (W1) `wake` sets `wake_pending` and, if it was clear, writes the eventfd. The eventfd is
//!   level-triggered and only a blocking poll drains it, so once written it is reported to
//!   every `epoll_wait` until a blocking poll has returned with it.
//! - (W2) A blocking poll that sees the eventfd drains it *then* clears `wake_pending` with
//!   a swap (Release; pairs with the Acquire swap in `wake`). A `wake` whose swap comes before the
//!   clear finds the flag set and writes nothing: it lands while that blocking poll is
//!   already returning, which is the poll the waker meant to interrupt (sched lets one
//!   worker block at a time). A `wake` whose swap comes after the clear writes again.
//!   Clearing before draining would be wrong: a `wake` in between would leave the flag set
//!   with the eventfd drained, and every later wake would be lost (the
//!   `wake_vs_blocking_poll` model checks this: mutation "clear, then drain" deadlocks).
//! - (C1) Chunk pointers are published with Release and read with Acquire, so a record
//!   found through an event is initialised.
//! - Counters (`waiters`, `blocked`) are hints and Relaxed: a stale read costs one skipped or
//!   one wasted non-blocking poll, never a lost event (a blocking poll or the next search
//!   gets it).

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

use purloin_sched::GreenThread;

use super::readiness::Readiness;
#[cfg(loom)]
use super::selector_loom as selector;
use crate::loom::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Mutex, Ordering, lock};
use selector::{Events, READ_EVENTS, READ_FINAL, Selector, WAKER_TOKEN, WRITE_EVENTS, WRITE_FINAL};

#[cfg(not(loom))]
use super::selector;

/// Records per slab chunk, and chunks per driver (the registration limit is the product:
/// 4,194,304 sockets per runtime).
#[cfg(not(loom))]
const CHUNK: usize = 1024;
#[cfg(not(loom))]
const MAX_CHUNKS: usize = 4096;
#[cfg(loom)]
const CHUNK: usize = 2;
#[cfg(loom)]
const MAX_CHUNKS: usize = 2;

/// Which side of a socket an operation waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

/// The readiness record of one registered socket.
pub(crate) struct IoState {
    /// Bumped each time the slot is released; part of the epoll token.
    generation: AtomicU32,
    read: Readiness<GreenThread>,
    write: Readiness<GreenThread>,
}

impl IoState {
    fn new() -> IoState {
        IoState { generation: AtomicU32::new(0), read: Readiness::new(), write: Readiness::new() }
    }

    pub(crate) fn dir(&self, d: Direction) -> &Readiness<GreenThread> {
        match d {
            Direction::Read => &self.read,
            Direction::Write => &self.write,
        }
    }
}

struct FreeList {
    free: Vec<u32>,
    /// Slots below this were handed out at least once.
    next: u32,
}

/// Type-stable storage for [`IoState`]s (see the module docs).
struct Slab {
    /// Pointer to the first record of each chunk, or null (C1).
    chunks: Box<[AtomicPtr<IoState>]>,
    free: Mutex<FreeList>,
}

impl Slab {
    fn new() -> Slab {
        Slab {
            chunks: (0..MAX_CHUNKS).map(|_| AtomicPtr::new(core::ptr::null_mut())).collect(),
            free: Mutex::new(FreeList { free: Vec::new(), next: 0 }),
        }
    }

    fn get(&self, slot: u32) -> Option<&IoState> {
        let slot = slot as usize;
        // C1: Acquire pairs with the Release store in `acquire`.
        let chunk = self.chunks.get(slot / CHUNK)?.load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk pointer points at CHUNK initialised records that live
        // until the slab drops (chunks are never freed before); `slot % CHUNK < CHUNK`.
        Some(unsafe { &*chunk.add(slot % CHUNK) })
    }

    fn acquire(&self) -> io::Result<u32> {
        let mut f = lock(&self.free);
        if let Some(slot) = f.free.pop() {
            return Ok(slot);
        }
        let slot = f.next as usize;
        if slot >= CHUNK * MAX_CHUNKS {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "purloin::net: more than {} sockets are registered with one runtime's \
                     netpoller; close sockets (or spread them over several runtimes)",
                    CHUNK * MAX_CHUNKS
                ),
            ));
        }
        if slot.is_multiple_of(CHUNK) {
            let chunk: Box<[IoState]> = (0..CHUNK).map(|_| IoState::new()).collect();
            let ptr = Box::into_raw(chunk).cast::<IoState>();
            // C1: Release publishes the initialised records (pairs with `get`).
            self.chunks[slot / CHUNK].store(ptr, Ordering::Release);
        }
        f.next += 1;
        Ok(slot as u32)
    }

    fn release(&self, slot: u32) {
        if let Some(io) = self.get(slot) {
            io.read.reset();
            io.write.reset();
            io.generation.fetch_add(1, Ordering::Relaxed);
        }
        lock(&self.free).free.push(slot);
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        for c in self.chunks.iter() {
            let ptr = c.load(Ordering::Relaxed);
            if !ptr.is_null() {
                let slice = core::ptr::slice_from_raw_parts_mut(ptr, CHUNK);
                // SAFETY: `ptr` came from `Box::into_raw` of a CHUNK-long boxed slice in
                // `acquire`, and nobody can hold a record any more (we are dropping the slab,
                // and registrations keep the driver alive).
                drop(unsafe { Box::from_raw(slice) });
            }
        }
    }
}

/// The netpoller of one runtime.
pub(crate) struct Driver {
    selector: Selector,
    slab: Slab,
    /// Green threads inside a wait on one of this driver's sockets.
    waiters: AtomicUsize,
    /// Workers blocked in `select`.
    blocked: AtomicUsize,
    /// A non-blocking poll is running.
    polling: AtomicBool,
    /// The eventfd was written and not yet drained (W1, W2).
    wake_pending: AtomicBool,
}

impl Driver {
    pub(crate) fn new() -> io::Result<Driver> {
        Ok(Driver {
            selector: Selector::new()?,
            slab: Slab::new(),
            waiters: AtomicUsize::new(0),
            blocked: AtomicUsize::new(0),
            polling: AtomicBool::new(false),
            wake_pending: AtomicBool::new(false),
        })
    }

    /// Registers `fd` (edge-triggered, both directions).
    pub(crate) fn register(self: &Arc<Self>, fd: RawFd) -> io::Result<Registration> {
        let slot = self.slab.acquire()?;
        let io = self.slab.get(slot).expect("an acquired slot has a record");
        let token = (u64::from(io.generation.load(Ordering::Relaxed)) << 32) | u64::from(slot);
        if let Err(e) = self.selector.add(fd, token) {
            self.slab.release(slot);
            return Err(e);
        }
        Ok(Registration { driver: self.clone(), io: NonNull::from(io), slot, fd })
    }

    /// Counts a green thread entering (`+1`) or leaving a wait.
    pub(crate) fn waiter_enter(&self) {
        self.waiters.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn waiter_leave(&self) {
        self.waiters.fetch_sub(1, Ordering::Relaxed);
    }

    /// Interrupts a blocking poll that is running, or the next one (W1).
    pub(crate) fn wake(&self) {
        // W1/W2: Acquire pairs with the Release clear in `poll`.
        if !self.wake_pending.swap(true, Ordering::Acquire) {
            self.selector.wake();
        }
    }

    /// Polls once: `deadline` at or before now = do not block, `None` = block until an event
    /// or a wake-up. Appends the green threads to unpark to `ready`.
    pub(crate) fn poll(&self, deadline: Option<Instant>, ready: &mut Vec<GreenThread>) {
        let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let blocking = timeout.is_none_or(|t| !t.is_zero());
        if blocking {
            self.blocked.fetch_add(1, Ordering::Relaxed);
        } else {
            if self.waiters.load(Ordering::Relaxed) == 0
                || self.blocked.load(Ordering::Relaxed) != 0
                || self.polling.swap(true, Ordering::Acquire)
            {
                return;
            }
        }
        let mut events = Events::new();
        let result = self.selector.select(&mut events, timeout);
        if blocking {
            self.blocked.fetch_sub(1, Ordering::Relaxed);
        } else {
            self.polling.store(false, Ordering::Release);
        }
        let got = match result {
            Ok(got) => got,
            // Only EBADF/EFAULT/EINVAL are possible, all broken invariants of this module.
            Err(e) => panic!("purloin::net: epoll_wait failed: {e} (a bug in purloin's netpoller)"),
        };
        for ev in got {
            if ev.token == WAKER_TOKEN {
                if blocking {
                    // W2: drain, then clear (Release; pairs with the swap in `wake`). A swap,
                    // not a store: a read-modify-write is ordered after every `wake` swap
                    // that found the flag set (they all read the newest value).
                    self.selector.drain_waker();
                    self.wake_pending.swap(false, Ordering::Release);
                }
                continue;
            }
            let slot = ev.token as u32;
            let generation = (ev.token >> 32) as u32;
            let Some(io) = self.slab.get(slot) else { continue };
            if io.generation.load(Ordering::Relaxed) != generation {
                continue;
            }
            if ev.bits & READ_EVENTS != 0 {
                ready.extend(io.read.fire_with(ev.bits & READ_FINAL != 0));
            }
            if ev.bits & WRITE_EVENTS != 0 {
                ready.extend(io.write.fire_with(ev.bits & WRITE_FINAL != 0));
            }
        }
    }

    pub(crate) fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) != 0
    }

    /// The modelled kernel behind the selector (see `selector_loom.rs`).
    #[cfg(all(test, loom))]
    pub(crate) fn kernel(&self) -> &Selector {
        &self.selector
    }
}

/// The driver as the scheduler sees it (sched holds an `Arc<dyn Poller>`; the runtime keeps
/// the `Arc<Driver>` to register sockets).
pub(crate) struct SchedPoller(pub(crate) Arc<Driver>);

impl purloin_sched::Poller for SchedPoller {
    fn poll(&self, deadline: Option<Instant>, ready: &mut Vec<GreenThread>) {
        self.0.poll(deadline, ready);
    }

    fn wake(&self) {
        self.0.wake();
    }

    fn has_waiters(&self) -> bool {
        self.0.has_waiters()
    }
}

/// A socket's registration with a driver. Dropping it removes the socket from epoll and
/// frees the record; it must be dropped before the socket's descriptor is closed.
pub(crate) struct Registration {
    pub(crate) driver: Arc<Driver>,
    io: NonNull<IoState>,
    slot: u32,
    fd: RawFd,
}

// SAFETY: `io` points into `driver`'s slab, which the `driver` Arc keeps alive for as long as
// this registration exists; `IoState` is shared-state only (atomics and a mutex), so using it
// from any thread is sound.
unsafe impl Send for Registration {}
// SAFETY: as above: `&Registration` only gives `&IoState`, which is thread-safe.
unsafe impl Sync for Registration {}

impl Registration {
    pub(crate) fn io(&self) -> &IoState {
        // SAFETY: see the `Send` impl: the record outlives `self`.
        unsafe { self.io.as_ref() }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Nothing to do on error: the descriptor is being closed anyway.
        let _ = self.driver.selector.delete(self.fd);
        self.driver.slab.release(self.slot);
    }
}
