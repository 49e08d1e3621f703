//! Forwarding to the upstream: a pooled keep-alive client, header rewriting,
//! streaming bodies, and upstream failures mapped to 502/504.
//!
//! Bodies are not collected: the client's request body is handed to the
//! upstream request as it arrives, and the upstream's response body is
//! handed back to the client the same way, so memory per request stays a
//! few buffers whatever the body size. The one exception is a robot's
//! page the robots cache is about to keep anyway, of a known length within
//! `bot_cache.max_item` ([`fill`]): it is read whole first, so that its
//! answer carries the cache's `ETag`. hyper re-frames both messages, which
//! is why `Transfer-Encoding` and the other hop-by-hop headers are removed
//! rather than copied.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, COOKIE, FORWARDED, HOST, TE,
    TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use http::{Request, Response, Version};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{self, Client};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use ipnet::IpNet;
use rustls::RootCertStore;
use rustls_pki_types::ServerName;
use tokio::time::Instant;

use crate::cache::Fill;
use crate::classify::UaClass;
use crate::config::Config;
use crate::verify::Identity;

/// Headers that describe one connection, not the message (RFC 9110
/// §7.6.1), plus `Proxy`, which CGI turns into `HTTP_PROXY` ("httpoxy").
static HOP_BY_HOP: [HeaderName; 8] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    TE,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
    HeaderName::from_static("proxy"),
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_FORWARDED_PORT: HeaderName = HeaderName::from_static("x-forwarded-port");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// Headers by which a client claims its own address, port, scheme, host or
/// the URL it asked for, which PHP applications read for rate limits,
/// "is this HTTPS" checks, audit logs and routing. From a peer outside
/// `proxy.trusted_proxies` every copy is removed (their spellings with `_`
/// too, since PHP reads `X_Real_IP` as `HTTP_X_REAL_IP` where the web server
/// passes it); crawlgate then sets its own `X-Forwarded-For/-Proto/-Host/
/// -Port` and `X-Real-IP`. The README's table lists them.
pub static CLIENT_CLAIMS: [HeaderName; 23] = [
    X_FORWARDED_FOR,
    X_FORWARDED_PROTO,
    X_FORWARDED_HOST,
    X_FORWARDED_PORT,
    X_REAL_IP,
    FORWARDED,
    HeaderName::from_static("x-forwarded-prefix"),
    HeaderName::from_static("x-forwarded-server"),
    HeaderName::from_static("x-forwarded-scheme"),
    HeaderName::from_static("x-forwarded-ssl"),
    HeaderName::from_static("x-forwarded"),
    HeaderName::from_static("forwarded-for"),
    HeaderName::from_static("x-original-forwarded-for"),
    HeaderName::from_static("x-client-ip"),
    HeaderName::from_static("client-ip"),
    HeaderName::from_static("true-client-ip"),
    HeaderName::from_static("cf-connecting-ip"),
    HeaderName::from_static("fastly-client-ip"),
    HeaderName::from_static("x-cluster-client-ip"),
    HeaderName::from_static("front-end-https"),
    HeaderName::from_static("x-url-scheme"),
    HeaderName::from_static("x-original-url"),
    HeaderName::from_static("x-rewrite-url"),
];

