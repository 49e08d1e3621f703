//! The robots-only cache: anonymous GETs of robots answered from memory.
//!
//! Most robot requests are anonymous GETs of pages that change rarely, and
//! each one costs a legacy site a PHP process. With `[bot_cache]` on,
//! crawlgate keeps what the upstream answered a robot and serves the next
//! robot asking for the same address from memory, for `ttl`; humans never
//! read from it and never fill it (their pages may be personal, and
//! freshness matters more for them).
//!
//! * **Requests** that may use it ([`BotCache::probe`]): a robot's `GET`
//!   or `HEAD` without `Cookie`, `Authorization`, `Range` or a body, of a
//!   class that need not see the live site: `live_classes` (by default
//!   `monitor` and `service`, [`crate::policy::LiveClasses`]) are never
//!   looked up, never answered from it, never fill it, and count as
//!   `bypass`.
//! * **Responses** that are kept ([`storable`], [`Lifetime::of`]):
//!   `200`, `301`, `404`, `410` to such a `GET`, without `Set-Cookie`, not
//!   marked `private`, `no-store` or `no-cache`, with no `Vary` other than
//!   `Accept-Encoding` (the request's `Accept-Encoding` is part of the key),
//!   fresh for some time by the site's own headers, complete, and at most
//!   `max_item` bytes. A response is kept only once its whole body has
//!   passed (the body is copied as it streams to the robot that asked,
//!   [`Fill`]); a body cut short is never kept.
//! * **How long**: fresh for `ttl`, or less when the site says so
//!   (`s-maxage`, else `max-age`, else `Expires` minus `Date`; a bound
//!   that cannot be read counts as zero: not kept); see [`Lifetime::of`].
//! * **Answers** from it carry `Age`; a `200` entry has a strong `ETag`
//!   (the upstream's, or one computed from the body, [`entity_tag`]) and
//!   answers a matching `If-None-Match` or `If-Modified-Since` with `304`.
//! * **A robot's first answer** of a page that will be kept, a `200`
//!   without the site's `ETag` whose `Content-Length` fits `max_item`, is
//!   read whole before it is sent ([`Fill::reserve_whole`]), and carries
//!   the same `ETag` as the later answers from the cache; so the robot's
//!   next visit can be a `304`. Everything else streams.
//! * **Copies in progress** are bounded too: the bodies being copied at
//!   one moment may not pass a quarter of `size` (past it, a fill is
//!   dropped and that answer is simply not kept).
//! * **Stale copies** (past their freshness, for at most `max_stale`) are
//!   served only instead of an error: while robots are shed, or when the
//!   upstream fails (no answer, or `500`, `502`, `503`, `504`); never
//!   when the site said `must-revalidate`, `proxy-revalidate` or
//!   `s-maxage`.
//!
//! The store is a concurrent, weight-bounded cache crate (`quick_cache`):
//! its weight is each entry's bytes (body, headers, key, bookkeeping), so
//! `size` bounds the memory it holds. Keys are a keyed 64-bit hash of
//! (scheme, host, path and query, Accept-Encoding); the entry keeps the
//! full key and a hit compares it, so a hash collision is a miss, never
//! the wrong page.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING, AGE, CACHE_CONTROL, CONTENT_LENGTH,
    CONTENT_LOCATION, DATE, ETAG, EXPIRES, IF_NONE_MATCH, LAST_MODIFIED, TRANSFER_ENCODING, VARY,
};
use http::{Method, Response, StatusCode, Uri};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use crate::config::BotCacheConfig;
use crate::metrics::Metrics;
use crate::policy::Cached;
use crate::proxy::body::BodyCopy;
use crate::response::{self, Body};
use crate::validators::{etag_of, not_modified};

/// The store's shards; `max_item` is bounded so that an item fits a shard.
const SHARDS: usize = 8;

/// Bytes counted per entry beyond its body, headers and key.
const ENTRY_OVERHEAD: u64 = 256;

/// The fields a `304` repeats from the stored response (RFC 9110 §15.4.5).
const NOT_MODIFIED_FIELDS: [HeaderName; 7] = [
    CACHE_CONTROL,
    CONTENT_LOCATION,
    DATE,
    ETAG,
    EXPIRES,
    VARY,
    LAST_MODIFIED,
];

