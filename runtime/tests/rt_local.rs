//! Green-local storage: per green thread, follows it across workers, dropped at its end.
#![cfg(not(loom))]

#[path = "rt_common/mod.rs"]
mod common;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

purloin::green_local! {
    static ID: Cell<u64> = Cell::new(0);
}

struct Drops(Arc<AtomicUsize>);
impl Drop for Drops {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

purloin::green_local! {
    static GUARD: std::cell::RefCell<Option<Drops>> = std::cell::RefCell::new(None);
}

#[test]
fn each_green_thread_sees_its_own_value_across_yields() {
    let _w = common::watchdog("locals", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let hs: Vec<_> = (1..=50u64)
        .map(|i| {
            rt.spawn(move || {
                ID.with(|c| c.set(i));
                for _ in 0..20 {
                    purloin::yield_now();
                    assert_eq!(ID.with(|c| c.get()), i);
                }
                i
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn values_are_dropped_when_the_green_thread_ends() {
    let _w = common::watchdog("locals drop", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..10)
        .map(|_| {
            let d = drops.clone();
            purloin::spawn(move || GUARD.with(|g| *g.borrow_mut() = Some(Drops(d))))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(drops.load(Ordering::SeqCst), 10);
}

#[test]
fn outside_a_green_thread_access_is_an_error() {
    assert!(ID.try_with(|_| ()).is_err());
}
