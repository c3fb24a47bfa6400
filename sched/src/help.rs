//! Helping while waiting for a group of detached tasks: a green thread that waits for tasks it
//! spawned with [`spawn_detached_unchecked`](crate::spawn_detached_unchecked) runs the ones
//! that have not started yet inline, on its own stack, as a joiner runs a child it finds
//! unstarted (`join`). Each one so run costs no G record, no stack and no switch; rayon's
//! scope does the same with its jobs.
//!
//! Only tasks of the waiter's own group are run, and only from the places where a spawner's
//! tasks are: the top of its worker's local queue and runnext (the newest), and, when both
//! are empty, the global queue's head (the oldest, which overflowed there from a full local
//! queue). So a waiter never runs unrelated work (which might wait for something the waiter
//! itself is to do after its wait) and never digs through other entries: the first entry
//! that is not a member ends the help. Program shapes served: a scope that spawns its
//! children and then waits for them (fork-join by scope, as in rayon's `scope` + `spawn`), on
//! any number of workers; children that other workers took meanwhile run there as usual.
//!
//! No new synchronisation: dequeuing an entry makes the dequeuer the task's owner, whoever it
//! is (`entry`), and a task run inline has its identity made on demand as for a joiner
//! (`lazy`, L3: a detached task has no handle that could bind it meanwhile).

use core::ptr::NonNull;

use crate::entry::{Entry, Kind};
use crate::g::InlineChild;
use crate::held::HeldP;
use crate::ready::Slot;
use crate::task::{CellHead, OwnedTask};
use crate::worker::current_worker;

/// Runs one not yet started detached task of `group` inline on the calling green thread, if
/// one is on top of this worker's local queue, in its runnext, or (both empty) at the global
/// queue's head, and if the caller's stack has room for a green thread's default stack.
/// Returns whether it ran one: a waiter calls it until it returns false, then waits as usual.
///
/// The task runs as if it had a green thread of its own (`current()` inside it is its own
/// identity; if it parks, the caller's green thread parks with it). Outside a green thread it
/// returns false.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_sched::{Builder, SpawnOptions};
///
/// let sched = Builder::new().workers(1).build().unwrap();
/// let ran = sched.spawn(|| {
///     let count = AtomicUsize::new(0);
///     let group = &count as *const AtomicUsize as usize;
///     for _ in 0..3 {
///         let c = &count;
///         // SAFETY: `count` outlives the tasks: this green thread does not return before
///         // all three ran (the loops below), and nothing else can drop them unrun (the
///         // scheduler is not shut down meanwhile).
///         unsafe {
///             purloin_sched::spawn_detached_unchecked(SpawnOptions::default(), group, move || {
///                 c.fetch_add(1, Ordering::SeqCst);
///             })
///         }
///         .unwrap();
///     }
///     let mut inline = 0;
///     while purloin_sched::run_detached_inline(group) {
///         inline += 1;
///     }
///     while count.load(Ordering::SeqCst) < 3 {
///         purloin_sched::yield_now();
///     }
///     inline
/// });
/// // One worker: nobody else took them.
/// assert_eq!(ran.join().unwrap(), 3);
/// ```
pub fn run_detached_inline(group: usize) -> bool {
    let mut once = true;
    run_detached_inline_while(group, || core::mem::take(&mut once)) == 1
}

