//! Checks a parsed request head for framing that two HTTP implementations
//! could read differently (request smuggling), before anything is
//! forwarded.
//!
//! hyper's parser already refuses most malformed heads (obs-fold, white
//! space before the colon, control bytes in values, conflicting
//! Content-Lengths, unknown transfer codings). What it accepts but an
//! upstream might read otherwise is refused here, with 400 and the
//! connection closed: Transfer-Encoding together with Content-Length,
//! Transfer-Encoding other than exactly one `chunked`, several Host headers,
//! an HTTP/1.1 request without Host, and several User-Agent fields.
//! crawlgate then re-frames what it forwards, so the upstream never sees
//! the client's framing headers.
//!
//! Several User-Agent fields are refused because the classifier reads one
//! value while PHP reads another: Apache joins the fields with `, `,
//! php-fpm behind nginx keeps the last one. A browser value followed by
//! `Googlebot` would pass crawlgate as a human and reach an application
//! that sees a robot. No browser or crawler sends two; 400 is the one
//! answer that cannot be read two ways.
//!
//! The host asked for (the Host header, the authority of an absolute-form
//! request-target, HTTP/2's `:authority`) must be a host name, an IPv4
//! address or a bracketed IPv6 literal, with an optional port 1-65535:
//! [`crate::canonical::split_authority`], the same rule the canonical
//! redirect and robots.txt's `Sitemap:` line apply to the host they write.
//! PHP takes `HTTP_HOST` (and crawlgate's `X-Forwarded-Host`) as given and
//! builds links, redirects and cache keys from it, so `example.com/evil`,
//! `evil.com@example.com` or `a.com, b.com` never reach it.
//!
//! [`head_len`] is the size of a request head as `limits.max_header_bytes`
//! counts it, the same way for HTTP/1 and HTTP/2.

use http::header::{HeaderMap, HeaderValue, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, USER_AGENT};
use http::{Method, Uri, Version};

use crate::canonical::split_authority;

/// Why a request head is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    /// Both Transfer-Encoding and Content-Length.
    #[error("both Transfer-Encoding and Content-Length")]
    LengthAndChunked,
    /// A Transfer-Encoding other than one `chunked`.
    #[error("a Transfer-Encoding other than a single `chunked`")]
    TransferCoding,
    /// More than one Host header.
    #[error("more than one Host header")]
    SeveralHosts,
    /// HTTP/1.1 without Host.
    #[error("HTTP/1.1 request without Host")]
    MissingHost,
    /// More than one User-Agent field.
    #[error("more than one User-Agent header")]
    SeveralUserAgents,
    /// A Host, `:authority` or request-target authority that is not a host
    /// with an optional port.
    #[error("a Host that is not a host name, IP address or [IPv6] with an optional port")]
    InvalidHost,
}

/// Accepts or refuses a request head: its version, request-target and
/// header fields.
pub fn check(version: Version, uri: &Uri, headers: &HeaderMap) -> Result<(), FramingError> {
    let mut codings = headers.get_all(TRANSFER_ENCODING).iter();
    if let Some(first) = codings.next() {
        if headers.contains_key(CONTENT_LENGTH) {
            return Err(FramingError::LengthAndChunked);
        }
        let chunked = first
            .as_bytes()
            .trim_ascii()
            .eq_ignore_ascii_case(b"chunked");
        if !chunked || codings.next().is_some() {
            return Err(FramingError::TransferCoding);
        }
    }
    let mut agents = headers.get_all(USER_AGENT).iter();
    if agents.next().is_some() && agents.next().is_some() {
        return Err(FramingError::SeveralUserAgents);
    }
    let mut hosts = headers.get_all(HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return Err(FramingError::SeveralHosts),
        (None, _) if version == Version::HTTP_11 => return Err(FramingError::MissingHost),
        (host, _) => host,
    };
    // Both when both came: the upstream is sent the one, and the other
    // could still be read by something on the way.
    let valid = |authority: &[u8]| {
        std::str::from_utf8(authority).is_ok_and(|a| split_authority(a).is_some())
    };
    if host.is_some_and(|h| !valid(h.as_bytes()))
        || uri
            .authority()
            .is_some_and(|a| !valid(a.as_str().as_bytes()))
    {
        return Err(FramingError::InvalidHost);
    }
    Ok(())
}

