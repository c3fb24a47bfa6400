//! The public API: [`Context`], [`Transfer`], [`Entry`], shared by the assembly backend
//! (`crate::arch`) and the loom backend (`crate::loom`).

use core::fmt;
use core::marker::PhantomData;

#[cfg(not(loom))]
use crate::arch as backend;
#[cfg(loom)]
use crate::loom as backend;

#[cfg(not(loom))]
type Raw = core::ptr::NonNull<u8>;
#[cfg(loom)]
type Raw = crate::loom::Handle;

/// The smallest stack [`Context::new`] accepts, in bytes, between `stack_limit` and the
/// 16-byte-aligned `stack_top`.
///
/// Nothing useful runs in less: the entry function, its callees and a panic's unwinding
/// machinery all need stack. Real green threads want 32 KiB or more (brpc's small stacks are
/// 32 KiB, its default 1 MiB).
pub const MIN_STACK_SIZE: usize = 4096;

/// The function a fresh context starts in, called on the context's own stack with the
/// [`Transfer`] of the first switch into it.
///
/// It must never return (the type says so) and must not let a panic escape: there is no frame
/// above it to unwind into, so an escaping panic aborts the process (with the message "a panic
/// escaped the entry function of a context"). Catch panics inside it with
/// [`std::panic::catch_unwind`] and end by resuming another context for the last time.
///
/// The ABI is `"C-unwind"` rather than `"C"` because of the loom backend: there, a context
/// whose [`Context`] is dropped without being resumed ends its loom thread by unwinding (see
/// the crate docs), and that unwinding must be allowed to pass through the entry function.
pub type Entry = extern "C-unwind" fn(Transfer) -> !;

/// A suspended execution: the saved stack pointer of a stack whose registers were saved by a
/// switch (or prepared by [`Context::new`]).
///
/// A `Context` is consumed by resuming it, so each suspension is resumed at most once. It is
/// [`Send`] (a green thread may continue on another OS thread; see the obligations of
/// [`Context::resume`]), not [`Sync`] (nothing can be done with a `&Context`), and not
/// [`Clone`].
///
/// Dropping a `Context` does not touch its stack: the suspended execution is simply never
/// continued, and destructors of the values on that stack never run. (Under loom, dropping it
/// ends the context's loom thread by unwinding it; see the crate docs.) To clean up a suspended
/// green thread, resume it with [`Context::resume_ontop`] and a function that panics, so that
/// it unwinds to its own `catch_unwind` (see the crate docs). `Option<Context>` is one word.
#[repr(transparent)]
pub struct Context {
    raw: Raw,
    /// `!Sync`; `Send` comes from the `unsafe impl` below.
    _not_sync: PhantomData<core::cell::Cell<()>>,
}

// SAFETY: `raw` is the saved stack pointer of a suspended execution (or, under loom, a handle
// to a blocked loom thread); moving it between threads accesses nothing. Every use of it is
// `Context::resume*`, which is `unsafe` and whose obligations cover running the suspended code
// on a different OS thread than the one it was suspended on.
unsafe impl Send for Context {}

/// What a switch delivers to the context it resumes: the context that was suspended to make
/// the switch, and one word of data.
///
/// `#[repr(C)]`: an [`Entry`] function receives it in the two argument registers of the
/// platform's C ABI.
#[repr(C)]
#[derive(Debug)]
pub struct Transfer {
    /// The context that switched to us, suspended at the point where it called
    /// [`Context::resume`] or [`Context::resume_ontop`] (or, after `resume_ontop`, whatever
    /// context the `ontop` function returned).
    pub context: Context,
    /// The word passed to `resume`/`resume_ontop` (or returned by the `ontop` function).
    pub data: usize,
}

