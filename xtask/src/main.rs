//! `cargo xtask`: the workspace's automation, one dependency-free binary.
//!
//! ```text
//! cargo xtask loom  [-p CRATE] [--preemptions N] [FILTER]   loom models, bottom-up
//! cargo xtask ci                                            everything CI checks, in order
//! cargo xtask cross                                         aarch64 (qemu), Windows (wine), macOS
//! cargo xtask invariants                                    the architecture's absences
//! cargo xtask bench [-p CRATE] [FILTER]                     criterion benches + ratio table
//! cargo xtask soak  [SECONDS [THREADS]]                     the runtime's soak (release)
//! ```
//!
//! Kept std-only so it builds in seconds on a fresh machine.

mod cross;

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime};

/// The library crates, bottom-up: every crate comes after the crates it depends on.
const CRATES: &[&str] = &[
    "purloin-deque",
    "purloin-parking",
    "purloin-stack",
    "purloin-context",
    "purloin-sched",
    "purloin-sync",
    "purloin",
];

/// The leaves may not depend on any other purloin crate.
const LEAVES: &[&str] = &["purloin-deque", "purloin-parking", "purloin-stack", "purloin-context"];

/// The crates built on the scheduler that are published apart from the facade, each with the
/// purloin crates it may pull in: the scheduler and the layers below it, never the facade.
const ABOVE_SCHED: &[(&str, &[&str])] = &[(
    "purloin-sync",
    &["purloin-sched", "purloin-parking", "purloin-deque", "purloin-stack", "purloin-context"],
)];

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  loom  [-p CRATE] [--preemptions N] [FILTER]
        run the loom models of every crate (or one), bottom-up, in release,
        with RUSTFLAGS=\"--cfg loom\" in target/loom; LOOM_MAX_PREEMPTIONS defaults to 2
  ci    architecture invariants, fmt, clippy, tests, docs, loom, packaging and dependency
        checks; stops at the first failure and names it
  cross every target beyond x86_64 Linux (run by ci with PURLOIN_CI_CROSS=1): installs
        what it needs from Debian 12's apt as root (once), tests aarch64 Linux under
        qemu-user and the Windows leaves (deque, parking) under wine, type-checks macOS;
        scratch in target/cross
  invariants
        only the architecture invariants: assembly only in context/, futex calls only in
        parking/, memory mapping only in stack/ (library sources)
  bench [-p CRATE] [FILTER]
        run the criterion benches (all crates or one) and print each benchmark's
        time and its ratio to the best peer in the same group
  soak  [SECONDS [THREADS]]
        run the runtime's soak program, optimized: rounds of THREADS green threads
        (default 100000) doing mutex, channel, timed-wait and spawn/join work for
        SECONDS (default 60), with exactly-once checks and bounded resident memory
";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("loom") => parse_loom(&args[1..]).and_then(|opts| loom(&opts)),
        Some("ci") if args.len() == 1 => ci(),
        Some("invariants") if args.len() == 1 => architecture_invariants(),
        Some("cross") if args.len() == 1 => cross::cross(),
        Some("bench") => parse_bench(&args[1..]).and_then(|opts| bench(&opts)),
        Some("soak") if args.len() <= 3 => soak(&args[1..]),
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown or missing command\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("xtask: {msg}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

fn root() -> PathBuf {
    // xtask/ is one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent dir").to_path_buf()
}

/// The target directory: `CARGO_TARGET_DIR` when set (so parallel work can keep separate
/// caches), else `target/` at the root.
fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"))
}

/// Set by `cargo xtask ci`: its builds are one-off, so they skip what only pays off on the
/// next build. A full run builds the workspace six ways (debug, release, loom, features,
/// packaging, standalone leaves); with incremental caches and full debug info that is over
/// 15 GB, enough to fill a small CI disk. Line tables keep file:line in backtraces and dumps.
static ONE_OFF_BUILDS: AtomicBool = AtomicBool::new(false);

