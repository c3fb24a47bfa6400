//! Memory for task cells: a small size-class cache in front of the global allocator.
//!
//! Every spawn allocates one task cell (closure + result packet, usually well under 256 bytes)
//! and every join frees it, often on another OS thread. glibc's malloc handles that pattern
//! badly at scale: with 100,000 cells alive, frees pile up in its fastbins and the next large
//! request runs `malloc_consolidate` over all of them; `_int_malloc` and `malloc_consolidate`
//! took a third of the time of a 100k spawn + join burst. Like Go's per-P `mcache` and
//! bthread's object pools, small cells are recycled here instead:
//!
//! - three classes (64, 128, 256 bytes, 16-aligned); larger or more aligned cells go to the
//!   global allocator directly;
//! - a per-thread cache of up to [`LOCAL_MAX`] blocks per class (no synchronisation);
//! - a shared depot of full batches ([`BATCH`] blocks) under a mutex, bounded to
//!   [`DEPOT_MAX_BYTES`] per class; what does not fit goes back to the global allocator. So a
//!   burst of N live cells leaves at most `DEPOT_MAX_BYTES` per class (plus the per-thread
//!   caches) behind.
//!
//! A block's memory is never touched here while it is in use, only while it is free. Under
//! loom the cache is bypassed (the models check the cell protocol, not this cache).
#![cfg_attr(loom, allow(dead_code))]

use core::ptr::NonNull;
use std::alloc::{self, Layout};

/// Block sizes of the classes.
const CLASSES: [usize; 3] = [64, 128, 256];
/// Alignment of every block.
const ALIGN: usize = 16;
/// Blocks a thread keeps per class before handing a batch to the depot.
const LOCAL_MAX: usize = 2 * BATCH;
/// Blocks moved between a thread and the depot at once.
const BATCH: usize = 256;
/// Bytes of free blocks the depot keeps per class.
const DEPOT_MAX_BYTES: usize = 16 << 20;

/// A free block (only its address is stored; blocks are `Send` as plain memory).
#[derive(Clone, Copy)]
struct Block(NonNull<u8>);

// SAFETY: a free block is plain memory owned by whichever cache holds it.
unsafe impl Send for Block {}

fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > ALIGN {
        return None;
    }
    CLASSES.iter().position(|&size| layout.size() <= size)
}

fn block_layout(class: usize) -> Layout {
    // Sizes and alignment are constants that form valid layouts.
    Layout::from_size_align(CLASSES[class], ALIGN).expect("a valid block layout")
}

/// Allocates memory for `layout` (never zero-sized).
pub(crate) fn alloc(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() > 0);
    #[cfg(not(loom))]
    if let Some(class) = class_of(layout) {
        if let Some(block) = imp::take(class) {
            return block.0;
        }
        return system_alloc(block_layout(class));
    }
    system_alloc(layout)
}

/// Frees memory from [`alloc`] with the same `layout`.
///
/// # Safety
/// `ptr` came from [`alloc`] with `layout` and is not used afterwards.
pub(crate) unsafe fn free(ptr: NonNull<u8>, layout: Layout) {
    #[cfg(not(loom))]
    if let Some(class) = class_of(layout) {
        imp::give(class, Block(ptr));
        return;
    }
    // SAFETY: allocated by `system_alloc(layout)` (the caller's contract).
    unsafe { alloc::dealloc(ptr.as_ptr(), layout) };
}

fn system_alloc(layout: Layout) -> NonNull<u8> {
    // SAFETY: `layout` has a non-zero size.
    let ptr = unsafe { alloc::alloc(layout) };
    NonNull::new(ptr).unwrap_or_else(|| alloc::handle_alloc_error(layout))
}

#[cfg(not(loom))]
mod imp {
    use core::cell::RefCell;
    use std::sync::Mutex;

    use super::{BATCH, Block, CLASSES, DEPOT_MAX_BYTES, LOCAL_MAX, block_layout};

    /// Full batches of free blocks, per class.
    static DEPOT: [Mutex<Vec<Vec<Block>>>; 3] =
        [Mutex::new(Vec::new()), Mutex::new(Vec::new()), Mutex::new(Vec::new())];