impl Context {
    /// Prepares a fresh context that will run `entry` on the stack between `stack_limit`
    /// (lowest usable address) and `stack_top` (one past the highest usable address; stacks
    /// grow down).
    ///
    /// Nothing runs until the returned context is first resumed; then `entry` is called on the
    /// new stack with the [`Transfer`] of that switch (after the `ontop` function, for
    /// [`resume_ontop`](Context::resume_ontop)). `new` writes a few words below `stack_top`
    /// (rounded down to 16 bytes: 24 bytes on x86_64, 48 on AArch64) and nothing else (under loom: nothing; it spawns the
    /// context's loom thread instead).
    ///
    /// With the `fpu-env` feature, the new context starts with the MXCSR and x87 control word
    /// of the thread calling `new`.
    ///
    /// # Safety
    ///
    /// - `stack_limit..stack_top` must be memory that is readable and writable, and used by
    ///   nothing but this context for as long as the context (or any context it suspends into)
    ///   may be resumed. A guard page below `stack_limit` is strongly recommended: an
    ///   overflow is then a fault, not silent corruption of whatever lies below.
    /// - The stack must be big enough for everything `entry` will run; nothing checks this
    ///   at run time except a guard page.
    ///
    /// # Panics
    ///
    /// If `stack_top` is null, if `stack_limit >= stack_top` (the arguments are swapped), or if
    /// the aligned stack is smaller than [`MIN_STACK_SIZE`]. Under loom the stack is neither
    /// used nor checked (a loom model may pass null pointers).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_context::{Context, Transfer};
    ///
    /// extern "C-unwind" fn double(t: Transfer) -> ! {
    ///     let (back, n) = (t.context, t.data);
    ///     // SAFETY: `back` is the context that resumed us, suspended inside `resume`.
    ///     unsafe { back.resume(n * 2) };
    ///     unreachable!("never resumed again");
    /// }
    ///
    /// // A heap buffer as the stack (real code uses guard-paged stacks).
    /// let mut stack = vec![0u8; 64 * 1024];
    /// let range = stack.as_mut_ptr_range();
    /// // SAFETY: the buffer is ours, 64 KiB, and outlives the context.
    /// let ctx = unsafe { Context::new(range.end, range.start, double) };
    /// // SAFETY: `ctx` is fresh; `double` only resumes us back.
    /// let t = unsafe { ctx.resume(21) };
    /// assert_eq!(t.data, 42);
    /// drop(t.context); // `double` is suspended forever; its stack holds nothing to drop.
    /// ```
    #[must_use = "a context does nothing until it is resumed"]
    #[inline]
    pub unsafe fn new(stack_top: *mut u8, stack_limit: *mut u8, entry: Entry) -> Context {
        #[cfg(not(loom))]
        check_stack(stack_top, stack_limit);
        // SAFETY: the initial frame below the aligned top (at most 48 bytes) lies inside
        // `stack_limit..stack_top` (size >= MIN_STACK_SIZE > 48, checked above), which the caller promised is ours.
        // (The loom backend does not touch the stack.)
        let raw = unsafe { backend::init(stack_top, stack_limit, entry) };
        Context { raw, _not_sync: PhantomData }
    }