/// Why a request could not be forwarded. Each maps to one status.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// No connection to the upstream could be made (refused, unreachable,
    /// connect timeout): 502.
    #[error("cannot connect to the upstream")]
    Connect(#[source] legacy::Error),
    /// The upstream did not send response headers in time: 504.
    #[error("the upstream did not answer within {0:?}")]
    Timeout(Duration),
    /// The exchange failed after connecting (reset, malformed response,
    /// closed early): 502.
    #[error("the upstream exchange failed")]
    Upstream(#[source] legacy::Error),
    /// The request-target cannot be expressed as an upstream URI: 400.
    #[error("the request target cannot be forwarded")]
    Target,
    /// The client's request body failed (bad chunk, early close): 400.
    #[error("the client's request body failed")]
    ClientBody(#[source] legacy::Error),
    /// The request body grew past `limits.max_body_bytes`: 413.
    #[error("the request body is over the limit")]
    BodyTooLarge,
    /// The upstream switched protocols (101) for a request that did not
    /// ask to: 502.
    #[error("the upstream answered 101 to a request that asked for no upgrade")]
    UnaskedSwitch,
    /// The response body, read whole before answering ([`read_whole`]),
    /// failed (reset, closed before its `Content-Length`): 502.
    #[error("the upstream response body failed")]
    Body(#[source] BodyError),
    /// The response body, read whole before answering, paused longer than
    /// `limits.upstream_body_idle_timeout`: 504.
    #[error("the upstream response body stalled for {0:?}")]
    BodyStalled(Duration),
}

impl ProxyError {
    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ProxyError::Connect(_) => "connect",
            ProxyError::Timeout(_) => "timeout",
            ProxyError::Upstream(_) => "upstream",
            ProxyError::Target => "target",
            ProxyError::ClientBody(_) => "client-body",
            ProxyError::BodyTooLarge => "body-too-large",
            ProxyError::UnaskedSwitch => "unasked-switch",
            ProxyError::Body(_) => "body",
            ProxyError::BodyStalled(_) => "body-timeout",
        }
    }
}

impl ProxyError {
    /// What went wrong with the upstream, in an operator's words, for the
    /// warning a 502 or 504 logs; `None` when the client is at fault.
    pub fn upstream_cause(&self) -> Option<&'static str> {
        use std::io::ErrorKind;
        let io_kind = |err: &legacy::Error| {
            sources(err).find_map(|e| e.downcast_ref::<std::io::Error>().map(std::io::Error::kind))
        };
        // hyper's errors expose no kind for some causes: their text says it.
        let says = |err: &legacy::Error, phrase: &str| {
            sources(err).any(|e| e.to_string().contains(phrase))
        };
        match self {
            ProxyError::Connect(err) => Some(match io_kind(err) {
                Some(ErrorKind::ConnectionRefused) => "connection refused",
                Some(ErrorKind::TimedOut) => "connect timeout",
                Some(ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable) => "unreachable",
                _ if says(err, "dns error") => "name not resolved",
                _ if says(err, "timed out") => "connect timeout",
                _ => "connect failed",
            }),
            ProxyError::Timeout(_) => Some("response timeout"),
            ProxyError::Upstream(err) => Some(match io_kind(err) {
                Some(ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => "connection reset",
                _ if stale_connection(err) => "closed before a complete response",
                _ if says(err, "parse") || says(err, "invalid") => "invalid response",
                _ => "exchange failed",
            }),
            ProxyError::UnaskedSwitch => Some("switched protocols unasked"),
            ProxyError::Body(err) => {
                let io_kind = std::iter::successors(
                    Some(&**err as &(dyn std::error::Error + 'static)),
                    |e| e.source(),
                )
                .find_map(|e| e.downcast_ref::<std::io::Error>().map(std::io::Error::kind));
                Some(match io_kind {
                    Some(ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => "connection reset",
                    _ => "response body cut short",
                })
            }
            ProxyError::BodyStalled(_) => Some("response body stalled"),
            ProxyError::Target | ProxyError::ClientBody(_) | ProxyError::BodyTooLarge => None,
        }
    }
}

/// `err` and its sources, outermost first.
fn sources(err: &legacy::Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
}

/// The protocol an HTTP/1.1 request asks to switch to: its `Upgrade`
/// value, when `Connection` names `upgrade` and the value is not only
/// `h2c` (which is ignored, as RFC 9113 §3.1 allows: the request is
/// answered in HTTP/1.1). HTTP/1.0 and HTTP/2 requests never upgrade.
pub fn requested_upgrade(version: Version, headers: &HeaderMap) -> Option<&HeaderValue> {
    if version != Version::HTTP_11 {
        return None;
    }
    let upgrade = headers.get(UPGRADE)?;
    let only_h2c = upgrade
        .as_bytes()
        .split(|&b| b == b',')
        .all(|t| t.trim_ascii().eq_ignore_ascii_case(b"h2c"));
    let asked = headers.get_all(CONNECTION).iter().any(|v| {
        v.as_bytes()
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
    });
    (asked && !only_h2c).then_some(upgrade)
}

/// Who sent the request, as the proxy knows it.
#[derive(Clone, Debug)]
pub struct ClientInfo {
    /// The TCP peer.
    pub peer: IpAddr,
    /// The port the client connected to (crawlgate's).
    pub port: u16,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The classification to announce upstream.
    pub class: UaClass,
    /// A robot's class and verification, to announce upstream.
    pub robot: Option<Robot>,
}

/// What the upstream is told about a robot (or a signed agent that sends
/// a browser's User-Agent).
#[derive(Clone, Debug)]
pub struct Robot {
    /// Its class (`search`, `ai`, …; `unknown` for a spoofed claim); none
    /// for a human's User-Agent.
    pub class: Option<HeaderValue>,
    /// What verification found, when it claims a crawler operator.
    pub identity: Option<Identity>,
}

/// The upstream's TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamTlsError {
    /// The CA file cannot be read or holds no certificate.
    #[error("proxy.upstream_ca: {}: {message}", path.display())]
    Ca {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No CA certificate was found on the system.
    #[error("upstream: no CA certificates found on this system for an https:// upstream ({0}); set proxy.upstream_ca")]
    NoSystemRoots(String),
    /// The SNI override is not a server name.
    #[error("proxy.upstream_sni: {0:?} is not a server name")]
    Sni(String),
    /// rustls refused the settings.
    #[error("upstream TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
}

type Connector = HttpsConnector<HttpConnector>;

/// How pooled upstream connections are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PoolSettings {
    idle_timeout: Duration,
    max_idle: usize,
}

impl PoolSettings {
    fn client(self, connector: Connector) -> Client<Connector, RequestBody> {
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(self.idle_timeout)
            .pool_max_idle_per_host(self.max_idle)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector)
    }
}

/// The upstream origin and the pooled client that reaches it.
#[derive(Debug)]
pub struct Upstream {
    client: Client<Connector, RequestBody>,
    /// The connector (with its TLS settings), for another pool.
    connector: Connector,
    connect_timeout: Duration,
    pool: PoolSettings,
    scheme: Scheme,
    authority: Authority,
    authority_value: HeaderValue,
    response_timeout: Duration,
    preserve_host: bool,
    class_header: HeaderName,
    robot_class_header: HeaderName,
    verified_header: HeaderName,
    trusted_proxies: Vec<IpNet>,
    max_body_bytes: Option<u64>,
    body_idle_timeout: Duration,
    /// `X-Forwarded-Port` values of the configured listen ports.
    port_values: Vec<(u16, HeaderValue)>,
}

impl Upstream {
    /// Builds the client; connects lazily. For an `https://` upstream the
    /// roots (system or `proxy.upstream_ca`) are read here.
    pub fn new(config: &Config) -> Result<Self, UpstreamTlsError> {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(config.proxy.connect_timeout));
        http.set_nodelay(true);
        http.enforce_http(false);
        let https = config.upstream.scheme == Scheme::HTTPS;
        let roots = if https {
            upstream_roots(config.upstream.ca_file.as_deref())?
        } else {
            // Never used: an http:// upstream makes no TLS connection.
            RootCertStore::empty()
        };
        let tls = crate::tls::client_config(roots)?;
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let builder = match &config.upstream.sni {
            Some(name) => {
                let name = ServerName::try_from(name.clone())
                    .map_err(|_| UpstreamTlsError::Sni(name.clone()))?;
                builder.with_server_name_resolver(FixedServerNameResolver::new(name))
            }
            None => builder,
        };
        let connector = builder.enable_http1().wrap_connector(http);
        let pool = PoolSettings {
            idle_timeout: config.proxy.pool_idle_timeout,
            max_idle: config.proxy.pool_max_idle,
        };
        let client = pool.client(connector.clone());
        let authority = config.upstream.authority.clone();
        // An `Authority` holds only bytes valid in a header value.
        let authority_value = HeaderValue::from_str(authority.as_str())
            .unwrap_or_else(|_| HeaderValue::from_static("localhost"));
        Ok(Self {
            client,
            connector,
            connect_timeout: config.proxy.connect_timeout,
            pool,
            scheme: config.upstream.scheme.clone(),
            authority,
            authority_value,
            response_timeout: config.proxy.response_timeout,
            preserve_host: config.proxy.preserve_host,
            class_header: config.proxy.class_header.clone(),
            robot_class_header: config.proxy.robot_class_header.clone(),
            verified_header: config.verify.as_ref().map_or_else(
                || HeaderName::from_static("x-crawler-verified"),
                |v| v.header.clone(),
            ),
            trusted_proxies: config.proxy.trusted_proxies.clone(),
            max_body_bytes: config.limits.max_body_bytes,
            body_idle_timeout: config.limits.upstream_body_idle_timeout,
            port_values: std::iter::once(config.restart.listen.port())
                .chain(config.restart.tls_listen.map(|a| a.port()))
                .map(|port| (port, HeaderValue::from(port)))
                .collect(),
        })
    }

    /// The same upstream with a connection pool of its own: one per worker
    /// thread, so that a worker's requests reuse the connections its own
    /// event loop drives.
    pub fn with_own_pool(&self) -> Self {
        Self {
            client: self.pool.client(self.connector.clone()),
            connector: self.connector.clone(),
            connect_timeout: self.connect_timeout,
            pool: self.pool,
            scheme: self.scheme.clone(),
            authority: self.authority.clone(),
            authority_value: self.authority_value.clone(),
            response_timeout: self.response_timeout,
            preserve_host: self.preserve_host,
            class_header: self.class_header.clone(),
            robot_class_header: self.robot_class_header.clone(),
            verified_header: self.verified_header.clone(),
            trusted_proxies: self.trusted_proxies.clone(),
            max_body_bytes: self.max_body_bytes,
            body_idle_timeout: self.body_idle_timeout,
            port_values: self.port_values.clone(),
        }
    }

    /// This upstream, with `old`'s connection pool when `old` reaches the
    /// same plain-HTTP origin the same way: a reload that changes only
    /// rules or other settings then keeps the worker's open upstream
    /// connections instead of reconnecting. An `https://` upstream always
    /// gets a new pool. `old` must be this worker's previous state (a pool
    /// belongs to the event loop that drives its connections).
    #[must_use]
    pub fn keeping_pool_of(mut self, old: &Upstream) -> Self {
        if self.can_use_pool_of(old) {
            self.client = old.client.clone();
            self.connector = old.connector.clone();
        }
        self
    }

    /// Whether `old`'s pooled connections serve this upstream unchanged:
    /// the same plain-HTTP origin, the same connect timeout and pool
    /// settings. Never for `https://` (the roots on disk may have changed).
    fn can_use_pool_of(&self, old: &Upstream) -> bool {
        self.scheme == Scheme::HTTP
            && old.scheme == Scheme::HTTP
            && self.authority == old.authority
            && self.connect_timeout == old.connect_timeout
            && self.pool == old.pool
    }

    /// The client's address: `peer`, or when `peer` is a trusted proxy,
    /// the last address of `X-Forwarded-For` that is not one (see
    /// [`client_addr`]).
    pub fn client_addr(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        client_addr(peer, headers, &self.trusted_proxies)
    }

    /// `X-Forwarded-Port` for `port`: the listen ports' values are built
    /// once, any other (port 0 bound by tests) per request.
    fn port_value(&self, port: u16) -> HeaderValue {
        self.port_values
            .iter()
            .find(|(p, _)| *p == port)
            .map_or_else(|| HeaderValue::from(port), |(_, v)| v.clone())
    }

    /// `scheme://host:port` of the origin, for logs.
    pub fn origin(&self) -> (&Scheme, &Authority) {
        (&self.scheme, &self.authority)
    }

    /// Sends `req` upstream and returns the response with its body still
    /// streaming.
    ///
    /// The response timeout counts from the last request-body progress, so
    /// a long upload is not cut off while it is still moving. `upgrade` is
    /// what [`requested_upgrade`] found in the request: the protocol asked
    /// for, sent on with `Connection: upgrade`; a `101` answer is accepted
    /// only then.
    ///
    /// A request with a body leaves a [`BodyBytes`] in `sent`: how many of
    /// its bytes went upstream, read when the exchange is over.
    pub async fn forward(
        &self,
        req: Request<Incoming>,
        client: ClientInfo,
        upgrade: Option<HeaderValue>,
        sent: &mut Option<BodyBytes>,
    ) -> Result<Response<ResponseBody>, ProxyError> {
        let (mut parts, body) = req.into_parts();

        let path = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(self.scheme.clone());
        uri.authority = Some(self.authority.clone());
        uri.path_and_query = Some(path);
        let original_uri = std::mem::replace(
            &mut parts.uri,
            Uri::from_parts(uri).map_err(|_| ProxyError::Target)?,
        );
        let host = original_uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            .or_else(|| parts.headers.get(HOST).cloned());
        join_cookies(&mut parts.headers);
        parts.version = Version::HTTP_11;

        let trusted = self
            .trusted_proxies
            .iter()
            .any(|net| net.contains(&client.peer));
        let upstream_host = if self.preserve_host {
            host.clone().unwrap_or_else(|| self.authority_value.clone())
        } else {
            self.authority_value.clone()
        };
        rewrite_request_headers(
            &mut parts.headers,
            &Rewrite {
                host: upstream_host,
                original_host: host,
                port: self.port_value(client.port),
                client,
                trusted,
                class_header: &self.class_header,
                robot_class_header: &self.robot_class_header,
                verified_header: &self.verified_header,
            },
        );
        // `Upgrade` and `Connection` are hop-by-hop and were removed; an
        // upgrade request gets them back, as this hop's own.
        if let Some(protocol) = &upgrade {
            parts.headers.insert(UPGRADE, protocol.clone());
            parts
                .headers
                .insert(CONNECTION, HeaderValue::from_static("upgrade"));
        }

        let has_body = !body.is_end_stream();
        let state = has_body.then(|| Arc::new(BodyState::new()));
        *sent = state.clone().map(BodyBytes);
        let body = RequestBody {
            inner: Some(body),
            state: state.clone(),
            seen: 0,
            limit: self.max_body_bytes,
        };
        // A body-less idempotent request may be sent again once if the pooled
        // connection turns out to be dead (closed by the upstream as we
        // wrote): keep what is needed to rebuild it. Never for a request
        // with a body: it could reach the upstream twice.
        let retry = (!has_body && parts.method.is_idempotent()).then(|| {
            (
                parts.method.clone(),
                parts.uri.clone(),
                parts.version,
                parts.headers.clone(),
            )
        });
        let first = Request::from_parts(parts, body);
        let request = async {
            match self.client.request(first).await {
                Err(err) if retry.is_some() && stale_connection(&err) => {
                    let Some((method, uri, version, headers)) = retry else {
                        return Err(err);
                    };
                    tracing::debug!(error = %err, "retrying an idempotent request on a fresh connection");
                    let mut again = Request::new(RequestBody::empty());
                    *again.method_mut() = method;
                    *again.uri_mut() = uri;
                    *again.version_mut() = version;
                    *again.headers_mut() = headers;
                    self.client.request(again).await
                }
                other => other,
            }
        };
        let timeout = self.response_timeout;
        let deadline = async {
            match &state {
                Some(state) => state.progress.quiet_for(timeout).await,
                None => tokio::time::sleep(timeout).await,
            }
        };
        let response = tokio::select! {
            result = request => result.map_err(|err| {
                let outcome = state.as_ref().map_or(0, |s| s.outcome.load(Ordering::Relaxed));
                match outcome {
                    BodyState::TOO_LARGE => ProxyError::BodyTooLarge,
                    BodyState::CLIENT_FAILED => ProxyError::ClientBody(err),
                    _ if err.is_connect() => ProxyError::Connect(err),
                    _ => ProxyError::Upstream(err),
                }
            })?,
            () = deadline => return Err(ProxyError::Timeout(timeout)),
        };
        let (mut parts, body) = response.into_parts();
        let switched = parts.status == http::StatusCode::SWITCHING_PROTOCOLS;
        let protocol = switched
            .then(|| parts.headers.get(UPGRADE).cloned())
            .flatten();
        strip_hop_by_hop(&mut parts.headers);
        if switched {
            // The tunnel is spliced by the caller (hyper's upgrade in the
            // response's extensions); the client is told what it switched to.
            let (Some(_), Some(protocol)) = (&upgrade, protocol) else {
                return Err(ProxyError::UnaskedSwitch);
            };
            parts.headers.insert(UPGRADE, protocol);
            parts
                .headers
                .insert(CONNECTION, HeaderValue::from_static("upgrade"));
        }
        let body = ResponseBody {
            inner: body,
            idle: tokio::time::sleep(self.body_idle_timeout),
            timeout: self.body_idle_timeout,
            fill: None,
        };
        Ok(Response::from_parts(parts, body))
    }
}

/// HTTP/2 clients may split `Cookie` into one field per cookie (RFC 9113
/// §8.2.3), and a sloppy HTTP/1 client may too; an HTTP/1.1 upstream gets
/// them as one field joined by `; ` (RFC 6265 §5.4), or PHP would see only
/// the last.
fn join_cookies(headers: &mut HeaderMap) {
    let mut cookies = headers.get_all(COOKIE).iter();
    let (Some(first), Some(_)) = (cookies.next(), cookies.next()) else {
        return;
    };
    let mut joined = Vec::with_capacity(first.len() * 4);
    for (i, value) in headers.get_all(COOKIE).iter().enumerate() {
        if i > 0 {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(COOKIE, value);
    }
}

/// The CA certificates an `https://` upstream is verified against.
fn upstream_roots(ca_file: Option<&std::path::Path>) -> Result<RootCertStore, UpstreamTlsError> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            crate::tls::add_pem_roots(&mut roots, path).map_err(|message| {
                UpstreamTlsError::Ca {
                    path: path.to_owned(),
                    message,
                }
            })?;
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found.errors.first().map_or_else(
                    || "none in the usual places".to_owned(),
                    ToString::to_string,
                );
                return Err(UpstreamTlsError::NoSystemRoots(why));
            }
        }
    }
    Ok(roots)
}

