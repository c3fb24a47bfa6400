//! Work-stealing deques (under construction).
#![warn(missing_docs)]

mod sync;