    /// Suspends the current execution and continues `self`, passing `data`. Returns when some
    /// context resumes the suspended execution: the [`Transfer`] holds that context (suspended
    /// in its own `resume` call) and the word it passed.
    ///
    /// The "current execution" can be anything running on a stack: a thread's own stack (its
    /// `main`, a scheduler loop) or a context made by [`Context::new`]. The switch saves only
    /// what the ABI requires and the compiler cannot save itself (`rbx`, `rbp` on x86_64,
    /// `x19`, `x29` on AArch64; the stack pointer, a resume address and, with `fpu-env`, the
    /// floating-point control registers); the compiler spills any other register
    /// that is live across the call, because the call is inlined.
    ///
    /// # Safety
    ///
    /// - `self` must have been made by [`Context::new`] or received in a [`Transfer`], and
    ///   its stack must still be valid memory reserved for it. (Resuming it consumes it, so
    ///   one suspension cannot be resumed twice; do not build two contexts on one stack.)
    /// - If the resumed code was suspended on another OS thread, it must tolerate running on
    ///   this one: no reference to a thread-local may be held across its suspension point
    ///   (and beware that LLVM may cache the address of a thread-local across the switch in
    ///   the function that calls `resume`, llvm/llvm-project#98479: access thread-locals from
    ///   `#[inline(never)]` functions around a switch).
    /// - The resumed code must not unwind into a frame that was only valid on another stack:
    ///   a panic in a context unwinds that context's stack only, and must be caught there
    ///   (see [`Entry`]).
    ///
    /// # Examples
    ///
    /// A generator: each resume of the context yields the next square.
    ///
    /// ```
    /// use purloin_context::{Context, Transfer};
    ///
    /// extern "C-unwind" fn squares(mut t: Transfer) -> ! {
    ///     let mut i = 0usize;
    ///     loop {
    ///         // SAFETY: `t.context` is the context that resumed us.
    ///         t = unsafe { t.context.resume(i * i) };
    ///         i += 1;
    ///     }
    /// }
    ///
    /// let mut stack = vec![0u8; 64 * 1024];
    /// let r = stack.as_mut_ptr_range();
    /// // SAFETY: the buffer outlives the context; `squares` only resumes us.
    /// let mut ctx = unsafe { Context::new(r.end, r.start, squares) };
    /// let mut got = Vec::new();
    /// for _ in 0..5 {
    ///     // SAFETY: `ctx` is suspended inside `squares` (or fresh).
    ///     let t = unsafe { ctx.resume(0) };
    ///     got.push(t.data);
    ///     ctx = t.context;
    /// }
    /// assert_eq!(got, [0, 1, 4, 9, 16]);
    /// ```
    #[inline(always)]
    pub unsafe fn resume(self, data: usize) -> Transfer {
        // SAFETY: `self.raw` is a suspended context (the caller's first obligation); 0 means
        // "no ontop function".
        let (from, data, ontop) = unsafe { backend::switch(self.raw, data, 0) };
        let transfer = Transfer { context: Context { raw: from, _not_sync: PhantomData }, data };
        // SAFETY: `ontop` came through the switch contract: 0 or a `fn(Transfer) -> Transfer`.
        unsafe { run_ontop(transfer, ontop) }
    }

