//! Listening: the accept loops, one task per connection, graceful stop.
//!
//! [`run_workers`] serves sockets bound by [`bind_reuseport`] (plain HTTP,
//! and HTTPS when configured) on one event loop per worker thread, each
//! running [`serve_worker`], until told to stop; [`crate::run::Runner`]
//! drives it. The plain port speaks HTTP/1.1 (and h2c with prior
//! knowledge when `proxy.h2c` is on); the TLS port speaks what ALPN chose,
//! `h2` or `http/1.1`. HTTP/1.1 is served by crawlgate's own layer
//! (`native`, the default, which hands a plain connection that opens with
//! HTTP/2's preface back when h2c is on) or, with `proxy.http1 = "hyper"`,
//! by hyper's; HTTP/2 always by hyper's.
//!
//! Every connection has a header-read timeout (also the TLS handshake's and
//! the HTTP/1 keep-alive idle time), an idle timeout when it speaks HTTP/2
//! (no open stream for `proxy.http2_idle_timeout`), a cap on the header
//! count (431 past it, from hyper), caps on what hyper reads of a head
//! above `limits.max_header_bytes` (the limit itself is the service's,
//! see `h1_read_cap`), and one cap on concurrent connections across
//! both listeners. The request-path state is read from
//! the worker's [`WorkerSlot`] per request, so a reload reaches the next
//! request while in-flight ones finish with the state they started with.
//!
//! Shutdown: the listeners are dropped first (new connections are
//! refused), every connection is told to drain (finish its requests in
//! flight, take no new ones: HTTP/1 closes after the current response,
//! HTTP/2 sends GOAWAY), and when the grace period is over the rest are
//! closed.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::config::Http1Layer;
use crate::metrics::Protocol;
use crate::service::{self, ConnInfo};
use crate::state::{Snapshot, WorkerSlot};
use crate::tunnel::UpgradeSlot;

mod native;
mod streams;

use streams::{quiet_for, Activity, StreamGuard, Tracked};

/// Most concurrent streams per HTTP/2 connection.
const H2_MAX_STREAMS: u32 = 128;

/// The sockets one worker serves.
struct Listeners {
    plain: TcpListener,
    tls: Option<(TcpListener, TlsAcceptor)>,
}

/// One worker's sockets, before they join its event loop.
pub struct WorkerSockets {
    /// Plain HTTP.
    pub plain: std::net::TcpListener,
    /// HTTPS, with the acceptor holding the certificates.
    pub tls: Option<(std::net::TcpListener, TlsAcceptor)>,
}

/// Binds `addr` `n` times with `SO_REUSEPORT`, one socket per worker: the
/// kernel spreads new connections over them, and no worker waits on
/// another's accept queue. Port 0 binds the others to the port the first
/// one got.
///
/// `SO_REUSEPORT` would also let another process of the same user join
/// the group and silently take a share of the connections. So a probe
/// socket without it is bound first: it fails with `AddrInUse` when anyone
/// listens on the address, as for any occupied port. The probe (never
/// listening, `SO_REUSEADDR`) stays bound until the workers' sockets
/// listen, so a second process starting at the same moment fails its own
/// probe once they do.
pub fn bind_reuseport(addr: SocketAddr, n: usize) -> io::Result<Vec<std::net::TcpListener>> {
    use socket2::{Domain, Protocol, Socket, Type};
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    probe.set_reuse_address(true)?;
    probe.bind(&addr.into())?;
    let mut addr = probe
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("not an IP socket"))?;
    let mut bound = Vec::with_capacity(n.max(1));
    for _ in 0..n.max(1) {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(4096)?;
        let listener = std::net::TcpListener::from(socket);
        addr = listener.local_addr()?;
        bound.push(listener);
    }
    drop(probe);
    Ok(bound)
}

/// Runs one single-threaded event loop per worker, each on its own thread
/// with its own sockets and its own state (its own upstream pool), so
/// that a connection and everything it does stay on one core, as with
/// nginx's worker processes. All of them stop when `stop` turns true, and
/// this returns when every worker has drained. One connection cap holds
/// across the workers.
pub fn run_workers(
    sockets: Vec<WorkerSockets>,
    slots: Vec<Arc<WorkerSlot>>,
    max_connections: usize,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let cap = ConnectionCap::new(max_connections);
    let mut threads = Vec::with_capacity(sockets.len());
    for (i, (sockets, slot)) in sockets.into_iter().zip(slots).enumerate() {
        let cap = cap.clone();
        let shutdown = stopped(stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("crawlgate-w{i}"))
            .spawn(move || -> io::Result<()> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(serve_worker(sockets, slot, cap, shutdown))
            })?;
        threads.push(thread);
    }
    for thread in threads {
        thread
            .join()
            .map_err(|_| io::Error::other("a worker thread panicked"))??;
    }
    Ok(())
}

