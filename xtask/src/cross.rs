//! `cargo xtask cross`: build and test purloin beyond x86_64 Linux on an x86_64 Debian 12
//! machine, with nothing but Debian packages.
//!
//! - **aarch64-unknown-linux-gnu**: Debian's `rustc-web` with its arm64 standard library
//!   (unpacked from the arm64 `.deb` into a private sysroot: no `dpkg --add-architecture`),
//!   linked by `aarch64-linux-gnu-gcc`, run under `qemu-aarch64-static` (registered with
//!   binfmt_misc, because some tests re-execute their own binary).
//! - **x86_64-pc-windows-gnu**: the standard library built from Debian's `rust-web-src` with
//!   `-Zbuild-std`, linked by mingw-w64, run under wine (with a small `bcryptprimitives.dll`
//!   that wine 8.0 lacks and Rust's std imports).
//! - **aarch64-apple-darwin, x86_64-apple-darwin**: `cargo check` with `-Zbuild-std` (nothing
//!   to link, nothing to run).
//!
//! Every scratch thing (private apt state, the sysroot, the wine prefix, the target
//! directories) lives in `<target dir>/cross/`. Setting up is idempotent: packages already
//! installed are not installed again, and each prepared piece is kept and reused.
//!
//! What qemu-user shows and does not show: it runs each guest thread on a host thread and
//! translates the guest's atomics to host atomics, so code runs with x86's strong ordering:
//! a missing `Acquire`/`Release` that a real AArch64 core could expose stays hidden. These
//! runs prove the port builds, switches, unwinds and passes its tests; the loom models (run
//! natively by `cargo xtask loom`) remain the proof of the memory orderings.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{root, target_dir};

/// Every sub-step's time, for the summary at the end.
static TIMES: Mutex<Vec<(String, Duration)>> = Mutex::new(Vec::new());

/// Runs one sub-step (see `crate::run`) and records its time.
fn run(step: &str, cmd: &mut Command) -> Result<(), String> {
    let started = Instant::now();
    let result = crate::run(step, cmd);
    TIMES.lock().unwrap_or_else(|e| e.into_inner()).push((step.to_string(), started.elapsed()));
    result
}

/// Prints each sub-step's time (also after a failure: the steps that ran).
fn print_times(total: Duration) {
    eprintln!("\ncross: time per sub-step");
    for (step, took) in TIMES.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        eprintln!("    {:>7.1}s  {step}", took.as_secs_f64());
    }
    eprintln!("    {:>7.1}s  total", total.as_secs_f64());
}

/// Debian packages the step needs, and the suite to take them from (`None`: the default).
const PACKAGES: &[(&str, Option<&str>)] = &[
    ("rustc-web", Some("bookworm-security")),
    ("libstd-rust-web-dev", Some("bookworm-security")),
    ("rust-web-src", Some("bookworm-security")),
    ("gcc-aarch64-linux-gnu", None),
    ("binutils-aarch64-linux-gnu", None),
    ("libc6-dev-arm64-cross", None),
    ("qemu-user-static", None),
    ("gcc-mingw-w64-x86-64", None),
    ("wine64", None),
    ("wine", None),
];

const A64: &str = "aarch64-unknown-linux-gnu";
const WIN: &str = "x86_64-pc-windows-gnu";
const MACOS: &[&str] = &["aarch64-apple-darwin", "x86_64-apple-darwin"];

