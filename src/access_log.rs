//! The access log: one line per request, formatted and written by a thread
//! of its own, so that a slow disk, a full disk or a reader that stops
//! reading never holds up a request.
//!
//! A request hands its finished [`Outcome`] to [`AccessLog::send`], which
//! never waits: when the bounded queue is full the line is dropped and
//! counted (`crawlgate_access_log_dropped_lines_total`). The writer thread
//! formats ([`LogFormat::Combined`] or [`LogFormat::Json`]) and writes in
//! batches: once a line arrives it lets [`BATCH`] pass, then formats all
//! that is queued and writes it in one call. Under load that is one wake-up
//! and one write per batch instead of one per request (which cost a
//! context switch per request on a busy core); idle, it sleeps in the
//! queue. A write that fails (disk
//! full, closed pipe) loses that batch, is reported a few times a minute,
//! and the writer carries on. [`AccessLog::reopen`] (SIGUSR1) makes the
//! writer open the file again by name, after logrotate moved it: a message
//! in the same queue, so it takes effect at once (no batch wait) and every
//! line queued after the signal goes to the new file.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use time::OffsetDateTime;

use crate::classify::{Classifier, Reason, UaClass};
use crate::config::LogFormat;
use crate::logging::LogLimiter;
use crate::metrics::Metrics;
use crate::outcome::{truncate, Outcome};

/// Lines that can wait for the writer; past this they are dropped. With
/// [`BATCH`], room for 400,000 requests a second.
pub const QUEUE_LINES: usize = 8192;

/// How long the writer lets lines gather before it writes them.
pub const BATCH: std::time::Duration = std::time::Duration::from_millis(20);

/// At most this many write-failure warnings a second.
static WRITE_FAILURES: LogLimiter = LogLimiter::new(1);

/// One line to write: the outcome, how to format it, and the classifier
/// that names its class and deciding rule.
struct Line {
    outcome: Outcome,
    format: LogFormat,
    classifier: Arc<Classifier>,
}

/// What the writer is sent.
enum Msg {
    Line(Line),
    /// Open the file again by name, before the lines queued after this.
    Reopen,
    /// Write every line queued before this, then say so.
    Flush(SyncSender<()>),
}

