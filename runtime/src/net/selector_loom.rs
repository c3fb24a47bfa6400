//! The selector under loom: the same surface as `selector.rs`, with the kernel replaced by a
//! loom mutex + condvar, so the models run the real poller and the real scheduler around it.
//!
//! What it keeps from epoll + eventfd: socket events are queued (`inject`, the model's
//! "kernel") and each is reported once (edge-triggered); the waker is level-triggered (it
//! stays reported until a blocking select drains it). A finite timeout is treated as "no
//! timeout" (loom has no clock): the models never rely on the poller's deadline.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::loom::{Condvar, Mutex, lock};

pub(crate) const WAKER_TOKEN: u64 = u64::MAX;
pub(crate) const READ_EVENTS: u32 = 0b01;
pub(crate) const WRITE_EVENTS: u32 = 0b10;
pub(crate) const READ_FINAL: u32 = 0b100;
pub(crate) const WRITE_FINAL: u32 = 0b1000;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub(crate) token: u64,
    pub(crate) bits: u32,
}

/// Events read per select (small, so a model can see a poll return part of the queue).
const EVENTS_PER_POLL: usize = 4;

pub(crate) struct Events {
    buf: Vec<Event>,
}

impl Events {
    pub(crate) fn new() -> Events {
        Events { buf: Vec::new() }
    }
}

/// A modelled socket: its current readiness and its epoll registration.
struct File {
    fd: RawFd,
    ready: u32,
    token: Option<u64>,
}

struct Kernel {
    queue: VecDeque<Event>,
    /// The eventfd counter is non-zero.
    woken: bool,
    files: Vec<File>,
}

impl Kernel {
    fn file(&mut self, fd: RawFd) -> &mut File {
        match self.files.iter().position(|f| f.fd == fd) {
            Some(i) => &mut self.files[i],
            None => {
                self.files.push(File { fd, ready: 0, token: None });
                self.files.last_mut().expect("just pushed")
            }
        }
    }
}

pub(crate) struct Selector {
    kernel: Mutex<Kernel>,
    cv: Condvar,
}

impl Selector {
    pub(crate) fn new() -> io::Result<Selector> {
        Ok(Selector {
            kernel: Mutex::new(Kernel { queue: VecDeque::new(), woken: false, files: Vec::new() }),
            cv: Condvar::new(),
        })
    }

    /// Like `EPOLL_CTL_ADD` with `EPOLLET`: a socket that is already ready is reported once.
    pub(crate) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut k = lock(&self.kernel);
        let f = k.file(fd);
        f.token = Some(token);
        let ready = f.ready;
        if ready != 0 {
            k.queue.push_back(Event { token, bits: ready });
            self.cv.notify_all();
        }
        Ok(())
    }

    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        lock(&self.kernel).file(fd).token = None;
        Ok(())
    }

    /// The model's kernel: data arrives on `fd` (an edge, reported if it is registered).
    pub(crate) fn make_ready(&self, fd: RawFd, bits: u32) {
        let mut k = lock(&self.kernel);
        let f = k.file(fd);
        f.ready |= bits;
        if let Some(token) = f.token {
            k.queue.push_back(Event { token, bits });
            self.cv.notify_all();
        }
    }

    /// The model's non-blocking syscall: consumes the readiness, or `false` (`WouldBlock`).
    pub(crate) fn take_ready(&self, fd: RawFd, bits: u32) -> bool {
        let mut k = lock(&self.kernel);
        let f = k.file(fd);
        let had = f.ready & bits != 0;
        f.ready &= !bits;
        had
    }

    pub(crate) fn select<'a>(
        &self,
        events: &'a mut Events,
        timeout: Option<Duration>,
    ) -> io::Result<impl Iterator<Item = Event> + 'a> {
        events.buf.clear();
        let blocking = timeout.is_none_or(|t| !t.is_zero());
        let mut k = lock(&self.kernel);
        while blocking && k.queue.is_empty() && !k.woken {
            k = match self.cv.wait(k) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
        if k.woken {
            events.buf.push(Event { token: WAKER_TOKEN, bits: READ_EVENTS });
        }
        while events.buf.len() < EVENTS_PER_POLL {
            match k.queue.pop_front() {
                Some(e) => events.buf.push(e),
                None => break,
            }
        }
        Ok(events.buf.iter().copied())
    }

    pub(crate) fn wake(&self) {
        lock(&self.kernel).woken = true;
        self.cv.notify_all();
    }

    pub(crate) fn drain_waker(&self) {
        lock(&self.kernel).woken = false;
    }
}
