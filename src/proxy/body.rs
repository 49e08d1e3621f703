//! The two bodies a forward streams: the client's request body on its
//! way upstream (progress, byte count, size limit, whose failure) and the
//! upstream's response body on its way back (idle timeout, a copy taken
//! as it passes), and a body read whole for its copy ([`fill`]).
//!
//! The copy is a [`BodyCopy`], an interface this module owns: the robots
//! cache's fill implements it, so that the bodies know nothing of the
//! cache.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::Instant;

use super::conn::NativeBody;
use super::error::{BodyError, ProxyError};
use crate::clock::Progress;
use crate::http1::ResponseHead;

/// What happened to a request body on its way upstream; shared between
/// the body (which writes) and the waiting request (which reads).
#[derive(Debug)]
pub(super) struct BodyState {
    /// When data last arrived.
    pub(super) progress: Progress,
    /// [`Self::CLIENT_FAILED`], [`Self::TOO_LARGE`] or 0.
    pub(super) outcome: AtomicU8,
    /// Body bytes passed on so far.
    pub(super) bytes: AtomicU64,
}

/// How many request-body bytes a forwarded request passed upstream.
#[derive(Debug)]
pub struct BodyBytes(pub(super) Arc<BodyState>);

impl BodyBytes {
    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.bytes.load(Ordering::Relaxed)
    }
}

impl BodyState {
    pub(super) const CLIENT_FAILED: u8 = 1;
    pub(super) const TOO_LARGE: u8 = 2;

    pub(super) fn new() -> Self {
        Self {
            progress: Progress::new(),
            outcome: AtomicU8::new(0),
            bytes: AtomicU64::new(0),
        }
    }
}

/// The upstream's response body paused longer than
/// `limits.upstream_body_idle_timeout`.
#[derive(Debug, thiserror::Error)]
#[error("the upstream response body stalled for {0:?}")]
pub struct Stalled(Duration);

/// The client's request body on its way upstream: notes when data last
/// moved (so the response timeout does not cut off a live upload), counts
/// bytes against the body limit, and records whether a failure was the
/// client's.
#[derive(Debug)]
pub struct RequestBody {
    /// `None` for a rebuilt body-less request.
    inner: Option<Source>,
    state: Option<Arc<BodyState>>,
    seen: u64,
    limit: Option<u64>,
}

impl RequestBody {
    /// The client's body `inner`, held to `limit`, reporting to `state`
    /// (none for a body-less request).
    pub(super) fn new<B>(inner: B, state: Option<Arc<BodyState>>, limit: Option<u64>) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BodyError>,
    {
        Self {
            inner: Some(Source::of(inner)),
            state,
            seen: 0,
            limit,
        }
    }

    pub(super) fn empty() -> Self {
        Self {
            inner: None,
            state: None,
            seen: 0,
            limit: None,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = inner.poll_frame(cx);
        let Some(state) = &this.state else {
            return polled;
        };
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                state.progress.touch();
                if let Some(data) = frame.data_ref() {
                    this.seen = this.seen.saturating_add(data.len() as u64);
                    state.bytes.store(this.seen, Ordering::Relaxed);
                    if this.limit.is_some_and(|limit| this.seen > limit) {
                        state.outcome.store(BodyState::TOO_LARGE, Ordering::Relaxed);
                        return Poll::Ready(Some(Err("request body over the limit".into())));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => {
                state
                    .outcome
                    .store(BodyState::CLIENT_FAILED, Ordering::Relaxed);
                Poll::Ready(Some(Err(err)))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Source::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Source::size_hint)
    }
}

/// The client's request body as crawlgate's own HTTP/1.1 layer reads it
/// off the connection (`crate::server::native`): the connection's task
/// sends the data through a [`BodyFeed`], one piece at a time (the
/// channel holds one: backpressure), and learns from [`BodyFeed::wanted`]
/// when the body is first asked for (the moment to answer `Expect:
/// 100-continue`, and before which none of it is read).
#[derive(Debug)]
pub struct FedBody {
    rx: Option<tokio::sync::mpsc::Receiver<Result<Bytes, BodyError>>>,
    want: Option<tokio::sync::oneshot::Sender<()>>,
    /// Bytes still to come, when the length is known.
    left: Option<u64>,
}

/// The connection's end of a [`FedBody`].
#[derive(Debug)]
pub struct BodyFeed {
    tx: tokio::sync::mpsc::Sender<Result<Bytes, BodyError>>,
    want: tokio::sync::oneshot::Receiver<()>,
}

impl FedBody {
    /// A body of `len` bytes (`None`: chunked) and the feed that fills it.
    pub fn channel(len: Option<u64>) -> (BodyFeed, FedBody) {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let (want_tx, want) = tokio::sync::oneshot::channel();
        let body = FedBody {
            rx: Some(rx),
            want: Some(want_tx),
            left: len,
        };
        (BodyFeed { tx, want }, body)
    }

    /// No body.
    pub fn empty() -> Self {
        FedBody {
            rx: None,
            want: None,
            left: Some(0),
        }
    }
}

impl BodyFeed {
    /// Completes when the body is first asked for; `false` when it never
    /// will be (the request was answered, or dropped, without it).
    pub async fn wanted(&mut self) -> bool {
        (&mut self.want).await.is_ok()
    }

    /// Passes `data` on, once the body has room for it; `false` when
    /// nobody reads the body any more.
    pub async fn send(&self, data: Bytes) -> bool {
        self.tx.send(Ok(data)).await.is_ok()
    }

    /// Ends the body with `err` (the client's body broke off or was
    /// malformed).
    pub async fn fail(&self, err: BodyError) {
        let _ = self.tx.send(Err(err)).await;
    }
}

impl Body for FedBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if let Some(want) = self.want.take() {
            let _ = want.send(());
        }
        if self.left == Some(0) {
            return Poll::Ready(None);
        }
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(data))) => {
                if let Some(left) = &mut self.left {
                    *left = left.saturating_sub(data.len() as u64);
                }
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(err))),
            // The feed ended without the whole body: the connection
            // closed under it (a chunked body's end is said by the feed
            // dropping after its last piece).
            Poll::Ready(None) if self.left.is_some() => Poll::Ready(Some(Err(
                "the client closed the connection before the end of its body".into(),
            ))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == Some(0)
    }

    fn size_hint(&self) -> SizeHint {
        match self.left {
            Some(left) => SizeHint::with_exact(left),
            None => SizeHint::default(),
        }
    }
}

