//! Memory for task cells: spans of same-size blocks, handed out in address order.
//!
//! Every spawn allocates one task cell (closure + result packet, usually well under 256 bytes)
//! and every join frees it, often on another OS thread. glibc's malloc handles that pattern
//! badly at scale (with 100,000 cells alive, frees pile up in its fastbins and the next large
//! request runs `malloc_consolidate` over all of them), so small cells are recycled here, as
//! Go's `mcache`/`mspan` and bthread's object pools do:
//!
//! - three classes (64, 128, 256 bytes, 16-aligned); larger or more aligned cells go to the
//!   global allocator directly;
//! - blocks live in 64 KiB *spans* (aligned, so a block finds its span by masking its address)
//!   whose header holds a bitmap of the free blocks;
//! - a thread hands out the blocks it claimed from a span in address order, and queues its
//!   frees, setting their bits in batches ([`FLUSH`]), one read-modify-write per bitmap word;
//!   a queued free is handed out again first (a fork-join child's cell is taken again by the
//!   next fork while it is still in cache), so at most `FLUSH` blocks per thread leave address
//!   order, and the disorder does not build up;
//! - spans with free blocks wait in a shared pool; a thread that runs out claims every free
//!   block of the next span at once.
//!
//! Why spans and not per-thread stacks of free blocks: a joiner that moves between two threads
//! splits its frees into runs, and per-thread stacks interleave those runs, so the order of
//! the blocks handed out would drift further from address order with every burst (more page
//! crossings between consecutive allocations, slower bursts over time). A span hands out its
//! free blocks lowest address first whatever order they were freed in, as Go's
//! `nextFreeIndex` does, so the order never drifts (the test
//! `address_order_survives_frees_split_between_threads` keeps it so).
//!
//! In front of that, each thread keeps a small stack of its latest frees per class ([`HOT`]
//! blocks, a `const` thread-local with no destructor, so a hit is a few instructions with no
//! borrow flag and no registration check): a spawn that is run and freed on the same thread
//! (a scope's child run by its owner, a join's child taken back) takes the block it freed
//! last. It adds at most `HOT` blocks per thread to those handed out of address order; the
//! thread's exit drains it with the rest of its blocks.
//!
//! Spans are kept for reuse once made (the peak number of live cells of a class, rounded up to
//! spans): a span may be referenced by a freer that is still listing it, so it is never given
//! back. Under loom the cache is bypassed; the listing protocol is modelled on its own.
//!
//! # Memory ordering
//!
//! - (S1) A freer sets a block's bit with a Release read-modify-write after its last use of the
//!   block; a claimer clears bits with an Acquire swap. So the block's previous user's accesses
//!   happen before its next user's.
//! - (S2) A span with free bits is in the pool or held by a claimer (`listed` set). A freer sets
//!   bits, then (fence FA, SeqCst) reads `listed`; a claimer that emptied the span clears
//!   `listed`, then (fence FB, SeqCst) reads the bitmap. FA/FB order each pair of accesses, so
//!   at least one side sees the other's write: the freer lists the span, or the claimer does.
//!   Listing is a swap of `listed` to true, so the span enters the pool once.
#![cfg_attr(loom, allow(dead_code))]

use core::ptr::NonNull;
use std::alloc::{self, Layout};

use crate::sync::{AtomicBool, AtomicU64, Ordering, fence};

/// Block sizes of the classes.
const CLASSES: [usize; 3] = [64, 128, 256];
/// Alignment of every block.
const ALIGN: usize = 16;
/// Bytes per span (and its alignment).
const SPAN: usize = 64 << 10;
/// Bitmap words of a span of the smallest class.
const WORDS: usize = SPAN / 64 / 64;
/// Frees a thread queues before setting their bits.
const FLUSH: usize = 256;
/// Latest frees per class a thread keeps in its hot stack (in front of the queued frees).
const HOT: usize = 32;