/// Runs not yet started detached tasks of `group` inline on the calling green thread, as
/// [`run_detached_inline`] runs one, for as long as `more()` (asked before each) holds and one
/// is found; returns how many it ran. A waiter passes "my group is not done yet", so it stops
/// at its last member without looking at the entry below it.
///
/// One drain costs one worker lookup per task run (the task may park and resume this green
/// thread on another worker, so the worker is looked up again after each: the lookup that
/// counts the task finished serves the next round), and one check of the caller's stack room
/// (the same frame and stack for every round).
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use purloin_sched::{Builder, SpawnOptions};
///
/// let sched = Builder::new().workers(1).build().unwrap();
/// let ran = sched.spawn(|| {
///     let count = AtomicUsize::new(0);
///     let group = &count as *const AtomicUsize as usize;
///     for _ in 0..3 {
///         let c = &count;
///         // SAFETY: `count` outlives the tasks: this green thread does not return before
///         // all three ran (below), and nothing else can drop them unrun (the scheduler is
///         // not shut down meanwhile).
///         unsafe {
///             purloin_sched::spawn_detached_unchecked(SpawnOptions::default(), group, move || {
///                 c.fetch_add(1, Ordering::SeqCst);
///             })
///         }
///         .unwrap();
///     }
///     let inline = purloin_sched::run_detached_inline_while(group, || {
///         count.load(Ordering::SeqCst) < 3
///     });
///     while count.load(Ordering::SeqCst) < 3 {
///         purloin_sched::yield_now();
///     }
///     inline
/// });
/// // One worker: nobody else took them.
/// assert_eq!(ran.join().unwrap(), 3);
/// ```
pub fn run_detached_inline_while(group: usize, mut more: impl FnMut() -> bool) -> usize {
    let Some(mut m) = current_worker() else { return 0 };
    let Some(host) = m.current.get() else { return 0 };
    // The room below this frame on the host's stack: the same for every round (the tasks run
    // and return above it, and a green thread keeps its stack when it moves).
    if !crate::join::stack_room(host, m.shared.config.stack_size.bytes()) {
        return 0;
    }
    // The host's scheduler, which the tasks of its own queues belong to (a green thread never
    // changes schedulers).
    let shared: *const crate::shared::Shared = &*m.shared;
    let mut ran = 0;
    while more() {
        let Some(held) = m.held() else { break };
        let Some(cell) = take_member(held, group) else { break };
        // SAFETY: we dequeued the entry: we own the cell's G side, and the cell lives until
        // we free it below; its head is at offset 0.
        let head = unsafe { &*cell.cast::<CellHead>().as_ptr() };
        let Ok(bound) = head.identity.start_inline(host) else {
            // A G bound to it has a wake-up pending (not possible without a handle, but a
            // worker handles that case): let a worker run it.
            held.enqueue(Entry::task(cell), Slot::Local);
            break;
        };
        let me = match bound {
            Some(child) => InlineChild::Thread(child),
            None => InlineChild::Lazy(NonNull::from(head)),
        };
        // SAFETY: we own the cell's G side (above).
        let task = unsafe { OwnedTask::from_cell(cell) };
        // Run "by the joiner": a detached cell then stays for us to read its identity and
        // free.
        crate::join::as_inline_child(m, host, me, || task.run_by_joiner());
        if let Some(child) = bound.or_else(|| head.identity.end_inline()) {
            crate::lazy::release_inline(child);
        }
        // SAFETY: a detached cell (`take_member`) whose G side ran inline; not used below.
        unsafe { crate::task::free_detached(cell) };
        ran += 1;
        // The task may have parked: this green thread may be on another worker now.
        match crate::join::finish_inline(shared) {
            Some(now) => m = now,
            None => break,
        }
    }
    ran
}

/// Dequeues a detached task of `group` from the top of the local queue, else from runnext,
/// else (both empty) from the head of the global queue; an entry that is not one goes back
/// where it was (from the global queue: to the local queue).
fn take_member(held: HeldP<'_>, group: usize) -> Option<NonNull<()>> {
    let member = |e: Entry| match e.kind() {
        // SAFETY: the caller dequeued `e`: it owns the cell.
        Kind::Task(cell) if unsafe { crate::task::detached_key(cell) } == Some(group) => Some(cell),
        _ => None,
    };
    if let Some(e) = held.local().pop() {
        if let Some(cell) = member(e) {
            return Some(cell);
        }
        // The queue may have looked empty meanwhile (to a worker about to park): the push
        // back follows the notify rule.
        held.enqueue(e, Slot::Local);
        return None;
    }
    let p = held.p();
    if let Some(e) = p.take_runnext() {
        if let Some(cell) = member(e) {
            return Some(cell);
        }
        if let Some(old) = p.put_runnext(e) {
            held.enqueue(old, Slot::LocalQuiet);
        }
        return None;
    }
    // The local queue and runnext are empty: the oldest members may have overflowed to the
    // global queue, whose head holds overflows in spawn order (`push_or_overflow`).
    // On the worker's stack: the steal's epoch pin may collect garbage (`on_worker_stack`).
    let m = held.m();
    let steal = crate::switch::on_worker_stack(m, || m.shared.injector.steal());
    let purloin_deque::Steal::Success(e) = steal else { return None };
    if let Some(cell) = member(e) {
        return Some(cell);
    }
    // Not ours (or a stale G entry, which the worker that dequeues it drops): now local. The
    // global queue may have looked non-empty to a worker about to park, which then finds it
    // here: the notify rule applies.
    held.enqueue(e, Slot::Local);
    None
}
