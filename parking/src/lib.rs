//! Thread parking (under construction).
#![warn(missing_docs)]

mod sync;
