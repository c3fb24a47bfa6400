//! `PURLOIN_SCHEDTRACE` (`runtime::Builder::schedtrace`): one line of scheduler state per
//! interval on stderr, in the spirit of Go's `GODEBUG=schedtrace`, printed by a helper
//! thread that each runtime owns and stops when it shuts down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use purloin_sched::{Scheduler, Stats};

/// Formats one schedtrace line.
pub(crate) fn trace_line(elapsed: Duration, s: &Stats) -> String {
    format!(
        "SCHED {}ms: procs={} threads={} searching={} parked={} live={} globalq={} localq={:?} \
         switches={} spawned={} steals={}/{} globalpulls={} parks={} inline={} handoffs={} \
         wakes={}/{}",
        elapsed.as_millis(),
        s.procs.len(),
        s.threads,
        s.searching,
        s.parked,
        s.live,
        s.global_queue_len,
        s.queue_lens,
        s.total.switches,
        s.total.spawned,
        s.total.steals,
        s.total.steal_attempts,
        s.total.global_pulls,
        s.total.parks,
        s.total.inline_joins,
        s.global.handoffs,
        s.global.wakes_sent,
        s.global.wakes_sent + s.global.wakes_skipped,
    )
}

/// The schedtrace printer thread; stops and joins on drop.
pub(crate) struct Schedtrace {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts the printer thread for `sched`, one line every `every`.
pub(crate) fn start(sched: &Arc<Scheduler>, every: Duration) -> Schedtrace {
    let stop = Arc::new(AtomicBool::new(false));
    let (s, st) = (Arc::downgrade(sched), stop.clone());
    let thread = std::thread::Builder::new()
        .name("purloin-schedtrace".into())
        .spawn(move || {
            // It prints and never wakes a green thread.
            let _mark = purloin_sched::helper_thread();
            let start = Instant::now();
            while !st.load(Ordering::Acquire) {
                std::thread::park_timeout(every);
                if st.load(Ordering::Acquire) {
                    break;
                }
                let Some(sched) = s.upgrade() else { break };
                eprintln!("{}", trace_line(start.elapsed(), &sched.stats()));
            }
        })
        .ok();
    Schedtrace { stop, thread }
}

impl Drop for Schedtrace {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