/// Tests that measure the host kernel's memory accounting through the emulator, which
/// qemu-user 7.2 distorts: it accepts `MADV_DONTNEED` and `MADV_NOHUGEPAGE` with 0 and
/// ignores them (so resident-memory checks of `trim` and idle stacks see memory that was
/// never given back), it does not apply a guest's `RLIMIT_AS` (so address-space exhaustion
/// never happens), and its own mappings count against `vm.max_map_count` without showing in
/// the guest's `/proc/self/maps` (so map-count diagnoses name the wrong limit). They run
/// natively on every `cargo xtask ci`. Two more depend on what qemu-user cannot do: it
/// turns `vfork` into `fork`, so glibc's `posix_spawn` cannot report a failed `exec` (the
/// spawn "succeeds"); and it has no guard markers, so a hundred thousand live stacks would
/// need 200,000 `mprotect` mappings, beyond `vm.max_map_count`.
const QEMU_SKIPS: &[&str] = &[
    "idle_large_stacks_cost_a_page_not_a_huge_page",
    "trim_releases_the_cache_of_a_blocked_thread",
    "an_address_space_limit_is_named",
    "map_count_exhaustion_names_the_sysctl",
    "an_address_space_limit_fails_joins_with_the_cause",
    "spawn_errors_keep_the_os_error",
    "a_hundred_thousand_concurrent_green_threads",
    // Without guard markers it leases stacks up to `vm.max_map_count`; returning them starts
    // the scavenger thread while the process is at the limit, where std cannot map the new
    // thread's alternate signal stack and aborts the process.
    "hundred_thousand_live_stacks_cost_o1_mappings",
    // qemu-user has a thread of its own (its RCU thread) in the guest's `/proc/self/task`, so
    // counts of the process's unknown threads are one too high.
    "Scheduler::unknown_threads (line",
    "Scheduler::mark_waiting_thread (line",
    "outside::helper_thread (line",
    // It counts the page faults of the test's thread, and the emulator's thread also faults
    // on its own memory (translated code, its caches) while the guest carves stacks.
    "carving_faults_each_metadata_page_once",
    // Hung once under qemu (not diagnosed): every worker asleep in the
    // kernel while the green thread waited for the periodic timer's next tick, which nobody
    // ran. It has no watchdog, so a lost timer wake-up would hang the whole step.
    "callback_timer::call_every (line",
    // The facade's doctests: under a runner, rustdoc runs the merged doctests in one process,
    // so those that own process-wide state (the global runtime, the trace recorder) see each
    // other's; and `posix_spawn` of a missing program "succeeds" (see above).
    "Builder::install_global (line",
    "src/trace/mod.rs - trace",
    "process::spawn (line",
];

/// What the set-up step prepared.
struct Toolchains {
    dir: PathBuf,
    /// Debian's cargo matching `rustc-web` (the rustup cargo may be older than the std
    /// sources `-Zbuild-std` compiles).
    cargo: PathBuf,
    /// A `rustc` wrapper whose sysroot holds the host and the arm64 standard libraries.
    rustc_a64: PathBuf,
    rustdoc_a64: PathBuf,
    wineprefix: PathBuf,
}

