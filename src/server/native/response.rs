//! A response as the native layer writes it: the head (status line, the
//! service's fields but the framing ones, `Date`, this hop's framing and
//! `Connection`), then the body relayed with that framing.

use std::io;
use std::pin::pin;
use std::sync::{Mutex, PoisonError};
use std::task::Poll;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use http::{Response, StatusCode};
use hyper::body::Body;

use super::socket::{write_all, Socket};
use super::WRITE_BUF;
use crate::http1::{self, decimal, hexadecimal, BodyFraming, Field, ResponseHead, Version};
use crate::observe::Observed;
use crate::proxy::head::copy_response_fields;
pub(super) use crate::proxy::head::field_line;

/// How a response left the connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// Whole, and the connection may serve another request.
    KeepAlive,
    /// Whole, and the connection closes.
    Close,
    /// A `101`: the connection is the tunnel's.
    Switched,
    /// Unfinished (its body failed), in a way the client sees: the
    /// connection closes.
    Cut,
}

/// How a response body is framed to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// No body is sent.
    None,
    /// `Content-Length`.
    Length(u64),
    /// Chunked.
    Chunked,
    /// To the close.
    UntilClose,
}

/// The request a response answers, as far as writing it goes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Answering {
    /// The client's version.
    pub(super) version: Version,
    /// Whether the connection may carry another request, as far as the
    /// request and the body it came with say.
    pub(super) persists: bool,
    /// A HEAD request: the answer has no body.
    pub(super) is_head: bool,
    /// The server is draining: the connection closes after this.
    pub(super) draining: bool,
}

/// Writes `res` to the client of the request `to`: the head, then the
/// body relayed with its framing. When `res`'s fields were left in the
/// upstream's head (its `HeaderMap` then holds only fields added since),
/// `answer` holds them as parsed.
/// `Err` when the body failed or the client is gone: the connection is
/// then closed, the message unfinished.
///
/// The head is written before the first await, so that the future holds
/// the body only, not the response's head.
pub(super) fn write_response<'a, S: Socket + ?Sized>(
    stream: &'a S,
    out: &'a mut Vec<u8>,
    res: Response<Observed>,
    answer: &Mutex<Vec<Field>>,
    to: Answering,
) -> impl std::future::Future<Output = io::Result<Written>> + 'a {
    let (parts, body) = res.into_parts();
    let switched = parts.status == StatusCode::SWITCHING_PROTOCOLS;
    let exact = body.size_hint().exact();
    let (framing, keep_alive) = match body.upstream_head() {
        Some((bytes, head)) => {
            let fields = answer.lock().unwrap_or_else(PoisonError::into_inner);
            write_head(out, &parts, Some((bytes, head, &fields)), to, exact)
        }
        None => write_head(out, &parts, None, to, exact),
    };
    relay(stream, out, body, framing, keep_alive, switched)
}

/// Sends the head in `out`, then `body` with `framing` (as [`write_head`]
/// said, and whether the connection may be kept alive after it).
async fn relay<S: Socket + ?Sized, B: Body<Data = Bytes>>(
    stream: &S,
    out: &mut Vec<u8>,
    body: B,
    framing: Framing,
    keep_alive: bool,
    switched: bool,
) -> io::Result<Written> {
    if framing == Framing::None {
        // Unread: a HEAD, 1xx, 204 or 304 has no body for the client.
        drop(body);
        write_all(stream, out).await?;
        return Ok(if switched {
            Written::Switched
        } else if keep_alive {
            Written::KeepAlive
        } else {
            Written::Close
        });
    }

    let mut body = pin!(body);
    let mut sent = 0u64;
    loop {
        // A frame ready now joins what is gathered; otherwise what is
        // gathered leaves before waiting for the next.
        let polled = std::future::poll_fn(|cx| Poll::Ready(body.as_mut().poll_frame(cx))).await;
        let frame = match polled {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                if !out.is_empty() {
                    write_all(stream, out).await?;
                    out.clear();
                }
                std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await
            }
        };
        match frame {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue; // Trailers are not passed on.
                };
                if data.is_empty() {
                    continue;
                }
                sent += data.len() as u64;
                if let Framing::Length(n) = framing {
                    if sent > n {
                        return Err(io::Error::other("response body longer than its length"));
                    }
                }
                if framing == Framing::Chunked {
                    out.extend_from_slice(hexadecimal(data.len(), &mut [0; 16]));
                    out.extend_from_slice(b"\r\n");
                }
                if out.len() + data.len() <= WRITE_BUF {
                    out.extend_from_slice(&data);
                } else {
                    write_all(stream, out).await?;
                    out.clear();
                    write_all(stream, &data).await?;
                }
                if framing == Framing::Chunked {
                    out.extend_from_slice(b"\r\n");
                }
            }
            Some(Err(_)) => return cut_off(stream, out, framing, "response body failed").await,
            None => break,
        }
    }
    match framing {
        Framing::Length(n) if sent != n => {
            return cut_off(
                stream,
                out,
                framing,
                "response body shorter than its length",
            )
            .await;
        }
        Framing::Chunked => out.extend_from_slice(b"0\r\n\r\n"),
        _ => {}
    }
    if !out.is_empty() {
        write_all(stream, out).await?;
        out.clear();
    }
    Ok(if keep_alive {
        Written::KeepAlive
    } else {
        Written::Close
    })
}

