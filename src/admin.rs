//! The admin listener (`--admin-listen`, `[admin] listen`), served once
//! per process on the control thread, apart from the workers:
//!
//! * `GET /metrics`: every metric, in the text format Prometheus scrapes
//!   (OpenMetrics).
//! * `GET /healthz`: 200 while the process runs (liveness).
//! * `GET /readyz`: 200 when the configuration is loaded, the listeners are
//!   bound and the upstream has answered in the last
//!   [`UPSTREAM_FRESH`] (or a connection to it succeeds now); otherwise
//!   503 with a one-line reason, and 503 as soon as a drain starts.
//! * `GET /robots.txt?host=NAME`: the robots.txt crawlgate answers (in
//!   enforce mode) for `NAME`, to compare with the site's own while in
//!   observe mode; the `Sitemap:` line's scheme is `?scheme=http|https`,
//!   else `https` when plain HTTP is redirected to HTTPS, else `http`.
//! * `GET /report` (one self-contained HTML page) and `GET /report.json`:
//!   the live crawl report of the last 24 hours, per robot, from the
//!   counters the process keeps ([`crate::report::live`]); 404 when
//!   `[admin] report = false`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::live::Live;

/// How recent an upstream answer keeps `/readyz` from probing.
pub const UPSTREAM_FRESH: Duration = Duration::from_secs(10);

/// Concurrent admin connections; more wait in the backlog.
const MAX_CONNECTIONS: usize = 64;

const OPENMETRICS: HeaderValue =
    HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8");
const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");

/// Serves the admin endpoints on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, live: Arc<Live>) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                tracing::warn!(error = %err, "admin listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let live = Arc::clone(&live);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let live = Arc::clone(&live);
                async move { Ok::<_, Infallible>(answer(&live, &req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            let _ = conn.await;
            drop(permit);
        });
    }
}

async fn answer(live: &Live, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".to_owned());
    }
    match req.uri().path() {
        "/metrics" => {
            // Ages are as of the scrape.
            live.process
                .ranges
                .update_gauges(std::time::SystemTime::now());
            let mut res = Response::new(Full::new(Bytes::from(live.process.metrics.encode())));
            res.headers_mut().insert(CONTENT_TYPE, OPENMETRICS);
            res.headers_mut()
                .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
            res
        }
        "/healthz" => text(StatusCode::OK, "ok\n".to_owned()),
        "/readyz" => match not_ready(live).await {
            None => text(StatusCode::OK, "ready\n".to_owned()),
            Some(reason) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {reason}\n"),
            ),
        },
        "/robots.txt" => match robots_txt(live, req.uri().query()) {
            Ok(body) => {
                let mut res = Response::new(Full::new(body));
                res.headers_mut().insert(CONTENT_TYPE, TEXT);
                res.headers_mut()
                    .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                res
            }
            Err(why) => text(StatusCode::BAD_REQUEST, format!("{why}\n")),
        },
        path @ ("/report" | "/report.json") => report(live, path == "/report"),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found (try /metrics, /healthz, /readyz, /robots.txt?host=NAME, /report, /report.json)\n"
                .to_owned(),
        ),
    }
}

/// The body of the robots.txt the proxy answers for the host and scheme
/// `query` names (`host=NAME[&scheme=http|https]`), or why not.
fn robots_txt(live: &Live, query: Option<&str>) -> Result<Bytes, &'static str> {
    let (mut host, mut scheme) = (None, None);
    for pair in query.unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("host", value)) => host = Some(value),
            Some(("scheme", value)) => scheme = Some(value),
            _ => {}
        }
    }
    let host = host
        .filter(|h| crate::config::is_hostname(h.as_bytes()))
        .ok_or("robots.txt: ?host= must name a host, like ?host=example.com")?;
    let scheme = match scheme {
        Some(scheme @ ("http" | "https")) => scheme,
        Some(_) => return Err("robots.txt: ?scheme= is http or https"),
        None => {
            let config = live.config();
            let https = config.tls.is_some() && config.redirect.https.is_some();
            if https {
                "https"
            } else {
                "http"
            }
        }
    };
    Ok(live.current.load().robots.body(scheme, Some(host)))
}

/// The live crawl report, as HTML or JSON.
fn report(live: &Live, html: bool) -> Response<Full<Bytes>> {
    if live.current.load().report.is_none() {
        return text(
            StatusCode::NOT_FOUND,
            "the live report is off ([admin] report = false)\n".to_owned(),
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let generator = concat!("crawlgate ", env!("CARGO_PKG_VERSION"), " (live)").to_owned();
    let report = live.process.report.report(now, generator);
    let mut body = Vec::with_capacity(64 * 1024);
    let written = match html {
        true => crate::report::html::write(&report, &mut body),
        false => serde_json::to_writer_pretty(&mut body, &report).map_err(std::io::Error::other),
    };
    if let Err(err) = written {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot render the report: {err}\n"),
        );
    }
    let mut res = Response::new(Full::new(Bytes::from(body)));
    let kind = match html {
        true => HeaderValue::from_static("text/html; charset=utf-8"),
        false => HeaderValue::from_static("application/json"),
    };
    res.headers_mut().insert(CONTENT_TYPE, kind);
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // The page loads nothing: its styles are inline, it has no script.
    res.headers_mut().insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    res.headers_mut().insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}

/// Why the process should not get traffic, if it should not.
async fn not_ready(live: &Live) -> Option<String> {
    let health = &live.process.health;
    if let Some(reason) = health.not_ready() {
        return Some(reason.to_owned());
    }
    if health.upstream_fresh(UPSTREAM_FRESH) {
        return None;
    }
    // No recent answer (an idle site, or just started): try a connection.
    let config = live.config();
    let authority = config.upstream.authority.as_str().to_owned();
    let port = config.upstream.authority.port_u16().unwrap_or(
        if config.upstream.scheme == http::uri::Scheme::HTTPS {
            443
        } else {
            80
        },
    );
    let host = config.upstream.authority.host().trim_matches(['[', ']']);
    let connect = tokio::net::TcpStream::connect((host, port));
    match tokio::time::timeout(config.proxy.connect_timeout, connect).await {
        Ok(Ok(_)) => {
            health.upstream_answered();
            None
        }
        Ok(Err(err)) => Some(format!("upstream {authority} unreachable: {err}")),
        Err(_) => Some(format!(
            "upstream {authority} unreachable: connect timed out"
        )),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res.headers_mut().insert(CONTENT_TYPE, TEXT);
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}
