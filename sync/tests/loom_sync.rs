//! Loom models of purloin-sync, running its real code: every atomic, the waiter lists' locks
//! and the futex emulation of OS-thread waits are loom's; green threads run on purloin-sched's
//! real scheduler on loom (workers are loom threads, green threads loom threads of
//! purloin-context's loom backend).
//!
//! Run with `cargo xtask loom -p purloin-sync` (preemption bound 2). A lost wake-up shows up as a
//! loom deadlock ("all threads blocked"); a use of a wait node or a message packet without the
//! right happens-before shows up as a causality violation on its loom `UnsafeCell`.
//!
//! Mutation checks (each made, run, and reverted; what loom reported):
//! - removing the `fence(SeqCst)` in `WaitQueue::has_waiters` (butex B1, waker side):
//!   `butex_wait_vs_wake`, `condvar_notify_vs_wait` and `butex_green_waiter_os_waker` fail
//!   with "deadlock" (the wake skipped the lock while the waiter was already queued);
//! - removing the `fence(SeqCst)` in `Waiters::notify` (channel N1): `bounded_full_sender_wakes`
//!   fails with "deadlock" (the sender registered, re-checked a full channel and slept; the
//!   receiver's notify saw no waiter). (`bounded_send_recv` still passes: the disconnection
//!   that follows wakes the receiver through the locked path.)
//! - making `Waiter::finish`'s `DONE` store `Relaxed` (waiter protocol W2):
//!   `rendezvous_hand_off` and `select_two_senders` fail with "Causality violation: Concurrent
//!   write accesses to `UnsafeCell`" (the packet), `rendezvous_close_race` and
//!   `mutex_exclusion_and_wakeup` with "Concurrent read and write accesses".
//! - consuming the interrupt before the abort CAS in `Waiter::abort_interrupted` (I2: consume
//!   only when the abort won): `pending_interrupt_vs_claim_keeps_the_interrupt` fails with
//!   "deadlock" (the claim won, the interrupt was gone, and the next wait parked for good).
//!   `interrupt_vs_wake_exactly_once` passes this mutation at bound 1: its waker and
//!   interrupter race the wait from the start, and the losing abort needs a second preemption.
//! - treating a claimed but unwritten slot as empty in the bounded ring's
//!   `discard_all_messages` (loop `while head != tail` replaced by a stop at the first slot
//!   whose stamp is not `head + 1`): `bounded_receiver_drop_vs_send` fails with "queued
//!   message kept alive by a sender" (the message written after the discard stays queued).
#![cfg(loom)]

use std::time::{Duration, Instant};

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use purloin_sync::channel::{
    RecvError, RecvTimeoutError, SendError, TryRecvError, bounded, unbounded,
};
use purloin_sync::{Butex, ButexWait, Condvar, Mutex, OnceLock, RwLock, Semaphore, WaitGroup};

/// Counts its drops (a message dropped exactly once).
struct D(Arc<AtomicUsize>);

