//! crawlgate's own upstream connections (`proxy.http1 = "native"`): a
//! worker's pool of keep-alive connections, plain or (an `https://`
//! upstream) TLS, one exchange on one of them, and the response body read
//! off it.
//!
//! An exchange writes the request head in one write, then the body with
//! the framing the head announced (held to the length it announced),
//! while it reads the answer: an upstream that answers before the body is
//! all sent (a `413`, a redirect, an echo) is heard at once, the body's
//! write goes on in a task of its own until the answer's body ends, and
//! the connection is not reused. Interim `1xx` answers are skipped. The head is parsed in place
//! ([`crate::http1::parse_response`], strict on framing) and its field
//! values become slices of the one buffer that was read; or, when the
//! caller asks, the fields stay in the head's bytes, which the body
//! carries for crawlgate's own server layer to copy, and no `HeaderMap`
//! is filled.
//!
//! The body is read with the framing the head says (its length, chunked,
//! or to the close); once it has ended, and when nothing says otherwise
//! (`Connection: close`, an HTTP/1.0 answer, bytes past its end, a
//! request body not sent whole), the connection goes back to the pool.
//!
//! The pool is the worker's own: no other thread takes from it, so its
//! lock is never contended. The newest idle connection is taken first;
//! at most `proxy.pool_max_idle` are kept. A pooled connection the
//! upstream has closed (or sent bytes on, unasked) is dropped instead of
//! used: seen from the readiness tokio holds, without a system call, once
//! tokio's driver has seen those bytes; and after an answer that ended at
//! its head though it announced a body (a `304` with a length), whose
//! body a broken upstream might send late, from a look into the socket.
//! While the pool holds any, a sweep every second (or every
//! `proxy.pool_idle_timeout` when shorter) closes those idle that long
//! and those the upstream closed, so that none waits in `CLOSE_WAIT` for
//! the next request; it stops when the pool is empty. The request's head
//! and body on their way up are written by [`request`].

use std::collections::VecDeque;
use std::io;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Response, StatusCode};
use hyper::body::{Body, Frame, SizeHint};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use super::body::RequestBody;
use super::client::{PoolSettings, UpstreamTls, UpstreamTlsError};
use super::error::BodyError;
use super::socket::{
    poll_read_some, read_some, write_all, MaybeTls, Prefixed, ReadSize, TlsSocket,
};
use crate::http1::chunked::Chunked;
use crate::http1::{self, BodyFraming, Field, Known, ResponseError, Version};
use request::{send_body, take_ready, Framer, Unsent};
pub(super) use request::{write_head, Sending};

/// The largest response head read, and the most fields in it.
const MAX_HEAD: usize = 256 * 1024;
const MAX_FIELDS: usize = 256;
/// What one read of a response asks for, at least.
const READ_BUF: usize = 16 * 1024;
/// How often, at most and at least, idle connections are looked over.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
const SWEEP_FLOOR: Duration = Duration::from_millis(100);
/// The room for a request head a pooled connection keeps.
const OUT_BUF: usize = 4096;

/// A worker's keep-alive connections to the upstream.
#[derive(Debug)]
pub(super) struct Pool {
    /// Where to connect: the host (a name or an address) and the port.
    host: String,
    port: u16,
    /// For an `https://` upstream: the client's TLS settings and the
    /// name its certificate must show.
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    connect_timeout: Duration,
    settings: PoolSettings,
    idle: Mutex<IdleList>,
}

#[derive(Debug, Default)]
struct IdleList {
    /// Idle connections, the oldest first.
    conns: VecDeque<Idle>,
    /// Whether a sweep is on its way.
    sweeping: bool,
}

#[derive(Debug)]
struct Idle {
    conn: Box<Conn>,
    since: Instant,
}

/// One connection to the upstream and what it keeps between exchanges
/// (boxed once, for its life: it moves between the pool and bodies).
#[derive(Debug)]
struct Conn {
    /// Shared with the request body's write while it goes on after the
    /// answer came.
    stream: Arc<MaybeTls>,
    /// Bytes read and not yet taken.
    buf: BytesMut,
    /// The request head being sent.
    out: Vec<u8>,
    /// The response head's fields.
    fields: Vec<Field>,
    /// The last answer ended at its head though its fields announced a
    /// body (a `304` or a HEAD's answer with a length, say): a broken
    /// upstream may send that body after all, so before the connection
    /// is used again its socket is read, not only its readiness looked
    /// at.
    wary: bool,
}