/// Milliseconds since `epoch`: the clock of [`Progress`] and the
/// HTTP/2 stream bookkeeping, kept in atomics.
pub(crate) fn millis_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Whether a failed exchange died on a connection the upstream had already
/// given up (closed or reset before any response byte): the case where a
/// retry on a fresh connection is safe for an idempotent request.
fn stale_connection(err: &legacy::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    sources(err).any(|e| {
        let hyper_says = e
            .downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_incomplete_message() || h.is_canceled() || h.is_closed());
        let io_says = e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof
            )
        });
        hyper_says || io_says
    })
}

/// The values [`rewrite_request_headers`] sets.
#[derive(Debug)]
pub struct Rewrite<'a> {
    /// Host header to send upstream.
    pub host: HeaderValue,
    /// The host the client asked for, if any (for `X-Forwarded-Host`).
    pub original_host: Option<HeaderValue>,
    /// Who sent the request.
    pub client: ClientInfo,
    /// Whether the peer is a trusted proxy whose forwarding headers count.
    pub trusted: bool,
    /// `X-Forwarded-Port`: the port the client connected to.
    pub port: HeaderValue,
    /// The classification header's name.
    pub class_header: &'a HeaderName,
    /// The robot class header's name.
    pub robot_class_header: &'a HeaderName,
    /// The verification header's name.
    pub verified_header: &'a HeaderName,
}

