//! HTTP/1.1 message heads read in place, and the framing of their bodies,
//! for crawlgate's own HTTP/1.1 connection layer.
//!
//! A head is parsed by `httparse` straight from the connection's read
//! buffer; what comes out is a [`RequestHead`] or [`ResponseHead`] of
//! offsets ([`Span`]s) into that buffer and a list of [`Field`]s the
//! caller keeps from one request to the next, so that parsing allocates
//! nothing once the list has grown to a head's size. Nothing is copied:
//! the decision reads the method, target and fields as borrowed slices,
//! and the upstream head is written by copying the client's field lines
//! that are kept.
//!
//! Parsing is strict where two HTTP implementations could read a request
//! differently (request smuggling), and refuses, where hyper's parser
//! accepted and crawlgate re-framed ([`crate::framing`]):
//!
//! * a line ended by a bare LF (httparse accepts it; a server that takes
//!   only CRLF reads the next field as part of this one);
//! * both Content-Length and Transfer-Encoding; more than one
//!   Content-Length, or one that is not 1 to 19 digits (as nginx: no
//!   comma lists, no repeats of the same value);
//! * a Transfer-Encoding other than one field of exactly `chunked`, and
//!   any Transfer-Encoding in an HTTP/1.0 request;
//! * obs-fold, white space before a colon or before the first field, and
//!   control bytes (httparse refuses them);
//! * and, as [`crate::framing::check`] does: several Host or User-Agent
//!   fields, an HTTP/1.1 request without Host, a Host or absolute-form
//!   authority that is not a host with an optional port.
//!
//! A request-target must be origin-form (`/…`), absolute-form
//! (`http://` or `https://` and an authority), `*` (OPTIONS only) or
//! authority-form (CONNECT only, refused later with 405), of visible
//! ASCII.
//!
//! An upstream's response head is read the same way, strict on its
//! framing ([`parse_response`]).
//!
//! [`chunked`] reads a chunked body as it passes, so that it is relayed
//! byte for byte and its end is known without decoding it into a copy.

use std::mem::MaybeUninit;

use crate::canonical::split_authority;

pub mod chunked;
mod response;
#[cfg(test)]
mod tests;

pub use response::{parse_response, ResponseError, ResponseHead};

/// The most header fields a head may have, whatever
/// `limits.max_headers` says: the parser's field table lives on the
/// stack while it runs.
pub const MAX_FIELDS: usize = 1024;

/// A set of field names seen at a glance: their lengths and first
/// letters, one bit each. A name that fails [`NameFilter::may_hold`] is
/// none of the set, in any case and with `_` for `-`; one that passes
/// must still be compared. Most of a browser's field names fail the
/// filters crawlgate keeps, and are then not compared name by name.
#[derive(Clone, Copy, Debug, Default)]
pub struct NameFilter {
    lengths: u64,
    firsts: u128,
}

impl NameFilter {
    /// The filter of `names` (lower case, shorter than 64 bytes, ASCII).
    pub fn of<'a>(names: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut filter = Self::default();
        for name in names {
            if let Some(&first) = name.first() {
                filter.lengths |= 1 << (name.len() & 63);
                filter.firsts |= 1 << (first & 127);
            }
        }
        filter
    }

    /// Whether `name` may be one of the set.
    pub fn may_hold(&self, name: &[u8]) -> bool {
        match name.first() {
            Some(&first) if name.len() < 64 && first < 128 => {
                self.lengths >> name.len() & 1 == 1
                    && self.firsts >> first.to_ascii_lowercase() & 1 == 1
            }
            _ => false,
        }
    }
}

/// A range of bytes in the buffer a head was parsed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The bytes of `buf` this span covers (empty when it is out of
    /// `buf`, which a span of the same buffer never is).
    pub fn of<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        buf.get(self.start as usize..self.end as usize)
            .unwrap_or_default()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Whether it covers no byte.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The span of `part`, a slice of `buf`.
    fn within(buf: &[u8], part: &[u8]) -> Span {
        let start = (part.as_ptr() as usize).saturating_sub(buf.as_ptr() as usize);
        Span {
            start: start as u32,
            end: (start + part.len()) as u32,
        }
    }
}

