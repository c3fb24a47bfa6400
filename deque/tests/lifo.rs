//! A LIFO `Worker` (the default flavour: the owner takes the newest item) and its `Stealer`:
//! order, capacity, overflow and growth on one thread, then crossbeam-deque's concurrent test
//! shapes (`tests/common/shapes.rs`) run against the LIFO flavour.
#![cfg(not(loom))]

mod common;

use common::shapes::{self, Flavour};
use purloin_deque::{Injector, Steal, Worker};

fn both_modes() -> Vec<(&'static str, Worker<u64>)> {
    vec![("bounded", Worker::bounded(64)), ("growable", Worker::new())]
}

#[test]
fn owner_pops_newest_first() {
    for (mode, w) in both_modes() {
        for i in 0..10 {
            w.push(i).unwrap();
        }
        for i in (0..10).rev() {
            assert_eq!(w.pop(), Some(i), "{mode}");
        }
        assert_eq!(w.pop(), None, "{mode}");
        assert!(w.is_empty(), "{mode}");
    }
}

#[test]
fn thieves_take_oldest_first() {
    for (mode, w) in both_modes() {
        let s = w.stealer();
        for i in 0..10 {
            w.push(i).unwrap();
        }
        for i in 0..10 {
            assert_eq!(s.steal(), Steal::Success(i), "{mode}");
        }
        assert_eq!(s.steal(), Steal::Empty, "{mode}");
        assert_eq!(w.pop(), None, "{mode}");
    }
}

#[test]
fn pop_and_steal_meet_in_the_middle() {
    for (mode, w) in both_modes() {
        let s = w.stealer();
        for i in 0..5 {
            w.push(i).unwrap();
        }
        assert_eq!(s.steal(), Steal::Success(0), "{mode}");
        assert_eq!(w.pop(), Some(4), "{mode}");
        assert_eq!(s.steal(), Steal::Success(1), "{mode}");
        assert_eq!(w.pop(), Some(3), "{mode}");
        assert_eq!(w.pop(), Some(2), "{mode}");
        assert_eq!(w.pop(), None, "{mode}");
        assert_eq!(s.steal(), Steal::Empty, "{mode}");
        // The ring is reused after wrapping many times.
        for round in 0..1000u64 {
            w.push(round).unwrap();
            w.push(round + 1).unwrap();
            assert_eq!(s.steal(), Steal::Success(round), "{mode}");
            assert_eq!(w.pop(), Some(round + 1), "{mode}");
        }
    }
}

#[test]
fn bounded_rounds_up_and_refuses_when_full() {
    let w = Worker::bounded(5);
    assert_eq!(w.capacity(), 8);
    assert_eq!(w.max_capacity(), 8);
    for i in 0..8 {
        assert_eq!(w.push(i), Ok(()));
    }
    assert_eq!(w.push(8), Err(8));
    assert_eq!(w.len(), 8);
    // Room appears once a thief has taken an item.
    assert_eq!(w.stealer().steal(), Steal::Success(0));
    assert_eq!(w.push(8), Ok(()));
    assert_eq!(w.push(9), Err(9));
}

#[test]
#[should_panic(expected = "at least one item")]
fn bounded_zero_panics() {
    let _ = Worker::<u8>::bounded(0);
}

#[test]
#[should_panic(expected = "largest supported capacity")]
fn bounded_too_big_panics() {
    let _ = Worker::<u8>::bounded((1 << 30) + 1);
}

#[test]
fn growable_grows_and_respects_max() {
    let w = Worker::new();
    assert_eq!(w.capacity(), 64);
    for i in 0..100_000u64 {
        w.push(i).unwrap();
    }
    assert_eq!(w.len(), 100_000);
    assert!(w.capacity() >= 100_000);
    let s = w.stealer();
    assert_eq!(s.steal(), Steal::Success(0));
    assert_eq!(w.pop(), Some(99_999));

    let w = Worker::with_max_capacity(100);
    assert_eq!(w.max_capacity(), 128);
    for i in 0..128 {
        w.push(i).unwrap();
    }
    assert_eq!(w.push(128), Err(128));
}