    /// Like [`resume`](Context::resume), but first runs `f` on the target's stack: `f`
    /// receives the [`Transfer`] the target would have received (our suspended context and
    /// `data`), and what it returns is what the target's pending `resume` call returns (or
    /// what its entry function receives, for a fresh context). This is boost.context's
    /// `ontop_fcontext`.
    ///
    /// `f` runs after the current execution is completely saved, so it may hand our context
    /// to another thread (publish a parked green thread, release a lock that another worker
    /// waits on before resuming us) without any race with the switch itself. `f` runs as an
    /// ordinary Rust call made by the target's own `resume`, so a panic in `f` unwinds the
    /// target's stack from its `resume` call upwards: resume a green thread with an `f` that
    /// panics to unwind it (forced unwind), and the panic is caught by the `catch_unwind` in
    /// its entry function.
    ///
    /// # Safety
    ///
    /// - All the obligations of [`resume`](Context::resume).
    /// - If `f` can panic, the target must be a context that was suspended in `resume` or
    ///   `resume_ontop` (a panic in `f` on a fresh context has no frame to unwind to: the
    ///   process aborts), and the target's code must be prepared for that call to unwind.
    ///
    /// # Examples
    ///
    /// Park: the child suspends itself and has its context stored into a slot by a function
    /// that runs on the parent's stack, after the child's registers are saved (what a
    /// scheduler's "publish" step does).
    ///
    /// ```
    /// use purloin_context::{Context, Transfer};
    /// use std::cell::Cell;
    ///
    /// type Slot = Cell<Option<Context>>;
    ///
    /// fn publish(t: Transfer) -> Transfer {
    ///     // Runs on the parent's stack. `t.data` is the address of the parent's slot.
    ///     // SAFETY: the parent keeps the slot alive across its resume call.
    ///     let slot = unsafe { &*(t.data as *const Slot) };
    ///     slot.set(Some(t.context));
    ///     // The context has been moved into the slot: give the parent a placeholder.
    ///     Transfer { context: Context::placeholder(), data: 7 }
    /// }
    ///
    /// extern "C-unwind" fn child(t: Transfer) -> ! {
    ///     let (parent, slot_addr) = (t.context, t.data);
    ///     // SAFETY: `parent` is suspended in `resume`; `publish` cannot panic.
    ///     let t = unsafe { parent.resume_ontop(slot_addr, publish) };
    ///     // Resumed from the slot: report back and park forever.
    ///     // SAFETY: `t.context` is the parent, suspended in `resume`.
    ///     unsafe { t.context.resume(t.data + 1) };
    ///     unreachable!();
    /// }
    ///
    /// let mut stack = vec![0u8; 64 * 1024];
    /// let r = stack.as_mut_ptr_range();
    /// let slot: Slot = Cell::new(None);
    /// // SAFETY: the buffer outlives the context.
    /// let ctx = unsafe { Context::new(r.end, r.start, child) };
    /// // SAFETY: `ctx` is fresh.
    /// let t = unsafe { ctx.resume(&slot as *const Slot as usize) };
    /// assert_eq!(t.data, 7); // returned by `publish`
    /// let parked = slot.take().expect("published");
    /// // SAFETY: `parked` is the child, suspended in `resume_ontop`.
    /// let t = unsafe { parked.resume(41) };
    /// assert_eq!(t.data, 42);
    /// ```
    #[inline(always)]
    pub unsafe fn resume_ontop(self, data: usize, f: fn(Transfer) -> Transfer) -> Transfer {
        // SAFETY: as in `resume`; `f` is a `fn(Transfer) -> Transfer`, as the switch contract
        // requires of a non-zero `ontop`.
        let (from, data, ontop) = unsafe { backend::switch(self.raw, data, f as usize) };
        let transfer = Transfer { context: Context { raw: from, _not_sync: PhantomData }, data };
        // SAFETY: as in `resume`.
        unsafe { run_ontop(transfer, ontop) }
    }

