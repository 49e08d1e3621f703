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
//!   or `HEAD` without `Cookie`, `Authorization`, `Range` or a body.
//! * **Responses** that are kept ([`storable`]): `200`, `301`, `404`,
//!   `410` to such a `GET`, without `Set-Cookie`, not marked `private`,
//!   `no-store`, `no-cache` or `max-age=0`/`s-maxage=0`, with no `Vary`
//!   other than
//!   `Accept-Encoding` (the request's `Accept-Encoding` is part of the key),
//!   complete, and at most `max_item` bytes. A response is kept only once
//!   its whole body has passed (the body is copied as it streams to the
//!   robot that asked, [`Fill`]); a body cut short is never kept.
//! * **Answers** from it carry `Age`; a `200` entry has a strong `ETag`
//!   (the upstream's, or one computed from the body) and answers a
//!   matching `If-None-Match` or `If-Modified-Since` with `304`.
//! * **Copies in progress** are bounded too: the bodies being copied at
//!   one moment may not pass a quarter of `size` (past it, a fill is
//!   dropped and that answer is simply not kept).
//! * **Stale copies** (older than `ttl`, younger than `max_stale`) are
//!   served only instead of an error: while robots are shed, or when the
//!   upstream fails (no answer, or `500`, `502`, `503`, `504`).
//!
//! The store is a concurrent, weight-bounded cache crate (`quick_cache`):
//! its weight is each entry's bytes (body, headers, key, bookkeeping), so
//! `size` bounds the memory it holds. Keys are a keyed 64-bit hash of
//! (scheme, host, path and query, Accept-Encoding); the entry keeps the
//! full key and a hit compares it, so a hash collision is a miss, never
//! the wrong page.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING, AGE, AUTHORIZATION, CACHE_CONTROL,
    CONTENT_LENGTH, CONTENT_LOCATION, CONTENT_RANGE, COOKIE, DATE, ETAG, EXPIRES, LAST_MODIFIED,
    RANGE, SET_COOKIE, TRANSFER_ENCODING, VARY,
};
use http::{Method, Response, StatusCode, Uri};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::response::{self, Body};
use crate::validators::{etag_of, not_modified};

/// `[bot_cache]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotCacheConfig {
    /// How long an entry is served as fresh.
    pub ttl: Duration,
    /// Bytes the cache holds at most.
    pub size: u64,
    /// Largest response body kept, in bytes.
    pub max_item: u64,
    /// How long past `ttl` an entry may still stand in for an error.
    pub max_stale: Duration,
}

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

/// `size` must be at least this many times `max_item`.
pub const SIZE_PER_ITEM: u64 = 32;

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
    stored: Instant,
    weight: u64,
}

impl Entry {
    /// Seconds since it was stored.
    fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.stored)
    }
}

#[derive(Clone, Debug)]
struct Weight;

impl quick_cache::Weighter<u64, Arc<Entry>> for Weight {
    fn weight(&self, _key: &u64, entry: &Arc<Entry>) -> u64 {
        entry.weight
    }
}

/// What the cache holds for a request, for the decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    /// Nothing usable (or the request may not use the cache).
    None,
    /// A fresh entry.
    Fresh,
    /// An entry past `ttl` but within `max_stale`: only instead of an
    /// error.
    Stale,
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
}

/// The cache, shared by every worker of one configuration.
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
}

impl BotCache {
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
        }
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
        };
        let Some(entry) = self.store.get(&hash) else {
            return Probe::Miss(key());
        };
        if !same_key(&entry.key, &parts) {
            return Probe::Miss(key());
        }
        let age = entry.age(now);
        let cached = if age < self.config.ttl {
            Cached::Fresh
        } else if age < self.config.ttl + self.config.max_stale {
            Cached::Stale
        } else {
            Cached::None
        };
        match cached {
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
        let age = HeaderValue::from(entry.age(now).as_secs());
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
    /// missed (`probe`), when the answer may be kept.
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
        Some(Fill {
            cache: Arc::clone(self),
            key,
            status,
            headers: headers.clone(),
            body: BytesMut::new(),
        })
    }

    fn store(&self, key: Key, status: StatusCode, mut headers: HeaderMap, body: Bytes) {
        headers.remove(AGE);
        headers.remove(TRANSFER_ENCODING);
        headers.remove(CONTENT_LENGTH);
        let mut etag = headers.get(ETAG).cloned();
        if etag.is_none() && status == StatusCode::OK {
            let tag = etag_of(&body);
            headers.insert(ETAG, tag.clone());
            etag = Some(tag);
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
            etag,
            last_modified,
            stored: Instant::now(),
            weight,
        };
        self.store.insert(key.hash, Arc::new(entry));
        self.bytes
            .set(i64::try_from(self.store.weight()).unwrap_or(i64::MAX));
        self.entries
            .set(i64::try_from(self.store.len()).unwrap_or(i64::MAX));
    }

    /// What the store holds, in bytes of weight (for tests and metrics).
    pub fn weight(&self) -> u64 {
        self.store.weight()
    }
}

