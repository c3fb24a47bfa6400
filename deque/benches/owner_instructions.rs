//! The owner's push+pop path of each queue, one `#[inline(never)]` function per queue, for
//! counting instructions with callgrind (repeatable on a loaded machine, unlike time):
//!
//! ```text
//! cargo bench -p purloin-deque --bench owner_instructions --no-run
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     --toggle-collect='owner_instructions::purloin_bounded' \
//!     target/release/deps/owner_instructions-<hash> purloin_bounded
//! ```
//!
//! Each function pushes `N` items and pops them all, on a queue that has already been through
//! one such round (so growable rings have grown); callgrind's total divided by `N` is the
//! instructions per push+pop pair. Run without valgrind it runs every function once, as a
//! smoke test. The names match the rows of `owner_push_pop` and `owner_push_pop_fifo` in
//! `benches/deque.rs`.
#![cfg(not(loom))]
#![allow(missing_docs)]

use std::collections::VecDeque;
use std::hint::black_box;

/// Items per measured round.
const N: usize = 1 << 16;

macro_rules! owner_round {
    ($name:ident, $queue:ty, $push:expr, $pop:expr) => {
        #[inline(never)]
        fn $name(q: &$queue) {
            // A distinct constant per function, so the linker cannot fold two identical
            // bodies into one symbol (callgrind would then count the other's name).
            black_box(stringify!($name));
            for i in 0..N {
                $push(q, black_box(i));
            }
            while let Some(x) = $pop(q) {
                black_box(x);
            }
        }
    };
}

type Purloin = purloin_deque::Worker<usize>;
owner_round!(purloin_bounded, Purloin, |q: &Purloin, i| q.push(i).unwrap(), Purloin::pop);
owner_round!(
    purloin_bounded_pop_batch_16,
    Purloin,
    |q: &Purloin, i| q.push(i).unwrap(),
    Purloin::pop
);
owner_round!(purloin_growable, Purloin, |q: &Purloin, i| q.push(i).unwrap(), Purloin::pop);
owner_round!(purloin_fifo_bounded, Purloin, |q: &Purloin, i| q.push(i).unwrap(), Purloin::pop);
owner_round!(purloin_fifo_growable, Purloin, |q: &Purloin, i| q.push(i).unwrap(), Purloin::pop);
type St3Lifo = st3::lifo::Worker<usize>;
owner_round!(st3_lifo, St3Lifo, |q: &St3Lifo, i| q.push(i).unwrap(), St3Lifo::pop);
type St3Fifo = st3::fifo::Worker<usize>;
owner_round!(st3_fifo, St3Fifo, |q: &St3Fifo, i| q.push(i).unwrap(), St3Fifo::pop);
type Crossbeam = crossbeam_deque::Worker<usize>;
owner_round!(crossbeam_lifo, Crossbeam, Crossbeam::push, Crossbeam::pop);
owner_round!(crossbeam_fifo, Crossbeam, Crossbeam::push, Crossbeam::pop);
type Floor = std::cell::RefCell<VecDeque<usize>>;
owner_round!(std_vecdeque, Floor, |q: &Floor, i| q.borrow_mut().push_back(i), |q: &Floor| q
    .borrow_mut()
    .pop_back());

/// Runs `round` twice on `q`: a warm-up, then the one callgrind counts.
fn twice<Q>(q: Q, round: fn(&Q)) {
    round(&q);
    round(&q);
}

fn main() {
    let only = std::env::args().nth(1);
    let runs: [(&str, &dyn Fn()); 10] = [
        ("purloin_bounded", &|| twice(Purloin::bounded(N), purloin_bounded)),
        ("purloin_bounded_pop_batch_16", &|| {
            let w = purloin_deque::Worker::builder().bounded(N).pop_batch(16).build();
            twice(w, purloin_bounded_pop_batch_16)
        }),
        ("purloin_growable", &|| twice(Purloin::new_lifo(), purloin_growable)),
        ("purloin_fifo_bounded", &|| twice(Purloin::bounded_fifo(N), purloin_fifo_bounded)),
        ("purloin_fifo_growable", &|| twice(Purloin::new_fifo(), purloin_fifo_growable)),
        ("st3_lifo", &|| twice(St3Lifo::new(N), st3_lifo)),
        ("st3_fifo", &|| twice(St3Fifo::new(N), st3_fifo)),
        ("crossbeam_lifo", &|| twice(Crossbeam::new_lifo(), crossbeam_lifo)),
        ("crossbeam_fifo", &|| twice(Crossbeam::new_fifo(), crossbeam_fifo)),
        ("std_vecdeque", &|| twice(Floor::new(VecDeque::with_capacity(N)), std_vecdeque)),
    ];
    for (name, run) in runs {
        if only.as_deref().is_none_or(|o| o == name) {
            run();
        }
    }
}
