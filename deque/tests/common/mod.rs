//! Shared helpers of the stress tests: drop-counted items, an exactly-once ledger, a watchdog.
#![allow(dead_code)]

pub mod shapes;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// Counts live items; every `Item` adds one when created and removes one when dropped.
#[derive(Default)]
pub struct Ledger {
    pub live: AtomicUsize,
    pub created: AtomicUsize,
    /// One flag per id: set when a consumer takes the item; set twice = duplicate delivery.
    seen: Vec<AtomicBool>,
    pub consumed: AtomicUsize,
    pub checksum: AtomicU64,
}

impl Ledger {
    pub fn new(ids: usize) -> Arc<Ledger> {
        Arc::new(Ledger {
            seen: (0..ids).map(|_| AtomicBool::new(false)).collect(),
            ..Ledger::default()
        })
    }

    /// Records that `item` was delivered to a consumer (and drops it). Panics on a duplicate.
    pub fn consume(&self, item: Item) {
        let id = item.id;
        assert!(!self.seen[id].swap(true, Ordering::Relaxed), "item {id} was delivered twice");
        self.consumed.fetch_add(1, Ordering::Relaxed);
        self.checksum.fetch_add(id as u64, Ordering::Relaxed);
        drop(item);
    }

    /// Asserts every id in `0..n` was delivered exactly once and nothing is alive.
    pub fn assert_all_delivered(&self, n: usize) {
        assert_eq!(self.consumed.load(Ordering::Relaxed), n, "delivered count");
        let expected: u64 = (0..n as u64).sum();
        assert_eq!(self.checksum.load(Ordering::Relaxed), expected, "checksum of delivered ids");
        assert!(self.seen[..n].iter().all(|s| s.load(Ordering::Relaxed)), "an item was lost");
        self.assert_no_leak();
    }

    pub fn assert_no_leak(&self) {
        assert_eq!(self.live.load(Ordering::Relaxed), 0, "items leaked or double-dropped");
    }
}

/// A queue item that counts its own drops, and is big enough (3 words) to show torn copies.
pub struct Item {
    pub id: usize,
    check: usize,
    ledger: Arc<Ledger>,
}

impl Item {
    pub fn new(id: usize, ledger: &Arc<Ledger>) -> Item {
        ledger.live.fetch_add(1, Ordering::Relaxed);
        ledger.created.fetch_add(1, Ordering::Relaxed);
        Item { id, check: !id, ledger: ledger.clone() }
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        assert_eq!(self.check, !self.id, "item {} was corrupted or dropped twice", self.id);
        self.check = 0;
        let before = self.ledger.live.fetch_sub(1, Ordering::Relaxed);
        assert!(before > 0, "more drops than items");
    }
}

/// Aborts the test process if `f` does not finish within `limit`: a hang fails instead of
/// blocking CI.
pub fn with_watchdog<R>(name: &str, limit: Duration, f: impl FnOnce() -> R) -> R {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let name = name.to_string();
    let watchdog = thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(limit) {
            eprintln!("watchdog: test '{name}' did not finish within {limit:?}; aborting");
            std::process::abort();
        }
    });
    let result = f();
    drop(done_tx);
    watchdog.join().unwrap();
    result
}

/// A generous limit for stress tests on a busy 2-core CI machine in debug builds.
pub const LIMIT: Duration = Duration::from_secs(300);

/// Backs off politely when a loop found nothing (no timing involved: it only yields).
pub fn idle(spins: &mut u32) {
    *spins += 1;
    if *spins < 16 {
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
}

/// Records the id of every dropped [`Logged`] item: the destructor shapes check with it that
/// taken items were dropped by their takers and the rest by the queue, each once.
#[derive(Default)]
pub struct DropLog(Mutex<Vec<usize>>);

/// An item that writes its id into a [`DropLog`] when dropped.
pub struct Logged<'a>(pub usize, &'a DropLog);

impl Drop for Logged<'_> {
    fn drop(&mut self) {
        self.1.0.lock().unwrap().push(self.0);
    }
}

impl DropLog {
    pub fn item(&self, id: usize) -> Logged<'_> {
        Logged(id, self)
    }

    /// How many items were dropped since the last call (and forgets them).
    pub fn take_count(&self) -> usize {
        std::mem::take(&mut *self.0.lock().unwrap()).len()
    }

    /// Asserts that the items dropped since the last call are `left` ids in one contiguous run
    /// (what remains of a queue consumed only at its ends).
    pub fn assert_contiguous_rest(&self, left: usize) {
        let mut rest = std::mem::take(&mut *self.0.lock().unwrap());
        assert_eq!(rest.len(), left, "the queue dropped every item left in it");
        rest.sort_unstable();
        assert!(rest.windows(2).all(|pair| pair[0] + 1 == pair[1]), "left items are contiguous");
    }
}

/// A stampede consumer: takes items with `steal` until `left` reaches 0, checking that the ids
/// it gets only increase (it takes from one end, oldest first), and hands each to `ledger`.
pub fn consume_increasing(
    mut steal: impl FnMut() -> purloin_deque::Steal<Item>,
    left: &AtomicUsize,
    ledger: &Ledger,
) {
    let mut last = None;
    while left.load(Ordering::Relaxed) > 0 {
        if let purloin_deque::Steal::Success(item) = steal() {
            assert!(last < Some(item.id), "a consumer went backwards");
            last = Some(item.id);
            left.fetch_sub(1, Ordering::Relaxed);
            ledger.consume(item);
        }
    }
}
