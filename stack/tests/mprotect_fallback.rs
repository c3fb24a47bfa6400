//! The `mprotect` fallback, forced with `Options::force_mprotect_guards`: it works (a few
//! hundred stacks, two mappings each), and at `vm.max_map_count` it fails with an error that
//! names the limit and the fix instead of falling back silently.
#![cfg(not(loom))]

mod common;

use common::{child_case, mappings, max_map_count, run_child};
use purloin_stack::{GuardBackend, Options, StackSize, configure, guard_backend, lease, stats};

/// The process-wide mapping count is shared by the tests of this file: they take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn force_mprotect() {
    // Every test of this process configures the same options, so all calls succeed.
    configure(Options::new().force_mprotect_guards(true)).unwrap();
    assert_eq!(guard_backend().unwrap(), GuardBackend::Mprotect);
}

#[test]
fn a_few_hundred_stacks_with_mprotect_guards() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    force_mprotect();
    const N: usize = 300;
    let leased_before = stats().leased;
    let slots_before = stats().slots;
    let maps_before = mappings();
    let stacks: Vec<_> = (0..N).map(|_| lease(StackSize::Small).unwrap()).collect();
    let growth = mappings() as i64 - maps_before as i64;
    let fresh = (stats().slots - slots_before) as i64;
    println!("{N} stacks ({fresh} fresh slots) with mprotect guards: +{growth} mappings");
    // Each fresh slot's guard splits the arena: two mappings per fresh stack.
    assert!(growth >= 2 * fresh - 8, "{growth} mappings for {fresh} fresh mprotect guards");
    for s in &stacks {
        assert_eq!(s.guard_backend(), GuardBackend::Mprotect);
        // SAFETY: both ends of the usable range are read/write.
        unsafe {
            s.limit().write_volatile(1);
            s.top().sub(1).write_volatile(2);
        }
    }
    assert_eq!(stats().leased, leased_before + N);
    // Each stack with its guard page below it.
    let ranges: Vec<(usize, usize)> = stacks
        .iter()
        .map(|s| (s.limit() as usize - purloin_stack::page_size(), s.top() as usize))
        .collect();
    drop(stacks);
    assert_eq!(stats().leased, leased_before);
    // Reused slots keep their guards: no new mapping where the stacks are. (Counted there
    // only: other threads of the test process may map memory meanwhile, e.g. a new malloc
    // arena.)
    let slots_before = stats().slots;
    let maps_before = mappings_within(&ranges);
    let again: Vec<_> = (0..N).map(|_| lease(StackSize::Small).unwrap()).collect();
    assert_eq!(stats().slots, slots_before, "the stacks were leased again from their slots");
    assert_eq!(mappings_within(&ranges), maps_before, "reused stacks re-installed guards");
    drop(again);
}

/// The mappings of this process that overlap any of `ranges` (start, end).
fn mappings_within(ranges: &[(usize, usize)]) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|line| {
            let span = line.split_whitespace().next().unwrap();
            let (a, b) = span.split_once('-').unwrap();
            let a = usize::from_str_radix(a, 16).unwrap();
            let b = usize::from_str_radix(b, 16).unwrap();
            ranges.iter().any(|&(lo, hi)| a < hi && lo < b)
        })
        .count()
}

/// At the map-count limit the error names `vm.max_map_count` and the fix. Runs in a child:
/// it exhausts the child's mappings.
#[test]
fn map_count_exhaustion_names_the_sysctl() {
    if child_case().as_deref() == Some("exhaust") {
        force_mprotect();
        let mut stacks = Vec::new();
        let err = loop {
            match lease(StackSize::Small) {
                Ok(s) => stacks.push(s),
                Err(e) => break e,
            }
        };
        println!("LEASED {}", stacks.len());
        println!("ERROR {err}");
        println!("KIND {:?}", err.kind());
        std::process::exit(0);
    }
    if max_map_count() > 300_000 {
        eprintln!("vm.max_map_count is {}: too slow to exhaust here; not checked", max_map_count());
        return;
    }
    let out = run_child("map_count_exhaustion_names_the_sysctl", "exhaust");
    assert_eq!(out.status.code(), Some(0), "{}", out.describe());
    let leased: usize = out
        .stdout
        .lines()
        .find_map(|l| l.split_once("LEASED ").map(|(_, n)| n))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", out.describe()));
    // About half of the limit: two mappings per guard.
    assert!(
        leased > max_map_count() / 2 - 2_000 && leased < max_map_count() / 2,
        "{leased} stacks before the limit\n{}",
        out.describe()
    );
    let err = out.stdout.lines().find_map(|l| l.split_once("ERROR ").map(|(_, e)| e)).unwrap();
    assert!(err.contains("vm.max_map_count"), "{err}");
    assert!(err.contains("sysctl -w vm.max_map_count="), "the fix: {err}");
    assert!(err.contains("two mappings"), "the cause: {err}");
    assert!(out.stdout.contains("KIND OutOfMemory"), "{}", out.describe());
}
