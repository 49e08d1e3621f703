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

use http::header::{HeaderMap, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, USER_AGENT};
use http::Version;

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
}

/// Accepts or refuses a request head.
pub fn check(version: Version, headers: &HeaderMap) -> Result<(), FramingError> {
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
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Err(FramingError::SeveralHosts),
        (None, _) if version == Version::HTTP_11 => Err(FramingError::MissingHost),
        _ => Ok(()),
    }
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
        for (version, pairs, want) in rows {
            assert_eq!(check(*version, &head(pairs)), *want, "{pairs:?}");
        }
    }
}
