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

/// The request as the access log shows it (kept only when it is on; every
/// field is a reference-counted view of what hyper parsed, not a copy).
#[derive(Debug)]
pub struct RequestLine {
    /// When the request arrived (wall clock, for the log's timestamp).
    pub time: SystemTime,
    /// The client: the peer, or the address a trusted proxy forwarded for.
    pub client: IpAddr,
    /// The method.
    pub method: Method,
    /// The request-target.
    pub uri: Uri,
    /// The Host header.
    pub host: Option<HeaderValue>,
    /// The User-Agent header.
    pub user_agent: Option<HeaderValue>,
    /// The Referer header.
    pub referer: Option<HeaderValue>,
}

impl RequestLine {
    /// The parts of `req` the log shows, from `client`.
    pub fn of<B>(req: &Request<B>, client: IpAddr) -> Self {
        let headers = req.headers();
        Self {
            time: SystemTime::now(),
            client,
            method: req.method().clone(),
            uri: req.uri().clone(),
            host: headers.get(HOST).cloned(),
            user_agent: headers.get(USER_AGENT).cloned(),
            referer: headers.get(REFERER).cloned(),
        }
    }

    /// The host asked for: the request-target's authority, or the Host
    /// header when it is text.
    pub fn host(&self) -> Option<&str> {
        crate::framing::authority(&self.uri, self.host.as_ref())
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