#[test]
fn shrink_keeps_items_in_order() {
    let w = Worker::new();
    let s = w.stealer();
    for i in 0..10_000u64 {
        w.push(i).unwrap();
    }
    for _ in 0..5_000 {
        assert!(s.steal().is_success());
    }
    for _ in 0..4_900 {
        assert!(w.pop().is_some());
    }
    w.shrink_to_fit();
    assert_eq!(w.capacity(), 128);
    assert_eq!(w.len(), 100);
    assert_eq!(s.steal(), Steal::Success(5_000));
    assert_eq!(w.pop(), Some(5_099));
    // A bounded queue ignores shrink requests.
    let b = Worker::<u8>::bounded(256);
    b.shrink_to_fit();
    assert_eq!(b.capacity(), 256);
}

#[test]
fn push_was_empty_reports_transitions() {
    for (mode, w) in both_modes() {
        assert_eq!(w.push_was_empty(1), Ok(true), "{mode}");
        assert_eq!(w.push_was_empty(2), Ok(false), "{mode}");
        w.pop();
        w.pop();
        assert_eq!(w.push_was_empty(3), Ok(true), "{mode}");
        assert_eq!(w.stealer().steal(), Steal::Success(3), "{mode}");
        assert_eq!(w.push_was_empty(4), Ok(true), "{mode}");
    }
}

#[test]
fn pop_if_takes_the_newest_only_if_accepted() {
    for (mode, w) in both_modes() {
        for i in 0..3 {
            w.push(i).unwrap();
        }
        // Rejected: the newest stays the newest and stays stealable; nothing else moves.
        assert_eq!(w.pop_if(|top| *top == 0), None, "{mode}");
        assert_eq!(w.len(), 3, "{mode}");
        assert_eq!(w.stealer().steal(), Steal::Success(0), "{mode}");
        assert_eq!(w.pop_if(|top| *top == 2), Some(2), "{mode}");
        assert_eq!(w.pop(), Some(1), "{mode}");
        // Empty: the count given back keeps pushes, pops and steals consistent afterwards.
        assert_eq!(w.pop_if(|_| true), None, "{mode}");
        assert_eq!(w.pop_if(|_| true), None, "{mode}");
        assert!(w.is_empty(), "{mode}");
        w.push(7).unwrap();
        w.push(8).unwrap();
        assert_eq!(w.stealer().steal(), Steal::Success(7), "{mode}");
        assert_eq!(w.pop_if(|top| *top == 8), Some(8), "{mode}");
        assert!(w.stealer().steal().is_empty(), "{mode}");
    }
}

#[test]
fn pop_if_after_thieves_emptied_the_queue() {
    let w = Worker::bounded(4);
    let s = w.stealer();
    w.push(1u64).unwrap();
    w.push(2).unwrap();
    assert_eq!(s.steal(), Steal::Success(1));
    assert_eq!(s.steal(), Steal::Success(2));
    assert_eq!(w.pop_if(|_| true), None);
    for i in 0..4 {
        w.push(i).unwrap();
    }
    assert_eq!(w.push(9), Err(9), "four slots, four items");
    assert_eq!(w.pop_if(|top| *top == 3), Some(3));
}

#[test]
fn pop_if_with_a_pop_batch_gives_kept_items_back_first() {
    let w = Worker::bounded(8).with_pop_batch(4);
    for i in 0..8u64 {
        w.push(i).unwrap();
    }
    // This pop keeps three items out of thieves' reach (6, 5, 4).
    assert_eq!(w.pop(), Some(7));
    assert_eq!(w.pop_if(|top| *top == 6), Some(6));
    // 5 and 4 are stealable again: a thief takes from the oldest end through them.
    let s = w.stealer();
    let mut stolen = Vec::new();
    while let Steal::Success(i) = s.steal() {
        stolen.push(i);
    }
    assert_eq!(stolen, [0, 1, 2, 3, 4, 5]);
}

