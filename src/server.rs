//! Listening: the accept loops, one task per connection, graceful stop.
//!
//! [`serve`] takes already bound [`Listeners`] (plain HTTP, and HTTPS when
//! configured) and any shutdown future, so tests bind port 0 and `main`
//! wires signals. The plain port speaks HTTP/1.1 (and h2c with prior
//! knowledge when `proxy.h2c` is on); the TLS port speaks what ALPN chose,
//! `h2` or `http/1.1`.
//!
//! Every connection runs under a [`GracefulShutdown`] watcher, with a
//! header-read timeout (also the TLS handshake's), a cap on the head size
//! and header count (431 past them, from hyper), and one cap on concurrent
//! connections across both listeners. The request-path state is read from
//! the [`Live`] cell per request, so a reload reaches the next request
//! while in-flight ones finish with the state they started with. On
//! shutdown the listeners are dropped first (new connections are refused),
//! in-flight requests get the grace period, and then the rest is cut.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::service::{self, Shared};

/// The request-path state, swapped whole on reload.
pub type Live = ArcSwap<Shared>;

/// Most concurrent streams per HTTP/2 connection.
const H2_MAX_STREAMS: u32 = 128;

/// The sockets to serve.
pub struct Listeners {
    /// Plain HTTP.
    pub plain: TcpListener,
    /// HTTPS, with the acceptor holding the certificates.
    pub tls: Option<(TcpListener, TlsAcceptor)>,
}

impl Listeners {
    /// Only a plain-HTTP listener.
    pub fn plain(listener: TcpListener) -> Self {
        Self {
            plain: listener,
            tls: None,
        }
    }
}

/// Accepts and serves connections until `shutdown` completes, then drains
/// within the configured grace period.
pub async fn serve(
    listeners: Listeners,
    live: Arc<Live>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    // One permit per open connection; when none is left, stop accepting and
    // let the kernel's backlog hold newcomers.
    let permits = Arc::new(Semaphore::new(live.load().limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = AcceptCtx {
        live: &live,
        graceful: &graceful,
        permits: &permits,
        stop: stop_rx,
    };

    let plain = accept_loop(listeners.plain, None, ctx.clone());
    let tls = async {
        if let Some((listener, acceptor)) = listeners.tls {
            accept_loop(listener, Some(acceptor), ctx.clone()).await;
        }
    };
    let stop = async {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    tokio::join!(plain, tls, stop);

    let grace = live.load().shutdown_grace;
    tracing::info!(grace = ?grace, "shutting down: draining connections");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing remaining connections"),
    }
    Ok(())
}

#[derive(Clone)]
struct AcceptCtx<'a> {
    live: &'a Arc<Live>,
    graceful: &'a GracefulShutdown,
    permits: &'a Arc<Semaphore>,
    stop: watch::Receiver<bool>,
}

/// Connection builders for one generation of [`Shared`], rebuilt when a
/// reload changes it.
#[derive(Clone)]
struct Builders {
    shared: Arc<Shared>,
    /// HTTP/1 only (plain port without h2c; TLS with ALPN `http/1.1`).
    h1: auto::Builder<TokioExecutor>,
    /// HTTP/2 only (TLS with ALPN `h2`).
    h2: auto::Builder<TokioExecutor>,
    /// Reads the preface and picks (plain port with h2c).
    any: auto::Builder<TokioExecutor>,
}

impl Builders {
    fn new(shared: Arc<Shared>) -> Self {
        let limits = &shared.limits;
        let mut any = auto::Builder::new(TokioExecutor::new());
        any.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(shared.header_read_timeout)
            .max_buf_size(limits.max_header_bytes)
            .max_headers(limits.max_headers)
            .keep_alive(true);
        any.http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(H2_MAX_STREAMS)
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
        Self {
            h1: any.clone().http1_only(),
            h2: any.clone().http2_only(),
            any,
            shared,
        }
    }
}

async fn accept_loop(listener: TcpListener, tls: Option<TlsAcceptor>, mut ctx: AcceptCtx<'_>) {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut builders = Builders::new(ctx.live.load_full());
    let mut backoff = Duration::from_millis(5);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(ctx.permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = ctx.stop.changed() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => {
                    backoff = Duration::from_millis(5);
                    accepted
                }
                Err(err) => {
                    // Out of file descriptors and similar: wait, do not spin.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            },
            _ = ctx.stop.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let current = ctx.live.load();
        if !Arc::ptr_eq(&current, &builders.shared) {
            builders = Builders::new(arc_swap::Guard::into_inner(current));
        }
        let conn = Conn {
            live: Arc::clone(ctx.live),
            builders: builders.clone(),
            peer,
            scheme,
            watcher: ctx.graceful.watcher(),
        };
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => conn.serve_plain(stream).await,
                Some(acceptor) => conn.serve_tls(stream, acceptor).await,
            }
            drop(permit);
        });
    }
    // Dropping the listener here refuses new connections at once.
    drop(listener);
}

/// One accepted connection and what serving it needs.
struct Conn {
    live: Arc<Live>,
    builders: Builders,
    peer: SocketAddr,
    scheme: &'static str,
    watcher: Watcher,
}

impl Conn {
    async fn serve_plain(self, stream: TcpStream) {
        let h2c = self.builders.shared.h2c;
        self.serve(if h2c { Proto::Any } else { Proto::H1 }, stream)
            .await;
    }

    async fn serve_tls(self, stream: TcpStream, acceptor: TlsAcceptor) {
        let timeout = self.builders.shared.header_read_timeout;
        let stream = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => {
                tracing::debug!(peer = %self.peer, error = %err, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(peer = %self.peer, "TLS handshake timed out");
                return;
            }
        };
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        self.serve(if h2 { Proto::H2 } else { Proto::H1 }, stream)
            .await;
    }

    async fn serve<I>(self, proto: Proto, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            live,
            builders,
            peer,
            scheme,
            watcher,
        } = self;
        let builder = match proto {
            Proto::H1 => &builders.h1,
            Proto::H2 => &builders.h2,
            Proto::Any => &builders.any,
        };
        let service = service_fn(move |req| service::handle(live.load_full(), peer, scheme, req));
        let conn = builder.serve_connection(TokioIo::new(io), service);
        if let Err(err) = watcher.watch(conn).await {
            tracing::debug!(%peer, error = %err, "connection ended with an error");
        }
    }
}

/// Which protocol a connection speaks.
#[derive(Clone, Copy)]
enum Proto {
    H1,
    H2,
    /// Decided by the client's first bytes (h2c prior knowledge or HTTP/1).
    Any,
}