/// The fields the connection layer and the policy read by name, found
/// once while parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// `Host`.
    Host,
    /// `User-Agent`.
    UserAgent,
    /// `Content-Length`.
    ContentLength,
    /// `Transfer-Encoding`.
    TransferEncoding,
    /// `Connection`.
    Connection,
    /// `Upgrade`.
    Upgrade,
    /// `Expect`.
    Expect,
    /// Any other.
    Other,
}

impl Known {
    /// Which known field `name` is, in any case.
    pub fn of(name: &[u8]) -> Known {
        let is = |known: &[u8]| name.eq_ignore_ascii_case(known);
        match name.len() {
            4 if is(b"host") => Known::Host,
            6 if is(b"expect") => Known::Expect,
            7 if is(b"upgrade") => Known::Upgrade,
            10 if is(b"user-agent") => Known::UserAgent,
            10 if is(b"connection") => Known::Connection,
            14 if is(b"content-length") => Known::ContentLength,
            17 if is(b"transfer-encoding") => Known::TransferEncoding,
            _ => Known::Other,
        }
    }
}

/// One header field of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its name as sent.
    pub name: Span,
    /// Its value, without the white space around it.
    pub value: Span,
    /// The whole line as sent, from the name to its CRLF included: what
    /// is copied when the field is passed on.
    pub line: Span,
    /// Which known field it is.
    pub known: Known,
}

/// The HTTP/1 minor version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0.
    Http10,
    /// HTTP/1.1.
    Http11,
}

/// How a message's body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked, to the last chunk and the trailer section.
    Chunked,
    /// Until the connection closes (responses only).
    UntilClose,
}

/// What `Connection` (and the version) say about the connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionOptions {
    /// `close` was named.
    pub close: bool,
    /// `keep-alive` was named.
    pub keep_alive: bool,
    /// `upgrade` was named.
    pub upgrade: bool,
    /// Some other token was named (a field the sender wants dropped at
    /// this hop).
    pub other: bool,
}

impl ConnectionOptions {
    fn read(&mut self, value: &[u8]) {
        for token in value.split(|&b| b == b',') {
            let token = token.trim_ascii();
            if token.eq_ignore_ascii_case(b"close") {
                self.close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") {
                self.keep_alive = true;
            } else if token.eq_ignore_ascii_case(b"upgrade") {
                self.upgrade = true;
            } else if !token.is_empty() {
                self.other = true;
            }
        }
    }

    /// Whether a message of `version` with these options leaves the
    /// connection open for the next one.
    pub fn persists(&self, version: Version) -> bool {
        !self.close && (version == Version::Http11 || self.keep_alive)
    }
}

/// The form of a request-target (RFC 9112 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetForm {
    /// `/path?query`.
    Origin,
    /// `http://authority/path?query`; the authority is in
    /// [`RequestHead::authority`].
    Absolute,
    /// `*`, for OPTIONS.
    Asterisk,
    /// `host:port`, for CONNECT.
    Authority,
}

/// A parsed request head: spans into the buffer it was parsed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHead {
    /// Bytes of the head, up to and including the blank line: the body
    /// (or the next request) starts here.
    pub len: usize,
    /// The method.
    pub method: Span,
    /// The request-target as sent.
    pub target: Span,
    /// Its form.
    pub form: TargetForm,
    /// Path and query of the target (all of it in origin form, what
    /// follows the authority in absolute form, `*` or the authority in
    /// the other two), without a fragment a client sent.
    pub path_and_query: Span,
    /// The absolute form's authority.
    pub authority: Option<Span>,
    /// The version.
    pub version: Version,
    /// How the body is delimited.
    pub body: BodyFraming,
    /// The index of the Host field.
    pub host: Option<usize>,
    /// The index of the User-Agent field.
    pub user_agent: Option<usize>,
    /// What `Connection` says.
    pub connection: ConnectionOptions,
    /// An `Upgrade` field was sent.
    pub upgrade: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
}