#[test]
fn pop_if_whose_predicate_panics_leaks_the_item_and_stays_consistent() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::atomic::{AtomicUsize, Ordering};

    static DROPS: AtomicUsize = AtomicUsize::new(0);
    #[derive(Debug)]
    struct Counted(u64);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::Relaxed);
        }
    }

    let w = Worker::bounded(4);
    for i in 0..3 {
        w.push(Counted(i)).unwrap();
    }
    let r = catch_unwind(AssertUnwindSafe(|| w.pop_if(|_| panic!("predicate failed"))));
    assert!(r.is_err());
    // The newest item (2) is gone from the queue and was not dropped: leaked, never twice.
    assert_eq!(DROPS.load(Ordering::Relaxed), 0);
    assert_eq!(w.len(), 2);
    // The worker goes on: a push reuses the slot, the owner and thieves see the rest.
    w.push(Counted(3)).unwrap();
    w.push(Counted(4)).unwrap();
    assert_eq!(w.push(Counted(5)).map_err(|c| c.0), Err(5), "four slots, four items");
    assert_eq!(DROPS.load(Ordering::Relaxed), 1, "the refused item");
    assert_eq!(w.pop_if(|top| top.0 == 4).map(|c| c.0), Some(4));
    assert!(matches!(w.stealer().steal(), Steal::Success(Counted(0))));
    assert_eq!(w.pop().map(|c| c.0), Some(3));
    assert_eq!(w.pop().map(|c| c.0), Some(1));
    assert!(w.pop().is_none());
    assert_eq!(DROPS.load(Ordering::Relaxed), 5, "every item but the leaked one, once");
}

#[test]
#[should_panic(expected = "pop_if on a FIFO worker")]
fn pop_if_on_fifo_panics() {
    let w = Worker::new_fifo();
    w.push(1).unwrap();
    let _ = w.pop_if(|_| true);
}

#[test]
fn steal_half_takes_half_rounded_up() {
    for (mode, victim) in both_modes() {
        let s = victim.stealer();
        for i in 0..9 {
            victim.push(i).unwrap();
        }
        let dest = Worker::bounded(16);
        // ceil(9 / 2) = 5: items 0..=4; 4 is returned, 0..=3 go to dest in order.
        assert_eq!(s.steal_half_into(&dest), Steal::Success(4), "{mode}");
        assert_eq!(victim.len(), 4, "{mode}");
        assert_eq!(dest.len(), 4, "{mode}");
        for i in (0..4).rev() {
            assert_eq!(dest.pop(), Some(i), "{mode}");
        }
        assert_eq!(s.steal_half_into(&dest), Steal::Success(6), "{mode}");
        assert_eq!(dest.pop(), Some(5), "{mode}");
        assert_eq!(s.steal_half_into(&dest), Steal::Success(7), "{mode}");
        assert_eq!(s.steal_half_into(&dest), Steal::Success(8), "{mode}");
        assert_eq!(s.steal_half_into(&dest), Steal::Empty, "{mode}");
        assert!(dest.is_empty(), "{mode}");
    }
}

