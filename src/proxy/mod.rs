//! Forwarding to the upstream: a pooled keep-alive client, header rewriting,
//! streaming bodies, and upstream failures mapped to 502/504.
//!
//! Bodies are not collected: the client's request body is handed to the
//! upstream request as it arrives, and the upstream's response body is
//! handed back to the client the same way, so memory per request stays a
//! few buffers whatever the body size. The one exception is a robot's
//! page the robots cache is about to keep anyway, of a known length within
//! `bot_cache.max_item` ([`body::fill`]): it is read whole first, so that its
//! answer carries the cache's `ETag`. Both messages are re-framed (by
//! hyper's client, or by crawlgate's own connections), which is why
//! `Transfer-Encoding` and the other hop-by-hop headers are removed rather
//! than copied.
//!
//! This module is the forwarder ([`Upstream`]: send, the one retry, the
//! pools kept across reloads); [`headers`] rewrites the request's fields,
//! [`body`] holds the two streaming bodies, `client` hyper's pooled
//! connections and their TLS, `conn` crawlgate's own (`proxy.http1 =
//! "native"`, an `http://` upstream), [`socket`] the reads and writes both
//! sides of crawlgate's layer share, `error` what can fail and its
//! status.

pub mod body;
mod client;
mod conn;
mod error;
pub mod head;
pub mod headers;
pub mod socket;

pub use client::UpstreamTlsError;
pub use conn::Switched;
pub use error::{BodyError, ProxyError};
pub use headers::{ClientInfo, Robot};

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, HOST, UPGRADE};
use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use http::{Method, Request, Response, Version};
use hyper::body::Body;
use hyper_util::client::legacy::Client;
use ipnet::IpNet;

use crate::config::{Config, Http1Layer};
use crate::http1::Field;
use body::{Answer, BodyBytes, BodyState, RequestBody, ResponseBody};
use client::{Connector, PoolSettings};
use conn::Sending;
use error::stale_connection;
use head::{ClientHead, HeadRewrite};
use headers::{client_addr, join_cookies, rewrite_request_headers, strip_hop_by_hop, Rewrite};