fn cargo() -> Command {
    let mut cmd = Command::new(env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo")));
    cmd.current_dir(root());
    if ONE_OFF_BUILDS.load(Ordering::Relaxed) {
        for (key, value) in
            [("CARGO_INCREMENTAL", "0"), ("CARGO_PROFILE_DEV_DEBUG", "line-tables-only")]
        {
            if env::var_os(key).is_none() {
                cmd.env(key, value);
            }
        }
    }
    cmd
}

/// Runs `cmd`, echoing it first; an error names the step.
/// `cargo clippy` of the facade with one cargo `feature`, every target, warnings denied.
fn clippy_purloin_with(feature: &str) -> Command {
    let mut cmd = cargo();
    cmd.args(["clippy", "-p", "purloin", "--features", feature, "--all-targets", "--"]);
    cmd.args(["-D", "warnings"]);
    cmd
}

fn run(step: &str, cmd: &mut Command) -> Result<(), String> {
    eprintln!("\n==> [{step}] {}", describe(cmd));
    let started = Instant::now();
    let status = cmd.status().map_err(|e| format!("step '{step}': could not start: {e}"))?;
    if status.success() {
        eprintln!("<== [{step}] ok in {:.1?}", started.elapsed());
        Ok(())
    } else {
        Err(format!("step '{step}' failed ({status}); command: {}", describe(cmd)))
    }
}

fn describe(cmd: &Command) -> String {
    let envs: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={:?}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let mut s = envs.join(" ");
    if !s.is_empty() {
        s.push(' ');
    }
    s.push_str(&cmd.get_program().to_string_lossy());
    for a in args {
        s.push(' ');
        s.push_str(&a);
    }
    s
}

fn check_crate(name: &str) -> Result<(), String> {
    if CRATES.contains(&name) {
        Ok(())
    } else {
        Err(format!("unknown crate '{name}'; expected one of: {}", CRATES.join(", ")))
    }
}

// ---------------------------------------------------------------------------------------------
// loom

struct LoomOpts {
    krate: Option<String>,
    preemptions: String,
    filter: Option<String>,
}

fn parse_loom(args: &[String]) -> Result<LoomOpts, String> {
    let mut opts = LoomOpts {
        krate: None,
        preemptions: env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "2".into()),
        filter: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-p" | "--package" => {
                let name = it.next().ok_or("-p needs a crate name")?;
                check_crate(name)?;
                opts.krate = Some(name.clone());
            }
            "--preemptions" => {
                let n = it.next().ok_or("--preemptions needs a number")?;
                n.parse::<u32>().map_err(|_| format!("--preemptions: '{n}' is not a number"))?;
                opts.preemptions = n.clone();
            }
            f if !f.starts_with('-') && opts.filter.is_none() => opts.filter = Some(f.into()),
            other => return Err(format!("loom: unexpected argument '{other}'\n\n{USAGE}")),
        }
    }
    Ok(opts)
}

