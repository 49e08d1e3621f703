//! What one request was and what happened to it: the [`Outcome`] record
//! that the metrics count and the access log writes, and the
//! [`RequestLine`] only the log shows. Values only; [`crate::observe`]
//! finishes a record and hands it on.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use http::header::{HeaderValue, HOST, REFERER, USER_AGENT};
use http::{Method, Request, StatusCode, Uri, Version};

use crate::classify::{ClassId, Reason, UaClass};
use crate::metrics::Side;
use crate::route::Route;
use crate::verify::Identity;

/// Longest path, host or request-target written to the access log, in
/// bytes.
pub const LOG_FIELD_MAX: usize = 256;

/// The request as the access log shows it (kept only when it is on).
///
/// Its target, host, User-Agent and Referer are copied into one small
/// buffer of its own: a record queued for the log's thread must not hold
/// on to the connection's read buffer its request was parsed from (8 KiB
/// or more each, for up to [`crate::access_log::QUEUE_LINES`] records
/// while a slow disk holds the log up), nor make that buffer shared, so
/// that the connection reads its next request into a new one.
#[derive(Debug)]
pub struct RequestLine {
    /// When the request arrived (wall clock, for the log's timestamp).
    pub time: SystemTime,
    /// The client: the peer, or the address a trusted proxy forwarded for.
    pub client: IpAddr,
    /// The method.
    pub method: Method,
    /// `scheme://authority` of an absolute-form target, path and query,
    /// host, User-Agent and Referer, one after the other.
    text: Box<[u8]>,
    /// Where each part ends in `text`: the absolute form's prefix, the
    /// path, the `?query` (empty when there is none), the host, the
    /// User-Agent, the Referer.
    ends: [u32; 6],
    /// Which of host, User-Agent and Referer were there (an empty value
    /// is not an absent one).
    present: [bool; 3],
}

impl RequestLine {
    /// The parts of `req` the log shows, from `client`.
    pub fn of<B>(req: &Request<B>, client: IpAddr) -> Self {
        let headers = req.headers();
        Self::new(
            SystemTime::now(),
            client,
            req.method().clone(),
            req.uri(),
            headers.get(HOST),
            headers.get(USER_AGENT),
            headers.get(REFERER),
        )
    }

    /// The record of a request of `method` for `uri` with these fields.
    pub fn new(
        time: SystemTime,
        client: IpAddr,
        method: Method,
        uri: &Uri,
        host: Option<&HeaderValue>,
        user_agent: Option<&HeaderValue>,
        referer: Option<&HeaderValue>,
    ) -> Self {
        let host = crate::framing::authority(uri, host).map(str::as_bytes);
        let user_agent = user_agent.map(HeaderValue::as_bytes);
        let referer = referer.map(HeaderValue::as_bytes);
        let (scheme, authority) = (uri.scheme_str(), uri.authority());
        let query = uri.query();
        let pieces: [&[&[u8]]; 6] = [
            match (scheme, authority) {
                (Some(scheme), Some(authority)) => {
                    &[scheme.as_bytes(), b"://", authority.as_str().as_bytes()]
                }
                _ => &[],
            },
            &[uri.path().as_bytes()],
            match query {
                Some(query) => &[b"?", query.as_bytes()],
                None => &[],
            },
            &[host.unwrap_or_default()],
            &[user_agent.unwrap_or_default()],
            &[referer.unwrap_or_default()],
        ];
        let len = pieces.iter().flat_map(|p| p.iter()).map(|p| p.len()).sum();
        let mut text = Vec::with_capacity(len);
        let mut ends = [0u32; 6];
        for (end, part) in ends.iter_mut().zip(pieces) {
            for piece in part {
                text.extend_from_slice(piece);
            }
            // A request head is at most a few hundred KiB.
            *end = u32::try_from(text.len()).unwrap_or(u32::MAX);
        }
        Self {
            time,
            client,
            method,
            text: text.into_boxed_slice(),
            ends,
            present: [host.is_some(), user_agent.is_some(), referer.is_some()],
        }
    }

