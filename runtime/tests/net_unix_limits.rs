//! Descriptor exhaustion on Unix sockets: with a low open-file limit, creating sockets fails
//! with the OS error kept (`raw_os_error()` is `EMFILE`; the cause and the fix go to stderr
//! once, see `net_emfile.rs`). Its own test binary: the limit is process-wide.
#![cfg(not(loom))]

use purloin::net::UnixStream;

#[test]
fn open_file_limit_is_explained() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is valid for writes.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    let low = libc::rlimit { rlim_cur: 64, rlim_max: lim.rlim_max };
    // SAFETY: `low` is a valid rlimit; lowering the soft limit is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let err = rt.block_on(|| {
        let mut keep = Vec::new();
        loop {
            match UnixStream::pair() {
                Ok(p) => keep.push(p),
                Err(e) => return e,
            }
            assert!(keep.len() < 64, "64 pairs opened under a limit of 64 descriptors");
        }
    });
    // SAFETY: restores the limit read above.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(err.raw_os_error(), Some(libc::EMFILE), "{err}");
}
