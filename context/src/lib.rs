//! Context switching (under construction).
#![warn(missing_docs)]

mod sync;
