//! Switch costs, side by side with corosensei 0.3, context 3 (boost fcontext) and generator 0.8.
//!
//! - `round_trip/depth=N`: resume a context that suspends again after `N` nested non-inlined
//!   calls below its loop (`N = 0`: it suspends right in its loop), then continues. One
//!   iteration = one resume + one suspend.
//! - `symmetric_ring/3 contexts`: the bench thread and three contexts switch to each other in a
//!   ring without returning to a scheduler; one iteration = one lap = 4 switches.
//!   `purloin-via-scheduler` runs the same three tasks once each through the bench thread
//!   (resume, switch back: 6 switches per lap), the asymmetric alternative.
//!
//! - `resume_ontop/publish on every suspend`: a depth-0 round trip whose suspend is a
//!   `resume_ontop` running a small function on the resumer's stack (a scheduler's publish).
//! - `create_and_run/reused stack`: make a context on an already-allocated stack, run it to
//!   its end (one switch in, one out); corosensei's equivalent is a scoped coroutine.
//!
//! Built with `--features fpu-env`, our benchmark ids read `purloin+fpu-env`: compare them
//! with a default run to get the cost of saving MXCSR and the x87 control word (context 3
//! always saves both).
#![cfg(not(loom))]
#![allow(missing_docs)] // criterion_main! generates an undocumented `main`

#[path = "../tests/common/mod.rs"]
mod common;

use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;

use common::TestStack;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const OURS: &str = if cfg!(feature = "fpu-env") { "purloin+fpu-env" } else { "purloin" };
const DEPTHS: [usize; 3] = [0, 3, 8];
const STACK: usize = 256 * 1024;

/// Calls `f` from `depth` nested non-inlined frames (`depth = 0`: calls it directly).
#[inline(always)]
fn at_depth<F: FnMut()>(depth: usize, f: &mut F) {
    if depth == 0 { f() } else { nest(depth, f) }
}

#[inline(never)]
fn nest<F: FnMut()>(depth: usize, f: &mut F) {
    if depth <= 1 {
        f();
    } else {
        nest(depth - 1, f);
    }
    // Keeps the recursive call a real call (no tail call).
    black_box(());
}

// ---------------------------------------------------------------------------------------------
// purloin

mod ours {
    use super::*;
    use purloin_context::{Context, Transfer};

    pub extern "C-unwind" fn suspender(t: Transfer) -> ! {
        let depth = t.data;
        let mut parent = Some(t.context);
        loop {
            at_depth(depth, &mut || {
                // SAFETY: `parent` is the bench thread, suspended in `resume`.
                let t = unsafe { parent.take().unwrap().resume(0) };
                parent = Some(t.context);
            });
        }
    }

    pub fn round_trip(
        c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        depth: usize,
    ) {
        let stack = TestStack::new(STACK);
        // SAFETY: the stack outlives the context (the context is abandoned, suspended, before
        // the stack is dropped).
        let ctx = unsafe { Context::new(stack.top(), stack.limit(), suspender) };
        // SAFETY: fresh context: it starts and suspends at once.
        let mut ctx = Some(unsafe { ctx.resume(depth) }.context);
        c.bench_function(BenchmarkId::new(OURS, format!("depth={depth}")), |b| {
            b.iter(|| {
                // SAFETY: `ctx` is suspended in `resume`.
                let t = unsafe { ctx.take().unwrap().resume(black_box(0)) };
                ctx = Some(t.context);
            })
        });
        // `ctx` (suspended for good) is abandoned here; the stack goes next.
        drop(stack);
    }

    pub struct Ring {
        pub slots: [Cell<Option<Context>>; 4],
        pub current: Cell<usize>,
    }

    pub extern "C-unwind" fn member(mut t: Transfer) -> ! {
        loop {
            // SAFETY: `data` is the address of the bench's `Ring`, alive while it runs.
            let ring = unsafe { &*(t.data as *const Ring) };
            let me = ring.current.get();
            ring.slots[(me + 3) % 4].set(Some(t.context));
            let next = (me + 1) % 4;
            ring.current.set(next);
            let ctx = ring.slots[next].take().unwrap();
            // SAFETY: `ctx` is suspended.
            t = unsafe { ctx.resume(t.data) };
        }
    }

