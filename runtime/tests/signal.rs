//! `purloin::signal`: delivery to several receivers (green and plain threads), the previous
//! disposition restored after the last receiver, `ctrl_c`, refusals. Signals are
//! process-wide, so each test uses its own signal.
#![cfg(not(loom))]

mod net_common;

use std::io::ErrorKind;
use std::time::Duration;

use net_common::{rt, watchdog};
use purloin::signal::{Signal, Signals, ctrl_c};
use purloin::sync::channel;

fn raise(sig: Signal) {
    // SAFETY: plain system call; the caller holds a receiver for `sig`.
    assert_eq!(unsafe { libc::kill(libc::getpid(), sig.as_raw()) }, 0);
}

fn disposition(sig: Signal) -> libc::sighandler_t {
    // SAFETY: sigaction is plain old data.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `old`.
    assert_eq!(unsafe { libc::sigaction(sig.as_raw(), std::ptr::null(), &mut old) }, 0);
    old.sa_sigaction
}

/// Four receivers of SIGUSR1 — three parked green threads and one plain thread — each get
/// every one of several deliveries (each round waits for all four before the next signal).
#[test]
fn every_receiver_gets_every_delivery() {
    let _w = watchdog("every_receiver_gets_every_delivery", 60);
    const ROUNDS: usize = 20;
    rt(2).block_on(|| {
        let (done_tx, done_rx) = channel::unbounded::<usize>();
        let mut waiters = Vec::new();
        for i in 0..4 {
            let signals = Signals::new(&[Signal::USR1, Signal::HUP]).unwrap();
            let done = done_tx.clone();
            let body = move || {
                for _ in 0..ROUNDS {
                    assert_eq!(signals.recv(), Signal::USR1);
                    done.send(i).unwrap();
                }
            };
            if i == 3 {
                std::thread::spawn(body);
            } else {
                waiters.push(purloin::spawn(body));
            }
        }
        for _ in 0..ROUNDS {
            raise(Signal::USR1);
            let mut seen = [0; 4];
            for _ in 0..4 {
                seen[done_rx.recv().unwrap()] += 1;
            }
            assert_eq!(seen, [1, 1, 1, 1]);
        }
        for w in waiters {
            w.join().unwrap();
        }
    });
}

/// SIGUSR2 terminates by default; while watched it is purloin's; after the last receiver is
/// dropped the default is back.
#[test]
fn last_receiver_restores_the_disposition() {
    assert_eq!(disposition(Signal::USR2), libc::SIG_DFL);
    let a = Signals::new(&[Signal::USR2]).unwrap();
    let b = Signals::new(&[Signal::USR2]).unwrap();
    assert_ne!(disposition(Signal::USR2), libc::SIG_DFL);
    drop(a);
    assert_ne!(disposition(Signal::USR2), libc::SIG_DFL, "b still watches");
    raise(Signal::USR2);
    assert_eq!(b.recv_timeout(Duration::from_secs(30)), Some(Signal::USR2));
    drop(b);
    assert_eq!(disposition(Signal::USR2), libc::SIG_DFL);
}

/// `ctrl_c` returns on SIGINT. A second receiver keeps SIGINT handled throughout (so a
/// signal sent before `ctrl_c` registered cannot kill the test); SIGINT is re-sent until
/// the waiter reports, because the test cannot know when `ctrl_c` has registered.
#[test]
fn ctrl_c_returns_on_sigint() {
    let _w = watchdog("ctrl_c_returns_on_sigint", 60);
    let _keep = Signals::new(&[Signal::INT]).unwrap();
    rt(2).block_on(|| {
        let (tx, rx) = channel::bounded(1);
        purloin::spawn(move || {
            ctrl_c().unwrap();
            tx.send(()).unwrap();
        });
        loop {
            raise(Signal::INT);
            if rx.recv_timeout(Duration::from_millis(20)).is_ok() {
                break;
            }
        }
    });
}

/// A receiver works in `select!` next to other channels.
#[test]
fn signals_in_select() {
    let _w = watchdog("signals_in_select", 30);
    rt(1).block_on(|| {
        let signals = Signals::new(&[Signal::WINCH]).unwrap();
        let (_tx, never) = channel::unbounded::<()>();
        raise(Signal::WINCH);
        purloin::select! {
            recv(never) -> _ => panic!("nothing was sent"),
            recv(signals.receiver()) -> sig => assert_eq!(sig, Ok(Signal::WINCH)),
        }
        assert_eq!(signals.try_recv(), None);
    });
}

#[test]
fn refusals_name_the_reason() {
    for (n, needle) in [
        (libc::SIGKILL, "cannot be caught"),
        (libc::SIGSTOP, "cannot be caught"),
        (libc::SIGSEGV, "stack-overflow"),
        (libc::SIGFPE, "program fault"),
        (0, "not a signal number"),
        (65, "not a signal number"),
        (32, "reserved"),
    ] {
        let e = Signals::new(&[Signal::from_raw(n)]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains(needle), "{n}: {e}");
    }
    assert_eq!(Signals::new(&[]).unwrap_err().kind(), ErrorKind::InvalidInput);
}
