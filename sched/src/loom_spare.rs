//! Loom models of the spare workers (S1, S2 in `blocking`) on the real code: the monitor's
//! retirement of a parked spare (`Shared::retire_spare_proc`) against an outside submission
//! and the spare's own search and park (`M::find_runnable`), and a processor reused by a new
//! spare (`Shared::activate_spare_proc`) against its last holder's retirement (`M::retire`).
//! The monitor's decision to add or retire (clocks, thread states) is not modelled; the
//! stalled worker is a P counted unparked that never looks at anything, which is what a
//! worker blocked in an unmarked call is to the idle protocol.

use crate::loom_idle::{model, new_g};
use crate::p::RETIRED;
use crate::ready::Slot;
use crate::registry::registry;
use crate::shared::Shared;
use crate::sync::thread as lthread;
use crate::sync::{Arc, Ordering, lock};
use crate::worker::M;

/// One worker (P 0, stalled: counted unparked) and room for one spare.
fn shared() -> Arc<Shared> {
    let b = crate::Builder::new().workers(1).max_spare_workers(1).monitor(false);
    Arc::new(Shared::new(b.config_for_tests()))
}

/// Runs `f` as the worker `m` of this loom thread.
fn as_worker<R>(m: &M, f: impl FnOnce(&M) -> R) -> R {
    crate::sync::set_current_worker_ptr((m as *const M).cast());
    let r = f(m);
    crate::sync::set_current_worker_ptr(core::ptr::null());
    r
}

/// The monitor retires the spare (S2) while an outside submission arrives and the spare
/// searches and parks. Either the spare is retired, and then it took no work (the G waits in
/// the global queue, for the monitor's next spare) and its P is `RETIRED`; or it was awake
/// for work, stays, and finds the G (a lost wake-up leaves it parked: loom reports a
/// deadlock). Mutation check: publishing the shrink after the signal instead of under the
/// sleepers' lock (`nprocs.store` moved out of `take_sleeper_then`'s closure to after
/// `signal`) fails this model ("a retired spare takes no work"): the retired spare wakes
/// before the shrink is visible and takes the G for a processor nobody steals from any more.
#[test]
fn spare_retires_vs_outside_submission() {
    model(|| {
        let s = shared();
        assert_eq!(s.activate_spare_proc(), Some(1));
        let s2 = s.clone();
        let spare = lthread::spawn(move || {
            let m = M::new(s2, 1, 1);
            as_worker(&m, |m| {
                let found = m.find_runnable();
                match found {
                    Some(_) => m.found_work(),
                    // Removed while parked: `run` retires it.
                    None => m.run(),
                }
                found
            })
        });
        let s3 = s.clone();
        let monitor = lthread::spawn(move || s3.retire_spare_proc());
        let g = new_g(&s);
        s.push_global(g);
        let retired = monitor.join().unwrap();
        let found = spare.join().unwrap();
        if retired {
            assert_eq!(found, None, "a retired spare takes no work");
            assert_eq!(s.ps[1].status.load(Ordering::Acquire), RETIRED);
            assert_eq!(s.active().len(), 1);
            assert!(!s.injector.is_empty(), "the G waits in the global queue");
        } else {
            assert_eq!(found, Some(g));
        }
    });
}

/// A spare removed with a G in its local queue retires (`M::retire`: the queue moves to the
/// global queue, then `RETIRED`) while the monitor adds a spare again on the same processor as
/// soon as `activate_spare_proc` lets it: the new holder finds the G, and the two holders
/// never use the processor's owner-only parts at once (the new holder first caches a record
/// in the free-record cache the old one emptied as it retired; loom reports an unordered
/// access). Mutation checks: storing `RETIRED` in `M::retire` before its queue is emptied
/// fails this model (the new holder uses the processor while the old one still empties it);
/// that store Relaxed, or `activate_spare_proc`'s load of `RETIRED` Relaxed (S1), fails it
/// with a causality violation on the cache.
#[test]
fn a_processor_is_reused_only_after_its_last_holder_retired() {
    model(|| {
        let s = shared();
        assert_eq!(s.activate_spare_proc(), Some(1));
        let g = new_g(&s);
        // A FREE record for the new holder's cache, taken now: a registry lock taken after
        // the old holder's retirement would order its emptying of the cache on its own.
        let cached = registry().alloc();
        // Cloned now for the same reason: in loom an `Arc` clone acquires every earlier drop.
        let s_new = s.clone();
        let s2 = s.clone();
        let old = lthread::spawn(move || {
            let m = M::new(s2.clone(), 1, 1);
            as_worker(&m, |m| {
                m.held_on_g0().enqueue(g.into(), Slot::LocalQuiet);
                // Removed (what S2 does under the resize lock while the worker is parked).
                {
                    let _resize = lock(&s2.resize.0);
                    s2.spare_procs.store(0, Ordering::Relaxed);
                    s2.nprocs.store(1, Ordering::Release);
                }
                m.run();
            });
        });
        let p = loop {
            if let Some(p) = s.activate_spare_proc() {
                break p;
            }
            lthread::yield_now();
        };
        assert_eq!(p, 1);
        let m = M::new(s_new, p, 2);
        // The new holder's first use of the processor: the cache the old one emptied (S1).
        // Before its search, whose SeqCst fences would order it in loom (there each one
        // follows every earlier one's writes).
        as_worker(&m, |m| m.held_on_g0().recycle_cached(cached));
        let found = as_worker(&m, |m| {
            let found = m.find_runnable();
            m.found_work();
            found
        });
        old.join().unwrap();
        assert_eq!(found, Some(g));
    });
}