    pub fn ring(c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
        let stacks: Vec<TestStack> = (0..3).map(|_| TestStack::new(STACK)).collect();
        // SAFETY: the stacks outlive the ring.
        let mk =
            |s: &TestStack| Cell::new(Some(unsafe { Context::new(s.top(), s.limit(), member) }));
        let ring = Ring {
            slots: [Cell::new(None), mk(&stacks[0]), mk(&stacks[1]), mk(&stacks[2])],
            current: Cell::new(1),
        };
        let data = &ring as *const Ring as usize;
        c.bench_function(BenchmarkId::new(OURS, "3 contexts"), |b| {
            b.iter(|| {
                ring.current.set(1);
                let next = ring.slots[1].take().unwrap();
                // SAFETY: member 1 is suspended.
                let t = unsafe { next.resume(data) };
                ring.slots[3].set(Some(t.context));
            })
        });
        // The ring members stay suspended for good; their stacks go next.
        drop(stacks);
    }

    /// The same lap of three tasks through a scheduler context instead: the bench thread
    /// resumes each task in turn and each task switches back (6 switches per lap).
    pub fn via_scheduler(c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
        let stacks: Vec<TestStack> = (0..3).map(|_| TestStack::new(STACK)).collect();
        let mut tasks: Vec<Option<Context>> = stacks
            .iter()
            .map(|s| {
                // SAFETY: the stacks outlive the contexts.
                let ctx = unsafe { Context::new(s.top(), s.limit(), suspender) };
                // SAFETY: fresh context: it starts and suspends at once (depth 0).
                Some(unsafe { ctx.resume(0) }.context)
            })
            .collect();
        c.bench_function(BenchmarkId::new(format!("{OURS}-via-scheduler"), "3 contexts"), |b| {
            b.iter(|| {
                for task in tasks.iter_mut() {
                    // SAFETY: each task is suspended in `resume`.
                    let t = unsafe { task.take().unwrap().resume(black_box(0)) };
                    *task = Some(t.context);
                }
            })
        });
        // The tasks stay suspended for good; their stacks go next.
    }
}

// ---------------------------------------------------------------------------------------------
// context 3 (boost fcontext)

mod fcontext {
    use super::*;
    use context::stack::ProtectedFixedSizeStack;
    use context::{Context, Transfer};

    extern "C" fn suspender(t: Transfer) -> ! {
        let depth = t.data;
        let mut parent = Some(t.context);
        loop {
            at_depth(depth, &mut || {
                // SAFETY: `parent` is the bench thread, suspended in `resume`.
                let t = unsafe { parent.take().unwrap().resume(0) };
                parent = Some(t.context);
            });
        }
    }

    pub fn round_trip(
        c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        depth: usize,
    ) {
        let stack = ProtectedFixedSizeStack::new(STACK).unwrap();
        // SAFETY: the stack outlives the context.
        let ctx = unsafe { Context::new(&stack, suspender) };
        // SAFETY: fresh context.
        let mut ctx = Some(unsafe { ctx.resume(depth) }.context);
        c.bench_function(BenchmarkId::new("context", format!("depth={depth}")), |b| {
            b.iter(|| {
                // SAFETY: `ctx` is suspended in `resume`.
                let t = unsafe { ctx.take().unwrap().resume(black_box(0)) };
                ctx = Some(t.context);
            })
        });
    }

    struct Ring {
        slots: [Cell<Option<Context>>; 4],
        current: Cell<usize>,
    }

