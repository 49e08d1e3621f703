//! crawlgate's own HTTP/1.1 server connection (`proxy.http1 = "native"`,
//! the default),
//! for HTTP/1.1 connections, plain or over TLS (a TLS session after its
//! handshake is driven by [`TlsSocket`], read and written as a plain
//! connection is).
//!
//! A connection waiting for its next request holds no buffer: it waits
//! for the socket to become readable, then takes a [`Scratch`] (read
//! buffer, field tables, write buffer) from its worker's [`BufPool`],
//! reads and parses the head in place ([`crate::http1::parse_request`],
//! strict on every request-smuggling shape: 400 or 431 and the connection
//! closed), and gives the scratch back when no byte of a next request is
//! left in it.
//!
//! The request then goes through the same [`service::handle`] as hyper's
//! layer serves (its head as an `http::Request`, the header values slices
//! of the one read buffer, and the parsed head itself, from whose bytes
//! crawlgate's own upstream connections copy the fields that pass), with
//! its body fed from the connection as it is asked for ([`FedBody`]:
//! backpressure, `100 Continue` when the request expects it). The
//! response head is written by this module (an upstream answer that
//! crawlgate's own upstream connection left as bytes has its field lines
//! copied from them), the body relayed with the framing HTTP/1.1
//! requires: the length the response declares or knows, else chunked
//! (HTTP/1.1 clients) or to the close (HTTP/1.0). A body that fails
//! mid-way leaves the connection closed without its end: never presented
//! as complete.
//!
//! Timeouts and drain are those of hyper's layer: the header-read timeout
//! runs from the moment the connection waits for a request until its
//! head is complete (so it is also the keep-alive idle time); a drain
//! closes an idle connection at once and a busy one after its response;
//! the end of the grace period closes everything. An upgrade (WebSocket)
//! the upstream accepts is spliced by [`crate::tunnel`] with the
//! connection itself, and any bytes the client sent after its request.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Method, StatusCode, Uri};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Conn, Phase};
use crate::http1::chunked::{ChunkError, Chunked};
use crate::http1::{self, BodyFraming, Field, HeadError, RequestHead, Version};
use crate::metrics::Protocol;
use crate::outcome::RequestLine;
use crate::proxy::body::{BodyFeed, FedBody};
use crate::proxy::head::ClientHead;
use crate::service;
use crate::tunnel::UpgradeSlot;

mod request;
mod response;
mod socket;

pub(super) use crate::proxy::socket::TlsSocket;
use request::request;
use response::{field_line, status_line, write_response, Answering, Written, DATE_NOW};
pub(super) use socket::Stream;
use socket::{linger, read_some, readable, try_read, write_all, Prefixed, ReadSize, Socket};

/// A read buffer's first size: a browser's head fits.
const READ_BUF: usize = 8 * 1024;
/// Most bytes of a request body nobody asked for that are read and
/// dropped to keep the connection for its next request.
const DISCARD_MAX: usize = 64 * 1024;
/// A response's data gathered before a write: a head and a small body
/// leave in one write.
const WRITE_BUF: usize = 16 * 1024;
/// Scratches a worker keeps for its connections' next requests.
const POOLED: usize = 256;
/// How long, and for how many bytes, a closing connection reads what
/// its client still sends ([`linger`]).
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 256 * 1024;
/// Buffers grown past this (a large head) are not pooled.
const POOLED_MAX: usize = 64 * 1024;

/// What a connection needs only while a request is in flight.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// Bytes read and not yet used: a head, a body, a next request.
    buf: BytesMut,
    /// The head's fields.
    fields: Vec<Field>,
    /// A response on its way out.
    out: Vec<u8>,
    /// The fields of an upstream's answer head copied to the client, as
    /// crawlgate's own upstream connection parsed them (it swaps its own
    /// table for this one).
    answer: Mutex<Vec<Field>>,
}