impl Drop for D {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn far() -> Option<Instant> {
    // Under loom an OS-thread wait with a deadline may time out at any point (the futex
    // emulation explores it); the value only has to be in the future.
    Some(Instant::now() + Duration::from_secs(3600))
}

/// Butex: a change followed by a wake is never lost, whether the wake runs before, during or
/// after the waiter's queueing (the waker's no-waiter fast path included).
#[test]
fn butex_wait_vs_wake() {
    loom::model(|| {
        let b = Arc::new(Butex::new(0));
        let b2 = b.clone();
        let t = thread::spawn(move || {
            b2.value().store(1, Ordering::Release);
            b2.wake_one();
        });
        while b.value().load(Ordering::Acquire) == 0 {
            b.wait(0, None);
        }
        t.join().unwrap();
        assert_eq!(b.waiters(), 0);
    });
}

/// Butex: a timeout racing a wake is consistent — the waiter reports `Woken` exactly when the
/// waker's `wake_one` counted it, and its on-stack node is gone either way.
#[test]
fn butex_timeout_vs_wake() {
    loom::model(|| {
        let b = Arc::new(Butex::new(0));
        let woke = Arc::new(AtomicUsize::new(usize::MAX));
        let (b2, w2) = (b.clone(), woke.clone());
        let t = thread::spawn(move || {
            w2.store(b2.wake_one(), Ordering::SeqCst);
        });
        let r = b.wait(0, far());
        t.join().unwrap();
        let n = woke.load(Ordering::SeqCst);
        match r {
            ButexWait::Woken => assert_eq!(n, 1),
            ButexWait::TimedOut => assert_eq!(n, 0),
            ButexWait::ValueChanged | ButexWait::Interrupted => unreachable!("{r:?}"),
        }
        assert_eq!(b.waiters(), 0);
    });
}

/// The models that run the real scheduler use preemption bound 1: the scheduler adds many
/// atomics of its own (bound 2 takes minutes), and at bound 2 its shutdown path
/// (`Scheduler::drop` joining the workers) trips loom's internal `state.notified` assertion in
/// a thread join, a scheduler-side issue unrelated to the butex. The butex protocol itself is
/// checked at bound 2 by the OS-thread models above.
fn model_with_scheduler(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(1);
    b.check(f);
}

/// Butex through the real scheduler: a green thread waits and an OS thread wakes it (the
/// green waiter's wake-up goes through `GreenThread::unpark`).
#[test]
fn butex_green_waiter_os_waker() {
    model_with_scheduler(|| {
        let sched = purloin_sched::Builder::new().workers(1).monitor(false).build().unwrap();
        let b = Arc::new(Butex::new(0));
        let b2 = b.clone();
        let h = sched.spawn(move || {
            while b2.value().load(Ordering::Acquire) == 0 {
                b2.wait(0, None);
            }
        });
        // The waker is a plain OS thread (a loom thread outside the scheduler).
        let t = thread::spawn(move || {
            b.value().store(1, Ordering::Release);
            b.wake_one();
        });
        h.join().unwrap();
        t.join().unwrap();
        drop(sched);
    });
}

/// Butex through the real scheduler: an OS thread waits and a green thread wakes it (the OS
/// waiter sleeps in the futex emulation on its node's state word).
#[test]
fn butex_os_waiter_green_waker() {
    model_with_scheduler(|| {
        let sched = purloin_sched::Builder::new().workers(1).monitor(false).build().unwrap();
        let b = Arc::new(Butex::new(0));
        let b2 = b.clone();
        let h = sched.spawn(move || {
            b2.value().store(1, Ordering::Release);
            b2.wake_one();
        });
        while b.value().load(Ordering::Acquire) == 0 {
            b.wait(0, None);
        }
        h.join().unwrap();
        drop(sched);
    });
}

/// Mutex: exclusion (a non-atomic read-modify-write under the lock is never lost) and no lost
/// wake-up between an unlock and a parking locker.
#[test]
fn mutex_exclusion_and_wakeup() {
    loom::model(|| {
        let m = Arc::new(Mutex::new(0u32));
        let m2 = m.clone();
        let t = thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            *g += 1;
        });
        {
            let mut g = m.lock().unwrap();
            *g += 1;
        }
        t.join().unwrap();
        assert_eq!(*m.lock().unwrap(), 2);
    });
}

/// Condvar: a notification after the waiter checked its predicate is not lost.
#[test]
fn condvar_notify_vs_wait() {
    loom::model(|| {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let p2 = pair.clone();
        let t = thread::spawn(move || {
            *p2.0.lock().unwrap() = true;
            p2.1.notify_one();
        });
        let (m, c) = &*pair;
        let mut ready = m.lock().unwrap();
        while !*ready {
            ready = c.wait(ready).unwrap();
        }
        drop(ready);
        t.join().unwrap();
    });
}

/// Bounded ring (capacity 1): a send then a disconnection reach the receiver in order —
/// the message first, then `RecvError` — with the receiver possibly asleep at each step.
#[test]
fn bounded_send_recv() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        let t = thread::spawn(move || {
            tx.send(7).unwrap();
        });
        assert_eq!(rx.recv(), Ok(7));
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        t.join().unwrap();
    });
}

/// Bounded ring, full: a sender blocked on a full channel is woken by the receive that makes
/// room (the senders' waiter list, N1 in the other direction).
#[test]
fn bounded_full_sender_wakes() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        tx.send(1).unwrap();
        let t = thread::spawn(move || {
            tx.send(2).unwrap();
        });
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        t.join().unwrap();
    });
}

/// Rendezvous: the message is handed over through the waiting side's packet; the sender
/// returns only after the receiver has it (W2 orders the packet accesses).
#[test]
fn rendezvous_hand_off() {
    loom::model(|| {
        let (tx, rx) = bounded::<String>(0);
        let t = thread::spawn(move || {
            tx.send("hi".to_string()).unwrap();
        });
        assert_eq!(rx.recv().as_deref(), Ok("hi"));
        t.join().unwrap();
    });
}

/// Rendezvous, close race: the receiver leaves (drops) while a sender waits or arrives; the
/// sender gets its message back and nothing is dropped twice.
#[test]
fn rendezvous_close_race() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = bounded::<D>(0);
        let d2 = drops.clone();
        let t = thread::spawn(move || match tx.send(D(d2)) {
            Ok(()) => true,
            Err(SendError::Disconnected(m)) => {
                drop(m);
                false
            }
            Err(SendError::Interrupted(_)) => unreachable!("OS threads are not interrupted"),
        });
        let got = rx.try_recv();
        let received = got.is_ok();
        drop(got);
        drop(rx);
        let sent = t.join().unwrap();
        assert_eq!(sent, received);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// Unbounded list with 2 slots per block (under loom): three sends cross a block boundary
