//! Reads and writes through a shared reference to a connection, for
//! crawlgate's own HTTP/1.1 layer on both sides of the proxy (the
//! client's connection in `crate::server`, the upstream's in
//! [`super::conn`]): one half can read while the other writes without
//! splitting the stream, and a read that empties the socket tells tokio
//! so. A [`Socket`] is a plain `TcpStream`, or a TLS session over one
//! ([`TlsSocket`]: a client's on the TLS port, or an `https://`
//! upstream's), or either ([`MaybeTls`], an upstream connection). And a
//! connection handed to a tunnel with the bytes read past its last head
//! ([`Prefixed`]).

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

mod tls;
pub use tls::TlsSocket;

/// A connection read and written through a shared reference, without
/// waiting: each operation says `WouldBlock` when it cannot go on, and
/// the matching `poll_*_ready` then waits for the socket (a `WouldBlock`
/// has told tokio that the readiness it had is used up). tokio keeps one
/// waker per direction: one task at a time may wait to read, and one to
/// write.
pub trait Socket {
    /// Ready when a read may give bytes (or the end).
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// Ready when a write may take bytes.
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// One read of at most `most` bytes into the spare room of `buf`
    /// (which must have some); `Ok(0)` at the end.
    fn try_read_most(&self, buf: &mut BytesMut, most: usize) -> io::Result<usize>;
    /// One write of what it takes of `bytes`.
    fn try_write(&self, bytes: &[u8]) -> io::Result<usize>;
    /// One write of what it takes of `parts`, in order.
    fn try_write_vectored(&self, parts: &[IoSlice<'_>]) -> io::Result<usize>;
    /// Sends on what earlier writes left with the socket (a TLS session's
    /// records): `Ok(true)` when nothing is left.
    fn try_flush(&self) -> io::Result<bool> {
        Ok(true)
    }
    /// Tells the peer, if the socket can say it now without waiting,
    /// that nothing more will be sent (a TLS `close_notify`), before a
    /// close that does not linger.
    fn say_closing(&self) {}
    /// The TCP connection underneath.
    fn tcp(&self) -> &TcpStream;
}

impl Socket for TcpStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_read_ready(self, cx)
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_write_ready(self, cx)
    }

    /// A read that leaves room over has emptied the socket's queue, and
    /// tokio is told so, as its own `poll_read` does: the next wait is
    /// then for new bytes, not a readiness already used up that would
    /// cost a read answered "would block" (one per request on a
    /// keep-alive connection).
    fn try_read_most(&self, buf: &mut BytesMut, most: usize) -> io::Result<usize> {
        let room = (buf.capacity() - buf.len()).min(most);
        // A read into no room would say "end of stream".
        debug_assert!(room > 0, "a read needs room");
        read_emptying(self, room, || {
            self.try_read_buf(&mut (&mut *buf).limit(room))
        })
    }

    fn try_write(&self, bytes: &[u8]) -> io::Result<usize> {
        TcpStream::try_write(self, bytes)
    }

    fn try_write_vectored(&self, parts: &[IoSlice<'_>]) -> io::Result<usize> {
        TcpStream::try_write_vectored(self, parts)
    }

    fn tcp(&self) -> &TcpStream {
        self
    }
}

/// A connection to the upstream: plain, or TLS for an `https://` one.
#[derive(Debug)]
pub enum MaybeTls {
    /// `http://`.
    Plain(TcpStream),
    /// `https://`, its handshake done.
    Tls(TlsSocket),
}

impl MaybeTls {
    /// Whether the peer has neither closed this idle connection nor sent
    /// anything on it. Known from the readiness tokio holds, without a
    /// system call unless the socket is readable or `look` asks for a look
    /// into the socket itself: tokio learns of bytes only when its driver
    /// turns. Over TLS any byte that came makes the session unfit, even
    /// one of a record with nothing for it (a late ticket, a key update):
    /// part of an unasked answer's record cannot be told from a whole
    /// record of the session's own without reading it to its end.
    pub fn is_quiet(&self, look: bool) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let peek = || {
            matches!(
                socket2::SockRef::from(self.tcp()).peek(&mut [std::mem::MaybeUninit::uninit(); 1]),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock
            )
        };
        match self {
            Self::Plain(tcp) => match tcp.poll_read_ready(&mut cx) {
                Poll::Pending if !look => true,
                Poll::Pending => peek(),
                Poll::Ready(Err(_)) => false,
                // A readiness left over from the last read, or really
                // bytes (an end, an unasked answer): one read tells.
                Poll::Ready(Ok(())) => matches!(
                    tcp.try_read(&mut [0u8; 1]),
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock
                ),
            },
            Self::Tls(tls) if tls.holds_plaintext() => false,
            Self::Tls(tls) => match tls.tcp().poll_read_ready(&mut cx) {
                Poll::Pending if !look => true,
                Poll::Ready(Err(_)) => false,
                // A readiness left over from the last read, or bytes.
                _ => peek(),
            },
        }
    }