/// One worker's scratches, lent to its connections while they serve a
/// request.
#[derive(Debug, Default)]
pub(super) struct BufPool {
    free: Mutex<Vec<Scratch>>,
}

impl BufPool {
    fn take(&self) -> Scratch {
        let mut scratch = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default();
        scratch.buf.reserve(READ_BUF);
        scratch
    }

    fn give(&self, mut scratch: Scratch) {
        if scratch.buf.capacity() > POOLED_MAX
            || scratch.out.capacity() > POOLED_MAX
            || scratch.fields.capacity() > 256
            || answer_table(&mut scratch.answer).capacity() > 256
        {
            return;
        }
        scratch.buf.clear();
        scratch.out.clear();
        scratch.fields.clear();
        answer_table(&mut scratch.answer).clear();
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if free.len() < POOLED {
            free.push(scratch);
        }
    }
}

/// The answer table of a scratch no other task holds.
fn answer_table(table: &mut Mutex<Vec<Field>>) -> &mut Vec<Field> {
    table.get_mut().unwrap_or_else(PoisonError::into_inner)
}

/// How an exchange left the connection.
enum Next {
    /// Ready for the next request.
    KeepAlive,
    /// To be closed.
    Close,
    /// To be reset: a response failed mid-way, and a close could pass
    /// for its end (to an HTTP/1.0 client reading to the close); or the
    /// client took longer than the header-read timeout.
    Abort,
    /// Switched protocols: splice it with the upstream's.
    Switched,
}

/// The first bytes of HTTP/2's connection preface (RFC 9113 §3.4: no
/// HTTP/1.1 request starts so, the `PRI` method being reserved for it).
const H2_PREFACE_START: &[u8] = b"PRI ";

/// A connection on the plain port with h2c on that opened with HTTP/2's
/// preface: handed back, with the bytes read of it, for hyper's HTTP/2.
pub(super) struct H2c<S> {
    pub(super) conn: Conn,
    pub(super) stream: Prefixed<S>,
}

