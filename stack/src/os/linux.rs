//! Linux: `mmap` arenas, guard markers (`MADV_GUARD_INSTALL`) probed once with an `mprotect`
//! fallback, `MADV_DONTNEED`, and failure diagnosis from `/proc`.

use std::io;
use std::ptr;

use super::{GuardBackend, explain, page_size};
use crate::size::DisplaySize;
use crate::sync::real::{AtomicU8, Mutex, Ordering, lock};

/// `madvise` advice installing guard markers (Linux 6.13+; not yet in the `libc` crate).
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Maps `len` bytes of private anonymous read/write memory for stacks: `MAP_NORESERVE` (so
/// untouched stack space is not charged to the commit limit under the default overcommit
/// policy), `MAP_STACK`, and `MADV_NOHUGEPAGE` (with transparent huge pages a single touch
/// could make 2 MiB resident).
///
/// `what` describes the mapping for the error message.
pub(crate) fn map_stack_memory(len: usize, what: &dyn Fn() -> String) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing has no
    // preconditions and cannot alias any existing Rust object.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let err = io::Error::last_os_error();
        return Err(explain("mmap", &what(), len, err));
    }
    // Best effort: EINVAL when the kernel has no THP support, which is what we want anyway.
    // SAFETY: [p, p + len) is the mapping just created; advice changes no memory contents.
    unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
    Ok(p.cast())
}

/// Unmaps memory mapped by [`map_stack_memory`].
///
/// # Safety
///
/// - `[p, p + len)` is a whole mapping returned by [`map_stack_memory`] (or another `mmap`).
/// - Nothing accesses it afterwards.
pub(crate) unsafe fn unmap(p: *mut u8, len: usize) {
    // SAFETY: the caller passes a whole mapping that nothing uses any more.
    let rc = unsafe { libc::munmap(p.cast(), len) };
    debug_assert_eq!(rc, 0, "munmap of our own mapping failed: {}", io::Error::last_os_error());
}

/// Installs a guard over `[p, p + len)` (page-aligned) with `backend`.
///
/// # Safety
///
/// - `[p, p + len)` lies inside a mapping from [`map_stack_memory`] and nothing accesses it
///   afterwards (any access faults from now on; guard markers also discard its contents).
pub(crate) unsafe fn install_guard(
    backend: GuardBackend,
    p: *mut u8,
    len: usize,
    what: &dyn Fn() -> String,
) -> io::Result<()> {
    let rc = match backend {
        // SAFETY: the range is ours and unused (caller); guard markers only need a private
        // anonymous writable mapping, which `map_stack_memory` made.
        GuardBackend::GuardMarkers => unsafe { libc::madvise(p.cast(), len, MADV_GUARD_INSTALL) },
        // SAFETY: as above; PROT_NONE on an unused range of our own mapping.
        GuardBackend::Mprotect => unsafe { libc::mprotect(p.cast(), len, libc::PROT_NONE) },
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    let op = match backend {
        GuardBackend::GuardMarkers => "madvise(MADV_GUARD_INSTALL)",
        GuardBackend::Mprotect => "mprotect(PROT_NONE)",
    };
    Err(explain(op, &what(), len, err))
}

/// How many guard ranges `install_guard_markers_batch` passes to one system call.
pub(crate) const GUARD_BATCH: usize = 64;

const BATCH_UNKNOWN: u8 = 0;
const BATCH_WORKS: u8 = 1;
const BATCH_UNSUPPORTED: u8 = 2;
static BATCH: AtomicU8 = AtomicU8::new(BATCH_UNKNOWN);
/// This process's pidfd for `process_madvise`, and the pid it was opened for (a forked
/// child must not use its parent's).
static SELF_PIDFD: Mutex<Option<(libc::pid_t, libc::c_int)>> = Mutex::new(None);

/// Whether [`install_guard_markers_batch`] may still work (it was not found unsupported), so
/// callers skip preparing a batch that would be refused.
pub(crate) fn guard_batching() -> bool {
    // Relaxed: a process-wide constant once set; a stale read costs one refused call.
    BATCH.load(Ordering::Relaxed) != BATCH_UNSUPPORTED
}

/// Installs guard markers over `[start, start + len)` for every `start` in `starts` with one
/// `process_madvise` call (about twice as fast per range as one `madvise` each, measured).
/// Returns how many leading ranges got their guard: all, or fewer (even 0) when the kernel
/// stopped early or does not support it (then this never tries again); the caller installs
/// the rest one by one, which reports errors properly.
///
/// # Safety
///
/// - Every range lies inside a mapping from [`map_stack_memory`] and nothing uses it (any
///   access faults from now on).
pub(crate) unsafe fn install_guard_markers_batch(starts: &[*mut u8], len: usize) -> usize {
    if starts.len() < 2 || BATCH.load(Ordering::Relaxed) == BATCH_UNSUPPORTED {
        return 0;
    }
    let Some(pidfd) = self_pidfd() else {
        BATCH.store(BATCH_UNSUPPORTED, Ordering::Relaxed);
        return 0;
    };
    let mut iov = [libc::iovec { iov_base: ptr::null_mut(), iov_len: 0 }; GUARD_BATCH];
    let n = starts.len().min(GUARD_BATCH);
    for (v, &start) in iov.iter_mut().zip(&starts[..n]) {
        *v = libc::iovec { iov_base: start.cast(), iov_len: len };
    }
    // SAFETY: the ranges are ours and unused (caller); `iov` holds `n` valid iovecs; the
    // pidfd is this process's.
    let rc = unsafe {
        libc::syscall(libc::SYS_process_madvise, pidfd, iov.as_ptr(), n, MADV_GUARD_INSTALL, 0)
    };
    if rc < 0 {
        // Kernels before 6.13 (no guard markers), kernels that allow process_madvise only
        // for a few advices, and seccomp filters: use madvise per range from now on.
        BATCH.store(BATCH_UNSUPPORTED, Ordering::Relaxed);
        return 0;
    }
    BATCH.store(BATCH_WORKS, Ordering::Relaxed);
    (rc as usize / len).min(n)
}

/// A pidfd for this process, opened once (and again in a forked child).
fn self_pidfd() -> Option<libc::c_int> {
    let mut cached = lock(&SELF_PIDFD);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    match *cached {
        Some((p, fd)) if p == pid => return Some(fd),
        // SAFETY: inherited from the parent across fork; ours to close.
        Some((_, fd)) => unsafe {
            libc::close(fd);
        },
        None => {}
    }
    // SAFETY: pidfd_open(pid, 0) has no memory arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        *cached = None;
        return None;
    }
    // Close-on-exec is the pidfd default.
    *cached = Some((pid, fd as libc::c_int));
    Some(fd as libc::c_int)
}

