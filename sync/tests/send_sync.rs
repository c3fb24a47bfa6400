//! Compile-time `Send`/`Sync` (and not-`Send`) assertions for every handle type of
//! purloin-sync, matching std and crossbeam-channel. Checked when this file compiles (it
//! has no runtime tests).
#![cfg(not(loom))]

use std::cell::Cell;
use std::rc::Rc;

use purloin_sync::channel::{IntoIter, Iter, Receiver, Select, SelectedOperation, Sender, TryIter};
use purloin_sync::{
    Barrier, BarrierWaitResult, Butex, ButexWait, Condvar, Mutex, MutexGuard, Once, OnceLock,
    OnceState, RwLock, RwLockReadGuard, RwLockWriteGuard, Semaphore, SemaphorePermit, WaitGroup,
    WaitTimeoutResult,
};
use static_assertions::{assert_impl_all, assert_not_impl_any};

assert_impl_all!(Butex: Send, Sync);
assert_impl_all!(ButexWait: Send, Sync, Copy);
assert_impl_all!(Mutex<u8>: Send, Sync);
assert_impl_all!(Mutex<Cell<u8>>: Send, Sync);
assert_not_impl_any!(Mutex<Rc<u8>>: Send, Sync);
assert_impl_all!(MutexGuard<'static, u8>: Sync);
assert_not_impl_any!(MutexGuard<'static, u8>: Send);
assert_impl_all!(Condvar: Send, Sync);
assert_impl_all!(WaitTimeoutResult: Send, Sync);
assert_impl_all!(RwLock<u8>: Send, Sync);
assert_not_impl_any!(RwLock<Cell<u8>>: Sync);
assert_impl_all!(RwLockReadGuard<'static, u8>: Sync);
assert_not_impl_any!(RwLockReadGuard<'static, u8>: Send);
assert_impl_all!(RwLockWriteGuard<'static, u8>: Sync);
assert_not_impl_any!(RwLockWriteGuard<'static, u8>: Send);
assert_impl_all!(Once: Send, Sync);
assert_impl_all!(OnceState: Send);
assert_impl_all!(OnceLock<u8>: Send, Sync);
assert_not_impl_any!(OnceLock<Cell<u8>>: Sync);
assert_impl_all!(Barrier: Send, Sync);
assert_impl_all!(BarrierWaitResult: Send, Sync);
assert_impl_all!(WaitGroup: Send, Sync);
assert_impl_all!(Semaphore: Send, Sync);
assert_impl_all!(SemaphorePermit<'static>: Send, Sync);

assert_impl_all!(Sender<u8>: Send, Sync, Clone);
assert_impl_all!(Receiver<u8>: Send, Sync, Clone);
assert_impl_all!(Sender<Cell<u8>>: Send, Sync);
assert_not_impl_any!(Sender<Rc<u8>>: Send, Sync);
assert_not_impl_any!(Receiver<Rc<u8>>: Send, Sync);
assert_impl_all!(Iter<'static, u8>: Send, Sync);
assert_impl_all!(TryIter<'static, u8>: Send, Sync);
assert_impl_all!(IntoIter<u8>: Send, Sync);
assert_impl_all!(Select<'static>: Send, Sync);
assert_not_impl_any!(SelectedOperation<'static>: Send, Sync);