/// The class of `layout`, if it has one. Always inlined: for a constant layout (every cell
/// type's) it folds to a constant.
#[inline(always)]
fn class_of(layout: Layout) -> Option<usize> {
    match layout.size() {
        _ if layout.align() > ALIGN => None,
        s if s <= CLASSES[0] => Some(0),
        s if s <= CLASSES[1] => Some(1),
        s if s <= CLASSES[2] => Some(2),
        _ => None,
    }
}

/// Allocates memory for `layout` (never zero-sized). Inlined, so that a constant layout
/// picks its class at compile time and a hit in the hot stack costs a few instructions.
#[inline]
pub(crate) fn alloc(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() > 0);
    #[cfg(not(loom))]
    if let Some(class) = class_of(layout) {
        return imp::take_hot(class).unwrap_or_else(|| imp::take(class));
    }
    system_alloc(layout)
}

/// Frees memory from [`alloc`] with the same `layout`.
///
/// # Safety
/// `ptr` came from [`alloc`] with `layout` and is not used afterwards.
#[inline]
pub(crate) unsafe fn free(ptr: NonNull<u8>, layout: Layout) {
    #[cfg(not(loom))]
    if let Some(class) = class_of(layout) {
        if !imp::give_hot(class, ptr) {
            // SAFETY: a block of `class` from `alloc` (the caller's contract), unused from
            // now on.
            unsafe { imp::give(class, ptr) };
        }
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

/// The header at the start of every span: which blocks are free, and whether the span is
/// listed (in the pool, or held by the claimer draining it).
pub(crate) struct SpanHead {
    listed: AtomicBool,
    free: [AtomicU64; WORDS],
}

impl SpanHead {
    pub(crate) fn new() -> SpanHead {
        SpanHead {
            listed: AtomicBool::new(false),
            free: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Marks the blocks of `mask` in bitmap word `word` free (S1: Release).
    pub(crate) fn give(&self, word: usize, mask: u64) {
        let before = self.free[word].fetch_or(mask, Ordering::Release);
        debug_assert_eq!(before & mask, 0, "a block freed twice");
    }

    /// After [`SpanHead::give`]: whether the caller must put the span in the pool (S2).
    pub(crate) fn list_after_give(&self) -> bool {
        // FA: orders the bits set before the `listed` read (pairs with FB).
        fence(Ordering::SeqCst);
        !self.listed.load(Ordering::Relaxed) && !self.listed.swap(true, Ordering::Relaxed)
    }

    /// Claims every free block of bitmap word `word` (S1: Acquire).
    pub(crate) fn claim(&self, word: usize) -> u64 {
        if self.free[word].load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.free[word].swap(0, Ordering::Acquire)
    }

    /// A claimer is done with the span (it found it empty or took what it had): unlists it.
    /// Returns whether the caller must put it back in the pool because blocks were freed
    /// meanwhile (S2).
    pub(crate) fn list_after_claim(&self, words: usize) -> bool {
        self.listed.store(false, Ordering::Relaxed);
        // FB: orders the `listed` store before the bitmap reads (pairs with FA).
        fence(Ordering::SeqCst);
        self.free[..words].iter().any(|w| w.load(Ordering::Relaxed) != 0)
            && !self.listed.swap(true, Ordering::Relaxed)
    }
}

#[cfg(not(loom))]
mod imp {
    use core::cell::{Cell, RefCell};
    use core::ptr::NonNull;
    use std::alloc::Layout;
    use std::sync::Mutex;

    use super::{CLASSES, FLUSH, SPAN, SpanHead};

    /// A span's address (spans are never freed, so it may cross threads freely).
    #[derive(Clone, Copy, PartialEq, Eq)]
    struct Span(NonNull<SpanHead>);

    // SAFETY: a span is plain memory shared through its atomic header.
    unsafe impl Send for Span {}

    impl Span {
        fn of(block: NonNull<u8>) -> Span {
            let base = block.as_ptr().map_addr(|a| a & !(SPAN - 1));
            // SAFETY: every block of a class lies in a span, at a non-zero offset.
            Span(unsafe { NonNull::new_unchecked(base.cast()) })
        }

        fn head(&self) -> &'static SpanHead {
            // SAFETY: spans are initialised when made and never freed.
            unsafe { self.0.as_ref() }
        }

        fn block(self, class: usize, index: usize) -> NonNull<u8> {
            // SAFETY: `index` is within the span (callers use indexes below `blocks(class)`).
            unsafe { self.0.cast::<u8>().add(index * CLASSES[class]) }
        }
    }

    /// Blocks per span of `class`.
    const fn blocks(class: usize) -> usize {
        SPAN / CLASSES[class]
    }

    /// Bitmap words in use for `class`.
    const fn words(class: usize) -> usize {
        blocks(class) / 64
    }

    /// The first blocks of a span hold its header.
    const fn reserved(class: usize) -> usize {
        size_of::<SpanHead>().div_ceil(CLASSES[class])
    }

    /// Spans that have (or had, when listed) free blocks, per class.
    static POOL: [Mutex<Vec<Span>>; 3] =
        [Mutex::new(Vec::new()), Mutex::new(Vec::new()), Mutex::new(Vec::new())];

    fn pool(class: usize) -> std::sync::MutexGuard<'static, Vec<Span>> {
        // Nothing panics while holding it; a poisoned lock still guards a valid list.
        POOL[class].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A thread's blocks, per class: claimed ones to hand out (highest address first in the
    /// vector, so `pop` gives the lowest) and queued frees. Both go back to their spans when
    /// the thread exits.
    struct Local {
        ready: [Vec<NonNull<u8>>; 3],
        freed: [Vec<NonNull<u8>>; 3],
    }

    impl Drop for Local {
        fn drop(&mut self) {
            // The hot stack closes first, so no free lands there from now on.
            let hot = HOT_BLOCKS.with(Hot::close);
            for (class, hot) in hot.into_iter().enumerate() {
                self.freed[class].extend(hot);
                flush(class, &mut self.freed[class]);
                flush(class, &mut self.ready[class]);
            }
        }
    }

    std::thread_local! {
        static LOCAL: RefCell<Local> = const {
            RefCell::new(Local { ready: [Vec::new(), Vec::new(), Vec::new()],
                                 freed: [Vec::new(), Vec::new(), Vec::new()] })
        };
    }

    /// A thread's latest frees per class (see the module docs), in front of `LOCAL`. No
    /// destructor, so every access is a plain thread-local access (none checks whether it was
    /// registered or destroyed); `LOCAL`'s destructor drains it instead. So that it is never
    /// left holding blocks at a thread's exit, it takes frees only while `open`: from the
    /// thread's first use of `LOCAL` (which registers that destructor) until that destructor
    /// runs.
    struct Hot {
        blocks: [[Cell<*mut u8>; super::HOT]; 3],
        len: [Cell<usize>; 3],
        open: Cell<bool>,
    }

    impl Hot {
        /// Closes the stack and returns its blocks.
        fn close(&self) -> [Vec<NonNull<u8>>; 3] {
            self.open.set(false);
            core::array::from_fn(|class| {
                let n = self.len[class].replace(0);
                self.blocks[class][..n]
                    .iter()
                    // SAFETY: the first `len` slots hold blocks `give_hot` pushed (non-null).
                    .map(|b| unsafe { NonNull::new_unchecked(b.get()) })
                    .collect()
            })
        }
    }

    std::thread_local! {
        static HOT_BLOCKS: Hot = const {
            Hot {
                blocks: [const { [const { Cell::new(core::ptr::null_mut()) }; super::HOT] }; 3],
                len: [const { Cell::new(0) }; 3],
                open: Cell::new(false),
            }
        };
    }

    /// The block of `class` this thread freed last, if its hot stack has one.
    #[inline]
    pub(super) fn take_hot(class: usize) -> Option<NonNull<u8>> {
        HOT_BLOCKS.with(|hot| {
            let n = hot.len[class].get().checked_sub(1)?;
            hot.len[class].set(n);
            // SAFETY: slot `n` < `len` holds a block `give_hot` pushed (non-null).
            Some(unsafe { NonNull::new_unchecked(hot.blocks[class][n].get()) })
        })
    }

    /// Pushes a freed block of `class` on this thread's hot stack; false if it is full or
    /// closed (the caller then frees it through [`give`]).
    #[inline]
    pub(super) fn give_hot(class: usize, block: NonNull<u8>) -> bool {
        HOT_BLOCKS.with(|hot| {
            let n = hot.len[class].get();
            if n == super::HOT || !hot.open.get() {
                return false;
            }
            hot.blocks[class][n].set(block.as_ptr());
            hot.len[class].set(n + 1);
            true
        })
    }

    /// `LOCAL` is in use on this thread (its destructor is registered): the hot stack may
    /// take frees. Called on the slow paths, after a successful access to `LOCAL`.
    fn open_hot() {
        HOT_BLOCKS.with(|hot| hot.open.set(true));
    }

    /// A block of `class` (after [`take_hot`] found none).
    #[inline(never)]
    pub(super) fn take(class: usize) -> NonNull<u8> {
        LOCAL
            .try_with(|local| {
                open_hot();
                let mut local = local.borrow_mut();
                let local = &mut *local;
                // A block this thread freed last is still in its cache (a fork-join child's
                // cell, freed by the join, is taken again by the next fork). At most `FLUSH`
                // blocks are reused out of address order this way: the rest go back to their
                // spans.
                if let Some(block) = local.freed[class].pop().or_else(|| local.ready[class].pop()) {
                    return block;
                }
                // Queued frees first: their spans are the warmest.
                flush(class, &mut local.freed[class]);
                refill(class, &mut local.ready[class]);
                local.ready[class].pop().expect("a refill yields a block")
            })
            .unwrap_or_else(|_| {
                // This thread's cache is gone (thread exit): claim a span, keep one block.
                let mut blocks = Vec::new();
                refill(class, &mut blocks);
                let block = blocks.pop().expect("a refill yields a block");
                flush(class, &mut blocks);
                block
            })
    }

    /// Frees a block of `class`.
    ///
    /// # Safety
    /// `block` came from [`take`] with `class` and is not used afterwards.
    #[inline(never)]
    pub(super) unsafe fn give(class: usize, block: NonNull<u8>) {
        let queued = LOCAL.try_with(|local| {
            open_hot();
            let mut local = local.borrow_mut();
            let freed = &mut local.freed[class];
            freed.push(block);
            if freed.len() >= FLUSH {
                flush(class, freed);
            }
        });
        if queued.is_err() {
            flush(class, &mut vec![block]);
        }
    }

    /// Marks `blocks` free in their spans (one read-modify-write per run of blocks in the
    /// same bitmap word) and lists the spans that need it; empties `blocks`.
    fn flush(class: usize, blocks: &mut Vec<NonNull<u8>>) {
        let mut run: Option<(Span, usize, u64)> = None;
        for &block in blocks.iter() {
            let span = Span::of(block);
            let index = (block.as_ptr().addr() - span.0.as_ptr().addr()) / CLASSES[class];
            let (word, bit) = (index / 64, 1u64 << (index % 64));
            if let Some((s, w, mask)) = &mut run
                && *s == span
                && *w == word
            {
                *mask |= bit;
                continue;
            }
            if let Some((s, w, mask)) = run.replace((span, word, bit)) {
                s.head().give(w, mask);
                if s != span {
                    list_if_needed(class, s);
                }
            }
        }
        if let Some((s, w, mask)) = run {
            s.head().give(w, mask);
            list_if_needed(class, s);
        }
        blocks.clear();
    }

    fn list_if_needed(class: usize, span: Span) {
        if span.head().list_after_give() {
            pool(class).push(span);
        }
    }

    /// Fills `ready` (empty) with the free blocks of one span from the pool, or of a new span.
    fn refill(class: usize, ready: &mut Vec<NonNull<u8>>) {
        loop {
            let Some(span) = pool(class).pop() else {
                new_span(class, ready);
                return;
            };
            let head = span.head();
            for word in (0..words(class)).rev() {
                let mut bits = head.claim(word);
                while bits != 0 {
                    let top = 63 - bits.leading_zeros() as usize;
                    bits &= !(1u64 << top);
                    ready.push(span.block(class, word * 64 + top));
                }
            }
            if head.list_after_claim(words(class)) {
                pool(class).push(span);
            }
            if !ready.is_empty() {
                return;
            }
        }
    }

    /// Makes a span of `class` and puts all its blocks in `ready` (it starts unlisted, with no
    /// free bits: its blocks are all handed out).
    fn new_span(class: usize, ready: &mut Vec<NonNull<u8>>) {
        let layout = Layout::from_size_align(SPAN, SPAN).expect("a valid span layout");
        let span = Span(super::system_alloc(layout).cast());
        // SAFETY: fresh memory of SPAN bytes, aligned for the header.
        unsafe { span.0.write(SpanHead::new()) };
        ready.extend((reserved(class)..blocks(class)).rev().map(|i| span.block(class, i)));
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
        assert_eq!(a, b, "a block freed on this thread is the next one handed out");
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

    /// A thread's hot stack of latest frees goes back to the spans when the thread exits,
    /// also for a thread that only ever freed: once whole, once ten blocks only (too few to
    /// reach past the hot stack, if it took frees before the thread's exit drain was
    /// registered). A third thread then finds every block in the spans they came from: none
    /// is stuck in an exited thread's stack. Mutation checks: without the drain in `Local`'s
    /// `drop`, or with `give_hot` ignoring `open`, this fails (blocks from another span).
    #[test]
    fn exiting_threads_give_their_hot_blocks_back() {
        // Class 2 (256 bytes): no other test here uses it. A whole span's worth.
        let layout = Layout::from_size_align(200, 16).unwrap();
        let n = SPAN / 256 - 1;
        let alloc_n = move || {
            std::thread::spawn(move || {
                (0..n).map(|_| alloc(layout).as_ptr() as usize).collect::<Vec<_>>()
            })
            .join()
            .unwrap()
        };
        let free_all = move |blocks: Vec<usize>| {
            std::thread::spawn(move || {
                for b in blocks {
                    // SAFETY: from `alloc(layout)`, unused afterwards.
                    unsafe { free(NonNull::new(b as *mut u8).unwrap(), layout) };
                }
            })
            .join()
            .unwrap()
        };
        let spans_of = |b: &[usize]| {
            b.iter().map(|b| b & !(SPAN - 1)).collect::<std::collections::HashSet<_>>()
        };
        let mut blocks = alloc_n();
        let spans = spans_of(&blocks);
        let rest = blocks.split_off(10);
        free_all(blocks);
        free_all(rest);
        let again = alloc_n();
        assert!(spans_of(&again).is_subset(&spans), "blocks were lost in an exited thread");
        free_all(again);
    }

    /// Page crossings between consecutive blocks.
    fn page_changes(blocks: &[usize]) -> usize {
        blocks.windows(2).filter(|w| w[0] / 4096 != w[1] / 4096).count()
    }

    /// The pattern that shuffles per-thread free stacks: one thread allocates 100,000 blocks,
    /// and they are freed in allocation order, in runs of 1 to 1,000 that alternate between
    /// that thread and another (a joiner moving between two workers). Blocks must still come
    /// out in address order: after 60 bursts, consecutive allocations cross about as many
    /// pages as in the first burst. Also checks that every block comes back: no burst needs
    /// new spans after the first.
    #[test]
    fn address_order_survives_frees_split_between_threads() {
        let layout = Layout::from_size_align(120, 16).unwrap();
        let (to_other, runs) = std::sync::mpsc::channel::<Vec<usize>>();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            for run in runs {
                for b in run {
                    // SAFETY: from `alloc(layout)`, unused afterwards.
                    unsafe { free(NonNull::new(b as *mut u8).unwrap(), layout) };
                }
                done.send(()).unwrap();
            }
        });
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut first, mut last, mut spans) = (0, 0, std::collections::HashSet::new());
        for burst in 0..60 {
            let blocks: Vec<usize> =
                (0..100_000).map(|_| alloc(layout).as_ptr() as usize).collect();
            let before = spans.len();
            spans.extend(blocks.iter().map(|b| b & !(SPAN - 1)));
            if burst > 0 {
                assert!(spans.len() <= before + 2, "burst {burst} needed new spans");
            }
            (first, last) = if burst == 0 {
                (page_changes(&blocks), 0)
            } else {
                (first, page_changes(&blocks))
            };
            let (mut at, mut here) = (0, true);
            while at < blocks.len() {
                let end = (at + 1 + (next() % 1000) as usize).min(blocks.len());
                if here {
                    for &b in &blocks[at..end] {
                        // SAFETY: from `alloc(layout)`, unused afterwards.
                        unsafe { free(NonNull::new(b as *mut u8).unwrap(), layout) };
                    }
                } else {
                    to_other.send(blocks[at..end].to_vec()).unwrap();
                    wait.recv().unwrap();
                }
                (at, here) = (end, !here);
            }
        }
        drop(to_other);
        other.join().unwrap();
        assert!(last <= first * 3 / 2, "page crossings grew from {first} to {last}");
    }
}

/// Loom models of the span protocol (S1, S2) on the real `SpanHead`.
#[cfg(all(test, loom))]
mod loom_spans {
    use super::SpanHead;
    use crate::sync::{Arc, Mutex, Ordering, UnsafeCell, lock, thread};

    /// A claimer empties a span it took from the pool while another thread frees a block of
    /// it and reads `listed`. The block is never lost: the claimer took it, or the span went
    /// back to the pool, once. And the claimer that takes it sees the freer's last write to
    /// it (S1). Mutation checks: without FA or without FB, loom finds the block lost (the
    /// span unlisted with a free bit); with `give` Relaxed, a causality violation on the
    /// block's contents.
    #[test]
    fn a_block_freed_while_its_span_is_emptied_is_not_lost() {
        loom::model(|| {
            let head = Arc::new(SpanHead::new());
            let block = Arc::new(UnsafeCell::new(0u32));
            let listings = Arc::new(Mutex::new(0usize));
            // The claimer popped the span from the pool.
            head.listed.store(true, Ordering::Relaxed);
            let (h, b, l) = (head.clone(), block.clone(), listings.clone());
            let freer = thread::spawn(move || {
                // SAFETY: the freer owns the block until it gives it.
                b.with_mut(|v| unsafe { *v = 7 });
                h.give(0, 1);
                if h.list_after_give() {
                    *lock(&l) += 1;
                }
            });
            let claimed = head.claim(0);
            if claimed != 0 {
                // SAFETY: claimed: the block is ours now (S1).
                assert_eq!(block.with(|v| unsafe { *v }), 7);
            }
            if head.list_after_claim(1) {
                *lock(&listings) += 1;
            }
            freer.join().unwrap();
            let listed = *lock(&listings);
            assert!(listed <= 1, "listed twice");
            if claimed == 0 {
                // The bit is still set: the span must be in the pool to be found again.
                assert_eq!(listed, 1, "a freed block was lost");
            }
        });
    }
}