/// Gives the pages of `[p, p + len)` back to the kernel (`MADV_DONTNEED`): they read as zero
/// on the next touch. Guard markers in or next to the range survive.
///
/// # Safety
///
/// - `[p, p + len)` lies inside a mapping from [`map_stack_memory`], and its contents are
///   dead (no live reference or frame points into it).
pub(crate) unsafe fn discard(p: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: the range is ours and its contents are dead (caller).
    let rc = unsafe { libc::madvise(p.cast(), len, libc::MADV_DONTNEED) };
    // MADV_DONTNEED on a private anonymous range of our own cannot fail (EINVAL would mean a
    // bug in the range arithmetic). Failing to give memory back is not fatal either way.
    debug_assert_eq!(rc, 0, "MADV_DONTNEED failed: {}", io::Error::last_os_error());
}

const BACKEND_UNKNOWN: u8 = 0;
const BACKEND_MARKERS: u8 = 1;
const BACKEND_MPROTECT: u8 = 2;

/// The probed guard backend (a process-wide constant once set).
static PROBED: AtomicU8 = AtomicU8::new(BACKEND_UNKNOWN);

/// Probes once whether the kernel installs guard markers: `MADV_GUARD_INSTALL` on a scratch
/// page, then a check that the page really faults. `EINVAL` (kernels before 6.13, or an
/// mlocked address space), `EPERM` and `ENOSYS` (a seccomp filter) select the `mprotect`
/// fallback, and so does a success that installed nothing (qemu-user answers the advice with
/// 0 and ignores it); any other failure is returned.
pub(crate) fn probe_backend() -> io::Result<GuardBackend> {
    match PROBED.load(Ordering::Relaxed) {
        BACKEND_MARKERS => return Ok(GuardBackend::GuardMarkers),
        BACKEND_MPROTECT => return Ok(GuardBackend::Mprotect),
        _ => {}
    }
    let page = page_size();
    let scratch = map_stack_memory(2 * page, &|| "the guard-marker probe".into())?;
    // SAFETY: the first page of the scratch mapping just made; nothing uses it.
    let rc = unsafe { libc::madvise(scratch.cast(), page, MADV_GUARD_INSTALL) };
    let err = io::Error::last_os_error();
    let faults = rc == 0 && reading_faults(scratch);
    // SAFETY: the whole scratch mapping, unused from here on.
    unsafe { unmap(scratch, 2 * page) };
    let backend = if faults {
        GuardBackend::GuardMarkers
    } else if rc == 0 {
        // Accepted but not installed: an emulator or a kernel that ignores unknown advice.
        GuardBackend::Mprotect
    } else {
        match err.raw_os_error() {
            Some(libc::EINVAL | libc::EPERM | libc::ENOSYS) => GuardBackend::Mprotect,
            _ => return Err(explain("madvise(MADV_GUARD_INSTALL)", "the probe", page, err)),
        }
    };
    let code = match backend {
        GuardBackend::GuardMarkers => BACKEND_MARKERS,
        GuardBackend::Mprotect => BACKEND_MPROTECT,
    };
    // Relaxed: a plain process-wide constant; racing probes compute the same value.
    PROBED.store(code, Ordering::Relaxed);
    Ok(backend)
}

