//! Reading 1,000 small files (4 KiB each, page-cache hot): purloin::fs against std on a plain
//! thread and tokio::fs (`cargo bench -p purloin --bench fs`).
//!
//! - `read_1000_files/sequential`: one reader reads every file in turn — std::fs::read on
//!   an OS thread; purloin::fs::read on one green thread (a `blocking` section per call);
//!   tokio::fs::read in one task (a `spawn_blocking` round trip per call).
//! - `read_1000_files/concurrent`: one green thread / task per file, all at once, 2 workers.
//!
//! The files stay in the page cache, so this measures each runtime's cost around a short
//! blocking system call, not the disk.
#![cfg(not(loom))]
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

const FILES: usize = 1000;
const SIZE: usize = 4096;

fn files() -> Vec<PathBuf> {
    let dir = std::env::temp_dir().join(format!("purloin-bench-fs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    (0..FILES)
        .map(|i| {
            let p = dir.join(format!("f{i}"));
            std::fs::write(&p, vec![i as u8; SIZE]).unwrap();
            p
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let paths = files();
    let total = |v: &[usize]| v.iter().sum::<usize>();
    let rt = purloin::runtime::Builder::new().workers(2).build().unwrap();
    let tokio =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    let mut g = c.benchmark_group("read_1000_files");
    g.bench_function("sequential/std_thread", |b| {
        b.iter(|| {
            let n: Vec<usize> = paths.iter().map(|p| std::fs::read(p).unwrap().len()).collect();
            assert_eq!(total(&n), FILES * SIZE);
        })
    });
    g.bench_function("sequential/purloin", |b| {
        b.iter(|| {
            let n: Vec<usize> =
                rt.block_on(|| paths.iter().map(|p| purloin::fs::read(p).unwrap().len()).collect());
            assert_eq!(total(&n), FILES * SIZE);
        })
    });
    g.bench_function("sequential/tokio", |b| {
        b.iter(|| {
            let n: Vec<usize> = tokio.block_on(async {
                let mut n = Vec::with_capacity(FILES);
                for p in &paths {
                    n.push(tokio::fs::read(p).await.unwrap().len());
                }
                n
            });
            assert_eq!(total(&n), FILES * SIZE);
        })
    });
    g.bench_function("concurrent/purloin", |b| {
        b.iter(|| {
            let n: Vec<usize> = rt.block_on(|| {
                let hs: Vec<_> = paths
                    .iter()
                    .cloned()
                    .map(|p| purloin::spawn(move || purloin::fs::read(p).unwrap().len()))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert_eq!(total(&n), FILES * SIZE);
        })
    });
    g.bench_function("concurrent/tokio", |b| {
        b.iter(|| {
            let n: Vec<usize> = tokio.block_on(async {
                let hs: Vec<_> = paths
                    .iter()
                    .cloned()
                    .map(|p| tokio::spawn(async move { tokio::fs::read(p).await.unwrap().len() }))
                    .collect();
                let mut n = Vec::with_capacity(FILES);
                for h in hs {
                    n.push(h.await.unwrap());
                }
                n
            });
            assert_eq!(total(&n), FILES * SIZE);
        })
    });
    g.finish();
    if let Some(dir) = paths.first().and_then(|p| p.parent()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