/// The upstream's answer to a robot's GET, copied as it streams; kept when
/// the body ends complete within `max_item`.
#[derive(Debug)]
pub struct Fill {
    cache: Arc<BotCache>,
    key: Key,
    status: StatusCode,
    headers: HeaderMap,
    body: BytesMut,
}

impl Fill {
    /// One more piece of the body; `false` once it is over `max_item`, or
    /// when the bodies being copied at this moment would pass a quarter of
    /// `size` (the fill is then dropped: many robots downloading at once
    /// cannot make the copies outgrow the cache).
    pub fn push(&mut self, data: &[u8]) -> bool {
        let len = data.len() as u64;
        if self.body.len() as u64 + len > self.cache.config.max_item {
            return false;
        }
        let filling = &self.cache.filling;
        if filling.fetch_add(len, Ordering::Relaxed) + len > self.cache.config.size / 4 {
            filling.fetch_sub(len, Ordering::Relaxed);
            return false;
        }
        self.body.extend_from_slice(data);
        true
    }

    /// The body ended complete: keep it.
    pub fn finish(mut self) {
        let body = std::mem::take(&mut self.body).freeze();
        self.cache
            .filling
            .fetch_sub(body.len() as u64, Ordering::Relaxed);
        let key = Key {
            hash: self.key.hash,
            bytes: std::mem::take(&mut self.key.bytes),
        };
        let headers = std::mem::take(&mut self.headers);
        self.cache.store(key, self.status, headers, body);
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        // A fill dropped unfinished (a body cut short, too large) gives
        // its bytes back; a finished one has none left.
        self.cache
            .filling
            .fetch_sub(self.body.len() as u64, Ordering::Relaxed);
    }
}

/// Whether a robot's request may be answered from (and fill) the cache.
pub fn cacheable_request(method: &Method, headers: &HeaderMap) -> bool {
    (method == Method::GET || method == Method::HEAD)
        && !headers.contains_key(COOKIE)
        && !headers.contains_key(AUTHORIZATION)
        && !headers.contains_key(RANGE)
        && !headers.contains_key(TRANSFER_ENCODING)
        && headers
            .get(CONTENT_LENGTH)
            .is_none_or(|v| v.as_bytes() == b"0")
}

/// Whether the upstream's answer to a robot's GET may be kept.
pub fn storable(status: StatusCode, headers: &HeaderMap, max_item: u64) -> bool {
    if !matches!(status.as_u16(), 200 | 301 | 404 | 410) {
        return false;
    }
    if headers.contains_key(SET_COOKIE) || headers.contains_key(CONTENT_RANGE) {
        return false;
    }
    // `private`, `no-store`, `no-cache` (with or without field names), and
    // a zero lifetime for shared caches (`s-maxage=0`, `max-age=0`): the
    // site does not want the answer reused.
    let refused = |value: &HeaderValue| {
        value.as_bytes().split(|&b| b == b',').any(|directive| {
            let directive = directive.trim_ascii();
            let mut halves = directive.splitn(2, |&b| b == b'=');
            let name = halves.next().unwrap_or(directive).trim_ascii();
            let zero = halves
                .next()
                .is_some_and(|v| matches!(v.trim_ascii(), b"0" | b"\"0\""));
            let is = |d: &[u8]| name.eq_ignore_ascii_case(d);
            is(b"private")
                || is(b"no-store")
                || is(b"no-cache")
                || ((is(b"max-age") || is(b"s-maxage")) && zero)
        })
    };
    if headers.get_all(CACHE_CONTROL).iter().any(refused) {
        return false;
    }
    let varies_on_more = |value: &HeaderValue| {
        value
            .as_bytes()
            .split(|&b| b == b',')
            .map(<[u8]>::trim_ascii)
            .any(|field| !field.is_empty() && !field.eq_ignore_ascii_case(b"accept-encoding"))
    };
    if headers.get_all(VARY).iter().any(varies_on_more) {
        return false;
    }
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    declared.is_none_or(|len| len <= max_item)
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

#[cfg(test)]
mod tests;