/// Whether reading the byte at `p` faults, found without touching it from user space: the
/// kernel copies it into a pipe with `write`, which fails with `EFAULT` where an access would
/// fault (a guard marker, `PROT_NONE`) and succeeds where the page is readable. Any other
/// outcome (no pipe: the descriptor limit) counts as "does not fault", which selects the
/// fallback that is known to work.
fn reading_faults(p: *const u8) -> bool {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    // SAFETY: `write` only reads through `p`, and the kernel checks the access itself (an
    // unreadable page is an EFAULT, not a fault in this process); the pipe is ours and empty,
    // so one byte never blocks.
    let n = unsafe { libc::write(fds[1], p.cast(), 1) };
    let efault = n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EFAULT);
    // SAFETY: the two descriptors pipe2 just opened, closed once.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    efault
}

/// The cause of a failed memory call and its fix, for [`explain`](super::explain): an
/// ENOMEM is diagnosed from `/proc` and `getrlimit`.
pub(crate) fn cause_and_fix(op: &str, len: usize, err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ENOMEM) => diagnose_enomem(op, len),
        Some(libc::EPERM | libc::EACCES) => "the call was denied, most likely by a seccomp \
             filter or a security module; allow mmap, mprotect and madvise for this process, or \
             use Options::force_mprotect_guards(true) if only madvise is filtered"
            .to_string(),
        _ => "this is unexpected for private anonymous memory; please report it with the \
              kernel version (uname -r)"
            .to_string(),
    }
}

/// The calling thread's `errno`, for the signal handler to save and restore.
pub(crate) fn errno_location() -> *mut libc::c_int {
    // SAFETY: no preconditions; the location is the calling thread's.
    unsafe { libc::__errno_location() }
}

/// The kernel's minimal signal stack size for this CPU (`AT_MINSIGSTKSZ`: large vector
/// registers make signal frames bigger than the C library's constant), or 0 if not told.
pub(crate) fn min_signal_stack() -> usize {
    /// `getauxval` key of the kernel's minimal signal stack size.
    const AT_MINSIGSTKSZ: libc::c_ulong = 51;
    // SAFETY: getauxval has no preconditions; 0 means "not provided".
    unsafe { libc::getauxval(AT_MINSIGSTKSZ) as usize }
}

/// What an ENOMEM diagnosis looks at (read from `/proc` and `getrlimit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemoryFacts {
    /// The process's memory mappings (lines of `/proc/self/maps`).
    pub(crate) maps: Option<usize>,
    /// `vm.max_map_count`.
    pub(crate) max_map_count: Option<u64>,
    /// The soft `RLIMIT_AS`, if finite.
    pub(crate) address_space_limit: Option<usize>,
    /// The process's virtual size (`VmSize` of `/proc/self/status`).
    pub(crate) vm_size: Option<usize>,
    /// `vm.overcommit_memory`.
    pub(crate) overcommit: Option<u64>,
}

/// How long one reading of the facts is reused: counting the mappings of a process at the
/// map-count limit reads about 5 MB of `/proc/self/maps` (~20 ms), which must not be paid
/// again by every failed lease of a burst.
const FACTS_REUSE: std::time::Duration = std::time::Duration::from_millis(500);

static LAST_FACTS: Mutex<Option<(std::time::Instant, MemoryFacts)>> = Mutex::new(None);

/// The facts, read at most once per [`FACTS_REUSE`].
fn memory_facts() -> MemoryFacts {
    let mut last = lock(&LAST_FACTS);
    let now = std::time::Instant::now();
    if let Some((at, facts)) = *last
        && now.duration_since(at) < FACTS_REUSE
    {
        return facts;
    }
    let facts = MemoryFacts {
        maps: count_mappings(),
        max_map_count: read_number("/proc/sys/vm/max_map_count"),
        address_space_limit: address_space_limit(),
        vm_size: vm_size(),
        overcommit: read_number("/proc/sys/vm/overcommit_memory"),
    };
    *last = Some((now, facts));
    facts
}