/// How an exchange failed.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) error: BodyError,
    /// No connection could be made.
    pub(super) connect: bool,
    /// The upstream closed or reset the connection before any byte of an
    /// answer (most often a pooled connection it had already given up):
    /// an idempotent request may be sent again on a fresh connection, as
    /// hyper's client does.
    pub(super) stale: bool,
}

impl Failure {
    fn new(error: impl Into<BodyError>) -> Self {
        Self {
            error: error.into(),
            connect: false,
            stale: false,
        }
    }

    fn connecting(err: io::Error) -> Self {
        Self {
            connect: true,
            ..Self::new(err)
        }
    }
}

/// The upstream closed the connection before a complete response.
#[derive(Debug, thiserror::Error)]
#[error("the upstream closed the connection before a complete response")]
pub(super) struct ClosedEarly;

/// The upstream's connection after it switched protocols (`101`), in
/// the response's extensions, for the tunnel to take: with the bytes it
/// sent past its answer's head.
#[derive(Clone, Debug)]
pub struct Switched(Arc<Mutex<Option<Prefixed<MaybeTls>>>>);

impl Switched {
    /// The connection, once.
    pub fn take(&self) -> Option<Prefixed<MaybeTls>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl Pool {
    /// An empty pool for `authority` (`host:port`, port 80 when absent,
    /// 443 over TLS), over TLS with `tls`'s settings when given.
    pub(super) fn new(
        authority: &http::uri::Authority,
        tls: Option<&UpstreamTls>,
        connect_timeout: Duration,
        settings: PoolSettings,
    ) -> Result<Self, UpstreamTlsError> {
        let host = authority.host();
        // An IPv6 address is written in brackets in a URL, not to connect.
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let tls = match tls {
            // No ALPN protocol offered, as by hyper's client for HTTP/1
            // alone: an upstream that knows no `http/1.1` still speaks it.
            Some(tls) => Some((Arc::new(tls.config.clone()), tls.server_name(host)?)),
            None => None,
        };
        Ok(Self {
            host: host.to_owned(),
            port: authority
                .port_u16()
                .unwrap_or(if tls.is_some() { 443 } else { 80 }),
            tls,
            connect_timeout,
            settings,
            idle: Mutex::default(),
        })
    }

    /// Another empty pool to the same place, for another worker.
    pub(super) fn another(&self) -> Self {
        Self {
            host: self.host.clone(),
            port: self.port,
            tls: self.tls.clone(),
            connect_timeout: self.connect_timeout,
            settings: self.settings,
            idle: Mutex::default(),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, IdleList> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many connections wait in the pool.
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle().conns.len()
    }

    /// The newest idle connection still open, if any.
    fn checkout(&self) -> Option<Box<Conn>> {
        let mut idle = self.idle();
        let now = Instant::now();
        while let Some(Idle { conn, since }) = idle.conns.pop_back() {
            if now.duration_since(since) >= self.settings.idle_timeout {
                // The rest are older still.
                idle.conns.clear();
                return None;
            }
            if conn.is_open() {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` for a next exchange, within the pool's bounds, and
    /// sees that a sweep will look at it.
    fn checkin(self: &Arc<Self>, mut conn: Box<Conn>) {
        if self.settings.max_idle == 0 {
            return;
        }
        if conn.buf.capacity() > READ_BUF {
            conn.buf = BytesMut::new();
        }
        if conn.out.capacity() > OUT_BUF {
            conn.out = Vec::with_capacity(OUT_BUF);
        }
        let mut idle = self.idle();
        let now = Instant::now();
        while idle
            .conns
            .front()
            .is_some_and(|i| now.duration_since(i.since) >= self.settings.idle_timeout)
        {
            idle.conns.pop_front();
        }
        if idle.conns.len() >= self.settings.max_idle {
            idle.conns.pop_front();
        }
        if !idle.sweeping {
            // Always within a worker's runtime; a connection that could
            // not be swept is not kept.
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return;
            };
            idle.sweeping = true;
            let every = self.settings.idle_timeout.clamp(SWEEP_FLOOR, SWEEP_EVERY);
            runtime.spawn(sweep(Arc::downgrade(self), every));
        }
        idle.conns.push_back(Idle { conn, since: now });
    }

    /// Closes the idle connections that have waited their time or that
    /// the upstream closed; `false` once none is left.
    fn sweep(&self) -> bool {
        let mut idle = self.idle();
        let now = Instant::now();
        let timeout = self.settings.idle_timeout;
        idle.conns
            .retain(|i| now.duration_since(i.since) < timeout && i.conn.is_open());
        if idle.conns.is_empty() {
            idle.sweeping = false;
        }
        idle.sweeping
    }

    /// A new connection: TCP within the connect timeout, then the TLS
    /// handshake for an `https://` upstream, bounded by the response
    /// timeout the whole exchange is (a failed handshake is a failure to
    /// connect, a 502; one that never ends, a 504: as with hyper's
    /// client).
    async fn connect(&self) -> Result<Box<Conn>, Failure> {
        let connecting = TcpStream::connect((self.host.as_str(), self.port));
        let tcp = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(err)) => return Err(Failure::connecting(err)),
            Err(_) => {
                return Err(Failure::connecting(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connect timed out",
                )))
            }
        };
        let _ = tcp.set_nodelay(true);
        let stream = match &self.tls {
            None => MaybeTls::Plain(tcp),
            Some((settings, name)) => {
                let (tcp, session) = TlsConnector::from(Arc::clone(settings))
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(Failure::connecting)?
                    .into_inner();
                MaybeTls::Tls(TlsSocket::new(tcp, session))
            }
        };
        Ok(Box::new(Conn {
            stream: Arc::new(stream),
            buf: BytesMut::new(),
            out: Vec::with_capacity(OUT_BUF),
            fields: Vec::new(),
            wary: false,
        }))
    }

    /// Sends a request upstream (its head written by `head`, its body
    /// `body` framed as `sending` says) and reads the answer's head; the
    /// body streams from the returned response. `fresh`: on a new
    /// connection, never a pooled one (the retry).
    pub(super) async fn send(
        self: &Arc<Self>,
        fresh: bool,
        head: impl FnOnce(&mut Vec<u8>),
        body: Option<RequestBody>,
        sending: Sending,
        head_request: bool,
        table: Option<&Mutex<Vec<Field>>>,
    ) -> Result<Response<NativeBody>, Failure> {
        let pooled = if fresh { None } else { self.checkout() };
        let mut conn = match pooled {
            Some(conn) => conn,
            None => self.connect().await?,
        };
        conn.out.clear();
        head(&mut conn.out);
        let (answer, sent) = conn.exchange(body, sending, head_request).await?;
        let reusable = matches!(sent, Sent::Whole) && answer.persists() && answer.status != 101;
        let writing = match sent {
            Sent::Going(task) => Some(task),
            Sent::Whole | Sent::Failed => None,
        };
        conn.respond(answer, reusable, writing, Arc::clone(self), table)
    }
}

/// Sweeps `pool`'s idle connections `every` so often while it has any
/// (and it is still in use).
async fn sweep(pool: Weak<Pool>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        match pool.upgrade() {
            Some(pool) if pool.sweep() => {}
            _ => return,
        }
    }
}

/// What became of the request when its answer's head came.
#[derive(Debug)]
enum Sent {
    /// Sent whole.
    Whole,
    /// Its write failed.
    Failed,
    /// Its body is still being written, by this task.
    Going(tokio::task::AbortHandle),
}

impl Conn {
    /// Whether the upstream has neither closed this idle connection nor
    /// sent anything on it ([`MaybeTls::is_quiet`]), looking into the
    /// socket itself when the connection is [`Conn::wary`].
    fn is_open(&self) -> bool {
        self.stream.is_quiet(self.wary)
    }

