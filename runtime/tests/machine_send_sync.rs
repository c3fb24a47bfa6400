//! Compile-time `Send`/`Sync` guarantees of the machine API's handle and value types.
#![cfg(not(loom))]

use purloin::machine::{
    CompleteError, Error, Event, Events, Host, HostHandle, HostShutdownReport, MachineId,
    MachineState, Payload, SendError, Yield,
};
use static_assertions::{assert_impl_all, assert_not_impl_any};

assert_impl_all!(Host: Send, Sync);
assert_impl_all!(HostHandle: Send, Sync, Clone);
assert_impl_all!(MachineId: Send, Sync, Copy, Eq, core::hash::Hash, Ord);
assert_impl_all!(Payload: Send);
// A payload holds any `Send` value, which need not be `Sync`.
assert_not_impl_any!(Payload: Sync);
assert_impl_all!(Event: Send);
assert_impl_all!(Events: Send);
assert_impl_all!(Yield: Send);
assert_impl_all!(Error: Send, Sync, Clone, std::error::Error);
assert_impl_all!(SendError: Send, std::error::Error);
assert_impl_all!(CompleteError: Send, Sync, std::error::Error);
assert_impl_all!(MachineState: Send, Sync, Copy);
assert_impl_all!(HostShutdownReport: Send, Sync, Copy);