    extern "C" fn member(mut t: Transfer) -> ! {
        loop {
            // SAFETY: `data` is the address of the bench's `Ring`.
            let ring = unsafe { &*(t.data as *const Ring) };
            let me = ring.current.get();
            ring.slots[(me + 3) % 4].set(Some(t.context));
            let next = (me + 1) % 4;
            ring.current.set(next);
            let ctx = ring.slots[next].take().unwrap();
            // SAFETY: `ctx` is suspended.
            t = unsafe { ctx.resume(t.data) };
        }
    }

    pub fn ring(c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
        let stacks: Vec<ProtectedFixedSizeStack> =
            (0..3).map(|_| ProtectedFixedSizeStack::new(STACK).unwrap()).collect();
        // SAFETY: the stacks outlive the ring.
        let mk = |s: &ProtectedFixedSizeStack| Cell::new(Some(unsafe { Context::new(s, member) }));
        let ring = Ring {
            slots: [Cell::new(None), mk(&stacks[0]), mk(&stacks[1]), mk(&stacks[2])],
            current: Cell::new(1),
        };
        let data = &ring as *const Ring as usize;
        c.bench_function(BenchmarkId::new("context", "3 contexts"), |b| {
            b.iter(|| {
                ring.current.set(1);
                let next = ring.slots[1].take().unwrap();
                // SAFETY: member 1 is suspended.
                let t = unsafe { next.resume(data) };
                ring.slots[3].set(Some(t.context));
            })
        });
    }
}

// ---------------------------------------------------------------------------------------------
// corosensei 0.3 and generator 0.8 (asymmetric only)

fn corosensei_round_trip(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    depth: usize,
) {
    use corosensei::stack::DefaultStack;
    use corosensei::{Coroutine, Yielder};
    let stack = DefaultStack::new(STACK).unwrap();
    let mut co = Coroutine::with_stack(stack, move |y: &Yielder<usize, usize>, _: usize| {
        loop {
            at_depth(depth, &mut || {
                y.suspend(0);
            });
        }
    });
    c.bench_function(BenchmarkId::new("corosensei", format!("depth={depth}")), |b| {
        b.iter(|| co.resume(black_box(0)))
    });
    // SAFETY: the coroutine holds nothing that needs dropping (as in corosensei's own bench).
    unsafe { co.force_reset() };
}

fn generator_round_trip(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    depth: usize,
) {
    let mut g = generator::Gn::<usize>::new_scoped_opt(STACK, move |mut s| {
        loop {
            at_depth(depth, &mut || {
                s.yield_with(0usize);
            });
        }
    });
    c.bench_function(BenchmarkId::new("generator", format!("depth={depth}")), |b| {
        b.iter(|| g.send(black_box(0)))
    });
}

fn round_trip(c: &mut Criterion) {
    let mut group = c.benchmark_group("round_trip");
    for depth in DEPTHS {
        ours::round_trip(&mut group, depth);
        corosensei_round_trip(&mut group, depth);
        fcontext::round_trip(&mut group, depth);
        generator_round_trip(&mut group, depth);
    }
    group.finish();
}

