//! `Context::call_below`: the function runs below the suspended context's frames, leaves them
//! as they were, and an unwinder walks from it back into the caller's frames (the CFI of the
//! assembly frame in between).
#![cfg(not(loom))]

use purloin_context::{Context, Transfer};

extern "C-unwind" fn child(t: Transfer) -> ! {
    // A value on the child's stack that the visit must not disturb.
    let kept = [t.data as u8; 64];
    // SAFETY: `t.context` is the parent, suspended in `resume`.
    let t = unsafe { t.context.resume(0) };
    let sum: usize = std::hint::black_box(&kept).iter().map(|&b| b as usize).sum();
    // SAFETY: as above.
    unsafe { t.context.resume(sum) };
    unreachable!("never resumed again");
}

struct Seen {
    at: usize,
    backtrace: String,
}

extern "C" fn look(seen: usize) {
    // SAFETY: `seen` is the address of the caller's `Seen`, untouched during the call.
    let seen = unsafe { &mut *(seen as *mut Seen) };
    let here = 0u8;
    seen.at = std::hint::black_box(&here) as *const u8 as usize;
    // A deep enough use of the stack to matter: the unwinder's own frames.
    seen.backtrace = std::backtrace::Backtrace::force_capture().to_string();
}

#[inline(never)]
fn the_caller_of_call_below(ctx: &Context) -> Seen {
    let mut seen = Seen { at: 0, backtrace: String::new() };
    // SAFETY: `ctx` is suspended and owned here; its 256 KiB stack has room for `look`.
    unsafe { ctx.call_below(&mut seen as *mut Seen as usize, look) };
    seen
}

#[test]
fn runs_below_the_frames_leaves_them_and_unwinds_into_the_caller() {
    let mut stack = vec![0u8; 256 * 1024];
    let r = stack.as_mut_ptr_range();
    // SAFETY: the buffer outlives the context.
    let ctx = unsafe { Context::new(r.end, r.start, child) };
    // SAFETY: `ctx` is fresh.
    let ctx = unsafe { ctx.resume(3) }.context;
    let sp = ctx.stack_pointer();
    for _ in 0..3 {
        let seen = the_caller_of_call_below(&ctx);
        assert!(seen.at > r.start as usize && seen.at < sp, "{:#x} not below {sp:#x}", seen.at);
        assert!(
            seen.backtrace.contains("the_caller_of_call_below"),
            "the backtrace stops at the assembly frame:\n{}",
            seen.backtrace
        );
    }
    assert_eq!(ctx.stack_pointer(), sp);
    // The child's frames are intact: its 64 bytes of 3 sum to 192.
    // SAFETY: `ctx` is suspended in `resume`.
    assert_eq!(unsafe { ctx.resume(0) }.data, 192);
}
