//! An upstream's response head, parsed in place as a request's is: its
//! status, version, framing (RFC 9112 §6.3) and what `Connection` says,
//! its fields spans of the buffer read.

use std::mem::MaybeUninit;

use super::{
    collect_fields, content_length, has_bare_lf, malformed, BodyFraming, ConnectionOptions, Field,
    HeadError, Known, Span, Version, MAX_FIELDS,
};

/// A parsed response head: spans into the buffer it was parsed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// Bytes of the head, up to and including the blank line.
    pub len: usize,
    /// The version.
    pub version: Version,
    /// The status code.
    pub status: u16,
    /// The reason phrase as sent.
    pub reason: Span,
    /// How the body is delimited, given the request's method.
    pub body: BodyFraming,
    /// What `Connection` says.
    pub connection: ConnectionOptions,
}

impl ResponseHead {
    /// Whether the connection to the upstream may carry another request
    /// after this response (a body read to its close never may).
    pub fn persists(&self) -> bool {
        self.body != BodyFraming::UntilClose && self.connection.persists(self.version)
    }
}

/// Why an upstream's response head is refused (answered 502).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    /// Not an HTTP/1 response head.
    #[error("malformed response head: {0}")]
    Malformed(&'static str),
    /// A line ended by a bare LF.
    #[error("a response line ended by a bare LF")]
    BareLf,
    /// Larger than allowed, or more fields than allowed.
    #[error("response head too large")]
    TooLarge,
    /// Content-Length values that disagree or are not numbers.
    #[error("an invalid Content-Length in the response")]
    ContentLength,
}

/// Parses the response head at the start of `buf`, the answer to a
/// request whose method was HEAD when `head_request`. `Ok(None)`: not
/// complete yet. The body's framing follows RFC 9112 §6.3: none for a
/// HEAD request, 1xx, 204 and 304; chunked when the last coding is
/// `chunked`; to the close for any other coding or without a length;
/// else the Content-Length (several equal values are one; different ones
/// are refused). A Transfer-Encoding in an HTTP/1.0 answer is refused;
/// beside a Content-Length it wins, and the connection closes after.
pub fn parse_response(
    buf: &[u8],
    head_request: bool,
    max_len: usize,
    max_fields: usize,
    fields: &mut Vec<Field>,
) -> Result<Option<ResponseHead>, ResponseError> {
    let mut table = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let table = &mut table[..max_fields.clamp(1, MAX_FIELDS)];
    let mut res = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut res, buf, table)
    {
        Ok(httparse::Status::Complete(len)) if len > max_len => {
            return Err(ResponseError::TooLarge)
        }
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() >= max_len => {
            return Err(ResponseError::TooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(ResponseError::TooLarge),
        Err(err) => {
            return Err(match malformed(err) {
                HeadError::Malformed(why) => ResponseError::Malformed(why),
                _ => ResponseError::Malformed("invalid version"),
            })
        }
    };
    if has_bare_lf(&buf[..len]) {
        return Err(ResponseError::BareLf);
    }
    let (Some(minor), Some(status)) = (res.version, res.code) else {
        return Err(ResponseError::Malformed("incomplete status line"));
    };
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    if !(100..=999).contains(&status) {
        return Err(ResponseError::Malformed("invalid status code"));
    }
    let reason = Span::within(buf, res.reason.unwrap_or_default().as_bytes());
    collect_fields(buf, len, res.headers, fields);
    // RFC 9112 §6.3: these end at their head, whatever their framing
    // fields say; faulty ones are then not refused (as hyper's client
    // does not), but the connection is not trusted with another message.
    let lengthless = super::bodiless_status(status);
    let mut faulty = None;
    let mut connection = ConnectionOptions::default();
    let mut length: Option<u64> = None;
    let mut last_coding_chunked = None;
    for field in fields.iter() {
        let value = field.value.of(buf);
        match field.known {
            Known::Connection => connection.read(value),
            Known::TransferEncoding => {
                let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
                last_coding_chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            }
            Known::ContentLength => {
                for part in value.split(|&b| b == b',') {
                    match content_length(part.trim_ascii()) {
                        Some(n) if length.is_none_or(|l| l == n) => length = Some(n),
                        // Not a length, or two that differ.
                        _ => faulty = Some(ResponseError::ContentLength),
                    }
                }
            }
            _ => {}
        }
    }
    if last_coding_chunked.is_some() {
        // RFC 9112 §6.1: an HTTP/1.0 message's framing is faulty with any
        // Transfer-Encoding.
        if version == Version::Http10 {
            faulty = Some(ResponseError::Malformed("Transfer-Encoding in HTTP/1.0"));
        }
        // §6.3: with a Content-Length too, the coding wins, and the
        // connection is not trusted with another message.
        // A 304 may say the coding its GET would have (§6.1).
        if length.is_some() || (lengthless && status != 304) {
            connection.close = true;
        }
    }
    if let Some(faulty) = faulty {
        if !lengthless {
            return Err(faulty);
        }
        connection.close = true;
    }
    // A 204 announcing a body may well send one.
    if status == 204 && length.is_some_and(|n| n > 0) {
        connection.close = true;
    }
    let body = if head_request || lengthless {
        BodyFraming::Empty
    } else {
        match (last_coding_chunked, length) {
            (Some(true), _) => BodyFraming::Chunked,
            (Some(false), _) | (None, None) => BodyFraming::UntilClose,
            (None, Some(0)) => BodyFraming::Empty,
            (None, Some(n)) => BodyFraming::Length(n),
        }
    };
    Ok(Some(ResponseHead {
        len,
        version,
        status,
        reason,
        body,
        connection,
    }))
}
