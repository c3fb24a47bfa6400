//! Overflow detection: guard hits in child processes (re-running this test binary), the
//! handler's message and exit signal, chaining to foreign handlers, and the classifier
//! in-process over many stacks.
#![cfg(not(loom))]

mod common;

use common::{child_case, no_core_dumps, run_child};
use purloin_stack::overflow::{AltStack, install_handler, overflow_message};
use purloin_stack::{Options, StackSize, configure, lease, page_size};

/// Writes one byte just below `limit()`: into the guard.
fn write_below_limit(stack: &purloin_stack::Stack) -> ! {
    // SAFETY: deliberately not safe: the guard page faults, which is what the test checks.
    unsafe { std::ptr::write_volatile(stack.limit().sub(1), 1) };
    eprintln!("the write below limit() did not fault");
    std::process::exit(99)
}

#[test]
fn write_below_limit_is_reported_and_kills_with_sigsegv() {
    if child_case().as_deref() == Some("write") {
        no_core_dumps();
        install_handler().unwrap();
        // The third slot of a fresh arena: its guard was installed ahead, in a batch with the
        // first one's.
        let mut stacks: Vec<_> = (0..3).map(|_| lease(StackSize::Small).unwrap()).collect();
        let stack = stacks.pop().unwrap();
        stack.set_label(42, "overflower");
        write_below_limit(&stack);
    }
    let out = run_child("write_below_limit_is_reported_and_kills_with_sigsegv", "write");
    assert_eq!(out.signal(), Some(libc::SIGSEGV), "{}", out.describe());
    assert!(
        out.stderr.contains("green thread 42 'overflower' has overflowed its 32 KiB stack"),
        "{}",
        out.describe()
    );
}

#[test]
fn guard_faults_without_the_handler() {
    if child_case().as_deref() == Some("bare") {
        no_core_dumps();
        let stack = lease(StackSize::Small).unwrap();
        write_below_limit(&stack);
    }
    let out = run_child("guard_faults_without_the_handler", "bare");
    assert_eq!(out.signal(), Some(libc::SIGSEGV), "{}", out.describe());
    assert!(!out.stderr.contains("green thread"), "{}", out.describe());
}

#[test]
fn unlabelled_overflow_names_the_size() {
    if child_case().as_deref() == Some("unlabelled") {
        no_core_dumps();
        install_handler().unwrap();
        let stack = lease(StackSize::Normal).unwrap();
        stack.set_label(1, "cleared below");
        stack.clear_label();
        write_below_limit(&stack);
    }
    let out = run_child("unlabelled_overflow_names_the_size", "unlabelled");
    assert_eq!(out.signal(), Some(libc::SIGSEGV), "{}", out.describe());
    assert!(
        out.stderr.contains("green thread <unlabelled> has overflowed its 1 MiB stack"),
        "{}",
        out.describe()
    );
}

#[test]
fn mprotect_guard_overflow_is_reported() {
    if child_case().as_deref() == Some("mprotect") {
        no_core_dumps();
        configure(Options::new().force_mprotect_guards(true)).unwrap();
        install_handler().unwrap();
        let stack = lease(StackSize::Small).unwrap();
        assert_eq!(stack.guard_backend(), purloin_stack::GuardBackend::Mprotect);
        stack.set_label(9, "on-old-kernels");
        write_below_limit(&stack);
    }
    let out = run_child("mprotect_guard_overflow_is_reported", "mprotect");
    assert_eq!(out.signal(), Some(libc::SIGSEGV), "{}", out.describe());
    assert!(
        out.stderr.contains("green thread 9 'on-old-kernels' has overflowed its 32 KiB stack"),
        "{}",
        out.describe()
    );
}

/// A real overflow: deep recursion on a leased stack (switched to with `ucontext`), so the
/// handler must run on the alternate signal stack.
#[cfg(all(target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
#[test]
fn recursion_on_a_leased_stack_is_reported() {
    use std::hint::black_box;

    #[inline(never)]
    fn recurse(depth: u64) -> u64 {
        let frame = [depth as u8; 512];
        if black_box(true) {
            return recurse(depth + 1) + u64::from(black_box(&frame)[7]);
        }
        depth
    }
    extern "C" fn on_green_stack() {
        black_box(recurse(0));
    }

    if child_case().as_deref() == Some("recursion") {
        no_core_dumps();
        install_handler().unwrap();
        let _alt = AltStack::install_current_thread().unwrap();
        let stack = lease(StackSize::Small).unwrap();
        stack.set_label(7, "deep-recursion");
        // SAFETY: a zeroed ucontext_t is filled by getcontext; the green context runs on the
        // leased stack, which outlives it (the process dies inside it).
        unsafe {
            let mut main: libc::ucontext_t = std::mem::zeroed();
            let mut green: libc::ucontext_t = std::mem::zeroed();
            assert_eq!(libc::getcontext(&mut green), 0);
            green.uc_stack.ss_sp = stack.limit().cast();
            green.uc_stack.ss_size = stack.usable_size();
            green.uc_link = &mut main;
            libc::makecontext(&mut green, on_green_stack, 0);
            libc::swapcontext(&mut main, &green);
        }
        eprintln!("the recursion returned");
        std::process::exit(99);
    }
    let out = run_child("recursion_on_a_leased_stack_is_reported", "recursion");
    assert_eq!(out.signal(), Some(libc::SIGSEGV), "{}", out.describe());
    assert!(
        out.stderr.contains("green thread 7 'deep-recursion' has overflowed its 32 KiB stack"),
        "{}",
        out.describe()
    );
}

