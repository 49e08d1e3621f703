//! What crawlgate saw, in one place: each request's [`Outcome`], handed
//! to the one [`Observer`] that counts it in the metrics and writes it to
//! the access log.
//!
//! The observer belongs to the process: it is created once, at start, and
//! every state a reload builds holds the same `Arc` of it, so what it
//! keeps outlives reloads. The record is finished when the response body
//! has been sent (or the exchange ended), so it carries the bytes sent and
//! the total time; [`Observed`] is the response body that does that.

use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderValue, HOST, REFERER, USER_AGENT};
use http::{Method, Request, StatusCode, Uri, Version};
use hyper::body::{Frame, Incoming, SizeHint};
use tokio::time::Instant;

use crate::access_log::AccessLog;
use crate::classify::{Reason, RobotClass, UaClass, Verdict};
use crate::metrics::{InFlight, Metrics};
use crate::proxy::body::BodyBytes;
use crate::response::Body;
use crate::service::Shared;
use crate::shed::Load;
use crate::verify::store::RangeStore;
use crate::verify::Identity;

/// Longest path, host or request-target written to the access log, in
/// bytes.
pub const LOG_FIELD_MAX: usize = 256;

/// What was done with a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Route {
    /// Forwarded to the upstream.
    Forward,
    /// A robot's action URL: 403.
    Block,
    /// The canonical address: 301/308.
    Redirect,
    /// The synthesized robots.txt.
    Robots,
    /// Refused before any decision (bad framing, too long, CONNECT).
    #[default]
    Reject,
    /// A robot shed under upstream pressure: 503 or 429.
    Shed,
    /// A robot answered from the robots cache.
    Cache,
    /// A file of the sitemap folder (or 404 for none).
    Sitemap,
}

impl Route {
    /// Every route, in declaration order (`route as usize` indexes it).
    pub const ALL: [Route; 8] = [
        Route::Forward,
        Route::Block,
        Route::Redirect,
        Route::Robots,
        Route::Reject,
        Route::Shed,
        Route::Cache,
        Route::Sitemap,
    ];

    /// The label: `forward`, `block`, `redirect`, `robots`, `reject`,
    /// `shed`, `cache`, `sitemap`.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Forward => "forward",
            Route::Block => "block",
            Route::Redirect => "redirect",
            Route::Robots => "robots",
            Route::Reject => "reject",
            Route::Shed => "shed",
            Route::Cache => "cache",
            Route::Sitemap => "sitemap",
        }
    }
}

/// Which side made an exchange fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The client (a broken or oversized request body).
    Client,
    /// The upstream (refused, timed out, broke off).
    Upstream,
    /// crawlgate itself: the end of a drain's grace period closed the
    /// connection.
    Proxy,
}

impl Side {
    /// `client`, `upstream` or `proxy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Upstream => "upstream",
            Side::Proxy => "proxy",
        }
    }
}

/// The request as the access log shows it (kept only when it is on; every
/// field is a reference-counted view of what hyper parsed, not a copy).
#[derive(Debug)]
pub struct RequestLine {
    /// When the request arrived (wall clock, for the log's timestamp).
    pub time: SystemTime,
    /// The client: the peer, or the address a trusted proxy forwarded for.
    pub client: IpAddr,
    /// The method.
    pub method: Method,
    /// The request-target.
    pub uri: Uri,
    /// The Host header.
    pub host: Option<HeaderValue>,
    /// The User-Agent header.
    pub user_agent: Option<HeaderValue>,
    /// The Referer header.
    pub referer: Option<HeaderValue>,
}

impl RequestLine {
    /// The parts of `req` the log shows, from `client`.
    pub fn of(req: &Request<Incoming>, client: IpAddr) -> Self {
        let headers = req.headers();
        Self {
            time: SystemTime::now(),
            client,
            method: req.method().clone(),
            uri: req.uri().clone(),
            host: headers.get(HOST).cloned(),
            user_agent: headers.get(USER_AGENT).cloned(),
            referer: headers.get(REFERER).cloned(),
        }
    }

    /// The host asked for: the request-target's authority, or the Host
    /// header when it is text.
    pub fn host(&self) -> Option<&str> {
        crate::service::authority(&self.uri, self.host.as_ref())
    }
}

