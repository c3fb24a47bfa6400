//! Deadlock reports: Go's `checkdead` ("all goroutines are asleep - deadlock!") for the whole
//! runtime, plus the wait-for cycles among parked green threads where the sync primitives
//! recorded who holds what (a partial deadlock Go cannot report).

use std::collections::HashMap;
use std::fmt;

use purloin_sched::{GreenId, GreenThread, ParkedThread, Scheduler};

/// What the detector found: the parked green threads, what each waits on, and any cycles.
#[derive(Debug, Clone)]
pub struct DeadlockReport {
    /// Every parked green thread of the runtime.
    pub parked: Vec<ParkedThread>,
    /// Wait-for cycles: each a list of green threads where each waits on the next one's
    /// object (the last waits on the first's).
    pub cycles: Vec<Vec<GreenId>>,
    /// The root green thread of `block_on`, if the report comes from there.
    pub root: Option<GreenThread>,
}

impl DeadlockReport {
    /// One line for the panic message.
    pub fn headline(&self) -> String {
        format!(
            "all green threads are asleep — deadlock! ({} parked{})",
            self.parked.len(),
            if self.cycles.is_empty() {
                String::new()
            } else {
                format!(", {} wait-for cycle(s)", self.cycles.len())
            }
        )
    }

    fn name_of(&self, id: GreenId) -> String {
        let named = self.parked.iter().find(|p| p.thread.id() == id);
        match named.and_then(|p| p.name.clone()) {
            Some(n) => format!("{id} '{n}'"),
            None => format!("{id}"),
        }
    }
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "purloin: {}", self.headline())?;
        for p in &self.parked {
            let what = match p.wait {
                Some(w) => {
                    let mut s = format!("waits on {}", w.kind.describe());
                    if w.object != 0 {
                        s.push_str(&format!(" at {:#x}", w.object));
                    }
                    if let Some(h) = w.holder {
                        s.push_str(&format!(" held by green thread {}", self.name_of(h)));
                    }
                    s
                }
                None => "parked (no wait recorded)".to_string(),
            };
            let root =
                if self.root.is_some_and(|r| r.id() == p.thread.id()) { " [root]" } else { "" };
            writeln!(f, "  green thread {}{root}: {what}", self.name_of(p.thread.id()))?;
        }
        for c in &self.cycles {
            let names: Vec<String> = c.iter().map(|id| self.name_of(*id)).collect();
            writeln!(f, "  wait-for cycle: {} -> (back to the first)", names.join(" -> "))?;
        }
        Ok(())
    }
}

/// Builds a report for `sched`.
pub(crate) fn report(sched: &Scheduler, root: Option<GreenThread>) -> DeadlockReport {
    report_of(sched.parked(), root)
}

pub(crate) fn report_of(parked: Vec<ParkedThread>, root: Option<GreenThread>) -> DeadlockReport {
    let cycles = cycles(&parked);
    DeadlockReport { parked, cycles, root }
}

/// Finds the wait-for cycles among parked green threads: an edge A -> B when A waits on an
/// object whose recorded holder is B and B is parked too.
fn cycles(parked: &[ParkedThread]) -> Vec<Vec<GreenId>> {
    let edges: HashMap<GreenId, GreenId> = parked
        .iter()
        .filter_map(|p| Some((p.thread.id(), p.wait?.holder?)))
        .filter(|(_, h)| parked.iter().any(|q| q.thread.id() == *h))
        .collect();
    let mut seen: HashMap<GreenId, usize> = HashMap::new();
    let mut out = Vec::new();
    for (round, start) in edges.keys().enumerate() {
        let mut path = Vec::new();
        let mut at = *start;
        loop {
            if let Some(&r) = seen.get(&at) {
                if r == round {
                    // Closed a cycle on this walk: keep the part from `at`.
                    if let Some(i) = path.iter().position(|x| *x == at) {
                        out.push(path[i..].to_vec());
                    }
                }
                break;
            }
            seen.insert(at, round);
            path.push(at);
            match edges.get(&at) {
                Some(next) => at = *next,
                None => break,
            }
        }
    }
    out
}