fn loom(opts: &LoomOpts) -> Result<(), String> {
    let crates: Vec<&str> = match &opts.krate {
        Some(k) => vec![k.as_str()],
        None => CRATES.to_vec(),
    };
    for krate in crates {
        let mut cmd = cargo();
        // `--lib --tests`: unit-test models and tests/loom_*.rs; doctests and benches would run
        // loom types outside a model. Non-loom tests are `#![cfg(not(loom))]`.
        cmd.args(["test", "--release", "-p", krate, "--lib", "--tests"])
            .env("RUSTFLAGS", "--cfg loom --cfg crossbeam_loom -C debug-assertions")
            .env("CARGO_TARGET_DIR", target_dir().join("loom"))
            .env("LOOM_MAX_PREEMPTIONS", &opts.preemptions)
            .env(
                "LOOM_MAX_BRANCHES",
                env::var("LOOM_MAX_BRANCHES").unwrap_or_else(|_| "10000".into()),
            );
        if let Some(f) = &opts.filter {
            cmd.args(["--", f]);
        }
        run(&format!("loom {krate}"), &mut cmd)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// ci

fn ci() -> Result<(), String> {
    let started = Instant::now();
    ONE_OFF_BUILDS.store(true, Ordering::Relaxed);
    architecture_invariants()?;
    run("fmt", cargo().args(["fmt", "--all", "--check"]))?;
    run(
        "clippy",
        cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]),
    )?;
    run("test", cargo().args(["test", "--workspace"]))?;
    // The cargo features that change code paths get their own test runs.
    run(
        "test parking+stats",
        cargo().args(["test", "-p", "purloin-parking", "--features", "stats"]),
    )?;
    run(
        "test context+fpu-env",
        cargo().args(["test", "-p", "purloin-context", "--features", "fpu-env"]),
    )?;
    // The tokio bridge (purloin's `tokio` feature): its lints, tests and doc examples.
    run("clippy purloin+tokio", &mut clippy_purloin_with("tokio"))?;
    run(
        "test purloin+tokio",
        cargo().args([
            "test",
            "-p",
            "purloin",
            "--features",
            "tokio",
            "--test",
            "tokio_bridge",
            "--test",
            "tokio_hyper",
            "--test",
            "deadlock_watch",
        ]),
    )?;
    run(
        "doctest purloin+tokio",
        cargo().args(["test", "-p", "purloin", "--features", "tokio", "--doc"]),
    )?;
    // purloin's `tracing` feature: spans across migrations, the scheduler's events.
    run("clippy purloin+tracing", &mut clippy_purloin_with("tracing"))?;
    run(
        "test purloin+tracing",
        cargo().args(["test", "-p", "purloin", "--features", "tracing", "--test", "tracing_spans"]),
    )?;
    run(
        "doctest purloin+tracing",
        cargo().args(["test", "-p", "purloin", "--features", "tracing", "--doc", "debugging"]),
    )?;
    // Some races only show in optimized code (a lost wake-up hid from debug builds).
    run(
        "test release hammer",
        cargo().args(["test", "--release", "-p", "purloin", "--test", "sync_hammer"]),
    )?;
    run(
        "doc",
        cargo()
            .args(["doc", "--workspace", "--no-deps", "--features", "purloin/tokio"])
            .env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    loom(&LoomOpts {
        krate: None,
        preemptions: env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "2".into()),
        filter: None,
    })?;
    forget_packaged_sources()?;
    run(
        "package",
        cargo()
            .args(["package", "--workspace", "--allow-dirty"])
            .env("CARGO_TARGET_DIR", target_dir().join("package")),
    )?;
    for leaf in LEAVES {
        stands_alone(leaf, &[])?;
    }
    for (krate, allowed) in ABOVE_SCHED {
        stands_alone(krate, allowed)?;
    }
    if cross::enabled_in_ci() {
        cross::cross()?;
    } else {
        eprintln!(
            "\n==> [cross] not run: set PURLOIN_CI_CROSS=1 to include it (about 30 minutes cold), \
             or run `cargo xtask cross` alone"
        );
    }
    eprintln!("\nci: all steps passed in {:.1?}", started.elapsed());
    Ok(())
}

/// The architecture's absences (ARCHITECTURE.md, "Architecture invariants"): each kind of
/// low-level operation lives in exactly one crate's library code. A pattern names the call as
/// written in source; tests, benches and examples may use anything.
const OWNED_OPERATIONS: &[(&str, &[&str], &str)] = &[
    ("context", &["asm!(", "naked_asm!(", "global_asm!("], "assembly"),
    ("parking", &["SYS_futex"], "futex calls"),
    (
        "stack",
        &["libc::mmap(", "libc::munmap(", "libc::mremap(", "libc::mprotect(", "libc::madvise("],
        "memory mapping",
    ),
];

