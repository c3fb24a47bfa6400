//! State machines: a small crawl workflow on `purloin::machine` (the host of Erlang-style
//! state machines, not OS processes).
//!
//! A `Coordinator` machine starts one `Crawl` machine per site (machines spawning
//! machines), then waits Idle for their reports (messages routed by id). Each `Crawl`
//! yields a `fetch` command for the site's index page, then fans out one `fetch` per link it
//! found and fans in the answers — they arrive in any order — before reporting the total size
//! to the coordinator. `fetch` runs on a green thread per yield (it sleeps to stand in for
//! network latency: handlers may block; steps may not).
//!
//! ```text
//! cargo run -p purloin --example machines
//! ```
//!
//! The core is [`run`], which the tour calls too.

use std::collections::BTreeMap;
use std::time::Duration;

use purloin::machine::{
    Error, EventKind, Events, Host, Machine, MachineId, Payload, StepOutput, Yield,
};
use purloin::runtime::Runtime;

/// A pretend web: page → (size in bytes, links).
fn web(path: &str) -> Option<(usize, Vec<String>)> {
    let page = |size, links: &[&str]| Some((size, links.iter().map(|l| l.to_string()).collect()));
    match path {
        "alpha/" => page(1_200, &["alpha/a", "alpha/b", "alpha/c"]),
        "alpha/a" => page(300, &[]),
        "alpha/b" => page(4_500, &[]),
        "alpha/c" => page(800, &[]),
        "beta/" => page(2_000, &["beta/x", "beta/y"]),
        "beta/x" => page(7_000, &[]),
        "beta/y" => page(650, &[]),
        "gamma/" => page(90, &["gamma/missing"]),
        _ => None,
    }
}

/// The `fetch` handler: looks the page up after a pretend network delay.
fn fetch(mut y: Yield) {
    let path = y.take_data().take::<String>().expect("fetch takes a path");
    purloin::sleep(Duration::from_millis(5 + (path.len() as u64 % 7)));
    let answer = match web(&path) {
        Some(page) => Ok(Payload::new(page)),
        None => Err(Error::new(format!("404: {path} not found"))),
    };
    let _ = y.complete(answer);
}

/// What a crawl reports to its coordinator.
struct Report {
    site: String,
    pages: usize,
    bytes: usize,
    errors: Vec<String>,
}

/// Crawls one site: its index, then every page the index links to, all at once.
struct Crawl {
    site: String,
    coordinator: Option<MachineId>,
    pending: usize,
    report: Option<Report>,
}

impl Machine for Crawl {
    fn init(&mut self, method: &str, input: Payload) -> Result<(), Error> {
        match method {
            "crawl" => {
                let (site, coordinator) = input.take::<(String, MachineId)>()?;
                self.report =
                    Some(Report { site: site.clone(), pages: 0, bytes: 0, errors: vec![] });
                self.site = site;
                self.coordinator = Some(coordinator);
                Ok(())
            }
            other => Err(Error::unknown_method(other, &["crawl"])),
        }
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        let report = self.report.as_mut().expect("init ran");
        if self.pending == 0 && report.pages == 0 && report.errors.is_empty() {
            // First step: fetch the index (tag 0).
            out.yield_command("fetch", 0, Payload::new(format!("{}/", self.site)));
            self.pending = 1;
            return Ok(());
        }
        for event in events {
            match event.kind {
                EventKind::YieldComplete => {
                    self.pending -= 1;
                    let tag = event.tag;
                    match event.into_result() {
                        Ok(page) => {
                            let (size, links) = page.take::<(usize, Vec<String>)>()?;
                            report.pages += 1;
                            report.bytes += size;
                            if tag == 0 {
                                // Fan out: one fetch per link, tags 1..
                                for (i, link) in links.into_iter().enumerate() {
                                    out.yield_command("fetch", i as u64 + 1, Payload::new(link));
                                    self.pending += 1;
                                }
                            }
                        }
                        Err(e) => report.errors.push(e.to_string()),
                    }
                }
                EventKind::Cancel => return Err(event.error.expect("a cancel says why")),
                EventKind::Message => {}
            }
        }
        if self.pending > 0 {
            out.wait_yields(); // fan in: woken when the last answer arrives
            return Ok(());
        }
        let report = self.report.take().expect("reported once");
        let (pages, bytes) = (report.pages, report.bytes);
        let coordinator = self.coordinator.expect("init ran");
        out.host()
            .send(coordinator, Payload::new(report))
            .map_err(|e| Error::new(e.to_string()))?;
        out.complete(Payload::new((pages, bytes)));
        Ok(())
    }
}

