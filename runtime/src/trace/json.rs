//! The writer thread: turns batches of records into Chrome trace-event JSON, streamed to the
//! file (no dependency: the format is a handful of object shapes).
//!
//! The file is one object: `displayTimeUnit`, the `traceEvents` array (one event per line),
//! and `otherData` (the format's place for metadata) with the counts of what is missing:
//! `dropped_events` (scheduler events recorded but dropped because the writer lagged) and
//! `unflushed_threads` (threads whose last records did not arrive before the stop).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::mpsc::Receiver;

use super::record::{Msg, Rec};

/// The writer: `{"traceEvents":[` … `]}` with one event per line.
pub(super) struct Writer {
    out: BufWriter<File>,
    pid: u32,
    events: u64,
    line: Vec<u8>,
}

impl Writer {
    pub(super) fn new(file: File) -> io::Result<Writer> {
        let mut w = Writer {
            out: BufWriter::new(file),
            pid: std::process::id(),
            events: 0,
            line: Vec::new(),
        };
        w.out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        let pid = w.pid;
        w.event(format_args!(
            r#"{{"ph":"M","pid":{pid},"tid":0,"name":"process_name","args":{{"name":"purloin"}}}}"#
        ))?;
        Ok(w)
    }

    /// Runs until `Finish` (or every sender is gone); returns the events written.
    pub(super) fn run(mut self, rx: Receiver<Msg>) -> io::Result<u64> {
        let mut failed: Option<io::Error> = None;
        for msg in rx {
            match msg {
                Msg::Batch { tid, name, recs } => {
                    if failed.is_none()
                        && let Err(e) = self.batch(tid, name, recs)
                    {
                        failed = Some(e);
                    }
                }
                Msg::Finish { reply, dropped, unflushed } => {
                    let r = match failed.take() {
                        Some(e) => Err(e),
                        None => self.finish(dropped, unflushed),
                    };
                    let _ = reply.send(r);
                    return Ok(self.events);
                }
                Msg::Snapshot(snap) => {
                    if let Some(reply) = snap.reply {
                        let _ = reply.send(Err(io::Error::other(
                            "the trace that records streams to a file, it is not a flight \
                             recorder (start one with purloin::trace::flight_recorder())",
                        )));
                    }
                }
            }
        }
        // Every sender is gone without a `Finish` (the session was dropped without a stop).
        match failed {
            Some(e) => Err(e),
            None => self.finish(0, 0),
        }
    }

    /// Closes the event array, writes `otherData` and flushes.
    pub(super) fn finish(&mut self, dropped: u64, unflushed: u64) -> io::Result<u64> {
        self.line.clear();
        self.line.extend_from_slice(b"\n],\"otherData\":{\"dropped_events\":");
        push_u64(&mut self.line, dropped);
        self.line.extend_from_slice(b",\"unflushed_threads\":");
        push_u64(&mut self.line, unflushed);
        self.line.extend_from_slice(b"}}\n");
        self.out.write_all(&self.line)?;
        self.out.flush()?;
        Ok(self.events)
    }

    fn event(&mut self, args: std::fmt::Arguments<'_>) -> io::Result<()> {
        self.open();
        let _ = self.line.write_fmt(args);
        self.close()
    }

    /// Starts an event's line (the comma of the previous one first).
    fn open(&mut self) {
        self.line.clear();
        if self.events > 0 {
            self.line.extend_from_slice(b",\n");
        }
    }

    /// Writes the line built since [`open`](Writer::open).
    fn close(&mut self) -> io::Result<()> {
        self.out.write_all(&self.line)?;
        self.events += 1;
        Ok(())
    }

    /// `{"ph":"<ph>","pid":…,"tid":…,"ts":…` (the common head; the caller goes on with `,`).
    fn head(&mut self, ph: &str, tid: u64, ts: u64) {
        self.open();
        self.line.extend_from_slice(b"{\"ph\":\"");
        self.line.extend_from_slice(ph.as_bytes());
        self.line.extend_from_slice(b"\",\"pid\":");
        push_u64(&mut self.line, u64::from(self.pid));
        self.line.extend_from_slice(b",\"tid\":");
        push_u64(&mut self.line, tid);
        self.line.extend_from_slice(b",\"ts\":");
        push_us(&mut self.line, ts);
    }

    /// A complete slice: `dur`, category, name (`name` then ` G<id>` if `gid`), args.
    #[allow(clippy::too_many_arguments)]
    fn slice(
        &mut self,
        tid: u64,
        ts: u64,
        dur_ns: u64,
        cat: &str,
        name: &str,
        gid: Option<u64>,
        arg: (&str, u64),
    ) -> io::Result<()> {
        self.head("X", tid, ts);
        self.line.extend_from_slice(b",\"dur\":");
        push_us(&mut self.line, dur_ns);
        self.cat_name(cat, name, gid);
        self.line.extend_from_slice(b",\"args\":{\"");
        self.line.extend_from_slice(arg.0.as_bytes());
        self.line.extend_from_slice(b"\":");
        push_u64(&mut self.line, arg.1);
        self.line.extend_from_slice(b"}}");
        self.close()
    }