/// Who the client is, as far as the trusted proxies vouch for: from an
/// untrusted `peer`, `peer` itself; from a trusted one, `X-Forwarded-For`
/// read from the right (the hop nearest to us), skipping the trusted
/// proxies, up to the first address that is not one. An entry that is not
/// an address stops the walk at the hop that wrote it. Allocates nothing.
pub fn client_addr(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return peer;
    }
    let mut client = peer;
    // Header lines in reverse, and entries in each from the right.
    for value in headers.get_all(&X_FORWARDED_FOR).iter().rev() {
        let Ok(text) = value.to_str() else {
            return client;
        };
        for entry in text.rsplit(',') {
            let Ok(ip) = entry.trim().parse::<IpAddr>() else {
                return client;
            };
            client = ip;
            if !is_trusted(&ip) {
                return client;
            }
        }
    }
    client
}

/// Turns the client's request headers into the upstream's: hop-by-hop
/// headers removed, the classification header replaced, and the
/// forwarding headers crawlgate's own: from an untrusted peer every
/// [`CLIENT_CLAIMS`] copy is removed and `X-Forwarded-For/-Proto/-Host/
/// -Port` and `X-Real-IP` state what crawlgate saw; from a trusted proxy
/// they are kept (the `X-Forwarded-For` chain extended by the peer) and only
/// the missing ones set. Host set.
pub fn rewrite_request_headers(headers: &mut HeaderMap, rw: &Rewrite<'_>) {
    strip_hop_by_hop(headers);

    headers.remove(rw.class_header);
    let class = match rw.client.class {
        UaClass::Bot => HeaderValue::from_static("1"),
        UaClass::Human => HeaderValue::from_static("0"),
    };
    headers.insert(rw.class_header.clone(), class);
    // A robot's class and verification are crawlgate's word alone: a
    // client's copies never reach the upstream, nor their spellings with
    // `_`, which PHP would read as the same variable.
    headers.remove(rw.robot_class_header);
    headers.remove(rw.verified_header);
    remove_underscore_spellings(
        headers,
        &[rw.class_header, rw.robot_class_header, rw.verified_header],
    );
    if let Some(robot) = &rw.client.robot {
        if let Some(class) = &robot.class {
            headers.insert(rw.robot_class_header.clone(), class.clone());
        }
        if let Some(identity) = robot.identity {
            headers.insert(
                rw.verified_header.clone(),
                HeaderValue::from_static(identity.as_str()),
            );
        }
    }

    // From an untrusted peer nothing the client claimed is left, so every
    // header below is crawlgate's; a trusted proxy's are kept.
    if !rw.trusted {
        remove_client_claims(headers);
    }
    let peer = HeaderValue::from(PeerValue(rw.client.peer));
    let xff = if headers.contains_key(&X_FORWARDED_FOR) {
        let mut chain = Vec::with_capacity(64);
        for value in headers.get_all(&X_FORWARDED_FOR) {
            chain.extend_from_slice(value.as_bytes());
            chain.extend_from_slice(b", ");
        }
        chain.extend_from_slice(peer.as_bytes());
        HeaderValue::from_bytes(&chain).unwrap_or_else(|_| peer.clone())
    } else {
        peer.clone()
    };
    headers.insert(X_FORWARDED_FOR.clone(), xff);
    headers.entry(X_REAL_IP.clone()).or_insert(peer);
    headers
        .entry(X_FORWARDED_PROTO.clone())
        .or_insert_with(|| HeaderValue::from_static(rw.client.scheme));
    headers
        .entry(X_FORWARDED_PORT.clone())
        .or_insert_with(|| rw.port.clone());
    if let Some(host) = &rw.original_host {
        headers
            .entry(X_FORWARDED_HOST.clone())
            .or_insert_with(|| host.clone());
    }
    headers.insert(HOST, rw.host.clone());
}

