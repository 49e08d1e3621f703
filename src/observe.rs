//! Each request's [`Outcome`] finished and handed on: counted in the
//! metrics of the snapshot it was served with and written to the
//! process's access log ([`crate::state::Process`]).
//!
//! The record is finished when the response body has been sent (or the
//! exchange ended), so it carries the bytes sent and the total time;
//! [`Observed`] is the response body that does that.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::time::Instant;

use crate::metrics::{InFlight, Side};
use crate::outcome::Outcome;
use crate::proxy::body::BodyBytes;
use crate::response::Body;
use crate::state::Snapshot;

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
            !outcome.not_enforced,
        );
        if outcome.request.is_none() {
            return;
        }
        if let Some(sources) = &snapshot.report {
            snapshot.process.report.record_outcome(sources, &outcome);
        }
        // The request line is kept for the live report too: only the
        // access log's own switch sends it to the log.
        if let (true, Some(log)) = (snapshot.access_log, snapshot.process.access_log()) {
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

    /// The upstream's answer head as it came, when the response's fields
    /// are in it rather than in the `HeaderMap`
    /// ([`crate::proxy::body::ResponseBody::upstream_head`]).
    pub fn upstream_head(&self) -> Option<(&Bytes, &crate::http1::ResponseHead)> {
        match &self.body {
            http_body_util::Either::Left(body) => body.upstream_head(),
            http_body_util::Either::Right(_) => None,
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
