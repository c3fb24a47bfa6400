//! Work-stealing deques (docs in progress).
#![warn(missing_docs)]

mod buffer;
mod injector;
mod queue;
mod steal;
mod stealer;
mod sync;
mod worker;

pub use injector::Injector;
pub use steal::Steal;
pub use stealer::Stealer;
pub use worker::Worker;
