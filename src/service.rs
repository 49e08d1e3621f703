//! Where the decision meets the network: one hyper service per request.
//!
//! [`handle`] gathers the [`Facts`] of a request, asks [`policy::decide`],
//! and carries the [`Decision`] out: a synthetic response from
//! [`response`], or [`Upstream::forward`](crate::proxy::Upstream::forward). It fills in the request's
//! [`Outcome`], which its response body records when it is done.
//! It is the only module where policy, proxy and responses meet.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, IF_MODIFIED_SINCE, IF_NONE_MATCH,
    STRICT_TRANSPORT_SECURITY, TRANSFER_ENCODING, USER_AGENT,
};
use http::{Method, Request, Response, StatusCode, Version};
use http_body_util::Either;
use hyper::upgrade::OnUpgrade;
use tokio::time::Instant;

use crate::cache::{self, BotCache, Probe};
use crate::classify::UaClass;
use crate::config::{Limits, Mode};
use crate::framing;
use crate::http1::{bodiless_status, Field};
use crate::logging::LogLimiter;
use crate::metrics::{Metrics, Side};
use crate::observe::{Observed, Pending};
use crate::outcome::{Outcome, RequestLine};
use crate::policy::{self, CacheProbe, Cached, Decision, Facts};
use crate::proxy::head::ClientHead;
use crate::proxy::{self, BodyError, ClientInfo, ProxyError};
use crate::response::{self, Body};
use crate::route::Route;
use crate::shed::{Change, Pressure, Reading, ShedPolicy};
use crate::sitemap::{self, serve::Sitemaps};
use crate::state::{Snapshot, Worker};
use crate::tunnel::{OwnConnection, Tunnel, UpgradeSlot, UpstreamHalf};
use crate::validators;
use crate::verify::{signature, Identity};
use verify::{asks_verification, verify_request};

mod mode;
#[cfg(test)]
mod tests;
mod verify;

/// What the connection tells about each of its requests.
#[derive(Clone, Copy, Debug)]
pub struct ConnInfo {
    /// The client (the TCP peer).
    pub peer: SocketAddr,
    /// The port the client connected to, for `X-Forwarded-Port`.
    pub local_port: u16,
    /// `http` or `https`.
    pub scheme: &'static str,
}

/// Serves one request that arrived on `conn`, over HTTP/1 or HTTP/2 alike.
/// `upgrades` is the HTTP/1 connection's slot for a tunnel: a forwarded
/// upgrade request whose upstream answers 101 leaves its two halves there
/// (`None` on HTTP/2, which does not upgrade). The response body carries
/// the request's [`Outcome`] to its record when it is done. `worker` is
/// the serving worker's state for the snapshot in effect. `own_head` is
/// the head crawlgate's own HTTP/1.1 layer made `req` from, unchanged:
/// a forwarded request's upstream head is then copied from its bytes.
pub async fn handle<B>(
    worker: Arc<Worker>,
    conn: ConnInfo,
    upgrades: Option<UpgradeSlot>,
    req: Request<B>,
    own_head: Option<ClientHead<'_>>,
) -> Result<Response<Observed>, Infallible>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BodyError>,
{
    let start = Instant::now();
    let shared = &worker.snapshot;
    let version = req.version();
    let head = req.method() == Method::HEAD;
    let tls = conn.scheme == "https";
    let outcome = Outcome {
        // What the access log and the live report show.
        request: (shared.access_log || shared.report.is_some()).then(|| {
            let client = shared.upstream.client_addr(conn.peer.ip(), req.headers());
            Box::new(RequestLine::of(&req, client))
        }),
        version,
        tls,
        ..Outcome::default()
    };
    let mut pending = Pending::new(Arc::clone(shared), outcome, start);
    let answer = own_head.and_then(|head| head.answer);
    let mut res = respond(&worker, conn, upgrades, req, own_head, &mut pending).await;
    pending.outcome.status = Some(res.status());
    if version == Version::HTTP_2 {
        // HTTP/2 has no Connection header; hyper would drop it anyway.
        res.headers_mut().remove(CONNECTION);
    }
    // A body the client is owed: a HEAD answer or a 204/304 has none,
    // and hyper drops it unread.
    let status = res.status();
    let owed = !head && !bodiless_status(status.as_u16());
    let mut res = res.map(|body| Observed::new(body, pending, owed));
    if tls {
        add_hsts(&mut res, shared, answer);
    }
    Ok(res)
}