/// Fails if a library source file outside the owning crate contains one of the owned
/// operations of [`OWNED_OPERATIONS`].
fn architecture_invariants() -> Result<(), String> {
    eprintln!("\n==> [architecture invariants] scanning */src for owned operations");
    let started = Instant::now();
    let mut violations = Vec::new();
    for krate in CRATES {
        let dir = krate.trim_start_matches("purloin-");
        let dir = if dir == "purloin" { "runtime" } else { dir };
        let mut files = Vec::new();
        rust_files(&root().join(dir).join("src"), &mut files)?;
        for file in files {
            let text = fs::read_to_string(&file).map_err(|e| format!("read {file:?}: {e}"))?;
            for (owner, patterns, what) in OWNED_OPERATIONS {
                if *owner == dir {
                    continue;
                }
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    if let Some(p) = patterns.iter().find(|p| code.contains(*p)) {
                        let rel = file.strip_prefix(root()).unwrap_or(&file);
                        violations.push(format!(
                            "{}:{}: `{p}`: only {owner}/ may contain {what}",
                            rel.display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    if violations.is_empty() {
        eprintln!("<== [architecture invariants] ok in {:.1?}", started.elapsed());
        Ok(())
    } else {
        Err(format!(
            "step 'architecture invariants' failed: move these calls into the owning crate \
             and call its API instead:\n  {}",
            violations.join("\n  ")
        ))
    }
}

/// Collects the `.rs` files below `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    for entry in fs::read_dir(dir).map_err(|e| format!("read dir {dir:?}: {e}"))? {
        let path = entry.map_err(|e| format!("read dir {dir:?}: {e}"))?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// `cargo package --workspace` verifies each crate against the freshly packaged sources of
/// the crates it depends on, which cargo unpacks into the crates.io source cache under their
/// plain name and version (`$CARGO_HOME/registry/src/<index>/purloin-sched-0.1.0`) and reuses
/// when present. A second packaging on one machine would verify against the first one's
/// sources and fail on every API added since. The workspace's crates are never downloaded
/// from a registry, so their entries there are always such leftovers: remove them first.
fn forget_packaged_sources() -> Result<(), String> {
    let home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(home) = home else { return Ok(()) };
    for kind in ["src", "cache"] {
        let Ok(indexes) = fs::read_dir(home.join("registry").join(kind)) else { continue };
        for index in indexes.flatten() {
            let Ok(entries) = fs::read_dir(index.path()) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let ours = CRATES.iter().any(|krate| {
                    name.strip_prefix(krate)
                        .and_then(|rest| rest.strip_prefix('-'))
                        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
                });
                if !ours {
                    continue;
                }
                let path = entry.path();
                let removed =
                    if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
                removed.map_err(|e| format!("could not remove {}: {e}", path.display()))?;
                eprintln!("    removed a packaging leftover: {}", path.display());
            }
        }
    }
    Ok(())
}

/// Builds a scratch crate that depends on `leaf` alone and fails if `cargo tree` shows any
/// other purloin crate than those in `allowed`: the leaves (with nothing allowed) and the
/// crates above the scheduler (without the facade) must be usable, and publishable, apart.
fn stands_alone(leaf: &str, allowed: &[&str]) -> Result<(), String> {
    let dir_name = leaf.trim_start_matches("purloin-");
    let scratch = root().join("target").join("standalone").join(dir_name);
    fs::create_dir_all(scratch.join("src")).map_err(|e| format!("mkdir {scratch:?}: {e}"))?;
    let manifest = format!(
        "[package]\nname = \"standalone-{dir_name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
         publish = false\n\n[dependencies]\n{leaf} = {{ path = {:?} }}\n\n[workspace]\n",
        root().join(dir_name)
    );
    fs::write(scratch.join("Cargo.toml"), manifest).map_err(|e| format!("write manifest: {e}"))?;
    fs::write(
        scratch.join("src").join("lib.rs"),
        format!("pub use {}::*;\n", leaf.replace('-', "_")),
    )
    .map_err(|e| format!("write lib.rs: {e}"))?;
    let step = format!("standalone {leaf}");
    let shared_target = target_dir().join("standalone-target");
    run(
        &step,
        cargo()
            .current_dir(&scratch)
            .args(["build", "--quiet"])
            .env("CARGO_TARGET_DIR", &shared_target),
    )?;
    let out = cargo()
        .current_dir(&scratch)
        .args(["tree", "--prefix", "none", "--edges", "normal,build"])
        .env("CARGO_TARGET_DIR", &shared_target)
        .output()
        .map_err(|e| format!("step '{step}': cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "step '{step}': cargo tree failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let tree = String::from_utf8_lossy(&out.stdout);
    let intruders: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.starts_with("purloin") && *name != leaf && !allowed.contains(name))
        .collect();
    if intruders.is_empty() && allowed.is_empty() {
        eprintln!("<== [{step}] depends on no other purloin crate");
        Ok(())
    } else if intruders.is_empty() {
        eprintln!("<== [{step}] pulls in no purloin crate but {}", allowed.join(", "));
        Ok(())
    } else {
        let rule = if allowed.is_empty() {
            "the leaves must not depend on other purloin crates".to_string()
        } else {
            format!("{leaf} may pull in only {}", allowed.join(", "))
        };
        Err(format!(
            "step '{step}': a crate depending only on {leaf} also pulls in {}; {rule} (see \
             ARCHITECTURE.md)",
            intruders.join(", ")
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// bench

struct BenchOpts {
    krate: Option<String>,
    filter: Option<String>,
}

fn parse_bench(args: &[String]) -> Result<BenchOpts, String> {
    let mut opts = BenchOpts { krate: None, filter: None };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-p" | "--package" => {
                let name = it.next().ok_or("-p needs a crate name")?;
                check_crate(name)?;
                opts.krate = Some(name.clone());
            }
            f if !f.starts_with('-') && opts.filter.is_none() => opts.filter = Some(f.into()),
            other => return Err(format!("bench: unexpected argument '{other}'\n\n{USAGE}")),
        }
    }
    Ok(opts)
}

/// `cargo xtask soak`: the runtime's soak program (a bench target, so built optimized).
fn soak(args: &[String]) -> Result<(), String> {
    let mut cmd = cargo();
    cmd.args(["bench", "-p", "purloin", "--bench", "profile_soak", "--"]).args(args);
    run("soak", &mut cmd)
}

fn bench(opts: &BenchOpts) -> Result<(), String> {
    let before = core_round_trip();
    let since = SystemTime::now();
    let mut cmd = cargo();
    cmd.arg("bench");
    match &opts.krate {
        Some(k) => cmd.args(["-p", k]),
        None => cmd.arg("--workspace"),
    };
    cmd.arg("--benches");
    if let Some(f) = &opts.filter {
        cmd.args(["--", f]);
    }
    run("bench", &mut cmd)?;
    let rows = collect_criterion(&target_dir().join("criterion"), since);
    if rows.is_empty() {
        return Err("no criterion results were written by this run".into());
    }
    print!("{}", ratio_table(&rows));
    let after = core_round_trip();
    println!(
        "\ncore-to-core round trip (median, two spinning threads): {} before the run, {} after. \
         On the reference VM it is ~45-90 ns when the two vCPUs share a cache and ~360-400 ns \
         when the host places them apart; then benchmarks that hand work between workers run \
         1.5-3x slower, so compare ratios only from runs in the same placement.",
        show_ns(before),
        show_ns(after)
    );
    Ok(())
}

fn show_ns(ns: Option<u64>) -> String {
    ns.map_or_else(|| "n/a (the threads did not run side by side)".into(), |n| format!("{n} ns"))
}

/// The median time for a value to go from one thread to another and back (two threads
/// spinning on one atomic): how far apart the OS and the host placed two CPUs. `None` if the
/// exchange took over a second (the threads were not running at the same time).
fn core_round_trip() -> Option<u64> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    const ROUNDS: u64 = 100_000;
    const GIVE_UP: u64 = u64::MAX;
    let word = Arc::new(AtomicU64::new(0));
    let peer = {
        let word = word.clone();
        std::thread::spawn(move || {
            for i in 0..ROUNDS {
                loop {
                    match word.load(Ordering::Acquire) {
                        GIVE_UP => return,
                        v if v == 2 * i + 1 => break,
                        _ => std::hint::spin_loop(),
                    }
                }
                // A CAS, not a store: it must not overwrite a `GIVE_UP` written meanwhile.
                if word
                    .compare_exchange(2 * i + 1, 2 * i + 2, Ordering::Release, Ordering::Relaxed)
                    .is_err()
                {
                    return;
                }
            }
        })
    };
    let start = Instant::now();
    let mut samples = Vec::with_capacity((ROUNDS / 16) as usize);
    let mut done = true;
    'rounds: for i in 0..ROUNDS {
        let t = Instant::now();
        word.store(2 * i + 1, Ordering::Release);
        while word.load(Ordering::Acquire) != 2 * i + 2 {
            if start.elapsed().as_secs() >= 1 {
                done = false;
                break 'rounds;
            }
            std::hint::spin_loop();
        }
        if i % 16 == 0 {
            samples.push(t.elapsed().as_nanos() as u64);
        }
    }
    if !done {
        word.store(GIVE_UP, Ordering::Release);
    }
    let _ = peer.join();
    samples.sort_unstable();
    done.then(|| samples[samples.len() / 2])
}

/// One criterion result: group, function (ours when it starts with "purloin"), parameter,
/// mean time per iteration in nanoseconds.
struct BenchRow {
    group: String,
    function: String,
    value: String,
    mean_ns: f64,
}

fn collect_criterion(dir: &Path, since: SystemTime) -> Vec<BenchRow> {
    let mut rows = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "new") {
                    if let Some(row) = read_result(&path, since) {
                        rows.push(row);
                    }
                } else if path.file_name().is_none_or(|n| n != "base" && n != "change") {
                    stack.push(path);
                }
            }
        }
    }
    rows.sort_by(|a, b| (&a.group, &a.value, &a.function).cmp(&(&b.group, &b.value, &b.function)));
    rows
}

fn read_result(new_dir: &Path, since: SystemTime) -> Option<BenchRow> {
    let est_path = new_dir.join("estimates.json");
    let modified = fs::metadata(&est_path).ok()?.modified().ok()?;
    if modified < since {
        return None;
    }
    let estimates = fs::read_to_string(&est_path).ok()?;
    let meta = fs::read_to_string(new_dir.join("benchmark.json")).ok()?;
    let mean_at = estimates.find("\"mean\"")?;
    let mean_ns = json_number(&estimates[mean_at..], "point_estimate")?;
    Some(BenchRow {
        group: json_string(&meta, "group_id").unwrap_or_default(),
        function: json_string(&meta, "function_id").unwrap_or_default(),
        value: json_string(&meta, "value_str").unwrap_or_default(),
        mean_ns,
    })
}

/// The string value of `"key":"..."` (criterion writes no escapes in ids we use).
fn json_string(text: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":");
    let rest = text[text.find(&pat)? + pat.len()..].trim_start();
    let rest = rest.strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

fn json_number(text: &str, key: &str) -> Option<f64> {
    let pat = format!("\"{key}\":");
    let rest = text[text.find(&pat)? + pat.len()..].trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))?;
    rest[..end].parse().ok()
}

fn ratio_table(rows: &[BenchRow]) -> String {
    let mut out = String::from(
        "\n| group | parameter | benchmark | time/iter | ratio to best peer |\n|---|---|---|---|---|\n",
    );
    for row in rows {
        let peers = rows.iter().filter(|r| {
            r.group == row.group && r.value == row.value && !r.function.starts_with("purloin")
        });
        let best_peer = peers.map(|r| r.mean_ns).fold(f64::INFINITY, f64::min);
        let ratio = if row.function.starts_with("purloin") && best_peer.is_finite() {
            format!("{:.2}x", row.mean_ns / best_peer)
        } else {
            String::from("—")
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            row.group,
            if row.value.is_empty() { "—" } else { &row.value },
            row.function,
            human_time(row.mean_ns),
            ratio
        ));
    }
    out
}

fn human_time(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.2} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}