/// [`run_workers`]'s work with every worker a task on the current
/// runtime instead of a thread of its own: what
/// [`crate::run::Runner::run_here`] serves with, so that a test's paused
/// clock governs the workers' timers. Returns when every worker has
/// drained.
pub async fn serve_workers_here(
    sockets: Vec<WorkerSockets>,
    slots: Vec<Arc<WorkerSlot>>,
    max_connections: usize,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let cap = ConnectionCap::new(max_connections);
    let tasks: Vec<_> = sockets
        .into_iter()
        .zip(slots)
        .map(|(sockets, slot)| {
            let shutdown = stopped(stop.clone());
            tokio::spawn(serve_worker(sockets, slot, cap.clone(), shutdown))
        })
        .collect();
    for task in tasks {
        task.await
            .map_err(|_| io::Error::other("a worker task panicked"))??;
    }
    Ok(())
}

/// Completes once `stop` turns true (or its sender is gone): a worker's
/// shutdown.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|&stop| stop).await;
}

/// The cap on concurrent connections: one permit per open connection,
/// shared by every worker that serves with a clone of it.
#[derive(Clone)]
pub struct ConnectionCap {
    permits: Arc<Semaphore>,
    max: usize,
}

impl ConnectionCap {
    /// At most `max` connections open at once.
    pub fn new(max: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }
}

/// One worker: accepts and serves connections on `sockets` until
/// `shutdown` completes, then drains, on the runtime it is awaited on
/// (which must have I/O and time enabled). Each worker thread of
/// [`run_workers`] runs this on its own event loop; a test runs it on
/// its own runtime, so that a paused clock
/// (`#[tokio::test(start_paused = true)]`) governs every timer of the
/// worker: the header-read and keep-alive timeout, the HTTP/2 idle
/// timeout, a tunnel's idle timeout and those of the request path.
pub async fn serve_worker(
    sockets: WorkerSockets,
    slot: Arc<WorkerSlot>,
    cap: ConnectionCap,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let plain = TcpListener::from_std(sockets.plain)?;
    let tls = match sockets.tls {
        Some((listener, acceptor)) => Some((TcpListener::from_std(listener)?, acceptor)),
        None => None,
    };
    let listeners = Listeners { plain, tls };
    serve(listeners, slot, cap.permits, cap.max, shutdown).await
}

/// Accepts and serves connections until `shutdown` completes, then drains
/// within the configured grace period. The connection cap is shared with
/// the other workers: one permit per open connection; when none is left,
/// accepting pauses and the kernel's backlog holds newcomers. All permits
/// back = drained.
async fn serve(
    listeners: Listeners,
    slot: Arc<WorkerSlot>,
    permits: Arc<Semaphore>,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let (phase_tx, phase_rx) = watch::channel(Phase::Serve);
    let pool = Arc::new(native::BufPool::default());
    let ctx = AcceptCtx {
        slot: &slot,
        permits: &permits,
        phase: phase_rx,
        pool: &pool,
    };

    let plain = accept_loop(listeners.plain, None, ctx.clone());
    let tls = async {
        if let Some((listener, acceptor)) = listeners.tls {
            accept_loop(listener, Some(acceptor), ctx.clone()).await;
        }
    };
    let stop = async {
        shutdown.await;
        let _ = phase_tx.send(Phase::Drain);
    };
    tokio::join!(plain, tls, stop);
    drop(ctx);

    let grace = slot.snapshot().shutdown_grace;
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    tracing::debug!(grace = ?grace, "draining connections");
    tokio::select! {
        _ = permits.acquire_many(all) => tracing::debug!("all connections drained"),
        () = tokio::time::sleep(grace) => {
            tracing::warn!("grace period over; closing remaining connections");
            slot.snapshot().process.health.set_closing();
            let _ = phase_tx.send(Phase::Close);
            // Closing is immediate; wait a moment for the tasks to notice.
            let _ = tokio::time::timeout(Duration::from_secs(1), permits.acquire_many(all)).await;
        }
    }
    Ok(())
}

