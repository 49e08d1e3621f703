//! The access log: one line per request, formatted and written by a thread
//! of its own, so that a slow disk, a full disk or a reader that stops
//! reading never holds up a request.
//!
//! A request hands its finished [`Outcome`] to [`AccessLog::send`], which
//! never waits: when the bounded queue is full the line is dropped and
//! counted (`crawlgate_access_log_dropped_lines_total`). The writer thread
//! formats ([`LogFormat::Combined`] or [`LogFormat::Json`]) and writes in
//! batches, flushing whenever the queue is empty. A write that fails (disk
//! full, closed pipe) loses that batch, is reported a few times a minute,
//! and the writer carries on. [`AccessLog::reopen`] (SIGUSR1) makes the
//! writer open the file again by name, after logrotate moved it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use time::OffsetDateTime;

use crate::classify::{Reason, UaClass};
use crate::config::LogFormat;
use crate::logging::LogLimiter;
use crate::metrics::Metrics;
use crate::observe::{truncate, Outcome};
use crate::policy::Policy;

/// Lines that can wait for the writer; past this they are dropped.
pub const QUEUE_LINES: usize = 4096;

/// At most this many write-failure warnings a second.
static WRITE_FAILURES: LogLimiter = LogLimiter::new(1);

/// One line to write: the outcome, how to format it, and the rules that
/// name its deciding rule.
struct Line {
    outcome: Outcome,
    format: LogFormat,
    policy: Arc<Policy>,
}

/// The sending side, shared by every worker.
#[derive(Debug)]
pub struct AccessLog {
    queue: SyncSender<Line>,
    reopen: Arc<AtomicBool>,
}

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Line").finish_non_exhaustive()
    }
}

impl AccessLog {
    /// Opens `file` (append, created if missing; `None` = standard error)
    /// and starts the writer thread.
    pub fn start(file: Option<&Path>, metrics: Arc<Metrics>) -> io::Result<Self> {
        let sink = Sink::open(file)?;
        let (queue, lines) = mpsc::sync_channel(QUEUE_LINES);
        let reopen = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            sink,
            lines,
            reopen: Arc::clone(&reopen),
            buf: Vec::with_capacity(64 * 1024),
            metrics,
        };
        std::thread::Builder::new()
            .name("crawlgate-log".to_owned())
            .spawn(move || writer.run())?;
        Ok(Self { queue, reopen })
    }

    /// Queues one line; `false` if it was dropped (queue full).
    pub fn send(&self, outcome: Outcome, format: LogFormat, policy: Arc<Policy>) -> bool {
        let line = Line {
            outcome,
            format,
            policy,
        };
        match self.queue.try_send(line) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    /// Asks the writer to open the file again by name (after the lines
    /// already queued).
    pub fn reopen(&self) {
        self.reopen.store(true, Ordering::Release);
    }
}

/// Where lines go.
enum Sink {
    Stderr,
    File { path: PathBuf, file: File },
}

impl Sink {
    fn open(path: Option<&Path>) -> io::Result<Self> {
        match path {
            None => Ok(Sink::Stderr),
            Some(path) => Ok(Sink::File {
                path: path.to_owned(),
                file: open_append(path)?,
            }),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Stderr => io::stderr().lock().write_all(bytes),
            Sink::File { file, .. } => file.write_all(bytes),
        }
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", path.display())))
}

struct Writer {
    sink: Sink,
    lines: Receiver<Line>,
    reopen: Arc<AtomicBool>,
    buf: Vec<u8>,
    metrics: Arc<Metrics>,
}

impl Writer {
    fn run(mut self) {
        // Wakes at least once a second, to reopen even when no request comes.
        let tick = std::time::Duration::from_secs(1);
        loop {
            match self.lines.recv_timeout(tick) {
                Ok(line) => {
                    format_line(&line, &mut self.buf);
                    // Whatever else is queued goes in the same write.
                    while self.buf.len() < 60 * 1024 {
                        let Ok(line) = self.lines.try_recv() else {
                            break;
                        };
                        format_line(&line, &mut self.buf);
                    }
                    self.flush();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.flush();
                    return;
                }
            }
            if self.reopen.swap(false, Ordering::AcqRel) {
                self.reopen_file();
            }
        }
    }

    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Err(err) = self.sink.write_all(&self.buf) {
            let lines = self.buf.iter().filter(|&&b| b == b'\n').count();
            for _ in 0..lines {
                self.metrics.log_line_dropped();
            }
            if let Some(suppressed) = WRITE_FAILURES.admit() {
                tracing::warn!(error = %err, lines, suppressed, "cannot write the access log; lines lost");
            }
        }
        self.buf.clear();
    }

    fn reopen_file(&mut self) {
        let Sink::File { path, file } = &mut self.sink else {
            tracing::info!("access log reopen asked: it is standard error, nothing to reopen");
            return;
        };
        match open_append(path) {
            Ok(new) => {
                *file = new;
                tracing::info!(file = %path.display(), "access log reopened");
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot reopen the access log; still writing to the old file");
            }
        }
    }
}

/// Appends one line (with its newline) in `line.format` to `out`.
fn format_line(line: &Line, out: &mut Vec<u8>) {
    let _ = match line.format {
        LogFormat::Combined => combined(line, out),
        LogFormat::Json => json(line, out),
    };
}

/// The deciding rule's name (`search:Googlebot`, `no-bot-token`, …).
fn rule_name(policy: &Policy, verdict: Option<(UaClass, Reason)>) -> Option<String> {
    verdict.map(|(_, reason)| policy.classifier.explain(reason))
}

