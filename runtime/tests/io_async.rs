//! `purloin::io::Async`: any descriptor (here pipes) with parking waits and I/O.
#![cfg(not(loom))]

mod net_common;

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use net_common::{payload, rt, watchdog};
use purloin::io::Async;
use purloin::net::SocketClosed;

/// 4 MiB through a pipe (many times its 64 KiB buffer): the writer parks when the pipe is
/// full, the reader when it is empty; every byte arrives once, in order.
#[test]
fn pipe_transfer_parks_both_sides() {
    let _w = watchdog("pipe_transfer_parks_both_sides", 60);
    rt(2).block_on(|| {
        let (r, w) = std::io::pipe().unwrap();
        let mut r = Async::new(r).unwrap();
        let mut w = Async::new(w).unwrap();
        let data = payload(7, 4 << 20);
        let sent = data.clone();
        let writer = purloin::spawn(move || {
            for chunk in sent.chunks(10_000) {
                w.write_all(chunk).unwrap();
            }
        });
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        assert!(got == data, "the pipe delivered different bytes");
    });
}

/// Many green threads wait on many pipes at once on one worker; each is woken by its own
/// write.
#[test]
fn many_waiters_on_one_worker() {
    let _w = watchdog("many_waiters_on_one_worker", 60);
    rt(1).block_on(|| {
        let mut writers = Vec::new();
        let mut readers = Vec::new();
        for i in 0..200u32 {
            let (r, w) = std::io::pipe().unwrap();
            let r = Async::new(r).unwrap();
            writers.push(Async::new(w).unwrap());
            readers.push(purloin::spawn(move || {
                r.wait_readable().unwrap();
                let mut buf = [0u8; 4];
                (&r).read_exact(&mut buf).unwrap();
                assert_eq!(u32::from_le_bytes(buf), i);
            }));
        }
        for (i, w) in writers.iter().enumerate() {
            (&*w).write_all(&(i as u32).to_le_bytes()).unwrap();
        }
        for r in readers {
            r.join().unwrap();
        }
    });
}

#[test]
fn wait_timeouts_and_deadlines() {
    let _w = watchdog("wait_timeouts_and_deadlines", 30);
    rt(1).block_on(|| {
        let (r, mut w) = std::io::pipe().unwrap();
        let r = Async::new(r).unwrap();
        let e = r.wait_readable_timeout(Duration::from_millis(5)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert!(e.to_string().contains("readable"), "{e}");
        let e = r.wait_readable_deadline(Instant::now() - Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        w.write_all(b"x").unwrap();
        // Ready now: a past deadline still reports it.
        r.wait_readable_deadline(Instant::now() - Duration::from_secs(1)).unwrap();
        r.wait_readable_timeout(Duration::from_secs(30)).unwrap();
        r.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!((&r).read(&mut buf).unwrap(), 1);
        assert_eq!((&r).read(&mut buf).unwrap_err().kind(), ErrorKind::TimedOut);
    });
}

/// A full pipe is not writable; `wait_writable` parks until the reader drains it.
#[test]
fn wait_writable_parks_until_drained() {
    let _w = watchdog("wait_writable_parks_until_drained", 30);
    rt(2).block_on(|| {
        let (r, w) = std::io::pipe().unwrap();
        let w = Async::new(w).unwrap();
        let mut filled = 0usize;
        loop {
            match w.get_ref().write(&[0u8; 4096]) {
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let e = w.wait_writable_timeout(Duration::from_millis(5)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        let drainer = purloin::spawn(move || {
            let mut r = r;
            let mut buf = vec![0u8; filled];
            r.read_exact(&mut buf).unwrap();
        });
        w.wait_writable().unwrap();
        drainer.join().unwrap();
    });
}

#[test]
fn close_wakes_a_waiter() {
    let _w = watchdog("close_wakes_a_waiter", 30);
    rt(2).block_on(|| {
        let (r, _w) = std::io::pipe().unwrap();
        let r = Arc::new(Async::new(r).unwrap());
        let r2 = r.clone();
        let waiter = purloin::spawn(move || r2.wait_readable());
        purloin::sleep(Duration::from_millis(5)); // not synchronisation: either order passes
        r.close();
        let e = waiter.join().unwrap().unwrap_err();
        assert!(SocketClosed::is(&e), "{e}");
    });
}

/// Outside a runtime it behaves like blocking std I/O.
#[test]
fn plain_threads_block_like_std() {
    let _w = watchdog("plain_threads_block_like_std", 30);
    let (r, w) = std::io::pipe().unwrap();
    let mut r = Async::new(r).unwrap();
    let writer = std::thread::spawn(move || {
        let mut w = Async::new(w).unwrap();
        w.write_all(&payload(3, 300_000)).unwrap();
    });
    let mut got = Vec::new();
    r.read_to_end(&mut got).unwrap();
    writer.join().unwrap();
    assert!(got == payload(3, 300_000));
}

#[test]
fn bad_input_is_refused_clearly() {
    let file = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
    let e = Async::new(file).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("purloin::fs"), "{e}");

    // A number that is not open (far above any descriptor this test process opens; a real
    // descriptor closed here could be reused at once by a test running in parallel) and one
    // that never is: the OS error is kept, so callers can match on it.
    for fd in [1 << 20, -1] {
        let e = Async::new(Raw(fd)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{fd}: {e}");
    }
}

/// A descriptor number, not owned (dropping it closes nothing).
#[derive(Debug)]
struct Raw(RawFd);

impl AsRawFd for Raw {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Two `Async`s over one pipe descriptor: the second one's first wait fails with an error
/// that says the descriptor is already registered (not "socket": it is a pipe), and the
/// first registration keeps working.
#[test]
fn a_descriptor_wrapped_twice_is_refused_at_the_first_wait() {
    let _w = watchdog("a_descriptor_wrapped_twice_is_refused_at_the_first_wait", 30);
    rt(1).block_on(|| {
        let (r, mut w) = std::io::pipe().unwrap();
        let first = Async::new(r).unwrap();
        // The pipe is empty: this wait registers `first`, then times out.
        let e = first.wait_readable_timeout(Duration::from_millis(1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        let second = Async::new(Raw(first.as_raw_fd())).unwrap();
        let e = second.wait_readable().unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("descriptor") && msg.contains("already registered"), "{msg}");
        assert!(msg.contains("try_clone or dup"), "the fix is named: {msg}");
        assert!(!msg.contains("socket"), "a pipe is not a socket: {msg}");
        // `second` never registered, so dropping it leaves `first`'s registration alone: a
        // third wrapper is refused the same way.
        drop(second);
        let third = Async::new(Raw(first.as_raw_fd())).unwrap();
        let e = third.wait_readable().unwrap_err();
        assert!(e.to_string().contains("already registered"), "{e}");
        drop(third);
        w.write_all(b"x").unwrap();
        first.wait_readable().unwrap();
    });
}
