#![cfg(not(loom))]
use purloin_sched::Builder;
#[test]
fn t_yield2() {
    let sched = Builder::new().workers(2).build().unwrap();
    for round in 0..20 {
        let h = sched.spawn(|| {
            for _ in 0..100_000 {
                purloin_sched::yield_now();
            }
        });
        let t = std::time::Instant::now();
        while !h.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(10));
            if t.elapsed() > std::time::Duration::from_secs(5) {
                panic!("round {round} hung: {:#?}", sched.stats());
            }
        }
        h.join().unwrap();
    }
}
