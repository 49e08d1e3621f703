//! `[proxy]` and `upstream`: forwarding, and the origin's address.

use std::path::PathBuf;
use std::time::Duration;

use http::header::HeaderName;
use http::uri::{Authority, Scheme, Uri};
use ipnet::IpNet;
use serde::Deserialize;

use super::{duration, invalid, is_hostname, ConfigError};

/// `[proxy]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProxy {
    /// Keep the client's Host header (true) or send the upstream's.
    pub preserve_host: Option<bool>,
    /// Name of the classification header sent upstream.
    pub class_header: Option<String>,
    /// Name of the header carrying a robot's class.
    pub robot_class_header: Option<String>,
    /// Upstream TCP connect timeout.
    pub connect_timeout: Option<String>,
    /// Time allowed for the upstream's response headers.
    pub response_timeout: Option<String>,
    /// How long an idle pooled upstream connection is kept.
    pub pool_idle_timeout: Option<String>,
    /// Idle pooled upstream connections kept at most.
    pub pool_max_idle: Option<usize>,
    /// Peers whose X-Forwarded-* headers are trusted.
    pub trusted_proxies: Option<Vec<String>>,
    /// Time allowed for a client to send its request headers.
    pub header_read_timeout: Option<String>,
    /// How long in-flight requests may run after a shutdown signal.
    pub shutdown_grace: Option<String>,
    /// Accept HTTP/2 with prior knowledge (h2c) on the plain port.
    pub h2c: Option<bool>,
    /// Which HTTP/1.1 server layer serves HTTP/1.1, plain and over TLS:
    /// `hyper` or `native`.
    pub http1: Option<String>,
    /// Close an HTTP/2 connection without open streams after this long.
    pub http2_idle_timeout: Option<String>,
    /// Close a WebSocket (or other upgraded) tunnel after this long
    /// without a byte in either direction.
    pub websocket_idle_timeout: Option<String>,
    /// Worker threads, each with its own listening sockets and upstream
    /// pool; 0 = one per available CPU.
    pub workers: Option<usize>,
    /// PEM file of CA certificates for an https:// upstream (instead of
    /// the system's).
    pub upstream_ca: Option<PathBuf>,
    /// Name to send as SNI and verify for an https:// upstream.
    pub upstream_sni: Option<String>,
}

/// Where the upstream origin is: its scheme, address and TLS settings
/// (the client that forwards to it is `proxy::Upstream`).
#[derive(Clone, Debug)]
pub struct UpstreamAddr {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// `host:port` as given.
    pub authority: Authority,
    /// CA certificates (PEM) trusted for an `https` upstream instead of the
    /// system's roots.
    pub ca_file: Option<PathBuf>,
    /// Name sent as SNI and verified, instead of the URL's host.
    pub sni: Option<String>,
}

/// Forwarding behaviour.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Keep the client's Host header.
    pub preserve_host: bool,
    /// The classification header (`X-Crawler` by default).
    pub class_header: HeaderName,
    /// A robot's class (`X-Crawler-Class` by default).
    pub robot_class_header: HeaderName,
    /// Upstream connect timeout.
    pub connect_timeout: Duration,
    /// Upstream response-header timeout.
    pub response_timeout: Duration,
    /// Idle pooled connection lifetime.
    pub pool_idle_timeout: Duration,
    /// Idle pooled connections kept at most.
    pub pool_max_idle: usize,
    /// Peers whose forwarding headers are trusted.
    pub trusted_proxies: Vec<IpNet>,
    /// Client request-header read timeout.
    pub header_read_timeout: Duration,
    /// Shutdown grace period.
    pub shutdown_grace: Duration,
    /// Accept h2c (HTTP/2 with prior knowledge) on the plain port.
    pub h2c: bool,
    /// The HTTP/1.1 layer: the server side of HTTP/1.1, plain and over
    /// TLS, and the client side to an `http://` upstream.
    pub http1: Http1Layer,
    /// Close an HTTP/2 connection without open streams after this long.
    pub http2_idle_timeout: Duration,
    /// Close an upgraded tunnel (WebSocket) idle this long.
    pub websocket_idle_timeout: Duration,
}

/// Which HTTP/1.1 layer serves plain HTTP/1.1 connections and reaches an
/// `http://` upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Http1Layer {
    /// hyper's, kept as the reference and as a fallback an operator can
    /// switch back to with one line.
    Hyper,
    /// crawlgate's own (`crate::server::native` and the upstream
    /// connections of `crate::proxy`): heads parsed in place, no buffer
    /// held by an idle keep-alive connection, strict framing. The default.
    #[default]
    Native,
}

impl Http1Layer {
    /// `hyper` or `native`, as written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Http1Layer::Hyper => "hyper",
            Http1Layer::Native => "native",
        }
    }
}

/// `proxy.http1`, validated (default `native`).
fn http1_layer(raw: Option<&str>) -> Result<Http1Layer, ConfigError> {
    match raw {
        None => Ok(Http1Layer::default()),
        Some("hyper") => Ok(Http1Layer::Hyper),
        Some("native") => Ok(Http1Layer::Native),
        Some(other) => Err(invalid(
            "proxy.http1",
            format!("{other:?} is not one of \"hyper\", \"native\""),
        )),
    }
}

