//! The gate of a thread's stack cache: who may touch the cache's slot lists right now, its
//! owner thread (lease and return) or [`trim`](crate::trim) on another thread.
//!
//! The cache's lists are plain vectors that only the gate's holder touches. Its owner enters
//! with one compare-and-swap and never waits: if a trim holds the gate, the owner leases from
//! (or returns to) the shared pool instead. A trim waits until the owner is out (an owner's
//! turn is a few instructions and never blocks), so it reaches every cache, even one whose
//! owner thread is parked for ever.
//!
//! # Memory ordering
//!
//! - (C1) Whoever enters (`FREE => OWNER` or `FREE => TRIM`, Acquire) reads the `FREE` that
//!   the last holder stored on leaving (Release): the last holder's writes to the lists happen
//!   before the new holder's reads. The compare-and-swap makes entering exclusive.
//!
//! One atomic read-modify-write per cached lease or return is the floor for this: taking
//! stacks from a cache whose owner may be in the middle of a lease needs mutual exclusion,
//! and without a read-modify-write the owner would need a store-load fence, which costs as
//! much.

use crate::sync::{AtomicU32, Ordering};

const FREE: u32 = 0;
const OWNER: u32 = 1;
const TRIM: u32 = 2;

/// See the module docs.
pub(crate) struct Gate(AtomicU32);

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate(AtomicU32::new(FREE))
    }

    /// The owner enters; false if a trim holds the gate (then bypass the cache).
    #[inline]
    pub(crate) fn owner_enter(&self) -> bool {
        // Acquire (C1).
        self.0.compare_exchange(FREE, OWNER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// The owner leaves.
    #[inline]
    pub(crate) fn owner_leave(&self) {
        // Release (C1): the owner's list writes before the next holder's reads.
        self.0.store(FREE, Ordering::Release);
    }

    /// A trim (or the owner's exit) enters, waiting for the owner's turn to end.
    pub(crate) fn trim_enter(&self) {
        // Acquire (C1).
        while self
            .0
            .compare_exchange_weak(FREE, TRIM, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            crate::sync::yield_now();
        }
    }

    /// The trim leaves.
    pub(crate) fn trim_leave(&self) {
        // Release (C1).
        self.0.store(FREE, Ordering::Release);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::Gate;
    use crate::sync::{Arc, UnsafeCell, model, thread};

    /// Runs `f` on the list if the owner gets through the gate.
    fn as_owner(gate: &Gate, list: &UnsafeCell<Vec<u32>>, f: impl FnOnce(&mut Vec<u32>)) -> bool {
        if !gate.owner_enter() {
            return false;
        }
        // SAFETY: the gate is held: nobody else touches the list.
        list.with_mut(|v| f(unsafe { &mut *v }));
        gate.owner_leave();
        true
    }

    /// Runs `f` on the list as a trim.
    fn as_trim<R>(
        gate: &Gate,
        list: &UnsafeCell<Vec<u32>>,
        f: impl FnOnce(&mut Vec<u32>) -> R,
    ) -> R {
        gate.trim_enter();
        // SAFETY: the gate is held: nobody else touches the list.
        let r = list.with_mut(|v| f(unsafe { &mut *v }));
        gate.trim_leave();
        r
    }

    /// The owner leases and returns through the gate (bypassing the cache when a trim holds
    /// it) while a trim empties the cache: every stack is in exactly one place at the end, and
    /// loom sees no unsynchronised access to the list.
    ///
    /// Mutations, each caught with "Causality violation: Concurrent write accesses to
    /// `UnsafeCell`": `owner_enter`'s CAS with Relaxed success ordering; `trim_leave`'s store
    /// Relaxed; `owner_enter` as an Acquire load of `FREE` then a store of `OWNER` (not one
    /// CAS: two holders at once).
    #[test]
    fn owner_and_trim_take_turns() {
        model(|| {
            let gate = Arc::new(Gate::new());
            let list = Arc::new(UnsafeCell::new(vec![1u32, 2]));
            let (g, l) = (gate.clone(), list.clone());
            let owner = thread::spawn(move || {
                // A lease: from the cache if the gate opens (else "the shared pool").
                let mut mine = Vec::new();
                as_owner(&g, &l, |v| mine.extend(v.pop()));
                // Returns: what was leased, and a stack leased before.
                mine.push(3);
                let mut bypassed = Vec::new();
                for s in mine {
                    if !as_owner(&g, &l, |v| v.push(s)) {
                        bypassed.push(s);
                    }
                }
                bypassed
            });
            let mut all = as_trim(&gate, &list, core::mem::take);
            all.extend(owner.join().unwrap());
            all.extend(as_trim(&gate, &list, core::mem::take));
            all.sort_unstable();
            assert_eq!(all, [1, 2, 3], "every stack in exactly one place");
        });
    }
}