    /// Whether bytes (or the end) were taken in past what was read: a TLS
    /// session's plaintext not yet read.
    pub fn holds_plaintext(&self) -> bool {
        match self {
            Self::Plain(_) => false,
            Self::Tls(tls) => tls.holds_plaintext(),
        }
    }
}

impl Socket for MaybeTls {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Self::Plain(tcp) => TcpStream::poll_read_ready(tcp, cx),
            Self::Tls(tls) => tls.poll_read_ready(cx),
        }
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tcp().poll_write_ready(cx)
    }

    fn try_read_most(&self, buf: &mut BytesMut, most: usize) -> io::Result<usize> {
        match self {
            Self::Plain(tcp) => tcp.try_read_most(buf, most),
            Self::Tls(tls) => tls.try_read_most(buf, most),
        }
    }

    fn try_write(&self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(tcp) => TcpStream::try_write(tcp, bytes),
            Self::Tls(tls) => tls.try_write(bytes),
        }
    }

    fn try_write_vectored(&self, parts: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Self::Plain(tcp) => TcpStream::try_write_vectored(tcp, parts),
            Self::Tls(tls) => tls.try_write_vectored(parts),
        }
    }

    fn try_flush(&self) -> io::Result<bool> {
        match self {
            Self::Plain(_) => Ok(true),
            Self::Tls(tls) => tls.try_flush(),
        }
    }

    fn say_closing(&self) {
        if let Self::Tls(tls) = self {
            tls.say_closing();
        }
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(tcp) => tcp,
            Self::Tls(tls) => tls.tcp(),
        }
    }
}

/// For a tunnel (a WebSocket to the upstream).
impl AsyncRead for MaybeTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Self::Tls(tls) => Pin::new(tls).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_write(cx, bytes),
            Self::Tls(tls) => Pin::new(tls).poll_write(cx, bytes),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Self::Tls(tls) => Pin::new(tls).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Self::Tls(tls) => Pin::new(tls).poll_shutdown(cx),
        }
    }
}

