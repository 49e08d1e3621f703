//! Validators and conditional requests (RFC 9110 §8.8, §13): the strong
//! `ETag` crawlgate computes for what it serves itself (robots.txt, the
//! robots' cache), and whether a request's `If-None-Match` or
//! `If-Modified-Since` lets it answer `304 Not Modified`.

use std::time::SystemTime;

use http::header::{HeaderMap, HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH};

/// A strong entity tag for `body`: the first 128 bits of its SHA-256, in
/// hex, quoted. The same bytes always get the same tag, across restarts.
pub fn etag_of(body: &[u8]) -> HeaderValue {
    let digest = ring::digest::digest(&ring::digest::SHA256, body);
    let mut tag = String::with_capacity(34);
    tag.push('"');
    for byte in &digest.as_ref()[..16] {
        tag.push(char::from(HEX[usize::from(byte >> 4)]));
        tag.push(char::from(HEX[usize::from(byte & 15)]));
    }
    tag.push('"');
    HeaderValue::try_from(tag).unwrap_or(HeaderValue::from_static("\"0\""))
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether `headers` (a GET or HEAD request's) make the current
/// representation, with `etag` and `last_modified`, "not modified":
/// `If-None-Match` decides when present (a weak comparison, `*` matches);
/// otherwise `If-Modified-Since`, when the representation has a
/// modification time and the date parses, and is not in the future.
pub fn not_modified(
    headers: &HeaderMap,
    etag: Option<&HeaderValue>,
    last_modified: Option<SystemTime>,
    now: SystemTime,
) -> bool {
    let mut if_none_match = headers.get_all(IF_NONE_MATCH).iter().peekable();
    if if_none_match.peek().is_some() {
        let Some(etag) = etag else {
            return false;
        };
        let current = opaque(etag.as_bytes());
        return if_none_match.any(|value| {
            value
                .as_bytes()
                .split(|&b| b == b',')
                .map(|tag| tag.trim_ascii())
                .any(|tag| tag == b"*" || (!tag.is_empty() && opaque(tag) == current))
        });
    }
    let (Some(since), Some(modified)) = (headers.get(IF_MODIFIED_SINCE), last_modified) else {
        return false;
    };
    let Some(since) = since
        .to_str()
        .ok()
        .and_then(|s| httpdate::parse_http_date(s).ok())
    else {
        return false;
    };
    // A date in the future is invalid (RFC 9110 §13.1.3): ignore it.
    since <= now && modified <= since
}

/// The opaque part of an entity tag: without `W/` (weak comparison).
fn opaque(tag: &[u8]) -> &[u8] {
    tag.strip_prefix(b"W/").unwrap_or(tag)
}

/// `time` as an HTTP date (`Last-Modified`).
pub fn http_date(time: SystemTime) -> HeaderValue {
    HeaderValue::try_from(httpdate::fmt_http_date(time))
        .unwrap_or(HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::header_map as headers;

    #[test]
    fn the_tag_is_strong_stable_and_differs_per_body() {
        let a = etag_of(b"User-agent: *\n");
        assert_eq!(a, etag_of(b"User-agent: *\n"));
        assert_ne!(a, etag_of(b"User-agent: *\nAllow: /\n"));
        let text = a.to_str().expect("ascii");
        assert!(
            text.starts_with('"') && text.ends_with('"') && text.len() == 34,
            "{text}"
        );
    }

    #[test]
    fn if_none_match_and_if_modified_since() {
        let tag = HeaderValue::from_static("\"abc\"");
        let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let now = modified + Duration::from_secs(3600);
        let at = |d: u64| httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(d));
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[], false),
            (&[("if-none-match", "\"abc\"")], true),
            (&[("if-none-match", "W/\"abc\"")], true),
            (&[("if-none-match", "\"x\", \"abc\"")], true),
            (
                &[("if-none-match", "\"x\""), ("if-none-match", "\"abc\"")],
                true,
            ),
            (&[("if-none-match", "*")], true),
            (&[("if-none-match", "\"abd\"")], false),
            (&[("if-none-match", "")], false),
            // If-None-Match decides when present, even against a date.
            (
                &[
                    ("if-none-match", "\"old\""),
                    ("if-modified-since", &at(1_700_000_000)),
                ],
                false,
            ),
            (&[("if-modified-since", &at(1_700_000_000))], true),
            (&[("if-modified-since", &at(1_700_000_100))], true),
            (&[("if-modified-since", &at(1_699_999_999))], false),
            // In the future: ignored.
            (&[("if-modified-since", &at(1_800_000_000))], false),
            (&[("if-modified-since", "yesterday")], false),
        ];
        for (pairs, want) in cases {
            let got = not_modified(&headers(pairs), Some(&tag), Some(modified), now);
            assert_eq!(got, *want, "{pairs:?}");
        }
        // Without validators nothing is "not modified".
        let inm = headers(&[("if-none-match", "*")]);
        assert!(!not_modified(&inm, None, None, now));
        let ims = headers(&[("if-modified-since", &at(1_700_000_000))]);
        assert!(!not_modified(&ims, Some(&tag), None, now));
    }
}