/// Serves the HTTP/1.1 connection `stream` until it closes. With `h2c`
/// (the plain port with `proxy.h2c` on), a connection that opens with
/// HTTP/2's preface is handed back instead (boxed: the task of every
/// HTTP/1.1 connection would otherwise keep room for it).
pub(super) async fn serve<S: Stream>(
    conn: Conn,
    stream: S,
    pool: Arc<BufPool>,
    h2c: bool,
) -> Option<Box<H2c<S>>> {
    let Conn {
        worker,
        builders,
        info,
        mut phase,
    } = conn;
    let metrics = Arc::clone(&builders.shared.process.metrics);
    let _open = metrics.connection(if h2c {
        Protocol::http1_or_h2c
    } else {
        Protocol::http1
    });
    let mut scratch: Option<Scratch> = None;
    // Until the first bytes have said which protocol this is.
    let mut may_be_h2 = h2c;
    loop {
        let timeout = worker.snapshot().conn.header_read_timeout;
        let deadline = Instant::now() + timeout;
        let idle = scratch.as_ref().is_none_or(|s| s.buf.is_empty());
        if idle {
            if let Some(done) = scratch.take() {
                pool.give(done);
            }
            if *phase.borrow_and_update() != Phase::Serve {
                stream.say_closing();
                return None;
            }
            // Buffers are taken only when bytes are really there: a
            // readiness may be one already used up (a read that filled
            // the buffer exactly leaves it set), and then the scratch goes
            // back and the wait goes on.
            let taken = loop {
                tokio::select! {
                    ready = readable(&stream) => if ready.is_err() {
                        return None;
                    },
                    () = tokio::time::sleep_until(deadline) => {
                        stream.say_closing();
                        return None;
                    }
                    // Draining (or gone): an idle connection closes now.
                    _ = phase.changed() => {
                        stream.say_closing();
                        return None;
                    }
                }
                let mut taken = pool.take();
                match try_read(&stream, &mut taken.buf) {
                    Ok(n) if n > 0 => break taken,
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => pool.give(taken),
                    // Its end, or an error.
                    _ => {
                        pool.give(taken);
                        return None;
                    }
                }
            };
            scratch = Some(taken);
        }
        if let (true, Some(s)) = (std::mem::take(&mut may_be_h2), scratch.as_mut()) {
            match opens_h2(&stream, &mut s.buf, deadline).await {
                Some(false) => {}
                Some(true) => {
                    let prefix = scratch.take().map(|s| s.buf.freeze()).unwrap_or_default();
                    let conn = Conn {
                        worker,
                        builders,
                        info,
                        phase,
                    };
                    let stream = Prefixed { prefix, io: stream };
                    return Some(Box::new(H2c { conn, stream }));
                }
                None => break,
            }
        }
        let s = scratch.get_or_insert_with(|| pool.take());
        // Made only for a request that asks to upgrade.
        let mut slot = None;
        let exchange = Box::pin(exchange(
            worker.get(),
            info,
            &stream,
            s,
            deadline,
            &mut slot,
            &mut phase,
        ));
        let next = exchange.await;
        let tunnel = match next {
            Next::KeepAlive => continue,
            Next::Close => break,
            Next::Abort => {
                let _ = stream.tcp().set_zero_linger();
                return None;
            }
            // The service's copy of the slot is gone with its response.
            Next::Switched => slot
                .and_then(Arc::into_inner)
                .and_then(std::sync::OnceLock::into_inner),
        };
        match tunnel {
            None => break,
            Some(tunnel) => {
                let leftover = scratch.take().map(|s| s.buf.freeze()).unwrap_or_default();
                let _open = metrics.connection(Protocol::tunnel);
                let close = async move {
                    let _ = phase.wait_for(|p| *p == Phase::Close).await;
                };
                let client = Prefixed {
                    prefix: leftover,
                    io: stream,
                };
                Box::pin(tunnel.run_on(client, close)).await;
                return None;
            }
        }
    }
    if let Some(done) = scratch.take() {
        pool.give(done);
    }
    Box::pin(linger(stream)).await;
    None
}

/// Whether the connection whose first bytes are in `buf` opens with
/// HTTP/2's preface, reading more (by `deadline`) while too few have come
/// to tell; `None` when it closed or was too slow first.
async fn opens_h2<S: Socket + ?Sized>(
    stream: &S,
    buf: &mut BytesMut,
    deadline: Instant,
) -> Option<bool> {
    loop {
        let n = buf.len().min(H2_PREFACE_START.len());
        if buf[..n] != H2_PREFACE_START[..n] {
            return Some(false);
        }
        if n == H2_PREFACE_START.len() {
            return Some(true);
        }
        tokio::select! {
            read = read_some(stream, buf, usize::MAX) => match read {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            },
            () = tokio::time::sleep_until(deadline) => return None,
        }
    }
}

