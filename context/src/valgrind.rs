//! Telling valgrind about green-thread stacks.
//!
//! Valgrind tracks one stack per OS thread. A switch to a stack it does not know looks like a
//! huge stack-pointer move ("Warning: client switching stacks?") followed by accesses it
//! reports as invalid. Registering each stack fixes that. The client request is a few no-op
//! instructions when the program does not run under valgrind, so registering costs nothing in
//! production; this lives here because this crate is the workspace's only home for assembly.

/// A stack registered with valgrind (`VALGRIND_STACK_REGISTER`); dropping it deregisters the
/// stack (`VALGRIND_STACK_DEREGISTER`). Keep it alive exactly as long as the stack memory.
///
/// # Examples
///
/// ```
/// use purloin_context::valgrind::StackRegistration;
///
/// let mut stack = vec![0u8; 64 * 1024];
/// let r = stack.as_mut_ptr_range();
/// let registration = StackRegistration::new(r.start, r.end);
/// // ... create and run contexts on `stack` ...
/// drop(registration); // before the memory goes away
/// ```
#[derive(Debug)]
pub struct StackRegistration {
    /// Valgrind's stack id; 0 when not running under valgrind (or under loom).
    #[cfg_attr(loom, allow(dead_code))]
    id: usize,
}

/// `VG_USERREQ__STACK_REGISTER`, `__STACK_DEREGISTER` and `__RUNNING_ON_VALGRIND` from
/// `valgrind.h`.
#[cfg(not(loom))]
const STACK_REGISTER: usize = 0x1501;
#[cfg(not(loom))]
const STACK_DEREGISTER: usize = 0x1502;
#[cfg(not(loom))]
const RUNNING_ON_VALGRIND: usize = 0x1001;

impl StackRegistration {
    /// Registers the stack `stack_limit..stack_top` (lowest usable address, one past the
    /// highest: the same bounds as [`Context::new`](crate::Context::new)).
    ///
    /// A no-op returning a dummy registration when the program does not run under valgrind.
    pub fn new(stack_limit: *const u8, stack_top: *const u8) -> StackRegistration {
        #[cfg(not(loom))]
        {
            let last = (stack_top as usize).saturating_sub(1);
            let args = [STACK_REGISTER, stack_limit as usize, last, 0, 0, 0];
            StackRegistration { id: crate::arch::valgrind_request(0, &args) }
        }
        #[cfg(loom)]
        {
            let _ = (stack_limit, stack_top);
            StackRegistration { id: 0 }
        }
    }
}

impl Drop for StackRegistration {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        if running_on_valgrind() {
            crate::arch::valgrind_request(0, &[STACK_DEREGISTER, self.id, 0, 0, 0, 0]);
        }
    }
}

/// Whether the program runs under valgrind (`RUNNING_ON_VALGRIND`).
///
/// # Examples
///
/// ```
/// if purloin_context::valgrind::running_on_valgrind() {
///     eprintln!("valgrind: x87 precision control is not emulated");
/// }
/// ```
pub fn running_on_valgrind() -> bool {
    #[cfg(not(loom))]
    {
        crate::arch::valgrind_request(0, &[RUNNING_ON_VALGRIND, 0, 0, 0, 0, 0]) != 0
    }
    #[cfg(loom)]
    {
        false
    }
}