    /// This thread's free blocks, per class; returned to the depot (or the allocator) when the
    /// thread exits.
    struct Local([Vec<Block>; 3]);

    impl Drop for Local {
        fn drop(&mut self) {
            for (class, blocks) in self.0.iter_mut().enumerate() {
                while !blocks.is_empty() {
                    let at = blocks.len().saturating_sub(BATCH);
                    let batch = blocks.split_off(at);
                    to_depot(class, batch);
                }
            }
        }
    }

    std::thread_local! {
        static LOCAL: RefCell<Local> = const {
            RefCell::new(Local([Vec::new(), Vec::new(), Vec::new()]))
        };
    }

    fn depot(class: usize) -> std::sync::MutexGuard<'static, Vec<Vec<Block>>> {
        // Nothing panics while holding it; a poisoned lock still guards a valid list.
        DEPOT[class].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `batch` in the depot if it has room, else gives its blocks back to the allocator.
    fn to_depot(class: usize, batch: Vec<Block>) {
        let mut depot = depot(class);
        if (depot.len() + 1) * BATCH * CLASSES[class] <= DEPOT_MAX_BYTES {
            depot.push(batch);
            return;
        }
        drop(depot);
        for block in batch {
            // SAFETY: every cached block was allocated with `block_layout(class)` and is free.
            unsafe { std::alloc::dealloc(block.0.as_ptr(), block_layout(class)) };
        }
    }

    /// A free block of `class`, if any is cached (here or in the depot).
    pub(super) fn take(class: usize) -> Option<Block> {
        LOCAL
            .try_with(|local| {
                let mut local = local.borrow_mut();
                let blocks = &mut local.0[class];
                if let Some(block) = blocks.pop() {
                    return Some(block);
                }
                let batch = depot(class).pop()?;
                *blocks = batch;
                blocks.pop()
            })
            .ok()
            .flatten()
    }

    /// Caches a free block of `class` (or gives it back to the allocator when this thread's
    /// cache is gone, during thread exit).
    pub(super) fn give(class: usize, block: Block) {
        let cached = LOCAL.try_with(|local| {
            let mut local = local.borrow_mut();
            let blocks = &mut local.0[class];
            blocks.push(block);
            if blocks.len() >= LOCAL_MAX {
                let batch = blocks.split_off(blocks.len() - BATCH);
                drop(local);
                to_depot(class, batch);
            }
        });
        if cached.is_err() {
            // SAFETY: allocated with `block_layout(class)`, and free.
            unsafe { std::alloc::dealloc(block.0.as_ptr(), block_layout(class)) };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_reused_and_large_or_overaligned_layouts_bypass_the_cache() {
        let small = Layout::from_size_align(72, 8).unwrap();
        let a = alloc(small);
        // SAFETY: from `alloc(small)`, unused afterwards.
        unsafe { free(a, small) };
        let b = alloc(small);
        assert_eq!(a, b, "the freed block is the next one handed out on this thread");
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        // SAFETY: as above.
        unsafe { free(b, small) };
        assert_eq!(class_of(Layout::from_size_align(257, 8).unwrap()), None);
        assert_eq!(class_of(Layout::from_size_align(64, 32).unwrap()), None);
        let big = Layout::from_size_align(4096, 64).unwrap();
        let c = alloc(big);
        assert_eq!(c.as_ptr() as usize % 64, 0);
        // SAFETY: from `alloc(big)`.
        unsafe { free(c, big) };
    }

    #[test]
    fn blocks_freed_on_another_thread_travel_through_the_depot() {
        let layout = Layout::from_size_align(200, 16).unwrap();
        let blocks: Vec<usize> =
            (0..3 * LOCAL_MAX).map(|_| alloc(layout).as_ptr() as usize).collect();
        std::thread::spawn(move || {
            for b in blocks {
                // SAFETY: from `alloc(layout)` on the spawning thread, unused afterwards.
                unsafe { free(NonNull::new(b as *mut u8).unwrap(), layout) };
            }
        })
        .join()
        .unwrap();
        // The other thread's cache went to the depot when it exited; take some back.
        let again: Vec<_> = (0..BATCH).map(|_| alloc(layout)).collect();
        for b in again {
            // SAFETY: from `alloc(layout)`.
            unsafe { free(b, layout) };
        }
    }
}
