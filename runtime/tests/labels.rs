//! Labels on green threads: set for a region, inherited by the green threads spawned in it
//! (and by theirs), put back after the region (also on a panic), not left on a recycled
//! record, and shown in dumps, per green thread and as part of a group's key.
#![cfg(not(loom))]

mod rt_common;

use std::time::Duration;

use purloin::labels::Labels;
use purloin::sched::GreenState;

fn rt() -> purloin::Runtime {
    purloin::runtime::Builder::new().workers(2).build().unwrap()
}

/// A child spawned inside `with` (a default spawn, which is lazy for an unlabelled spawner)
/// starts with the labels, and so does its own child; one spawned after the region has none.
#[test]
fn children_inherit_the_labels_in_force_at_their_spawn() {
    let _w = rt_common::watchdog("label inheritance", Duration::from_secs(60));
    rt().block_on(|| {
        let (child, grandchild) = purloin::labels::with(purloin::labels!("req" => 17), || {
            // Each yields to its child before joining, so the child starts on a record of
            // its own instead of inline in its joiner.
            let child = purloin::spawn(|| {
                let grandchild = purloin::spawn(purloin::labels::current);
                purloin::yield_now();
                (purloin::labels::current(), grandchild.join().unwrap())
            });
            purloin::yield_now();
            child.join().unwrap()
        });
        assert_eq!(child.unwrap().get("req"), Some("17"));
        assert_eq!(grandchild.unwrap().get("req"), Some("17"));
        let after = purloin::spawn(purloin::labels::current).join().unwrap();
        assert_eq!(after, None);
        assert_eq!(purloin::labels::current(), None);
    });
}

/// Regions nest (the inner one adds to the outer's labels), and a panic inside a region puts
/// the labels back as they were.
#[test]
fn regions_nest_and_unwind_back() {
    let _w = rt_common::watchdog("label regions", Duration::from_secs(60));
    rt().block_on(|| {
        purloin::labels::with(purloin::labels!("a" => 1), || {
            let r = std::panic::catch_unwind(|| {
                purloin::labels::with(purloin::labels!("b" => 2), || {
                    assert_eq!(purloin::labels::current().unwrap().to_string(), "a=1, b=2");
                    panic!("inside the region");
                })
            });
            assert!(r.is_err());
            assert_eq!(purloin::labels::current().unwrap().to_string(), "a=1");
        });
        assert_eq!(purloin::labels::current(), None);
    });
}

/// A plain thread (here the test's own, spawning on the global runtime, as `main` does) labels
/// the green threads it spawns in a region the same way a green thread does, and its labels
/// are back to none after the region.
#[test]
fn a_plain_thread_labels_the_green_threads_it_spawns() {
    let _w = rt_common::watchdog("plain-thread labels", Duration::from_secs(60));
    let (mine, child) = purloin::labels::with(purloin::labels!("route" => "/main"), || {
        let child = purloin::spawn(purloin::labels::current);
        (purloin::labels::current(), child.join().unwrap())
    });
    assert_eq!(mine.unwrap().to_string(), "route=/main");
    assert_eq!(
        child.expect("the child inherits the plain thread's labels").to_string(),
        "route=/main"
    );
    assert_eq!(purloin::labels::current(), None);
    let unlabelled = purloin::spawn(purloin::labels::current).join().unwrap();
    assert_eq!(unlabelled, None, "a spawn after the region inherits nothing");
}

/// Records are recycled: a green thread spawned without labels never sees the labels of a
/// green thread that used its record before.
#[test]
fn a_recycled_record_carries_no_labels() {
    let _w = rt_common::watchdog("labels and recycling", Duration::from_secs(60));
    let rt = purloin::runtime::Builder::new().workers(1).build().unwrap();
    rt.block_on(|| {
        // Each child runs on a record of its own (not inline in its joiner: the yield lets it
        // start first), which goes back to the worker's cache for the next spawn.
        let run = |f: fn() -> Option<Labels>| {
            let h = purloin::spawn(f);
            purloin::yield_now();
            h.join().unwrap()
        };
        for i in 0..200 {
            let inside = purloin::labels::with(purloin::labels!("round" => i), || {
                run(purloin::labels::current)
            });
            assert!(inside.is_some(), "{i}");
            assert_eq!(run(purloin::labels::current), None, "{i}");
        }
    });
}