    /// Writes the head in `out`, then `body` while reading the answer's
    /// head. Also says whether the body was sent whole, or, when the
    /// answer came first, hands back the body's write, still going in a
    /// task of its own (an upstream may answer first and read the body
    /// after, an echo), to be stopped when the answer's body is done.
    async fn exchange(
        &mut self,
        mut body: Option<RequestBody>,
        sending: Sending,
        head_request: bool,
    ) -> Result<(http1::ResponseHead, Sent), Failure> {
        let Conn {
            stream,
            buf,
            out,
            fields,
            ..
        } = self;
        let mut got_bytes = false;
        let mut framer = Framer::new(sending);
        if let Some(ready) = body.as_mut() {
            match take_ready(ready, &mut framer, out).await {
                Ok(true) => body = None,
                Ok(false) => {}
                Err(err) => return Err(Failure::new(err)),
            }
        }
        let mut write_failed = write_all(&**stream, out).await.err();
        let mut write = match (body, &write_failed) {
            (Some(body), None) => Some(Box::pin(send_body(Arc::clone(stream), body, framer))),
            _ => None,
        };
        let head = {
            let mut read = pin!(read_head(stream, buf, fields, head_request, &mut got_bytes));
            loop {
                let Some(writing) = write.as_mut() else {
                    break read.await;
                };
                tokio::select! {
                    biased;
                    sent = writing => {
                        write = None;
                        match sent {
                            Ok(()) => {}
                            Err(Unsent::Body(err)) => return Err(Failure::new(err)),
                            // The upstream may have answered before it
                            // closed: that answer is read.
                            Err(Unsent::Io(err)) => write_failed = Some(err),
                        }
                    }
                    head = &mut read => break head,
                }
            }
        };
        let sent = match (write, &write_failed) {
            (Some(writing), _) => Sent::Going(tokio::spawn(writing).abort_handle()),
            (None, None) => Sent::Whole,
            (None, Some(_)) => Sent::Failed,
        };
        match head {
            Ok(head) => Ok((head, sent)),
            Err(err) => {
                let err = write_failed.map_or(err, Failure::new);
                let stale = !got_bytes && super::error::stale_connection(&*err.error);
                Err(Failure { stale, ..err })
            }
        }
    }

