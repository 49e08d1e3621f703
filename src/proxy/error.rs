//! Why a request could not be forwarded ([`ProxyError`]): the one status
//! each answers with, its name for logs and metrics and, for the
//! upstream's failures, its cause in an operator's words.

use std::time::Duration;

use http::StatusCode;

/// Why a request could not be forwarded. Each maps to one status.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// No connection to the upstream could be made (refused, unreachable,
    /// connect timeout): 502.
    #[error("cannot connect to the upstream")]
    Connect(#[source] BodyError),
    /// The upstream did not send response headers in time: 504.
    #[error("the upstream did not answer within {0:?}")]
    Timeout(Duration),
    /// The exchange failed after connecting (reset, malformed response,
    /// closed early): 502.
    #[error("the upstream exchange failed")]
    Upstream(#[source] BodyError),
    /// The request-target cannot be expressed as an upstream URI: 400.
    #[error("the request target cannot be forwarded")]
    Target,
    /// The client's request body failed (bad chunk, early close): 400.
    #[error("the client's request body failed")]
    ClientBody(#[source] BodyError),
    /// The request body grew past `limits.max_body_bytes`: 413.
    #[error("the request body is over the limit")]
    BodyTooLarge,
    /// The upstream switched protocols (101) for a request that did not
    /// ask to: 502.
    #[error("the upstream answered 101 to a request that asked for no upgrade")]
    UnaskedSwitch,
    /// The response body, read whole before answering ([`fill`](super::body::fill)),
    /// failed (reset, closed before its `Content-Length`): 502.
    #[error("the upstream response body failed")]
    Body(#[source] BodyError),
    /// The response body, read whole before answering, paused longer than
    /// `limits.upstream_body_idle_timeout`: 504.
    #[error("the upstream response body stalled for {0:?}")]
    BodyStalled(Duration),
}

impl ProxyError {
    /// The status the client is answered with: 502 when the upstream
    /// failed, 504 when it was too slow, 400 or 413 when the client's
    /// request was at fault.
    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::Connect(_)
            | ProxyError::Upstream(_)
            | ProxyError::UnaskedSwitch
            | ProxyError::Body(_) => StatusCode::BAD_GATEWAY,
            ProxyError::Timeout(_) | ProxyError::BodyStalled(_) => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::Target | ProxyError::ClientBody(_) => StatusCode::BAD_REQUEST,
            ProxyError::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        }
    }

    /// Whether the client's connection is closed after the answer: when
    /// its request is at fault (its body may be left part read).
    pub fn closes_connection(&self) -> bool {
        matches!(
            self,
            ProxyError::Target | ProxyError::ClientBody(_) | ProxyError::BodyTooLarge
        )
    }

    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ProxyError::Connect(_) => "connect",
            ProxyError::Timeout(_) => "timeout",
            ProxyError::Upstream(_) => "upstream",
            ProxyError::Target => "target",
            ProxyError::ClientBody(_) => "client-body",
            ProxyError::BodyTooLarge => "body-too-large",
            ProxyError::UnaskedSwitch => "unasked-switch",
            ProxyError::Body(_) => "body",
            ProxyError::BodyStalled(_) => "body-timeout",
        }
    }
}

impl ProxyError {
    /// What went wrong with the upstream, in an operator's words, for the
    /// warning a 502 or 504 logs; `None` when the client is at fault.
    pub fn upstream_cause(&self) -> Option<&'static str> {
        use std::io::ErrorKind;
        let io_kind = |err: &BodyError| {
            sources(&**err)
                .find_map(|e| e.downcast_ref::<std::io::Error>().map(std::io::Error::kind))
        };
        // hyper's errors expose no kind for some causes: their text says it.
        let says =
            |err: &BodyError, phrase: &str| sources(&**err).any(|e| e.to_string().contains(phrase));
        match self {
            ProxyError::Connect(err) => Some(match io_kind(err) {
                Some(ErrorKind::ConnectionRefused) => "connection refused",
                Some(ErrorKind::TimedOut) => "connect timeout",
                Some(ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable) => "unreachable",
                _ if says(err, "dns error") => "name not resolved",
                _ if says(err, "timed out") => "connect timeout",
                _ => "connect failed",
            }),
            ProxyError::Timeout(_) => Some("response timeout"),
            ProxyError::Upstream(err) => Some(match io_kind(err) {
                Some(ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => "connection reset",
                _ if stale_connection(&**err) => "closed before a complete response",
                _ if sources(&**err).any(|e| e.is::<crate::http1::ResponseError>()) => {
                    "invalid response"
                }
                _ if says(err, "parse") || says(err, "invalid") => "invalid response",
                _ => "exchange failed",
            }),
            ProxyError::UnaskedSwitch => Some("switched protocols unasked"),
            ProxyError::Body(err) => Some(match io_kind(err) {
                Some(ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => "connection reset",
                _ => "response body cut short",
            }),
            ProxyError::BodyStalled(_) => Some("response body stalled"),
            ProxyError::Target | ProxyError::ClientBody(_) | ProxyError::BodyTooLarge => None,
        }
    }
}

/// `err` and its sources, outermost first.
fn sources<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err), |e| e.source())
}

/// Whether a failed exchange died on a connection the upstream had already
/// given up (closed or reset before any response byte): the case where a
/// retry on a fresh connection is safe for an idempotent request.
pub(super) fn stale_connection(err: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    sources(err).any(|e| {
        let hyper_says = e
            .downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_incomplete_message() || h.is_canceled() || h.is_closed());
        let io_says = e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof
            )
        });
        hyper_says || io_says || e.is::<super::conn::ClosedEarly>()
    })
}

/// The error a request or response body ends with.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Each error answers with one status; only the client's close the
    /// connection.
    #[test]
    fn each_error_has_one_status() {
        let second = Duration::from_secs(1);
        for (err, status, closes) in [
            (ProxyError::UnaskedSwitch, 502, false),
            (ProxyError::Body("cut".into()), 502, false),
            (ProxyError::Timeout(second), 504, false),
            (ProxyError::BodyStalled(second), 504, false),
            (ProxyError::Target, 400, true),
            (ProxyError::BodyTooLarge, 413, true),
        ] {
            assert_eq!(err.status().as_u16(), status, "{}", err.kind());
            assert_eq!(err.closes_connection(), closes, "{}", err.kind());
            assert_eq!(err.upstream_cause().is_some(), !closes, "{}", err.kind());
        }
    }
}
