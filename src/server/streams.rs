//! The HTTP/2 idle clock (over TLS and h2c): HTTP/2 has no header-read
//! timeout to end a connection that stays open with nothing to do, so the
//! open streams are counted and the connection is closed once none has
//! been open for `proxy.http2_idle_timeout`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// Completes once `activity` has had no open stream for `timeout`.
pub(super) fn quiet_for(
    activity: &Arc<Activity>,
    timeout: Duration,
) -> impl Future<Output = ()> + use<> {
    let activity = Arc::clone(activity);
    async move { activity.quiet_for(timeout).await }
}

/// Open streams of an HTTP/2 connection and when the last one ended.
pub(super) struct Activity {
    streams: AtomicUsize,
    /// Milliseconds after `epoch` when the stream count last reached 0.
    quiet_since: AtomicU64,
    epoch: Instant,
}

impl Activity {
    pub(super) fn new() -> Self {
        Self {
            streams: AtomicUsize::new(0),
            quiet_since: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// Completes once no stream has been open for `timeout`.
    async fn quiet_for(&self, timeout: Duration) {
        loop {
            let due = if self.streams.load(Ordering::Acquire) > 0 {
                Instant::now() + timeout
            } else {
                self.epoch
                    + Duration::from_millis(self.quiet_since.load(Ordering::Acquire))
                    + timeout
            };
            if Instant::now() >= due && self.streams.load(Ordering::Acquire) == 0 {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    }
}

/// Counts one HTTP/2 stream as open from its request until its response
/// body is done or dropped.
pub(super) struct StreamGuard(Arc<Activity>);

impl StreamGuard {
    pub(super) fn new(activity: Arc<Activity>) -> Self {
        activity.streams.fetch_add(1, Ordering::AcqRel);
        Self(activity)
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let now = crate::clock::millis_since(self.0.epoch);
        self.0.quiet_since.store(now, Ordering::Release);
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its stream counted while it is sent.
    pub(super) struct Tracked {
        #[pin]
        pub(super) body: crate::observe::Observed,
        pub(super) stream: StreamGuard,
    }
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = <crate::observe::Observed as hyper::body::Body>::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
