//! Test helpers shared by the integration tests: an mmap'd, guard-paged stack and a watchdog.
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

/// A stack mapped with `mmap`, with one `PROT_NONE` guard page below it.
/// Registered with valgrind (a no-op otherwise), so `valgrind` runs of the tests stay quiet.
pub struct TestStack {
    base: *mut u8,
    len: usize,
    page: usize,
    registration: Option<purloin_context::valgrind::StackRegistration>,
}

// SAFETY: `base` is a private mapping owned by this value; it is only unmapped in `drop`.
unsafe impl Send for TestStack {}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

impl TestStack {
    /// A stack of `size` usable bytes (rounded up to pages) plus a guard page.
    pub fn new(size: usize) -> TestStack {
        let page = page_size();
        let size = size.div_ceil(page) * page;
        let len = size + page;
        // SAFETY: an anonymous private mapping; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap failed: {}", std::io::Error::last_os_error());
        // SAFETY: the first page of our own mapping.
        let rc = unsafe { libc::mprotect(base, page, libc::PROT_NONE) };
        assert_eq!(rc, 0, "mprotect failed: {}", std::io::Error::last_os_error());
        let mut stack = TestStack { base: base.cast(), len, page, registration: None };
        stack.registration =
            Some(purloin_context::valgrind::StackRegistration::new(stack.limit(), stack.top()));
        stack
    }

    /// One past the highest usable address.
    pub fn top(&self) -> *mut u8 {
        // SAFETY: one past the end of our mapping.
        unsafe { self.base.add(self.len) }
    }

    /// The lowest usable address (just above the guard page).
    pub fn limit(&self) -> *mut u8 {
        // SAFETY: inside our mapping.
        unsafe { self.base.add(self.page) }
    }

    /// Usable bytes.
    pub fn size(&self) -> usize {
        self.len - self.page
    }
}

impl Drop for TestStack {
    fn drop(&mut self) {
        drop(self.registration.take());
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Aborts the process if it is not dropped within `secs` seconds, so a hang fails the test
/// instead of blocking CI.
pub struct Watchdog(Option<mpsc::Sender<()>>);

impl Watchdog {
    pub fn new(what: &'static str, secs: u64) -> Watchdog {
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(secs))
            {
                eprintln!("watchdog: '{what}' did not finish within {secs} s; aborting");
                std::process::abort();
            }
        });
        Watchdog(Some(tx))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Dropping the sender disconnects the channel: the watchdog thread ends quietly.
        self.0.take();
    }
}
