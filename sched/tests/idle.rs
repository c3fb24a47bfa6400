//! An idle runtime sleeps: no CPU burnt once the work is done.
#![cfg(not(loom))]

mod common;

use std::time::Duration;

use purloin_sched::Builder;

#[test]
fn idle_workers_use_almost_no_cpu() {
    let _w = common::watchdog("idle cpu", Duration::from_secs(60));
    let sched = Builder::new().workers(2).build().unwrap();
    // Some work first, so the workers went through searching and parking.
    let hs: Vec<_> = (0..1000).map(|i| sched.spawn(move || i * 2)).collect();
    for h in hs {
        h.join().unwrap();
    }
    std::thread::sleep(Duration::from_millis(100)); // let the monitor back off
    let before = common::cpu_time();
    std::thread::sleep(Duration::from_secs(1));
    let used = common::cpu_time() - before;
    // A loose bound (not a timing race): spinning workers would burn ~2 s here.
    assert!(used < Duration::from_millis(100), "idle runtime used {used:?} of CPU in 1 s");
}
