//! Memory is given back after the work is done: a green thread that recursed deeply on a big
//! stack leaves nothing of it resident once it has been joined (checked page by page with
//! `mincore`, not with the process's RSS).
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::time::Duration;

use purloin::StackSize;

/// Recurses `depth` frames of 64 KiB each (every page written), returning the address of
/// the deepest frame's buffer.
#[inline(never)]
fn recurse(depth: usize) -> usize {
    let mut frame = [0u8; 64 * 1024];
    for b in frame.iter_mut().step_by(1024) {
        *b = depth as u8;
    }
    let frame = std::hint::black_box(&mut frame);
    if depth == 0 {
        frame.as_ptr() as usize
    } else {
        recurse(depth - 1).min(frame.as_ptr() as usize)
    }
}

/// Resident pages in `[lo, hi)`.
fn resident_pages(lo: usize, hi: usize) -> usize {
    let page = purloin_stack::page_size();
    let (lo, hi) = (lo / page * page, hi.div_ceil(page) * page);
    let mut vec = vec![0u8; (hi - lo) / page];
    // SAFETY: the range lies inside a stack arena mapping, which is never unmapped; mincore
    // writes one byte per page into `vec`, which has room for all of them.
    let rc = unsafe { libc::mincore(lo as *mut libc::c_void, hi - lo, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn a_big_stack_gives_its_memory_back_once_its_green_thread_ended() {
    let _w = common::watchdog("big stack memory", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new()
        .workers(1)
        .stack_size(StackSize::Bytes(64 << 20))
        .long_run_threshold(Duration::from_secs(60))
        .build()
        .unwrap();
    // 512 frames of 64 KiB: 32 MiB of the 64 MiB stack written.
    let (deepest, top) = rt
        .spawn(|| {
            let marker = 0u8;
            let top = std::hint::black_box(&marker) as *const u8 as usize;
            (recurse(512), top)
        })
        .join()
        .unwrap();
    assert!(top - deepest >= 32 << 20, "recursed {} MiB", (top - deepest) >> 20);
    // The joiner may see the result before the worker is back on its own stack and has
    // returned the green thread's: wait for the return (the watchdog bounds this).
    let leased = || {
        let classes = purloin_stack::stats().classes;
        classes.iter().filter(|c| c.usable == 64 << 20).map(|c| c.leased).sum::<usize>()
    };
    while leased() > 0 {
        std::thread::yield_now();
    }
    // Leave the top 1 MiB out: the pool keeps the top pages of a returned stack resident.
    let resident = resident_pages(deepest, top - (1 << 20));
    let touched = (top - (1 << 20) - deepest) / purloin_stack::page_size();
    assert_eq!(resident, 0, "{resident} of {touched} touched pages still resident");
    // And a green thread after it still runs (on a stack whose pages read as zero again).
    assert!(rt.spawn(|| recurse(16) > 0).join().unwrap());
}