/// The size of a request head as `limits.max_header_bytes` counts it: the
/// head written as HTTP/1.1 would carry it, `METHOD target HTTP/1.1` and
/// CRLF, each header field as `name: value` and CRLF, and the blank line.
/// For an HTTP/1 head sent in that form (one space after the colon, CRLF
/// line ends) it is the number of bytes received; white space around a
/// value is not counted. Over HTTP/2 the pseudo-header fields count as
/// HTTP/1.1 carries them: `:method` and `:path` in the request line,
/// `:authority` as a Host field (`:scheme` does not count).
///
/// RFC 9113's header list size (what `SETTINGS_MAX_HEADER_LIST_SIZE`
/// bounds) counts 32 bytes per field instead of the 4 of `: ` and CRLF,
/// and the pseudo-header fields by their names: for a head of `n` regular
/// fields it is at most this length plus `28 * n + 140`
/// ([`h2_list_size_bound`]).
pub fn head_len(method: &Method, uri: &Uri, version: Version, headers: &HeaderMap) -> usize {
    let path = uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    let authority = uri.authority().map_or(0, |a| a.as_str().len());
    let target = if version == Version::HTTP_2 {
        // `host: ` … CRLF, for `:authority`.
        path + uri.authority().map_or(0, |_| authority + 8)
    } else {
        // Origin form, or absolute form (`scheme://authority/path`).
        uri.scheme_str().map_or(0, |s| s.len() + 3) + authority + path
    };
    // `METHOD SP target SP HTTP/1.1 CRLF`, the fields, CRLF.
    let line = method.as_str().len() + 1 + target + 1 + 8 + 2;
    let fields: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    line + fields + 2
}

/// An upper bound of RFC 9113's header list size of an HTTP/2 request
/// whose [`head_len`] is at most `max_len` and that has at most `fields`
/// regular header fields: 32 instead of 4 bytes per field, and the
/// pseudo-header fields (`:method`, `:scheme`, `:path`, `:authority`) at
/// 157 bytes plus their values, where `head_len` counts 22 plus their
/// values but `:scheme`'s (5 bytes at most, `https`).
pub fn h2_list_size_bound(max_len: usize, fields: usize) -> usize {
    max_len
        .saturating_add(fields.saturating_mul(28))
        .saturating_add(140)
}

