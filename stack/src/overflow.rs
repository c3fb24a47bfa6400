//! Stack-overflow reports that name the green thread.
//!
//! A green thread that overflows its stack touches its slot's guard page and gets SIGSEGV.
//! Rust's own handler only knows OS-thread stacks, so the process would die with a bare
//! "Segmentation fault". [`install_handler`] installs a SIGSEGV/SIGBUS handler that, with
//! async-signal-safe work only (atomic loads and arithmetic over the arena registry, no
//! locks, no allocation, `write(2)`), decides whether the fault address is in one of our
//! guards and, if so, prints
//!
//! ```text
//! green thread 42 'worker-7' has overflowed its 32 KiB stack
//! ```
//!
//! to standard error (with the label set by [`Stack::set_label`](crate::Stack::set_label))
//! and terminates the process with SIGSEGV: it restores the default action and returns, so
//! the faulting instruction faults again and the kernel kills the process (a core dump, if
//! enabled, shows the overflowing frame). Any other fault is passed to the handler that was
//! installed before (Rust's own, which reports overflows of OS-thread stacks), or to the
//! default action.
//!
//! The handler runs on the faulting thread's alternate signal stack (`SA_ONSTACK`): the
//! green thread's stack is exhausted. Rust gives threads it spawns an alternate stack, but
//! threads created otherwise have none; [`AltStack::install_current_thread`] gives the
//! calling thread one (a scheduler calls it at the start of each worker).
//!
//! Both guard backends are recognised: guard markers report `SEGV_MAPERR`, `mprotect`
//! guards `SEGV_ACCERR`; a kernel-sent SIGBUS with a fault address is classified too, because
//! macOS reports hits on `PROT_NONE` pages as SIGBUS on some versions and CPUs. Signals sent with `kill` (no fault address) are never classified;
//! they are passed on, and re-sent if the previous handler only restored the default action
//! (as Rust's does), so `kill -SEGV` still kills.
//!
//! A frame bigger than the guard page that skips it entirely (C code without
//! `-fstack-clash-protection`) lands in the neighbouring slot and is not detected; Rust code
//! probes every page of big frames, so it always hits the guard first.
//!
//! # Memory ordering
//!
//! The guarantee: the handler chains only to a fully saved previous action.
//!
//! - (P1) `install_handler` writes the previous action, then sets its `ready` flag with
//!   Release, and only then installs our handler; `chain` loads `ready` with Acquire before
//!   reading the action.
//! - Which fault addresses are ours comes from the chunk registry (`registry.rs`, its own
//!   P1); labels from the slots' metadata (`SlotMeta::label`, Release in `set_label`,
//!   Acquire in `read_label`).

use std::cell::UnsafeCell;
use std::io;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr;

use crate::os::{self, GuardBackend};
use crate::registry::{self, GuardHit};
use crate::sync::real::{AtomicBool, Mutex, Ordering, lock};

/// `si_code` of a fault on an unmapped page or a guard marker (not in the `libc` crate).
const SEGV_MAPERR: libc::c_int = 1;
/// `si_code` of a fault on a page without the needed permission (an `mprotect` guard).
const SEGV_ACCERR: libc::c_int = 2;

/// The action in force before ours, saved once for chaining.
struct PrevAction {
    /// Set (Release) after `action` is written; the handler loads it with Acquire.
    ready: AtomicBool,
    action: UnsafeCell<MaybeUninit<libc::sigaction>>,
}

// SAFETY: `action` is written once, under `INSTALL`, before `ready` is set with Release and
// before our handler is installed; afterwards it is only read (by the handler, after an
// Acquire load of `ready`).
unsafe impl Sync for PrevAction {}

static PREV_SEGV: PrevAction =
    PrevAction { ready: AtomicBool::new(false), action: UnsafeCell::new(MaybeUninit::uninit()) };
static PREV_BUS: PrevAction =
    PrevAction { ready: AtomicBool::new(false), action: UnsafeCell::new(MaybeUninit::uninit()) };
static INSTALL: Mutex<bool> = Mutex::new(false);

