//! Switching on real (mmap'd, guard-paged) stacks: ping-pong, recursion, migration between
//! OS threads, register preservation, symmetric chains, many contexts.
#![cfg(not(loom))]

mod common;

use std::cell::Cell;
use std::hint::black_box;

use common::{TestStack, Watchdog};
use purloin_context::{Context, MIN_STACK_SIZE, Transfer};

static_assertions::assert_impl_all!(Context: Send, std::fmt::Debug);
static_assertions::assert_not_impl_any!(Context: Sync, Clone, Copy);
static_assertions::assert_impl_all!(Transfer: Send);
static_assertions::assert_not_impl_any!(Transfer: Sync, Clone);
static_assertions::assert_eq_size!(Option<Context>, usize);
static_assertions::assert_impl_all!(purloin_context::valgrind::StackRegistration: Send, Sync);

const ROUND_TRIPS: usize = 1_000_000;

/// Replies to every `n` with `3 * n + 1`.
extern "C-unwind" fn echo(mut t: Transfer) -> ! {
    loop {
        let reply = t.data.wrapping_mul(3).wrapping_add(1);
        // SAFETY: `t.context` is the context that resumed us, suspended in `resume`.
        t = unsafe { t.context.resume(reply) };
    }
}

#[test]
fn ping_pong_a_million_round_trips_with_data_both_ways() {
    let _dog = Watchdog::new("ping-pong", 120);
    let stack = TestStack::new(64 * 1024);
    // SAFETY: the stack outlives the context; `echo` only resumes whoever resumed it.
    let mut ctx = unsafe { Context::new(stack.top(), stack.limit(), echo) };
    let mut checksum = 0usize;
    for i in 0..ROUND_TRIPS {
        // SAFETY: `ctx` is `echo`, suspended in `resume` (or fresh).
        let t = unsafe { ctx.resume(i) };
        assert_eq!(t.data, i.wrapping_mul(3).wrapping_add(1), "round trip {i}");
        checksum = checksum.wrapping_add(t.data);
        ctx = t.context;
    }
    let expected = (0..ROUND_TRIPS).fold(0usize, |a, i| a.wrapping_add(i * 3 + 1));
    assert_eq!(checksum, expected);
}

#[inline(never)]
fn recurse(depth: usize, parent: &Cell<Option<Context>>) -> usize {
    // A frame with some weight, so the recursion really uses stack.
    let mut frame = [0u8; 128];
    frame[depth % 128] = depth as u8;
    let below = if depth == 0 {
        // Suspend at the bottom of the recursion, then continue.
        let ctx = parent.take().expect("parent context");
        // SAFETY: `ctx` is the test thread, suspended in `resume`.
        let t = unsafe { ctx.resume(usize::MAX) };
        parent.set(Some(t.context));
        t.data
    } else {
        recurse(depth - 1, parent)
    };
    black_box(&frame);
    below + usize::from(frame[depth % 128]) + 1
}

extern "C-unwind" fn deep(t: Transfer) -> ! {
    let parent = Cell::new(Some(t.context));
    let depth = t.data;
    let result = recurse(depth, &parent);
    let ctx = parent.take().expect("parent context");
    // SAFETY: `ctx` is the test thread, suspended in `resume`; we are never resumed again.
    unsafe { ctx.resume(result) };
    unreachable!("the finished context was resumed");
}

#[test]
fn deep_recursion_inside_a_context_with_a_suspension_at_the_bottom() {
    let _dog = Watchdog::new("deep recursion", 60);
    const DEPTH: usize = 10_000;
    let stack = TestStack::new(8 << 20);
    // SAFETY: an 8 MiB stack holds 10k frames of ~200 bytes; it outlives the context.
    let ctx = unsafe { Context::new(stack.top(), stack.limit(), deep) };
    // SAFETY: fresh context.
    let t = unsafe { ctx.resume(DEPTH) };
    assert_eq!(t.data, usize::MAX, "suspended at the bottom of the recursion");
    // SAFETY: `deep` is suspended at depth 0.
    let t = unsafe { t.context.resume(5) };
    let expected = 5 + (0..=DEPTH).map(|d| (d as u8) as usize + 1).sum::<usize>();
    assert_eq!(t.data, expected);
}