/// The answer to a request whose head crawlgate's own HTTP/1.1 layer
/// refused before serving it, for a reason the service itself refuses on
/// when hyper's layer reads the head ([`refuse`]: several Host or
/// User-Agent fields, a Host that is not one, ambiguous framing): the
/// same answer (`status`: 400 or 431), closing the connection, and the
/// same record, with what of the request `line` could be read.
pub fn refused(
    shared: &Arc<Snapshot>,
    conn: ConnInfo,
    line: RequestLine,
    version: Version,
    status: StatusCode,
) -> Response<Observed> {
    let res = response::close(match status {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => response::header_fields_too_large(),
        _ => response::bad_request(),
    });
    let tls = conn.scheme == "https";
    let outcome = Outcome {
        request: (shared.access_log || shared.report.is_some()).then(|| Box::new(line)),
        version,
        tls,
        status: Some(res.status()),
        ..Outcome::default()
    };
    let pending = Pending::new(Arc::clone(shared), outcome, Instant::now());
    let mut res = res.map(|body| Observed::new(body, pending, true));
    if tls {
        add_hsts(&mut res, shared, None);
    }
    res
}

/// Adds the configured HSTS policy to an answer over TLS, unless the
/// upstream's own answer has one: in its `HeaderMap`, or in its head's
/// bytes when they are copied (their parsed fields then in `answer`).
fn add_hsts(res: &mut Response<Observed>, shared: &Snapshot, answer: Option<&Mutex<Vec<Field>>>) {
    let Some(hsts) = &shared.hsts else {
        return;
    };
    let copied = res.body().upstream_head().zip(answer);
    let upstream_has = copied.is_some_and(|((bytes, _), fields)| {
        let fields = fields.lock().unwrap_or_else(PoisonError::into_inner);
        fields.iter().any(|field| {
            field
                .name
                .of(bytes)
                .eq_ignore_ascii_case(STRICT_TRANSPORT_SECURITY.as_str().as_bytes())
        })
    });
    if !upstream_has {
        res.headers_mut()
            .entry(STRICT_TRANSPORT_SECURITY)
            .or_insert_with(|| hsts.clone());
    }
}