/// The host asked for: the request-target's authority (absolute form), or
/// else the Host header, when it is text.
pub fn authority<'a>(uri: &'a Uri, host: Option<&'a HeaderValue>) -> Option<&'a str> {
    uri.authority()
        .map(|a| a.as_str())
        .or_else(|| host.and_then(|h| h.to_str().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                http::header::HeaderValue::from_str(v).expect("value"),
            );
        }
        map
    }

    /// (version, headers, verdict)
    type Row<'a> = (Version, &'a [(&'a str, &'a str)], Result<(), FramingError>);

    #[test]
    fn table() {
        use FramingError::*;
        let v11 = Version::HTTP_11;
        let rows: &[Row<'_>] = &[
            (v11, &[("host", "x")], Ok(())),
            (v11, &[("host", "x"), ("content-length", "5")], Ok(())),
            (
                v11,
                &[("host", "x"), ("transfer-encoding", "chunked")],
                Ok(()),
            ),
            (
                v11,
                &[("host", "x"), ("transfer-encoding", " Chunked ")],
                Ok(()),
            ),
            (
                v11,
                &[
                    ("host", "x"),
                    ("transfer-encoding", "chunked"),
                    ("content-length", "5"),
                ],
                Err(LengthAndChunked),
            ),
            (
                v11,
                &[("host", "x"), ("transfer-encoding", "gzip, chunked")],
                Err(TransferCoding),
            ),
            (
                v11,
                &[
                    ("host", "x"),
                    ("transfer-encoding", "chunked"),
                    ("transfer-encoding", "chunked"),
                ],
                Err(TransferCoding),
            ),
            (
                v11,
                &[("host", "x"), ("transfer-encoding", "identity")],
                Err(TransferCoding),
            ),
            (v11, &[("host", "x"), ("host", "y")], Err(SeveralHosts)),
            (v11, &[], Err(MissingHost)),
            (
                v11,
                &[("host", "x"), ("user-agent", "a"), ("user-agent", "b")],
                Err(SeveralUserAgents),
            ),
            (
                Version::HTTP_2,
                &[("user-agent", "a"), ("user-agent", "")],
                Err(SeveralUserAgents),
            ),
            (v11, &[("host", "x"), ("user-agent", "")], Ok(())),
            (Version::HTTP_10, &[], Ok(())),
        ];
        let origin = Uri::from_static("/");
        for (version, pairs, want) in rows {
            assert_eq!(check(*version, &origin, &head(pairs)), *want, "{pairs:?}");
        }
    }

    /// Issue 25.5: what a Host may be, as a Host header, as the authority
    /// of an absolute-form target and as HTTP/2's `:authority`.
    #[test]
    fn hosts() {
        let good = [
            "example.com",
            "example.com:8080",
            "Example.COM.",
            "Example.COM.:443",
            "www.example.com:1",
            "www.example.com:65535",
            "example.com:08080",
            "localhost",
            "127.0.0.1",
            "127.0.0.1:8080",
            "[::1]",
            "[::1]:8080",
            "[2001:db8::7]:443",
            "[::ffff:192.0.2.1]",
            "xn--bcher-kva.example",
            "my_host.example.com",
            "a-b.c-d.example",
            "1.2.3.4.5",
        ];
        let long_label = format!("{}.com", "a".repeat(64));
        let long_name = format!("{}.com", vec!["a".repeat(63); 4].join("."));
        let bad = [
            "example.com/evil",
            "exa mple.com",
            "evil.com@example.com",
            "www.example.com:99999",
            "www.example.com:65536",
            "www.example.com:0",
            "www.example.com:",
            "www.example.com:+80",
            "www.example.com:80:80",
            "example.com, www.evil.com",
            "example.com,www.evil.com",
            "example.com;x",
            "ex%61mple.com",
            "example.com!",
            "example.com~",
            "exa'mple.com",
            "example..com",
            ".example.com",
            "example.com..",
            "",
            ":80",
            "[::1",
            "[::1]x",
            "[::1]:",
            "[::1]:0",
            "[:::1]",
            "[1.2.3.4]",
            "[fe80::1%25eth0]",
            "[v1.x]",
            "::1",
            "b\u{fc}cher.example",
            long_label.as_str(),
            long_name.as_str(),
        ];
        let v11 = Version::HTTP_11;
        let origin = Uri::from_static("/");
        for host in good {
            let headers = head(&[("host", host)]);
            assert_eq!(check(v11, &origin, &headers), Ok(()), "{host:?}");
        }
        for host in bad {
            let mut headers = HeaderMap::new();
            headers.insert(
                HOST,
                http::HeaderValue::from_bytes(host.as_bytes()).expect("value"),
            );
            let verdict = check(v11, &origin, &headers);
            assert_eq!(verdict, Err(FramingError::InvalidHost), "{host:?}");
        }
        // The request-target's authority counts too, whatever the Host
        // says; so does HTTP/2's `:authority` (hyper's URI).
        let host = head(&[("host", "example.com")]);
        for (version, target) in [
            (v11, "http://evil.com@example.com/"),
            (v11, "http://example.com:99999/"),
            (Version::HTTP_2, "https://example.com:0/"),
            (Version::HTTP_2, "https://evil.com@example.com/"),
        ] {
            let uri: Uri = target.parse().expect("uri");
            let verdict = check(version, &uri, &host);
            assert_eq!(verdict, Err(FramingError::InvalidHost), "{target}");
        }
        let uri = Uri::from_static("https://example.com:8443/a");
        assert_eq!(check(Version::HTTP_2, &uri, &HeaderMap::new()), Ok(()));
        let hostile = head(&[("host", "evil.com@example.com")]);
        assert_eq!(
            check(Version::HTTP_2, &uri, &hostile),
            Err(FramingError::InvalidHost)
        );
    }

    /// `head_len` is the byte count of an HTTP/1.1 head sent in the usual
    /// form, and the same for the same request over HTTP/2; RFC 9113's
    /// list size stays within `h2_list_size_bound`.
    #[test]
    fn head_len_counts_what_was_sent() {
        let fields = [("host", "example.com"), ("user-agent", "x"), ("x-pad", "")];
        let raw = "GET /a?b=c HTTP/1.1\r\nhost: example.com\r\nuser-agent: x\r\nx-pad: \r\n\r\n";
        let h1 = head_len(
            &Method::GET,
            &Uri::from_static("/a?b=c"),
            Version::HTTP_11,
            &head(&fields),
        );
        assert_eq!(h1, raw.len());
        let absolute = "GET http://example.com/a?b=c HTTP/1.1\r\nhost: example.com\r\n\r\n";
        let uri = Uri::from_static("http://example.com/a?b=c");
        let h1 = head_len(&Method::GET, &uri, Version::HTTP_11, &head(&fields[..1]));
        assert_eq!(h1, absolute.len());
        // HTTP/2: `:authority` in place of the Host field.
        let uri = Uri::from_static("https://example.com/a?b=c");
        let h2 = head_len(&Method::GET, &uri, Version::HTTP_2, &head(&fields[1..]));
        assert_eq!(h2, raw.len());
        // RFC 9113 §4.3.1: name + value + 32 per field, pseudo-fields too.
        let rfc = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/a?b=c"),
            (":authority", "example.com"),
            ("user-agent", "x"),
            ("x-pad", ""),
        ]
        .iter()
        .map(|(n, v)| n.len() + v.len() + 32)
        .sum::<usize>();
        assert_eq!(rfc, h2_list_size_bound(h2, 2));
    }
}