/// The client's body as a forward holds it: hyper's [`Incoming`] (what
/// the server hands over) or crawlgate's own layer's [`FedBody`] polled in
/// place, any other body (a unit test's request) boxed.
#[derive(Debug)]
enum Source {
    Incoming(Incoming),
    Fed(FedBody),
    Other(UnsyncBoxBody<Bytes, BodyError>),
}

impl Source {
    /// `body`, unboxed when it is hyper's: the check is on its type,
    /// settled when the caller is compiled.
    fn of<B>(body: B) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BodyError>,
    {
        let mut slot = Some(body);
        if let Some(incoming) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Incoming>>() {
            if let Some(incoming) = incoming.take() {
                return Self::Incoming(incoming);
            }
        }
        if let Some(fed) = (&mut slot as &mut dyn Any).downcast_mut::<Option<FedBody>>() {
            if let Some(fed) = fed.take() {
                return Self::Fed(fed);
            }
        }
        let other = slot.map_or_else(
            || Empty::new().map_err(|never| match never {}).boxed_unsync(),
            |body| body.map_err(Into::into).boxed_unsync(),
        );
        Self::Other(other)
    }

    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self {
            Self::Incoming(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            Self::Fed(body) => Pin::new(body).poll_frame(cx),
            Self::Other(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Incoming(body) => body.is_end_stream(),
            Self::Fed(body) => body.is_end_stream(),
            Self::Other(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Incoming(body) => body.size_hint(),
            Self::Fed(body) => body.size_hint(),
            Self::Other(body) => body.size_hint(),
        }
    }
}

pin_project_lite::pin_project! {
    /// The upstream's response body on its way to the client, cut off when
    /// it pauses longer than `limits.upstream_body_idle_timeout`. Cutting
    /// makes hyper close the client connection without completing the
    /// message, so a stalled body is never presented as complete.
    ///
    /// With a [`BodyCopy`], the body is also copied (into the robots cache) as
    /// it passes, and kept there only once it has ended complete.
    #[derive(Debug)]
    pub struct ResponseBody {
        #[pin]
        inner: Answer,
        #[pin]
        idle: tokio::time::Sleep,
        timeout: Duration,
        fill: Option<Box<dyn BodyCopy>>,
    }
}

impl ResponseBody {
    /// The upstream's body `inner`, cut off after `timeout` without data.
    pub(super) fn new(inner: Answer, timeout: Duration) -> Self {
        Self {
            inner,
            idle: tokio::time::sleep(timeout),
            timeout,
            fill: None,
        }
    }

    /// The upstream's answer head as it came, and as it was parsed, when
    /// the response's fields were left in it rather than put in its
    /// `HeaderMap` (see [`super::Upstream::forward`]; the parsed fields
    /// are in the table the request's head brought): the `HeaderMap` then
    /// holds only fields added since.
    pub fn upstream_head(&self) -> Option<(&Bytes, &ResponseHead)> {
        match &self.inner {
            Answer::Native(body) => body.head(),
            Answer::Hyper(_) => None,
        }
    }

    /// Copies the body into `copy` as it passes.
    pub fn fill(&mut self, copy: impl BodyCopy + 'static) {
        self.fill = Some(Box::new(copy));
    }
}

/// The upstream's response body: read by hyper's client, or off a
/// connection of crawlgate's own ([`NativeBody`]).
#[derive(Debug)]
pub(super) enum Answer {
    Hyper(Incoming),
    Native(NativeBody),
}

impl Body for Answer {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            Self::Hyper(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            Self::Native(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Hyper(body) => body.is_end_stream(),
            Self::Native(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Hyper(body) => body.size_hint(),
            Self::Native(body) => body.size_hint(),
        }
    }
}

/// A copy of a response body taken as it passes to the client (the
/// robots cache's fill), kept only if the body ends complete.
pub trait BodyCopy: std::fmt::Debug + Send + Sync {
    /// One more piece of the body; `false` to stop copying (the copy is
    /// then dropped, unkept).
    fn push(&mut self, data: &[u8]) -> bool;

    /// The body ended complete: keep the copy.
    fn finish(self: Box<Self>);

    /// The body's length when it should be read whole before the client
    /// is answered ([`fill`]); `None` to let it stream.
    fn reserve_whole(&mut self) -> Option<usize>;

    /// Keeps the copy of a body read whole and answers with it, from the
    /// response `parts` the upstream sent.
    fn answer_whole(self, parts: http::response::Parts) -> Response<Bytes>
    where
        Self: Sized;
}

/// A robot's answer being copied into the robots cache.
// Returned once per fill and unwrapped at once: boxing the larger variant
// would cost an allocation to save a move.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Filled {
    /// Streaming to the robot, copied as it passes.
    Streaming(Response<ResponseBody>),
    /// Read whole, with the `ETag` the cache answers with (or `304` when
    /// the robot's `If-None-Match` names it: [`BodyCopy::answer_whole`]).
    Whole(Response<Bytes>),
}

/// Copies the upstream's answer `res` into the robots cache through
/// `fill`: read whole first when [`BodyCopy::reserve_whole`] says so and the
/// body's length is known to be the `Content-Length` it declares, so that
/// the robot's first answer carries the `ETag` of the cache's later ones
/// (and its next visit can be a `304`); otherwise copied as it streams.
///
/// Read whole, the body's idle timeout applies as when it streams; a body
/// that fails or ends short is [`ProxyError::Body`] (502) and one that
/// stalls [`ProxyError::BodyStalled`] (504): never a truncated answer
/// sent as complete, and nothing kept.
pub async fn fill(
    mut res: Response<ResponseBody>,
    mut fill: impl BodyCopy + 'static,
) -> Result<Filled, ProxyError> {
    let declared = res.body().inner.size_hint().exact();
    let len = match fill.reserve_whole() {
        Some(len) if declared == Some(len as u64) => len,
        _ => {
            res.body_mut().fill(fill);
            return Ok(Filled::Streaming(res));
        }
    };
    let (parts, body) = res.into_parts();
    let mut body = std::pin::pin!(body);
    let mut read = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| match err.downcast::<Stalled>() {
            Ok(stalled) => ProxyError::BodyStalled(stalled.0),
            Err(err) => ProxyError::Body(err),
        })?;
        // Trailers (not for a body with a Content-Length) are dropped.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        read += data.len();
        // hyper holds the body to its Content-Length, and `len` bytes fit
        // the fill: a refusal here is a broken promise, not a page.
        if read > len || !fill.push(&data) {
            return Err(ProxyError::Body("more body than its Content-Length".into()));
        }
    }
    if read != len {
        return Err(ProxyError::Body(
            "body shorter than its Content-Length".into(),
        ));
    }
    Ok(Filled::Whole(fill.answer_whole(parts)))
}

/// Keeps a copied body.
fn finish(fill: &mut Option<Box<dyn BodyCopy>>) {
    if let Some(fill) = fill.take() {
        fill.finish();
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let mut this = self.project();
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = Instant::now() + *this.timeout;
                this.idle.as_mut().reset(next);
                if this.fill.is_some() {
                    match &frame {
                        // The end: the body passed complete.
                        None => finish(this.fill),
                        Some(Ok(frame)) => match frame.data_ref() {
                            Some(data) => {
                                if this.fill.as_mut().is_some_and(|f| !f.push(data)) {
                                    *this.fill = None;
                                } else if this.inner.is_end_stream() {
                                    // hyper may not poll again after the
                                    // last frame.
                                    finish(this.fill);
                                }
                            }
                            // Trailers are not kept: neither is the body.
                            None => *this.fill = None,
                        },
                        Some(Err(_)) => *this.fill = None,
                    }
                }
                Poll::Ready(frame)
            }
            Poll::Pending => match this.idle.poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(Stalled(*this.timeout))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
