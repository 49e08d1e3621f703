//! The responses crawlgate writes itself, and the one body type shared with
//! proxied responses.
//!
//! Synthetic bodies are static or prebuilt [`Bytes`]; nothing here formats
//! per request except what the caller passes in (a Location, a robots body).

use std::time::SystemTime;

use bytes::Bytes;
use http::header::{
    HeaderValue, CACHE_CONTROL, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, ETAG, LAST_MODIFIED,
    LOCATION, RETRY_AFTER,
};
use http::{Response, StatusCode};
use http_body_util::{Either, Full};

use crate::proxy::body::ResponseBody;
use crate::proxy::ProxyError;
use crate::robots::Representation;
use crate::sitemap::serve::{Content, FileBody, Kind, Opened};
use crate::validators::http_date;

/// The body of every response: streamed from the upstream, ours in full,
/// or a sitemap file streamed from disk.
pub type Body = Either<ResponseBody, Either<Full<Bytes>, FileBody>>;

const TEXT: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");
const CLOSE: HeaderValue = HeaderValue::from_static("close");

/// A response of `status` with all of `body` (no headers yet).
pub fn full(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut res = Response::new(Either::Right(Either::Left(Full::new(body))));
    *res.status_mut() = status;
    res
}

/// A response with a fixed text body.
pub fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut res = full(status, Bytes::from_static(body.as_bytes()));
    res.headers_mut().insert(CONTENT_TYPE, TEXT);
    res.headers_mut().insert(CACHE_CONTROL, NO_STORE);
    res
}

/// 403 for a robot asking for an action URL.
pub fn blocked() -> Response<Body> {
    text(
        StatusCode::FORBIDDEN,
        "403 Forbidden: automated clients may not follow action links.\n",
    )
}

/// 403 for a crawler claim its operator's own method refutes, with
/// `[verify] spoofed = "block"`.
pub fn spoofed() -> Response<Body> {
    text(
        StatusCode::FORBIDDEN,
        "403 Forbidden: this client claims to be a crawler it could not be verified as.\n",
    )
}

/// 403 for an AI crawler of a kind the site refuses (`[ai] enforce`).
pub fn ai_refused(kind: crate::config::AiKind) -> Response<Body> {
    let body = match kind {
        crate::config::AiKind::Training => {
            "403 Forbidden: this site does not allow AI training crawlers (see /robots.txt).\n"
        }
        crate::config::AiKind::Search => {
            "403 Forbidden: this site does not allow AI search crawlers (see /robots.txt).\n"
        }
        crate::config::AiKind::UserFetch => {
            "403 Forbidden: this site does not allow AI assistants to fetch its pages (see /robots.txt).\n"
        }
    };
    text(StatusCode::FORBIDDEN, body)
}

/// 503 or 429 for a robot shed under upstream pressure, with
/// `Retry-After` (seconds).
pub fn shed(status: StatusCode, retry_after: HeaderValue) -> Response<Body> {
    let body = if status == StatusCode::TOO_MANY_REQUESTS {
        "429 Too Many Requests: the site is busy; automated clients, please retry later.\n"
    } else {
        "503 Service Unavailable: the site is busy; automated clients, please retry later.\n"
    };
    let mut res = text(status, body);
    res.headers_mut().insert(RETRY_AFTER, retry_after);
    res
}

/// A redirect to `location` (already validated as a header value).
pub fn redirect(status: StatusCode, location: HeaderValue) -> Response<Body> {
    let mut res = full(status, Bytes::new());
    res.headers_mut().insert(LOCATION, location);
    res
}

/// robots.txt, with its validators.
pub fn robots(robots: Representation) -> Response<Body> {
    let mut res = full(StatusCode::OK, robots.body);
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, TEXT);
    headers.insert(ETAG, robots.etag);
    headers.insert(LAST_MODIFIED, http_date(robots.last_modified));
    res
}