pub(crate) fn cross() -> Result<(), String> {
    let started = Instant::now();
    let result = set_up().and_then(|tc| {
        aarch64(&tc)?;
        windows(&tc)?;
        macos(&tc)
    });
    print_times(started.elapsed());
    result?;
    eprintln!("\ncross: all steps passed in {:.1?}", started.elapsed());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Set-up

fn set_up() -> Result<Toolchains, String> {
    let started = Instant::now();
    eprintln!("\n==> [cross set-up] packages, arm64 std, sysroot, binfmt, wine prefix");
    let dir = target_dir().join("cross");
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    install_packages()?;
    let version = installed_version("rustc-web")
        .ok_or("rustc-web is not installed after apt-get install; see the output above")?;
    let debs = download_debs(&dir, &version)?;
    let arm64root = unpack(&debs.0, &dir.join("arm64root"))?;
    let cargoweb = unpack(&debs.1, &dir.join("cargoweb"))?;
    let (rustc_a64, rustdoc_a64) = sysroot(&dir, &arm64root)?;
    register_binfmt()?;
    let wineprefix = wine_prefix(&dir)?;
    eprintln!("<== [cross set-up] ok in {:.1?}", started.elapsed());
    let took = started.elapsed();
    TIMES.lock().unwrap_or_else(|e| e.into_inner()).push(("set-up, all of it".into(), took));
    Ok(Toolchains {
        cargo: cargoweb.join("usr/bin/cargo"),
        dir,
        rustc_a64,
        rustdoc_a64,
        wineprefix,
    })
}

fn installed_version(package: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}\t${Version}", package])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (status, version) = text.split_once('\t')?;
    (out.status.success() && status.ends_with(" installed")).then(|| version.to_string())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Installs the missing packages with apt-get (one `update`, one `install` per suite), or
/// does nothing when all are there.
fn install_packages() -> Result<(), String> {
    let missing: Vec<&(&str, Option<&str>)> =
        PACKAGES.iter().filter(|(name, _)| installed_version(name).is_none()).collect();
    if missing.is_empty() {
        eprintln!("    packages: all {} installed", PACKAGES.len());
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|(n, _)| *n).collect();
    if !is_root() {
        return Err(format!(
            "cross: missing Debian packages {}; run `cargo xtask cross` as root (it installs \
             them with apt-get) or install them yourself",
            names.join(" ")
        ));
    }
    run("apt-get update", Command::new("apt-get").args(["update", "-q"]))?;
    for suite in [Some("bookworm-security"), None] {
        let batch: Vec<&str> =
            missing.iter().filter(|(_, s)| *s == suite).map(|(n, _)| *n).collect();
        if batch.is_empty() {
            continue;
        }
        let mut cmd = Command::new("apt-get");
        cmd.args(["install", "-y", "-q", "--no-install-recommends"]);
        if let Some(suite) = suite {
            cmd.args(["-t", suite]);
        }
        cmd.args(&batch).env("DEBIAN_FRONTEND", "noninteractive");
        run("apt-get install", &mut cmd)?;
    }
    Ok(())
}

/// Downloads `libstd-rust-web-dev:arm64` and `cargo-web` of the installed rustc version into
/// a private apt state (so the machine's architectures and lists stay as they are).
fn download_debs(dir: &Path, version: &str) -> Result<(PathBuf, PathBuf), String> {
    let apt = dir.join("apt");
    let find = |prefix: &str| -> Option<PathBuf> {
        fs::read_dir(&apt).ok()?.flatten().map(|e| e.path()).find(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(prefix) && n.ends_with(".deb")
            })
        })
    };
    let std_prefix = "libstd-rust-web-dev_";
    let cargo_prefix = "cargo-web_";
    if let (Some(s), Some(c)) = (find(std_prefix), find(cargo_prefix)) {
        eprintln!("    arm64 std and cargo-web: downloaded already");
        return Ok((s, c));
    }
    for sub in ["lists/partial", "cache/archives/partial"] {
        fs::create_dir_all(apt.join(sub)).map_err(|e| format!("create apt dirs: {e}"))?;
    }
    let private = |cmd: &mut Command| {
        cmd.args(["-o", "APT::Architectures::=amd64", "-o", "APT::Architectures::=arm64"]);
        cmd.arg("-o").arg(format!("Dir::State::Lists={}", apt.join("lists").display()));
        cmd.arg("-o").arg(format!("Dir::Cache={}", apt.join("cache").display()));
        // The files land in a directory the unprivileged `_apt` user may not write.
        cmd.args(["-o", "APT::Sandbox::User=root"]);
    };
    let mut update = Command::new("apt-get");
    private(&mut update);
    update.args(["update", "-q"]);
    run("apt-get update (arm64 lists, private)", &mut update)?;
    let mut download = Command::new("apt-get");
    private(&mut download);
    download.arg("download");
    download.arg(format!("libstd-rust-web-dev:arm64={version}"));
    download.arg(format!("cargo-web={version}"));
    download.current_dir(&apt);
    run("apt-get download (arm64 std, cargo-web)", &mut download)?;
    match (find(std_prefix), find(cargo_prefix)) {
        (Some(s), Some(c)) => Ok((s, c)),
        _ => Err(format!("apt-get download left no .deb files in {}", apt.display())),
    }
}

/// Unpacks a `.deb` into `into` once.
fn unpack(deb: &Path, into: &Path) -> Result<PathBuf, String> {
    if into.join("usr").is_dir() {
        return Ok(into.to_path_buf());
    }
    run("dpkg -x", Command::new("dpkg").arg("-x").arg(deb).arg(into))?;
    Ok(into.to_path_buf())
}

