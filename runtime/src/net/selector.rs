//! The operating-system half of the poller: an epoll instance plus an eventfd to interrupt a
//! blocked `epoll_wait`. Linux only; under loom a model of it (see `selector_loom.rs`).
//!
//! Sockets are registered once, edge-triggered, for both directions
//! (`EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET`): no re-arming syscall per wait (Go's
//! netpoll does the same; oneshot mode would cost an `epoll_ctl` per wait). The eventfd is
//! registered **level-triggered**: it stays reported until a blocking poller drains it, so a
//! non-blocking poll running at the same moment cannot swallow the wake-up meant for the
//! worker blocked in `epoll_wait`.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::loom::{AtomicBool, Ordering};

/// The token of the eventfd in `epoll_event.u64` (socket tokens are `generation << 32 |
/// slot`, and slots stay below `u32::MAX`).
pub(crate) const WAKER_TOKEN: u64 = u64::MAX;

/// Interest bits reported to the read side.
pub(crate) const READ_EVENTS: u32 =
    (libc::EPOLLIN | libc::EPOLLPRI | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Interest bits reported to the write side.
pub(crate) const WRITE_EVENTS: u32 = (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Bits that report a final state of the read side (end-of-file, hang-up, error).
pub(crate) const READ_FINAL: u32 = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Bits that report a final state of the write side.
pub(crate) const WRITE_FINAL: u32 = (libc::EPOLLHUP | libc::EPOLLERR) as u32;

/// One reported event: the token and the epoll bits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub(crate) token: u64,
    pub(crate) bits: u32,
}

/// Events read per `epoll_wait`.
const EVENTS_PER_POLL: usize = 256;

/// A buffer for [`Selector::select`], on the polling worker's stack (no allocation per poll).
/// Only the buffer, uninitialised: the count of events comes back with them from `select`
/// (with a count field next to it, LLVM merged the count's store and the uninitialised array
/// into one memset of the whole 3 KiB on every poll).
pub(crate) struct Events {
    buf: MaybeUninit<[libc::epoll_event; EVENTS_PER_POLL]>,
}

impl Events {
    pub(crate) fn new() -> Events {
        Events { buf: MaybeUninit::uninit() }
    }
}

/// epoll + eventfd.
pub(crate) struct Selector {
    epoll: OwnedFd,
    eventfd: OwnedFd,
}

/// Whether the kernel has `epoll_pwait2` (Linux 5.11+; nanosecond timeouts). Probed on first
/// use; without it, timeouts round up to whole milliseconds.
static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

impl Selector {
    pub(crate) fn new() -> io::Result<Selector> {
        // SAFETY: plain system call; the result is checked.
        let ep = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "purloin::net: epoll_create1 failed ({e}); the process may have hit its \
                     open-file limit (raise RLIMIT_NOFILE) or the kernel's epoll limits"
                ),
            )
        })?;
        // SAFETY: `ep` is a fresh descriptor we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        // SAFETY: plain system call; the result is checked.
        let ev = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) }).map_err(
            |e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "purloin::net: eventfd failed ({e}); the process may have hit its \
                         open-file limit (raise RLIMIT_NOFILE)"
                    ),
                )
            },
        )?;
        // SAFETY: `ev` is a fresh descriptor we own.
        let eventfd = unsafe { OwnedFd::from_raw_fd(ev) };
        let sel = Selector { epoll, eventfd };
        // Level-triggered: see the module docs.
        sel.ctl(libc::EPOLL_CTL_ADD, sel.eventfd.as_raw_fd(), libc::EPOLLIN as u32, WAKER_TOKEN)?;
        Ok(sel)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call; the epoll fd is
        // owned by `self`.
        cvt(unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut ev) })?;
        Ok(())
    }

    /// Registers `fd` edge-triggered for both directions under `token`.
    pub(crate) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events =
            (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLPRI | libc::EPOLLET)
                as u32;
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token).map_err(|e| {
            let fix = match e.raw_os_error() {
                Some(libc::EEXIST) => {
                    "the descriptor is already registered with this runtime's netpoller: two \
                     values (two purloin::io::Async, or an Async and a purloin::net type) wrap \
                     the same descriptor number; wrap it once, or wrap a duplicate (try_clone or dup), \
                     which is registered separately"
                }
                Some(libc::ENOSPC) => {
                    "the user's limit of epoll registrations was reached; raise \
                     /proc/sys/fs/epoll/max_user_watches or close descriptors"
                }
                Some(libc::EPERM) => {
                    "epoll cannot poll this kind of descriptor (regular files and directories \
                     are always ready); use purloin::fs or purloin::blocking for it"
                }
                _ => "the descriptor cannot be polled",
            };
            io::Error::new(
                e.kind(),
                format!(
                    "purloin::net: could not register descriptor {fd} with the netpoller \
                     (epoll_ctl ADD: {e}): {fix}"
                ),
            )
        })
    }

    /// Removes `fd` (before it is closed: a dup of it would keep the registration alive).
    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits for events: `None` = until an event or a wake-up, `Some(ZERO)` = do not block.
    /// Returns the events read into `events` (none if the wait was interrupted).
    pub(crate) fn select<'a>(
        &self,
        events: &'a mut Events,
        timeout: Option<Duration>,
    ) -> io::Result<impl Iterator<Item = Event> + 'a> {
        let cap = EVENTS_PER_POLL as libc::c_int;
        let ptr = events.buf.as_mut_ptr().cast::<libc::epoll_event>();
        let ep = self.epoll.as_raw_fd();
        let n = match timeout {
            Some(t) if !t.is_zero() && !NO_PWAIT2.load(Ordering::Relaxed) => {
                let ts = libc::timespec {
                    tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
                    tv_nsec: t.subsec_nanos() as libc::c_long,
                };
                // SAFETY: `ptr` points at `cap` writable epoll_events; `ts` lives across the
                // call; a null sigmask means "keep the current one".
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        ep,
                        ptr,
                        cap,
                        &ts as *const libc::timespec,
                        core::ptr::null::<libc::sigset_t>(),
                        0usize,
                    )
                };
                if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                    NO_PWAIT2.store(true, Ordering::Relaxed);
                    return self.select(events, timeout);
                }
                r as libc::c_int
            }
            _ => {
                let ms = match timeout {
                    None => -1,
                    // Round up: waking early would make the caller spin until the deadline.
                    Some(t) => t.as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128)
                        as libc::c_int,
                };
                // SAFETY: `ptr` points at `cap` writable epoll_events.
                unsafe { libc::epoll_wait(ep, ptr, cap, ms) }
            }
        };
        let n = if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            0
        } else {
            n as usize
        };
        // SAFETY: the kernel initialised the first `n <= EVENTS_PER_POLL` entries, and the
        // slice borrows `events` for as long as it is read.
        let got = unsafe { core::slice::from_raw_parts(ptr.cast_const(), n) };
        // `epoll_event` is packed on x86_64: copy it out whole, then read its fields.
        Ok(got.iter().map(|e| {
            let e = *e;
            Event { token: e.u64, bits: e.events }
        }))
    }

    /// Makes the eventfd readable (interrupts a blocked `select`).
    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. It can only fail with EAGAIN
        // when the counter is near u64::MAX, i.e. when it is already readable.
        let _ = unsafe { libc::write(self.eventfd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Drains the eventfd (after a blocking poll saw it).
    pub(crate) fn drain_waker(&self) {
        let mut buf: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64 from our non-blocking eventfd.
        let _ = unsafe { libc::read(self.eventfd.as_raw_fd(), (&mut buf as *mut u64).cast(), 8) };
    }
}