/// Counts up, one step per resume; records which OS thread ran each step.
extern "C-unwind" fn counter(mut t: Transfer) -> ! {
    let mut n = t.data;
    loop {
        let tid = std::thread::current().id();
        let tid_word = format!("{tid:?}").len(); // touch TLS freshly after every switch
        n += 1;
        black_box(tid_word);
        // SAFETY: `t.context` is the resumer, suspended in `resume`.
        t = unsafe { t.context.resume(n) };
    }
}

#[test]
fn a_context_suspended_on_one_thread_resumes_on_another() {
    let _dog = Watchdog::new("migration", 60);
    let stack = TestStack::new(64 * 1024);
    // SAFETY: the stack outlives the context: it is dropped after the last resume, and the
    // suspended counter holds nothing that needs dropping.
    let mut ctx = unsafe { Context::new(stack.top(), stack.limit(), counter) };
    let mut threads_seen = Vec::new();
    // Each resume happens on a new OS thread; the counter continues where it stopped.
    for (i, start) in [100usize, 0, 0, 0].into_iter().enumerate() {
        let (next, n, tid) = std::thread::spawn(move || {
            // SAFETY: the counter is fresh or suspended in `resume`; it holds no thread-local
            // reference across its switches.
            let t = unsafe { ctx.resume(start) };
            // `t.context` is the counter again, suspended on this thread.
            (t.context, t.data, std::thread::current().id())
        })
        .join()
        .unwrap();
        assert_eq!(n, 101 + i);
        threads_seen.push(tid);
        ctx = next;
    }
    threads_seen.dedup();
    assert_eq!(threads_seen.len(), 4, "four distinct OS threads ran the context");
    // The counter stays suspended for good (abandoned with `ctx`); now its stack goes.
    drop(stack);
}

/// Scribbles over every vector register (xmm0-15 on x86_64, v0-v31 on AArch64, whose low
/// halves d8-d15 are callee-saved) and computes with floats of its own, then switches back.
extern "C-unwind" fn float_scrambler(mut t: Transfer) -> ! {
    let mut x = 0.5f64;
    loop {
        scramble_vector_registers();
        x = black_box(x) * 3.0 + 1.0;
        // SAFETY: `t.context` is the resumer, suspended in `resume`.
        t = unsafe { t.context.resume(x.to_bits() as usize) };
    }
}

#[cfg(target_arch = "x86_64")]
fn scramble_vector_registers() {
    // SAFETY: only writes caller-saved vector registers that are declared clobbered.
    unsafe {
        std::arch::asm!(
            "pcmpeqd xmm0, xmm0", "pcmpeqd xmm1, xmm1", "pcmpeqd xmm2, xmm2",
            "pcmpeqd xmm3, xmm3", "pcmpeqd xmm4, xmm4", "pcmpeqd xmm5, xmm5",
            "pcmpeqd xmm6, xmm6", "pcmpeqd xmm7, xmm7", "pcmpeqd xmm8, xmm8",
            "pcmpeqd xmm9, xmm9", "pcmpeqd xmm10, xmm10", "pcmpeqd xmm11, xmm11",
            "pcmpeqd xmm12, xmm12", "pcmpeqd xmm13, xmm13", "pcmpeqd xmm14, xmm14",
            "pcmpeqd xmm15, xmm15",
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
            out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
            options(nomem, nostack),
        );
    }
}

