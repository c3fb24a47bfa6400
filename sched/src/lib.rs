//! The G/M/P scheduler (under construction).
#![warn(missing_docs)]

mod sync;