/// A sysroot holding the host's and the arm64 standard libraries (and the std sources), and
/// `rustc`/`rustdoc` wrappers that pass it.
fn sysroot(dir: &Path, arm64root: &Path) -> Result<(PathBuf, PathBuf), String> {
    let s = dir.join("sysroot");
    let lib = s.join("lib/rustlib");
    let bin = s.join("bin");
    for d in [&lib, &bin] {
        fs::create_dir_all(d).map_err(|e| format!("create {}: {e}", d.display()))?;
    }
    let links = [
        (
            PathBuf::from("/usr/lib/rustlib/x86_64-unknown-linux-gnu"),
            lib.join("x86_64-unknown-linux-gnu"),
        ),
        (arm64root.join("usr/lib/rustlib").join(A64), lib.join(A64)),
        (PathBuf::from("/usr/lib/rustlib/src"), lib.join("src")),
    ];
    for (from, to) in links {
        if fs::symlink_metadata(&to).is_err() {
            std::os::unix::fs::symlink(&from, &to)
                .map_err(|e| format!("symlink {} -> {}: {e}", to.display(), from.display()))?;
        }
    }
    let mut wrappers = Vec::new();
    for tool in ["rustc", "rustdoc"] {
        let path = bin.join(tool);
        let script =
            format!("#!/bin/sh\nexec /usr/bin/{tool} --sysroot '{}' \"$@\"\n", s.display());
        if fs::read_to_string(&path).ok().as_deref() != Some(script.as_str()) {
            fs::write(&path, &script).map_err(|e| format!("write {}: {e}", path.display()))?;
            let chmod = Command::new("chmod").arg("+x").arg(&path).status();
            if !chmod.is_ok_and(|s| s.success()) {
                return Err(format!("chmod +x {} failed", path.display()));
            }
        }
        wrappers.push(path);
    }
    Ok((wrappers[0].clone(), wrappers[1].clone()))
}

/// Registers qemu-aarch64 with binfmt_misc, so a test that re-executes its own binary (the
/// overflow and abort tests) runs it under qemu too.
fn register_binfmt() -> Result<(), String> {
    let misc = Path::new("/proc/sys/fs/binfmt_misc");
    if misc.join("qemu-aarch64").exists() {
        return Ok(());
    }
    let fix = "tests that re-execute themselves need binfmt_misc: run as root on a machine \
               that allows mounting it (a privileged container), or register qemu-aarch64 \
               yourself (update-binfmts --enable qemu-aarch64)";
    if !misc.join("register").exists() {
        let mounted = Command::new("mount")
            .args(["-t", "binfmt_misc", "binfmt_misc"])
            .arg(misc)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            return Err(format!("cross: could not mount binfmt_misc; {fix}"));
        }
    }
    let conf = fs::read("/usr/lib/binfmt.d/qemu-aarch64.conf")
        .map_err(|e| format!("cross: read /usr/lib/binfmt.d/qemu-aarch64.conf: {e}; {fix}"))?;
    fs::write(misc.join("register"), conf)
        .map_err(|e| format!("cross: register qemu-aarch64 with binfmt_misc: {e}; {fix}"))?;
    Ok(())
}