/// while the receiver follows; the blocks are installed and freed exactly once, and
/// disconnection comes after the last message.
#[test]
fn unbounded_across_blocks() {
    loom::model(|| {
        let (tx, rx) = unbounded::<u32>();
        let t = thread::spawn(move || {
            for i in 0..3 {
                tx.send(i).unwrap();
            }
        });
        for i in 0..3 {
            assert_eq!(rx.recv(), Ok(i));
        }
        assert_eq!(rx.recv(), Err(RecvError::Disconnected));
        t.join().unwrap();
    });
}

/// Unbounded, receivers leave while a sender sends: queued messages are dropped by the
/// disconnection or the channel's destructor, exactly once.
#[test]
fn unbounded_receiver_drop_vs_send() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = unbounded::<D>();
        let d2 = drops.clone();
        let t = thread::spawn(move || {
            for _ in 0..2 {
                let _ = tx.send(D(d2.clone()));
            }
        });
        drop(rx);
        t.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    });
}

/// Bounded ring, the last receiver leaves while a sender sends: the message is dropped
/// exactly once, and already by the time the sender is done while it still holds its
/// `Sender` (by the disconnection, or with the `SendError` that hands it back).
#[test]
fn bounded_receiver_drop_vs_send() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = bounded::<D>(1);
        let d2 = drops.clone();
        let t = thread::spawn(move || {
            let _ = tx.send(D(d2));
            tx
        });
        drop(rx);
        let tx = t.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1, "queued message kept alive by a sender");
        drop(tx);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    });
}

/// Timeout racing a send on the bounded ring: the receiver either gets the message or times
/// out, and in the latter case the message is still there for the next receive.
#[test]
fn recv_timeout_vs_send() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        let t = thread::spawn(move || {
            tx.send(5).unwrap();
        });
        match rx.recv_deadline(far().unwrap()) {
            Ok(v) => assert_eq!(v, 5),
            Err(RecvTimeoutError::Timeout) => assert_eq!(rx.recv(), Ok(5)),
            Err(RecvTimeoutError::Disconnected) => unreachable!("sent before disconnecting"),
            Err(RecvTimeoutError::Interrupted) => unreachable!("OS threads are not interrupted"),
        }
        t.join().unwrap();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

/// Select over two rendezvous channels, one sender on each: exactly one message is taken by
/// the select (one CAS wins), the other sender is then served by a plain receive.
#[test]
fn select_two_senders() {
    loom::model(|| {
        let (tx1, rx1) = bounded::<u32>(0);
        let (tx2, rx2) = bounded::<u32>(0);
        let t1 = thread::spawn(move || tx1.send(1).unwrap());
        let t2 = thread::spawn(move || tx2.send(2).unwrap());
        let first = purloin_sync::select! {
            recv(rx1) -> m => m.unwrap(),
            recv(rx2) -> m => m.unwrap(),
        };
        let second = if first == 1 { rx2.recv().unwrap() } else { rx1.recv().unwrap() };
        assert_eq!(first + second, 3);
        t1.join().unwrap();
        t2.join().unwrap();
    });
}

/// Semaphore: a release hands its permit to the queued acquirer (FIFO hand-off under the queue
/// lock), never losing it between the fast path and the queue.
#[test]
fn semaphore_release_vs_acquire() {
    loom::model(|| {
        let sem = Arc::new(Semaphore::new(0));
        let s2 = sem.clone();
        let t = thread::spawn(move || {
            s2.add_permits(1);
        });
        let p = sem.acquire();
        assert_eq!(p.num_permits(), 1);
        drop(p);
        t.join().unwrap();
        assert_eq!(sem.available_permits(), 1);
    });
}

/// RwLock: a writer and a reader exclude each other, and the one that waits is woken.
#[test]
fn rwlock_writer_vs_reader() {
    loom::model(|| {
        let l = Arc::new(RwLock::new(0u32));
        let l2 = l.clone();
        let t = thread::spawn(move || {
            *l2.write().unwrap() += 1;
        });
        let seen = *l.read().unwrap();
        assert!(seen == 0 || seen == 1);
        t.join().unwrap();
        assert_eq!(*l.read().unwrap(), 1);
    });
}