/// One request on the connection: its head read (by `deadline`), served,
/// and its response written.
async fn exchange<S: Stream>(
    worker: Arc<crate::state::Worker>,
    info: service::ConnInfo,
    stream: &S,
    s: &mut Scratch,
    deadline: Instant,
    slot: &mut Option<UpgradeSlot>,
    phase: &mut watch::Receiver<Phase>,
) -> Next {
    let limits = &worker.snapshot.limits;
    let (read_cap, max_headers) = (
        super::h1_read_cap(limits.max_header_bytes),
        limits.max_headers,
    );
    let head = loop {
        match http1::parse_request(&s.buf, read_cap, max_headers, &mut s.fields) {
            Ok(Some(head)) => break head,
            Ok(None) => {}
            Err(err) => {
                Box::pin(refuse(stream, s, &worker, err, info)).await;
                return Next::Close;
            }
        }
        if s.buf.capacity() - s.buf.len() < 1024 {
            let room = s.buf.capacity().max(READ_BUF);
            s.buf
                .reserve(room.min(read_cap.saturating_sub(s.buf.len()).max(1024)));
        }
        tokio::select! {
            read = read_some(stream, &mut s.buf, usize::MAX) => match read {
                Ok(0) | Err(_) => return Next::Close,
                Ok(_) => {}
            },
            () = tokio::time::sleep_until(deadline) => {
                // A client this slow is not waited for any longer.
                tracing::debug!(peer = %info.peer, "header read timeout");
                return Next::Abort;
            }
        }
    };
    let head_bytes = s.buf.split_to(head.len).freeze();
    let (feed, body) = match head.body {
        BodyFraming::Empty | BodyFraming::Length(0) => (None, FedBody::empty()),
        BodyFraming::Length(n) => {
            let (feed, body) = FedBody::channel(Some(n));
            (Some(feed), body)
        }
        BodyFraming::Chunked | BodyFraming::UntilClose => {
            let (feed, body) = FedBody::channel(None);
            (Some(feed), body)
        }
    };
    let Some(req) = request(&head, &s.fields, &head_bytes, body) else {
        s.buf = BytesMut::from(&head_bytes[..]);
        Box::pin(refuse(stream, s, &worker, HeadError::Target, info)).await;
        return Next::Close;
    };
    let is_head = req.method() == Method::HEAD;
    if head.upgrade {
        *slot = Some(UpgradeSlot::default());
    }
    // Boxed: the service's future is the largest part of an exchange, and
    // held inline it was moved with it, and held twice (14.7 KiB copied
    // per request, where boxed it is written once).
    let own = ClientHead {
        buf: &head_bytes,
        head: &head,
        fields: &s.fields,
        answer: Some(&s.answer),
    };
    let response = Box::pin(service::handle(worker, info, slot.clone(), req, Some(own)));

    // The body is fed while the request is served and its answer written
    // (an upstream may answer before it has read all of it). `Some(true)`
    // once it has been read to its end.
    let mut fed = if feed.is_none() { Some(true) } else { None };
    // Whether a client that sent `Expect: 100-continue` has been told to
    // send its body (or has sent all of it): if not when the answer
    // starts, it may never send it, and the connection closes after.
    let settled = AtomicBool::new(!head.expect_continue || feed.is_none());
    let feeding = async {
        match feed {
            Some(feed) => {
                let whole = feed_body(stream, &mut s.buf, &head, feed, &settled).await;
                settled.fetch_or(whole, Ordering::Relaxed);
                whole
            }
            None => true,
        }
    };
    let (out, answer) = (&mut s.out, &s.answer);
    let draining = &*phase;
    let written = async {
        let Ok(res) = response.await;
        let to = Answering {
            version: head.version,
            persists: head.persists() && settled.load(Ordering::Relaxed),
            is_head,
            draining: *draining.borrow() != Phase::Serve,
        };
        write_response(stream, out, res, answer, to).await
    };
    let mut feeding = pin!(feeding);
    let mut written = pin!(written);
    let mut close = phase.clone();
    let written = loop {
        tokio::select! {
            written = &mut written => break written,
            complete = &mut feeding, if fed.is_none() => fed = Some(complete),
            changed = close.changed() => {
                if changed.is_err() || *close.borrow() == Phase::Close {
                    return Next::Close;
                }
            }
        }
    };
    // A body nobody read is dropped as it comes, for a moment, so that
    // the connection can serve its next request.
    if matches!(written, Ok(Written::KeepAlive)) && fed.is_none() {
        fed = tokio::time::timeout(LINGER_TIME, &mut feeding).await.ok();
    }
    match written {
        Ok(Written::KeepAlive) if fed == Some(true) => Next::KeepAlive,
        Ok(Written::Switched) => Next::Switched,
        Ok(_) => Next::Close,
        Err(err) => {
            tracing::debug!(peer = %info.peer, error = %err, "response cut off");
            Next::Abort
        }
    }
}