/// A wine prefix with the `bcryptprimitives.dll` shim (Rust's std calls its `ProcessPrng`,
/// which wine 8.0 does not have; the shim forwards to `RtlGenRandom`).
fn wine_prefix(dir: &Path) -> Result<PathBuf, String> {
    let prefix = dir.join("wineprefix");
    let installed = prefix.join("drive_c/windows/system32/bcryptprimitives.dll");
    if installed.exists() {
        return Ok(prefix);
    }
    let shim = dir.join("shim");
    fs::create_dir_all(&shim).map_err(|e| format!("create {}: {e}", shim.display()))?;
    let c = shim.join("bcryptprimitives.c");
    let def = shim.join("bcryptprimitives.def");
    let dll = shim.join("bcryptprimitives.dll");
    fs::write(
        &c,
        "#include <windows.h>\n\
         BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len);\n\
         BOOL WINAPI ProcessPrng(PBYTE d, SIZE_T n) {\n\
         \x20   while (n) {\n\
         \x20       ULONG k = n > 0x10000000 ? 0x10000000 : (ULONG)n;\n\
         \x20       if (!SystemFunction036(d, k)) return FALSE;\n\
         \x20       d += k; n -= k;\n\
         \x20   }\n\
         \x20   return TRUE;\n\
         }\n",
    )
    .map_err(|e| format!("write {}: {e}", c.display()))?;
    fs::write(&def, "LIBRARY bcryptprimitives.dll\nEXPORTS\n    ProcessPrng\n")
        .map_err(|e| format!("write {}: {e}", def.display()))?;
    run(
        "mingw: bcryptprimitives.dll shim",
        Command::new("x86_64-w64-mingw32-gcc")
            .args(["-O2", "-shared", "-o"])
            .arg(&dll)
            .arg(&c)
            .arg(&def)
            .arg("-ladvapi32"),
    )?;
    // Creating the prefix prints harmless errors (no 32-bit wine); its result is checked
    // through the directory it must create.
    let _ = Command::new("wine")
        .args(["cmd", "/c", "exit"])
        .env("WINEPREFIX", &prefix)
        .env("WINEDEBUG", "-all")
        .output();
    let system32 = prefix.join("drive_c/windows/system32");
    if !system32.is_dir() {
        return Err(format!("cross: wine did not create the prefix {}", prefix.display()));
    }
    fs::copy(&dll, &installed).map_err(|e| format!("copy the shim DLL: {e}"))?;
    Ok(prefix)
}

// ---------------------------------------------------------------------------------------------
// The three targets

/// A cargo command for a cross target: Debian's cargo, run at low priority (the emulated
/// tests are long and mostly single-threaded; builds share the machine with the rest of CI).
fn cross_cargo(tc: &Toolchains, target_subdir: &str) -> Command {
    let mut cmd = Command::new("nice");
    cmd.args(["-n", "10"]).arg(&tc.cargo).current_dir(root());
    cmd.env("CARGO_TARGET_DIR", tc.dir.join(target_subdir));
    // One-off builds: no incremental caches, line tables only (as `cargo xtask ci`).
    cmd.env("CARGO_INCREMENTAL", "0");
    cmd.env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only");
    cmd
}

/// A cargo command for aarch64. `purloin-context` (its tests included) is built with
/// `opt-level=1`: optimized code keeps values in callee-saved registers such as x19 across a
/// switch, which debug code never does, so the switch's own saves are exercised without a
/// second, release build of everything. The other crates stay unoptimized, as natively:
/// their tests of backtraces and dumps expect the frames of a debug build.
fn aarch64_cargo(tc: &Toolchains, args: &[&str]) -> Command {
    let mut cmd = cross_cargo(tc, "aarch64");
    cmd.args(args).args(["--target", A64]);
    cmd.args(["--config", "profile.dev.package.purloin-context.opt-level=1"]);
    cmd.env("RUSTC", &tc.rustc_a64).env("RUSTDOC", &tc.rustdoc_a64);
    cmd.env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", "aarch64-linux-gnu-gcc");
    cmd.env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER", "qemu-aarch64-static");
    cmd.env("QEMU_LD_PREFIX", "/usr/aarch64-linux-gnu");
    cmd
}

fn aarch64(tc: &Toolchains) -> Result<(), String> {
    // One build for the crates below the facade, so their shared dependencies are built once.
    let mut below = aarch64_cargo(tc, &["test"]);
    for krate in ["purloin-deque", "purloin-parking", "purloin-context", "purloin-stack"] {
        below.args(["-p", krate]);
    }
    below.args(["-p", "purloin-sched"]);
    skip_distorted(&mut below);
    run(
        "aarch64: test deque, parking, context, stack, sched (unit, integration, doc)",
        &mut below,
    )?;
    run(
        "aarch64: test context+fpu-env",
        &mut aarch64_cargo(
            tc,
            &["test", "-p", "purloin-context", "--features", "fpu-env", "--test", "fpu"],
        ),
    )?;
    let mut facade = aarch64_cargo(tc, &["test", "-p", "purloin", "--lib"]);
    for test in FACADE_TESTS {
        facade.args(["--test", test]);
    }
    skip_distorted(&mut facade);
    run("aarch64: test purloin (unit, chosen integration tests)", &mut facade)?;
    let mut doc = aarch64_cargo(tc, &["test", "-p", "purloin", "--doc"]);
    skip_distorted(&mut doc);
    run("aarch64: doctest purloin", &mut doc)?;
    Ok(())
}

