//! Compile-time checks of the handle types' auto traits.
#![cfg(not(loom))]

use purloin_stack::overflow::AltStack;
use purloin_stack::{ClassStats, GuardBackend, Options, Stack, StackSize, StackStats};
use static_assertions::{assert_impl_all, assert_not_impl_any};

// A stack is owned by one green thread at a time and migrates with it between workers.
assert_impl_all!(Stack: Send, Sync, std::fmt::Debug);
assert_not_impl_any!(Stack: Clone, Copy);
// An alternate signal stack belongs to the thread that installed it.
assert_not_impl_any!(AltStack: Send, Sync);
assert_impl_all!(StackSize: Send, Sync, Copy, Default, std::hash::Hash);
assert_impl_all!(Options: Send, Sync, Clone, Default);
assert_impl_all!(StackStats: Send, Sync, Clone, Default);
assert_impl_all!(ClassStats: Send, Sync, Clone);
assert_impl_all!(GuardBackend: Send, Sync, Copy);

#[test]
fn handle_types_have_the_expected_auto_traits() {
    // The assertions above are checked at compile time.
}
