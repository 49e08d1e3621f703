//! HTTP's rules for a shared cache (RFC 9111), as the robots cache
//! applies them: which requests may use it ([`cacheable_request`]), which
//! answers may be kept ([`storable`]), and for how long ([`Lifetime`]).
//! Pure functions of the header fields, read in place.

use std::time::{Duration, SystemTime};

use http::header::{
    HeaderMap, HeaderValue, AGE, AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_RANGE,
    COOKIE, DATE, EXPIRES, RANGE, SET_COOKIE, TRANSFER_ENCODING, VARY,
};
use http::{Method, StatusCode};

use super::BotCacheConfig;

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
    // `private`, `no-store`, `no-cache` (with or without field names): the
    // site does not want the answer reused. (A zero lifetime, `max-age=0`,
    // is [`Lifetime::of`]'s.)
    let refused = directives(headers).any(|(name, _)| {
        let is = |d: &[u8]| name.eq_ignore_ascii_case(d);
        is(b"private") || is(b"no-store") || is(b"no-cache")
    });
    if refused {
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

/// How long a kept answer is served: fresh, then stale (only in place of
/// an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// Served as fresh while its age is below this.
    pub fresh: Duration,
    /// Then, for this long, it may stand in for an error.
    pub stale: Duration,
    /// The age it had when it arrived (the upstream's `Age`, when a cache
    /// behind crawlgate answered): added to the `Age` of answers from it.
    pub arrived_age: Duration,
}

/// The longest lifetime a `delta-seconds` value stands for (RFC 9111
/// §1.2.2: a larger one counts as 2^31 seconds).
const DELTA_SECONDS_MAX: u64 = 1 << 31;

impl Lifetime {
    /// The lifetime of an answer with `headers`, received at `received`
    /// (the wall clock, for an `Expires` without a usable `Date`), under
    /// `config`.
    ///
    /// Fresh for `ttl`, or less when the site says so (RFC 9111 §4.2.1,
    /// for a shared cache): `s-maxage`, else `max-age`, else `Expires`
    /// minus `Date`. A directive given twice counts with its smaller
    /// value. A bound that cannot be read (`max-age=soon`, `max-age=-1`,
    /// `Expires: 0`) counts as zero, as RFC 9111 §4.2.1 and §5.3 advise:
    /// the answer is then not kept at all, which costs the site one
    /// request per robot visit, as without the cache; treating it as "no
    /// bound" would instead serve for the whole `ttl` a page whose site
    /// meant it to expire. A zero lifetime is not kept.
    ///
    /// An `Age` from the upstream (a cache behind crawlgate) is time the
    /// site's bound has already run: it is subtracted from it, and added
    /// to the `Age` crawlgate sends (an unreadable `Age` counts as none).
    ///
    /// Stale for `max_stale` after that, or not at all when the site
    /// forbids serving it stale: `must-revalidate`, `proxy-revalidate`, or
    /// `s-maxage` (which implies `proxy-revalidate`, RFC 9111 §5.2.2.10).
    ///
    /// Reads the fields in place: no allocation.
    pub fn of(headers: &HeaderMap, received: SystemTime, config: &BotCacheConfig) -> Lifetime {
        let mut s_maxage: Option<u64> = None;
        let mut max_age: Option<u64> = None;
        let mut revalidate = false;
        let smaller = |seen: Option<u64>, value: Option<&[u8]>| {
            let value = value.and_then(delta_seconds).unwrap_or(0);
            Some(seen.map_or(value, |seen| seen.min(value)))
        };
        for (name, value) in directives(headers) {
            let is = |d: &[u8]| name.eq_ignore_ascii_case(d);
            if is(b"s-maxage") {
                s_maxage = smaller(s_maxage, value);
                revalidate = true;
            } else if is(b"max-age") {
                max_age = smaller(max_age, value);
            } else if is(b"must-revalidate") || is(b"proxy-revalidate") {
                revalidate = true;
            }
        }
        let bound = match s_maxage.or(max_age) {
            Some(seconds) => Some(Duration::from_secs(seconds)),
            None => expires(headers, received),
        };
        let arrived_age = headers
            .get(AGE)
            .and_then(|age| delta_seconds(age.as_bytes().trim_ascii()))
            .map_or(Duration::ZERO, Duration::from_secs);
        let left = bound.map(|bound| bound.saturating_sub(arrived_age));
        Lifetime {
            fresh: left.map_or(config.ttl, |left| left.min(config.ttl)),
            arrived_age,
            stale: if revalidate {
                Duration::ZERO
            } else {
                config.max_stale
            },
        }
    }
}

/// `Expires` minus `Date` (or minus `received` when `Date` is missing or
/// unreadable); zero for an `Expires` that cannot be read or is not later;
/// `None` without `Expires`. Given twice, the earlier counts.
fn expires(headers: &HeaderMap, received: SystemTime) -> Option<Duration> {
    let date = |value: &HeaderValue| {
        std::str::from_utf8(value.as_bytes())
            .ok()
            .and_then(|text| httpdate::parse_http_date(text.trim()).ok())
    };
    let mut all = headers.get_all(EXPIRES).iter().peekable();
    all.peek()?;
    let since = headers.get(DATE).and_then(date).unwrap_or(received);
    let lifetimes = all.map(|value| {
        date(value)
            .and_then(|at| at.duration_since(since).ok())
            .unwrap_or(Duration::ZERO)
    });
    lifetimes.min()
}

/// A `delta-seconds` argument (digits, or digits in quotes, which
/// recipients accept, RFC 9111 §5.2); at most [`DELTA_SECONDS_MAX`];
/// `None` when it is not one.
fn delta_seconds(value: &[u8]) -> Option<u64> {
    let digits = value
        .strip_prefix(b"\"")
        .and_then(|v| v.strip_suffix(b"\""))
        .unwrap_or(value);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |n, &d| {
        (n * 10 + u64::from(d - b'0')).min(DELTA_SECONDS_MAX)
    }))
}

/// The directives of every `Cache-Control` field in `headers`, as
/// `(name, argument)` with spaces trimmed (a name is compared without
/// regard to case); commas inside a quoted argument do not split.
fn directives(headers: &HeaderMap) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
    headers
        .get_all(CACHE_CONTROL)
        .iter()
        .flat_map(|value| Directives {
            rest: value.as_bytes(),
        })
}

/// The directives of one `Cache-Control` value, see [`directives`].
struct Directives<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Directives<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            // The end of this directive: the first comma outside quotes.
            let mut quoted = false;
            let mut escaped = false;
            let mut end = self.rest.len();
            for (i, &b) in self.rest.iter().enumerate() {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' if quoted => escaped = true,
                    b'"' => quoted = !quoted,
                    b',' if !quoted => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
            }
            let directive = &self.rest[..end];
            self.rest = self.rest.get(end + 1..).unwrap_or(&[]);
            let mut halves = directive.splitn(2, |&b| b == b'=');
            let name = halves.next().unwrap_or(directive).trim_ascii();
            if name.is_empty() {
                continue;
            }
            return Some((name, halves.next().map(<[u8]>::trim_ascii)));
        }
    }
}
