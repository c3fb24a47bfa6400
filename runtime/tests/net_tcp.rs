//! TCP behaviour: echo correctness with many concurrent clients, exactly-once delivery of
//! bytes (checksums), half-close, many green threads on one listener, OS-thread use.
#![cfg(not(loom))]

mod net_common;

use std::io::{Read, Write};
use std::net::Shutdown;

use net_common::{rt, watchdog};
use purloin::net::{TcpListener, TcpStream};

#[test]
fn echo_one_connection() {
    let _w = watchdog("echo_one_connection", 60);
    let rt = rt(2);
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = purloin::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 64];
            loop {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    return;
                }
                s.write_all(&buf[..n]).unwrap();
            }
        });
        let mut c = TcpStream::connect(addr).unwrap();
        for i in 0..100u32 {
            c.write_all(&i.to_le_bytes()).unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
            assert_eq!(u32::from_le_bytes(b), i);
        }
        c.shutdown(Shutdown::Write).unwrap();
        server.join().unwrap();
    });
}
