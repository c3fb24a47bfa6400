//! The `tracing` feature: spans that follow a green thread from one OS thread to the next, and
//! the scheduler's events as `tracing` events.
//!
//! A `tracing` subscriber keeps the stack of entered spans per OS thread (`tracing-subscriber`'s
//! registry does). A green thread that parks inside an entered span and resumes on another
//! worker would leave its span entered on the first OS thread (where the next green thread
//! would inherit it as its parent) and missing on the second (where its guard's exit finds
//! nothing). So the scheduler's switch hook (`purloin_sched::hook`) moves the stack:
//!
//! - on switch-out, on the green thread's OS thread, it exits the subscriber's current span
//!   until none is left, and keeps the ids in the order it exited them;
//! - on switch-in, on the OS thread that resumed it, it enters them again, outermost first.
//!
//! Workers enter no spans of their own, so while a green thread runs, every span on its OS
//! thread's stack is the green thread's. A green thread that ends with spans still entered
//! (a leaked guard) has them exited on its OS thread.
//!
//! # When it is installed
//!
//! The hook is installed by the first runtime built while a subscriber is interested in
//! anything (`LevelFilter::current()` is not `OFF`: a global default is set, or a scoped one
//! somewhere), and from then on serves every runtime of the process. So set the subscriber
//! before the first runtime is built (the first [`spawn`](crate::spawn) builds the global
//! one). With no hook, a switch or an event site costs the scheduler one load and a
//! predictable branch (`purloin_sched::hook`); with the hook and a subscriber that has since
//! turned everything off, a switch costs a call and a load more.

use tracing::level_filters::LevelFilter;
use tracing::span::Id;

use purloin_sched::hook::Event;

/// A subscriber that reports a current span its `exit` does not remove would make the exit
/// loop endless: no green thread nests spans this deep.
const MAX_DEPTH: usize = 256;

/// The target of the scheduler's events.
const TARGET: &str = "purloin::sched";

/// Installs the facade's hook (`hook`) if a subscriber is interested in anything (once per
/// process, beside the program's own hooks; if the program took every hook slot, spans do not
/// follow).
pub(crate) fn install() {
    if LevelFilter::current() != LevelFilter::OFF {
        let _ = crate::hook::install();
    }
}

/// The hook's switch-out: exits the green thread's spans on this OS thread and returns them
/// boxed (an aligned pointer: bit 0 is free for the facade's hook), or 0.
pub(crate) fn switch_out(finished: bool) -> usize {
    if LevelFilter::current() == LevelFilter::OFF {
        return 0;
    }
    let saved: Vec<Id> = tracing::dispatcher::get_default(|d| {
        let mut saved = Vec::new();
        while saved.len() < MAX_DEPTH {
            let Some(id) = d.current_span().id().cloned() else { break };
            d.exit(&id);
            saved.push(id);
        }
        saved
    });
    if finished || saved.is_empty() {
        return 0;
    }
    Box::into_raw(Box::new(saved)) as usize
}

/// The hook's switch-in: enters again the spans `saved` (a `switch_out` word) holds.
pub(crate) fn switch_in(saved: usize) {
    if saved == 0 {
        return;
    }
    // SAFETY: a non-zero word is the `Box<Vec<Id>>` leaked by this green thread's last
    // `switch_out` (the facade's hook gives back exactly the words it got, bit 0 cleared),
    // given back exactly once.
    let saved = unsafe { Box::from_raw(saved as *mut Vec<Id>) };
    tracing::dispatcher::get_default(|d| {
        for id in saved.iter().rev() {
            d.enter(id);
        }
    });
}

/// The hook's event: the scheduler's events as TRACE events of `purloin::sched`.
pub(crate) fn event(event: Event) {
    if LevelFilter::current() == LevelFilter::OFF {
        return;
    }
    let gid = |g: Option<purloin_sched::GreenId>| g.map(|g| g.0);
    match event {
        Event::Spawn { id, by } => {
            tracing::trace!(target: TARGET, id = gid(id), by = gid(by), "spawn")
        }
        Event::Park { id, .. } => tracing::trace!(target: TARGET, id = id.0, "park"),
        Event::Unpark { id, by } => {
            tracing::trace!(target: TARGET, id = id.0, by = gid(by), "unpark")
        }
        Event::Steal { thief, victim, count } => {
            tracing::trace!(target: TARGET, thief, victim, count, "steal")
        }
        _ => {}
    }
}