/// Writes to `out` the head of the response `parts` (with the fields of
/// the upstream's answer `upstream` when they were left in its bytes),
/// whose body's length is `exact` when known. Says how the body goes, and
/// whether the connection may serve another request after it.
fn write_head(
    out: &mut Vec<u8>,
    parts: &http::response::Parts,
    copied: Option<(&[u8], &ResponseHead, &[Field])>,
    to: Answering,
    exact: Option<u64>,
) -> (Framing, bool) {
    let Answering {
        version,
        persists,
        is_head,
        draining,
    } = to;
    let status = parts.status;
    let headers = &parts.headers;
    let switched = status == StatusCode::SWITCHING_PROTOCOLS;
    // Neither a body nor a length (RFC 9110 §8.6: a 204 has none, a
    // 304's is its representation's, which hyper's layer does not pass
    // on either; the differential test holds the two alike).
    let lengthless = http1::bodiless_status(status.as_u16());
    let bodiless = is_head || lengthless;
    let declared = match &copied {
        // A length that frames the body (one beside a Transfer-Encoding
        // does not, and is not kept in a `HeaderMap` either).
        Some((_, head, _)) => match head.body {
            BodyFraming::Length(n) => Some(n),
            BodyFraming::Empty if !bodiless => Some(0),
            _ => None,
        },
        None => headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok()),
    };
    let framing = if bodiless {
        Framing::None
    } else if let Some(n) = declared.or(exact) {
        Framing::Length(n)
    } else if version == Version::Http11 {
        Framing::Chunked
    } else {
        Framing::UntilClose
    };
    let says_close = headers
        .get_all(CONNECTION)
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    let keep_alive =
        !switched && persists && !says_close && !draining && framing != Framing::UntilClose;

    out.clear();
    status_line(out, status);
    // A length is passed on only for an answer without a body relayed
    // that may have one (a HEAD's); a relayed body's is this hop's.
    let keep_length = framing == Framing::None && !lengthless;
    let mut date = false;
    if let Some((bytes, head, fields)) = copied {
        date = copy_response_fields(out, bytes, head, fields, keep_length);
    }
    // The fields of the `HeaderMap`: all of them, or those added to a
    // copied answer's.
    for (name, value) in headers {
        if name == TRANSFER_ENCODING
            || (name == CONTENT_LENGTH && !keep_length)
            || (name == CONNECTION && !switched)
        {
            continue;
        }
        field_line(out, name.as_str().as_bytes(), value.as_bytes());
    }
    if !date && !headers.contains_key(DATE) {
        DATE_NOW.with(|date| field_line(out, b"date", &date.now()));
    }
    match framing {
        Framing::Length(n) => {
            field_line(out, b"content-length", decimal(n, &mut [0; 20]));
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        // A HEAD answer says the length its GET would have, as known (a
        // copied one says the upstream's).
        Framing::None if is_head && !lengthless && declared.is_none() && copied.is_none() => {
            if let Some(n) = exact.filter(|&n| n > 0) {
                field_line(out, b"content-length", decimal(n, &mut [0; 20]));
            }
        }
        Framing::None | Framing::UntilClose => {}
    }
    if !switched {
        // HTTP/1.0 closes unless told otherwise.
        if !keep_alive && (version == Version::Http11 || says_close) {
            out.extend_from_slice(b"connection: close\r\n");
        } else if keep_alive && version == Version::Http10 {
            out.extend_from_slice(b"connection: keep-alive\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    (framing, keep_alive)
}

/// A body that failed after its head: what was gathered of it still
/// goes out (the client learns the status and gets what there was), then
/// the message is left unfinished. Short of its length or of its last
/// chunk, a close tells the client so ([`Written::Cut`]); a body read to
/// the close could pass for complete, so that connection is reset
/// (`Err`).
async fn cut_off<S: Socket + ?Sized>(
    stream: &S,
    out: &mut Vec<u8>,
    framing: Framing,
    why: &'static str,
) -> io::Result<Written> {
    if !out.is_empty() {
        write_all(stream, out).await?;
        out.clear();
    }
    match framing {
        Framing::UntilClose => Err(io::Error::other(why)),
        _ => {
            tracing::debug!(why, "response cut off; closing");
            Ok(Written::Cut)
        }
    }
}

/// Appends the status line of `status`, CRLF included.
pub(super) fn status_line(out: &mut Vec<u8>, status: StatusCode) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `Date` for this second, formatted once a second per thread.
pub(super) struct DateCache {
    second: std::cell::Cell<u64>,
    text: std::cell::RefCell<[u8; 29]>,
}

impl DateCache {
    pub(super) fn now(&self) -> [u8; 29] {
        let now = SystemTime::now();
        let second = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if second != self.second.get() {
            let text = httpdate::fmt_http_date(now);
            if text.len() == 29 {
                self.text.borrow_mut().copy_from_slice(text.as_bytes());
                self.second.set(second);
            }
        }
        *self.text.borrow()
    }
}

thread_local! {
    pub(super) static DATE_NOW: DateCache = const {
        DateCache {
            second: std::cell::Cell::new(u64::MAX),
            text: std::cell::RefCell::new(*b"Thu, 01 Jan 1970 00:00:00 GMT"),
        }
    };
}