/// Installs the overflow handler for SIGSEGV and SIGBUS (`SA_SIGINFO | SA_ONSTACK`),
/// chaining to the handlers installed before. Idempotent: later calls do nothing.
///
/// Install it after anything else that installs SIGSEGV handlers you want to keep (it saves
/// the handler in force now and passes foreign faults to it). Give each thread that runs
/// green threads an alternate signal stack ([`AltStack::install_current_thread`]), or the
/// handler cannot run when a stack is exhausted.
///
/// # Errors
///
/// `sigaction` failed (it does not for these signals on Linux).
///
/// # Examples
///
/// ```
/// purloin_stack::overflow::install_handler()?;
/// purloin_stack::overflow::install_handler()?; // idempotent
/// let _alt = purloin_stack::overflow::AltStack::install_current_thread()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn install_handler() -> io::Result<()> {
    let mut installed = lock(&INSTALL);
    if *installed {
        return Ok(());
    }
    for (sig, prev) in [(libc::SIGSEGV, &PREV_SEGV), (libc::SIGBUS, &PREV_BUS)] {
        // Relaxed: only read under INSTALL here (a retry after a partial failure).
        if !prev.ready.load(Ordering::Relaxed) {
            let mut old = MaybeUninit::<libc::sigaction>::zeroed();
            // SAFETY: querying the current action writes one sigaction through a valid pointer.
            if unsafe { libc::sigaction(sig, ptr::null(), old.as_mut_ptr()) } != 0 {
                return Err(sigaction_error(sig));
            }
            // SAFETY: we hold INSTALL and `ready` is false, so no handler of ours reads it.
            unsafe { (*prev.action.get()).write(old.assume_init()) };
            // Release (P1): pairs with the Acquire load in `chain`.
            prev.ready.store(true, Ordering::Release);
        }
        // SAFETY: an all-zero sigaction is valid (no flags, empty mask) before we fill it.
        let mut new: libc::sigaction = unsafe { MaybeUninit::zeroed().assume_init() };
        new.sa_sigaction = handler as *const () as libc::sighandler_t;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: sigemptyset initialises the mask through a valid pointer.
        unsafe { libc::sigemptyset(&mut new.sa_mask) };
        // SAFETY: installs a valid action; `handler` is an `extern "C"` SA_SIGINFO handler.
        if unsafe { libc::sigaction(sig, &new, ptr::null_mut()) } != 0 {
            return Err(sigaction_error(sig));
        }
    }
    *installed = true;
    Ok(())
}

fn sigaction_error(sig: libc::c_int) -> io::Error {
    let err = io::Error::last_os_error();
    io::Error::new(
        err.kind(),
        format!(
            "purloin-stack: sigaction for signal {sig} failed ({err}); the overflow handler is \
             not installed, so a green-thread stack overflow will end in a bare SIGSEGV"
        ),
    )
}

/// The message the handler prints for a fault at `fault_addr`, or `None` if the address is
/// not in the guard page of a stack of the process-wide pool. (The same classification and
/// formatting as the handler, for debuggers and tests.)
///
/// # Examples
///
/// ```
/// let stack = purloin_stack::lease(purloin_stack::StackSize::Small)?;
/// stack.set_label(42, "worker-7");
/// let msg = purloin_stack::overflow::overflow_message(stack.limit() as usize - 1).unwrap();
/// assert!(msg.contains("green thread 42 'worker-7' has overflowed its 32 KiB stack"));
/// assert!(purloin_stack::overflow::overflow_message(stack.limit() as usize).is_none());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn overflow_message(fault_addr: usize) -> Option<String> {
    let hit = registry::classify(fault_addr)?;
    let msg = format_report(&hit, fault_addr);
    Some(String::from_utf8_lossy(msg.as_bytes()).into_owned())
}

/// The SIGSEGV / SIGBUS handler. Async-signal-safe: see the module docs.
extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno is thread-local; reading it through its location is signal-safe.
    let errno = unsafe { *os::errno_location() };
    // SAFETY: for an SA_SIGINFO handler the kernel passes a valid siginfo_t; si_addr is
    // meaningful for the kernel-generated SIGSEGV/SIGBUS codes we check before using it.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let fault = match sig {
        libc::SIGSEGV => code == SEGV_MAPERR || code == SEGV_ACCERR,
        libc::SIGBUS => code > 0,
        _ => false,
    };
    if fault && let Some(hit) = registry::classify(addr) {
        let msg = format_report(&hit, addr);
        write_stderr(msg.as_bytes());
        // Returning re-runs the faulting access, which now gets the default action: the
        // process is killed by `sig` (with a core dump, if enabled, at the overflow).
        reset_to_default(sig);
        return;
    }
    chain(sig, info, ctx, code);
    // SAFETY: as above; restore errno for the interrupted code.
    unsafe { *os::errno_location() = errno };
}

