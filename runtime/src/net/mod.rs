//! Networking: sockets whose blocking-style operations park the green thread until the
//! netpoller reports readiness (Go's netpoll).

use std::io;

/// Installs the runtime's netpoller into `sched` (called once when a runtime is built).
pub(crate) fn install(_sched: &purloin_sched::Scheduler) -> io::Result<()> {
    Ok(())
}
