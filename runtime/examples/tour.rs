//! The guided tour of purloin: `cargo run --release --example tour`.
//!
//! It grows with the runtime; each section shows one layer at work and prints what it measured.

fn main() {
    println!("purloin tour: the runtime layers are being built; sections appear as they land.");
}