/// Passes a signal that is not ours to the action in force before ours.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void, code: libc::c_int) {
    let prev = if sig == libc::SIGSEGV { &PREV_SEGV } else { &PREV_BUS };
    // Acquire (P1): pairs with the Release store in `install_handler`.
    let action = if prev.ready.load(Ordering::Acquire) {
        // SAFETY: written before `ready` was set, never written again.
        Some(unsafe { (*prev.action.get()).assume_init_ref() })
    } else {
        None
    };
    let sent = code <= 0; // SI_USER, SI_QUEUE, SI_TKILL...: sent, not a fault
    let handler = action.map_or(libc::SIG_DFL, |a| a.sa_sigaction);
    if handler == libc::SIG_IGN && sent {
        return;
    }
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        reset_to_default(sig);
        if sent {
            // A fault re-faults on return; a sent signal must be re-sent. It stays pending
            // (blocked while we run) and is delivered with the default action on return.
            // SAFETY: raise is async-signal-safe.
            unsafe { libc::raise(sig) };
        }
        return;
    }
    let action = action.expect("a handler other than SIG_DFL implies a saved action");
    if action.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO the saved handler has the three-argument signature; we pass
        // the kernel's own arguments through.
        let f = unsafe {
            std::mem::transmute::<
                libc::sighandler_t,
                extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
            >(handler)
        };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO the saved handler takes the signal number only.
        let f = unsafe {
            std::mem::transmute::<libc::sighandler_t, extern "C" fn(libc::c_int)>(handler)
        };
        f(sig);
    }
    if sent && disposition_is_default(sig) {
        // The previous handler gave up by restoring the default action and returning, which
        // only ends a fault (it re-faults); a sent signal must be re-sent (Rust's own handler
        // does this, rust-lang/rust#140662).
        // SAFETY: raise is async-signal-safe.
        unsafe { libc::raise(sig) };
    }
}

/// Whether `sig`'s action is now `SIG_DFL` (async-signal-safe).
fn disposition_is_default(sig: libc::c_int) -> bool {
    let mut cur = MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: querying writes one sigaction through a valid pointer; async-signal-safe.
    let rc = unsafe { libc::sigaction(sig, ptr::null(), cur.as_mut_ptr()) };
    // SAFETY: written by sigaction on success (and zeroed otherwise).
    rc == 0 && unsafe { cur.assume_init() }.sa_sigaction == libc::SIG_DFL
}

fn reset_to_default(sig: libc::c_int) {
    // SAFETY: an all-zero sigaction with SIG_DFL (0) is the default action; sigaction is
    // async-signal-safe.
    unsafe {
        let mut dfl: libc::sigaction = MaybeUninit::zeroed().assume_init();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, ptr::null_mut());
    }
}

/// Writes all of `bytes` to standard error with `write(2)` (async-signal-safe).
fn write_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writes from a valid buffer; write is async-signal-safe.
        let n = unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        } else {
            break;
        }
    }
}

/// A fixed-size message buffer: formatting without allocation or `core::fmt`.
struct Msg {
    buf: [u8; 1024],
    len: usize,
}

impl Msg {
    fn new() -> Msg {
        Msg { buf: [0; 1024], len: 0 }
    }

    fn bytes(&mut self, s: &[u8]) -> &mut Msg {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
        self
    }

    fn dec(&mut self, mut v: u64) -> &mut Msg {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.bytes(&digits[i..])
    }