    /// Part `i` of `text` (see `ends`).
    fn part(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// Part `i` as text: the target's parts are ASCII (`http::Uri` holds
    /// nothing else), the host is a `str` already.
    fn part_str(&self, i: usize) -> &str {
        std::str::from_utf8(self.part(i)).unwrap_or_default()
    }

    /// `scheme://authority` when the target was in absolute form.
    pub fn absolute_prefix(&self) -> Option<&str> {
        Some(self.part_str(0)).filter(|p| !p.is_empty())
    }

    /// The target's path.
    pub fn path(&self) -> &str {
        self.part_str(1)
    }

    /// The target's query, without its `?`.
    pub fn query(&self) -> Option<&str> {
        self.part_str(2).strip_prefix('?')
    }

    /// The path and `?query` as sent; `/` for a target that has neither
    /// (authority form), as the log has always written it.
    pub fn path_and_query(&self) -> &str {
        let start = self.ends[0] as usize;
        match std::str::from_utf8(&self.text[start..self.ends[2] as usize]) {
            Ok("") | Err(_) => "/",
            Ok(pq) => pq,
        }
    }

    /// The host asked for: the request-target's authority, or the Host
    /// header when it is text.
    pub fn host(&self) -> Option<&str> {
        self.present[0].then(|| self.part_str(3))
    }

    /// The User-Agent header.
    pub fn user_agent(&self) -> Option<&[u8]> {
        self.present[1].then(|| self.part(4))
    }

    /// The Referer header.
    pub fn referer(&self) -> Option<&[u8]> {
        self.present[2].then(|| self.part(5))
    }
}

/// One request's outcome: every field the access log and the metrics use
/// (what only the log shows is in [`RequestLine`], built only when the log
/// is on).
#[derive(Debug, Default)]
pub struct Outcome {
    /// The request, when the access log is on (boxed: the record travels
    /// with every response, and most of its size is this).
    pub request: Option<Box<RequestLine>>,
    /// The protocol version.
    pub version: Version,
    /// Over TLS.
    pub tls: bool,
    /// The User-Agent's class and the rule that decided (`None` when the
    /// request was refused before classification).
    pub verdict: Option<(UaClass, Reason)>,
    /// The request's class, as the decision, the class header and
    /// shedding took it ([`crate::classify::Classes::of`]): set with the
    /// verdict, then again once verification has spoken (a spoofed claim
    /// counts as `unknown` in the log and the metrics too). `None` when
    /// the request was refused before classification.
    pub class: Option<ClassId>,
    /// What was decided (in enforce mode, what was done).
    pub route: Route,
    /// The decision was not carried out: observe mode forwarded the
    /// request instead (`enforced` false in the log and the metrics).
    pub not_enforced: bool,
    /// The status sent; `None` when the request ended before it had an
    /// answer (the access log says 0).
    pub status: Option<StatusCode>,
    /// Request body bytes passed upstream (0 when not forwarded: a body
    /// is never read for a synthetic answer).
    pub bytes_in: u64,
    /// Response body bytes sent.
    pub bytes_out: u64,
    /// Until the upstream's response head, when forwarded.
    pub upstream_time: Option<Duration>,
    /// Until the response body was done.
    pub total_time: Duration,
    /// Why the exchange failed, and on which side.
    pub error: Option<(&'static str, Side)>,
    /// What verification found for a robot's crawler claim.
    pub identity: Option<Identity>,
}

/// Cuts a field for the log at a character boundary.
pub fn truncate(s: &str) -> &str {
    if s.len() <= LOG_FIELD_MAX {
        return s;
    }
    let mut end = LOG_FIELD_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record shows what the request's own `Uri` and fields say:
    /// the target as sent (absolute form with its authority), its path
    /// and query, the host asked for, and the two fields, an empty one
    /// kept apart from an absent one.
    #[test]
    fn a_request_line_shows_what_the_request_said() {
        let value = |v: &'static str| HeaderValue::from_static(v);
        for target in [
            "/",
            "/a/b?c=d&e",
            "/a?",
            "http://Example.com:8080/p?q=1",
            "http://example.com",
            "*",
            "example.com:443",
        ] {
            let uri: Uri = target.parse().expect("uri");
            for (host, ua, referer) in [
                (None, None, None),
                (
                    Some(value("h.test")),
                    Some(value("")),
                    Some(value("https://r/")),
                ),
                (
                    Some(value("h.test")),
                    Some(value("Mozilla/5.0 (X11)")),
                    None,
                ),
            ] {
                let line = RequestLine::new(
                    SystemTime::UNIX_EPOCH,
                    IpAddr::from([192, 0, 2, 1]),
                    Method::GET,
                    &uri,
                    host.as_ref(),
                    ua.as_ref(),
                    referer.as_ref(),
                );
                let absolute = match (uri.scheme_str(), uri.authority()) {
                    (Some(s), Some(a)) => Some(format!("{s}://{a}")),
                    _ => None,
                };
                assert_eq!(
                    line.absolute_prefix().map(str::to_owned),
                    absolute,
                    "{target}"
                );
                let pq = uri.path_and_query().map_or("/", |pq| pq.as_str());
                assert_eq!(line.path_and_query(), pq, "{target}");
                assert_eq!(line.path(), uri.path(), "{target}");
                assert_eq!(line.query(), uri.query(), "{target}");
                assert_eq!(
                    line.host(),
                    crate::framing::authority(&uri, host.as_ref()),
                    "{target}"
                );
                assert_eq!(line.user_agent(), ua.as_ref().map(HeaderValue::as_bytes));
                assert_eq!(line.referer(), referer.as_ref().map(HeaderValue::as_bytes));
            }
        }
    }
}
