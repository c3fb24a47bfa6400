//! The runtime's deep paths run on the worker's stack, not on the green thread's: a green
//! thread with a Small stack, half of it used by its own frames, spawns a burst that spills
//! its worker's full queue into the global queue again and again (each spill may pin
//! crossbeam-epoch and collect garbage, whose frames are kilobytes).
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use purloin_sched::{Builder, SpawnOptions, StackSize};

/// Calls `f` below `kib` KiB of frames of its own.
#[inline(never)]
fn below_frames(kib: usize, f: &mut dyn FnMut()) {
    if kib == 0 {
        return f();
    }
    let mut frame = [0u8; 1024];
    std::hint::black_box(&mut frame);
    below_frames(kib - 1, f);
    std::hint::black_box(&mut frame);
}

/// With the spill on the green thread's own stack, this overflowed the 32 KiB stack in every
/// unoptimised run (an abort with the overflow report); a spill needs less than a quarter of
/// the stack now.
#[test]
fn a_half_full_small_stack_spawns_a_burst() {
    const N: usize = 200_000;
    let _w = common::watchdog("spill on a small stack", Duration::from_secs(120));
    let sched = Builder::new().workers(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let small = SpawnOptions { stack_size: Some(StackSize::Small), ..Default::default() };
    let r = ran.clone();
    let spilled = sched
        .spawn_with(small, move || {
            below_frames(16, &mut || {
                for _ in 0..N {
                    let r = r.clone();
                    // Detached: the burst outgrows the local queue.
                    drop(purloin_sched::spawn(move || {
                        r.fetch_add(1, Ordering::Relaxed);
                    }));
                }
            });
        })
        .unwrap();
    spilled.join().unwrap();
    // The children run exactly once each: wait for all of them (the watchdog bounds it).
    while ran.load(Ordering::Relaxed) < N {
        std::thread::yield_now();
    }
    assert_eq!(ran.load(Ordering::Relaxed), N);
    let pulls = sched.stats().total.global_pulls;
    assert!(pulls > 0, "the burst never went through the global queue");
}
