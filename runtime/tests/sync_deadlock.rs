//! Partial deadlock detection (wait-for cycles) and the long-runner report for green threads
//! that block their OS thread.
#![cfg(not(loom))]

mod sync_util;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use purloin::sched::WaitKind;
use purloin::sync::{Barrier, Mutex, RwLock};
use sync_util::{DropCounter, runtime, wait_until, watchdog};

fn spawn_named<F, T>(rt: &purloin::Runtime, name: &str, f: F) -> purloin::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let opts = purloin::sched::SpawnOptions { name: Some(name.into()), ..Default::default() };
    rt.scheduler().spawn_with(opts, f).unwrap()
}

/// Two green threads lock two mutexes in opposite orders: the deadlock report names both in a
/// wait-for cycle, with the mutex each waits on and its holder. Other green threads keep
/// running (a partial deadlock, which Go's global check cannot see). Dropping the runtime
/// unwinds the two (their destructors run).
#[test]
#[cfg(any(debug_assertions, feature = "deadlock-detection"))]
fn opposite_lock_order_is_reported_as_a_cycle() {
    let _w = watchdog("deadlock cycle", Duration::from_secs(60));
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = runtime(2);
    let a = Arc::new(Mutex::new(()));
    let b = Arc::new(Mutex::new(()));
    let both = Arc::new(Barrier::new(2));
    let spawn_locker = |first: Arc<Mutex<()>>, second: Arc<Mutex<()>>, name: &str| {
        let (both, d) = (both.clone(), drops.clone());
        spawn_named(&rt, name, move || {
            let _c = DropCounter(d);
            let _g1 = first.lock().unwrap();
            both.wait();
            let _g2 = second.lock().unwrap();
        })
    };
    let t1 = spawn_locker(a.clone(), b.clone(), "locker-ab");
    let t2 = spawn_locker(b.clone(), a.clone(), "locker-ba");
    let (id1, id2) = (t1.thread().id(), t2.thread().id());
    let report = rt
        .spawn(move || {
            loop {
                if let Some(r) = purloin::detect_deadlock() {
                    return r;
                }
                purloin::sleep(Duration::from_millis(1));
            }
        })
        .join()
        .unwrap();
    assert_eq!(report.cycles.len(), 1, "{report}");
    let mut cycle = report.cycles[0].clone();
    cycle.sort();
    let mut expect = vec![id1, id2];
    expect.sort();
    assert_eq!(cycle, expect, "{report}");
    for p in report.parked.iter().filter(|p| expect.contains(&p.thread.id())) {
        let wait = p.wait.expect("the wait is recorded");
        assert_eq!(wait.kind, WaitKind::Mutex);
        assert!(wait.holder.is_some());
    }
    let text = report.to_string();
    assert!(text.contains("locker-ab") && text.contains("locker-ba"), "{text}");
    assert!(text.contains("a mutex"), "{text}");
    rt.shutdown_timeout(Duration::from_millis(100));
    assert_eq!(drops.load(Ordering::SeqCst), 2, "both deadlocked green threads were unwound");
    drop((t1, t2));
}

/// A write lock held by a parked green thread and wanted by another that holds what the first
/// waits for: a cycle through an RwLock and a Mutex.
#[test]
#[cfg(any(debug_assertions, feature = "deadlock-detection"))]
fn rwlock_and_mutex_cycle_is_reported() {
    let _w = watchdog("rwlock cycle", Duration::from_secs(60));
    let rt = runtime(2);
    let l = Arc::new(RwLock::new(0));
    let m = Arc::new(Mutex::new(0));
    let both = Arc::new(Barrier::new(2));
    let (l1, m1, b1) = (l.clone(), m.clone(), both.clone());
    let t1 = rt.spawn(move || {
        let _w = l1.write().unwrap();
        b1.wait();
        let _g = m1.lock().unwrap();
    });
    let (l2, m2, b2) = (l.clone(), m.clone(), both.clone());
    let t2 = rt.spawn(move || {
        let _g = m2.lock().unwrap();
        b2.wait();
        let _w = l2.write().unwrap();
    });
    let report = rt
        .spawn(|| {
            loop {
                if let Some(r) = purloin::detect_deadlock() {
                    return r;
                }
                purloin::sleep(Duration::from_millis(1));
            }
        })
        .join()
        .unwrap();
    let mut cycle = report.cycles[0].clone();
    cycle.sort();
    let mut expect = vec![t1.thread().id(), t2.thread().id()];
    expect.sort();
    assert_eq!(cycle, expect, "{report}");
    rt.shutdown_timeout(Duration::from_millis(100));
}