/// One request's outcome: every field the access log and the metrics use
/// (what only the log shows is in [`RequestLine`], built only when the log
/// is on).
#[derive(Debug, Default)]
pub struct Outcome {
    /// The request, when the access log is on (boxed: the record travels
    /// with every response, and most of its size is this).
    pub request: Option<Box<RequestLine>>,
    /// The protocol version.
    pub version: Version,
    /// Over TLS.
    pub tls: bool,
    /// The User-Agent's class and the rule that decided (`None` when the
    /// request was refused before classification).
    pub verdict: Option<(UaClass, Reason)>,
    /// What was done.
    pub route: Route,
    /// The status sent; `None` when the request ended before it had an
    /// answer (the access log says 0).
    pub status: Option<StatusCode>,
    /// Request body bytes passed upstream (0 when not forwarded: a body
    /// is never read for a synthetic answer).
    pub bytes_in: u64,
    /// Response body bytes sent.
    pub bytes_out: u64,
    /// Until the upstream's response head, when forwarded.
    pub upstream_time: Option<Duration>,
    /// Until the response body was done.
    pub total_time: Duration,
    /// Why the exchange failed, and on which side.
    pub error: Option<(&'static str, Side)>,
    /// What verification found for a robot's crawler claim.
    pub identity: Option<Identity>,
}

impl Outcome {
    /// The request's class after verification, as the decision, the class
    /// header and shedding took it ([`Verdict::robot_class`]): a spoofed
    /// claim counts as `unknown` in the log and the metrics too. `None`
    /// when the request was refused before classification.
    pub fn class(&self) -> Option<RobotClass> {
        self.verdict.map(|(class, reason)| {
            Verdict { class, reason }.robot_class(self.identity == Some(Identity::Spoofed))
        })
    }
}

/// The process-wide observer: created once, shared by every state a
/// reload builds. It holds the metrics, the health the admin listener
/// reports, the access log's queue, and what outlives a reload: the
/// upstream's load and the crawler range lists.
#[derive(Debug)]
pub struct Observer {
    /// Every metric.
    pub metrics: Arc<Metrics>,
    /// What `/readyz` reports.
    pub health: Health,
    /// The upstream's load, for shedding.
    pub load: Load,
    /// The crawler operators' range lists, for verification.
    pub ranges: Arc<RangeStore>,
    log: OnceLock<AccessLog>,
}

impl Default for Observer {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer {
    /// An observer without an access log yet.
    pub fn new() -> Self {
        let metrics = Arc::new(Metrics::new());
        let ranges = Arc::new(RangeStore::new(&metrics));
        Self {
            metrics,
            health: Health::default(),
            load: Load::default(),
            ranges,
            log: OnceLock::new(),
        }
    }

    /// Opens the access log (`None` = standard error) and starts its
    /// writer; once per process.
    pub fn start_log(&self, file: Option<&Path>) -> std::io::Result<()> {
        if self.log.get().is_some() {
            return Ok(());
        }
        let log = AccessLog::start(file, Arc::clone(&self.metrics))?;
        let _ = self.log.set(log);
        Ok(())
    }

    /// Has the access log's writer open its file again (SIGUSR1).
    pub fn reopen_log(&self) {
        if let Some(log) = self.log.get() {
            log.reopen();
        }
    }

    /// Takes one finished request: counted, and queued for the log.
    pub fn record(&self, shared: &Shared, outcome: Outcome) {
        shared.counters.count(
            outcome.route,
            outcome.class(),
            outcome.status.map_or(0, |s| s.as_u16()),
        );
        if outcome.request.is_none() {
            return;
        }
        if let Some(log) = self.log.get() {
            if !log.send(outcome, shared.log_format, Arc::clone(&shared.policy)) {
                self.metrics.log_line_dropped();
            }
        }
    }
}

/// What readiness depends on, updated as the process goes.
#[derive(Debug)]
pub struct Health {
    epoch: Instant,
    serving: AtomicBool,
    draining: AtomicBool,
    /// The drain's grace period is over.
    closing: AtomicBool,
    /// Milliseconds after `epoch` (+1) of the upstream's last answer; 0 =
    /// never.
    upstream_seen: AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            serving: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            upstream_seen: AtomicU64::new(0),
        }
    }
}

impl Health {
    /// The listeners are bound and the workers serve.
    pub fn set_serving(&self) {
        self.serving.store(true, Ordering::Release);
    }