#[cfg(target_arch = "aarch64")]
fn scramble_vector_registers() {
    // SAFETY: only writes vector registers that are declared clobbered (the compiler saves
    // the callee-saved d8-d15 of this frame around the block).
    unsafe {
        std::arch::asm!(
            "movi v0.2d, #-1", "movi v1.2d, #-1", "movi v2.2d, #-1", "movi v3.2d, #-1",
            "movi v4.2d, #-1", "movi v5.2d, #-1", "movi v6.2d, #-1", "movi v7.2d, #-1",
            "movi v8.2d, #-1", "movi v9.2d, #-1", "movi v10.2d, #-1", "movi v11.2d, #-1",
            "movi v12.2d, #-1", "movi v13.2d, #-1", "movi v14.2d, #-1", "movi v15.2d, #-1",
            "movi v16.2d, #-1", "movi v17.2d, #-1", "movi v18.2d, #-1", "movi v19.2d, #-1",
            "movi v20.2d, #-1", "movi v21.2d, #-1", "movi v22.2d, #-1", "movi v23.2d, #-1",
            "movi v24.2d, #-1", "movi v25.2d, #-1", "movi v26.2d, #-1", "movi v27.2d, #-1",
            "movi v28.2d, #-1", "movi v29.2d, #-1", "movi v30.2d, #-1", "movi v31.2d, #-1",
            out("v0") _, out("v1") _, out("v2") _, out("v3") _,
            out("v4") _, out("v5") _, out("v6") _, out("v7") _,
            out("v8") _, out("v9") _, out("v10") _, out("v11") _,
            out("v12") _, out("v13") _, out("v14") _, out("v15") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _,
            out("v24") _, out("v25") _, out("v26") _, out("v27") _,
            out("v28") _, out("v29") _, out("v30") _, out("v31") _,
            options(nomem, nostack),
        );
    }
}

#[inline(never)]
fn float_loop(ctx: &mut Option<Context>) -> f64 {
    // Many live doubles across the switch: the compiler keeps them in xmm registers or spills
    // them; either way they must come back intact.
    let mut acc = [1.25f64, -2.5, 3.75, 1e-300, 1e300, 0.1, -0.0, 7.0];
    let mut inner = 0.5f64;
    for _ in 0..1000 {
        let a = black_box(acc);
        // SAFETY: the scrambler is fresh or suspended in `resume`.
        let t = unsafe { ctx.take().unwrap().resume(0) };
        *ctx = Some(t.context);
        inner = inner * 3.0 + 1.0;
        assert_eq!(f64::from_bits(t.data as u64), inner);
        for (v, old) in acc.iter_mut().zip(a) {
            assert_eq!(v.to_bits(), old.to_bits());
            *v = old * 1.0000001;
        }
    }
    acc.iter().sum()
}

#[test]
fn values_in_vector_registers_survive_switches() {
    let _dog = Watchdog::new("xmm", 60);
    let stack = TestStack::new(64 * 1024);
    // SAFETY: the stack outlives the context.
    let mut ctx = Some(unsafe { Context::new(stack.top(), stack.limit(), float_scrambler) });
    let sum = float_loop(&mut ctx);
    assert!(sum.is_finite() || sum.is_infinite());
    let expected: f64 = [1.25f64, -2.5, 3.75, 1e-300, 1e300, 0.1, -0.0, 7.0]
        .iter()
        .map(|v| (0..1000).fold(*v, |a, _| a * 1.0000001))
        .sum();
    assert_eq!(sum.to_bits(), expected.to_bits());
}

/// Records the order of events; `data` carries a pointer to the log.
type Log = std::sync::Mutex<Vec<String>>;

fn log(t: &Transfer, event: &str) {
    // SAFETY: every `data` in these tests is the address of a `Log` that outlives them.
    let log = unsafe { &*(t.data as *const Log) };
    log.lock().unwrap().push(event.to_string());
}

fn stack_pointer() -> usize {
    let marker = 0u8;
    black_box(&marker) as *const u8 as usize
}

