//! The request on its way upstream: its head written from the rewritten
//! parts, and its body framed by the length it announced (held to it) or
//! chunked, what it has ready sent with the head, the rest after.

use std::io::{self, IoSlice};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;

use http::header::CONTENT_LENGTH;
use http_body_util::BodyExt;
use hyper::body::Body;

use crate::http1;
use crate::proxy::body::RequestBody;
use crate::proxy::error::BodyError;
use crate::proxy::head::field_line;
use crate::proxy::socket::{write_all, write_all_vectored, MaybeTls};

/// How a request body is framed upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::proxy) enum Sending {
    /// No body.
    None,
    /// This many bytes, the head's `Content-Length`.
    Length(u64),
    /// Chunked.
    Chunked,
}

/// Why a request body could not be sent.
pub(super) enum Unsent {
    /// The client's body failed (or went over the limit).
    Body(BodyError),
    /// The connection failed.
    Io(io::Error),
}

/// A request body's framing on its way upstream: the length it
/// announced, held to, or chunks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Framer {
    sending: Sending,
    /// Bytes still to come, for a body of a length.
    left: Option<u64>,
}

impl Framer {
    pub(super) fn new(sending: Sending) -> Self {
        let left = match sending {
            Sending::Length(n) => Some(n),
            Sending::None | Sending::Chunked => None,
        };
        Self { sending, left }
    }

    /// Counts a piece of `len` bytes: a body longer than its announced
    /// length fails (the upstream would read the rest as a request).
    fn count(&mut self, len: usize) -> Result<(), BodyError> {
        if let Some(left) = &mut self.left {
            *left = left
                .checked_sub(len as u64)
                .ok_or("request body longer than its length")?;
        }
        Ok(())
    }

    /// What goes before a piece of `len` bytes, into `out`.
    fn before(&self, len: usize, out: &mut Vec<u8>) {
        if self.sending == Sending::Chunked {
            out.extend_from_slice(http1::hexadecimal(len, &mut [0; 16]));
            out.extend_from_slice(b"\r\n");
        }
    }

    /// What goes after a piece.
    fn after(&self) -> &'static [u8] {
        match self.sending {
            Sending::Chunked => b"\r\n",
            Sending::Length(_) | Sending::None => b"",
        }
    }

    /// What ends the body; a body shorter than its length fails.
    fn end(&self) -> Result<&'static [u8], BodyError> {
        match (self.sending, self.left) {
            (_, Some(left)) if left > 0 => Err("request body shorter than its length".into()),
            (Sending::Chunked, _) => Ok(b"0\r\n\r\n"),
            _ => Ok(b""),
        }
    }
}

/// Adds to `out` (the head) what `body` has ready now, framed: sent in
/// the head's write, and a body that already failed sends nothing at all.
/// `Ok(true)` when the body ended with it.
pub(super) async fn take_ready(
    body: &mut RequestBody,
    framer: &mut Framer,
    out: &mut Vec<u8>,
) -> Result<bool, BodyError> {
    let polled = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *body).poll_frame(cx))).await;
    match polled {
        Poll::Pending => Ok(false),
        Poll::Ready(None) => {
            out.extend_from_slice(framer.end()?);
            Ok(true)
        }
        Poll::Ready(Some(Err(err))) => Err(err),
        Poll::Ready(Some(Ok(frame))) => {
            if let Some(data) = frame.data_ref().filter(|d| !d.is_empty()) {
                framer.count(data.len())?;
                framer.before(data.len(), out);
                out.extend_from_slice(data);
                out.extend_from_slice(framer.after());
            }
            Ok(false)
        }
    }
}

/// Writes the rest of the client's `body` to `stream`, framed by
/// `framer`.
pub(super) async fn send_body(
    stream: Arc<MaybeTls>,
    body: RequestBody,
    mut framer: Framer,
) -> Result<(), Unsent> {
    let mut body = pin!(body);
    let mut before = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(Unsent::Body)?;
        // Trailers are not passed on.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        framer.count(data.len()).map_err(Unsent::Body)?;
        before.clear();
        framer.before(data.len(), &mut before);
        let mut parts = [
            IoSlice::new(&before),
            IoSlice::new(&data),
            IoSlice::new(framer.after()),
        ];
        write_all_vectored(&*stream, &mut parts)
            .await
            .map_err(Unsent::Io)?;
    }
    let end = framer.end().map_err(Unsent::Body)?;
    if !end.is_empty() {
        write_all(&*stream, end).await.map_err(Unsent::Io)?;
    }
    Ok(())
}

/// Writes the request head for `parts` (origin-form target, the fields
/// as the rewrite left them) into `out`, with the framing `sending` needs:
/// the body's length as `Content-Length` when the fields have none, or
/// `Transfer-Encoding: chunked`.
pub(in crate::proxy) fn write_head(
    out: &mut Vec<u8>,
    parts: &http::request::Parts,
    sending: Sending,
) {
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    // An absolute-form target with a query and no path (`http://h?q`)
    // leaves `?q`: its origin form is `/?q`.
    if target.starts_with('?') {
        out.push(b'/');
    }
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &parts.headers {
        if sending == Sending::Chunked && name == CONTENT_LENGTH {
            continue;
        }
        field_line(out, name.as_str().as_bytes(), value.as_bytes());
    }
    match sending {
        Sending::Length(n) if !parts.headers.contains_key(CONTENT_LENGTH) => {
            field_line(out, b"content-length", http1::decimal(n, &mut [0; 20]));
        }
        Sending::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Sending::Length(_) | Sending::None => {}
    }
    out.extend_from_slice(b"\r\n");
}
