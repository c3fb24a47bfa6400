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

fn report_of(parked: Vec<ParkedThread>, root: Option<GreenThread>) -> DeadlockReport {
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

/// Reports the wait-for cycles among the parked green threads of the runtime running the
/// current green thread (or of the global runtime), even while other green threads still run
/// (a partial deadlock). `None` if there is none.
pub fn detect() -> Option<DeadlockReport> {
    let report = match purloin_sched::current_parked() {
        Some(parked) => report_of(parked, None),
        None => report(crate::rt::global().scheduler(), None),
    };
    (!report.cycles.is_empty()).then_some(report)
}