    /// Runs `f(data)` on the stack of the suspended context `self` and returns, leaving
    /// `self` suspended exactly as it was: nothing of the suspended code runs, and resuming
    /// `self` later continues it as if `visit` had never happened.
    ///
    /// This is for looking at a suspended execution from the inside — typically walking its
    /// stack with a DWARF unwinder (`_Unwind_Backtrace`, the `backtrace` crate's
    /// `trace_unsynchronized`): `f` is called by a frame that sits right below the suspended
    /// code's `resume` call, so a walk from `f` goes up through the suspended frames and ends
    /// at the entry trampoline. brpc's bthread tracer gets the same view by switching onto
    /// the bthread's stack.
    ///
    /// How: `visit` saves the few words the switch stored at the context's stack pointer,
    /// switches to it with [`resume_ontop`](Context::resume_ontop) and a function that calls
    /// `f` and switches straight back, abandons the context left suspended inside that
    /// function, and writes the saved words back. The suspended code's frames (everything
    /// above those words) are never written: the visit's own frames lie below them, in stack
    /// memory the suspended code does not use. A repeated visit therefore does not grow the
    /// stack.
    ///
    /// `f` must not unwind: a panic in it aborts the process (it would otherwise unwind
    /// through the suspended code's frames).
    ///
    /// Not available under loom (a loom context is a thread, not a stack).
    ///
    /// # Safety
    ///
    /// - `self` must be suspended (made by [`Context::new`] or received in a [`Transfer`]), its
    ///   stack valid, and no other thread may resume it or touch its stack during the call
    ///   (the caller owns it, as it would to resume it).
    /// - The stack must have room below the suspended stack pointer for `f` and what it
    ///   calls (an unwinder needs a few KiB): an overflow there hits the guard page, if any.
    /// - The obligations of [`resume`](Context::resume) about thread-locals apply to `f`,
    ///   which runs on the calling OS thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_context::{Context, Transfer};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// static SEEN: AtomicUsize = AtomicUsize::new(0);
    ///
    /// extern "C-unwind" fn child(t: Transfer) -> ! {
    ///     let marker = 7usize; // a local on the child's stack
    ///     // SAFETY: `t.context` is the parent, suspended in `resume`.
    ///     let t = unsafe { t.context.resume(&marker as *const usize as usize) };
    ///     // SAFETY: as above.
    ///     unsafe { t.context.resume(t.data + marker) };
    ///     unreachable!();
    /// }
    ///
    /// fn look(sp_hint: usize) {
    ///     // Runs on the child's stack: a local here lies below the child's frames.
    ///     let here = 0u8;
    ///     if (&here as *const u8 as usize) < sp_hint {
    ///         SEEN.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// let mut stack = vec![0u8; 64 * 1024];
    /// let r = stack.as_mut_ptr_range();
    /// // SAFETY: the buffer outlives the context.
    /// let ctx = unsafe { Context::new(r.end, r.start, child) };
    /// // SAFETY: `ctx` is fresh.
    /// let t = unsafe { ctx.resume(0) };
    /// let mut child = t.context;
    /// for _ in 0..3 {
    ///     // SAFETY: `child` is suspended in `resume`, owned here; 64 KiB is plenty for `look`.
    ///     unsafe { child.visit(t.data, look) };
    /// }
    /// assert_eq!(SEEN.load(Ordering::Relaxed), 3);
    /// // The child continues as if never visited.
    /// // SAFETY: `child` is suspended in `resume`.
    /// assert_eq!(unsafe { child.resume(35) }.data, 42);
    /// ```
    #[cfg(not(loom))]
    pub unsafe fn visit(&mut self, data: usize, f: fn(usize)) {
        const N: usize = backend::SAVED_FRAME_SIZE;
        let saved_at = self.raw.as_ptr();
        let mut saved = [0u8; N];
        // SAFETY: `saved_at .. saved_at + N` holds the words the switch saved (the caller
        // vouches `self` is suspended and its stack valid and ours).
        unsafe { core::ptr::copy_nonoverlapping(saved_at, saved.as_mut_ptr(), N) };
        let call = Visit { f, data };
        let target = Context { raw: self.raw, _not_sync: PhantomData };
        // SAFETY: `target` is the suspended context (the caller's obligations); `visit_ontop`
        // cannot unwind (it aborts on a panic of `f`) and switches straight back to us.
        let t = unsafe { target.resume_ontop(&call as *const Visit as usize, visit_ontop) };
        // The context suspended inside `visit_ontop` is abandoned: dropping it does nothing.
        let _ = t.context;
        // SAFETY: as above; the visit's frames lay below `saved_at + N` and are gone with the
        // abandoned context, so restoring the saved words leaves the stack as we found it.
        unsafe { core::ptr::copy_nonoverlapping(saved.as_ptr(), saved_at, N) };
    }

