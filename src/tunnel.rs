//! Upgraded connections (WebSocket): once the upstream has answered `101
//! Switching Protocols` and the client has been told so, the two
//! connections are spliced, bytes copied both ways as they come.
//!
//! The request went through the whole request path first (a robot's
//! upgrade to an action URL got 403, a `www.` host its redirect), so what
//! reaches here is a request the upstream accepted. The splice has
//! backpressure (each direction holds one buffer and reads again only when
//! it is written), an idle timeout (`proxy.websocket_idle_timeout`: no byte
//! either way), and it runs inside the client connection's task, so it
//! keeps that connection's place under `limits.max_connections` and is
//! closed when a shutdown's grace period is over. crawlgate does not parse
//! WebSocket frames: it cannot close one politely, so a drain lets tunnels
//! run until the grace period ends.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::clock::Progress;
use crate::proxy::socket::{MaybeTls, Prefixed};
use crate::proxy::Switched;

/// How long the two halves may take to be handed over after the 101.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a request that switched protocols leaves its two halves for the
/// connection's task, which splices them once hyper has let go of the
/// connection. Set at most once per connection.
pub type UpgradeSlot = Arc<OnceLock<Tunnel>>;

/// Marks a request served by crawlgate's own HTTP/1.1 layer
/// (`crate::server::native`), in its extensions: its connection is not
/// hyper's to hand over, so the tunnel's client half is the connection
/// itself, given to [`Tunnel::run_on`] by the layer once the 101 is
/// written.
#[derive(Clone, Copy, Debug)]
pub struct OwnConnection;

/// The two halves of a switched connection, not yet spliced.
#[derive(Debug)]
pub struct Tunnel {
    /// The client's connection, handed over by hyper once the 101 is
    /// written; `None` when the connection layer is crawlgate's own
    /// ([`OwnConnection`]), which hands it to [`Tunnel::run_on`].
    pub client: Option<OnUpgrade>,
    /// The upstream's connection, handed over once its 101 is read.
    pub upstream: UpstreamHalf,
    /// Close after this long without a byte either way.
    pub idle_timeout: Duration,
    /// The client, for logs.
    pub peer: SocketAddr,
}

/// The upstream's half of a tunnel: hyper's client hands its connection
/// over once it has let go of it; crawlgate's own has it ready.
#[derive(Debug)]
pub enum UpstreamHalf {
    /// hyper's client's connection, to come.
    Hyper(OnUpgrade),
    /// crawlgate's own connection (`proxy.http1 = "native"`), with what
    /// the upstream sent past its `101`.
    Own(Prefixed<MaybeTls>),
}

impl UpstreamHalf {
    /// The upstream half of the `101` answer `res`: crawlgate's own
    /// connection when its layer read the answer, else hyper's upgrade.
    pub fn of<B>(res: &mut http::Response<B>) -> Self {
        match res.extensions().get::<Switched>().and_then(Switched::take) {
            Some(own) => Self::Own(own),
            None => Self::Hyper(hyper::upgrade::on(res)),
        }
    }
}

impl Tunnel {
    /// Splices the two connections until either side closes, the tunnel is
    /// idle for `idle_timeout`, or `close` completes (the shutdown grace
    /// period is over).
    pub async fn run(self, close: impl Future<Output = ()>) {
        let Some(client) = self.client else {
            tracing::debug!(peer = %self.peer, "upgrade failed: no client connection to splice");
            return;
        };
        match self.upstream {
            UpstreamHalf::Hyper(upstream) => {
                let halves = tokio::time::timeout(HANDOVER_TIMEOUT, async {
                    tokio::try_join!(client, upstream)
                });
                let Some((client, upstream)) = handed_over(halves.await, self.peer) else {
                    return;
                };
                let upstream = TokioIo::new(upstream);
                splice(
                    TokioIo::new(client),
                    upstream,
                    self.idle_timeout,
                    self.peer,
                    close,
                )
                .await;
            }
            UpstreamHalf::Own(upstream) => {
                let handover = tokio::time::timeout(HANDOVER_TIMEOUT, client).await;
                let Some(client) = handed_over(handover, self.peer) else {
                    return;
                };
                splice(
                    TokioIo::new(client),
                    upstream,
                    self.idle_timeout,
                    self.peer,
                    close,
                )
                .await;
            }
        }
    }

    /// [`Tunnel::run`] with `client`, the client's connection (and any
    /// bytes it sent after the request, read already), as crawlgate's own
    /// HTTP/1.1 layer hands it over.
    pub async fn run_on<I>(self, client: I, close: impl Future<Output = ()>)
    where
        I: AsyncRead + AsyncWrite + Unpin,
    {
        match self.upstream {
            UpstreamHalf::Hyper(upstream) => {
                let handover = tokio::time::timeout(HANDOVER_TIMEOUT, upstream).await;
                let Some(upstream) = handed_over(handover, self.peer) else {
                    return;
                };
                let upstream = TokioIo::new(upstream);
                splice(client, upstream, self.idle_timeout, self.peer, close).await;
            }
            UpstreamHalf::Own(upstream) => {
                splice(client, upstream, self.idle_timeout, self.peer, close).await;
            }
        }
    }
}

/// What a handover within [`HANDOVER_TIMEOUT`] gave, or `None` (said at
/// debug level) when it failed or timed out.
fn handed_over<T>(
    handover: Result<hyper::Result<T>, tokio::time::error::Elapsed>,
    peer: SocketAddr,
) -> Option<T> {
    match handover {
        Ok(Ok(halves)) => Some(halves),
        Ok(Err(err)) => {
            tracing::debug!(%peer, error = %err, "upgrade failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "upgrade handover timed out");
            None
        }
    }
}

/// Copies bytes both ways between `client` and `upstream` until either
/// side closes, nothing moves for `idle_timeout`, or `close` completes.
async fn splice<C, U>(
    client: C,
    upstream: U,
    idle_timeout: Duration,
    peer: SocketAddr,
    close: impl Future<Output = ()>,
) where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let clock = Progress::new();
    let mut client = Watched {
        io: client,
        clock: &clock,
    };
    let mut upstream = Watched {
        io: upstream,
        clock: &clock,
    };
    tokio::select! {
        copied = tokio::io::copy_bidirectional(&mut client, &mut upstream) => match copied {
            Ok((up, down)) => tracing::debug!(%peer, up, down, "tunnel closed"),
            Err(err) => tracing::debug!(%peer, error = %err, "tunnel ended with an error"),
        },
        () = clock.quiet_for(idle_timeout) => {
            tracing::debug!(%peer, timeout = ?idle_timeout, "closing an idle tunnel");
        }
        () = close => tracing::debug!(%peer, "closing a tunnel: shutdown grace period over"),
    }
}

/// A connection whose reads and writes touch the tunnel's clock.
struct Watched<'a, T> {
    io: T,
    clock: &'a Progress,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<'_, T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<'_, T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