    /// The response `head` just read, with its body to be read off this
    /// connection; the connection goes back to `pool` after it when
    /// `reusable`. With a `table`, the fields stay in the head's bytes,
    /// which the body carries with the head ([`NativeBody::head`]), the
    /// parsed fields go to the table (which gives this connection its own
    /// in exchange: no allocation), and the response's `HeaderMap` is
    /// left empty (but for a `101`'s).
    fn respond(
        mut self: Box<Self>,
        head: http1::ResponseHead,
        reusable: bool,
        writing: Option<tokio::task::AbortHandle>,
        pool: Arc<Pool>,
        table: Option<&Mutex<Vec<Field>>>,
    ) -> Result<Response<NativeBody>, Failure> {
        let bytes = self.buf.split_to(head.len).freeze();
        let invalid = |why| Failure::new(ResponseError::Malformed(why));
        let status = StatusCode::from_u16(head.status).map_err(|_| invalid("status code"))?;
        let table = table.filter(|_| head.status != 101);
        let as_bytes = table.is_some();
        let mut headers = HeaderMap::with_capacity(if as_bytes { 0 } else { self.fields.len() });
        // A body framed otherwise has no length to pass on (RFC 9112
        // §6.3: Transfer-Encoding overrides Content-Length).
        let length_holds = matches!(head.body, BodyFraming::Length(_) | BodyFraming::Empty);
        // Whether the fields announce a body the head's status (or the
        // request's method) says there is not.
        let mut announced = false;
        for field in &self.fields {
            announced |= match field.known {
                Known::TransferEncoding => true,
                Known::ContentLength => field.value.of(&bytes).trim_ascii() != b"0",
                _ => false,
            };
            // Field values are what `HeaderValue` takes: the parser
            // refused any other byte.
            if as_bytes || (field.known == Known::ContentLength && !length_holds) {
                continue;
            }
            let name =
                HeaderName::from_bytes(field.name.of(&bytes)).map_err(|_| invalid("field name"))?;
            let span = field.value.start as usize..field.value.end as usize;
            let value = HeaderValue::from_maybe_shared(bytes.slice(span))
                .map_err(|_| invalid("field value"))?;
            headers.append(name, value);
        }
        if head.status == 101 {
            return (*self).switch(status, headers, writing);
        }
        if let Some(table) = table {
            std::mem::swap(
                &mut *table.lock().unwrap_or_else(PoisonError::into_inner),
                &mut self.fields,
            );
        }
        self.wary = head.body == BodyFraming::Empty && announced;
        let framing = match head.body {
            BodyFraming::Empty => Framing::Done,
            BodyFraming::Length(n) => Framing::Length(n),
            BodyFraming::Chunked => Framing::Chunked(Chunked::new()),
            BodyFraming::UntilClose => Framing::UntilClose,
        };
        let mut body = NativeBody {
            conn: Some(self),
            pool: reusable.then_some(pool),
            framing,
            writing: writing.map(Writing),
            read_size: ReadSize::new(),
            head: as_bytes.then_some((bytes, head)),
        };
        if matches!(body.framing, Framing::Done) {
            body.finish();
        }
        let mut res = Response::new(body);
        *res.status_mut() = status;
        *res.version_mut() = match head.version {
            Version::Http10 => http::Version::HTTP_10,
            Version::Http11 => http::Version::HTTP_11,
        };
        *res.headers_mut() = headers;
        Ok(res)
    }
}

impl Conn {
    /// The `101` answer: no body, and the connection goes with it to be
    /// spliced (its upgrade was asked for: the caller checks).
    fn switch(
        mut self,
        status: StatusCode,
        headers: HeaderMap,
        writing: Option<tokio::task::AbortHandle>,
    ) -> Result<Response<NativeBody>, Failure> {
        if let Some(writing) = writing {
            writing.abort();
        }
        let prefix = self.buf.split().freeze();
        // Shared only with a request body's write still going on.
        let io = Arc::try_unwrap(self.stream).map_err(|_| {
            Failure::new(ResponseError::Malformed(
                "switched protocols while the request body was being sent",
            ))
        })?;
        let mut res = Response::new(NativeBody {
            conn: None,
            pool: None,
            framing: Framing::Done,
            writing: None,
            read_size: ReadSize::new(),
            head: None,
        });
        *res.status_mut() = status;
        *res.headers_mut() = headers;
        res.extensions_mut()
            .insert(Switched(Arc::new(Mutex::new(Some(Prefixed {
                prefix,
                io,
            })))));
        Ok(res)
    }
}

/// Reads the response head into `buf` (skipping interim `1xx` answers
/// but a `101`), parsing its fields into `fields`; `got_bytes` is set
/// once any byte of an answer came.
async fn read_head(
    stream: &MaybeTls,
    buf: &mut BytesMut,
    fields: &mut Vec<Field>,
    head_request: bool,
    got_bytes: &mut bool,
) -> Result<http1::ResponseHead, Failure> {
    // An interim answer that says close, or whose framing fields were
    // faulty, leaves the connection untrusted after the final one.
    let mut interim_close = false;
    loop {
        if !buf.is_empty() {
            match http1::parse_response(buf, head_request, MAX_HEAD, MAX_FIELDS, fields) {
                Ok(Some(head)) if (100..200).contains(&head.status) && head.status != 101 => {
                    interim_close |= !head.persists();
                    buf.advance(head.len);
                    continue;
                }
                Ok(Some(mut head)) => {
                    head.connection.close |= interim_close;
                    return Ok(head);
                }
                Ok(None) => {}
                Err(err) => return Err(Failure::new(err)),
            }
        }
        if buf.capacity() - buf.len() < READ_BUF / 4 {
            buf.reserve(READ_BUF);
        }
        match read_some(stream, buf, usize::MAX).await {
            Ok(0) => return Err(Failure::new(ClosedEarly)),
            Ok(_) => *got_bytes = true,
            Err(err) => return Err(Failure::new(err)),
        }
    }
}

/// How much of a response body is left.
#[derive(Debug)]
enum Framing {
    Length(u64),
    Chunked(Chunked),
    UntilClose,
    Done,
}

/// A response body read off an upstream connection of [`Pool`].
#[derive(Debug)]
pub struct NativeBody {
    /// `None` once the body has ended.
    conn: Option<Box<Conn>>,
    /// Where the connection goes after the body, when it may be reused.
    pool: Option<Arc<Pool>>,
    framing: Framing,
    /// The request body's write, when the answer came before its end:
    /// stopped when this body ends or is dropped.
    writing: Option<Writing>,
    /// What the next read asks for.
    read_size: ReadSize,
    /// The answer's head as it came (interim answers left out), when its
    /// fields were left there rather than put in the response's
    /// `HeaderMap` (and parsed into the table the caller gave): crawlgate's
    /// own server layer copies them.
    head: Option<(Bytes, http1::ResponseHead)>,
}

/// A task that is stopped when this is dropped.
#[derive(Debug)]
struct Writing(tokio::task::AbortHandle);

impl Drop for Writing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl NativeBody {
    /// The answer's head as it came, when the response's fields are in it
    /// rather than in its `HeaderMap`.
    pub(super) fn head(&self) -> Option<(&Bytes, &http1::ResponseHead)> {
        self.head.as_ref().map(|(bytes, head)| (bytes, head))
    }

