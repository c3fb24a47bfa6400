//! The public API inside loom models, as a dependent crate's models use it: the process-wide
//! pool is recreated for every execution, stacks leased on one loom thread are returned on
//! another, and `stats` balances at the end of each execution.
#![cfg(loom)]

use loom::thread;
use purloin_stack::{StackSize, lease, stats, trim};

#[test]
fn lease_on_one_thread_return_on_another() {
    loom::model(|| {
        let t = thread::spawn(|| {
            let s = lease(StackSize::Small).unwrap();
            s.set_label(1, "spawned");
            s
        });
        let mine = lease(StackSize::Small).unwrap();
        let theirs = t.join().unwrap();
        assert_ne!(mine.limit(), theirs.limit(), "one slot leased twice");
        assert_eq!(theirs.label(), Some((1, "spawned".to_string())));
        let t = thread::spawn(move || drop(theirs));
        drop(mine);
        t.join().unwrap();
        let s = stats();
        assert_eq!((s.leased, s.pooled), (0, s.slots), "{s:?}");
        trim();
    });
}
