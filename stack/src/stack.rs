//! [`Stack`]: an owned, guard-paged stack leased from the process-wide pool.

use std::fmt;
use std::ops::Range;

use crate::os::GuardBackend;
use crate::pool::{ClassPool, RawSlot};
use crate::size::StackSize;

/// An owned, guard-paged stack: `usable_size()` bytes of read/write memory from
/// [`limit`](Stack::limit) up to [`top`](Stack::top), with a guard page just below `limit`.
///
/// Stacks grow down: a green thread starts with its stack pointer at `top()` and overflows
/// into the guard, where any access faults (SIGSEGV). One guard page is enough for Rust code:
/// rustc emits stack probes that touch every page of a frame larger than a page, so no frame
/// can jump over it. (C code needs `-fstack-clash-protection` for the same guarantee.)
///
/// Dropping a `Stack` returns its slot to the pool (this thread's cache, or the shared pool),
/// from any thread: green threads migrate, so a stack leased on one worker may be returned
/// by another. [`Stack::release`] returns it and gives its memory back at once.
///
/// `Stack` is `Send` and `Sync`: it owns its slot exclusively, and its only `&self`
/// mutation, the label, is made of atomics. It never reads or writes the stack memory
/// itself; whoever runs code on it is responsible for that (and for not returning a stack
/// that is still in use: dropping a `Stack` while a green thread runs on it is a
/// use-after-free of that green thread's frames, which is why contexts built on a stack
/// should borrow or own it).
///
/// # Examples
///
/// ```
/// use purloin_stack::{lease, StackSize};
///
/// let stack = lease(StackSize::Small)?;
/// stack.set_label(42, "worker-7");
/// let top = stack.top() as usize;
/// let limit = stack.limit() as usize;
/// assert_eq!(top - limit, stack.usable_size());
/// assert_eq!(stack.guard(), limit - purloin_stack::page_size()..limit);
/// // The memory is ours to use.
/// // SAFETY: `limit..top` is read/write memory owned by `stack`.
/// unsafe { stack.limit().write(1) };
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Stack {
    class: &'static ClassPool,
    raw: RawSlot,
}

// SAFETY: the `NonNull` in `raw` is the address of a slot this `Stack` owns exclusively (the
// pool hands each slot to one lessee at a time, `pool.rs` P1); `class` is a `&'static` to a
// `Sync` pool. Moving the owner to another thread moves that exclusive ownership with it.
unsafe impl Send for Stack {}
// SAFETY: `&Stack` only reads addresses and sizes, and writes the label through atomics
// (`SlotMeta`), so sharing it between threads is sound.
unsafe impl Sync for Stack {}

impl Stack {
    #[inline]
    pub(crate) fn from_raw(class: &'static ClassPool, raw: RawSlot) -> Stack {
        Stack { class, raw }
    }

    /// The highest address of the stack (exclusive): where the stack pointer starts. Page
    /// aligned, so 16-byte aligned.
    #[inline]
    pub fn top(&self) -> *mut u8 {
        self.raw.limit.as_ptr().wrapping_add(self.class.geo.usable)
    }

    /// The lowest usable address, just above the guard page. Writing below it faults.
    #[inline]
    pub fn limit(&self) -> *mut u8 {
        self.raw.limit.as_ptr()
    }

    /// Usable bytes: `top() - limit()`.
    #[inline]
    pub fn usable_size(&self) -> usize {
        self.class.geo.usable
    }

    /// The guard's address range, `guard().end == limit()` (one page).
    pub fn guard(&self) -> Range<usize> {
        let limit = self.limit() as usize;
        limit - self.class.geo.guard..limit
    }

    /// The size class this stack came from.
    pub fn size(&self) -> StackSize {
        StackSize::from_usable(self.class.geo.usable)
    }

    /// How this stack's guard was installed.
    pub fn guard_backend(&self) -> GuardBackend {
        self.class.backend
    }

