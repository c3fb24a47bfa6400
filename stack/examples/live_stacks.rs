//! How many guarded stacks can be alive at once, and what an idle one costs.
//!
//! ```text
//! cargo run --release -p purloin-stack --example live_stacks -- [COUNT] [small|normal|large] [--mprotect] [--no-touch]
//! ```
//!
//! Leases COUNT stacks (default 1,000,000 small ones), touches the top page of each (an idle
//! green thread; `--no-touch` skips it), and prints the mappings added, RSS and page tables per stack, and the
//! time taken; then drops them and trims, and prints the RSS left.

use std::time::Instant;

use purloin_stack::{Options, StackSize, configure, lease, stats, trim};

fn status(field: &str) -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap() * 1024
}

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count: usize =
        args.iter().find_map(|a| a.replace('_', "").parse().ok()).unwrap_or(1_000_000);
    let size = if args.iter().any(|a| a == "normal") {
        StackSize::Normal
    } else if args.iter().any(|a| a == "large") {
        StackSize::Large
    } else {
        StackSize::Small
    };
    let touch = !args.iter().any(|a| a == "--no-touch");
    if args.iter().any(|a| a == "--mprotect") {
        configure(Options::new().force_mprotect_guards(true))?;
    }
    println!("backend: {:?}", purloin_stack::guard_backend()?);
    let mut stacks: Vec<Option<purloin_stack::Stack>> = (0..count).map(|_| None).collect();
    let (maps0, rss0, pte0) = (mappings(), status("VmRSS"), status("VmPTE"));
    let t = Instant::now();
    let mut live = 0;
    for slot in stacks.iter_mut() {
        match lease(size) {
            Ok(s) => {
                if touch {
                    // SAFETY: the byte below top() is inside the stack's usable range.
                    unsafe { s.top().sub(1).write_volatile(1) };
                }
                *slot = Some(s);
                live += 1;
            }
            Err(e) => {
                println!("lease #{} failed: {e}", live + 1);
                break;
            }
        }
    }
    let took = t.elapsed();
    let (maps1, rss1, pte1) = (mappings(), status("VmRSS"), status("VmPTE"));
    println!(
        "{live} live {size} stacks in {took:.2?} ({:.2} µs per lease + first touch)",
        took.as_secs_f64() * 1e6 / live as f64
    );
    println!("mappings: {maps0} -> {maps1} (+{})", maps1 - maps0);
    println!(
        "RSS: +{:.1} MiB = {:.2} KiB per stack; page tables: +{:.1} MiB = {:.0} bytes per stack",
        (rss1 - rss0) as f64 / (1 << 20) as f64,
        (rss1 - rss0) as f64 / live as f64 / 1024.0,
        (pte1 - pte0) as f64 / (1 << 20) as f64,
        (pte1 - pte0) as f64 / live as f64
    );
    let s = stats();
    println!(
        "arena chunks: {}, mapped: {:.1} GiB",
        s.chunks,
        s.mapped_bytes as f64 / (1u64 << 30) as f64
    );
    let t = Instant::now();
    drop(stacks);
    let rss2 = status("VmRSS");
    println!(
        "dropped in {:.2?}; RSS after drop: +{:.1} MiB",
        t.elapsed(),
        rss2.saturating_sub(rss0) as f64 / (1 << 20) as f64
    );
    let t = Instant::now();
    trim();
    let rss3 = status("VmRSS");
    println!(
        "trimmed in {:.2?}; RSS after trim: +{:.1} MiB",
        t.elapsed(),
        rss3.saturating_sub(rss0) as f64 / (1 << 20) as f64
    );
    Ok(())
}