    /// Calls `f(data)` on the calling thread with its stack pointer moved below the saved
    /// stack pointer of the suspended context `self`, and returns: nothing of the suspended
    /// code runs, and `self` stays suspended exactly as it was. Go's `systemstack`: a green
    /// thread runs work whose depth it does not control on its scheduler's big stack, at the
    /// price of a call (a few instructions), not of two switches.
    ///
    /// Unlike [`visit`](Context::visit), `f` is called from the *caller's* frame: an unwinder
    /// or debugger walks from `f` into the caller's frames, not into the suspended ones.
    /// `f` is `extern "C"`: a panic in it aborts the process (catch it inside `f`).
    ///
    /// Not available under loom (a loom context is a thread, not a stack).
    ///
    /// # Safety
    ///
    /// - `self` must be suspended, its stack valid, and no other thread may resume it or touch
    ///   its stack during the call (the caller owns it, as it would to resume it).
    /// - The stack must have room below the suspended stack pointer for `f` and what it calls;
    ///   an overflow there hits the guard page, if any.
    /// - `f` must not call `call_below` on `self` again (the inner call would use the same
    ///   memory as the outer one).
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_context::{Context, Transfer};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// static WHERE: AtomicUsize = AtomicUsize::new(0);
    ///
    /// extern "C-unwind" fn child(t: Transfer) -> ! {
    ///     // SAFETY: `t.context` is the parent, suspended in `resume`.
    ///     unsafe { t.context.resume(0) };
    ///     unreachable!("never resumed again");
    /// }
    ///
    /// extern "C" fn note_where(_: usize) {
    ///     let here = 0u8;
    ///     WHERE.store(&here as *const u8 as usize, Ordering::Relaxed);
    /// }
    ///
    /// let mut stack = vec![0u8; 64 * 1024];
    /// let r = stack.as_mut_ptr_range();
    /// // SAFETY: the buffer outlives the context.
    /// let ctx = unsafe { Context::new(r.end, r.start, child) };
    /// // SAFETY: `ctx` is fresh.
    /// let child = unsafe { ctx.resume(0) }.context;
    /// // SAFETY: `child` is suspended and ours; 64 KiB is plenty for `note_where`.
    /// unsafe { child.call_below(0, note_where) };
    /// let at = WHERE.load(Ordering::Relaxed);
    /// assert!(at > r.start as usize && at < child.stack_pointer());
    /// ```
    #[cfg(not(loom))]
    #[inline]
    pub unsafe fn call_below(&self, data: usize, f: extern "C" fn(usize)) {
        // Below the words the switch saved at the stack pointer, with a red zone's worth to
        // spare, 16-byte aligned for the call.
        let sp = (self.raw.as_ptr() as usize - 128) & !15;
        // SAFETY: the memory below `sp` is the suspended context's free stack, which the
        // caller owns for the call (its obligations); `f` cannot unwind (`extern "C"`).
        unsafe { backend::call_on_stack(data, f, sp) }
    }

    /// The saved stack pointer of this suspended context: everything the suspended code uses
    /// lies at or above it, so `stack_pointer() - stack_limit` is the room left below it (what
    /// [`visit`](Context::visit) may use). Under loom: 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use purloin_context::{Context, Transfer};
    ///
    /// extern "C-unwind" fn entry(_: Transfer) -> ! {
    ///     unreachable!("never resumed")
    /// }
    /// let mut stack = vec![0u8; 64 * 1024];
    /// let r = stack.as_mut_ptr_range();
    /// // SAFETY: the buffer outlives the context.
    /// let ctx = unsafe { Context::new(r.end, r.start, entry) };
    /// let sp = ctx.stack_pointer();
    /// assert!(sp > r.start as usize && sp < r.end as usize);
    /// ```
    pub fn stack_pointer(&self) -> usize {
        #[cfg(not(loom))]
        {
            self.raw.as_ptr() as usize
        }
        #[cfg(loom)]
        {
            0
        }
    }

    /// A context that stands for "no context", for the `context` field of a [`Transfer`]
    /// when there is none to give: typically returned by a `resume_ontop` function that moved
    /// the context it received somewhere else (see the example of
    /// [`resume_ontop`](Context::resume_ontop)).
    ///
    /// A placeholder must never be resumed (that would jump to address 1 with the assembly
    /// backend; the loom backend panics). Dropping it does nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// let none = purloin_context::Context::placeholder();
    /// drop(none);
    /// ```
    #[must_use]
    pub const fn placeholder() -> Context {
        #[cfg(not(loom))]
        let raw = core::ptr::NonNull::dangling();
        #[cfg(loom)]
        let raw = crate::loom::Handle::placeholder();
        Context { raw, _not_sync: PhantomData }
    }

