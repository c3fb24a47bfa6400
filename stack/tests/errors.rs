//! Error paths: too many distinct sizes, and an address-space limit (`RLIMIT_AS`) reported
//! by name rather than as a bare ENOMEM.
#![cfg(not(loom))]

mod common;

use common::{child_case, run_child, status_bytes};
use purloin_stack::{StackSize, lease, page_size};

/// At most 64 distinct sizes: the 65th is an error that says what to do. (This process
/// uses no other custom size, so the named three plus 61 custom ones fill the table.)
#[test]
fn too_many_distinct_sizes_is_a_clear_error() {
    let page = page_size();
    let named = [StackSize::SMALL_BYTES, StackSize::NORMAL_BYTES, StackSize::LARGE_BYTES];
    // Custom sizes of 2, 3, ... pages, skipping those equal to a named class.
    let mut sizes = (2..).map(|k| k * page).filter(|b| !named.contains(b)).map(StackSize::Bytes);
    let mut stacks = Vec::new();
    for _ in 0..StackSize::MAX_CLASSES - 3 {
        stacks.push(lease(sizes.next().unwrap()).unwrap());
    }
    let err = lease(sizes.next().unwrap()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("distinct stack sizes"), "{err}");
    assert!(err.to_string().contains("StackSize::Small"), "the fix: {err}");
    // Sizes already in use still work.
    drop(lease(StackSize::Bytes(2 * page)).unwrap());
    drop(lease(StackSize::Small).unwrap());
}

/// Under an address-space limit the error names `RLIMIT_AS` and the fix.
#[test]
fn an_address_space_limit_is_named() {
    if child_case().as_deref() == Some("rlimit") {
        let limit = status_bytes("VmSize") + 64 * 1024 * 1024;
        let lim = libc::rlimit { rlim_cur: limit as libc::rlim_t, rlim_max: libc::RLIM_INFINITY };
        // SAFETY: setrlimit reads one rlimit through a valid pointer.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) }, 0);
        let mut stacks = Vec::new();
        let err = loop {
            match lease(StackSize::Large) {
                Ok(s) => stacks.push(s),
                Err(e) => break e,
            }
        };
        println!("LEASED {}", stacks.len());
        println!("KIND {:?}", err.kind());
        println!("ERROR {err}");
        std::process::exit(0);
    }
    let out = run_child("an_address_space_limit_is_named", "rlimit");
    assert_eq!(out.status.code(), Some(0), "{}", out.describe());
    assert!(out.stdout.contains("KIND OutOfMemory"), "{}", out.describe());
    let err = out.stdout.lines().find_map(|l| l.split_once("ERROR ").map(|(_, e)| e)).unwrap();
    assert!(err.starts_with("purloin-stack: mmap of "), "{err}");
    assert!(err.contains("RLIMIT_AS"), "the cause: {err}");
    assert!(err.contains("ulimit -v"), "the fix: {err}");
}
