//! signal() benchmark (being written).
fn main() {}