    fn hex(&mut self, v: usize) -> &mut Msg {
        let mut digits = [0u8; 16];
        let mut i = digits.len();
        let mut v = v as u64;
        loop {
            i -= 1;
            digits[i] = b"0123456789abcdef"[(v & 15) as usize];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        self.bytes(b"0x").bytes(&digits[i..])
    }

    /// "32 KiB", "1 MiB", ... as `size::DisplaySize` formats them.
    fn size(&mut self, n: usize) -> &mut Msg {
        let n = n as u64;
        if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
            self.dec(n >> 30).bytes(b" GiB")
        } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
            self.dec(n >> 20).bytes(b" MiB")
        } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
            self.dec(n >> 10).bytes(b" KiB")
        } else {
            self.dec(n).bytes(b" bytes")
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// "green thread <id> '<name>' has overflowed its <size> stack" plus the details.
fn format_report(hit: &GuardHit, addr: usize) -> Msg {
    let mut m = Msg::new();
    m.bytes(b"\ngreen thread ");
    // Relaxed: written by the thread running on this stack, which is the one handling the
    // fault.
    match hit.meta.inline.load(crate::sync::real::Ordering::Relaxed) {
        0 => {}
        u64::MAX => {
            m.bytes(b"(a child without an id yet, run inline on the stack of green thread ");
        }
        child => {
            m.dec(child).bytes(b" (run inline on the stack of green thread ");
        }
    }
    match hit.meta.read_label() {
        Some((id, name, len)) => {
            m.dec(id).bytes(b" '").bytes(&name[..len]).bytes(b"'");
        }
        None => {
            m.bytes(b"<unlabelled>");
        }
    }
    if hit.meta.inline.load(crate::sync::real::Ordering::Relaxed) != 0 {
        m.bytes(b")");
    }
    m.bytes(b" has overflowed its ").size(hit.usable).bytes(b" stack\n");
    m.bytes(b"purloin-stack: fault at ")
        .hex(addr)
        .bytes(b" in the guard page of arena slot ")
        .dec(hit.slot as u64)
        .bytes(b"; terminating the process\n");
    write_fix(&mut m, hit.usable);
    m
}

/// The fix: the size to ask for (the next named class above `usable`, or twice it), per
/// spawn and as the default.
fn write_fix(m: &mut Msg, usable: usize) {
    m.bytes(b"purloin-stack: if it needs that much stack, give it a larger one: ");
    let env_kib = if usable < crate::StackSize::NORMAL_BYTES {
        m.bytes(b"StackSize::Normal (1 MiB)");
        crate::StackSize::NORMAL_BYTES >> 10
    } else if usable < crate::StackSize::LARGE_BYTES {
        m.bytes(b"StackSize::Large (8 MiB)");
        crate::StackSize::LARGE_BYTES >> 10
    } else {
        let twice = usable.saturating_mul(2);
        m.bytes(b"StackSize::Bytes(").dec(twice as u64).bytes(b") (").size(twice).bytes(b")");
        twice >> 10
    };
    m.bytes(
        b" for this green thread (purloin::Builder::stack_size), or as every green thread's \
             default (purloin::runtime::Builder::stack_size, or PURLOIN_STACK_SIZE=",
    )
    .dec(env_kib as u64)
    .bytes(b"k)\n");
}

/// An alternate signal stack for the calling thread, so the overflow handler can run when a
/// stack is exhausted. Dropping it restores the thread's previous alternate stack.
///
/// It is `!Send`: it belongs to the thread that installed it. 64 KiB (or more, if the
/// kernel's minimum for this CPU's signal frames needs it) plus a guard page.
///
/// # Examples
///
/// ```
/// use purloin_stack::overflow::{install_handler, AltStack};
///
/// install_handler()?;
/// std::thread::spawn(|| {
///     let _alt = AltStack::install_current_thread().unwrap();
///     // ... run green threads on this worker ...
/// })
/// .join()
/// .unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct AltStack {
    /// The mapping: a guard page, then `size` bytes of signal stack.
    mapping: *mut u8,
    size: usize,
    /// The alternate stack in force before ours (restored on drop).
    prev: libc::stack_t,
    _not_send: PhantomData<*mut ()>,
}