#[inline(never)]
fn parked_with_labels(rx: purloin::sync::channel::Receiver<()>) {
    let _ = rx.recv();
}

/// A dump shows each parked green thread's labels; a grouped dump splits green threads parked
/// at the same place by their labels.
#[test]
fn dumps_show_labels_and_group_by_them() {
    let _w = rt_common::watchdog("labels in dumps", Duration::from_secs(60));
    rt().block_on(|| {
        let (tx, rx) = purloin::sync::channel::bounded::<()>(0);
        let mut hs = Vec::new();
        for i in 0..8 {
            let tenant = if i < 5 { "a" } else { "b" };
            let rx = rx.clone();
            hs.push(purloin::labels::with(purloin::labels!("tenant" => tenant), || {
                purloin::spawn(move || parked_with_labels(rx))
            }));
        }
        while purloin::debugging::dump_grouped().count(GreenState::Parked) < 8 {
            purloin::yield_now();
        }
        let dump = purloin::debugging::dump();
        let text = dump.to_string();
        let tenant_of = |h: &purloin::JoinHandle<()>| {
            let t = dump.threads.iter().find(|t| t.id == h.thread().id()).unwrap();
            t.labels.as_ref().and_then(|l| l.get("tenant").map(str::to_owned))
        };
        assert_eq!(tenant_of(&hs[0]).as_deref(), Some("a"), "{text}");
        assert_eq!(tenant_of(&hs[7]).as_deref(), Some("b"), "{text}");
        assert_eq!(text.matches("labels: tenant=a").count(), 5, "{text}");
        let grouped = purloin::debugging::dump_grouped();
        let text = grouped.to_string();
        let by_tenant: Vec<(usize, Option<Labels>)> = grouped
            .groups
            .iter()
            .filter(|g| g.state == GreenState::Parked)
            .map(|g| (g.count, g.labels.clone()))
            .collect();
        assert_eq!(
            by_tenant,
            [
                (5, Some(purloin::labels!("tenant" => "a"))),
                (3, Some(purloin::labels!("tenant" => "b")))
            ],
            "{text}"
        );
        assert!(text.contains("labels: tenant=b"), "{text}");
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
    });
}

/// `Builder::label`: the green thread runs with the labels it inherits plus the builder's
/// (the builder's win), from a green thread or from a plain thread, and passes them on.
#[test]
fn builder_labels_add_to_the_inherited_ones() {
    let _w = rt_common::watchdog("builder labels", Duration::from_secs(60));
    rt().block_on(|| {
        purloin::labels::with(purloin::labels!("tenant" => "a", "stage" => "outer"), || {
            let h = purloin::Builder::new()
                .label("stage", "inner")
                .spawn(|| {
                    let grandchild = purloin::spawn(purloin::labels::current);
                    purloin::yield_now();
                    (purloin::labels::current(), grandchild.join().unwrap())
                })
                .unwrap();
            purloin::yield_now();
            let (mine, passed_on) = h.join().unwrap();
            assert_eq!(mine.unwrap().to_string(), "stage=inner, tenant=a");
            assert_eq!(passed_on.unwrap().to_string(), "stage=inner, tenant=a");
            // The spawner's own labels are untouched.
            assert_eq!(purloin::labels::current().unwrap().to_string(), "stage=outer, tenant=a");
        });
    });
    // From a plain thread (the global runtime): the builder's labels alone.
    let h = purloin::Builder::new().label("from", "main").spawn(purloin::labels::current).unwrap();
    assert_eq!(h.join().unwrap().unwrap().to_string(), "from=main");
    // A scoped spawn takes them too, and the spawner's own are untouched after it.
    let scoped = purloin::scope(|s| {
        let h = purloin::Builder::new()
            .label("scoped", "yes")
            .spawn_scoped(s, purloin::labels::current)
            .unwrap();
        h.join().unwrap()
    });
    assert_eq!(scoped.unwrap().to_string(), "scoped=yes");
    assert_eq!(purloin::labels::current(), None);
}