/// One kept response.
#[derive(Debug)]
pub struct Entry {
    /// The full key, compared on every hit.
    key: Box<[u8]>,
    status: StatusCode,
    /// The upstream's headers as they were sent to the robot (hop-by-hop
    /// fields already gone), with an `ETag` for a `200`.
    headers: HeaderMap,
    body: Bytes,
    etag: Option<HeaderValue>,
    last_modified: Option<SystemTime>,
    /// When its headers arrived.
    stored: Instant,
    /// How long it is fresh, and then stale ([`Lifetime`]).
    lifetime: Lifetime,
    weight: u64,
}

impl Entry {
    /// Seconds since its headers arrived.
    fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.stored)
    }

    /// Fresh, stale (may stand in for an error) or past use, at `now`.
    fn state(&self, now: Instant) -> Cached {
        let age = self.age(now);
        if age < self.lifetime.fresh {
            Cached::Fresh
        } else if age < self.lifetime.fresh.saturating_add(self.lifetime.stale) {
            Cached::Stale
        } else {
            Cached::None
        }
    }
}

#[derive(Clone, Debug)]
struct Weight;

impl quick_cache::Weighter<u64, Arc<Entry>> for Weight {
    fn weight(&self, _key: &u64, entry: &Arc<Entry>) -> u64 {
        entry.weight
    }
}

/// What a lookup found, kept by the request for its answer or its fill.
#[derive(Debug, Default)]
pub enum Probe {
    /// Not looked up (not a robot, or decided before).
    #[default]
    NotAsked,
    /// The request may not use the cache.
    Bypass,
    /// Nothing usable: a forwarded answer may fill it under this key.
    Miss(Key),
    /// An entry, fresh or stale; when stale, a forwarded answer may
    /// replace it under the key (a fresh hit builds no key).
    Found(Arc<Entry>, Cached, Option<Key>),
}

impl Probe {
    /// For the decision.
    pub fn cached(&self) -> Cached {
        match self {
            Probe::Found(_, cached, _) => *cached,
            _ => Cached::None,
        }
    }
}

/// A request's key: its hash and its bytes.
#[derive(Debug)]
pub struct Key {
    hash: u64,
    bytes: Box<[u8]>,
    /// The request's `If-None-Match`, for the answer to a page read whole.
    if_none_match: Option<HeaderValue>,
}

/// The cache, shared by every worker and kept by the process across
/// reloads that leave `[bot_cache]` as it was.
#[derive(Debug)]
pub struct BotCache {
    config: BotCacheConfig,
    store: quick_cache::sync::Cache<u64, Arc<Entry>, Weight>,
    hasher: std::hash::RandomState,
    hits: Counter,
    stale: Counter,
    misses: Counter,
    bypasses: Counter,
    not_modified: Counter,
    bytes_saved: Counter,
    bytes: Gauge,
    entries: Gauge,
    /// Bytes being copied by fills right now.
    filling: AtomicU64,
    /// Whether the gauges describe this cache: until a reload replaces it
    /// ([`BotCache::retire`]), after which a late fill here leaves them to
    /// its successor.
    current: AtomicBool,
}

impl BotCache {
    /// The settings it was built with.
    pub fn config(&self) -> &BotCacheConfig {
        &self.config
    }

    /// An empty cache of `config`'s size, counting into `metrics`.
    pub fn new(config: BotCacheConfig, metrics: &Metrics) -> Self {
        let estimated_items = usize::try_from(config.size / 8192)
            .unwrap_or(usize::MAX)
            .max(256);
        let options = quick_cache::OptionsBuilder::new()
            .shards(SHARDS)
            .estimated_items_capacity(estimated_items)
            .weight_capacity(config.size)
            .build();
        let store = match options {
            Ok(options) => quick_cache::sync::Cache::with_options(
                options,
                Weight,
                Default::default(),
                Default::default(),
            ),
            // Only for options the builder refuses, which these are not.
            Err(_) => quick_cache::sync::Cache::with_weighter(estimated_items, config.size, Weight),
        };
        let m = metrics.bot_cache();
        Self {
            config,
            store,
            hasher: std::hash::RandomState::new(),
            hits: m.result("hit"),
            stale: m.result("stale"),
            misses: m.result("miss"),
            bypasses: m.result("bypass"),
            not_modified: m.result("not_modified"),
            bytes_saved: m.bytes_saved,
            bytes: m.bytes,
            entries: m.entries,
            filling: AtomicU64::new(0),
            current: AtomicBool::new(true),
        }
    }