/// OnceLock: two initialisers race; one runs, the other waits for it (parks) and both see the
/// same value.
#[test]
fn once_lock_race() {
    loom::model(|| {
        let c = Arc::new(OnceLock::new());
        let c2 = c.clone();
        let t = thread::spawn(move || *c2.get_or_init(|| 1u32));
        let mine = *c.get_or_init(|| 2u32);
        let theirs = t.join().unwrap();
        assert_eq!(mine, theirs);
    });
}

/// WaitGroup: `wait` returns only after the last `done`, whose writes it sees.
#[test]
fn wait_group_done_vs_wait() {
    loom::model(|| {
        let wg = Arc::new(WaitGroup::new());
        let v = Arc::new(AtomicUsize::new(0));
        wg.add(1);
        let (wg2, v2) = (wg.clone(), v.clone());
        let t = thread::spawn(move || {
            v2.store(7, Ordering::Relaxed);
            wg2.done();
        });
        wg.wait();
        assert_eq!(v.load(Ordering::Relaxed), 7);
        t.join().unwrap();
    });
}

/// A cell written by the interrupter and read by the interrupted waiter.
struct Note(loom::cell::UnsafeCell<u32>);

// SAFETY (test): accesses are ordered by the interrupt (loom checks that they are).
unsafe impl Sync for Note {}

/// An interrupt racing a wake-up (waiter protocol I2, sched I1): the green waiter's butex wait
/// has exactly one outcome. `Woken` exactly when the waker's `wake_one` counted it, and then
/// the interrupt stays pending for the next wait; `Interrupted` exactly when it did not, and
/// then the interrupt is consumed and the interrupter's write before it is visible.
#[test]
fn interrupt_vs_wake_exactly_once() {
    model_with_scheduler(|| {
        let sched = purloin_sched::Builder::new().workers(1).monitor(false).build().unwrap();
        let b = Arc::new(Butex::new(0));
        let note = Arc::new(Note(loom::cell::UnsafeCell::new(0u32)));
        let (b2, n2) = (b.clone(), note.clone());
        let h = sched.spawn(move || {
            let r = b2.wait(0, None);
            if r == ButexWait::Interrupted {
                // SAFETY (test): written before the interrupt, which this wait saw.
                assert_eq!(n2.0.with(|p| unsafe { *p }), 7);
            }
            // After a wake-up the interrupt is still to come or pending: the next wait (the
            // word is still 0) reports it. Had the wake-up consumed it, this would park for
            // good (a loom deadlock).
            let next = (r == ButexWait::Woken).then(|| b2.wait(0, None));
            (r, next)
        });
        let target = *h.thread();
        let n3 = note.clone();
        let interrupter = thread::spawn(move || {
            // SAFETY (test): read by the waiter only after it saw the interrupt.
            n3.0.with_mut(|p| unsafe { *p = 7 });
            target.interrupt();
        });
        // The main thread is the waker.
        let woke = b.wake_one();
        interrupter.join().unwrap();
        let (r, next) = h.join().unwrap();
        match r {
            ButexWait::Woken => {
                assert_eq!(woke, 1);
                assert_eq!(next, Some(ButexWait::Interrupted));
            }
            ButexWait::Interrupted => assert_eq!(woke, 0),
            r => panic!("{r:?}"),
        }
        drop(sched);
    });
}

/// A pending interrupt against a claim racing the waiter's abort (I2): the waiter sees its
/// interrupt before it parks and aborts, while a waker claims it. If the claim wins, the wait
/// returns `Woken` and the interrupt must still be pending: the next wait reports it at once
/// (had the losing abort consumed it, that wait would park for good: a loom deadlock).
#[test]
fn pending_interrupt_vs_claim_keeps_the_interrupt() {
    model_with_scheduler(|| {
        let sched = purloin_sched::Builder::new().workers(1).monitor(false).build().unwrap();
        let b = Arc::new(Butex::new(0));
        let b2 = b.clone();
        let queued = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let q2 = queued.clone();
        let h = sched.spawn(move || {
            purloin_sched::current().unwrap().interrupt();
            q2.store(true, Ordering::Release);
            let r = b2.wait(0, None);
            let next = (r == ButexWait::Woken).then(|| b2.wait(0, None));
            (r, next)
        });
        // Wake once the waiter is about to queue (a yield, not a preemption: the one
        // preemption the bound allows goes to the race between the claim and the abort).
        while !queued.load(Ordering::Acquire) {
            thread::yield_now();
        }
        let woke = b.wake_one();
        let (r, next) = h.join().unwrap();
        match r {
            ButexWait::Woken => {
                assert_eq!(woke, 1);
                assert_eq!(next, Some(ButexWait::Interrupted));
            }
            ButexWait::Interrupted => assert_eq!(woke, 0),
            r => panic!("{r:?}"),
        }
        drop(sched);
    });
}
