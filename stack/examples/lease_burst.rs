//! Instruction counts of the pool's paths, for callgrind (user-space instructions only: the
//! system calls a path makes are counted with `strace -c`, not here).
//!
//! ```text
//! cargo build --release -p purloin-stack --example lease_burst
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/examples/lease_burst
//! callgrind_annotate --inclusive=yes cg.out | grep 'lease_burst::'
//! ```
//!
//! - `cached`: 100,000 leases and returns on a warm per-thread cache (the
//!   `pooled_lease_return` bench's path).
//! - `burst_lease` / `burst_return`: twice, 20,000 small stacks leased (the top of each
//!   touched, as an idle green thread does) and then returned, beyond the thread cache and
//!   the shared pool's bound.

use std::hint::black_box;

use purloin_stack::{Stack, StackSize, lease};

#[inline(never)]
fn cached(n: usize) {
    for _ in 0..n {
        drop(black_box(lease(StackSize::Small).unwrap()));
    }
}

#[inline(never)]
fn burst_lease(n: usize) -> Vec<Stack> {
    (0..n)
        .map(|_| {
            let s = lease(StackSize::Small).unwrap();
            // SAFETY: the 64 bytes below the top of a stack we leased are its usable memory.
            unsafe { s.top().sub(64).write(1) };
            s
        })
        .collect()
}

#[inline(never)]
fn burst_return(stacks: Vec<Stack>) {
    drop(stacks);
}

fn main() {
    drop(lease(StackSize::Small).unwrap()); // warm this thread's cache
    cached(100_000);
    for _ in 0..2 {
        let stacks = burst_lease(20_000);
        burst_return(stacks);
    }
}
