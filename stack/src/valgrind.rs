//! Valgrind support through a registration hook.
//!
//! Valgrind must be told where green-thread stacks are (`VALGRIND_STACK_REGISTER`), or it
//! takes a switch to another stack for a huge stack-pointer move and reports bogus errors.
//! corosensei and brpc issue that client request themselves; it is a special inline-assembly
//! sequence, and in purloin only `purloin-context` contains assembly (an architecture
//! invariant). So this crate calls a hook instead: `purloin-context` (or anyone able to issue
//! client requests) provides a function that registers `[start, end)`, and the scheduler
//! installs it at start-up when running under valgrind.
//!
//! Every stack slot is registered once: when the hook is set, for the slots handed out so
//! far, and afterwards when a slot is first handed out (carved from its arena). Slots are never unmapped, so they are
//! never deregistered, and a reused slot keeps its registration.

use std::io;

use crate::sync::real::{AtomicPtr, Mutex, Ordering, lock};

/// A function that registers the stack `[start, end)` with valgrind
/// (`VALGRIND_STACK_REGISTER(start, end)`); its id is not needed, stacks are never
/// deregistered.
pub type StackRegisterFn = fn(start: *mut u8, end: *mut u8);

static HOOK: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());
static SET_LOCK: Mutex<()> = Mutex::new(());

/// Installs the valgrind registration hook and calls it for every stack handed out so far.
///
/// Call it once at start-up, before the first lease if possible. A slot handed out at the
/// same moment as this call may be registered twice, which valgrind tolerates. The hook runs
/// while the pool holds a size class's growth lock: it must not lease stacks.
///
/// # Errors
///
/// [`AlreadyExists`](io::ErrorKind::AlreadyExists) if a different hook is already installed.
///
/// # Examples
///
/// ```
/// fn register(start: *mut u8, end: *mut u8) {
///     // purloin-context would issue VALGRIND_STACK_REGISTER(start, end) here.
///     assert!(start < end);
/// }
/// purloin_stack::valgrind::set_stack_register_hook(register)?;
/// let stack = purloin_stack::lease(purloin_stack::StackSize::Small)?; // registered
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn set_stack_register_hook(hook: StackRegisterFn) -> io::Result<()> {
    let _guard = lock(&SET_LOCK);
    let current = HOOK.load(Ordering::Relaxed);
    if !current.is_null() {
        if current == hook as *mut () {
            return Ok(());
        }
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "purloin-stack: a different valgrind stack-register hook is already installed; \
             install it once, at start-up",
        ));
    }
    // Relaxed: a function pointer, no data published with it. A slot carved after this
    // store sees the hook (the class's growth lock, taken by `carve` and by the walk below,
    // orders them); one carved before the walk takes that lock is in the walk.
    HOOK.store(hook as *mut (), Ordering::Relaxed);
    crate::global::for_each_carved_slot(|limit, usable| hook(limit, limit.wrapping_add(usable)));
    Ok(())
}

/// Called once per slot, when it is first handed out (under its class's growth lock).
pub(crate) fn new_stack(limit: *mut u8, usable: usize) {
    // Relaxed: see `set_stack_register_hook`.
    let hook = HOOK.load(Ordering::Relaxed);
    if !hook.is_null() {
        // SAFETY: non-null values of HOOK are `StackRegisterFn`s stored by
        // `set_stack_register_hook`; fn pointers round-trip through `*mut ()`.
        let hook: StackRegisterFn =
            unsafe { std::mem::transmute::<*mut (), StackRegisterFn>(hook) };
        hook(limit, limit.wrapping_add(usable));
    }
}