/// One read by `read` off `tcp`, of at most `room` bytes, that tells
/// tokio when it has emptied the socket's queue (it left room over), as
/// tokio's own `poll_read` does.
pub fn read_emptying(
    tcp: &TcpStream,
    room: usize,
    read: impl FnOnce() -> io::Result<usize>,
) -> io::Result<usize> {
    let mut got = None;
    let result = tcp.try_io(Interest::READABLE, || {
        let n = read()?;
        got = Some(n);
        if 0 < n && n < room {
            // Clears the readiness; the count is in `got`.
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    match (result, got) {
        (Err(err), Some(n)) if err.kind() == io::ErrorKind::WouldBlock => Ok(n),
        (result, _) => result,
    }
}

/// Waits until `stream` may have bytes to read.
pub async fn readable<S: Socket + ?Sized>(stream: &S) -> io::Result<()> {
    poll_fn(|cx| stream.poll_read_ready(cx)).await
}

/// Reads what `stream` has, at most `most` bytes, into the spare room of
/// `buf` (which must have some); `Ok(0)` at its end.
pub async fn read_some<S: Socket + ?Sized>(
    stream: &S,
    buf: &mut BytesMut,
    most: usize,
) -> io::Result<usize> {
    poll_fn(|cx| poll_read_some(stream, cx, buf, most)).await
}

/// One read of what `stream` has into the spare room of `buf`, without
/// waiting: `WouldBlock` when it has nothing.
pub fn try_read<S: Socket + ?Sized>(stream: &S, buf: &mut BytesMut) -> io::Result<usize> {
    stream.try_read_most(buf, usize::MAX)
}

/// Writes all of `bytes` to `stream`, and sends on what it kept of them.
pub async fn write_all<S: Socket + ?Sized>(stream: &S, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        poll_fn(|cx| stream.poll_write_ready(cx)).await?;
        match stream.try_write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    flush(stream).await
}

/// Writes all of `parts`, one after another, to `stream`, in as few
/// writes as the socket takes them.
pub async fn write_all_vectored<S: Socket + ?Sized>(
    stream: &S,
    mut parts: &mut [IoSlice<'_>],
) -> io::Result<()> {
    // Leading empty parts are skipped.
    IoSlice::advance_slices(&mut parts, 0);
    while !parts.is_empty() {
        poll_fn(|cx| stream.poll_write_ready(cx)).await?;
        match stream.try_write_vectored(parts) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut parts, n),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    flush(stream).await
}

/// Sends on what `stream` kept of the bytes written to it.
async fn flush<S: Socket + ?Sized>(stream: &S) -> io::Result<()> {
    poll_fn(|cx| poll_flush(stream, cx)).await
}

/// Polls for [`Socket::try_flush`] to have sent everything.
pub fn poll_flush<S: Socket + ?Sized>(stream: &S, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    loop {
        match stream.try_flush() {
            Ok(true) => return Poll::Ready(Ok(())),
            Ok(false) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Poll::Ready(Err(err)),
        }
        std::task::ready!(stream.poll_write_ready(cx))?;
    }
}

/// Polls for one read of what `stream` has, at most `most` bytes, into
/// the spare room of `buf` (which must have some); `Ok(0)` at its end.
pub fn poll_read_some<S: Socket + ?Sized>(
    stream: &S,
    cx: &mut Context<'_>,
    buf: &mut BytesMut,
    most: usize,
) -> Poll<io::Result<usize>> {
    loop {
        std::task::ready!(stream.poll_read_ready(cx))?;
        match stream.try_read_most(buf, most) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            read => return Poll::Ready(read),
        }
    }
}

/// The size of a body's reads, for a body read off a socket: it starts
/// at 16 KiB and doubles, up to 128 KiB, each time a read fills all the
/// room it had (a large transfer: fewer reads, and pieces large enough
/// to be written on without a copy).
#[derive(Clone, Copy, Debug)]
pub struct ReadSize(usize);

impl ReadSize {
    /// The first read's size.
    pub const FIRST: usize = 16 * 1024;
    /// The most one read takes.
    pub const MAX: usize = 128 * 1024;

    /// Reads of [`Self::FIRST`] bytes to start with.
    pub fn new() -> Self {
        Self(Self::FIRST)
    }

    /// Makes room in `buf` for the next read; returns the most it should
    /// take.
    pub fn room(self, buf: &mut BytesMut) -> usize {
        if buf.capacity() - buf.len() < self.0 / 4 {
            buf.reserve(self.0);
        }
        (buf.capacity() - buf.len()).min(self.0)
    }

    /// Notes a read of `read` bytes into `room`.
    pub fn grow(&mut self, read: usize, room: usize) {
        if read == room && self.0 < Self::MAX {
            self.0 *= 2;
        }
    }
}

impl Default for ReadSize {
    fn default() -> Self {
        Self::new()
    }
}

/// A connection handed to a tunnel after a switch of protocols: the
/// bytes its peer sent past the last head (read already) come first,
/// then the connection. The client's, from crawlgate's own server layer,
/// and the upstream's, from [`super::conn`].
#[derive(Debug)]
pub struct Prefixed<S = TcpStream> {
    /// Read already, not yet passed on.
    pub prefix: Bytes,
    /// The connection.
    pub io: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