thread_local! {
    static CHILD_STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

fn on_child_stack() -> bool {
    let (lo, hi) = CHILD_STACK.with(Cell::get);
    (lo..hi).contains(&stack_pointer())
}

fn ontop_to_child(t: Transfer) -> Transfer {
    log(&t, &format!("ontop to child (on child stack: {})", on_child_stack()));
    t
}

fn ontop_to_main(t: Transfer) -> Transfer {
    log(&t, &format!("ontop to main (on child stack: {})", on_child_stack()));
    t
}

extern "C-unwind" fn ordered_child(t: Transfer) -> ! {
    log(&t, "child starts");
    let data = t.data;
    // SAFETY: `t.context` is main, suspended in `resume_ontop`.
    let t = unsafe { t.context.resume_ontop(data, ontop_to_main) };
    log(&t, "child continues");
    // SAFETY: as above.
    unsafe { t.context.resume(data) };
    unreachable!();
}

#[test]
fn resume_ontop_runs_on_the_target_stack_after_the_switch_and_before_the_target() {
    let _dog = Watchdog::new("ontop ordering", 60);
    let stack = TestStack::new(64 * 1024);
    CHILD_STACK.with(|c| c.set((stack.limit() as usize, stack.top() as usize)));
    let events = Log::default();
    let data = &events as *const Log as usize;
    // SAFETY: the stack and the log outlive the context.
    let ctx = unsafe { Context::new(stack.top(), stack.limit(), ordered_child) };
    events.lock().unwrap().push("main resumes fresh child".into());
    // SAFETY: fresh context; the ontop functions do not panic.
    let t = unsafe { ctx.resume_ontop(data, ontop_to_child) };
    events.lock().unwrap().push("main continues".into());
    // SAFETY: the child is suspended in `resume_ontop`.
    let t = unsafe { t.context.resume_ontop(data, ontop_to_child) };
    events.lock().unwrap().push("main continues again".into());
    let _ = t;
    assert_eq!(
        *events.lock().unwrap(),
        [
            "main resumes fresh child",
            "ontop to child (on child stack: true)",
            "child starts",
            "ontop to main (on child stack: false)",
            "main continues",
            "ontop to child (on child stack: true)",
            "child continues",
            "main continues again",
        ]
    );
}

fn replace_data(t: Transfer) -> Transfer {
    Transfer { context: t.context, data: t.data * 10 }
}

#[test]
fn the_ontop_result_is_what_the_target_receives() {
    let stack = TestStack::new(64 * 1024);
    // SAFETY: the stack outlives the context.
    let ctx = unsafe { Context::new(stack.top(), stack.limit(), echo) };
    // Fresh target: `echo` starts with 4 * 10 and replies 3 * 40 + 1.
    // SAFETY: fresh context; `replace_data` does not panic.
    let t = unsafe { ctx.resume_ontop(4, replace_data) };
    assert_eq!(t.data, 121);
    // Suspended target: its `resume` returns 5 * 10.
    // SAFETY: `echo` is suspended in `resume`.
    let t = unsafe { t.context.resume_ontop(5, replace_data) };
    assert_eq!(t.data, 151);
}

/// A ring of contexts that switch to each other directly. Slot `i` holds member `i` while it
/// is suspended; slot 0 is the test thread.
struct Ring {
    slots: Vec<Cell<Option<Context>>>,
    /// The member that runs next (set by its resumer).
    current: Cell<usize>,
    hops: Cell<usize>,
}

/// Stores the context that resumed it into its predecessor's slot, then resumes its successor.
extern "C-unwind" fn ring_member(mut t: Transfer) -> ! {
    loop {
        // SAFETY: `data` is the address of the test's `Ring`, alive for the whole test.
        let ring = unsafe { &*(t.data as *const Ring) };
        let n = ring.slots.len();
        let me = ring.current.get();
        assert!(ring.slots[me].take().is_none(), "member {me} runs, so its slot is empty");
        let prev = (me + n - 1) % n;
        assert!(ring.slots[prev].take().is_none(), "predecessor {prev} was running");
        ring.slots[prev].set(Some(t.context));
        ring.hops.set(ring.hops.get() + 1);
        let next = (me + 1) % n;
        ring.current.set(next);
        let ctx = ring.slots[next].take().expect("successor is suspended");
        // SAFETY: `ctx` is suspended (fresh or in `resume`).
        t = unsafe { ctx.resume(t.data) };
    }
}

#[test]
fn symmetric_chain_a_to_b_to_c_without_a_scheduler() {
    let _dog = Watchdog::new("ring", 60);
    let stacks: Vec<TestStack> = (0..3).map(|_| TestStack::new(64 * 1024)).collect();
    let mut slots = vec![Cell::new(None)];
    for s in &stacks {
        // SAFETY: the stacks outlive the ring.
        slots.push(Cell::new(Some(unsafe { Context::new(s.top(), s.limit(), ring_member) })));
    }
    let ring = Ring { slots, current: Cell::new(1), hops: Cell::new(0) };
    let data = &ring as *const Ring as usize;
    for lap in 0..10_000 {
        assert_eq!(ring.current.get(), 1);
        let next = ring.slots[1].take().unwrap();
        // SAFETY: member 1 is suspended.
        let t = unsafe { next.resume(data) };
        // Member 3 resumed us and made us current.
        assert_eq!(ring.current.get(), 0, "lap {lap}");
        ring.current.set(1);
        ring.slots[3].set(Some(t.context));
        assert_eq!(ring.hops.get(), 3 * (lap + 1));
    }
}

#[test]
fn many_contexts_resumed_round_robin_each_step_exactly_once() {
    let _dog = Watchdog::new("many", 60);
    const N: usize = 200;
    const STEPS: usize = 50;
    let stacks: Vec<TestStack> = (0..N).map(|_| TestStack::new(16 * 1024)).collect();
    // SAFETY: the stacks outlive the contexts.
    let mut ctxs: Vec<Option<Context>> =
        stacks.iter().map(|s| Some(unsafe { Context::new(s.top(), s.limit(), counter) })).collect();
    let mut seen = vec![0usize; N];
    for _ in 0..STEPS {
        for (i, slot) in ctxs.iter_mut().enumerate() {
            // SAFETY: each counter is fresh or suspended in `resume`.
            let t = unsafe { slot.take().unwrap().resume(i * 1000) };
            if seen[i] == 0 {
                assert_eq!(t.data, i * 1000 + 1);
            } else {
                assert_eq!(t.data, seen[i] + 1, "context {i} stepped exactly once");
            }
            seen[i] = t.data;
            *slot = Some(t.context);
        }
    }
    for (i, n) in seen.iter().enumerate() {
        assert_eq!(*n, i * 1000 + STEPS);
    }
}

#[test]
fn new_rounds_the_top_down_and_accepts_the_minimum_size() {
    let stack = TestStack::new(2 * MIN_STACK_SIZE);
    // An unaligned top, exactly MIN_STACK_SIZE above the limit after rounding.
    let top = stack.limit().wrapping_add(MIN_STACK_SIZE + 15);
    // SAFETY: inside our stack.
    let ctx = unsafe { Context::new(top, stack.limit(), echo) };
    // SAFETY: fresh.
    let t = unsafe { ctx.resume(1) };
    assert_eq!(t.data, 4);
}

#[test]
#[should_panic(expected = "is not below stack_top")]
fn new_rejects_swapped_bounds() {
    let stack = TestStack::new(64 * 1024);
    // SAFETY: panics before touching memory.
    let _ = unsafe { Context::new(stack.limit(), stack.top(), echo) };
}

#[test]
#[should_panic(expected = "smaller than MIN_STACK_SIZE")]
fn new_rejects_a_tiny_stack() {
    let stack = TestStack::new(64 * 1024);
    // SAFETY: panics before touching memory.
    let _ = unsafe { Context::new(stack.top(), stack.top().wrapping_sub(1000), echo) };
}

#[test]
#[should_panic(expected = "stack_top is null")]
fn new_rejects_a_null_top() {
    // SAFETY: panics before touching memory.
    let _ = unsafe { Context::new(std::ptr::null_mut(), std::ptr::null_mut(), echo) };
}

#[test]
fn placeholder_is_one_word_and_drops_quietly() {
    let p = Context::placeholder();
    assert!(format!("{p:?}").starts_with("Context("));
    let _: Context = p;
}