    /// Attaches a green-thread id and name to this stack, which the overflow handler prints
    /// ("green thread 42 'worker-7' has overflowed its 32 KiB stack"). The name is copied and
    /// truncated to 32 bytes (at a character boundary). The label is cleared when the stack
    /// is returned.
    ///
    /// # Examples
    ///
    /// ```
    /// let stack = purloin_stack::lease(purloin_stack::StackSize::Small)?;
    /// stack.set_label(7, "a rather long green thread name that gets truncated");
    /// let (id, name) = stack.label().unwrap();
    /// assert_eq!((id, name.len()), (7, 32));
    /// stack.clear_label();
    /// assert!(stack.label().is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_label(&self, id: u64, name: &str) {
        self.meta().set_label(id, name);
    }

    /// Removes the label (the overflow message then says the stack is unlabelled).
    pub fn clear_label(&self) {
        self.meta().clear_label();
    }

    /// Notes that the labelled green thread now runs another one inline on this stack (a
    /// joiner running its not-yet-started child): the overflow report then names that one,
    /// and its joiner. `Some(0)` names one without an id yet; `None` ends it.
    ///
    /// # Examples
    ///
    /// ```
    /// let stack = purloin_stack::lease(purloin_stack::StackSize::Small)?;
    /// stack.set_label(1, "joiner");
    /// stack.set_inline(Some(2));
    /// stack.set_inline(None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_inline(&self, child: Option<u64>) {
        let v = match child {
            None => 0,
            Some(0) => u64::MAX,
            Some(id) => id,
        };
        // Relaxed: read by the overflow handler on this same thread.
        self.meta().inline.store(v, crate::sync::Ordering::Relaxed);
    }

    /// The label set by [`Stack::set_label`], if any.
    pub fn label(&self) -> Option<(u64, String)> {
        let (id, bytes, len) = self.meta().read_label()?;
        Some((id, String::from_utf8_lossy(&bytes[..len]).into_owned()))
    }

    fn meta(&self) -> &crate::arena::SlotMeta {
        // SAFETY: `class` is the pool the slot came from, and it outlives every `Stack`
        // (process-wide pools are never dropped; see `ClassPool`).
        unsafe { self.raw.meta() }
    }

    /// Whether a holder may keep this stack between uses (a scheduler's spare for its next
    /// green thread) without holding more memory than the pool would: false for stacks above
    /// [`Options::BIG_STACK_BYTES`](crate::Options::BIG_STACK_BYTES), whose return gives
    /// their touched pages back.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_stack::{lease, StackSize};
    ///
    /// assert!(lease(StackSize::Normal)?.worth_keeping());
    /// assert!(!lease(StackSize::Bytes(64 << 20))?.worth_keeping());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn worth_keeping(&self) -> bool {
        self.class.geo.usable <= crate::Options::BIG_STACK_BYTES
    }

    /// Returns the stack to the shared pool *and* gives all of its memory back to the kernel
    /// now (`MADV_DONTNEED`), bypassing this thread's cache: for a stack that grew deep, or
    /// when the caller knows it will not need another stack soon. (Dropping keeps the memory
    /// for fast reuse.)
    ///
    /// # Examples
    ///
    /// ```
    /// let stack = purloin_stack::lease(purloin_stack::StackSize::Small)?;
    /// // SAFETY: the stack's usable range is ours to write.
    /// unsafe { std::ptr::write_bytes(stack.limit(), 1, stack.usable_size()) };
    /// stack.release();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn release(self) {
        let this = std::mem::ManuallyDrop::new(self);
        this.class.release(this.raw);
    }
}

impl Drop for Stack {
    #[inline]
    fn drop(&mut self) {
        crate::global::give_back(self.class, self.raw);
    }
}

impl fmt::Debug for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stack")
            .field("size", &self.size())
            .field("limit", &self.limit())
            .field("top", &self.top())
            .field("label", &self.label())
            .finish()
    }
}
