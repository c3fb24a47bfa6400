//! Profiling helper: the instructions one fork-join costs, for `purloin::join`,
//! `purloin_sched::join` and `rayon::join`, counted with callgrind (repeatable on a busy
//! machine, unlike timings). Each run computes fib(N) with fork-join on one worker; the
//! difference between two sizes cancels start-up, so per fork is
//! `(Ir(fib 22) - Ir(fib 18)) / (28,656 - 4,180)`:
//!
//! ```text
//! cargo bench -p purloin --bench profile_fork_cost --no-run
//! for n in 18 22; do
//!   valgrind --tool=callgrind target/release/deps/profile_fork_cost-* purloin $n
//! done
//! ```
//!
//! (`purloin`, `sched` or `rayon` as the first argument; fib(n) forks fib(n+1) - 1 times.)
//!
//! Scoped spawns the same way: `scope`, `scope-handles` or `rayon-scope` as the first argument
//! and the number of spawns second; one scope spawns that many no-op closures (a handle-less
//! `Scope::spawn_detached`, `Scope::spawn` with its handle dropped, or rayon's `Scope::spawn`)
//! and waits for them. Per spawn is `(Ir(50,000) - Ir(10,000)) / 40,000`. Skynet by scope
//! (each node a scope of 10 handle-less spawns, as `skynet_1m/purloin_scope` in
//! `benches/runtime.rs`; `scope-tree-handles`: `Scope::spawn` with each handle dropped):
//! `scope-tree` or `rayon-scope-tree` and the number of leaves (a power
//! of ten); per spawn is `(Ir(100,000) - Ir(10,000)) / 100,000` (111,110 - 11,110 spawns).
//!
//! With a worker count and a repeat count after `n` (`purloin 25 2 20`), it runs fib(n) that
//! many times on that many workers and prints, for `purloin`, what the scheduler did per run
//! (forks whose job was stolen, switches, worker parks), the median time and ns per fork: what
//! costs more than instructions once a second worker steals (`cargo bench -p purloin --bench
//! profile_fork_cost -- purloin 25 2 20`; `rayon 25 2 20` for the time alone). The same for
//! skynet by scope: `scope-tree 1000000 2 10` prints, per run, the spawns, the children their
//! scope's owner ran inline, those that ran as green threads of their own (the difference), the
//! entries stolen, the steals, switches and worker parks (`rayon-scope-tree 1000000 2 10` for
//! the time alone); `scope-tree-handles` the same with `Scope::spawn`, and `scope`,
//! `scope-handles`, `rayon-scope` with `n` spawns into one scope.
use std::hint::black_box;
use std::time::Instant;

fn fib_purloin(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = purloin::join(|| fib_purloin(n - 1), || fib_purloin(n - 2));
    a + b
}

fn fib_sched(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = purloin_sched::join(|| fib_sched(n - 1), || fib_sched(n - 2));
    a + b
}