    /// Sets the gauges (bytes and entries held) to what this cache holds,
    /// unless a reload replaced it.
    pub fn publish(&self) {
        if !self.current.load(Ordering::Acquire) {
            return;
        }
        self.bytes
            .set(i64::try_from(self.store.weight()).unwrap_or(i64::MAX));
        self.entries
            .set(i64::try_from(self.store.len()).unwrap_or(i64::MAX));
    }

    /// A reload replaced this cache (or turned the cache off): the gauges
    /// are no longer its own.
    pub fn retire(&self) {
        self.current.store(false, Ordering::Release);
    }

    /// Looks up a robot's request (`authority` as asked, `scheme` how it
    /// came in).
    pub fn probe(
        &self,
        method: &Method,
        scheme: &str,
        authority: Option<&str>,
        uri: &Uri,
        headers: &HeaderMap,
        now: Instant,
    ) -> Probe {
        if !cacheable_request(method, headers) {
            return Probe::Bypass;
        }
        let path = uri.path_and_query().map_or("/", |pq| pq.as_str());
        let encoding = headers
            .get(ACCEPT_ENCODING)
            .map_or(&b""[..], |v| v.as_bytes());
        let parts: [&[u8]; 4] = [
            scheme.as_bytes(),
            authority.unwrap_or("").as_bytes(),
            path.as_bytes(),
            encoding,
        ];
        let mut hasher = self.hasher.build_hasher();
        for part in parts {
            hasher.write(part);
            hasher.write_u8(0xff);
        }
        let hash = hasher.finish();
        let key = || Key {
            hash,
            bytes: parts.join(&0xff_u8).into_boxed_slice(),
            if_none_match: headers.get(IF_NONE_MATCH).cloned(),
        };
        let Some(entry) = self.store.get(&hash) else {
            return Probe::Miss(key());
        };
        if !same_key(&entry.key, &parts) {
            return Probe::Miss(key());
        }
        match entry.state(now) {
            Cached::None => Probe::Miss(key()),
            Cached::Fresh => Probe::Found(entry, Cached::Fresh, None),
            Cached::Stale => Probe::Found(entry, Cached::Stale, Some(key())),
        }
    }

    /// Counts a robot request the cache could not answer.
    pub fn count_forwarded(&self, probe: &Probe) {
        match probe {
            Probe::Bypass => self.bypasses.inc(),
            Probe::Miss(_) | Probe::Found(..) => self.misses.inc(),
            Probe::NotAsked => return,
        };
    }

    /// The answer to `method` with `headers` from `entry` (stale or not,
    /// as the decision said): the stored response with `Age`, or `304`
    /// when the request's validators match a `200` entry.
    pub fn respond(
        &self,
        entry: &Entry,
        stale: bool,
        method: &Method,
        headers: &HeaderMap,
        now: Instant,
    ) -> Response<Body> {
        let age = entry.lifetime.arrived_age.saturating_add(entry.age(now));
        let age = HeaderValue::from(age.as_secs());
        if stale {
            self.stale.inc();
        } else {
            self.hits.inc();
        }
        if entry.status == StatusCode::OK
            && not_modified(
                headers,
                entry.etag.as_ref(),
                entry.last_modified,
                SystemTime::now(),
            )
        {
            self.not_modified.inc();
            self.bytes_saved.inc_by(entry.body.len() as u64);
            let mut res = response::full(StatusCode::NOT_MODIFIED, Bytes::new());
            for name in NOT_MODIFIED_FIELDS {
                for value in entry.headers.get_all(&name) {
                    res.headers_mut().append(name.clone(), value.clone());
                }
            }
            res.headers_mut().insert(AGE, age);
            return res;
        }
        let body = if method == Method::HEAD {
            Bytes::new()
        } else {
            self.bytes_saved.inc_by(entry.body.len() as u64);
            entry.body.clone()
        };
        let mut res = response::full(entry.status, body);
        *res.headers_mut() = entry.headers.clone();
        res.headers_mut().insert(AGE, age);
        res.headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(entry.body.len()));
        res
    }

    /// A fill for the upstream's answer `res` to a robot's GET that
    /// missed (`probe`), when the answer may be kept: [`storable`], and
    /// fresh for some time by its own headers ([`Lifetime::of`]).
    pub fn fill(
        self: &Arc<Self>,
        probe: Probe,
        method: &Method,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> Option<Fill> {
        let key = match probe {
            Probe::Miss(key) | Probe::Found(_, _, Some(key)) => key,
            Probe::NotAsked | Probe::Bypass | Probe::Found(_, _, None) => return None,
        };
        if method != Method::GET || !storable(status, headers, self.config.max_item) {
            return None;
        }
        let lifetime = Lifetime::of(headers, SystemTime::now(), &self.config);
        if lifetime.fresh.is_zero() {
            return None;
        }
        Some(Fill {
            cache: Arc::clone(self),
            key,
            status,
            headers: headers.clone(),
            body: BytesMut::new(),
            counted: 0,
            received: Instant::now(),
            lifetime,
        })
    }

    /// Keeps `body`; returns the `ETag` the entry answers with.
    fn store(
        &self,
        key: Key,
        status: StatusCode,
        mut headers: HeaderMap,
        body: Bytes,
        received: Instant,
        lifetime: Lifetime,
    ) -> Option<HeaderValue> {
        headers.remove(AGE);
        headers.remove(TRANSFER_ENCODING);
        headers.remove(CONTENT_LENGTH);
        let etag = entity_tag(status, &headers, &body);
        if let Some(tag) = &etag {
            if !headers.contains_key(ETAG) {
                headers.insert(ETAG, tag.clone());
            }
        }
        let last_modified = headers
            .get(LAST_MODIFIED)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok());
        let header_bytes: usize = headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 32)
            .sum();
        let weight =
            body.len() as u64 + header_bytes as u64 + key.bytes.len() as u64 + ENTRY_OVERHEAD;
        let entry = Entry {
            key: key.bytes,
            status,
            headers,
            body,
            etag: etag.clone(),
            last_modified,
            stored: received,
            lifetime,
            weight,
        };
        self.store.insert(key.hash, Arc::new(entry));
        self.publish();
        etag
    }

    /// What the store holds, in bytes of weight (for tests and metrics).
    pub fn weight(&self) -> u64 {
        self.store.weight()
    }
}