/// What the accept side tells every connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Serve requests.
    Serve,
    /// Finish the requests in flight, take no new ones, then close.
    Drain,
    /// Close now (the grace period is over).
    Close,
}

#[derive(Clone)]
struct AcceptCtx<'a> {
    slot: &'a Arc<WorkerSlot>,
    permits: &'a Arc<Semaphore>,
    phase: watch::Receiver<Phase>,
    /// The worker's buffers for crawlgate's own HTTP/1.1 layer.
    pool: &'a Arc<native::BufPool>,
}

/// Connection builders for one [`Snapshot`], rebuilt when a reload
/// changes it, and shared by the connections (one `Arc` each).
struct Builders {
    shared: Arc<Snapshot>,
    /// HTTP/1 only (plain port without h2c; TLS with ALPN `http/1.1`):
    /// hyper's own, since the auto builder's upgradeable connection reads
    /// the first bytes before the header-read timeout starts.
    h1: hyper::server::conn::http1::Builder,
    /// HTTP/2 only (TLS with ALPN `h2`).
    h2: auto::Builder<TokioExecutor>,
    /// Reads the preface and picks (plain port with h2c).
    any: auto::Builder<TokioExecutor>,
}

/// What hyper may read of an HTTP/1 request head, for a
/// `limits.max_header_bytes` of `limit`: a quarter more, so that the
/// limit itself is applied by [`crate::service`] (with 431, the head
/// measured by [`crate::framing::head_len`]) and this only bounds the
/// memory a head takes (hyper answers 431 past it). White space around
/// values, which the limit does not count, fits in the margin.
///
/// hyper's `max_buf_size` alone is not a head limit: the read buffer
/// grows in doubling steps (8, 16, 32 KiB…) and the last read before the
/// cap may fill whatever the buffer's allocation has room for, which
/// `BytesMut::reserve` doubles; a head that completes within it is
/// parsed without any size check. With a cap of 64 KiB, reads of 8, 16
/// and 32 KiB leave 56 KiB buffered, the next reserve doubles the
/// allocation to 112 KiB and a 114,688-byte head was taken (49,152 for a
/// cap of 32 KiB; 8 and 16 KiB happen to fill their allocation exactly).
/// So the HTTP/1-only builder also gets `max_header_size`, which hyper
/// checks against the parsed head; the auto builder (h2c) has no such
/// setting, and its buffer stays under twice the cap.
fn h1_read_cap(limit: usize) -> usize {
    limit.saturating_add(limit / 4)
}

impl Builders {
    fn new(shared: Arc<Snapshot>) -> Self {
        let limits = &shared.limits;
        let read_cap = h1_read_cap(limits.max_header_bytes);
        // The same HTTP/1 settings on hyper's builder and on the auto
        // builder's (two types with the same methods).
        macro_rules! http1_settings {
            ($builder:expr) => {
                $builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(shared.conn.header_read_timeout)
                    .max_buf_size(read_cap)
                    .max_headers(limits.max_headers)
                    .keep_alive(true)
            };
        }
        let mut any = auto::Builder::new(TokioExecutor::new());
        http1_settings!(any.http1());
        let mut h1 = hyper::server::conn::http1::Builder::new();
        http1_settings!(h1).max_header_size(read_cap);
        // HTTP/2 counts a header list as RFC 9113 does (32 bytes a field):
        // the bound of what passes the limit with `max_headers` fields,
        // and one more (the h2 crate refuses a list that reaches it).
        let list_size =
            crate::framing::h2_list_size_bound(limits.max_header_bytes, limits.max_headers)
                .saturating_add(1);
        any.http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(H2_MAX_STREAMS)
            .max_header_list_size(u32::try_from(list_size).unwrap_or(u32::MAX));
        Self {
            h1,
            h2: any.clone().http2_only(),
            any,
            shared,
        }
    }
}

