//! Parker ping-pong benchmark (being written).
fn main() {}
