//! Stack allocation benchmarks, purloin against its peers in the same groups:
//!
//! - `fresh_32k_alloc_free`: a 32 KiB guarded stack whose memory comes fresh from the
//!   kernel and goes back to it. Peers: corosensei `DefaultStack::new` + drop and context
//!   `ProtectedFixedSizeStack::new` + drop (mmap + mprotect + munmap). purloin:
//!   `purloin_first_use` leases a never-used arena slot (guard installed with one
//!   `madvise`) and releases it (`MADV_DONTNEED`); `purloin_uncached` leases a pooled slot
//!   whose memory was given back and releases it again (the steady state of a pool that
//!   returns memory).
//! - `pooled_lease_return`: lease + drop on a warm per-thread cache (no atomic RMW, no
//!   system call), 32 KiB and 1 MiB. No peer pools stacks.
//!
//! `cargo xtask bench -p purloin-stack` prints the ratios.
// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use purloin_stack::{Stack, StackSize, lease, trim};

const SMALL: usize = 32 * 1024;

fn fresh(c: &mut Criterion) {
    let mut g = c.benchmark_group("fresh_32k_alloc_free");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));

    // Runs first, while the 32 KiB class has no pooled slot: every lease carves a new slot.
    // Released slots are leased again (untimed) and kept, so the next batch is fresh too.
    let mut graveyard: Vec<Stack> = Vec::new();
    g.bench_function("purloin_first_use", |b| {
        b.iter_custom(|iters| {
            let mut batch = Vec::with_capacity(iters as usize);
            let start = Instant::now();
            for _ in 0..iters {
                batch.push(lease(StackSize::Small).unwrap());
            }
            for s in batch.drain(..) {
                s.release();
            }
            let took = start.elapsed();
            graveyard.extend((0..iters).map(|_| lease(StackSize::Small).unwrap()));
            took
        })
    });
    for s in graveyard.drain(..) {
        s.release();
    }
    trim(); // everything in the clean list: the next bench never hits the thread cache
    g.bench_function("purloin_uncached", |b| b.iter(|| lease(StackSize::Small).unwrap().release()));
    g.bench_function("corosensei_default_stack", |b| {
        b.iter(|| drop(black_box(corosensei::stack::DefaultStack::new(SMALL).unwrap())))
    });
    g.bench_function("context_protected_fixed_size_stack", |b| {
        b.iter(|| drop(black_box(context::stack::ProtectedFixedSizeStack::new(SMALL).unwrap())))
    });
    g.finish();
}

fn pooled(c: &mut Criterion) {
    let mut g = c.benchmark_group("pooled_lease_return");
    g.sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (name, size) in [("32KiB", StackSize::Small), ("1MiB", StackSize::Normal)] {
        drop(lease(size).unwrap()); // warm this thread's cache
        g.bench_with_input(BenchmarkId::new("purloin_thread_cache", name), &size, |b, &size| {
            b.iter(|| drop(black_box(lease(size).unwrap())))
        });
    }
    g.finish();
}

criterion_group!(benches, fresh, pooled);
criterion_main!(benches);