#[test]
fn steal_half_is_bounded_by_dest_room_and_limit() {
    let victim = Worker::bounded(256);
    for i in 0..200u32 {
        victim.push(i).unwrap();
    }
    let s = victim.stealer();
    // Full destination: exactly one item, returned directly.
    let full = Worker::bounded(2);
    full.push(1000).unwrap();
    full.push(1001).unwrap();
    assert_eq!(s.steal_half_into(&full), Steal::Success(0));
    assert_eq!(full.len(), 2);
    // Room for 3: four items (3 moved + 1 returned).
    let small = Worker::bounded(4);
    small.push(1000).unwrap();
    assert_eq!(s.steal_half_into(&small), Steal::Success(4));
    assert_eq!(small.len(), 4);
    // Default cap: half of 195 would be 98, capped at... 98 < 128, so 98.
    let big = Worker::new();
    assert_eq!(s.steal_half_into(&big), Steal::Success(102));
    assert_eq!(big.len(), 97);
    // Explicit limit; 0 means 1.
    assert_eq!(s.steal_half_into_with_limit(&big, 0), Steal::Success(103));
    assert_eq!(s.steal_half_into_with_limit(&big, 3), Steal::Success(106));
    // A growable destination grows to take the whole half.
    let victim = Worker::new();
    for i in 0..1000u32 {
        victim.push(i).unwrap();
    }
    let dest = Worker::new();
    assert_eq!(victim.stealer().steal_half_into(&dest), Steal::Success(127));
    assert_eq!(dest.len(), 127);
    assert!(dest.capacity() >= 127);
}

#[test]
fn steal_half_into_own_queue_is_a_plain_steal() {
    let w = Worker::bounded(8);
    for i in 0..4 {
        w.push(i).unwrap();
    }
    assert_eq!(w.stealer().steal_half_into(&w), Steal::Success(0));
    assert_eq!(w.len(), 3);
}

#[test]
fn overflow_moves_older_half_to_injector_and_keeps_push_order() {
    let global = Injector::new();
    let w = Worker::bounded(8);
    for i in 0..8 {
        w.push_or_overflow(i, &global);
    }
    assert!(global.is_empty());
    w.push_or_overflow(8, &global);
    assert_eq!(global.len(), 4);
    assert_eq!(w.len(), 5);
    // Injector head first, then the local queue's top: push order.
    for i in 0..4 {
        assert_eq!(global.steal(), Steal::Success(i));
    }
    for i in 4..9 {
        assert_eq!(w.stealer().steal(), Steal::Success(i));
    }
    // Growable at its maximum overflows the same way.
    let w = Worker::with_max_capacity(4);
    for i in 0..5 {
        w.push_or_overflow(i, &global);
    }
    assert_eq!(global.len(), 2);
    assert_eq!(w.len(), 3);
}

#[test]
fn debug_output_does_not_need_debug_items() {
    struct Opaque;
    let w = Worker::bounded(4);
    w.push(Opaque).ok().unwrap();
    assert_eq!(
        format!("{:?}", w),
        "Worker { len: 1, capacity: 4, growable: false, fifo: false, .. }"
    );
    assert_eq!(format!("{:?}", w.stealer()), "Stealer { len: 1, .. }");
    let q = Injector::<Opaque>::new();
    assert_eq!(format!("{:?}", q), "Injector { len: 0, .. }");
    assert_eq!(format!("{:?}", Steal::Success(Opaque)), "Success(..)");
}

#[test]
fn new_is_new_lifo() {
    let (a, b) = (Worker::new(), Worker::new_lifo());
    for w in [&a, &b] {
        w.push(1).unwrap();
        w.push(2).unwrap();
        assert!(!w.is_fifo());
        assert_eq!(w.pop(), Some(2));
    }
    assert!(!Worker::<u8>::default().is_fifo());
}

#[test]
fn smoke() {
    shapes::smoke(Flavour::Lifo);
}

#[test]
fn is_empty() {
    shapes::is_empty(Flavour::Lifo);
}

#[test]
fn spsc() {
    shapes::spsc(Flavour::Lifo);
}

#[test]
fn stampede() {
    shapes::stampede(Flavour::Lifo);
}

#[test]
fn stress() {
    shapes::stress(Flavour::Lifo);
}

#[test]
fn no_starvation() {
    shapes::no_starvation(Flavour::Lifo);
}

#[test]
fn destructors() {
    shapes::destructors(Flavour::Lifo);
}