impl AltStack {
    /// Maps an alternate signal stack with a guard page and makes it the calling thread's
    /// (`sigaltstack`).
    ///
    /// # Errors
    ///
    /// Mapping or guarding the stack failed (the message names the cause and the fix), or
    /// `sigaltstack` failed (EPERM: the thread is currently running on its alternate stack).
    pub fn install_current_thread() -> io::Result<AltStack> {
        let page = os::page_size();
        let size = Self::default_size();
        let len = size + page;
        let mapping = os::map_stack_memory(len, &|| "an alternate signal stack".into())?;
        let backend = os::probe_backend().unwrap_or(GuardBackend::Mprotect);
        let what = || "the guard page of an alternate signal stack".to_string();
        // SAFETY: the first page of the mapping just made, unused.
        if let Err(e) = unsafe { os::install_guard(backend, mapping, page, &what) } {
            // SAFETY: the whole mapping just made, unused.
            unsafe { os::unmap(mapping, len) };
            return Err(e);
        }
        let new =
            libc::stack_t { ss_sp: mapping.wrapping_add(page).cast(), ss_flags: 0, ss_size: size };
        let mut prev = MaybeUninit::<libc::stack_t>::zeroed();
        // SAFETY: `new` describes mapped read/write memory that lives until `Drop` restores
        // the previous stack; `prev` is a valid out-pointer.
        if unsafe { libc::sigaltstack(&new, prev.as_mut_ptr()) } != 0 {
            let err = io::Error::last_os_error();
            // SAFETY: not installed, so unused.
            unsafe { os::unmap(mapping, len) };
            return Err(io::Error::new(
                err.kind(),
                format!(
                    "purloin-stack: sigaltstack failed ({err}); call \
                     AltStack::install_current_thread outside signal handlers"
                ),
            ));
        }
        // SAFETY: sigaltstack succeeded, so it wrote `prev`.
        let prev = unsafe { prev.assume_init() };
        Ok(AltStack { mapping, size, prev, _not_send: PhantomData })
    }

    /// Usable bytes of the alternate stack.
    pub fn size(&self) -> usize {
        self.size
    }

    fn default_size() -> usize {
        let page = os::page_size();
        let min = os::min_signal_stack();
        let want = (64 * 1024).max(libc::SIGSTKSZ).max(4 * min);
        want.div_ceil(page) * page
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let page = os::page_size();
        let ours = self.mapping.wrapping_add(page);
        let mut cur = MaybeUninit::<libc::stack_t>::zeroed();
        // SAFETY: querying writes one stack_t through a valid pointer.
        let rc = unsafe { libc::sigaltstack(ptr::null(), cur.as_mut_ptr()) };
        // SAFETY: sigaltstack succeeded (or we keep the zeroed value, which is not ours).
        let cur = unsafe { cur.assume_init() };
        if rc != 0 || cur.ss_sp.cast::<u8>() != ours || cur.ss_flags & libc::SS_ONSTACK != 0 {
            // Replaced by someone else (who may restore ours later), or we are running on it:
            // leave the memory mapped rather than risk a dangling alternate stack.
            return;
        }
        let restore = if self.prev.ss_flags & libc::SS_DISABLE != 0 {
            libc::stack_t { ss_sp: ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 }
        } else {
            libc::stack_t { ss_flags: 0, ..self.prev }
        };
        // SAFETY: restores the previous stack (still valid: whoever installed it owns it).
        let rc = unsafe { libc::sigaltstack(&restore, ptr::null_mut()) };
        if rc == 0 {
            // SAFETY: our mapping, no longer the thread's alternate stack.
            unsafe { os::unmap(self.mapping, self.size + page) };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn message_formatting() {
        let mut m = Msg::new();
        m.dec(0).bytes(b" ").dec(u64::MAX).bytes(b" ").hex(0xdead_beef).bytes(b" ");
        m.size(32 * 1024).bytes(b" ").size(1 << 20).bytes(b" ").size(12345);
        assert_eq!(
            std::str::from_utf8(m.as_bytes()).unwrap(),
            "0 18446744073709551615 0xdeadbeef 32 KiB 1 MiB 12345 bytes"
        );
        let mut full = Msg::new();
        for _ in 0..100 {
            full.bytes(b"0123456789");
        }
        assert_eq!(full.as_bytes().len(), 1000);
        for _ in 0..10 {
            full.bytes(b"0123456789");
        }
        assert_eq!(full.as_bytes().len(), 1024, "truncates instead of overflowing");
    }

    #[test]
    fn alt_stack_installs_and_restores() {
        let query = || {
            let mut cur = MaybeUninit::<libc::stack_t>::zeroed();
            // SAFETY: valid out-pointer.
            assert_eq!(unsafe { libc::sigaltstack(ptr::null(), cur.as_mut_ptr()) }, 0);
            // SAFETY: written by sigaltstack.
            let cur = unsafe { cur.assume_init() };
            (cur.ss_sp as usize, cur.ss_flags & libc::SS_DISABLE)
        };
        let before = query();
        let alt = AltStack::install_current_thread().unwrap();
        assert!(alt.size() >= 64 * 1024);
        assert_eq!(query(), (alt.mapping as usize + os::page_size(), 0));
        drop(alt);
        assert_eq!(query(), before);
    }
}