/// The upstream's answer to a robot's GET, copied as it streams (or read
/// whole, [`Fill::reserve_whole`]); kept when the body ends complete
/// within `max_item`.
#[derive(Debug)]
pub struct Fill {
    cache: Arc<BotCache>,
    key: Key,
    status: StatusCode,
    headers: HeaderMap,
    body: BytesMut,
    /// Bytes this fill counts in the cache's copies in progress.
    counted: u64,
    /// When the headers arrived: the entry's age counts from then.
    received: Instant,
    lifetime: Lifetime,
}

impl Fill {
    /// One more piece of the body; `false` once it is over `max_item`, or
    /// when the bodies being copied at this moment would pass a quarter of
    /// `size` (the fill is then dropped: many robots downloading at once
    /// cannot make the copies outgrow the cache).
    pub fn push(&mut self, data: &[u8]) -> bool {
        let after = self.body.len() as u64 + data.len() as u64;
        if after > self.cache.config.max_item || !self.count(after) {
            return false;
        }
        self.body.extend_from_slice(data);
        true
    }

    /// Counts the copy as `len` bytes among the copies in progress (it
    /// may already count as much); `false` if that would pass a quarter
    /// of `size`.
    fn count(&mut self, len: u64) -> bool {
        let Some(extra) = len.checked_sub(self.counted).filter(|&n| n > 0) else {
            return true;
        };
        let filling = &self.cache.filling;
        if filling.fetch_add(extra, Ordering::Relaxed) + extra > self.cache.config.size / 4 {
            filling.fetch_sub(extra, Ordering::Relaxed);
            return false;
        }
        self.counted = len;
        true
    }

    /// Whether the body should be read whole before the robot is
    /// answered, so that its first answer already carries the `ETag` the
    /// cache answers with later (and its next visit can be a `304`): a
    /// `200` without the site's own `ETag`, whose `Content-Length` fits
    /// `max_item` and, counted at once, the copies in progress. Then the
    /// declared length (the body is being copied anyway, and robots do
    /// not render as it arrives); otherwise `None`, and the body streams.
    pub fn reserve_whole(&mut self) -> Option<usize> {
        if self.status != StatusCode::OK || self.headers.contains_key(ETAG) {
            return None;
        }
        let mut lengths = self.headers.get_all(CONTENT_LENGTH).iter();
        let (Some(declared), None) = (lengths.next(), lengths.next()) else {
            return None;
        };
        let len = std::str::from_utf8(declared.as_bytes())
            .ok()?
            .parse::<u64>()
            .ok()?;
        if len > self.cache.config.max_item || !self.count(len) {
            return None;
        }
        let len = usize::try_from(len).ok()?;
        self.body.reserve(len);
        Some(len)
    }