    /// Wraps a raw backend value received by an entry trampoline.
    #[cfg(loom)]
    pub(crate) fn from_raw(raw: Raw) -> Context {
        Context { raw, _not_sync: PhantomData }
    }
}

/// Whether a panic payload caught with `catch_unwind` is the loom backend's *abandon* unwind:
/// the unwinding that ends the loom thread of a context whose [`Context`] was dropped without
/// being resumed (see the crate docs). Code that catches panics on a context's stack (an
/// entry function's `catch_unwind`) must re-raise such a payload with
/// [`std::panic::resume_unwind`] instead of treating it as a panic of its own (and must not
/// abort on it). Always `false` with the assembly backend, where dropping a context unwinds
/// nothing.
///
/// # Examples
///
/// ```
/// use std::panic;
///
/// let caught = panic::catch_unwind(|| panic!("a real panic")).unwrap_err();
/// if purloin_context::is_abandon_payload(&*caught) {
///     panic::resume_unwind(caught); // loom: let the abandoned context's thread end
/// }
/// ```
pub fn is_abandon_payload(payload: &(dyn core::any::Any + Send)) -> bool {
    #[cfg(loom)]
    {
        crate::loom::is_abandon_payload(payload)
    }
    #[cfg(not(loom))]
    {
        let _ = payload;
        false
    }
}

/// The bounds checks of [`Context::new`] (see its `# Panics`).
#[cfg(not(loom))]
#[inline]
fn check_stack(stack_top: *mut u8, stack_limit: *mut u8) {
    assert!(
        !stack_top.is_null(),
        "Context::new: stack_top is null; pass the end (highest address) of a stack"
    );
    let top = stack_top as usize & !15;
    let limit = stack_limit as usize;
    assert!(
        limit < stack_top as usize,
        "Context::new: stack_limit ({stack_limit:p}) is not below stack_top ({stack_top:p}); \
         stacks grow down: pass the highest address as stack_top and the lowest as stack_limit"
    );
    let size = top.saturating_sub(limit);
    assert!(
        size >= MIN_STACK_SIZE,
        "Context::new: the stack is {size} bytes, smaller than MIN_STACK_SIZE \
         ({MIN_STACK_SIZE}); allocate a bigger stack"
    );
}

/// What [`Context::visit`] runs on the visited stack.
#[cfg(not(loom))]
struct Visit {
    f: fn(usize),
    data: usize,
}

/// The `ontop` function of [`Context::visit`], running on the visited stack.
#[cfg(not(loom))]
fn visit_ontop(t: Transfer) -> Transfer {
    visit_and_return(t.context, t.data)
}

/// Calls the visitor and switches back to the visiting context; never returns (its context is
/// abandoned). `extern "C"`: a panic of the visitor aborts instead of unwinding into the
/// visited frames.
#[cfg(not(loom))]
extern "C" fn visit_and_return(back: Context, call: usize) -> ! {
    // SAFETY: `call` is the address of the `Visit` in `Context::visit`'s frame, which waits
    // in `resume_ontop` until we switch back below.
    let call = unsafe { &*(call as *const Visit) };
    (call.f)(call.data);
    // SAFETY: `back` is the visiting context, suspended in `resume_ontop`.
    unsafe { back.resume(0) };
    unreachable!("an abandoned visit was resumed")
}

/// Calls the `ontop` function delivered by a switch, if any.
///
/// # Safety
///
/// - `ontop` is 0 or the address of a `fn(Transfer) -> Transfer`.
#[inline(always)]
pub(crate) unsafe fn run_ontop(transfer: Transfer, ontop: usize) -> Transfer {
    if ontop == 0 {
        transfer
    } else {
        // SAFETY: non-zero `ontop` is a `fn(Transfer) -> Transfer` (the caller's obligation);
        // fn pointers and `usize` have the same size.
        let f = unsafe { core::mem::transmute::<usize, fn(Transfer) -> Transfer>(ontop) };
        f(transfer)
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Context").field(&self.raw).finish()
    }
}