/// The robot's class for the log: `human`, or the list of the bot token
/// (`search`, `ai`, …), `no-user-agent`; `-` before classification.
fn class_name(policy: &Policy, verdict: Option<(UaClass, Reason)>) -> &str {
    match verdict {
        None => "-",
        Some((UaClass::Human, _)) | Some((_, Reason::NoBotToken(_))) => "human",
        Some((_, Reason::EmptyUserAgent)) => "no-user-agent",
        Some((_, Reason::Token(i))) => policy.classifier.rules().get(i).map_or("bot", |r| &*r.list),
    }
}

/// `HTTP/1.1`, `HTTP/2.0`, as nginx writes `$server_protocol`.
fn protocol(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// `[10/Oct/2000:13:55:36 +0000]`'s inside.
fn clf_time(time: SystemTime) -> String {
    let format = time::macros::format_description!(
        "[day]/[month repr:short]/[year]:[hour]:[minute]:[second] +0000"
    );
    OffsetDateTime::from(time)
        .format(&format)
        .unwrap_or_else(|_| "01/Jan/1970:00:00:00 +0000".to_owned())
}

/// Writes `text` escaped as nginx escapes variables in a quoted field:
/// `"`, `\` and bytes outside visible ASCII as `\xHH`.
fn escaped(out: &mut Vec<u8>, text: &[u8]) {
    for &b in text {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(b);
        }
    }
}

fn seconds(d: std::time::Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// `client - - [time] "request" status bytes "referer" "user-agent"`, the
/// combined format byte for byte, then crawlgate's fields:
/// ` class=… rule="…" decision=… upstream=S total=S` (`-` when absent).
fn combined(line: &Line, out: &mut Vec<u8>) -> io::Result<()> {
    let o = &line.outcome;
    let Some(req) = &o.request else {
        return Ok(());
    };
    write!(out, "{} - - [{}] \"", o.client, clf_time(req.time))?;
    escaped(out, req.method.as_str().as_bytes());
    out.push(b' ');
    let target = req.uri.to_string();
    escaped(out, truncate(&target).as_bytes());
    write!(
        out,
        " {}\" {} {} \"",
        protocol(o.version),
        o.status.as_u16(),
        o.bytes_out
    )?;
    let header = |out: &mut Vec<u8>, value: &Option<http::HeaderValue>| match value {
        Some(v) => escaped(out, &v.as_bytes()[..v.len().min(1024)]),
        None => out.push(b'-'),
    };
    header(out, &req.referer);
    out.extend_from_slice(b"\" \"");
    header(out, &req.user_agent);
    write!(
        out,
        "\" class={} rule=\"",
        class_name(&line.policy, o.verdict)
    )?;
    match rule_name(&line.policy, o.verdict) {
        Some(rule) => escaped(out, rule.as_bytes()),
        None => out.push(b'-'),
    }
    write!(
        out,
        "\" decision={} upstream={} total={}",
        o.route.as_str(),
        o.upstream_time.map_or_else(|| "-".to_owned(), seconds),
        seconds(o.total_time)
    )?;
    if let Some((kind, side)) = o.error {
        write!(out, " error={kind} error_side={}", side.as_str())?;
    }
    out.push(b'\n');
    Ok(())
}

/// Every field of the outcome, one JSON object.
#[derive(Serialize)]
struct JsonLine<'a> {
    time: String,
    client: String,
    method: &'a str,
    host: Option<&'a str>,
    path: &'a str,
    query: Option<&'a str>,
    protocol: &'static str,
    tls: bool,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
    referer: Option<std::borrow::Cow<'a, str>>,
    user_agent: Option<std::borrow::Cow<'a, str>>,
    class: &'a str,
    rule: Option<String>,
    decision: &'static str,
    upstream_seconds: Option<f64>,
    total_seconds: f64,
    error: Option<&'static str>,
    error_side: Option<&'static str>,
}

fn json(line: &Line, out: &mut Vec<u8>) -> io::Result<()> {
    let o = &line.outcome;
    let Some(req) = &o.request else {
        return Ok(());
    };
    fn text(v: &Option<http::HeaderValue>) -> Option<std::borrow::Cow<'_, str>> {
        v.as_ref()
            .map(|v| String::from_utf8_lossy(&v.as_bytes()[..v.len().min(1024)]))
    }
    let time = OffsetDateTime::from(req.time)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let record = JsonLine {
        time,
        client: o.client.to_string(),
        method: req.method.as_str(),
        host: req.host().map(truncate),
        path: truncate(req.uri.path()),
        query: req.uri.query().map(truncate),
        protocol: protocol(o.version),
        tls: o.tls,
        status: o.status.as_u16(),
        bytes_in: o.bytes_in,
        bytes_out: o.bytes_out,
        referer: text(&req.referer),
        user_agent: text(&req.user_agent),
        class: class_name(&line.policy, o.verdict),
        rule: rule_name(&line.policy, o.verdict),
        decision: o.route.as_str(),
        upstream_seconds: o.upstream_time.map(|d| d.as_secs_f64()),
        total_seconds: o.total_time.as_secs_f64(),
        error: o.error.map(|(kind, _)| kind),
        error_side: o.error.map(|(_, side)| side.as_str()),
    };
    serde_json::to_writer(&mut *out, &record).map_err(io::Error::other)?;
    out.push(b'\n');
    Ok(())
}