static FOREIGN_MSG: &[u8] = b"foreign handler got it\n";

extern "C" fn foreign_handler(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: write and _exit are async-signal-safe.
    unsafe {
        libc::write(2, FOREIGN_MSG.as_ptr().cast(), FOREIGN_MSG.len());
        libc::_exit(42);
    }
}

/// A fault outside our guards goes to the handler installed before ours.
#[test]
fn foreign_fault_reaches_the_previous_handler() {
    if child_case().as_deref() == Some("foreign") {
        no_core_dumps();
        // SAFETY: installs a valid SA_SIGINFO handler.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = foreign_handler as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()), 0);
        }
        install_handler().unwrap();
        let _stack = lease(StackSize::Small).unwrap(); // the registry is not empty
        // SAFETY: a PROT_NONE page of our own: touching it faults outside every arena.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                page_size(),
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            std::ptr::write_volatile(p.cast::<u8>(), 1);
        }
        std::process::exit(99);
    }
    let out = run_child("foreign_fault_reaches_the_previous_handler", "foreign");
    assert_eq!(out.status.code(), Some(42), "{}", out.describe());
    assert!(out.stderr.contains("foreign handler got it"), "{}", out.describe());
    assert!(!out.stderr.contains("green thread"), "{}", out.describe());
}

/// A fault outside our guards with Rust's own handler (or none) before ours: the process
/// dies of SIGSEGV, and our message is not printed.
#[test]
fn foreign_fault_ends_in_sigsegv() {
    if child_case().as_deref() == Some("null") {
        no_core_dumps();
        install_handler().unwrap();
        let _stack = lease(StackSize::Small).unwrap();
        // SAFETY: deliberately not safe: address 8 is never mapped.
        unsafe { std::ptr::write_volatile(std::ptr::without_provenance_mut::<u8>(8), 1) };
        std::process::exit(99);
    }
    let out = run_child("foreign_fault_ends_in_sigsegv", "null");
    assert_eq!(out.signal(), Some(libc::SIGSEGV), "{}", out.describe());
    assert!(!out.stderr.contains("green thread"), "{}", out.describe());
}

/// A sent SIGSEGV (`kill -SEGV`, `raise`) has no fault address: it is not classified, and
/// it still kills even though Rust's own handler, which we chain to, swallows it.
#[test]
fn sent_sigsegv_still_kills() {
    if child_case().as_deref() == Some("kill") {
        no_core_dumps();
        install_handler().unwrap();
        let _stack = lease(StackSize::Small).unwrap();
        // SAFETY: sends a signal to this thread; it is delivered before raise returns.
        unsafe { libc::raise(libc::SIGSEGV) };
        std::process::exit(99);
    }
    let out = run_child("sent_sigsegv_still_kills", "kill");
    assert_eq!(out.signal(), Some(libc::SIGSEGV), "{}", out.describe());
    assert!(!out.stderr.contains("green thread"), "{}", out.describe());
}

/// The classifier over many stacks of every class, in-process: the guard page of each
/// stack, and only the guard, belongs to it.
#[test]
fn classifier_names_each_of_many_stacks() {
    if child_case().is_some() {
        return;
    }
    let page = page_size();
    let sizes =
        [StackSize::Small, StackSize::Normal, StackSize::Large, StackSize::at_least(20_000)];
    let mut stacks = Vec::new();
    for i in 0..10_000u64 {
        let size = sizes[(i % 97 % 4) as usize];
        let s = lease(size).unwrap();
        s.set_label(i, &format!("g{i}"));
        stacks.push(s);
    }
    for (i, s) in stacks.iter().enumerate() {
        let want = format!("green thread {i} 'g{i}' has overflowed its {} stack", s.size());
        for addr in [s.limit() as usize - 1, s.guard().start, s.guard().start + page / 2] {
            let msg = overflow_message(addr).unwrap_or_else(|| panic!("{addr:#x} of stack {i}"));
            assert!(msg.contains(&want), "{msg} vs {want}");
        }
        assert!(overflow_message(s.limit() as usize).is_none());
        assert!(overflow_message(s.top() as usize - 1).is_none());
    }
    let on_heap = Box::new(0u8);
    assert!(overflow_message(&*on_heap as *const u8 as usize).is_none());
}
