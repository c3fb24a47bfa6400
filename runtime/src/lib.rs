//! purloin: M:N stackful green threads (under construction).

pub use purloin_context as context;
pub use purloin_deque as deque;
pub use purloin_parking as parking;
pub use purloin_sched as sched;
pub use purloin_stack as stack;