    /// The body ended complete: keep it. Returns the body and the `ETag`
    /// answers from the cache carry (see [`entity_tag`]).
    pub fn finish(mut self) -> (Bytes, Option<HeaderValue>) {
        let body = std::mem::take(&mut self.body).freeze();
        self.cache
            .filling
            .fetch_sub(std::mem::take(&mut self.counted), Ordering::Relaxed);
        let key = Key {
            hash: self.key.hash,
            bytes: std::mem::take(&mut self.key.bytes),
            if_none_match: None,
        };
        let headers = std::mem::take(&mut self.headers);
        let etag = self.cache.store(
            key,
            self.status,
            headers,
            body.clone(),
            self.received,
            self.lifetime,
        );
        (body, etag)
    }

    /// Keeps the body read whole ([`Fill::reserve_whole`]) and answers the
    /// robot that asked, with the response `parts` the upstream sent: the
    /// body with the `ETag` answers from the cache carry, or `304` when the
    /// request's `If-None-Match` already names that tag (a robot
    /// revalidating a page the cache no longer held: expired, evicted, or
    /// emptied by a resize; the site was asked, the robot gets no body).
    pub fn answer_whole(mut self, mut parts: http::response::Parts) -> Response<Bytes> {
        let asked = self.key.if_none_match.take();
        let (body, etag) = self.finish();
        let Some(etag) = etag else {
            return Response::from_parts(parts, body);
        };
        parts.headers.insert(ETAG, etag.clone());
        let revalidated = asked.is_some_and(|asked| {
            let mut request = HeaderMap::with_capacity(1);
            request.insert(IF_NONE_MATCH, asked);
            not_modified(&request, Some(&etag), None, SystemTime::now())
        });
        if !revalidated {
            return Response::from_parts(parts, body);
        }
        let mut kept = HeaderMap::new();
        for name in NOT_MODIFIED_FIELDS {
            for value in parts.headers.get_all(&name) {
                kept.append(name.clone(), value.clone());
            }
        }
        parts.status = StatusCode::NOT_MODIFIED;
        parts.headers = kept;
        Response::from_parts(parts, Bytes::new())
    }
}

/// The response body copies itself into the cache through this.
impl BodyCopy for Fill {
    fn push(&mut self, data: &[u8]) -> bool {
        Fill::push(self, data)
    }

    fn finish(self: Box<Self>) {
        let _kept = Fill::finish(*self);
    }

    fn reserve_whole(&mut self) -> Option<usize> {
        Fill::reserve_whole(self)
    }

    fn answer_whole(self, parts: http::response::Parts) -> Response<Bytes> {
        Fill::answer_whole(self, parts)
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        // A fill dropped unfinished (a body cut short, too large) gives
        // its bytes back; a finished one has none left.
        self.cache
            .filling
            .fetch_sub(self.counted, Ordering::Relaxed);
    }
}

/// The `ETag` of a kept answer, the one every answer from the cache (and a
/// robot's first answer read whole) carries: the site's own, or for a
/// `200` without one a strong tag computed from the body.
pub fn entity_tag(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Option<HeaderValue> {
    match headers.get(ETAG) {
        Some(tag) => Some(tag.clone()),
        None => (status == StatusCode::OK).then(|| etag_of(body)),
    }
}

/// Whether `stored` is `parts` joined by `0xff`.
fn same_key(stored: &[u8], parts: &[&[u8]]) -> bool {
    let mut rest = stored;
    for (i, part) in parts.iter().enumerate() {
        let Some(after) = rest.strip_prefix(*part) else {
            return false;
        };
        rest = after;
        if i + 1 < parts.len() {
            let Some(after) = rest.strip_prefix(&[0xff][..]) else {
                return false;
            };
            rest = after;
        }
    }
    rest.is_empty()
}

/// A stale entry's answer in place of an upstream failure, if `probe`
/// found one within `max_stale`.
pub fn stale_entry(probe: &Probe) -> Option<&Arc<Entry>> {
    match probe {
        Probe::Found(entry, _, _) => Some(entry),
        _ => None,
    }
}

/// Whether the upstream's `status` is a failure a stale copy may replace.
pub fn is_upstream_failure(status: StatusCode) -> bool {
    matches!(status.as_u16(), 500 | 502 | 503 | 504)
}

mod reuse;

pub use reuse::{cacheable_request, storable, Lifetime};

#[cfg(test)]
mod tests;
