//! Listening: the accept loop, one task per connection, graceful stop.
//!
//! [`serve`] takes an already bound listener and any shutdown future, so
//! tests bind port 0 and `main` wires signals. Every connection runs under a
//! [`GracefulShutdown`] watcher with a header-read timeout, a cap on the
//! head size and header count (431 past them, from hyper), and a cap on
//! concurrent connections; on shutdown the
//! listener is dropped first (new connections are refused), in-flight
//! requests get the grace period, and then the rest is cut.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::service::{self, Shared};

/// Accepts and serves plain-HTTP connections on `listener` until `shutdown`
/// completes, then drains within the configured grace period.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.header_read_timeout)
        .max_buf_size(shared.limits.max_header_bytes)
        .max_headers(shared.limits.max_headers)
        .keep_alive(true);
    // One permit per open connection; when none is left, stop accepting and
    // let the kernel's backlog hold newcomers.
    let permits = Arc::new(Semaphore::new(shared.limits.max_connections));
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(5);

    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
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
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let service =
            service_fn(move |req| service::handle(Arc::clone(&shared), peer, "http", req));
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(err) = conn.await {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
            drop(permit);
        });
    }

    drop(listener);
    let grace = shared.shutdown_grace;
    tracing::info!(grace = ?grace, "shutting down: draining connections");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing remaining connections"),
    }
    Ok(())
}