/// Removes every [`CLIENT_CLAIMS`] header, and their spellings with `_`
/// for `-` (`X_Forwarded_For`), which some web servers pass to PHP as the
/// same `HTTP_X_FORWARDED_FOR`.
///
/// One pass over the names present finds them (a browser sends none, and
/// comparing its ~15 names is cheaper than 23 map lookups); only what was
/// found is removed.
fn remove_client_claims(headers: &mut HeaderMap) {
    remove_where(headers, |name| {
        CLIENT_CLAIMS
            .iter()
            .any(|c| c == name || underscore_spelling(name, c))
    });
}

/// Removes headers that are one of `names` with `-` written as `_`
/// (`X_Crawler_Verified`).
fn remove_underscore_spellings(headers: &mut HeaderMap, names: &[&HeaderName]) {
    remove_where(headers, |name| {
        names.iter().any(|c| underscore_spelling(name, c))
    });
}

/// Whether `name` is `canonical` with some `-` written as `_` (header
/// names are lower case on both sides).
fn underscore_spelling(name: &HeaderName, canonical: &HeaderName) -> bool {
    let (name, canonical) = (name.as_str().as_bytes(), canonical.as_str().as_bytes());
    name.contains(&b'_')
        && name.len() == canonical.len()
        && canonical
            .iter()
            .zip(name)
            .all(|(&c, &n)| c == n || (c == b'-' && n == b'_'))
}