/// Why a memory call returned ENOMEM, and what to do about it.
fn diagnose_enomem(op: &str, len: usize) -> String {
    enomem_cause(op, len, &memory_facts())
}

/// The ENOMEM diagnosis from `facts` (a pure function, so every branch is testable).
///
/// In order: the map count is at `vm.max_map_count` (the kernel's `map_count >=
/// sysctl_max_map_count` check; any call that adds or splits a mapping fails there); a mapping
/// that would take the virtual size past `RLIMIT_AS`; strict overcommit; for `mmap`, no room
/// in the address space; else (`mprotect`, `madvise`) the kernel's own allocations (page
/// tables, mapping records) failed.
pub(crate) fn enomem_cause(op: &str, len: usize, facts: &MemoryFacts) -> String {
    if let (Some(maps), Some(max)) = (facts.maps, facts.max_map_count)
        && maps + 16 >= max as usize
    {
        let per_stack = if op.starts_with("mprotect") {
            " (each mprotect guard page costs two mappings: it splits the arena)"
        } else {
            ""
        };
        return format!(
            "the process has {maps} memory mappings and reached vm.max_map_count ({max}){per_stack}; \
             raise the limit (sysctl -w vm.max_map_count=1048576), use a kernel with guard \
             markers (Linux 6.13+, which need no mapping per stack) instead of forcing mprotect \
             guards, or keep fewer stacks alive"
        );
    }
    if op.starts_with("mmap")
        && let Some(limit) = facts.address_space_limit
        && facts.vm_size.is_none_or(|size| size.saturating_add(len) > limit)
    {
        return format!(
            "the address-space limit (RLIMIT_AS, `ulimit -v`) of {} is exhausted (this \
             request: {}{}); raise it (ulimit -v unlimited) or use smaller stacks \
             (StackSize::Small) or fewer of them",
            DisplaySize(limit),
            DisplaySize(len),
            match facts.vm_size {
                Some(size) => format!(", already mapped: {}", DisplaySize(size)),
                None => String::new(),
            }
        );
    }
    if op.starts_with("mmap") {
        if facts.overcommit == Some(2) {
            return "vm.overcommit_memory is 2 (strict accounting), which ignores MAP_NORESERVE, \
                    so whole stack arenas count against CommitLimit (see /proc/meminfo); use \
                    smaller stacks (StackSize::Small) or fewer of them, or allow overcommit \
                    (sysctl -w vm.overcommit_memory=0)"
                .to_string();
        }
        return "the kernel could not find room for the mapping (virtual address space \
                exhausted); use smaller stacks (StackSize::Small) or fewer of them"
            .to_string();
    }
    let maps = match (facts.maps, facts.max_map_count) {
        (Some(maps), Some(max)) => format!(" ({maps} of vm.max_map_count {max} mappings in use)"),
        _ => String::new(),
    };
    format!(
        "the kernel is out of memory for page tables{maps}; free memory or keep fewer stacks \
         alive"
    )
}