async fn accept_loop(listener: TcpListener, tls: Option<TlsAcceptor>, mut ctx: AcceptCtx<'_>) {
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Every connection of a listener arrives on its port.
    let local_port = listener.local_addr().map_or(0, |a| a.port());
    let mut builders = Arc::new(Builders::new(ctx.slot.snapshot()));
    let mut backoff = Duration::from_millis(5);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(ctx.permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = ctx.phase.changed() => break,
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
            _ = ctx.phase.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let current = ctx.slot.snapshot();
        if !Arc::ptr_eq(&current, &builders.shared) {
            builders = Arc::new(Builders::new(current));
        }
        let conn = Conn {
            worker: Arc::clone(ctx.slot),
            builders: Arc::clone(&builders),
            info: ConnInfo {
                peer,
                local_port,
                scheme,
            },
            phase: ctx.phase.clone(),
        };
        let settings = &builders.shared.conn;
        let native = settings.http1 == Http1Layer::Native;
        match &tls {
            None if native => tokio::spawn(native_task(conn, stream, Arc::clone(ctx.pool), permit)),
            None => tokio::spawn(plain_task(conn, stream, permit)),
            Some(acceptor) => {
                // Over TLS the native layer serves HTTP/1.1; HTTP/2 is hyper's.
                let pool = native.then(|| Arc::clone(ctx.pool));
                tokio::spawn(tls_task(conn, stream, acceptor.clone(), pool, permit))
            }
        };
    }
    // Dropping the listener here refuses new connections at once.
    drop(listener);
}

/// A plain connection's task. A task's future is allocated whole for the
/// connection's life, so plain and TLS connections get tasks of their own:
/// a plain HTTP/1 connection must not carry room for a TLS session.
async fn plain_task(conn: Conn, stream: TcpStream, permit: OwnedSemaphorePermit) {
    conn.serve_plain(stream).await;
    drop(permit);
}

/// A plain connection's task on crawlgate's own HTTP/1.1 layer
/// (`proxy.http1 = "native"`; with h2c on, a connection that opens with
/// HTTP/2's preface goes on to hyper's HTTP/2; over TLS, [`tls_task`]
/// hands an HTTP/1.1 session to the same layer).
async fn native_task(
    conn: Conn,
    stream: TcpStream,
    pool: Arc<native::BufPool>,
    permit: OwnedSemaphorePermit,
) {
    let h2c = conn.builders.shared.conn.h2c;
    let h2 = native::serve(conn, stream, pool, h2c).await;
    if let Some(h2) = h2 {
        // Boxed: an idle HTTP/1.1 connection's task has no room for it.
        Box::pin(serve_h2c(h2)).await;
    }
    drop(permit);
}

/// HTTP/2 with prior knowledge on the plain port, found by the native
/// layer: hyper's, with the preface's bytes read so far.
async fn serve_h2c(h2: Box<native::H2c<TcpStream>>) {
    let h2 = *h2;
    let metrics = Arc::clone(&h2.conn.builders.shared.process.metrics);
    let _open = metrics.connection(Protocol::http1_or_h2c);
    h2.conn.serve(Proto::H2, h2.stream).await;
}

/// A TLS connection's task; its HTTP/1.1 on crawlgate's own layer when
/// `native` has the worker's buffers for it.
async fn tls_task(
    conn: Conn,
    stream: TcpStream,
    acceptor: TlsAcceptor,
    native: Option<Arc<native::BufPool>>,
    permit: OwnedSemaphorePermit,
) {
    conn.serve_tls(stream, acceptor, native).await;
    drop(permit);
}

/// One accepted connection and what serving it needs.
struct Conn {
    worker: Arc<WorkerSlot>,
    builders: Arc<Builders>,
    info: ConnInfo,
    phase: watch::Receiver<Phase>,
}

impl Conn {
    async fn serve_plain(self, stream: TcpStream) {
        let h2c = self.builders.shared.conn.h2c;
        if h2c {
            // The auto builder reads the first bytes (HTTP/1 or the h2
            // preface) before any header-read timeout runs: a client that
            // never sends one is closed here instead of held forever.
            let timeout = self.builders.shared.conn.header_read_timeout;
            let mut first = [0u8; 1];
            if !matches!(
                tokio::time::timeout(timeout, stream.peek(&mut first)).await,
                Ok(Ok(1))
            ) {
                tracing::debug!(peer = %self.info.peer, "closing a silent connection");
                return;
            }
        }
        let metrics = &self.builders.shared.process.metrics;
        let _open = metrics.connection(if h2c {
            Protocol::http1_or_h2c
        } else {
            Protocol::http1
        });
        self.serve(if h2c { Proto::Any } else { Proto::H1 }, stream)
            .await;
    }