/// The sending side, shared by every worker.
#[derive(Debug)]
pub struct AccessLog {
    queue: SyncSender<Msg>,
    /// A reopen that could not be queued (queue full): the writer, busy
    /// with a batch then, reopens after it.
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
            clock: Clock::default(),
        };
        std::thread::Builder::new()
            .name("crawlgate-log".to_owned())
            .spawn(move || writer.run())?;
        Ok(Self { queue, reopen })
    }

    /// Waits, up to `timeout`, until every line queued so far is written:
    /// the last thing a stopping process does, so that the requests
    /// answered just before the stop are not lost in the writer's batch.
    /// Blocks the calling thread; `false` when the writer did not answer
    /// in time.
    pub fn flush_wait(&self, timeout: std::time::Duration) -> bool {
        let (done, wait) = mpsc::sync_channel(1);
        let deadline = std::time::Instant::now() + timeout;
        let mut msg = Msg::Flush(done);
        // A full queue empties as the writer works: try until the deadline.
        loop {
            match self.queue.try_send(msg) {
                Ok(()) => break,
                Err(mpsc::TrySendError::Full(back)) if std::time::Instant::now() < deadline => {
                    msg = back;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(_) => return false,
            }
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        wait.recv_timeout(left).is_ok()
    }

    /// Queues one line; `false` if it was dropped (queue full).
    pub fn send(&self, outcome: Outcome, format: LogFormat, classifier: Arc<Classifier>) -> bool {
        let line = Line {
            outcome,
            format,
            classifier,
        };
        match self.queue.try_send(Msg::Line(line)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    /// Asks the writer to open the file again by name, after the lines
    /// already queued and before any queued later. Never waits: with the
    /// queue full the writer is in a batch, and reopens right after it.
    pub fn reopen(&self) {
        if let Err(TrySendError::Full(_)) = self.queue.try_send(Msg::Reopen) {
            self.reopen.store(true, Ordering::Release);
        }
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
    lines: Receiver<Msg>,
    reopen: Arc<AtomicBool>,
    buf: Vec<u8>,
    metrics: Arc<Metrics>,
    clock: Clock,
}

impl Writer {
    fn run(mut self) {
        loop {
            match self.lines.recv() {
                Ok(Msg::Line(line)) => {
                    // Let the rest of the batch arrive without waking us.
                    std::thread::sleep(BATCH);
                    self.format(&line);
                    while let Ok(msg) = self.lines.try_recv() {
                        match msg {
                            Msg::Line(line) => self.format(&line),
                            Msg::Reopen => self.reopen_file(),
                            Msg::Flush(done) => {
                                self.flush();
                                let _ = done.send(());
                            }
                        }
                        // A reopen that found the queue full: the queue may
                        // not empty while the load lasts, so not after it.
                        if self.reopen.swap(false, Ordering::AcqRel) {
                            self.reopen_file();
                        }
                        if self.buf.len() >= 256 * 1024 {
                            self.flush();
                        }
                    }
                    self.flush();
                }
                Ok(Msg::Reopen) => self.reopen_file(),
                Ok(Msg::Flush(done)) => {
                    self.flush();
                    let _ = done.send(());
                }
                Err(mpsc::RecvError) => {
                    self.flush();
                    return;
                }
            }
            if self.reopen.swap(false, Ordering::AcqRel) {
                self.reopen_file();
            }
        }
    }

    fn format(&mut self, line: &Line) {
        let _ = match line.format {
            LogFormat::Combined => combined(line, &mut self.clock, &mut self.buf),
            LogFormat::Json => json(line, &mut self.buf),
        };
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

    /// Writes what is formatted to the file open now, then opens the file
    /// again by name.
    fn reopen_file(&mut self) {
        self.flush();
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

/// The request's class after verification for the log
/// ([`Outcome::class`], [`Classifier::class_name`]); `-` before
/// classification.
fn class_name<'a>(classifier: &'a Classifier, outcome: &Outcome) -> &'a str {
    outcome
        .class
        .map_or("-", |class| classifier.class_name(class))
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

/// `[10/Oct/2000:13:55:36 +0000]`'s inside, formatted once per second.
#[derive(Default)]
struct Clock {
    second: u64,
    text: String,
}

impl Clock {
    fn clf(&mut self, time: SystemTime) -> &str {
        let second = time
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if second != self.second || self.text.is_empty() {
            let format = time::macros::format_description!(
                "[day]/[month repr:short]/[year]:[hour]:[minute]:[second] +0000"
            );
            self.second = second;
            self.text = OffsetDateTime::from(time)
                .format(&format)
                .unwrap_or_else(|_| "01/Jan/1970:00:00:00 +0000".to_owned());
        }
        &self.text
    }
}

/// Writes `text` escaped as nginx escapes variables in a quoted field:
/// `"`, `\` and bytes outside visible ASCII as `\xHH`. Runs of plain
/// bytes are copied whole.
fn escaped(out: &mut Vec<u8>, mut text: &[u8]) {
    while !text.is_empty() {
        let run = text.iter().position(|b| !is_plain(b)).unwrap_or(text.len());
        out.extend_from_slice(&text[..run]);
        let Some(&b) = text.get(run) else {
            break;
        };
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        out.extend_from_slice(&[
            b'\\',
            b'x',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 15)],
        ]);
        text = &text[run + 1..];
    }
}

/// A byte written as itself in a quoted field.
fn is_plain(b: &u8) -> bool {
    *b != b'"' && *b != b'\\' && (0x20..0x7f).contains(b)
}

/// `1.234` (seconds, milliseconds precision), without a float or a String.
fn seconds(out: &mut Vec<u8>, d: std::time::Duration) -> io::Result<()> {
    let ms = d.as_millis();
    write!(out, "{}.{:03}", ms / 1000, ms % 1000)
}

/// The deciding rule's name ([`Classifier::explained`]), escaped; `-`
/// before classification. Copied only when it holds a byte to escape (a
/// token written in quotes for exact case).
fn write_rule(out: &mut Vec<u8>, classifier: &Classifier, verdict: Option<(UaClass, Reason)>) {
    let Some((_, reason)) = verdict else {
        out.push(b'-');
        return;
    };
    let start = out.len();
    let _ = write!(out, "{}", classifier.explained(reason));
    if !out[start..].iter().all(is_plain) {
        let raw = out.split_off(start);
        escaped(out, &raw);
    }
}

/// `client - - [time] "request" status bytes "referer" "user-agent"`, the
/// combined format byte for byte, then crawlgate's fields:
/// ` class=… rule="…" decision=… upstream=S total=S` (`-` when absent),
/// then ` error=… error_side=…` for a failed exchange, ` verified=…`
/// for a robot that claims a crawler operator, and ` enforced=0` for a
/// decision observe mode did not carry out (nothing otherwise: an
/// enforce-mode line is unchanged).
fn combined(line: &Line, clock: &mut Clock, out: &mut Vec<u8>) -> io::Result<()> {
    let o = &line.outcome;
    let Some(req) = &o.request else {
        return Ok(());
    };
    write!(out, "{} - - [{}] \"", req.client, clock.clf(req.time))?;
    escaped(out, req.method.as_str().as_bytes());
    out.push(b' ');
    // The request-target as sent: absolute form with its authority.
    let mut target = out.len();
    if let Some(prefix) = req.absolute_prefix() {
        escaped(out, prefix.as_bytes());
    }
    escaped(out, req.path_and_query().as_bytes());
    // Cut at LOG_FIELD_MAX bytes of escaped text (only ASCII is written).
    target += crate::outcome::LOG_FIELD_MAX;
    if out.len() > target {
        out.truncate(target);
    }
    write!(
        out,
        " {}\" {} {} \"",
        protocol(o.version),
        o.status.map_or(0, |s| s.as_u16()),
        o.bytes_out
    )?;
    let header = |out: &mut Vec<u8>, value: Option<&[u8]>| match value {
        Some(v) => escaped(out, &v[..v.len().min(1024)]),
        None => out.push(b'-'),
    };
    header(out, req.referer());
    out.extend_from_slice(b"\" \"");
    header(out, req.user_agent());
    write!(out, "\" class={} rule=\"", class_name(&line.classifier, o))?;
    write_rule(out, &line.classifier, o.verdict);
    write!(out, "\" decision={} upstream=", o.route.as_str())?;
    match o.upstream_time {
        Some(d) => seconds(out, d)?,
        None => out.push(b'-'),
    }
    out.extend_from_slice(b" total=");
    seconds(out, o.total_time)?;
    if let Some((kind, side)) = o.error {
        write!(out, " error={kind} error_side={}", side.as_str())?;
    }
    if let Some(identity) = o.identity {
        write!(out, " verified={}", identity.as_str())?;
    }
    if o.not_enforced {
        out.extend_from_slice(b" enforced=0");
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
    enforced: bool,
    upstream_seconds: Option<f64>,
    total_seconds: f64,
    error: Option<&'static str>,
    error_side: Option<&'static str>,
    verified: Option<&'static str>,
}

fn json(line: &Line, out: &mut Vec<u8>) -> io::Result<()> {
    let o = &line.outcome;
    let Some(req) = &o.request else {
        return Ok(());
    };
    fn text(v: Option<&[u8]>) -> Option<std::borrow::Cow<'_, str>> {
        v.map(|v| String::from_utf8_lossy(&v[..v.len().min(1024)]))
    }
    let time = OffsetDateTime::from(req.time)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let record = JsonLine {
        time,
        client: req.client.to_string(),
        method: req.method.as_str(),
        host: req.host().map(truncate),
        path: truncate(req.path()),
        query: req.query().map(truncate),
        protocol: protocol(o.version),
        tls: o.tls,
        status: o.status.map_or(0, |s| s.as_u16()),
        bytes_in: o.bytes_in,
        bytes_out: o.bytes_out,
        referer: text(req.referer()),
        user_agent: text(req.user_agent()),
        class: class_name(&line.classifier, o),
        rule: o
            .verdict
            .map(|(_, reason)| line.classifier.explained(reason).to_string()),
        decision: o.route.as_str(),
        enforced: !o.not_enforced,
        upstream_seconds: o.upstream_time.map(|d| d.as_secs_f64()),
        total_seconds: o.total_time.as_secs_f64(),
        error: o.error.map(|(kind, _)| kind),
        error_side: o.error.map(|(_, side)| side.as_str()),
        verified: o.identity.map(|i| i.as_str()),
    };
    serde_json::to_writer(&mut *out, &record).map_err(io::Error::other)?;
    out.push(b'\n');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25: a reopen takes effect at once and in order: the line
    /// queued right after it goes to the new file, not to the moved one
    /// (the writer used to look at the request only after its next batch
    /// or once a second).
    #[test]
    fn a_line_queued_after_a_reopen_goes_to_the_new_file() {
        use crate::outcome::RequestLine;
        use crate::route::Route;

        let classifier =
            Arc::new(Classifier::new(&crate::rules::RuleLists::embedded()).expect("rules compile"));
        let line = |path: &str| Outcome {
            request: Some(Box::new(RequestLine::new(
                SystemTime::now(),
                std::net::Ipv4Addr::LOCALHOST.into(),
                http::Method::GET,
                &path.parse().expect("uri"),
                None,
                None,
                None,
            ))),
            version: http::Version::HTTP_11,
            tls: false,
            verdict: None,
            class: None,
            route: Route::Forward,
            not_enforced: false,
            status: Some(http::StatusCode::OK),
            bytes_in: 0,
            bytes_out: 0,
            upstream_time: None,
            total_time: std::time::Duration::ZERO,
            error: None,
            identity: None,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("access.log");
        let rotated = dir.path().join("access.log.1");
        let log = AccessLog::start(Some(&path), Arc::new(Metrics::new())).expect("start");
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let wait = |p: &Path, n: usize| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while read(p).lines().count() < n {
                assert!(std::time::Instant::now() < deadline, "{} lines in {p:?}", n);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        };
        assert!(log.send(line("/one"), LogFormat::Combined, Arc::clone(&classifier)));
        wait(&path, 1);
        std::fs::rename(&path, &rotated).expect("rotate");
        log.reopen();
        assert!(log.send(line("/two"), LogFormat::Combined, Arc::clone(&classifier)));
        wait(&path, 1);
        assert!(read(&path).contains("GET /two "), "{}", read(&path));
        let old = read(&rotated);
        assert_eq!(old.lines().count(), 1, "{old}");
        assert!(old.contains("GET /one "), "{old}");
    }

    /// A decision observe mode did not carry out: ` enforced=0` at the
    /// end of a combined line (nothing on an enforced one), `"enforced"`
    /// in every JSON line.
    #[test]
    fn a_decision_not_carried_out_says_so() {
        use crate::outcome::RequestLine;
        use crate::route::Route;

        let classifier =
            Arc::new(Classifier::new(&crate::rules::RuleLists::embedded()).expect("rules compile"));
        let line = |not_enforced: bool, format: LogFormat| Line {
            outcome: Outcome {
                request: Some(Box::new(RequestLine::new(
                    SystemTime::now(),
                    std::net::Ipv4Addr::LOCALHOST.into(),
                    http::Method::GET,
                    &"/?do=edit".parse().expect("uri"),
                    None,
                    None,
                    None,
                ))),
                route: Route::Block,
                not_enforced,
                status: Some(http::StatusCode::OK),
                ..Outcome::default()
            },
            format,
            classifier: Arc::clone(&classifier),
        };
        let text = |line: Line| {
            let mut out = Vec::new();
            match line.format {
                LogFormat::Combined => combined(&line, &mut Clock::default(), &mut out),
                LogFormat::Json => json(&line, &mut out),
            }
            .expect("format");
            String::from_utf8(out).expect("utf-8")
        };
        let observed = text(line(true, LogFormat::Combined));
        assert!(
            observed.ends_with(" decision=block upstream=- total=0.000 enforced=0\n"),
            "{observed}"
        );
        let enforced = text(line(false, LogFormat::Combined));
        assert!(
            enforced.ends_with(" decision=block upstream=- total=0.000\n"),
            "{enforced}"
        );
        for (not_enforced, expected) in [(true, false), (false, true)] {
            let json: serde_json::Value =
                serde_json::from_str(&text(line(not_enforced, LogFormat::Json))).expect("json");
            assert_eq!(json["decision"], "block");
            assert_eq!(json["enforced"], expected, "{json}");
        }
    }

    #[test]
    fn quoted_fields_cannot_break_out_of_their_quotes() {
        let mut out = Vec::new();
        escaped(&mut out, b"a\"b\\c\nd\x7f\xe9 ok");
        assert_eq!(out, b"a\\x22b\\x5Cc\\x0Ad\\x7F\\xE9 ok");
    }

    #[test]
    fn seconds_have_millisecond_precision() {
        let mut out = Vec::new();
        seconds(&mut out, std::time::Duration::from_micros(1_234_567)).expect("write");
        out.push(b' ');
        seconds(&mut out, std::time::Duration::from_micros(999)).expect("write");
        assert_eq!(out, b"1.234 0.000");
    }

    #[test]
    fn the_clf_time_is_the_combined_format_s() {
        let mut clock = Clock::default();
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(971_186_136);
        assert_eq!(clock.clf(time), "10/Oct/2000:13:55:36 +0000");
        // The same second again comes from the cache; the next is new.
        assert_eq!(clock.clf(time), "10/Oct/2000:13:55:36 +0000");
        let later = time + std::time::Duration::from_secs(1);
        assert_eq!(clock.clf(later), "10/Oct/2000:13:55:37 +0000");
    }
}