/// Removes every header whose name `matches`: one pass over the names
/// present (a browser's ~15), and an allocation only when one matched.
fn remove_where(headers: &mut HeaderMap, matches: impl Fn(&HeaderName) -> bool) {
    if !headers.keys().any(&matches) {
        return;
    }
    let found: Vec<HeaderName> = headers.keys().filter(|k| matches(k)).cloned().collect();
    for name in found {
        headers.remove(name);
    }
}

/// Removes hop-by-hop headers, including those the `Connection` header
/// names (except `Host` and `Content-Length`, which frame and route the
/// message and are not the sender's to drop).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if let Some(first) = headers.get(CONNECTION) {
        // Fast path: a lone `keep-alive` or `close` names nothing else.
        let plain = headers.get_all(CONNECTION).iter().count() == 1
            && (first == "keep-alive" || first == "close");
        if !plain {
            let listed: Vec<HeaderName> = headers
                .get_all(CONNECTION)
                .iter()
                .flat_map(|v| v.as_bytes().split(|&b| b == b','))
                .filter_map(|t| HeaderName::from_bytes(t.trim_ascii()).ok())
                .filter(|n| n != HOST && n != CONTENT_LENGTH)
                .collect();
            for name in listed {
                headers.remove(name);
            }
        }
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// An IP address rendered as a header value without a heap string.
struct PeerValue(IpAddr);

impl From<PeerValue> for HeaderValue {
    fn from(peer: PeerValue) -> HeaderValue {
        use std::io::Write;
        let mut buf = [0u8; 48];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        // 48 bytes hold the longest IPv6 text form (45).
        let _ = write!(cursor, "{}", peer.0);
        let len = usize::try_from(cursor.position()).unwrap_or(0);
        HeaderValue::from_bytes(&buf[..len]).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
    }
}

/// When something last moved, and a wait for a quiet period: the clock of
/// the response timeout (an upload's data) and of a tunnel's idle timeout
/// (bytes either way). Lock-free, so that the writer and the waiter may
/// sit in different tasks.
#[derive(Debug)]
pub(crate) struct Progress {
    epoch: Instant,
    /// Milliseconds after `epoch` of the last movement (0: none yet).
    last: AtomicU64,
}

impl Progress {
    /// A clock whose quiet period starts now.
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Something moved.
    pub(crate) fn touch(&self) {
        self.last.store(millis_since(self.epoch), Ordering::Relaxed);
    }

    /// Completes once nothing has moved for `timeout`.
    pub(crate) async fn quiet_for(&self, timeout: Duration) {
        loop {
            let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
            let due = self.epoch + last + timeout;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    }
}

/// What happened to a request body on its way upstream; shared between
/// the body (which writes) and the waiting request (which reads).
#[derive(Debug)]
struct BodyState {
    /// When data last arrived.
    progress: Progress,
    /// [`Self::CLIENT_FAILED`], [`Self::TOO_LARGE`] or 0.
    outcome: AtomicU8,
    /// Body bytes passed on so far.
    bytes: AtomicU64,
}

/// How many request-body bytes a forwarded request passed upstream.
#[derive(Debug)]
pub struct BodyBytes(Arc<BodyState>);

impl BodyBytes {
    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.bytes.load(Ordering::Relaxed)
    }
}

impl BodyState {
    const CLIENT_FAILED: u8 = 1;
    const TOO_LARGE: u8 = 2;

    fn new() -> Self {
        Self {
            progress: Progress::new(),
            outcome: AtomicU8::new(0),
            bytes: AtomicU64::new(0),
        }
    }
}

/// The error a request or response body ends with.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

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
    inner: Option<Incoming>,
    state: Option<Arc<BodyState>>,
    seen: u64,
    limit: Option<u64>,
}

impl RequestBody {
    fn empty() -> Self {
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
        let polled = Pin::new(inner).poll_frame(cx);
        let Some(state) = &this.state else {
            return polled.map_err(Into::into);
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
                Poll::Ready(Some(Err(err.into())))
            }
            other => other.map_err(Into::into),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Incoming::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Incoming::size_hint)
    }
}

pin_project_lite::pin_project! {
    /// The upstream's response body on its way to the client, cut off when
    /// it pauses longer than `limits.upstream_body_idle_timeout`. Cutting
    /// makes hyper close the client connection without completing the
    /// message, so a stalled body is never presented as complete.
    ///
    /// With a [`Fill`], the body is also copied into the robots cache as
    /// it passes, and kept there only once it has ended complete.
    #[derive(Debug)]
    pub struct ResponseBody {
        #[pin]
        inner: Incoming,
        #[pin]
        idle: tokio::time::Sleep,
        timeout: Duration,
        fill: Option<Box<Fill>>,
    }
}