    async fn serve_tls(
        mut self,
        stream: TcpStream,
        acceptor: TlsAcceptor,
        native: Option<Arc<native::BufPool>>,
    ) {
        let timeout = self.builders.shared.conn.header_read_timeout;
        // Boxed, as is the session it yields: the TLS state is large, and
        // every future it passed through would otherwise keep a slot of
        // that size for the connection's life.
        let accept = Box::pin(async move { acceptor.accept(stream).await.map(Box::new) });
        let handshake = tokio::time::timeout(timeout, accept);
        let metrics = Arc::clone(&self.builders.shared.process.metrics);
        let stream = tokio::select! {
            done = handshake => match done {
                Ok(Ok(stream)) => {
                    metrics.tls_handshake("ok");
                    stream
                }
                Ok(Err(err)) => {
                    metrics.tls_handshake("failed");
                    tracing::debug!(peer = %self.info.peer, error = %err, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    metrics.tls_handshake("timeout");
                    tracing::debug!(peer = %self.info.peer, "TLS handshake timed out");
                    return;
                }
            },
            // Shutting down: no new connection gets a handshake.
            _ = self.phase.changed() => return,
        };
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        if let (false, Some(pool)) = (h2, native) {
            let (tcp, tls) = stream.into_inner();
            let socket = native::TlsSocket::new(tcp, tls);
            Box::pin(native::serve(self, socket, pool, false)).await;
            return;
        }
        let _open = metrics.connection(if h2 { Protocol::http2 } else { Protocol::http1 });
        self.serve(if h2 { Proto::H2 } else { Proto::H1 }, stream)
            .await;
    }

    /// Serves the connection in `proto`. An idle keep-alive connection
    /// holds its task's whole future for its life, so what only HTTP/2
    /// needs (the idle clock, the stream count) is boxed: the plain HTTP/1
    /// task stays under 1 KiB (it was 8.7 KiB with everything inline).
    async fn serve<I>(self, proto: Proto, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = TokioIo::new(io);
        match proto {
            Proto::H1 => self.serve_h1(io, Proto::H1).await,
            Proto::Any => self.serve_h1(io, Proto::Any).await,
            Proto::H2 => Box::pin(self.serve_h2(io)).await,
        }
    }

    /// HTTP/1 (`Proto::H1`), or HTTP/1 or h2c by the first bytes
    /// (`Proto::Any`).
    async fn serve_h1<I>(self, io: TokioIo<I>, proto: Proto)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            worker,
            builders,
            info,
            phase,
        } = self;
        // Boxed: hyper's HTTP/1 connection keeps room for one service
        // future for its whole life, so an inline future (several KiB while
        // forwarding) would be held by every idle keep-alive connection;
        // boxed, it is allocated only while a request is in flight.
        let slot = UpgradeSlot::default();
        let upgrades = Arc::clone(&slot);
        if matches!(proto, Proto::H1) {
            let service = service_fn(move |req| {
                let upgrades = Some(Arc::clone(&upgrades));
                Box::pin(service::handle(worker.get(), info, upgrades, req, None))
            });
            let conn = builders.h1.serve_connection(io, service).with_upgrades();
            let drain = |c: Pin<&mut _>| {
                hyper::server::conn::http1::UpgradeableConnection::graceful_shutdown(c)
            };
            let quiet = std::future::pending();
            drive(Box::pin(conn), drain, phase.clone(), quiet, info.peer).await;
        } else {
            // h2c has no header-read timeout either: the streams are
            // counted and the connection closed after a quiet period, as
            // over TLS. An HTTP/1 connection here is counted too (its
            // keep-alive idle time is the shorter of the two timeouts).
            let activity = Arc::new(Activity::new());
            let quiet = quiet_for(&activity, builders.shared.conn.http2_idle_timeout);
            let service = service_fn(move |req| {
                let stream = StreamGuard::new(Arc::clone(&activity));
                let upgrades = Some(Arc::clone(&upgrades));
                let res = service::handle(worker.get(), info, upgrades, req, None);
                Box::pin(async move {
                    let res = res.await?;
                    Ok::<_, std::convert::Infallible>(res.map(|body| Tracked { body, stream }))
                })
            });
            let conn = builders.any.serve_connection_with_upgrades(io, service);
            drive(
                Box::pin(conn),
                GracefulConnection::graceful_shutdown,
                phase.clone(),
                quiet,
                info.peer,
            )
            .await;
        }
        // A request switched protocols (WebSocket): hyper has handed the
        // connection over; splice it with the upstream's here, in this
        // task, so that it keeps its place under the connection cap. The
        // service (and its copy of the slot) went with the connection.
        let tunnel = Arc::try_unwrap(slot).ok().and_then(OnceLock::into_inner);
        if let Some(tunnel) = tunnel {
            let _open = builders.shared.process.metrics.connection(Protocol::tunnel);
            let mut phase = phase;
            let close = async move {
                let _ = phase.wait_for(|p| *p == Phase::Close).await;
            };
            Box::pin(tunnel.run(close)).await;
        }
    }

    async fn serve_h2<I>(self, io: TokioIo<I>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            worker,
            builders,
            info,
            phase,
        } = self;
        // HTTP/2 has no header-read timeout to end an idle connection:
        // count the streams and close after a quiet period.
        let activity = Arc::new(Activity::new());
        let quiet = quiet_for(&activity, builders.shared.conn.http2_idle_timeout);
        let service = service_fn(move |req| {
            let stream = StreamGuard::new(Arc::clone(&activity));
            let res = service::handle(worker.get(), info, None, req, None);
            async move {
                let res = res.await?;
                Ok::<_, std::convert::Infallible>(res.map(|body| Tracked { body, stream }))
            }
        });
        let conn = Box::pin(builders.h2.serve_connection(io, service));
        drive(
            conn,
            GracefulConnection::graceful_shutdown,
            phase,
            quiet,
            info.peer,
        )
        .await;
    }
}