/// Whether nothing can ever wake a green thread of `sched` any more: it is quiescent (every
/// worker parked, nothing queued, no timer, I/O wait or blocking section), no signal is
/// watched, and no OS thread of the process could wake one ([`Scheduler::unknown_threads`] is zero: every thread is the
/// runtime's own or waits on it). Quiescence is checked on both sides of the thread listing,
/// so a green thread that a since-ended thread woke is seen running.
pub(crate) fn is_certain(sched: &Scheduler) -> bool {
    sched.is_quiescent()
        && no_signal_receivers()
        && sched.unknown_threads() == Some(0)
        && sched.is_quiescent()
}

/// No signal is watched (a signal may come at any time and wake a receiver's green thread).
fn no_signal_receivers() -> bool {
    #[cfg(not(loom))]
    return crate::signal::receivers_that_may_wake() == 0;
    #[cfg(loom)]
    return true;
}

/// When a waiter that has seen `sched` quiet since `since` looks again if nothing happens:
/// at the end of the grace period, then at doubling intervals (the threads that kept a
/// deadlock uncertain may end without waking anything, which is no event), at most a minute
/// apart.
pub(crate) fn next_look(
    since: std::time::Instant,
    grace: std::time::Duration,
) -> std::time::Instant {
    use std::time::Duration;
    let quiet = since.elapsed();
    let mut step = grace.max(Duration::from_millis(10));
    let mut at = step;
    while at <= quiet {
        step = (step * 2).min(Duration::from_secs(60));
        at += step;
    }
    since + at
}

/// The deadlock watch of a runtime: Go's `checkdead` for OS threads outside the runtime that
/// wait on its green threads (a `join` from `main`, a scope's owner). When such a thread
/// waits and, for the grace period, nothing can wake a green thread ([`is_certain`]), the
/// report goes to stderr and every parked green thread is unwound
/// ([`ForcedUnwind`](crate::ForcedUnwind)), so the waiting joins return `Err` instead of
/// hanging. Stops and joins on drop.
pub(crate) struct Watch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub(crate) fn start_watch(sched: &std::sync::Arc<Scheduler>, grace: std::time::Duration) -> Watch {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (s, st) = (std::sync::Arc::downgrade(sched), stop.clone());
    let thread = std::thread::Builder::new()
        .name("purloin-deadlock".into())
        .spawn(move || {
            let _mark = purloin_sched::helper_thread();
            // No polling while anything runs: the watch looks again only after an outside
            // event (an OS thread began waiting on a green thread, the runtime's last busy
            // worker parked while one waits, or the watch stops), or when the grace period of
            // a quiescence it saw ends (and, while other threads keep it uncertain, at the
            // backing-off re-checks of `next_look`). The snapshot comes before the checks, so
            // an event between them is not lost.
            let mut quiet_since: Option<Instant> = None;
            loop {
                let events = purloin_sched::outside_events();
                if st.load(Ordering::Acquire) {
                    break;
                }
                let Some(sched) = s.upgrade() else { break };
                if sched.outside_waiters() == 0 || !sched.is_quiescent() {
                    quiet_since = None;
                    drop(sched);
                    purloin_sched::wait_outside_event(events, None);
                    continue;
                }
                let since = *quiet_since.get_or_insert_with(Instant::now);
                if since.elapsed() < grace || !is_certain(&sched) {
                    drop(sched);
                    purloin_sched::wait_outside_event(events, Some(next_look(since, grace)));
                    continue;
                }
                let report = report(&sched, None);
                eprintln!(
                    "{report}  (an OS thread outside the runtime waits on one of them: every \
                     parked green thread is unwound, so its join returns Err)"
                );
                #[cfg(not(loom))]
                {
                    eprintln!("{}", sched.dump());
                    crate::trace::flight_on_trouble("the deadlock watch found a deadlock");
                }
                for p in &report.parked {
                    sched.cancel(&p.thread);
                }
                quiet_since = None;
            }
        })
        .ok();
    Watch { stop, thread }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            // After the store: the watch's next snapshot or check sees the stop.
            purloin_sched::note_outside_event();
            t.thread().unpark(); // under loom the wait is a timed thread park
            let _ = t.join();
        }
    }
}