impl RequestHead {
    /// The method's bytes.
    pub fn method<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        self.method.of(buf)
    }

    /// The path, without the query.
    pub fn path<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        let pq = self.path_and_query.of(buf);
        match pq.iter().position(|&b| b == b'?') {
            Some(q) => &pq[..q],
            None => pq,
        }
    }

    /// The query, without the `?`.
    pub fn query<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        let pq = self.path_and_query.of(buf);
        let q = pq.iter().position(|&b| b == b'?')?;
        Some(&pq[q + 1..])
    }

    /// The host asked for: the absolute form's authority, or else the
    /// Host field.
    pub fn authority<'a>(&self, buf: &'a [u8], fields: &[Field]) -> Option<&'a [u8]> {
        match (self.authority, self.host) {
            (Some(authority), _) => Some(authority.of(buf)),
            (None, Some(i)) => fields.get(i).map(|f| f.value.of(buf)),
            (None, None) => None,
        }
    }

    /// Whether the connection stays open after this request's exchange,
    /// as far as the request says.
    pub fn persists(&self) -> bool {
        self.connection.persists(self.version)
    }
}

/// Why a head is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// Not an HTTP/1 head (httparse refused it).
    #[error("malformed head: {0}")]
    Malformed(&'static str),
    /// A line ended by a bare LF.
    #[error("a line ended by a bare LF")]
    BareLf,
    /// More fields than allowed.
    #[error("too many header fields")]
    TooManyFields,
    /// The head is larger than allowed.
    #[error("head too large")]
    TooLarge,
    /// A version other than HTTP/1.0 and HTTP/1.1.
    #[error("unsupported HTTP version")]
    Version,
    /// Both Transfer-Encoding and Content-Length.
    #[error("both Transfer-Encoding and Content-Length")]
    LengthAndChunked,
    /// A Transfer-Encoding other than one field of `chunked`.
    #[error("a Transfer-Encoding other than a single `chunked`")]
    TransferCoding,
    /// A Content-Length that is not one field of 1 to 19 digits.
    #[error("a Content-Length that is not one field of 1 to 19 digits")]
    ContentLength,
    /// More than one Host field.
    #[error("more than one Host header")]
    SeveralHosts,
    /// HTTP/1.1 without Host.
    #[error("HTTP/1.1 request without Host")]
    MissingHost,
    /// More than one User-Agent field.
    #[error("more than one User-Agent header")]
    SeveralUserAgents,
    /// A Host or absolute-form authority that is not a host with an
    /// optional port.
    #[error("a Host that is not a host name, IP address or [IPv6] with an optional port")]
    InvalidHost,
    /// A request-target of no form its method allows.
    #[error("an invalid request-target")]
    Target,
}

impl HeadError {
    /// The status a client is answered with before the connection is
    /// closed.
    pub fn status(&self) -> u16 {
        match self {
            HeadError::TooManyFields | HeadError::TooLarge => 431,
            HeadError::Version => 505,
            _ => 400,
        }
    }
}

fn malformed(err: httparse::Error) -> HeadError {
    match err {
        httparse::Error::TooManyHeaders => HeadError::TooManyFields,
        httparse::Error::Version => HeadError::Version,
        httparse::Error::HeaderName => HeadError::Malformed("invalid header name"),
        httparse::Error::HeaderValue => HeadError::Malformed("invalid header value"),
        httparse::Error::NewLine => HeadError::Malformed("invalid line ending"),
        httparse::Error::Status => HeadError::Malformed("invalid status line"),
        httparse::Error::Token => HeadError::Malformed("invalid token"),
    }
}