impl ResponseBody {
    /// Copies the body into the robots cache as it passes.
    pub fn fill(&mut self, fill: Fill) {
        self.fill = Some(Box::new(fill));
    }
}

/// A robot's answer being copied into the robots cache.
#[derive(Debug)]
pub enum Filled {
    /// Streaming to the robot, copied as it passes.
    Streaming(Response<ResponseBody>),
    /// Read whole, with the `ETag` the cache answers with (or `304` when
    /// the robot's `If-None-Match` names it: [`Fill::answer_whole`]).
    Whole(Response<Bytes>),
}

/// Copies the upstream's answer `res` into the robots cache through
/// `fill`: read whole first when [`Fill::reserve_whole`] says so and the
/// body's length is known to be the `Content-Length` it declares, so that
/// the robot's first answer carries the `ETag` of the cache's later ones
/// (and its next visit can be a `304`); otherwise copied as it streams.
///
/// Read whole, the body's idle timeout applies as when it streams; a body
/// that fails or ends short is [`ProxyError::Body`] (502) and one that
/// stalls [`ProxyError::BodyStalled`] (504): never a truncated answer
/// sent as complete, and nothing kept.
pub async fn fill(mut res: Response<ResponseBody>, mut fill: Fill) -> Result<Filled, ProxyError> {
    let declared = res.body().inner.size_hint().exact();
    let len = match fill.reserve_whole() {
        Some(len) if declared == Some(len as u64) => len,
        _ => {
            res.body_mut().fill(fill);
            return Ok(Filled::Streaming(res));
        }
    };
    use http_body_util::BodyExt;
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

/// Keeps a filled body in the robots cache.
fn finish(fill: &mut Option<Box<Fill>>) {
    if let Some(fill) = fill.take() {
        let _kept = fill.finish();
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
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, RawConfig};

    fn upstream(toml: &str) -> Upstream {
        let raw = RawConfig::parse(toml).expect("toml");
        let config = Config::from_raw(raw, &Overrides::default()).expect("valid");
        Upstream::new(&config).expect("upstream")
    }

    /// Which reloads keep a worker's upstream pool: only those that leave
    /// the plain-HTTP origin and the way it is reached alone.
    #[test]
    fn a_reload_keeps_the_pool_only_for_the_same_plain_upstream() {
        let base = "upstream = \"http://127.0.0.1:8081\"\n";
        let old = upstream(base);
        let same = upstream(&format!("{base}[proxy]\nresponse_timeout = \"7s\"\n"));
        assert!(same.can_use_pool_of(&old));
        for changed in [
            "upstream = \"http://127.0.0.1:8082\"\n".to_owned(),
            format!("{base}[proxy]\nconnect_timeout = \"9s\"\n"),
            format!("{base}[proxy]\npool_max_idle = 3\n"),
            format!("{base}[proxy]\npool_idle_timeout = \"3s\"\n"),
        ] {
            assert!(!upstream(&changed).can_use_pool_of(&old), "{changed}");
        }
        // An https:// upstream is never kept: its roots may have changed.
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = dir.path().join("ca.pem");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["ca.test".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        std::fs::write(&ca, cert.pem()).expect("write");
        let https = upstream(&format!(
            "upstream = \"https://127.0.0.1:8443\"\n[proxy]\nupstream_ca = {:?}\n",
            ca.display().to_string()
        ));
        assert!(!https.can_use_pool_of(&https));
    }

    use crate::testing::header_map as headers;

    fn rewrite(map: &mut HeaderMap, trusted: bool, class: UaClass) {
        rewrite_robot(map, trusted, class, None);
    }

    fn rewrite_robot(map: &mut HeaderMap, trusted: bool, class: UaClass, robot: Option<Robot>) {
        let class_header = HeaderName::from_static("x-crawler");
        rewrite_request_headers(
            map,
            &Rewrite {
                host: HeaderValue::from_static("example.com"),
                original_host: Some(HeaderValue::from_static("example.com")),
                client: ClientInfo {
                    peer: "192.0.2.7".parse().expect("ip"),
                    port: 8080,
                    scheme: "http",
                    class,
                    robot,
                },
                trusted,
                port: HeaderValue::from_static("8080"),
                class_header: &class_header,
                robot_class_header: &HeaderName::from_static("x-crawler-class"),
                verified_header: &HeaderName::from_static("x-crawler-verified"),
            },
        );
    }

    #[test]
    fn robot_class_and_verification_headers_are_ours_alone() {
        let client_copies = || {
            headers(&[
                ("x-crawler-class", "search"),
                ("x-crawler-verified", "ip"),
                ("X-Crawler-Verified", "dns"),
                ("x_crawler_verified", "ip"),
                ("X_Crawler_Class", "search"),
                ("x_crawler", "0"),
                ("x_custom", "kept"),
            ])
        };
        // Even from a trusted proxy: these are not forwarding headers.
        let mut human = client_copies();
        rewrite_robot(&mut human, true, UaClass::Human, None);
        assert!(all(&human, "x-crawler-class").is_empty());
        assert!(all(&human, "x-crawler-verified").is_empty());
        for spelled in ["x_crawler_verified", "x_crawler_class", "x_crawler"] {
            assert!(all(&human, spelled).is_empty(), "{spelled}");
        }
        assert_eq!(all(&human, "x_custom"), ["kept"]);
        let mut unclaimed = client_copies();
        let robot = |identity| Robot {
            class: Some(HeaderValue::from_static("library")),
            identity,
        };
        rewrite_robot(&mut unclaimed, false, UaClass::Bot, Some(robot(None)));
        assert_eq!(all(&unclaimed, "x-crawler-class"), ["library"]);
        assert!(all(&unclaimed, "x-crawler-verified").is_empty());
        let mut spoofed = client_copies();
        rewrite_robot(
            &mut spoofed,
            false,
            UaClass::Bot,
            Some(robot(Some(Identity::Spoofed))),
        );
        assert_eq!(all(&spoofed, "x-crawler-verified"), ["spoofed"]);
    }

    fn all(map: &HeaderMap, name: &str) -> Vec<String> {
        map.get_all(name)
            .iter()
            .map(|v| v.to_str().expect("ascii").to_owned())
            .collect()
    }

    #[test]
    fn hop_by_hop_and_listed_headers_are_removed() {
        let mut map = headers(&[
            ("connection", "keep-alive, X-Secret, content-length"),
            ("connection", "upgrade"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-connection", "keep-alive"),
            ("proxy", "http://evil:3128"),
            ("content-length", "5"),
            ("accept", "*/*"),
        ]);
        strip_hop_by_hop(&mut map);
        let mut names: Vec<&str> = map.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(names, ["accept", "content-length"]);
    }

    #[test]
    fn class_header_and_forwarding_headers_are_ours() {
        let mut map = headers(&[
            ("x-crawler", "0"),
            ("X-Crawler", "0"),
            ("x-forwarded-for", "1.2.3.4"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.com"),
            ("forwarded", "for=1.2.3.4"),
            ("host", "example.com"),
            ("x-real-ip", "1.2.3.4"),
            ("x-forwarded-port", "443"),
            ("x_forwarded_proto", "https"),
            ("X_Real_IP", "1.2.3.4"),
            ("x_custom_thing", "kept"),
        ]);
        for name in &CLIENT_CLAIMS {
            map.append(name.clone(), HeaderValue::from_static("spoofed"));
        }
        rewrite(&mut map, false, UaClass::Bot);
        assert_eq!(all(&map, "x-crawler"), ["1"]);
        assert_eq!(all(&map, "x-forwarded-for"), ["192.0.2.7"]);
        assert_eq!(all(&map, "x-real-ip"), ["192.0.2.7"]);
        assert_eq!(all(&map, "x-forwarded-proto"), ["http"]);
        assert_eq!(all(&map, "x-forwarded-port"), ["8080"]);
        assert_eq!(all(&map, "x-forwarded-host"), ["example.com"]);
        assert_eq!(all(&map, "x_custom_thing"), ["kept"]);
        for (name, value) in &map {
            assert_ne!(value, "spoofed", "{name} kept");
            assert!(
                !name.as_str().starts_with("x_forwarded") && name != "x_real_ip",
                "{name} kept"
            );
        }
        assert!(map.get("forwarded").is_none());
        assert_eq!(all(&map, "host"), ["example.com"]);
    }

    #[test]
    fn the_client_is_the_first_untrusted_hop_from_the_right() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let mut h = HeaderMap::new();
        h.append(
            &X_FORWARDED_FOR,
            HeaderValue::from_static("6.6.6.6, 1.2.3.4"),
        );
        h.append(&X_FORWARDED_FOR, HeaderValue::from_static("10.0.0.7"));
        // An untrusted peer's header is not believed.
        assert_eq!(client_addr(ip("9.9.9.9"), &h, &trusted), ip("9.9.9.9"));
        // From a trusted peer: skip 10.0.0.7 (trusted), take 1.2.3.4, never
        // the 6.6.6.6 a client could have written.
        assert_eq!(client_addr(ip("10.0.0.1"), &h, &trusted), ip("1.2.3.4"));
        // Garbage stops the walk at the hop that wrote it.
        let mut junk = HeaderMap::new();
        junk.append(
            &X_FORWARDED_FOR,
            HeaderValue::from_static("1.2.3.4, nonsense, 10.0.0.9"),
        );
        assert_eq!(client_addr(ip("10.0.0.1"), &junk, &trusted), ip("10.0.0.9"));
        // A trusted peer without the header is the client.
        assert_eq!(
            client_addr(ip("10.0.0.1"), &HeaderMap::new(), &trusted),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn a_trusted_peer_extends_the_chain() {
        let mut map = headers(&[
            ("x-forwarded-for", "1.2.3.4"),
            ("x-forwarded-for", "5.6.7.8"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "for=1.2.3.4"),
            ("x-real-ip", "1.2.3.4"),
            ("cf-connecting-ip", "1.2.3.4"),
        ]);
        rewrite(&mut map, true, UaClass::Human);
        assert_eq!(all(&map, "x-real-ip"), ["1.2.3.4"]);
        assert_eq!(all(&map, "cf-connecting-ip"), ["1.2.3.4"]);
        assert_eq!(all(&map, "x-forwarded-port"), ["8080"]);
        assert_eq!(
            all(&map, "x-forwarded-for"),
            ["1.2.3.4, 5.6.7.8, 192.0.2.7"]
        );
        assert_eq!(all(&map, "x-forwarded-proto"), ["https"]);
        assert_eq!(all(&map, "x-crawler"), ["0"]);
        assert_eq!(all(&map, "forwarded"), ["for=1.2.3.4"]);
    }

    #[test]
    fn peer_values_render_v4_and_v6() {
        for ip in [
            "10.0.0.1",
            "::1",
            "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255",
        ] {
            let v = HeaderValue::from(PeerValue(ip.parse().expect("ip")));
            assert_eq!(v, ip.parse::<IpAddr>().expect("ip").to_string().as_str());
        }
    }
}
