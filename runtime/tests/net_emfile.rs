//! Running out of file descriptors: the error keeps its OS error (`raw_os_error()` is
//! `EMFILE`), in a child process with a low `RLIMIT_NOFILE`.
#![cfg(not(loom))]

mod net_common;

use std::process::Command;

#[test]
fn emfile_keeps_the_os_error() {
    const CHILD: &str = "PURLOIN_TEST_EMFILE_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let lim = libc::rlimit { rlim_cur: 64, rlim_max: 64 };
        // SAFETY: setrlimit reads one rlimit through a valid pointer.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
        let mut held = Vec::new();
        let err = loop {
            match purloin::net::UdpSocket::bind("127.0.0.1:0") {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 1000, "the limit did not apply");
        };
        println!("RAW {:?}", err.raw_os_error());
        std::process::exit(0);
    }
    let _w = net_common::watchdog("emfile", 60);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "emfile_keeps_the_os_error", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("RAW Some({})", libc::EMFILE)), "{stdout}\n{stderr}");
    assert_eq!(stderr.matches("RLIMIT_NOFILE").count(), 1, "the hint, once: {stderr}");
}