/// Reads the request body framed as `head` says from `stream` (after what
/// `buf` holds already) into `feed`, once it is asked for. When it is not
/// asked for (the request answered without it, or its reader gone), the
/// rest is read and dropped, up to [`DISCARD_MAX`] bytes, so that the
/// connection can serve the next request. `true` when the body was read
/// to its end; `false` when it was not (too much left to drop, the client
/// gone, or malformed: then its reader was told).
async fn feed_body<S: Socket + ?Sized>(
    stream: &S,
    buf: &mut BytesMut,
    head: &RequestHead,
    mut feed: BodyFeed,
    settled: &AtomicBool,
) -> bool {
    let mut framing = match head.body {
        BodyFraming::Chunked => Framed::Chunked(Chunked::new()),
        BodyFraming::Length(n) => Framed::Length(n),
        BodyFraming::Empty | BodyFraming::UntilClose => Framed::Length(0),
    };
    // What has arrived with the head is queued at once (the channel has
    // room for one piece), as hyper's body hands it over on its first
    // poll: a body broken from its first bytes fails before the request
    // goes upstream.
    let mut whole = false;
    // Bytes dropped unread so far: a body the service no longer wants (a
    // request forwarded without it, or answered without forwarding) is
    // read and dropped, up to a point, to keep the connection.
    let mut dropped = 0usize;
    if !buf.is_empty() {
        match framing.next_piece(buf) {
            Ok((data, done)) => {
                let len = data.len();
                if !data.is_empty() && !feed.send(data).await {
                    dropped += len;
                }
                whole = done;
            }
            Err(err) => {
                feed.fail(Box::new(err)).await;
                return false;
            }
        }
    }
    let mut sink = feed.wanted().await.then_some(&feed);
    // Sent when the body is asked for, even if some of it came already
    // (as hyper's layer does; RFC 9110 §10.1.1 allows either).
    if sink.is_some() && head.expect_continue && head.version == Version::Http11 {
        if write_all(stream, b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .is_err()
        {
            return false;
        }
        settled.store(true, Ordering::Relaxed);
    }
    if whole {
        settled.store(true, Ordering::Relaxed);
        return true;
    }
    let mut read_size = ReadSize::new();
    loop {
        // What is buffered first.
        while !buf.is_empty() {
            let (data, done) = match framing.next_piece(buf) {
                Ok(piece) => piece,
                Err(err) => {
                    if let Some(feed) = sink {
                        feed.fail(Box::new(err)).await;
                    }
                    return false;
                }
            };
            if !data.is_empty() {
                let len = data.len();
                let passed = match sink {
                    Some(feed) => feed.send(data).await,
                    None => false,
                };
                if !passed {
                    sink = None;
                    dropped += len;
                    if dropped > DISCARD_MAX {
                        return false;
                    }
                }
            }
            if done {
                return true;
            }
        }
        if matches!(framing, Framed::Length(0)) {
            return true;
        }
        let room = read_size.room(buf);
        let read = read_some(stream, buf, room).await;
        if let Ok(n) = read {
            read_size.grow(n, room);
        }
        if let (Some(feed), Ok(0) | Err(_)) = (sink, &read) {
            let err: crate::proxy::BodyError = match read {
                Err(err) => Box::new(err),
                Ok(_) => "the client closed the connection before the end of its body".into(),
            };
            feed.fail(err).await;
            return false;
        }
        if matches!(read, Ok(0) | Err(_)) {
            return false;
        }
    }
}

/// Where a request body stands.
#[derive(Debug)]
enum Framed {
    /// This many bytes left.
    Length(u64),
    /// Chunked, read this far.
    Chunked(Chunked),
}

impl Framed {
    /// The next piece of body data at the start of `buf`, taken out of it
    /// (empty when `buf` held only framing), and whether the body ended.
    fn next_piece(&mut self, buf: &mut BytesMut) -> Result<(Bytes, bool), ChunkError> {
        match self {
            Framed::Length(left) => {
                let take = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                *left -= take as u64;
                Ok((buf.split_to(take).freeze(), *left == 0))
            }
            Framed::Chunked(reader) => {
                let decoded = reader.decode(buf)?;
                let piece = buf.split_to(decoded.consumed).freeze();
                Ok((piece.slice(decoded.data), decoded.done))
            }
        }
    }
}

/// What a refused head's request line and fields say, for its record:
/// read by httparse without the strict checks (`None` when not even a
/// method and target can be read).
fn refused_line(buf: &[u8], peer: SocketAddr) -> Option<(RequestLine, http::Version)> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut fields);
    let _ = req.parse(buf);
    let method = Method::from_bytes(req.method?.as_bytes()).ok()?;
    let uri = Uri::try_from(req.path?).ok()?;
    let version = match req.version {
        Some(0) => http::Version::HTTP_10,
        _ => http::Version::HTTP_11,
    };
    let first = |name: &str| {
        req.headers
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .and_then(|f| HeaderValue::from_bytes(f.value).ok())
    };
    let line = RequestLine::new(
        SystemTime::now(),
        peer.ip(),
        method,
        &uri,
        first("host").as_ref(),
        first("user-agent").as_ref(),
        first("referer").as_ref(),
    );
    Some((line, version))
}

