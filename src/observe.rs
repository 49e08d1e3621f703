//! What crawlgate saw, in one place: each request's [`Outcome`], counted
//! in the metrics of the snapshot it was served with and written to the
//! process's access log ([`crate::state::Process`]).
//!
//! The record is finished when the response body
//! has been sent (or the exchange ended), so it carries the bytes sent and
//! the total time; [`Observed`] is the response body that does that.

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderValue, HOST, REFERER, USER_AGENT};
use http::{Method, Request, StatusCode, Uri, Version};
use hyper::body::{Frame, Incoming, SizeHint};
use tokio::time::Instant;

use crate::classify::{ClassId, Reason, UaClass};
use crate::metrics::{InFlight, Side};
use crate::proxy::body::BodyBytes;
use crate::response::Body;
use crate::route::Route;
use crate::state::Snapshot;
use crate::verify::Identity;

/// Longest path, host or request-target written to the access log, in
/// bytes.
pub const LOG_FIELD_MAX: usize = 256;

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
        crate::framing::authority(&self.uri, self.host.as_ref())
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
    /// The request's class, as the decision, the class header and
    /// shedding took it ([`crate::classify::Classes::of`]): set with the
    /// verdict, then again once verification has spoken (a spoofed claim
    /// counts as `unknown` in the log and the metrics too). `None` when
    /// the request was refused before classification.
    pub class: Option<ClassId>,
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
    /// The snapshot the request was served with: its counters, its log
    /// format, and the process.
    snapshot: Arc<Snapshot>,
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
    pub fn new(snapshot: Arc<Snapshot>, outcome: Outcome, start: Instant) -> Self {
        Self {
            snapshot,
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
        if self.snapshot.process.health.is_closing() {
            Side::Proxy
        } else {
            Side::Client
        }
    }

    /// Counts the outcome and queues it for the access log, once.
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
        let snapshot = &self.snapshot;
        snapshot.counters.count(
            outcome.route,
            outcome.class,
            outcome.status.map_or(0, |s| s.as_u16()),
        );
        if outcome.request.is_none() {
            return;
        }
        if let Some(log) = snapshot.process.access_log() {
            if !log.send(
                outcome,
                snapshot.log_format,
                Arc::clone(&snapshot.policy.classifier),
            ) {
                snapshot.process.metrics.log_line_dropped();
            }
        }
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
    /// A response body that counts what it sends and records the outcome
    /// when it is done, fails, or is dropped (the client went
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