fn symmetric_ring(c: &mut Criterion) {
    let mut group = c.benchmark_group("symmetric_ring");
    ours::ring(&mut group);
    ours::via_scheduler(&mut group);
    fcontext::ring(&mut group);
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// resume_ontop (round trip where the suspending side runs a function on the target) and
// create + run to completion on a reused stack

mod ontop {
    use super::*;

    pub type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

    fn bump(t: purloin_context::Transfer) -> purloin_context::Transfer {
        purloin_context::Transfer { context: t.context, data: t.data + 1 }
    }

    extern "C-unwind" fn ours_parker(mut t: purloin_context::Transfer) -> ! {
        loop {
            // SAFETY: `t.context` is the bench thread, suspended in `resume`; `bump` cannot
            // panic.
            t = unsafe { t.context.resume_ontop(t.data, bump) };
        }
    }

    pub fn ours(c: &mut Group<'_>) {
        let stack = TestStack::new(STACK);
        // SAFETY: the stack outlives the context.
        let mut ctx =
            Some(unsafe { purloin_context::Context::new(stack.top(), stack.limit(), ours_parker) });
        c.bench_function(BenchmarkId::new(OURS, "publish on every suspend"), |b| {
            b.iter(|| {
                // SAFETY: fresh or suspended in `resume_ontop`.
                let t = unsafe { ctx.take().unwrap().resume(black_box(1)) };
                assert_eq!(t.data, 2);
                ctx = Some(t.context);
            })
        });
    }

    extern "C" fn fc_bump(t: context::Transfer) -> context::Transfer {
        context::Transfer { context: t.context, data: t.data + 1 }
    }

    extern "C" fn fc_parker(mut t: context::Transfer) -> ! {
        loop {
            // SAFETY: as above.
            t = unsafe { t.context.resume_ontop(t.data, fc_bump) };
        }
    }

    pub fn fcontext(c: &mut Group<'_>) {
        let stack = context::stack::ProtectedFixedSizeStack::new(STACK).unwrap();
        // SAFETY: the stack outlives the context.
        let mut ctx = Some(unsafe { context::Context::new(&stack, fc_parker) });
        c.bench_function(BenchmarkId::new("context", "publish on every suspend"), |b| {
            b.iter(|| {
                // SAFETY: fresh or suspended in `resume_ontop`.
                let t = unsafe { ctx.take().unwrap().resume(black_box(1)) };
                assert_eq!(t.data, 2);
                ctx = Some(t.context);
            })
        });
    }

    extern "C-unwind" fn ours_once(t: purloin_context::Transfer) -> ! {
        // SAFETY: `t.context` is the bench thread; we are never resumed again.
        unsafe { t.context.resume(t.data + 1) };
        unreachable!();
    }

    pub fn ours_create(c: &mut Group<'_>) {
        let stack = TestStack::new(STACK);
        c.bench_function(BenchmarkId::new(OURS, "reused stack"), |b| {
            b.iter(|| {
                // SAFETY: the previous context on this stack finished (it is abandoned
                // suspended with nothing to drop), so the stack is free again.
                let ctx =
                    unsafe { purloin_context::Context::new(stack.top(), stack.limit(), ours_once) };
                // SAFETY: fresh context.
                unsafe { ctx.resume(black_box(1)) }.data
            })
        });
    }

    extern "C" fn fc_once(t: context::Transfer) -> ! {
        // SAFETY: as above.
        unsafe { t.context.resume(t.data + 1) };
        unreachable!();
    }

    pub fn fcontext_create(c: &mut Group<'_>) {
        let stack = context::stack::ProtectedFixedSizeStack::new(STACK).unwrap();
        c.bench_function(BenchmarkId::new("context", "reused stack"), |b| {
            b.iter(|| {
                // SAFETY: as above.
                let ctx = unsafe { context::Context::new(&stack, fc_once) };
                // SAFETY: fresh context.
                unsafe { ctx.resume(black_box(1)) }.data
            })
        });
    }

    pub fn corosensei_create(c: &mut Group<'_>) {
        use corosensei::ScopedCoroutine;
        use corosensei::stack::DefaultStack;
        let mut stack = DefaultStack::new(STACK).unwrap();
        c.bench_function(BenchmarkId::new("corosensei", "reused stack"), |b| {
            b.iter(|| {
                let co = ScopedCoroutine::<usize, (), usize, _>::with_stack(
                    &mut stack,
                    |_y, input: usize| input + 1,
                );
                co.scope(|mut co| co.resume(black_box(1)))
            })
        });
    }
}

fn resume_ontop(c: &mut Criterion) {
    let mut group = c.benchmark_group("resume_ontop");
    ontop::ours(&mut group);
    ontop::fcontext(&mut group);
    group.finish();
}

fn create_and_run(c: &mut Criterion) {
    let mut group = c.benchmark_group("create_and_run");
    ontop::ours_create(&mut group);
    ontop::corosensei_create(&mut group);
    ontop::fcontext_create(&mut group);
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = round_trip, symmetric_ring, resume_ontop, create_and_run
}
criterion_main!(benches);
