//! Processes: state machines stepped by the work-stealing scheduler (seed 003).