async fn respond<B>(
    worker: &Worker,
    conn: ConnInfo,
    upgrades: Option<UpgradeSlot>,
    mut req: Request<B>,
    own_head: Option<ClientHead<'_>>,
    pending: &mut Pending,
) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BodyError>,
{
    let shared = &*worker.snapshot;
    let scheme = conn.scheme;
    if let Some(res) = refuse(&shared.limits, conn.peer, &req) {
        return res;
    }

    let authority = framing::authority(req.uri(), req.headers().get(HOST));
    let start = pending.start();
    let pressure = match &shared.policy.shed {
        Some(shed) => {
            let metrics = &shared.process.metrics;
            shared.process.load.pressure(
                shed,
                metrics.upstream_in_flight_now(),
                start,
                |change, reading, level| log_shed_change(shed, change, reading, level, metrics),
            )
        }
        None => Pressure::default(),
    };
    // The robots cache is looked up only if the decision asks (a robot
    // past block, redirect and robots.txt); what it found is kept for the
    // answer or the fill. (A block: the lookup's borrows end before the
    // request is forwarded.)
    let user_agent = req.headers().get(USER_AGENT).map(HeaderValue::as_bytes);
    let verdict = shared.policy.classifier.classify(user_agent);
    // Recorded at once: a request whose client leaves during verification
    // is logged with its class all the same.
    pending.outcome.verdict = Some((verdict.class, verdict.reason));
    pending.outcome.class = Some(shared.policy.classifier.class_of(&verdict, false));
    // A robot that claims a crawler operator is verified before the
    // decision (a table lookup; DNS only where the ranges do not settle
    // it, bounded in time). Humans do none of it.
    let (identity, ai) = match &shared.verify {
        Some(_) => {
            let request = signature::Request {
                method: req.method(),
                scheme,
                authority: authority.unwrap_or(""),
                uri: req.uri(),
                headers: req.headers(),
            };
            // The client's address (through the trusted proxies) only for a
            // claim or a signature: humans never pay for it.
            // (The headers, not the request: its body need not be `Sync`.)
            let headers = req.headers();
            let client = || shared.upstream.client_addr(conn.peer.ip(), headers);
            let robot = (verdict.class == UaClass::Bot)
                .then_some(user_agent)
                .flatten();
            // Boxed, and made only when there is something to verify:
            // held inline, its future made every request's larger (the
            // service's future is copied into its box once per request:
            // 19.7 KiB with it and the sitemap's inline, 6.5 without).
            if asks_verification(worker, req.headers(), robot) {
                Box::pin(verify_request(
                    &shared.process.ranges,
                    worker,
                    &request,
                    robot,
                    &client,
                ))
                .await
            } else {
                (None, None)
            }
        }
        None => match (verdict.class, user_agent) {
            (UaClass::Bot, Some(ua)) if shared.policy.ai.is_some_and(|ai| ai.enforce) => {
                (None, shared.operators.claim(ua).and_then(|c| c.ai))
            }
            _ => (None, None),
        },
    };
    // The request's one class, read by every per-class table.
    let spoofed = identity == Some(Identity::Spoofed);
    let class = shared.policy.classifier.class_of(&verdict, spoofed);
    // Observe mode neither reads nor fills the robots cache: the
    // decision is made as without one, and a forward finds no probe.
    let bot_cache = match shared.mode {
        Mode::Enforce => shared.caches.bot.as_deref(),
        Mode::Observe => None,
    };
    let (decision, found) = {
        // A class that must see the live site (monitors, callbacks) is never
        // looked up (the decision does not ask): it passes the cache as a
        // bypass, answered by the site, its answer not kept, its failure
        // not hidden by a stale copy.
        let found = std::cell::Cell::new(match bot_cache {
            Some(_) if shared.policy.live_classes.contains(class) => Probe::Bypass,
            _ => Probe::NotAsked,
        });
        let lookup = || match bot_cache {
            Some(cache) => {
                let probe = cache.probe(
                    req.method(),
                    scheme,
                    authority,
                    req.uri(),
                    req.headers(),
                    start,
                );
                let cached = probe.cached();
                found.set(probe);
                cached
            }
            None => Cached::None,
        };
        let facts = Facts {
            method: req.method(),
            scheme,
            authority,
            path: req.uri().path(),
            query: req.uri().query(),
            user_agent,
            pressure,
            cache: bot_cache.map(|_| CacheProbe(&lookup)),
            identity,
            ai,
        };
        let decision = policy::decide_classified(verdict, class, &facts, &shared.policy);
        (decision, found.into_inner())
    };
    let outcome = &mut pending.outcome;
    outcome.identity = identity;
    outcome.class = Some(class);
    outcome.route = decision.route();
    let (decision, enforced) = mode::carried_out(decision, shared.mode);
    outcome.not_enforced = !enforced;

    match decision {
        Decision::Block { .. } => finish_early(&req, response::blocked()),
        Decision::BlockSpoofed => finish_early(&req, response::spoofed()),
        Decision::BlockAi(kind) => finish_early(&req, response::ai_refused(kind)),
        Decision::Redirect { status, location } => match HeaderValue::try_from(location) {
            Ok(location) => finish_early(&req, response::redirect(status, location)),
            Err(_) => finish_early(&req, response::bad_request()),
        },
        Decision::FromCache { stale } => match (bot_cache, &found) {
            (Some(cache), Probe::Found(entry, ..)) => {
                let res = cache.respond(entry, stale, req.method(), req.headers(), start);
                finish_early(&req, res)
            }
            // The decision saw an entry, so the probe holds it.
            _ => finish_early(&req, response::bad_gateway()),
        },
        Decision::Shed(shed) => {
            let retry_after = HeaderValue::from(shed.retry_after);
            finish_early(&req, response::shed(shed.status, retry_after))
        }
        Decision::ServeSitemap => {
            let res = match &shared.sitemaps {
                Some(sitemaps) => Box::pin(serve_sitemap(sitemaps, &req)).await,
                None => response::not_found(),
            };
            finish_early(&req, res)
        }
        Decision::ServeRobots => {
            let robots = shared.robots.representation(scheme, authority);
            let (etag, modified) = (&robots.etag, robots.last_modified);
            if validators::not_modified(
                req.headers(),
                Some(etag),
                Some(modified),
                SystemTime::now(),
            ) {
                let res = response::not_modified(robots.etag, Some(robots.last_modified));
                return finish_early(&req, res);
            }
            finish_early(&req, response::robots(robots))
        }
        Decision::Forward => {
            // An upgrade (WebSocket) passed the policy like any request;
            // the client's half is taken before the request moves on.
            // (HTTP/2 has no slot and never asks: `requested_upgrade` is
            // HTTP/1.1 only.)
            let protocol = proxy::headers::requested_upgrade(req.version(), req.headers()).cloned();
            // (A connection of crawlgate's own layer hands itself over.)
            let upgrade = match (protocol, upgrades) {
                (Some(protocol), Some(slot)) => {
                    let client = match req.extensions().get::<OwnConnection>() {
                        Some(_) => None,
                        None => Some(hyper::upgrade::on(&mut req)),
                    };
                    Some((protocol, slot, client))
                }
                _ => None,
            };
            let class = shared.class_values.of(class);
            let robot =
                (class.is_some() || identity.is_some()).then_some(proxy::Robot { class, identity });
            forward(
                worker,
                conn,
                req,
                verdict.class,
                robot,
                upgrade,
                found,
                own_head,
                pending,
            )
            .await
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn forward<B>(
    worker: &Worker,
    conn: ConnInfo,
    req: Request<B>,
    class: UaClass,
    robot: Option<proxy::Robot>,
    upgrade: Option<(HeaderValue, UpgradeSlot, Option<OnUpgrade>)>,
    found: Probe,
    own_head: Option<ClientHead<'_>>,
    pending: &mut Pending,
) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BodyError>,
{
    let shared = &*worker.snapshot;
    let process = &shared.process;
    let method = req.method().clone();
    let client = ClientInfo {
        peer: conn.peer.ip(),
        port: conn.local_port,
        scheme: conn.scheme,
        class,
        robot,
    };
    let protocol = upgrade.as_ref().map(|(protocol, _, _)| protocol.clone());
    // The answer's fields may stay in its head's bytes unless they are
    // read here: a robot's answer for the cache (a `101` always has its
    // `HeaderMap`).
    let reads_fields = class == UaClass::Bot && shared.caches.bot.is_some();
    let own_head = own_head.map(|head| ClientHead {
        answer: head.answer.filter(|_| !reads_fields),
        ..head
    });
    pending.in_flight = Some(process.metrics.upstream_in_flight());
    let sent = Instant::now();
    let result = worker
        .upstream
        .forward(req, client, protocol, &mut pending.body_bytes, own_head)
        .await;
    let elapsed = sent.elapsed();
    pending.outcome.upstream_time = Some(elapsed);
    let upstream_failed = matches!(&result, Err(err) if err.upstream_cause().is_some());
    if shared.policy.shed.is_some() && (result.is_ok() || upstream_failed) {
        process.load.record(elapsed, sent + elapsed);
    }
    match result {
        Ok(mut res) => {
            process.metrics.upstream_answered(elapsed);
            process.health.upstream_answered();
            if res.status() == StatusCode::SWITCHING_PROTOCOLS {
                // `Upstream::forward` answers 101 only to an upgrade
                // request, which has its client half here.
                if let Some((_, slot, client)) = upgrade {
                    let tunnel = Tunnel {
                        client,
                        upstream: UpstreamHalf::of(&mut res),
                        idle_timeout: shared.conn.websocket_idle_timeout,
                        peer: conn.peer,
                    };
                    let _ = slot.set(tunnel);
                }
            }
            if let (UaClass::Bot, Some(cache)) = (class, &shared.caches.bot) {
                if cache::is_upstream_failure(res.status()) {
                    if let Some(entry) = cache::stale_entry(&found) {
                        return stale_answer(cache, entry, &method, pending);
                    }
                }
                cache.count_forwarded(&found);
                let stale = cache::stale_entry(&found).cloned();
                if let Some(fill) = cache.fill(found, &method, res.status(), res.headers()) {
                    match proxy::body::fill(res, fill).await {
                        Ok(proxy::body::Filled::Streaming(streaming)) => res = streaming,
                        Ok(proxy::body::Filled::Whole(whole)) => {
                            return whole.map(|body| {
                                Either::Right(Either::Left(http_body_util::Full::new(body)))
                            })
                        }
                        // A body read whole failed: as any upstream failure.
                        Err(err) => return failed(shared, &err, pending, stale.as_ref(), &method),
                    }
                }
            }
            res.map(Either::Left)
        }
        Err(err) => {
            let stale = (class == UaClass::Bot)
                .then(|| cache::stale_entry(&found))
                .flatten();
            failed(shared, &err, pending, stale, &method)
        }
    }
}

/// Steps the shedding level from the process's clock, with no request
/// (see [`crate::shed::Load::tick`]): calm is seen when it begins and the
/// level, its gauge and its log line drop on time on an idle site.
pub fn tick_shedding(shared: &Snapshot) {
    if let Some(shed) = &shared.policy.shed {
        let metrics = &shared.process.metrics;
        shared.process.load.tick(
            shed,
            metrics.upstream_in_flight_now(),
            Instant::now(),
            |change, reading, level| log_shed_change(shed, change, reading, level, metrics),
        );
    }
}

/// One line per change of the shedding level (they are rare: the level
/// moves at most once per `escalate_after` or `calm_after`), and the
/// level's gauge.
fn log_shed_change(
    shed: &ShedPolicy,
    change: Change,
    reading: Reading,
    level: u8,
    metrics: &Metrics,
) {
    metrics.shed_level(level);
    let latency_p90_ms = reading.latency_p90.map(|l| l.as_millis() as u64);
    let in_flight = reading.in_flight;
    let order = &shed.config.order;
    let shedding = order[..usize::from(level).min(order.len())]
        .iter()
        .flatten()
        .map(|c| &**c)
        .collect::<Vec<_>>()
        .join(",");
    match change {
        Change::Started => tracing::warn!(
            in_flight,
            latency_p90_ms,
            shedding,
            "upstream under pressure: shedding robots"
        ),
        Change::Raised(_) => tracing::warn!(
            in_flight,
            latency_p90_ms,
            level,
            shedding,
            "upstream still under pressure: shedding more robot classes"
        ),
        Change::Lowered(_) => tracing::info!(
            in_flight,
            latency_p90_ms,
            level,
            shedding,
            "upstream calmer: shedding fewer robot classes"
        ),
        Change::Ended => tracing::info!(in_flight, latency_p90_ms, "upstream calm: shedding ended"),
        Change::SearchCapped => tracing::warn!(
            max_search_shed = %humantime::format_duration(shed.config.max_search_shed),
            share = f64::from(shed.config.capped_share_permille) / 1000.0,
            "search engines shed for max_search_shed: letting a share of them through"
        ),
    }
}

/// At most this many upstream-failure warnings a second; the next one
/// allowed says how many were held back.
static UPSTREAM_FAILURES: LogLimiter = LogLimiter::new(5);

/// A 502 or 504 is the operator's business: its cause at `warn`, a few
/// lines a second however many requests fail. A client-side failure (a
/// broken request body) stays at `debug`.
fn log_upstream_failure(shared: &Snapshot, err: &ProxyError, status: StatusCode) {
    let Some(cause) = err.upstream_cause() else {
        tracing::debug!(error = %ErrorChain(err), "request failed on the client's side");
        return;
    };
    if let Some(suppressed) = UPSTREAM_FAILURES.admit() {
        let (scheme, authority) = shared.upstream.origin();
        tracing::warn!(
            status = status.as_u16(),
            cause,
            upstream = %format_args!("{scheme}://{authority}"),
            error = %ErrorChain(err),
            suppressed,
            "upstream request failed",
        );
    }
}

/// The answer to a forward that failed, counted and logged: a robot's
/// `stale` copy when the upstream is what failed, else the error.
fn failed(
    shared: &Snapshot,
    err: &ProxyError,
    pending: &mut Pending,
    stale: Option<&Arc<cache::Entry>>,
    method: &Method,
) -> Response<Body> {
    let res = response::forward_failed(err);
    let side = if err.upstream_cause().is_some() {
        Side::Upstream
    } else {
        Side::Client
    };
    pending.outcome.error = Some((err.kind(), side));
    shared.process.metrics.upstream_error(err.kind(), side);
    log_upstream_failure(shared, err, res.status());
    match (side, stale, &shared.caches.bot) {
        (Side::Upstream, Some(entry), Some(cache)) => stale_answer(cache, entry, method, pending),
        _ => res,
    }
}

/// stale-if-error: a robot's stale copy beats the site's failure; the
/// request counts as answered from the cache.
fn stale_answer(
    cache: &BotCache,
    entry: &Arc<cache::Entry>,
    method: &Method,
    pending: &mut Pending,
) -> Response<Body> {
    pending.outcome.route = Route::Cache;
    cache.respond(entry, true, method, &HeaderMap::new(), Instant::now())
}

/// Requests refused before any decision: CONNECT (405), a head over
/// `limits.max_header_bytes` as [`framing::head_len`] counts it (431),
/// ambiguous framing or a Host that is not a host (400), an over-long
/// request-target (414), a declared body over the limit (413).
/// The connection is closed after the answer, since the body is unread.
fn refuse<B>(limits: &Limits, peer: SocketAddr, req: &Request<B>) -> Option<Response<Body>> {
    if req.method() == Method::CONNECT {
        return Some(response::close(response::method_not_allowed()));
    }
    // hyper's own caps (server.rs) sit above the limit, as a bound on
    // what it reads; this is the limit.
    let head = framing::head_len(req.method(), req.uri(), req.version(), req.headers());
    if head > limits.max_header_bytes {
        tracing::debug!(%peer, head, "refused a request head over limits.max_header_bytes");
        return Some(response::close(response::header_fields_too_large()));
    }
    if let Err(err) = framing::check(req.version(), req.uri(), req.headers()) {
        tracing::debug!(%peer, error = %err, "refused an ambiguous request");
        return Some(response::close(response::bad_request()));
    }
    let target_len = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len())
        + req.uri().authority().map_or(0, |a| a.as_str().len());
    if target_len > limits.max_uri_bytes {
        return Some(response::close(response::uri_too_long()));
    }
    if let Some(max) = limits.max_body_bytes {
        if declared_length(req).is_some_and(|len| len > max) {
            return Some(response::close(response::payload_too_large()));
        }
    }
    None
}

/// The request body's length as `Content-Length` declares it.
fn declared_length<B>(req: &Request<B>) -> Option<u64> {
    req.headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
}

/// A file of the sitemap folder, 304, or 404.
async fn serve_sitemap<B>(sitemaps: &Sitemaps, req: &Request<B>) -> Response<Body> {
    let Some((name, kind)) = sitemap::serve::file_name(req.uri().path()) else {
        return response::not_found();
    };
    // A plain GET of a small file (the index) is read with the open; a
    // conditional one may well end in 304, with nothing to read.
    let conditional =
        req.headers().contains_key(IF_NONE_MATCH) || req.headers().contains_key(IF_MODIFIED_SINCE);
    let read_small = req.method() == Method::GET && !conditional;
    match sitemaps.open(name, read_small).await {
        Ok(Some(opened)) if sitemap::serve::not_modified(req.headers(), &opened) => {
            response::sitemap_not_modified(opened, sitemaps.cache_control.clone())
        }
        Ok(Some(opened)) => {
            let head = req.method() == Method::HEAD;
            response::sitemap_file(opened, kind, sitemaps.cache_control.clone(), head)
        }
        Ok(None) => response::not_found(),
        Err(err) => {
            tracing::warn!(file = name, dir = %sitemaps.dir.display(), error = %err, "cannot serve a sitemap file");
            response::internal_error()
        }
    }
}

/// A response sent without reading the request body: if the request may
/// have one, close the connection after it rather than risk reading the
/// unread body as the next request.
fn finish_early<B>(req: &Request<B>, res: Response<Body>) -> Response<Body> {
    let has_body = req.headers().contains_key(TRANSFER_ENCODING)
        || req
            .headers()
            .get(CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    if has_body {
        response::close(res)
    } else {
        res
    }
}

/// Displays an error with its sources, `a: b: c`.
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(err) = source {
            write!(f, ": {err}")?;
            source = err.source();
        }
        Ok(())
    }
}
