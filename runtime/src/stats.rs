//! [`stats`]: a snapshot of the counters of the current green thread's runtime, or of the
//! global one. The periodic line (`PURLOIN_SCHEDTRACE`) is `schedtrace`.

use purloin_sched::Stats;

/// A snapshot of the counters of the runtime running the current green thread (or of the
/// global runtime, from a plain thread).
pub fn stats() -> Stats {
    purloin_sched::current_stats().unwrap_or_else(|| crate::rt::global().stats())
}