    fn cat_name(&mut self, cat: &str, name: &str, gid: Option<u64>) {
        self.line.extend_from_slice(b",\"cat\":\"");
        self.line.extend_from_slice(cat.as_bytes());
        self.line.extend_from_slice(b"\",\"name\":\"");
        if name.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.line.extend_from_slice(name.as_bytes());
        } else {
            let _ = write!(self.line, "{}", Escaped(name));
        }
        if let Some(id) = gid {
            if !name.is_empty() {
                self.line.push(b' ');
            }
            self.line.push(b'G');
            push_u64(&mut self.line, id);
        }
        self.line.push(b'"');
    }

    /// A thread-scoped instant with up to three numeric arguments (`None`: `null`).
    fn instant(
        &mut self,
        tid: u64,
        ts: u64,
        cat: &str,
        name: &str,
        args: &[(&str, Option<u64>)],
    ) -> io::Result<()> {
        self.head("i", tid, ts);
        self.line.extend_from_slice(b",\"s\":\"t\"");
        self.cat_name(cat, name, None);
        self.line.extend_from_slice(b",\"args\":{");
        for (i, (k, v)) in args.iter().enumerate() {
            if i > 0 {
                self.line.push(b',');
            }
            self.line.push(b'"');
            self.line.extend_from_slice(k.as_bytes());
            self.line.extend_from_slice(b"\":");
            match v {
                Some(v) => push_u64(&mut self.line, *v),
                None => self.line.extend_from_slice(b"null"),
            }
        }
        self.line.extend_from_slice(b"}}");
        self.close()
    }

    /// A flow event (`s` start, or `f` finish bound to the enclosing slice).
    fn flow(&mut self, ph: &str, tid: u64, ts: u64, cat: &str, id: u64) -> io::Result<()> {
        self.head(ph, tid, ts);
        if ph == "f" {
            self.line.extend_from_slice(b",\"bp\":\"e\"");
        }
        self.cat_name(cat, cat, None);
        self.line.extend_from_slice(b",\"id\":");
        push_u64(&mut self.line, id);
        self.line.push(b'}');
        self.close()
    }

    fn batch(&mut self, tid: u64, name: Option<String>, recs: Vec<Rec>) -> io::Result<()> {
        if let Some(name) = name {
            self.thread_name(tid, &name)?;
        }
        for rec in &recs {
            self.rec(tid, rec)?;
        }
        Ok(())
    }

    /// The metadata event naming thread `tid`'s track.
    pub(super) fn thread_name(&mut self, tid: u64, name: &str) -> io::Result<()> {
        let pid = self.pid;
        let name = Escaped(name);
        self.event(format_args!(
            r#"{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_name","args":{{"name":"{name}"}}}}"#
        ))
    }

    /// A run slice: its arguments are the green thread's id, where it was spawned (on its
    /// first slice) and its labels.
    #[allow(clippy::too_many_arguments)]
    fn run_slice(
        &mut self,
        tid: u64,
        ts: u64,
        end: u64,
        id: u64,
        name: &str,
        labels: Option<&purloin_sched::Labels>,
        site: Option<super::record::Site>,
    ) -> io::Result<()> {
        self.head("X", tid, ts);
        self.line.extend_from_slice(b",\"dur\":");
        push_us(&mut self.line, end - ts);
        self.cat_name("run", name, Some(id));
        self.line.extend_from_slice(b",\"args\":{\"id\":");
        push_u64(&mut self.line, id);
        if let Some(at) = site {
            let _ = write!(self.line, ",\"spawned_at\":\"{}:{}\"", Escaped(at.file()), at.line());
        }
        if let Some(labels) = labels {
            self.line.extend_from_slice(b",\"labels\":{");
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.line.push(b',');
                }
                let _ = write!(self.line, "\"{}\":\"{}\"", Escaped(k), Escaped(v));
            }
            self.line.push(b'}');
        }
        self.line.extend_from_slice(b"}}");
        self.close()
    }

    pub(super) fn rec(&mut self, tid: u64, rec: &Rec) -> io::Result<()> {
        match *rec {
            Rec::Run { ts, end, id, ref name, first, woke, ref labels, site } => {
                let name = name.as_deref().unwrap_or("");
                self.run_slice(tid, ts, end, id, name, labels.as_ref(), site)?;
                // A nanosecond into the slice: a viewer binds a finish to the slice open at
                // its time, and at the slice's very start that may still be the one before.
                let at = ts + (end - ts).min(1);
                if first {
                    self.flow("f", tid, at, "spawn", id)?;
                }
                if let Some(record) = woke {
                    self.flow("f", tid, at, "wake", record)?;
                }
                Ok(())
            }
            Rec::Blocking { ts, end, id } => {
                self.slice(tid, ts, end - ts, "blocking", "blocking", None, ("id", id))
            }
            Rec::Idle { ts, end, p } => {
                self.slice(tid, ts, end - ts, "worker", "idle", None, ("p", p as u64))
            }
            Rec::Spawn { ts, id, by, anchored } => {
                self.flow_start(tid, ts, id, by, anchored, "spawn", "spawn")
            }
            Rec::Unpark { ts, id, by, anchored } => {
                self.flow_start(tid, ts, id, by, anchored, "wake", "unpark")
            }
            Rec::Park { ts, id, wait } => {
                self.head("i", tid, ts);
                self.line.extend_from_slice(b",\"s\":\"t\"");
                self.cat_name("park", "park", None);
                self.line.extend_from_slice(b",\"args\":{\"id\":");
                push_u64(&mut self.line, id);
                match wait {
                    Some(w) => {
                        let _ = write!(
                            self.line,
                            ",\"reason\":\"{}\",\"object\":\"{:#x}\",\"holder\":{}",
                            w.kind.describe(),
                            w.object,
                            Opt(w.holder.map(|h| h.0))
                        );
                    }
                    None => self.line.extend_from_slice(b",\"reason\":null"),
                }
                self.line.extend_from_slice(b"}}");
                self.close()
            }
            Rec::Steal { ts, thief, victim, count } => self.instant(
                tid,
                ts,
                "sched",
                "steal",
                &[
                    ("thief", Some(thief as u64)),
                    ("victim", Some(victim as u64)),
                    ("count", Some(count as u64)),
                ],
            ),
            Rec::GlobalPull { ts, p } => {
                self.instant(tid, ts, "sched", "global pull", &[("p", Some(p as u64))])
            }
            Rec::Timers { ts, count } => {
                self.instant(tid, ts, "sched", "timers fired", &[("count", Some(count as u64))])
            }
            Rec::Poll { ts, readied } => {
                self.instant(tid, ts, "sched", "poller wake", &[("readied", Some(readied as u64))])
            }
        }
    }

    /// A flow's start (`spawn` or `wake`) with its instant (`what`); outside a run slice it
    /// gets a two-nanosecond slice of its own to bind to (a flow starts in a slice).
    #[allow(clippy::too_many_arguments)]
    fn flow_start(
        &mut self,
        tid: u64,
        ts: u64,
        id: u64,
        by: Option<u64>,
        anchored: bool,
        cat: &str,
        what: &str,
    ) -> io::Result<()> {
        if anchored {
            self.instant(tid, ts, cat, what, &[("id", Some(id)), ("by", by)])?;
        } else {
            self.head("X", tid, ts);
            self.line.extend_from_slice(b",\"dur\":0.002");
            self.cat_name(cat, what, None);
            self.line.extend_from_slice(b",\"args\":{\"id\":");
            push_u64(&mut self.line, id);
            self.line.extend_from_slice(b",\"by\":");
            let _ = write!(self.line, "{}", Opt(by));
            self.line.extend_from_slice(b"}}");
            self.close()?;
        }
        // Inside its slice (the start binds to the slice open at its time).
        self.flow("s", tid, if anchored { ts } else { ts + 1 }, cat, id)
    }
}

/// Appends `v` in decimal (without `core::fmt`: the writer formats millions of numbers).
fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends nanoseconds as the format's microseconds, to the nanosecond (`1234.567`).
fn push_us(out: &mut Vec<u8>, ns: u64) {
    push_u64(out, ns / 1000);
    let frac = ns % 1000;
    out.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

/// A number or `null`.
struct Opt(Option<u64>);

impl std::fmt::Display for Opt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("null"),
        }
    }
}

/// A JSON string's contents.
struct Escaped<'a>(&'a str);

impl std::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Escaped, push_u64, push_us};

    #[test]
    fn escapes_and_numbers() {
        assert_eq!(Escaped("a\"b\\c\n").to_string(), "a\\\"b\\\\c\\u000a");
        let mut s = Vec::new();
        push_us(&mut s, 1_234_567);
        s.push(b' ');
        push_us(&mut s, 5);
        s.push(b' ');
        push_u64(&mut s, 0);
        s.push(b' ');
        push_u64(&mut s, u64::MAX);
        assert_eq!(String::from_utf8(s).unwrap(), "1234.567 0.005 0 18446744073709551615");
    }
}