/// Runs a connection to its end, draining it gracefully when the server
/// shuts down or when `quiet` completes (an HTTP/2 connection idle too
/// long; `pending()` for HTTP/1, which has its header-read timeout), and
/// dropping it when the grace period is over.
///
/// The connection comes boxed: its state (1.5 KiB for HTTP/1) then lives
/// once on the heap instead of in every future that passes it on. `drain`
/// starts its graceful shutdown (hyper's upgradeable HTTP/1 connection has
/// the method but not hyper-util's `GracefulConnection` trait).
async fn drive<C, E>(
    mut conn: Pin<Box<C>>,
    drain: impl Fn(Pin<&mut C>),
    mut phase: watch::Receiver<Phase>,
    quiet: impl Future<Output = ()>,
    peer: SocketAddr,
) where
    C: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(quiet);
    let mut draining = *phase.borrow_and_update() != Phase::Serve;
    if draining {
        drain(conn.as_mut());
    }
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(%peer, error = %err, "connection ended with an error");
                }
                return;
            }
            changed = phase.changed() => {
                // The server is gone (Err) or past its grace period: close.
                if changed.is_err() || *phase.borrow_and_update() == Phase::Close {
                    return;
                }
                if !draining {
                    draining = true;
                    drain(conn.as_mut());
                }
            }
            () = &mut quiet, if !draining => {
                tracing::debug!(%peer, "closing an idle HTTP/2 connection");
                draining = true;
                drain(conn.as_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every idle keep-alive connection holds its task's future for its
    /// life: keep it small (it was 8.7 KiB for every connection when the
    /// TLS and HTTP/2 paths were inline, now under 1 KiB; the hyper
    /// connection and the TLS session are boxed, sized to what they are).
    #[test]
    fn connection_tasks_stay_small() {
        fn output_size3<A, B, C, R>(_: impl FnOnce(A, B, C) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        fn output_size4<A, B, C, D, R>(_: impl FnOnce(A, B, C, D) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        fn output_size5<A, B, C, D, E, R>(_: impl FnOnce(A, B, C, D, E) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        let plain = output_size3(plain_task);
        let native = output_size4(native_task);
        let tls = output_size5(tls_task);
        eprintln!("plain task {plain} bytes, native {native} bytes, TLS task {tls} bytes");
        assert!(
            native <= 1024,
            "native plain connection task is {native} bytes"
        );
        assert!(plain <= 1536, "plain connection task is {plain} bytes");
        assert!(tls <= 1536, "TLS connection task is {tls} bytes");
    }

    #[test]
    fn reuseport_binds_every_worker_to_one_port() {
        let sockets = bind_reuseport("127.0.0.1:0".parse().expect("addr"), 3).expect("bind");
        let ports: Vec<u16> = sockets
            .iter()
            .map(|s| s.local_addr().expect("addr").port())
            .collect();
        assert_eq!(ports.len(), 3);
        assert!(ports.iter().all(|&p| p == ports[0] && p != 0), "{ports:?}");
        // Someone else's plain socket on a port is not shared.
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let err = bind_reuseport(taken.local_addr().expect("addr"), 2).expect_err("in use");
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        // Nor is another group's `SO_REUSEPORT` socket (a second process).
        let again = bind_reuseport(sockets[0].local_addr().expect("addr"), 2);
        assert_eq!(again.expect_err("in use").kind(), io::ErrorKind::AddrInUse);
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