/// Starts a crawl per site and completes with their reports, by site.
struct Coordinator {
    sites: Vec<String>,
    reports: BTreeMap<String, Report>,
}

impl Machine for Coordinator {
    fn init(&mut self, method: &str, input: Payload) -> Result<(), Error> {
        match method {
            "crawl-all" => {
                self.sites = input.take::<Vec<String>>()?;
                Ok(())
            }
            other => Err(Error::unknown_method(other, &["crawl-all"])),
        }
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        if self.reports.is_empty() && events.is_empty() {
            for site in &self.sites {
                let crawl =
                    Crawl { site: String::new(), coordinator: None, pending: 0, report: None };
                let input = Payload::new((site.clone(), out.machine_id()));
                let child = out.host().spawn_machine(crawl, "crawl", input);
                let child = child.map_err(|e| Error::new(format!("cannot start a crawl: {e}")))?;
                // Nobody waits for the crawls themselves: their reports come as messages.
                out.host().detach(child)?;
            }
        }
        for event in events {
            if event.kind == EventKind::Cancel {
                return Err(event.error.expect("a cancel says why"));
            }
            let report = event.data.take::<Report>()?;
            self.reports.insert(report.site.clone(), report);
        }
        if self.reports.len() == self.sites.len() {
            let summary: Vec<String> = self
                .reports
                .values()
                .map(|r| {
                    let errors = if r.errors.is_empty() {
                        String::new()
                    } else {
                        format!(", errors: {}", r.errors.join("; "))
                    };
                    format!("{}: {} pages, {} bytes{errors}", r.site, r.pages, r.bytes)
                })
                .collect();
            out.complete(Payload::new(summary));
        } else {
            out.idle(); // woken by the next report
        }
        Ok(())
    }
}

/// Waits for messages until it is cancelled.
struct Watcher;

impl Machine for Watcher {
    fn init(&mut self, _method: &str, _input: Payload) -> Result<(), Error> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<'_>) -> Result<(), Error> {
        match events.find(|e| e.kind == EventKind::Cancel) {
            Some(cancel) => out.fail(cancel.error.expect("a cancel says why")),
            None => out.idle(),
        }
        Ok(())
    }
}

/// Runs the workflow on a two-worker runtime, prints what happened, and returns the summary
/// lines (for the tour and for checking).
pub fn run() -> Vec<String> {
    let host = Host::new(Runtime::builder().workers(2).build().expect("a runtime"));
    host.register("fetch", fetch);

    let sites: Vec<String> = ["alpha", "beta", "gamma"].iter().map(|s| s.to_string()).collect();
    let coordinator = Coordinator { sites: sites.clone(), reports: BTreeMap::new() };
    let id = host.spawn_machine(coordinator, "crawl-all", Payload::new(sites)).expect("spawn");
    let summary = host.wait(id).expect("the crawl completes").take::<Vec<String>>().expect("lines");
    for line in &summary {
        println!("machines: {line}");
    }

    // Entry points are checked when the machine is spawned.
    let bad = Coordinator { sites: vec![], reports: BTreeMap::new() };
    if let Err(e) = host.spawn_machine(bad, "crawl-everything", Payload::empty()) {
        println!("machines: spawn error: {e}");
    }

    // A machine that waits for messages forever is cancelled at shutdown.
    host.spawn_machine(Watcher, "watch", Payload::empty()).expect("spawn");
    let report = host.shutdown(Duration::from_secs(1));
    println!(
        "machines: shutdown cancelled {} machine(s), closed {} that did not stop in time",
        report.cancelled, report.timed_out
    );
    summary
}

#[allow(dead_code)]
fn main() {
    let summary = run();
    assert_eq!(
        summary,
        [
            "alpha: 4 pages, 6800 bytes",
            "beta: 3 pages, 9650 bytes",
            "gamma: 1 pages, 90 bytes, errors: 404: gamma/missing not found",
        ]
    );
}