    /// The body has ended: the connection goes back to the pool when it
    /// may and nothing was read past the end, else it is closed.
    fn finish(&mut self) {
        self.framing = Framing::Done;
        self.writing = None;
        if let (Some(conn), Some(pool)) = (self.conn.take(), self.pool.take()) {
            if conn.buf.is_empty() && !conn.stream.holds_plaintext() {
                pool.checkin(conn);
            }
        }
    }

    /// The next piece of the body from what was read, if there is one.
    fn take(&mut self) -> Result<Option<Bytes>, BodyError> {
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return Ok(None);
            };
            let buf = &mut conn.buf;
            if buf.is_empty() {
                return Ok(None);
            }
            // A piece of data, whether the body ended, whether bytes were
            // read without either (a chunk's framing).
            let (data, done, progress) = match &mut self.framing {
                Framing::Length(left) => {
                    let n = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                    *left -= n as u64;
                    (Some(buf.split_to(n).freeze()), *left == 0, true)
                }
                Framing::UntilClose => (Some(buf.split().freeze()), false, true),
                Framing::Chunked(reader) => {
                    let read = reader.decode(buf).map_err(|err| -> BodyError {
                        Box::new(io::Error::new(io::ErrorKind::InvalidData, err))
                    })?;
                    let data = if read.data.is_empty() {
                        buf.advance(read.consumed);
                        None
                    } else {
                        buf.advance(read.data.start);
                        let data = buf.split_to(read.data.len()).freeze();
                        buf.advance(read.consumed - read.data.end);
                        Some(data)
                    };
                    (data, read.done, read.consumed > 0)
                }
                Framing::Done => (None, false, false),
            };
            if done {
                self.finish();
            }
            if data.is_some() || done || !progress {
                return Ok(data);
            }
        }
    }
}

impl Body for NativeBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        loop {
            if let Some(data) = this.take()? {
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            // An ended body has given its connection up.
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            let room = this.read_size.room(&mut conn.buf);
            let read = ready!(poll_read_some(&*conn.stream, cx, &mut conn.buf, room));
            if let Ok(n) = read {
                this.read_size.grow(n, room);
            }
            match read {
                Ok(0) if matches!(this.framing, Framing::UntilClose) => {
                    this.framing = Framing::Done;
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Ok(0) => return Poll::Ready(Some(Err(Box::new(ClosedEarly)))),
                Ok(_) => {}
                Err(err) => return Poll::Ready(Some(Err(Box::new(err)))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.framing, Framing::Done | Framing::Length(0))
    }

    fn size_hint(&self) -> SizeHint {
        match self.framing {
            Framing::Length(n) => SizeHint::with_exact(n),
            Framing::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

mod request;
#[cfg(test)]
mod tests;
