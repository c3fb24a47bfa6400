//! Skynet (1,111,111 green threads in a 10-ary tree; each parent sums its children through
//! joins): `cargo bench -p purloin --bench profile_skynet -- [size]`.
use std::time::Instant;

fn skynet(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let step = size / 10;
    let hs: Vec<_> =
        (0..10).map(|i| purloin::spawn(move || skynet(num + i * step, step))).collect();
    hs.into_iter().map(|h| h.join().unwrap()).sum()
}

fn main() {
    let size: u64 = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rt =
        purloin::runtime::Builder::new().stack_size(purloin::StackSize::Small).build().unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let sum = rt.block_on(|| skynet(0, size));
        assert_eq!(sum, size * (size - 1) / 2);
        println!("skynet({size}): {sum} in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    }
    let s = rt.stats();
    println!("{:?}", s.total);
}
