//! The writer thread: turns batches of records into Chrome trace-event JSON, streamed to the
//! file (no dependency: the format is a handful of object shapes).

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
    line: String,
}

impl Writer {
    pub(super) fn new(file: File) -> io::Result<Writer> {
        let mut w = Writer {
            out: BufWriter::new(file),
            pid: std::process::id(),
            events: 0,
            line: String::new(),
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
                Msg::Finish(reply) => {
                    let r = match failed.take() {
                        Some(e) => Err(e),
                        None => self.finish(),
                    };
                    let _ = reply.send(r);
                    return Ok(self.events);
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => self.finish(),
        }
    }

    fn finish(&mut self) -> io::Result<u64> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        self.out.get_ref().sync_data()?;
        Ok(self.events)
    }

    fn event(&mut self, args: std::fmt::Arguments<'_>) -> io::Result<()> {
        self.line.clear();
        if self.events > 0 {
            self.line.push_str(",\n");
        }
        let _ = self.line.write_fmt(args);
        self.out.write_all(self.line.as_bytes())?;
        self.events += 1;
        Ok(())
    }

    fn batch(&mut self, tid: u64, name: Option<String>, recs: Vec<Rec>) -> io::Result<()> {
        let pid = self.pid;
        if let Some(name) = name {
            let name = Escaped(&name);
            self.event(format_args!(
                r#"{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_name","args":{{"name":"{name}"}}}}"#
            ))?;
        }
        for rec in recs {
            self.rec(tid, rec)?;
        }
        Ok(())
    }

    fn rec(&mut self, tid: u64, rec: Rec) -> io::Result<()> {
        let pid = self.pid;
        let head = format_args!(r#""pid":{pid},"tid":{tid}"#).to_string();
        match rec {
            Rec::Run { ts, end, id, name, first, woke } => {
                let (t, d) = (Us(ts), Us(end - ts));
                match name {
                    Some(n) => {
                        let n = Escaped(&n);
                        self.event(format_args!(
                            r#"{{"ph":"X",{head},"ts":{t},"dur":{d},"cat":"run","name":"{n} G{id}","args":{{"id":{id}}}}}"#
                        ))?
                    }
                    None => self.event(format_args!(
                        r#"{{"ph":"X",{head},"ts":{t},"dur":{d},"cat":"run","name":"G{id}","args":{{"id":{id}}}}}"#
                    ))?,
                }
                if first {
                    self.event(format_args!(
                        r#"{{"ph":"f","bp":"e",{head},"ts":{t},"cat":"spawn","name":"spawn","id":{id}}}"#
                    ))?;
                }
                if woke {
                    self.event(format_args!(
                        r#"{{"ph":"f","bp":"e",{head},"ts":{t},"cat":"wake","name":"wake","id":{id}}}"#
                    ))?;
                }
            }
            Rec::Blocking { ts, end, id } => self.event(format_args!(
                r#"{{"ph":"X",{head},"ts":{},"dur":{},"cat":"blocking","name":"blocking","args":{{"id":{id}}}}}"#,
                Us(ts),
                Us(end - ts)
            ))?,
            Rec::Idle { ts, end, p } => self.event(format_args!(
                r#"{{"ph":"X",{head},"ts":{},"dur":{},"cat":"worker","name":"idle","args":{{"p":{p}}}}}"#,
                Us(ts),
                Us(end - ts)
            ))?,
            Rec::Spawn { ts, id, by, anchored } => {
                self.flow_start(&head, ts, id, by, anchored, "spawn")?;
            }
            Rec::Unpark { ts, id, by, anchored } => {
                self.flow_start(&head, ts, id, by, anchored, "wake")?;
            }
            Rec::Park { ts, id, wait } => {
                let t = Us(ts);
                match wait {
                    Some(w) => {
                        let reason = w.kind.describe();
                        let holder = Opt(w.holder.map(|h| h.0));
                        let object = w.object;
                        self.event(format_args!(
                            r#"{{"ph":"i","s":"t",{head},"ts":{t},"cat":"park","name":"park","args":{{"id":{id},"reason":"{reason}","object":"{object:#x}","holder":{holder}}}}}"#
                        ))?
                    }
                    None => self.event(format_args!(
                        r#"{{"ph":"i","s":"t",{head},"ts":{t},"cat":"park","name":"park","args":{{"id":{id},"reason":null}}}}"#
                    ))?,
                }
            }
            Rec::Steal { ts, thief, victim, count } => self.event(format_args!(
                r#"{{"ph":"i","s":"t",{head},"ts":{},"cat":"sched","name":"steal","args":{{"thief":{thief},"victim":{victim},"count":{count}}}}}"#,
                Us(ts)
            ))?,
            Rec::GlobalPull { ts, p } => self.event(format_args!(
                r#"{{"ph":"i","s":"t",{head},"ts":{},"cat":"sched","name":"global pull","args":{{"p":{p}}}}}"#,
                Us(ts)
            ))?,
            Rec::Timers { ts, count } => self.event(format_args!(
                r#"{{"ph":"i","s":"t",{head},"ts":{},"cat":"sched","name":"timers fired","args":{{"count":{count}}}}}"#,
                Us(ts)
            ))?,
            Rec::Poll { ts, readied } => self.event(format_args!(
                r#"{{"ph":"i","s":"t",{head},"ts":{},"cat":"sched","name":"poller wake","args":{{"readied":{readied}}}}}"#,
                Us(ts)
            ))?,
        }
        Ok(())
    }

    /// A flow's start (`spawn` or `wake`) with its instant; outside a run slice it gets a
    /// one-nanosecond slice of its own to bind to (a flow starts in a slice).
    fn flow_start(
        &mut self,
        head: &str,
        ts: u64,
        id: u64,
        by: Option<u64>,
        anchored: bool,
        cat: &str,
    ) -> io::Result<()> {
        let (t, by) = (Us(ts), Opt(by));
        let what = if cat == "spawn" { "spawn" } else { "unpark" };
        if anchored {
            self.event(format_args!(
                r#"{{"ph":"i","s":"t",{head},"ts":{t},"cat":"{cat}","name":"{what}","args":{{"id":{id},"by":{by}}}}}"#
            ))?;
        } else {
            self.event(format_args!(
                r#"{{"ph":"X",{head},"ts":{t},"dur":0.001,"cat":"{cat}","name":"{what}","args":{{"id":{id},"by":{by}}}}}"#
            ))?;
        }
        self.event(format_args!(
            r#"{{"ph":"s",{head},"ts":{t},"cat":"{cat}","name":"{cat}","id":{id}}}"#
        ))
    }
}

/// Nanoseconds as the format's microseconds, to the nanosecond.
struct Us(u64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
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
    use super::{Escaped, Us};

    #[test]
    fn escapes_and_times() {
        assert_eq!(Escaped("a\"b\\c\n").to_string(), "a\\\"b\\\\c\\u000a");
        assert_eq!(Us(1_234_567).to_string(), "1234.567");
        assert_eq!(Us(5).to_string(), "0.005");
    }
}
