//! Profiling helpers for the scheduler: single programs to run under `perf` or a timer, next
//! to the criterion benches (which are the real measurements).
//!
//! ```text
//! cargo bench -p purloin-sched --bench profile -- <helper> [arguments]
//!
//!   quick                          timings of the basic operations, 1 and 2 workers
//!   spawn_join_loop [workers]      spawn + join of a no-op child, in a loop
//!   spawn100k [workers] [iters]    100,000 spawns, then joins in spawn order; median
//!   fib [n] [workers]              fib(n) with fork-join: the cost per fork
//!   queued                         no-op green threads through the queues, no joins
//!   parked [n]                     n green threads that park, then are released
//!   timed_wait [n]                 timed parks (1 h) that end early: ns/wait, peak RSS
//!   stall                          ping-pong p50/p99 while every worker blocks in read(2)
//! ```
#![allow(missing_docs)]

mod fib;
mod parked;
mod queued;
mod quick;
mod spawn100k;
mod spawn_join_loop;
mod stall;
mod timed_wait;

fn main() {
    // `cargo bench` passes `--bench`; helpers take only plain arguments.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let (helper, rest) = args.split_first().map_or(("", &[][..]), |(h, r)| (h.as_str(), r));
    match helper {
        "quick" => quick::run(rest),
        "spawn_join_loop" => spawn_join_loop::run(rest),
        "spawn100k" => spawn100k::run(rest),
        "fib" => fib::run(rest),
        "queued" => queued::run(rest),
        "parked" => parked::run(rest),
        "timed_wait" => timed_wait::run(rest),
        "stall" => stall::run(rest),
        other => {
            eprintln!(
                "profile: unknown helper '{other}'; use one of quick, spawn_join_loop, \
                 spawn100k, fib, queued, parked, timed_wait, stall (see benches/profile/main.rs)"
            );
            std::process::exit(2);
        }
    }
}
