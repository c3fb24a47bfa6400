//! Real-thread behaviour of `ParkingLots`: sizing, the signal walk, and an exactly-once stress.
#![cfg(not(loom))]

mod common;

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use common::{spin_until, with_watchdog};
use purloin_parking::{MAX_SIGNAL, ParkingLots, WORKERS_PER_LOT};

#[test]
fn sizing_scales_with_workers() {
    assert_eq!(WORKERS_PER_LOT, 4);
    for (workers, lots) in [(0, 1), (1, 1), (4, 1), (5, 2), (8, 2), (64, 16), (106, 27)] {
        let set = ParkingLots::for_workers(workers);
        assert_eq!(set.len(), lots, "for_workers({workers})");
        assert!(!set.is_empty());
        // Every lot serves at most WORKERS_PER_LOT of the workers.
        let mut per_lot = vec![0; set.len()];
        for w in 0..workers {
            per_lot[set.lot_for_worker(w)] += 1;
        }
        assert!(per_lot.iter().all(|&n| n <= WORKERS_PER_LOT));
    }
}

#[test]
#[should_panic(expected = "a set needs at least one lot")]
fn zero_lots_is_a_clear_panic() {
    let _ = ParkingLots::new(0);
}

#[test]
#[should_panic(expected = "only 2 lots exist")]
fn lot_out_of_range_is_a_clear_panic() {
    let _ = ParkingLots::new(2).lot(2);
}

#[test]
fn signal_task_with_nobody_asleep_wakes_nobody_and_touches_every_lot() {
    let lots = ParkingLots::new(4);
    let before: Vec<_> = (0..4).map(|i| lots.lot(i).state()).collect();
    assert_eq!(lots.signal_task(2, 7), 0);
    assert_eq!(lots.signal_task(0, 0), 0);
    for (i, state) in before.iter().enumerate() {
        assert_ne!(lots.lot(i).state(), *state, "lot {i} was not signalled");
    }
}

#[test]
fn signal_task_walks_to_the_lot_with_a_sleeper() {
    with_watchdog("signal_task_walks_to_the_lot_with_a_sleeper", || {
        let lots = ParkingLots::new(4);
        thread::scope(|s| {
            let lot = lots.lot(2);
            let snapshot = lot.state();
            let sleeper = s.spawn(move || lot.wait(snapshot));
            spin_until(|| lot.waiters() == 1);
            // Starts at lot 0: lots 0 and 1 have nobody, lot 2 has the sleeper.
            let woken = lots.signal_task(1, 0);
            assert!(woken <= 1);
            sleeper.join().unwrap();
        });
    });
}

#[test]
fn signal_task_wakes_at_most_two() {
    with_watchdog("signal_task_wakes_at_most_two", || {
        let lots = ParkingLots::new(2);
        thread::scope(|s| {
            for worker in 0..6 {
                let lots = &lots;
                s.spawn(move || {
                    let lot = lots.lot(lots.lot_for_worker(worker));
                    while !lot.state().is_stopped() {
                        lot.wait(lot.state());
                    }
                });
            }
            spin_until(|| lots.waiters() == 6);
            let woken = lots.signal_task(100, 0);
            assert!(woken <= MAX_SIGNAL, "signal_task woke {woken} > {MAX_SIGNAL}");
            lots.stop();
        });
        assert!(lots.is_stopped());
    });
}

struct Task {
    id: usize,
    drops: &'static AtomicUsize,
}

impl Drop for Task {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::Relaxed);
    }
}

/// Producers push tasks and signal; workers snapshot, pop, wait. Every task runs exactly once,
/// every task is dropped, and nobody hangs with work queued.
#[test]
fn stress_every_task_runs_exactly_once() {
    with_watchdog("stress_every_task_runs_exactly_once", || {
        const WORKERS: usize = 6;
        const PRODUCERS: usize = 2;
        const TASKS_PER_PRODUCER: usize = 20_000;
        const TASKS: usize = PRODUCERS * TASKS_PER_PRODUCER;
        static DROPS: AtomicUsize = AtomicUsize::new(0);

        let lots = ParkingLots::for_workers(WORKERS);
        let queue = Mutex::new(VecDeque::<Task>::new());
        let seen: Vec<AtomicBool> = (0..TASKS).map(|_| AtomicBool::new(false)).collect();
        let ran = AtomicUsize::new(0);
        thread::scope(|s| {
            for worker in 0..WORKERS {
                let (lots, queue, seen, ran) = (&lots, &queue, &seen, &ran);
                s.spawn(move || {
                    let lot = lots.lot(lots.lot_for_worker(worker));
                    loop {
                        let state = lot.state();
                        let task = queue.lock().unwrap().pop_front();
                        match task {
                            Some(task) => {
                                assert!(
                                    !seen[task.id].swap(true, Ordering::Relaxed),
                                    "task {} ran twice",
                                    task.id
                                );
                                ran.fetch_add(1, Ordering::Relaxed);
                            }
                            None if state.is_stopped() => return,
                            None => lot.wait(state),
                        }
                    }
                });
            }
            let producers: Vec<_> = (0..PRODUCERS)
                .map(|p| {
                    let (lots, queue) = (&lots, &queue);
                    s.spawn(move || {
                        for i in 0..TASKS_PER_PRODUCER {
                            let id = p * TASKS_PER_PRODUCER + i;
                            queue.lock().unwrap().push_back(Task { id, drops: &DROPS });
                            lots.signal_task(1, id);
                        }
                    })
                })
                .collect();
            for producer in producers {
                producer.join().unwrap();
            }
            // Workers must drain the queue on their own (no lost wake-up leaves work behind).
            spin_until(|| ran.load(Ordering::Relaxed) == TASKS);
            lots.stop();
        });
        assert!(seen.iter().all(|b| b.load(Ordering::Relaxed)));
        assert_eq!(DROPS.load(Ordering::Relaxed), TASKS);
    });
}