/// Appends the test harness's `--skip` for every test of [`QEMU_SKIPS`] (each a substring of
/// exactly one test's name).
fn skip_distorted(cmd: &mut Command) {
    cmd.arg("--");
    for skip in QEMU_SKIPS {
        cmd.args(["--skip", skip]);
    }
}

/// The facade's integration tests run under qemu: those whose code differs by architecture.
/// `rt_spawn` switches and migrates green threads between workers through the assembly
/// switch; `rt_panic_abort` unwinds across the switch and the trampoline (their CFI and
/// personality routine); `rt_fork` forks with green threads parked on their stacks;
/// `net_tcp` goes through the netpoller's `epoll_event` (packed on x86_64 only); `signal`
/// reads `siginfo_t`; `debugging_signal` dumps parked green threads by walking their stacks
/// through the switch's frames. Every facade integration test is a separate aarch64 binary
/// to build and link, and all of them do not fit CI's time on 2 cores; the others use the
/// same switch through the scheduler, whose own tests all run under qemu above, and they
/// run natively on every `cargo xtask ci`.
const FACADE_TESTS: &[&str] =
    &["rt_spawn", "rt_panic_abort", "rt_fork", "net_tcp", "signal", "debugging_signal"];

fn windows(tc: &Toolchains) -> Result<(), String> {
    let mut cmd = cross_cargo(tc, "windows");
    cmd.args(["test", "-Zbuild-std", "--target", WIN, "-p", "purloin-deque", "-p"]);
    cmd.arg("purloin-parking");
    windows_env(&mut cmd, tc);
    run("windows: test deque, parking (wine)", &mut cmd)?;
    // The counters take the inexact-count branch only here.
    let mut cmd = cross_cargo(tc, "windows");
    cmd.args(["test", "-Zbuild-std", "--target", WIN, "-p", "purloin-parking"]);
    cmd.args(["--features", "stats", "--test", "stats"]);
    windows_env(&mut cmd, tc);
    run("windows: test parking+stats (wine)", &mut cmd)
}

fn windows_env(cmd: &mut Command, tc: &Toolchains) {
    cmd.env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTC", "/usr/bin/rustc")
        .env("RUSTDOC", "/usr/bin/rustdoc");
    cmd.env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER", "x86_64-w64-mingw32-gcc");
    cmd.env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER", "wine");
    cmd.env("WINEPREFIX", &tc.wineprefix).env("WINEDEBUG", "-all");
}

fn macos(tc: &Toolchains) -> Result<(), String> {
    for target in MACOS {
        let mut cmd = cross_cargo(tc, "macos");
        cmd.args(["check", "-Zbuild-std", "--target", target]);
        for krate in MACOS_CRATES {
            cmd.args(["-p", krate]);
        }
        cmd.env("RUSTC_BOOTSTRAP", "1").env("RUSTC", "/usr/bin/rustc");
        run(&format!("macos: check {target}"), &mut cmd)?;
    }
    Ok(())
}

/// The crates type-checked for macOS.
const MACOS_CRATES: &[&str] = &["purloin-deque", "purloin-parking", "purloin-stack"];

/// Whether `cargo xtask ci` runs the cross step: only with `PURLOIN_CI_CROSS=1`. Cold, the
/// step takes about half an hour on two cores (most of it building every crate's
/// dev-dependencies for aarch64 and running them under emulation; the times per sub-step are
/// in BENCHMARKS.md), and the rest of `ci` about twenty minutes: together they do not fit
/// the forty minutes `ci` may take. `cargo xtask cross` runs it alone.
pub(crate) fn enabled_in_ci() -> bool {
    env::var_os("PURLOIN_CI_CROSS").is_some_and(|v| v == "1")
}