/// Lines of `/proc/self/maps`: the process's memory mappings (cold path only). Read through
/// a fixed buffer: at the map-count limit, a growing heap buffer could itself need a mapping.
pub(crate) fn count_mappings() -> Option<usize> {
    use std::io::Read;
    let mut file = std::fs::File::open("/proc/self/maps").ok()?;
    let mut buf = [0u8; 16 * 1024];
    let mut lines = 0;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(lines),
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The process's virtual size (`VmSize`), in bytes.
fn vm_size() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft RLIMIT_AS, if finite.
fn address_space_limit() -> Option<usize> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) };
    if rc != 0 || lim.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    usize::try_from(lim.rlim_cur).ok()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn probe_is_stable() {
        let a = probe_backend().unwrap();
        let b = probe_backend().unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn the_probed_backend_really_faults() {
        // Whatever the probe chose, a guard it installs must make the page unreadable: a
        // backend accepted on its return value alone (qemu-user returns 0 for guard markers
        // and installs nothing) fails here.
        let backend = probe_backend().unwrap();
        let page = page_size();
        let p = map_stack_memory(2 * page, &|| "a test".into()).unwrap();
        assert!(!reading_faults(p), "a fresh page must be readable");
        // SAFETY: the first page of our own unused mapping.
        unsafe { install_guard(backend, p, page, &|| "a test".into()) }.unwrap();
        assert!(reading_faults(p), "{backend:?} guard installed, yet the page reads");
        assert!(!reading_faults(p.wrapping_add(page)), "the page above the guard must read");
        // SAFETY: the whole mapping, unused from here on.
        unsafe { unmap(p, 2 * page) };
    }

    #[test]
    fn the_page_size_is_read_not_assumed() {
        // SAFETY: getauxval has no preconditions; AT_PAGESZ is set by every Linux kernel.
        let from_kernel = unsafe { libc::getauxval(libc::AT_PAGESZ) } as usize;
        assert_eq!(page_size(), from_kernel);
        assert!(page_size().is_power_of_two() && page_size() >= 4096);
    }

    #[test]
    fn batched_guard_markers_cover_every_range() {
        if probe_backend().unwrap() != GuardBackend::GuardMarkers {
            return; // no guard markers on this kernel: nothing to batch
        }
        let page = page_size();
        let p = map_stack_memory(8 * page, &|| "a test".into()).unwrap();
        let starts: Vec<*mut u8> = (0..4).map(|i| p.wrapping_add(2 * i * page)).collect();
        // SAFETY: pages of our own unused mapping.
        let done = unsafe { install_guard_markers_batch(&starts, page) };
        // Either every range (the kernel supports it), or none and never again.
        match done {
            4 => assert_eq!(BATCH.load(Ordering::Relaxed), BATCH_WORKS),
            0 => assert_eq!(BATCH.load(Ordering::Relaxed), BATCH_UNSUPPORTED),
            n => panic!("{n} of 4 ranges guarded"),
        }
        // The pages between the guards are still usable.
        for i in 0..4 {
            // SAFETY: odd pages of our mapping, never guarded.
            unsafe { p.add((2 * i + 1) * page).write(1) };
        }
        // SAFETY: the whole mapping, unused from here on.
        unsafe { unmap(p, 8 * page) };
    }

    #[test]
    fn enomem_message_names_a_cause_and_a_fix() {
        let err = explain(
            "mprotect(PROT_NONE)",
            "the guard page of a 32 KiB stack",
            4096,
            io::Error::from_raw_os_error(libc::ENOMEM),
        );
        let msg = err.to_string();
        assert_eq!(err.kind(), io::ErrorKind::OutOfMemory);
        assert!(
            msg.starts_with("purloin-stack: mprotect(PROT_NONE) of 4 KiB for the guard page"),
            "{msg}"
        );
        // Far below the map-count limit here, so the page-table diagnosis applies.
        assert!(msg.contains("; ") || msg.contains("free memory"), "{msg}");
    }

    #[test]
    fn enomem_causes_are_told_apart() {
        let mib = 1 << 20;
        let at_map_limit = MemoryFacts {
            maps: Some(65_525),
            max_map_count: Some(65_530),
            address_space_limit: None,
            vm_size: Some(100 * mib),
            overcommit: Some(0),
        };
        for op in ["mprotect(PROT_NONE)", "mmap", "madvise(MADV_GUARD_INSTALL)"] {
            let msg = enomem_cause(op, 4096, &at_map_limit);
            assert!(msg.contains("vm.max_map_count (65530)"), "{op}: {msg}");
            assert!(!msg.contains("page tables"), "{op}: {msg}");
        }
        let rlimited = MemoryFacts {
            maps: Some(300),
            max_map_count: Some(65_530),
            address_space_limit: Some(600 * mib),
            vm_size: Some(500 * mib),
            overcommit: Some(0),
        };
        let msg = enomem_cause("mmap", 512 * mib, &rlimited);
        assert!(msg.contains("RLIMIT_AS") && msg.contains("already mapped: 500 MiB"), "{msg}");
        // A request that fits the limit is not blamed on it.
        let msg = enomem_cause("mmap", 4 * mib, &rlimited);
        assert!(!msg.contains("RLIMIT_AS"), "{msg}");
        let msg = enomem_cause("mprotect(PROT_NONE)", 4096, &rlimited);
        assert!(msg.contains("page tables") && msg.contains("300 of vm.max_map_count"), "{msg}");
        let strict = MemoryFacts { overcommit: Some(2), ..rlimited };
        assert!(enomem_cause("mmap", 4 * mib, &strict).contains("overcommit_memory is 2"));
    }

    #[test]
    fn explained_errors_keep_the_os_error() {
        let err = explain("mmap", "a test", 4096, io::Error::from_raw_os_error(libc::ENOMEM));
        let source = std::error::Error::source(err.get_ref().unwrap()).unwrap();
        let os = source.downcast_ref::<io::Error>().unwrap();
        assert_eq!(os.raw_os_error(), Some(libc::ENOMEM));
    }

    #[test]
    fn mappings_are_counted() {
        assert!(count_mappings().unwrap() > 5);
    }
}
