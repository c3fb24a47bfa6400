//! Compile-time checks: every socket handle can move between and be shared by green threads.
#![cfg(not(loom))]

use purloin::net::{Incoming, SocketClosed, TcpListener, TcpStream, UdpSocket};
use static_assertions::assert_impl_all;

assert_impl_all!(TcpListener: Send, Sync, std::fmt::Debug);
assert_impl_all!(TcpStream: Send, Sync, std::fmt::Debug, std::io::Read, std::io::Write);
assert_impl_all!(&TcpStream: std::io::Read, std::io::Write);
assert_impl_all!(UdpSocket: Send, Sync, std::fmt::Debug);
assert_impl_all!(Incoming<'static>: Send, Sync, Iterator);
assert_impl_all!(SocketClosed: Send, Sync, std::error::Error);