/// Answers a head refused by the parser (`err`'s status) and says so at
/// debug level; the connection is closed after it. A head refused for a
/// reason the service refuses on too (hyper's parser reads it: several
/// Host fields, an ambiguous framing…) is answered and recorded as the
/// service does; one no HTTP/1.1 parser reads (malformed, too large) gets
/// an empty answer and no record, as from hyper's parser.
async fn refuse<S: Socket + ?Sized>(
    stream: &S,
    s: &mut Scratch,
    worker: &crate::state::Worker,
    err: HeadError,
    info: service::ConnInfo,
) {
    let peer = info.peer;
    tracing::debug!(%peer, error = %err, "refused a request head");
    let status = StatusCode::from_u16(err.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let read_by_hyper = !matches!(
        err,
        HeadError::Malformed(_)
            | HeadError::BareLf
            | HeadError::TooManyFields
            | HeadError::TooLarge
            | HeadError::Version
    );
    if read_by_hyper {
        if let Some((line, version)) = refused_line(&s.buf, peer) {
            let res = service::refused(&worker.snapshot, info, line, version, status);
            let version = match version {
                http::Version::HTTP_10 => Version::Http10,
                _ => Version::Http11,
            };
            let to = Answering {
                version,
                persists: false,
                is_head: false,
                draining: true,
            };
            let _ = write_response(stream, &mut s.out, res, &s.answer, to).await;
            return;
        }
    }
    let out = &mut s.out;
    out.clear();
    status_line(out, status);
    out.extend_from_slice(b"content-length: 0\r\nconnection: close\r\n");
    DATE_NOW.with(|date| field_line(out, b"date", &date.now()));
    out.extend_from_slice(b"\r\n");
    let _ = write_all(stream, out).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exchange's future is boxed for each request and moved as a
    /// whole: it stays small by holding the service's future boxed (it
    /// was 14.7 KiB with that future inline).
    #[test]
    fn the_exchange_stays_small() {
        fn output_size7<A, B, C, D, E, F, G, R>(_: impl FnOnce(A, B, C, D, E, F, G) -> R) -> usize {
            std::mem::size_of::<R>()
        }
        let tls = output_size7(super::exchange::<TlsSocket>);
        assert!(tls <= 4096, "the exchange future over TLS is {tls} bytes");
        let exchange = output_size7(super::exchange::<tokio::net::TcpStream>);
        eprintln!("exchange future {exchange} bytes");
        assert!(exchange <= 4096, "the exchange future is {exchange} bytes");
    }
}