/// Issue point 5: a green thread that blocks its OS thread in a std lock (or
/// `std::thread::sleep`) past the monitor's threshold is reported by the scheduler's monitor,
/// by name (sched's long-runner report; counted in `stats().global.long_runners`).
#[test]
fn a_green_thread_blocking_its_worker_in_a_std_lock_is_reported() {
    let _w = watchdog("long runner", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new()
        .workers(2)
        .long_run_threshold(Duration::from_millis(10))
        .build()
        .unwrap();
    let std_lock = Arc::new(std::sync::Mutex::new(()));
    let held = std_lock.lock().unwrap();
    let l2 = std_lock.clone();
    let h = spawn_named(&rt, "stuck-in-std-mutex", move || {
        // Blocks the worker's OS thread: the wrong lock for a green thread.
        drop(l2.lock().unwrap());
    });
    wait_until(|| rt.stats().global.long_runners >= 1);
    drop(held);
    h.join().unwrap();

    let before = rt.stats().global.long_runners;
    spawn_named(&rt, "sleeps-the-os-thread", || std::thread::sleep(Duration::from_millis(100)))
        .join()
        .unwrap();
    wait_until(|| rt.stats().global.long_runners > before);
}

/// Every build records what a parked green thread waits on (release builds printed "parked
/// (no wait recorded)" before): run with `--release` to check the release side.
#[test]
fn waits_are_recorded_in_every_build() {
    let _w = watchdog("wait kinds", Duration::from_secs(60));
    let rt = runtime(2);
    let (tx, rx) = purloin::sync::channel::bounded::<u32>(1);
    let (tx2, rx2) = purloin::sync::channel::bounded::<u32>(0);
    let m = Arc::new(Mutex::new(()));
    let guard_holder = m.clone();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = purloin::sync::channel::bounded::<()>(1);
    let holder = spawn_named(&rt, "holder", move || {
        let _g = guard_holder.lock().unwrap();
        locked_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    locked_rx.recv().unwrap();
    let recv = spawn_named(&rt, "recv", move || rx.recv());
    let send = spawn_named(&rt, "send", move || tx2.send(1));
    let m2 = m.clone();
    let lock = spawn_named(&rt, "lock", move || drop(m2.lock()));
    wait_until(|| rt.scheduler().parked().len() == 4);
    let kinds: Vec<(String, Option<WaitKind>)> = rt
        .scheduler()
        .parked()
        .into_iter()
        .map(|p| (p.name.as_deref().unwrap_or("").to_string(), p.wait.map(|w| w.kind)))
        .collect();
    let kind_of = |n: &str| kinds.iter().find(|(name, _)| name == n).and_then(|(_, k)| *k);
    assert_eq!(kind_of("recv"), Some(WaitKind::ChannelRecv), "{kinds:?}");
    assert_eq!(kind_of("send"), Some(WaitKind::ChannelSend), "{kinds:?}");
    assert_eq!(kind_of("lock"), Some(WaitKind::Mutex), "{kinds:?}");
    assert_eq!(kind_of("holder"), Some(WaitKind::ChannelRecv), "{kinds:?}");
    release_tx.send(()).unwrap();
    tx.send(1).unwrap();
    assert_eq!(rx2.recv(), Ok(1));
    holder.join().unwrap();
    lock.join().unwrap();
    assert_eq!(recv.join().unwrap(), Ok(1));
    assert!(send.join().unwrap().is_ok());
}