/// 304 for a conditional request whose validators still match: the
/// validators again, no body.
pub fn not_modified(etag: HeaderValue, last_modified: Option<SystemTime>) -> Response<Body> {
    let mut res = full(StatusCode::NOT_MODIFIED, Bytes::new());
    res.headers_mut().insert(ETAG, etag);
    if let Some(time) = last_modified {
        res.headers_mut().insert(LAST_MODIFIED, http_date(time));
    }
    res
}

/// A sitemap file, streamed or as read (no body for HEAD).
pub fn sitemap_file(
    opened: Opened,
    kind: Kind,
    cache_control: HeaderValue,
    head: bool,
) -> Response<Body> {
    let len = opened.len;
    let body = match opened.content {
        _ if head => Either::Left(Full::new(Bytes::new())),
        Content::Read(bytes) => Either::Left(Full::new(bytes)),
        Content::File(file) => Either::Right(FileBody::new(file, len)),
    };
    let mut res = Response::new(Either::Right(body));
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, kind.content_type());
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    headers.insert(ETAG, opened.etag);
    headers.insert(LAST_MODIFIED, http_date(opened.modified));
    headers.insert(CACHE_CONTROL, cache_control);
    res
}

/// 304 for a sitemap file whose validators still match.
pub fn sitemap_not_modified(opened: Opened, cache_control: HeaderValue) -> Response<Body> {
    let mut res = not_modified(opened.etag, Some(opened.modified));
    res.headers_mut().insert(CACHE_CONTROL, cache_control);
    res
}

/// 404: no such sitemap file (crawlgate answers for the sitemap folder).
pub fn not_found() -> Response<Body> {
    text(StatusCode::NOT_FOUND, "404 Not Found\n")
}

/// 500: a file that should be served could not be read.
pub fn internal_error() -> Response<Body> {
    text(
        StatusCode::INTERNAL_SERVER_ERROR,
        "500 Internal Server Error\n",
    )
}

/// 502: the upstream could not be reached or answered wrongly.
pub fn bad_gateway() -> Response<Body> {
    text(
        StatusCode::BAD_GATEWAY,
        "502 Bad Gateway: the site is not answering.\n",
    )
}

/// 504: the upstream did not answer in time.
pub fn gateway_timeout() -> Response<Body> {
    text(
        StatusCode::GATEWAY_TIMEOUT,
        "504 Gateway Timeout: the site did not answer in time.\n",
    )
}

/// The answer to a request that could not be forwarded: the text of the
/// one status its error has ([`ProxyError::status`]), and the connection
/// closed when the client's request was at fault.
pub fn forward_failed(err: &ProxyError) -> Response<Body> {
    let res = match err.status() {
        StatusCode::GATEWAY_TIMEOUT => gateway_timeout(),
        StatusCode::BAD_REQUEST => bad_request(),
        StatusCode::PAYLOAD_TOO_LARGE => payload_too_large(),
        _ => bad_gateway(),
    };
    if err.closes_connection() {
        close(res)
    } else {
        res
    }
}

/// 400 for a request crawlgate cannot route.
pub fn bad_request() -> Response<Body> {
    text(StatusCode::BAD_REQUEST, "400 Bad Request\n")
}

/// 413 for a request body over `limits.max_body_bytes`.
pub fn payload_too_large() -> Response<Body> {
    text(StatusCode::PAYLOAD_TOO_LARGE, "413 Content Too Large\n")
}

/// 431 for a request head over `limits.max_header_bytes`.
pub fn header_fields_too_large() -> Response<Body> {
    text(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "431 Request Header Fields Too Large\n",
    )
}

/// 414 for a request-target over `limits.max_uri_bytes`.
pub fn uri_too_long() -> Response<Body> {
    text(StatusCode::URI_TOO_LONG, "414 URI Too Long\n")
}

/// 405 for methods a reverse proxy does not serve (CONNECT).
pub fn method_not_allowed() -> Response<Body> {
    text(StatusCode::METHOD_NOT_ALLOWED, "405 Method Not Allowed\n")
}

/// Marks an HTTP/1 response to close the connection: used when answering
/// before the request body was read, so an unread body cannot be taken for
/// the next request.
pub fn close(mut res: Response<Body>) -> Response<Body> {
    res.headers_mut().insert(CONNECTION, CLOSE);
    res
}
