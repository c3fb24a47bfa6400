//! Compile-time `Send`/`Sync` assertions for every handle: the crate's thread-safety contract.
#![cfg(not(loom))]

use std::cell::Cell;
use std::rc::Rc;

use purloin_deque::{Injector, Steal, Stealer, Worker};
use static_assertions::{assert_impl_all, assert_not_impl_any};

// The owner handle moves between threads but is never shared.
assert_impl_all!(Worker<u64>: Send);
assert_not_impl_any!(Worker<u64>: Sync, Clone);
// Thieves and the injector are shared freely.
assert_impl_all!(Stealer<u64>: Send, Sync, Clone);
assert_impl_all!(Injector<u64>: Send, Sync);
// Items only ever move between threads (no `&T` is shared), so `T: Send` is enough, even for
// a `T` that is not `Sync`.
assert_impl_all!(Worker<Cell<u64>>: Send);
assert_impl_all!(Stealer<Cell<u64>>: Send, Sync);
assert_impl_all!(Injector<Cell<u64>>: Send, Sync);
// Items that must stay on one thread make every handle thread-bound.
assert_not_impl_any!(Worker<Rc<u64>>: Send, Sync);
assert_not_impl_any!(Stealer<Rc<u64>>: Send, Sync);
assert_not_impl_any!(Injector<Rc<u64>>: Send, Sync);
// The outcome type is a plain enum.
assert_impl_all!(Steal<u64>: Send, Sync, Copy, Eq, std::fmt::Debug);
assert_impl_all!(Worker<u64>: Default, std::fmt::Debug);
assert_impl_all!(Injector<u64>: Default, std::fmt::Debug);
assert_impl_all!(Stealer<u64>: std::fmt::Debug);

/// A non-`Send` item type still works on one thread.
#[test]
fn thread_bound_items_work_locally() {
    let w = Worker::bounded(4);
    let token = Rc::new(());
    w.push(token.clone()).unwrap();
    assert_eq!(Rc::strong_count(&token), 2);
    assert!(w.stealer().steal().is_success());
    assert_eq!(Rc::strong_count(&token), 1);
}