/// The upstream origin and the pooled client that reaches it.
#[derive(Debug)]
pub struct Upstream {
    client: Client<Connector, RequestBody>,
    /// The connections of crawlgate's own HTTP/1.1 layer, when
    /// `proxy.http1 = "native"` (`http://` or `https://`, upgrades
    /// included).
    native: Option<Arc<conn::Pool>>,
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
        let tls = client::UpstreamTls::of(config)?;
        let connector = client::connector(config, tls.as_ref())?;
        let pool = PoolSettings {
            idle_timeout: config.proxy.pool_idle_timeout,
            max_idle: config.proxy.pool_max_idle,
        };
        let client = pool.client(connector.clone());
        let authority = config.upstream.authority.clone();
        let native = if config.proxy.http1 == Http1Layer::Native {
            Some(Arc::new(conn::Pool::new(
                &authority,
                tls.as_ref(),
                config.proxy.connect_timeout,
                pool,
            )?))
        } else {
            None
        };
        // An `Authority` holds only bytes valid in a header value.
        let authority_value = HeaderValue::from_str(authority.as_str())
            .unwrap_or_else(|_| HeaderValue::from_static("localhost"));
        Ok(Self {
            client,
            native,
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
        let native = self.native.as_ref().map(|pool| Arc::new(pool.another()));
        self.with_client(
            self.pool.client(self.connector.clone()),
            native,
            &self.connector,
        )
    }

    /// The same upstream reached through `client` (built on `connector`)
    /// and `native`.
    fn with_client(
        &self,
        client: Client<Connector, RequestBody>,
        native: Option<Arc<conn::Pool>>,
        connector: &Connector,
    ) -> Self {
        Self {
            client,
            native,
            connector: connector.clone(),
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
    /// gets a new pool ([`Upstream::with_own_pool`]), and only then is a
    /// pool built. `old` must be this worker's previous state (a pool
    /// belongs to the event loop that drives its connections).
    pub fn keeping_pool_of(&self, old: &Upstream) -> Self {
        if self.can_use_pool_of(old) {
            self.with_client(old.client.clone(), old.native.clone(), &old.connector)
        } else {
            self.with_own_pool()
        }
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
            && self.native.is_some() == old.native.is_some()
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

    /// Sends the request through hyper's client; a failure comes with
    /// whether it was connecting.
    async fn send_hyper(
        &self,
        parts: http::request::Parts,
        body: RequestBody,
        retry: bool,
    ) -> Result<Response<Answer>, (BodyError, bool)> {
        let again = retry.then(|| {
            (
                parts.method.clone(),
                parts.uri.clone(),
                parts.version,
                parts.headers.clone(),
            )
        });
        let result = match (
            self.client.request(Request::from_parts(parts, body)).await,
            again,
        ) {
            (Err(err), Some((method, uri, version, headers))) if stale_connection(&err) => {
                tracing::debug!(error = %err, "retrying an idempotent request on a fresh connection");
                let mut again = Request::new(RequestBody::empty());
                *again.method_mut() = method;
                *again.uri_mut() = uri;
                *again.version_mut() = version;
                *again.headers_mut() = headers;
                self.client.request(again).await
            }
            (other, _) => other,
        };
        match result {
            Ok(res) => Ok(res.map(Answer::Hyper)),
            Err(err) => {
                let connect = err.is_connect();
                Err((Box::new(err), connect))
            }
        }
    }

    /// Sends a request of `method` on a connection of crawlgate's own
    /// `pool`, its head written by `write` with the framing the body
    /// goes with; the retry writes the same head again. With `answer`,
    /// the answer's fields stay in its head's bytes ([`ClientHead`]).
    async fn send_native(
        &self,
        pool: &Arc<conn::Pool>,
        method: &Method,
        write: impl Fn(&mut Vec<u8>, Sending),
        body: RequestBody,
        retry: bool,
        answer: Option<&Mutex<Vec<Field>>>,
    ) -> Result<Response<Answer>, (BodyError, bool)> {
        let has_body = !body.is_end_stream();
        let len = body.size_hint().exact();
        let sending = match (has_body, len) {
            (false, _) => Sending::None,
            (true, Some(n)) => Sending::Length(n),
            // A chunked body of a method that has no use for one goes
            // nowhere, as with hyper's client (a length is passed).
            (true, None) if [Method::GET, Method::HEAD, Method::CONNECT].contains(method) => {
                Sending::None
            }
            (true, None) => Sending::Chunked,
        };
        let head_request = *method == Method::HEAD;
        let head = |out: &mut Vec<u8>| write(out, sending);
        let body = (sending != Sending::None).then_some(body);
        let result = match pool
            .send(false, head, body, sending, head_request, answer)
            .await
        {
            Err(failure) if retry && failure.stale => {
                tracing::debug!(error = %failure.error, "retrying an idempotent request on a fresh connection");
                pool.send(true, head, None, sending, head_request, answer)
                    .await
            }
            other => other,
        };
        result
            .map(|res| res.map(Answer::Native))
            .map_err(|failure| (failure.error, failure.connect))
    }

    /// Sends `req` upstream and returns the response with its body still
    /// streaming.
    ///
    /// The response timeout counts from the last request-body progress, so
    /// a long upload is not cut off while it is still moving. `upgrade` is
    /// what [`headers::requested_upgrade`] found in the request: the protocol asked
    /// for, sent on with `Connection: upgrade`; a `101` answer is accepted
    /// only then.
    ///
    /// A request with a body leaves a [`BodyBytes`] in `sent`: how many of
    /// its bytes went upstream, read when the exchange is over.
    ///
    /// `own_head` is the head `req` was made from when crawlgate's own
    /// layer read it: crawlgate's own connections then write the upstream
    /// head from its bytes ([`head::write_request_head`]) rather than
    /// from `req`'s fields. `req` must not have been changed since. When
    /// it has an `answer` table, the answer's fields are left in its
    /// head's bytes ([`ResponseBody::upstream_head`]) and parsed into
    /// that table, its `HeaderMap` empty, for that layer to copy.
    pub async fn forward<B>(
        &self,
        req: Request<B>,
        client: ClientInfo,
        upgrade: Option<HeaderValue>,
        sent: &mut Option<BodyBytes>,
        own_head: Option<ClientHead<'_>>,
    ) -> Result<Response<ResponseBody>, ProxyError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BodyError>,
    {
        let (mut parts, body) = req.into_parts();
        // The Host the client asked for: the target's authority (an
        // absolute-form target), else its Host field.
        let host = parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            .or_else(|| parts.headers.get(HOST).cloned());
        if self.native.is_none() {
            // hyper's client takes the target in absolute form.
            let path = parts
                .uri
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/"));
            let mut uri = http::uri::Parts::default();
            uri.scheme = Some(self.scheme.clone());
            uri.authority = Some(self.authority.clone());
            uri.path_and_query = Some(path);
            parts.uri = Uri::from_parts(uri).map_err(|_| ProxyError::Target)?;
            parts.version = Version::HTTP_11;
        }
        let trusted = self
            .trusted_proxies
            .iter()
            .any(|net| net.contains(&client.peer));
        let upstream_host = if self.preserve_host {
            host.clone().unwrap_or_else(|| self.authority_value.clone())
        } else {
            self.authority_value.clone()
        };
        let port = self.port_value(client.port);

        let has_body = !body.is_end_stream();
        let state = has_body.then(|| Arc::new(BodyState::new()));
        *sent = state.clone().map(BodyBytes);
        let body = RequestBody::new(body, state.clone(), self.max_body_bytes);
        // A body-less idempotent request may be sent again once if the pooled
        // connection turns out to be dead (closed by the upstream as we
        // wrote). Never a request with a body: it could reach the upstream
        // twice.
        let retry = !has_body && parts.method.is_idempotent();
        let request = async {
            if let (Some(pool), Some(raw)) = (&self.native, own_head) {
                // The client's field lines copied as they came, ours
                // appended: no `HeaderMap` rewritten, none encoded.
                let write = |out: &mut Vec<u8>, sending: Sending| {
                    let rw = HeadRewrite {
                        host: upstream_host.as_bytes(),
                        client: &client,
                        trusted,
                        port: port.as_bytes(),
                        class_header: &self.class_header,
                        robot_class_header: &self.robot_class_header,
                        verified_header: &self.verified_header,
                        upgrade: upgrade.as_ref().map(HeaderValue::as_bytes),
                        chunked: sending == Sending::Chunked,
                    };
                    head::write_request_head(out, raw.buf, raw.head, raw.fields, &rw);
                };
                return self
                    .send_native(pool, &parts.method, write, body, retry, raw.answer)
                    .await;
            }
            join_cookies(&mut parts.headers);
            rewrite_request_headers(
                &mut parts.headers,
                &Rewrite {
                    host: upstream_host,
                    original_host: host,
                    port,
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
            match &self.native {
                Some(pool) => {
                    let write = |out: &mut Vec<u8>, sending| conn::write_head(out, &parts, sending);
                    self.send_native(pool, &parts.method, write, body, retry, None)
                        .await
                }
                None => self.send_hyper(parts, body, retry).await,
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
            result = request => result.map_err(|(err, connect)| {
                let outcome = state.as_ref().map_or(0, |s| s.outcome.load(Ordering::Relaxed));
                match outcome {
                    BodyState::TOO_LARGE => ProxyError::BodyTooLarge,
                    BodyState::CLIENT_FAILED => ProxyError::ClientBody(err),
                    _ if connect => ProxyError::Connect(err),
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
            // The tunnel is spliced by the caller (hyper's upgrade, or
            // crawlgate's own connection as `Switched`, in the response's
            // extensions); the client is told what it switched to.
            let (Some(_), Some(protocol)) = (&upgrade, protocol) else {
                return Err(ProxyError::UnaskedSwitch);
            };
            parts.headers.insert(UPGRADE, protocol);
            parts
                .headers
                .insert(CONNECTION, HeaderValue::from_static("upgrade"));
        }
        let body = ResponseBody::new(body, self.body_idle_timeout);
        Ok(Response::from_parts(parts, body))
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
}
