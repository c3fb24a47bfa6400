//! Compile-time thread-safety of every handle type (a violation fails the build of this
//! test crate; there is nothing to run).
#![cfg(not(loom))]

use purloin_parking::futex::WaitResult;
use purloin_parking::{Parker, ParkingLot, ParkingLots, State, Unparker, stats::Counters};
use static_assertions::{assert_impl_all, assert_not_impl_any};

assert_impl_all!(ParkingLot: Send, Sync);
assert_impl_all!(ParkingLots: Send, Sync);
assert_impl_all!(State: Send, Sync, Copy);
assert_impl_all!(Unparker: Send, Sync, Clone);
assert_impl_all!(Parker: Send);
// Only the owning thread parks: two threads parking on one token would break the protocol.
assert_not_impl_any!(Parker: Sync);
assert_impl_all!(WaitResult: Send, Sync, Copy);
assert_impl_all!(Counters: Send, Sync, Copy);
