//! Compile-time checks: the handles of the I/O surface (any-fd readiness, Unix sockets,
//! signals, child processes, timers, files) can move between and be shared by green threads.
#![cfg(not(loom))]

use std::io::{Read, Seek, Write};

use purloin::io::Async;
use purloin::net::{UnixDatagram, UnixIncoming, UnixListener, UnixStream};
use purloin::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use purloin::signal::{Signal, Signals};
use purloin::time::Ticker;
use static_assertions::assert_impl_all;

assert_impl_all!(Async<std::fs::File>: Send, Sync, std::fmt::Debug, Read, Write);
assert_impl_all!(&Async<std::io::PipeReader>: Read);
assert_impl_all!(Async<std::os::fd::OwnedFd>: Send, Sync);
assert_impl_all!(UnixListener: Send, Sync, std::fmt::Debug);
assert_impl_all!(UnixStream: Send, Sync, std::fmt::Debug, Read, Write);
assert_impl_all!(&UnixStream: Read, Write);
assert_impl_all!(UnixDatagram: Send, Sync, std::fmt::Debug);
assert_impl_all!(UnixIncoming<'static>: Send, Sync, Iterator);
assert_impl_all!(Signals: Send, Sync, std::fmt::Debug);
assert_impl_all!(Signal: Send, Sync, Copy, Eq, std::hash::Hash, std::fmt::Display);
assert_impl_all!(Child: Send, Sync, std::fmt::Debug);
assert_impl_all!(ChildStdin: Send, Sync, Write);
assert_impl_all!(ChildStdout: Send, Sync, Read);
assert_impl_all!(ChildStderr: Send, Sync, Read);
assert_impl_all!(Ticker: Send, Sync, std::fmt::Debug);
assert_impl_all!(purloin::fs::File: Send, Sync, std::fmt::Debug, Read, Write, Seek);
assert_impl_all!(&purloin::fs::File: Read, Write, Seek);
