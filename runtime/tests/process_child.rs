//! `purloin::process`: child processes waited on and talked to from green threads without
//! blocking a worker.
#![cfg(not(loom))]

mod net_common;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use net_common::{payload, rt, watchdog};

/// One worker, 1,000 other green threads, and a child that waits for a line on stdin, echoes
/// it and exits 3. The line is only written once all 1,000 green threads have run, so if
/// waiting on the child (its stdout, then its exit) blocked the only worker, the feeder would
/// never run and the test would hang (the watchdog fails it).
#[test]
fn exit_status_and_stdout_while_1000_green_threads_run() {
    let _w = watchdog("exit_status_and_stdout_while_1000_green_threads_run", 120);
    rt(1).block_on(|| {
        let mut child = purloin::process::spawn(
            Command::new("sh")
                .args(["-c", "read line; echo \"got $line\"; exit 3"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped()),
        )
        .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let others: Vec<_> = (0..1000)
            .map(|_| {
                let ran = ran.clone();
                purloin::spawn(move || {
                    for _ in 0..3 {
                        purloin::yield_now();
                    }
                    ran.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        let mut stdin = child.stdin.take().unwrap();
        let feeder = {
            let ran = ran.clone();
            purloin::spawn(move || {
                while ran.load(Ordering::Relaxed) < 1000 {
                    purloin::yield_now();
                }
                stdin.write_all(b"green\n").unwrap();
            })
        };
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "got green\n");
        assert_eq!(out.status.code(), Some(3));
        feeder.join().unwrap();
        for o in others {
            o.join().unwrap();
        }
        assert_eq!(ran.load(Ordering::Relaxed), 1000);
    });
}

/// 2 MiB through `cat`: a writer green thread fills stdin while this one drains stdout (both
/// pipes fill up and park their side); every byte comes back once, in order.
#[test]
fn pipes_are_green_io() {
    let _w = watchdog("pipes_are_green_io", 120);
    rt(2).block_on(|| {
        let mut child = purloin::process::spawn(
            Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()),
        )
        .unwrap();
        let data = payload(11, 2 << 20);
        let mut stdin = child.stdin.take().unwrap();
        let sent = data.clone();
        let writer = purloin::spawn(move || {
            for chunk in sent.chunks(7000) {
                stdin.write_all(chunk).unwrap();
            }
        });
        let mut got = Vec::new();
        child.stdout.take().unwrap().read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        assert!(got == data, "cat returned different bytes");
        assert!(child.wait().unwrap().success());
    });
}

#[test]
fn wait_timeout_kill_and_try_wait() {
    let _w = watchdog("wait_timeout_kill_and_try_wait", 60);
    rt(2).block_on(|| {
        let mut child = purloin::process::spawn(Command::new("sleep").arg("60")).unwrap();
        assert!(child.has_pidfd(), "this kernel has no pidfd_open: the fallback path runs");
        assert_eq!(child.try_wait().unwrap(), None);
        assert_eq!(child.wait_timeout(Duration::from_millis(10)).unwrap(), None);
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // Reaped: further waits report the same status.
        assert_eq!(child.try_wait().unwrap(), Some(status));
        assert_eq!(child.wait_timeout(Duration::from_millis(1)).unwrap(), Some(status));
    });
}

/// Many children waited on at once from green threads of one worker.
#[test]
fn many_children_at_once() {
    let _w = watchdog("many_children_at_once", 120);
    rt(1).block_on(|| {
        let waiters: Vec<_> = (0..50)
            .map(|i| {
                purloin::spawn(move || {
                    let status = purloin::process::status(
                        Command::new("sh").args(["-c", &format!("exit {}", i % 7)]),
                    )
                    .unwrap();
                    assert_eq!(status.code(), Some(i % 7));
                })
            })
            .collect();
        for w in waiters {
            w.join().unwrap();
        }
    });
}

#[test]
fn plain_threads_block_like_std() {
    let _w = watchdog("process_plain_threads", 60);
    let out = purloin::process::output(Command::new("sh").args(["-c", "echo out; echo err >&2"]))
        .unwrap();
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert!(out.status.success());
}

#[test]
fn spawn_errors_keep_the_os_error() {
    let e = purloin::process::spawn(&mut Command::new("purloin-no-such-program")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
}
