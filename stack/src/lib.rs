//! Guard-paged stacks (under construction).
#![warn(missing_docs)]

mod sync;
