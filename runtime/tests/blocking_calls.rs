//! The pattern for a blocking third-party call (see `purloin::future`'s docs): wrapped in
//! `purloin::blocking`, a call that blocks its OS thread does not hold up the other green
//! threads of its worker.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::time::Duration;

/// On ONE worker, a green thread blocks its OS thread in a std channel receive (a stand-in
/// for a blocking library call) that only another green thread of the same runtime can
/// satisfy: without `blocking`, that is a deadlock; with it, the monitor hands the worker's P
/// to another OS thread and the sender runs.
#[test]
fn wrapped_blocking_call_lets_the_other_green_threads_run() {
    let _w = common::watchdog("blocking handoff", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    for round in 0..20u32 {
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let receiver = rt.spawn(move || purloin::blocking(|| rx.recv().unwrap()));
        let sender = rt.spawn(move || tx.send(round).unwrap());
        assert_eq!(receiver.join().unwrap(), round);
        sender.join().unwrap();
    }
}

/// A blocking section may contain a park (here a green-aware `block_on` that waits for another
/// green thread): the section is paused across the park and re-opened after it.
#[test]
fn blocking_section_around_a_green_wait() {
    let _w = common::watchdog("blocking + block_on", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    let out = rt.block_on(|| {
        purloin::blocking(|| {
            let child = purloin::spawn(|| 5);
            purloin::future::block_on(child).unwrap()
        })
    });
    assert_eq!(out, 5);
}

purloin::green_local! {
    static LABEL: std::cell::Cell<u32> = std::cell::Cell::new(0);
}

/// On ONE worker, a green thread blocks its OS thread in an unmarked std channel receive that
/// only another green thread can satisfy: the monitor adds a spare worker, which runs the
/// sender. The blocked green thread comes back on its own OS thread with its green-locals as
/// it left them (and a green-local of the sender, which ran elsewhere, is the sender's own).
#[test]
fn an_unmarked_blocking_call_keeps_its_green_locals_and_lets_the_others_run() {
    let _w = common::watchdog("unmarked blocking", Duration::from_secs(120));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    for round in 1..=5u32 {
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let receiver = rt.spawn(move || {
            LABEL.with(|l| l.set(round * 10));
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let got = rx.recv().unwrap(); // blocks this worker's OS thread: not wrapped
            // SAFETY: as above.
            assert_eq!(unsafe { libc::gettid() }, tid, "the blocked green thread moved");
            (got, LABEL.with(|l| l.get()))
        });
        let sender = rt.spawn(move || {
            assert_eq!(LABEL.with(|l| l.get()), 0, "a green-local is per green thread");
            LABEL.with(|l| l.set(1));
            tx.send(round).unwrap();
        });
        assert_eq!(receiver.join().unwrap(), (round, round * 10));
        sender.join().unwrap();
    }
    assert!(rt.stats().global.spares_added >= 1, "{:?}", rt.stats().global);
}
