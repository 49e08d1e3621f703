//! Reads and writes through a shared `&TcpStream`, for crawlgate's own
//! HTTP/1.1 layer on both sides of the proxy (the client's connection in
//! `crate::server`, the upstream's in [`super::conn`]): one half can read
//! while the other writes without splitting the stream, and a read that
//! empties the socket tells tokio so. And a connection handed to a tunnel
//! with the bytes read past its last head ([`Prefixed`]).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Reads what `stream` has, at most `most` bytes, into the spare room of
/// `buf` (which must have some); `Ok(0)` at its end.
pub async fn read_some(stream: &TcpStream, buf: &mut BytesMut, most: usize) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        match try_read_most(stream, buf, most) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            read => return read,
        }
    }
}

/// One read of what `stream` has into the spare room of `buf`, without
/// waiting: `WouldBlock` when it has nothing. A read that leaves room
/// over has emptied the socket's queue, and tokio is told so, as its own
/// `poll_read` does: the next wait is then for new bytes, not a readiness
/// already used up that would cost a read answered "would block" (one
/// per request on a keep-alive connection).
pub fn try_read(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
    try_read_most(stream, buf, usize::MAX)
}

/// [`try_read`], of at most `most` bytes.
fn try_read_most(stream: &TcpStream, buf: &mut BytesMut, most: usize) -> io::Result<usize> {
    let room = (buf.capacity() - buf.len()).min(most);
    // A read into no room would say "end of stream".
    debug_assert!(room > 0, "a read needs room");
    let mut got = None;
    let read = stream.try_io(Interest::READABLE, || {
        let n = stream.try_read_buf(&mut (&mut *buf).limit(room))?;
        got = Some(n);
        if 0 < n && n < room {
            // Clears the readiness; the count is in `got`.
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    match (read, got) {
        (Err(err), Some(n)) if err.kind() == io::ErrorKind::WouldBlock => Ok(n),
        (read, _) => read,
    }
}

/// Writes all of `bytes` to `stream`.
pub async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Writes all of `parts`, one after another, to `stream`, in as few
/// writes as the socket takes them.
pub async fn write_all_vectored(
    stream: &TcpStream,
    mut parts: &mut [IoSlice<'_>],
) -> io::Result<()> {
    // Leading empty parts are skipped.
    IoSlice::advance_slices(&mut parts, 0);
    while !parts.is_empty() {
        stream.writable().await?;
        match stream.try_write_vectored(parts) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut parts, n),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Polls for one read of what `stream` has, at most `most` bytes, into
/// the spare room of `buf` (which must have some); `Ok(0)` at its end.
pub fn poll_read_some(
    stream: &TcpStream,
    cx: &mut Context<'_>,
    buf: &mut BytesMut,
    most: usize,
) -> Poll<io::Result<usize>> {
    loop {
        std::task::ready!(stream.poll_read_ready(cx))?;
        match try_read_most(stream, buf, most) {
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
pub struct Prefixed {
    /// Read already, not yet passed on.
    pub prefix: Bytes,
    /// The connection.
    pub io: TcpStream,
}

impl AsyncRead for Prefixed {
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

impl AsyncWrite for Prefixed {
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
