//! What the facade's scheduler hook (`hook`) does at each switch and event: it calls its two
//! parts, the trace recorder (`trace`) and, with the `tracing` feature, the span mover
//! (`span_hook`).

use purloin_sched::hook::{Event, Hook};

use crate::hook::{FacadeHook, PARKED};

impl Hook for FacadeHook {
    fn switch_out(&self, finished: bool) -> usize {
        #[cfg(feature = "tracing")]
        let spans = crate::span_hook::switch_out(finished);
        #[cfg(not(feature = "tracing"))]
        let spans = 0;
        debug_assert_eq!(spans & PARKED, 0, "a span stack's box is aligned");
        let parked = crate::trace::switch_out(finished);
        spans | if parked && !finished { PARKED } else { 0 }
    }

    fn switch_in(&self, saved: usize) {
        crate::trace::switch_in(saved & PARKED != 0);
        #[cfg(feature = "tracing")]
        crate::span_hook::switch_in(saved & !PARKED);
    }

    fn event(&self, event: Event) {
        crate::trace::event(event);
        #[cfg(feature = "tracing")]
        crate::span_hook::event(event);
    }
}