    /// A drain has started: not ready any more.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// A drain's grace period is over: the connections still open are
    /// being closed.
    pub fn set_closing(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Whether a drain's grace period is over (a request cut off now was
    /// cut off by crawlgate, not by its client).
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// The upstream answered (a response head, or a connection made).
    /// Stores at most every 100 ms, so workers do not fight over the line.
    pub fn upstream_answered(&self) {
        let now = crate::clock::millis_since(self.epoch) + 1;
        if now.saturating_sub(self.upstream_seen.load(Ordering::Relaxed)) >= 100 {
            self.upstream_seen.store(now, Ordering::Relaxed);
        }
    }

    /// Why the process is not ready, if it is not, upstream aside.
    pub fn not_ready(&self) -> Option<&'static str> {
        if self.draining.load(Ordering::Acquire) {
            Some("draining")
        } else if !self.serving.load(Ordering::Acquire) {
            Some("listeners not bound yet")
        } else {
            None
        }
    }

    /// The upstream answered within `window`.
    pub fn upstream_fresh(&self, window: Duration) -> bool {
        let seen = self.upstream_seen.load(Ordering::Relaxed);
        seen != 0 && crate::clock::millis_since(self.epoch) + 1 - seen <= millis(window)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Cuts a field for the log at a character boundary.
pub fn truncate(s: &str) -> &str {
    if s.len() <= LOG_FIELD_MAX {
        return s;
    }
    let mut end = LOG_FIELD_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// An outcome waiting for its response body to finish. Dropped before
/// that (the request's task ended without an answer: the client went
/// away while the upstream was still answering, or a drain's grace period
/// closed the connection), it is recorded all the same, as `aborted`.
#[derive(Debug)]
pub struct Pending {
    shared: Arc<Shared>,
    /// Recorded already.
    done: bool,
    /// The record, filled in as the request goes on.
    pub outcome: Outcome,
    /// Counts the request in flight upstream until the body is done.
    pub in_flight: Option<InFlight>,
    /// The forwarded request body's byte count, read when the record ends.
    pub body_bytes: Option<BodyBytes>,
    start: Instant,
}

impl Pending {
    /// Starts the record of a request that arrived at `start`.
    pub fn new(shared: Arc<Shared>, outcome: Outcome, start: Instant) -> Self {
        Self {
            shared,
            done: false,
            outcome,
            in_flight: None,
            body_bytes: None,
            start,
        }
    }

    /// When the request arrived.
    pub fn start(&self) -> Instant {
        self.start
    }

    fn finish(mut self) {
        self.record();
    }

    /// Who ended a request cut off now: crawlgate once a drain's grace
    /// period is over, its client before.
    fn cut_off_by(&self) -> Side {
        if self.shared.observer.health.is_closing() {
            Side::Proxy
        } else {
            Side::Client
        }
    }

    /// Hands the outcome to the observer, once.
    fn record(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        self.outcome.total_time = self.start.elapsed();
        drop(self.in_flight.take());
        if let Some(bytes) = self.body_bytes.take() {
            self.outcome.bytes_in = bytes.get();
        }
        let outcome = std::mem::take(&mut self.outcome);
        self.shared.observer.record(&self.shared, outcome);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let side = self.cut_off_by();
        self.outcome.error.get_or_insert(("aborted", side));
        self.record();
    }
}

pin_project_lite::pin_project! {
    /// A response body that counts what it sends and hands the outcome to
    /// the observer when it is done, fails, or is dropped (the client went
    /// away).
    pub struct Observed {
        #[pin]
        body: Body,
        pending: Option<Pending>,
        // The client is owed a body (not a HEAD answer, a 204 or a 304).
        owed: bool,
    }

    impl PinnedDrop for Observed {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(mut pending) = this.pending.take() {
                // Dropped before its end: the response was cut off (its
                // client left, or a drain's grace period closed it).
                if *this.owed && !hyper::body::Body::is_end_stream(&*this.body) {
                    let side = pending.cut_off_by();
                    pending.outcome.error.get_or_insert(("aborted", side));
                }
                pending.finish();
            }
        }
    }
}

impl Observed {
    /// `body`, observed for `pending`; `owed`: the client is owed a body
    /// (a response dropped before its end is then logged as cut off).
    pub fn new(body: Body, pending: Pending, owed: bool) -> Self {
        Self {
            body,
            pending: Some(pending),
            owed,
        }
    }
}

impl hyper::body::Body for Observed {
    type Data = Bytes;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        let polled = this.body.poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(pending)) = (frame.data_ref(), this.pending.as_mut()) {
                    pending.outcome.bytes_out += data.len() as u64;
                }
            }
            Poll::Ready(Some(Err(_))) => {
                if let Some(mut pending) = this.pending.take() {
                    pending.outcome.error = Some(("upstream-body", Side::Upstream));
                    pending.finish();
                }
            }
            Poll::Ready(None) => {
                if let Some(pending) = this.pending.take() {
                    pending.finish();
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