/// Whether the request line at the start of `buf` is `method SP target
/// SP HTTP/d.d`: a version refused is then one this server does not
/// speak (505), not a malformed line (400, as `GET /a b HTTP/1.1`).
fn names_a_version(buf: &[u8]) -> bool {
    let line = buf
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (Some(_), Some(_), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    matches!(version, [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
        if major.is_ascii_digit() && minor.is_ascii_digit())
}

/// Whether `head` has an LF not preceded by CR, after the empty lines
/// (CRLF or LF) a head may follow, which httparse skips (RFC 9112 §2.2:
/// a server ignores at least one before a request line).
fn has_bare_lf(head: &[u8]) -> bool {
    let mut rest = head;
    while let [b'\r', b'\n', tail @ ..] | [b'\n', tail @ ..] = rest {
        rest = tail;
    }
    // Line ends found by a vectorised search: a byte-at-a-time loop over
    // a browser's head was most of the parser's own cost.
    memchr::memchr_iter(b'\n', rest).any(|at| at == 0 || rest[at - 1] != b'\r')
}

/// Turns httparse's fields into [`Field`]s of `buf`, whose head is
/// `head_len` bytes: a field's line ends where the next one starts, the
/// last one's before the blank line.
fn collect_fields(
    buf: &[u8],
    head_len: usize,
    parsed: &[httparse::Header<'_>],
    out: &mut Vec<Field>,
) {
    out.clear();
    out.reserve(parsed.len());
    for (i, header) in parsed.iter().enumerate() {
        let name = Span::within(buf, header.name.as_bytes());
        let line_end = match parsed.get(i + 1) {
            Some(next) => Span::within(buf, next.name.as_bytes()).start,
            None => head_len.saturating_sub(2) as u32,
        };
        out.push(Field {
            name,
            value: Span::within(buf, header.value),
            line: Span {
                start: name.start,
                end: line_end,
            },
            known: Known::of(header.name.as_bytes()),
        });
    }
}

/// The value of a Content-Length field: 1 to 19 digits.
fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    value.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

fn valid_authority(authority: &[u8]) -> bool {
    std::str::from_utf8(authority).is_ok_and(|a| split_authority(a).is_some())
}

/// Parses the request head at the start of `buf` into a [`RequestHead`]
/// and `fields`. `Ok(None)`: the head is not complete yet (read more,
/// unless `buf` already holds `max_len` bytes: then it is
/// [`HeadError::TooLarge`]). At most `max_fields` fields (and never more
/// than [`MAX_FIELDS`]).
pub fn parse_request(
    buf: &[u8],
    max_len: usize,
    max_fields: usize,
    fields: &mut Vec<Field>,
) -> Result<Option<RequestHead>, HeadError> {
    // Uninitialized: filling a table of MAX_FIELDS would cost more than
    // parsing a browser's head.
    let mut table = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let table = &mut table[..max_fields.clamp(1, MAX_FIELDS)];
    let mut req = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_request_with_uninit_headers(&mut req, buf, table)
    {
        Ok(httparse::Status::Complete(len)) if len > max_len => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= max_len => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Partial) => {
            // A bare LF already received is refused now, not after the
            // client has sent the rest of a head we will refuse anyway.
            return if has_bare_lf(buf) {
                Err(HeadError::BareLf)
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::Version) if !names_a_version(buf) => {
            return Err(HeadError::Malformed("invalid request line"))
        }
        Err(err) => return Err(malformed(err)),
    };
    if has_bare_lf(&buf[..len]) {
        return Err(HeadError::BareLf);
    }
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(HeadError::Malformed("incomplete request line"));
    };
    let version = match minor {
        0 => Version::Http10,
        1 => Version::Http11,
        _ => return Err(HeadError::Version),
    };
    collect_fields(buf, len, req.headers, fields);
    let method = Span::within(buf, method.as_bytes());
    let target_span = Span::within(buf, target.as_bytes());
    let (form, path_and_query, authority) = read_target(buf, method.of(buf), target_span)?;

    let mut head = RequestHead {
        len,
        method,
        target: target_span,
        form,
        path_and_query,
        authority,
        version,
        body: BodyFraming::Empty,
        host: None,
        user_agent: None,
        connection: ConnectionOptions::default(),
        upgrade: false,
        expect_continue: false,
    };
    let mut length = None;
    let mut chunked = false;
    let mut codings = 0usize;
    for (i, field) in fields.iter().enumerate() {
        let value = field.value.of(buf);
        match field.known {
            Known::Host if head.host.is_some() => return Err(HeadError::SeveralHosts),
            Known::Host => head.host = Some(i),
            Known::UserAgent if head.user_agent.is_some() => {
                return Err(HeadError::SeveralUserAgents)
            }
            Known::UserAgent => head.user_agent = Some(i),
            Known::ContentLength if length.is_some() => return Err(HeadError::ContentLength),
            Known::ContentLength => {
                length = Some(content_length(value).ok_or(HeadError::ContentLength)?);
            }
            Known::TransferEncoding => {
                codings += 1;
                chunked = value.eq_ignore_ascii_case(b"chunked");
            }
            Known::Connection => head.connection.read(value),
            Known::Upgrade => head.upgrade = true,
            Known::Expect => {
                head.expect_continue |= value.eq_ignore_ascii_case(b"100-continue");
            }
            Known::Other => {}
        }
    }
    if codings > 0 {
        if length.is_some() {
            return Err(HeadError::LengthAndChunked);
        }
        if codings > 1 || !chunked || version == Version::Http10 {
            return Err(HeadError::TransferCoding);
        }
        head.body = BodyFraming::Chunked;
    } else if let Some(length) = length.filter(|&n| n > 0) {
        head.body = BodyFraming::Length(length);
    }
    if head.host.is_none() && version == Version::Http11 {
        return Err(HeadError::MissingHost);
    }
    let host = head
        .host
        .and_then(|i| fields.get(i))
        .map(|f| f.value.of(buf));
    if host.is_some_and(|h| !valid_authority(h))
        || authority.is_some_and(|a| !valid_authority(a.of(buf)))
    {
        return Err(HeadError::InvalidHost);
    }
    Ok(Some(head))
}

/// Reads a request-target: its form, its path and query, and the
/// absolute form's authority.
fn read_target(
    buf: &[u8],
    method: &[u8],
    target: Span,
) -> Result<(TargetForm, Span, Option<Span>), HeadError> {
    let bytes = target.of(buf);
    if bytes.is_empty() || !bytes.iter().all(|b| (0x21..0x7f).contains(b)) {
        return Err(HeadError::Target);
    }
    // A fragment is no part of a request-target (RFC 9112 §3.2); when a
    // client sends one anyway it is cut off here, as `http::Uri` cuts it
    // off for the service: what goes upstream is what was decided on.
    let end = target.start + bytes.iter().position(|&b| b == b'#').unwrap_or(bytes.len()) as u32;
    if bytes[0] == b'/' {
        let path_and_query = Span {
            start: target.start,
            end,
        };
        return Ok((TargetForm::Origin, path_and_query, None));
    }
    if bytes == b"*" {
        return match method {
            b"OPTIONS" => Ok((TargetForm::Asterisk, target, None)),
            _ => Err(HeadError::Target),
        };
    }
    if method == b"CONNECT" {
        return Ok((TargetForm::Authority, target, None));
    }
    let rest = strip_prefix_ignore_case(bytes, b"http://")
        .or_else(|| strip_prefix_ignore_case(bytes, b"https://"))
        .ok_or(HeadError::Target)?;
    let authority_len = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let skipped = (bytes.len() - rest.len()) as u32;
    let authority = Span {
        start: target.start + skipped,
        end: target.start + skipped + authority_len as u32,
    };
    if authority.is_empty() {
        return Err(HeadError::Target);
    }
    let path_and_query = Span {
        start: authority.end,
        end,
    };
    Ok((TargetForm::Absolute, path_and_query, Some(authority)))
}

fn strip_prefix_ignore_case<'a>(bytes: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let head = bytes.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &bytes[prefix.len()..])
}

/// Whether an answer of `status` ends at its head whatever its fields
/// say (RFC 9112 §6.3): an interim `1xx`, `204 No Content` and `304 Not
/// Modified` have no body, and no length of their own to send on.
pub fn bodiless_status(status: u16) -> bool {
    status < 200 || status == 204 || status == 304
}

/// `n` in decimal, in `buf` (a `Content-Length`).
pub fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// `n` in hexadecimal, in `buf` (a chunk's size).
pub fn hexadecimal(mut n: usize, buf: &mut [u8; 16]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b"0123456789abcdef"[n % 16];
        n /= 16;
        if n == 0 {
            return &buf[i..];
        }
    }
}