/// Parses an upstream URL, `http://host:port` or `https://host:port`.
pub fn parse_upstream(s: &str) -> Result<UpstreamAddr, ConfigError> {
    let bad = |why: &str| invalid("upstream", format!("{s:?}: {why}"));
    let uri: Uri = s
        .parse()
        .map_err(|_| bad("not a URL like http://127.0.0.1:8000"))?;
    let scheme = uri
        .scheme()
        .cloned()
        .ok_or_else(|| bad("missing http://"))?;
    if scheme != Scheme::HTTP && scheme != Scheme::HTTPS {
        return Err(bad("the scheme must be http:// or https://"));
    }
    let authority = uri
        .authority()
        .cloned()
        .ok_or_else(|| bad("missing host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("user info is not supported"));
    }
    if authority.host().is_empty() {
        return Err(bad("missing host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad(
            "a path or query is not supported; give only scheme, host and port",
        ));
    }
    Ok(UpstreamAddr {
        scheme,
        authority,
        ca_file: None,
        sni: None,
    })
}

pub(super) fn parse_net(s: &str) -> Result<IpNet, ConfigError> {
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| {
            invalid(
                "proxy.trusted_proxies",
                format!("{s:?} is not an IP address or network like 10.0.0.0/8"),
            )
        })
}

/// `[proxy]`, validated with the top-level `upstream` it qualifies
/// (`upstream_ca`, `upstream_sni`): (forwarding, the origin,
/// `proxy.workers` resolved, a [`super::Restart`] setting).
pub(super) fn proxy_config(
    raw: RawProxy,
    upstream: Option<String>,
) -> Result<(ProxyConfig, UpstreamAddr, usize), ConfigError> {
    let RawProxy {
        preserve_host,
        class_header,
        robot_class_header,
        connect_timeout,
        response_timeout,
        pool_idle_timeout,
        pool_max_idle,
        trusted_proxies,
        header_read_timeout,
        shutdown_grace,
        h2c,
        http1,
        http2_idle_timeout,
        websocket_idle_timeout,
        workers,
        upstream_ca,
        upstream_sni,
    } = raw;
    let upstream = upstream.unwrap_or_else(|| "http://127.0.0.1:8000".to_owned());
    let mut upstream = parse_upstream(&upstream)?;
    if upstream.scheme == Scheme::HTTPS {
        if let Some(sni) = &upstream_sni {
            if !is_hostname(sni.as_bytes()) {
                return Err(invalid(
                    "proxy.upstream_sni",
                    format!("{sni:?} is not a host name"),
                ));
            }
        }
        upstream.ca_file = upstream_ca;
        upstream.sni = upstream_sni;
    } else if upstream_ca.is_some() || upstream_sni.is_some() {
        let key = if upstream_ca.is_some() {
            "proxy.upstream_ca"
        } else {
            "proxy.upstream_sni"
        };
        return Err(invalid(key, "only applies to an https:// upstream"));
    }

    let class_header = class_header.unwrap_or_else(|| "x-crawler".to_owned());
    let class_header = HeaderName::from_bytes(class_header.as_bytes()).map_err(|_| {
        invalid(
            "proxy.class_header",
            format!("{class_header:?} is not a header name"),
        )
    })?;
    let robot_class_header = robot_class_header.unwrap_or_else(|| "x-crawler-class".to_owned());
    let robot_class_header =
        HeaderName::from_bytes(robot_class_header.as_bytes()).map_err(|_| {
            invalid(
                "proxy.robot_class_header",
                format!("{robot_class_header:?} is not a header name"),
            )
        })?;
    let trusted_proxies = trusted_proxies
        .unwrap_or_default()
        .iter()
        .map(|s| parse_net(s))
        .collect::<Result<_, _>>()?;
    let proxy = ProxyConfig {
        preserve_host: preserve_host.unwrap_or(true),
        class_header,
        robot_class_header,
        connect_timeout: duration("proxy.connect_timeout", connect_timeout, "2s")?,
        response_timeout: duration("proxy.response_timeout", response_timeout, "60s")?,
        pool_idle_timeout: duration("proxy.pool_idle_timeout", pool_idle_timeout, "60s")?,
        pool_max_idle: pool_max_idle.unwrap_or(256),
        trusted_proxies,
        header_read_timeout: duration("proxy.header_read_timeout", header_read_timeout, "10s")?,
        shutdown_grace: duration("proxy.shutdown_grace", shutdown_grace, "10s")?,
        h2c: h2c.unwrap_or(false),
        http1: http1_layer(http1.as_deref())?,
        http2_idle_timeout: duration("proxy.http2_idle_timeout", http2_idle_timeout, "60s")?,
        websocket_idle_timeout: duration(
            "proxy.websocket_idle_timeout",
            websocket_idle_timeout,
            "300s",
        )?,
    };
    let workers = match workers.unwrap_or(0) {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n if n > 1024 => {
            return Err(invalid("proxy.workers", format!("{n} is over 1024")));
        }
        n => n,
    };
    Ok((proxy, upstream, workers))
}
