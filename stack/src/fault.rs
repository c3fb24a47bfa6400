//! Fault injection for tests of the layers above: make leases of one size fail as if the
//! kernel had refused the arena mapping, without exhausting the machine.
//!
//! Not part of the supported API (hidden from the docs): it exists so the scheduler and the
//! facade can test what a green thread that cannot get its stack does to its joiner.
//!
//! The check costs one Relaxed load of a process-wide flag per [`lease`](crate::lease) while
//! nothing is armed.

use std::io;

use crate::size::StackSize;
use crate::sync::real::{AtomicBool, Mutex, Ordering, lock};

/// Whether any failure is armed (the lease path's only cost while none is).
static ARMED: AtomicBool = AtomicBool::new(false);

struct Plan {
    size: StackSize,
    /// Leases of `size` to let through before failing.
    skip: usize,
    /// Leases of `size` still to fail after the skipped ones.
    fail: usize,
    errno: i32,
}

static PLANS: Mutex<Vec<Plan>> = Mutex::new(Vec::new());

/// Makes leases of `size` fail: the next `skip` leases of that size succeed, the `fail` after
/// them return the error the kernel's `errno` would have produced (with the cause diagnosed
/// and named as for a real failure of the arena `mmap`). Other sizes are unaffected, so
/// tests running in parallel can each use their own custom size.
///
/// Arming `size` again replaces its plan; `fail == 0` disarms it.
#[doc(hidden)]
pub fn fail_leases(size: StackSize, skip: usize, fail: usize, errno: i32) {
    let mut plans = lock(&PLANS);
    plans.retain(|p| p.size != size);
    if fail > 0 {
        plans.push(Plan { size, skip, fail, errno });
    }
    // Relaxed: PLANS' mutex orders the plans themselves; a lease racing with arming may miss
    // it, which a test avoids by arming before it spawns.
    ARMED.store(!plans.is_empty(), Ordering::Relaxed);
}

/// How many armed failures of `size` are still to come (for tests' checks).
#[doc(hidden)]
pub fn pending_failures(size: StackSize) -> usize {
    lock(&PLANS).iter().find(|p| p.size == size).map_or(0, |p| p.fail)
}

/// The injected error for this lease of `size`, if one is due.
#[inline]
pub(crate) fn check(size: StackSize) -> io::Result<()> {
    // Relaxed: see `fail_leases`.
    if !ARMED.load(Ordering::Relaxed) {
        return Ok(());
    }
    check_slow(size)
}

#[cold]
fn check_slow(size: StackSize) -> io::Result<()> {
    let mut plans = lock(&PLANS);
    let Some(i) = plans.iter().position(|p| p.size == size) else { return Ok(()) };
    let plan = &mut plans[i];
    if plan.skip > 0 {
        plan.skip -= 1;
        return Ok(());
    }
    let errno = plan.errno;
    plan.fail -= 1;
    if plan.fail == 0 {
        plans.remove(i);
        ARMED.store(!plans.is_empty(), Ordering::Relaxed);
    }
    drop(plans);
    let len = size.bytes().saturating_add(crate::os::page_size());
    Err(crate::os::explain(
        "mmap",
        &format!("an arena of 1 stack of {} (injected failure)", crate::size::DisplaySize(len)),
        len,
        io::Error::from_raw_os_error(errno),
    ))
}