fn fib_rayon(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn scope_purloin(n: u64) -> u64 {
    purloin::scope(|s| {
        for i in 0..n {
            s.spawn_detached(move || {
                black_box(i);
            });
        }
    });
    n
}

fn scope_handles_purloin(n: u64) -> u64 {
    purloin::scope(|s| {
        for i in 0..n {
            s.spawn(move || {
                black_box(i);
            });
        }
    });
    n
}

/// Skynet by scope (10 handle-less spawns per node) over `n` leaves; spawns `(10n - 1) / 9 - 1`
/// green threads.
fn tree_purloin(num: u64, n: u64) -> u64 {
    if n == 1 {
        return num;
    }
    let step = n / 10;
    let mut parts = [0u64; 10];
    purloin::scope(|s| {
        for (i, p) in parts.iter_mut().enumerate() {
            s.spawn_detached(move || *p = tree_purloin(num + i as u64 * step, step));
        }
    });
    parts.iter().sum()
}

/// [`tree_purloin`] in std's shape: `Scope::spawn`, each handle dropped unjoined.
fn tree_handles_purloin(num: u64, n: u64) -> u64 {
    if n == 1 {
        return num;
    }
    let step = n / 10;
    let mut parts = [0u64; 10];
    purloin::scope(|s| {
        for (i, p) in parts.iter_mut().enumerate() {
            s.spawn(move || *p = tree_handles_purloin(num + i as u64 * step, step));
        }
    });
    parts.iter().sum()
}

fn tree_rayon(num: u64, n: u64) -> u64 {
    if n == 1 {
        return num;
    }
    let step = n / 10;
    let mut parts = [0u64; 10];
    rayon::scope(|s| {
        for (i, p) in parts.iter_mut().enumerate() {
            s.spawn(move |_| *p = tree_rayon(num + i as u64 * step, step));
        }
    });
    parts.iter().sum()
}

fn scope_rayon(n: u64) -> u64 {
    rayon::scope(|s| {
        for i in 0..n {
            s.spawn(move |_| {
                black_box(i);
            });
        }
    });
    n
}

/// `fib(n)` (`purloin`, `rayon`) or skynet by scope over `n` leaves (`scope-tree`,
/// `rayon-scope-tree`) `reps` times on `workers` workers, printing the scheduler's counters
/// per run for purloin.
fn repeated(which: &str, n: u64, workers: usize, reps: usize) {
    let tree = which.contains("scope-tree");
    let flat = matches!(which, "scope" | "scope-handles" | "rayon-scope");
    let (units, unit) = if tree {
        ((10 * n - 1) / 9 - 1, "spawn")
    } else if flat {
        (n, "spawn")
    } else {
        (fib_forks(n), "fork")
    };
    let mut times = Vec::with_capacity(reps);
    match which {
        "purloin" | "scope-tree" | "scope-tree-handles" | "scope" | "scope-handles" => {
            let rt = purloin::runtime::Builder::new()
                .workers(workers)
                .stack_size(purloin::StackSize::Small)
                .build()
                .unwrap();
            for _ in 0..reps {
                let before = rt.stats().total;
                let t = Instant::now();
                if which == "scope" {
                    black_box(rt.block_on(move || scope_purloin(black_box(n))));
                } else if which == "scope-handles" {
                    black_box(rt.block_on(move || scope_handles_purloin(black_box(n))));
                } else if which == "scope-tree-handles" {
                    black_box(rt.block_on(move || tree_handles_purloin(0, black_box(n))));
                } else if tree {
                    black_box(rt.block_on(move || tree_purloin(0, black_box(n))));
                } else {
                    black_box(rt.block_on(move || fib_purloin(black_box(n))));
                }
                times.push(t.elapsed());
                let s = rt.stats().total;
                // For the tree, every spawn is a handle-less scope child: those not run inline
                // by their scope's owner ran as green threads of their own.
                let inline = s.inline_joins - before.inline_joins;
                let spawned = s.spawned - before.spawned;
                println!(
                    "spawned {spawned} inline {inline} as-g {} stolen {} steals {} switches {} \
                     parks {}",
                    spawned.saturating_sub(inline),
                    s.stolen - before.stolen,
                    s.steals - before.steals,
                    s.switches - before.switches,
                    s.parks - before.parks,
                );
            }
        }
        "rayon" | "rayon-scope-tree" => {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(workers).build().unwrap();
            for _ in 0..reps {
                let t = Instant::now();
                if tree {
                    black_box(pool.install(|| tree_rayon(0, black_box(n))));
                } else {
                    black_box(pool.install(|| fib_rayon(black_box(n))));
                }
                times.push(t.elapsed());
            }
        }
        "rayon-scope" => {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(workers).build().unwrap();
            for _ in 0..reps {
                let t = Instant::now();
                black_box(pool.install(|| scope_rayon(black_box(n))));
                times.push(t.elapsed());
            }
        }
        other => panic!(
            "unknown contender {other:?} for repeated runs: use purloin, rayon, scope, \
             scope-handles, rayon-scope, scope-tree, scope-tree-handles or rayon-scope-tree"
        ),
    }
    times.sort();
    let median = times[times.len() / 2];
    let what = if tree {
        format!("skynet by scope over {n} leaves")
    } else if flat {
        format!("{n} spawns into one scope")
    } else {
        format!("fib({n})")
    };
    println!(
        "{which}: {what} x{reps} on {workers} workers: median {median:?}, {:.1} ns/{unit}",
        median.as_nanos() as f64 / units as f64
    );
}

/// The forks fib(n) makes: fib(n + 1) - 1.
fn fib_forks(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..=n {
        (a, b) = (b, a + b);
    }
    a - 1
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let which = args.first().map_or("purloin", String::as_str);
    let n: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(22);
    if let (Some(workers), Some(reps)) = (args.get(2), args.get(3)) {
        let workers = workers.parse().expect("the worker count is a number");
        let reps = reps.parse::<usize>().expect("the repeat count is a number").max(1);
        return repeated(which, n, workers, reps);
    }
    let r = match which {
        "purloin" => purloin::runtime::Builder::new()
            .workers(1)
            .build()
            .unwrap()
            .block_on(move || fib_purloin(black_box(n))),
        "sched" => {
            let sched = purloin_sched::Builder::new().workers(1).build().unwrap();
            sched.spawn(move || fib_sched(black_box(n))).join().unwrap()
        }
        "rayon" => rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| fib_rayon(black_box(n))),
        "scope" | "scope-handles" => {
            let f = if which == "scope" { scope_purloin } else { scope_handles_purloin };
            purloin::runtime::Builder::new()
                .workers(1)
                .build()
                .unwrap()
                .block_on(move || f(black_box(n)))
        }
        "scope-tree" | "scope-tree-handles" => {
            let f = if which == "scope-tree" { tree_purloin } else { tree_handles_purloin };
            purloin::runtime::Builder::new()
                .workers(1)
                .build()
                .unwrap()
                .block_on(move || f(0, black_box(n)))
        }
        "rayon-scope-tree" => rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| tree_rayon(0, black_box(n))),
        "rayon-scope" => rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| scope_rayon(black_box(n))),
        other => panic!(
            "unknown contender {other:?}: use purloin, sched, rayon, scope, scope-handles, \
             rayon-scope, scope-tree, scope-tree-handles or rayon-scope-tree"
        ),
    };
    if which.contains("tree") {
        println!("{which}: sum {r}");
    } else if which.contains("scope") {
        println!("{which}: {r} spawns");
    } else {
        println!("{which}: fib({n}) = {r}");
    }
}
