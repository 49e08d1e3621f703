//! The connection's socket as the native layer uses it: reads and writes
//! through a shared `&TcpStream` (so that a request body is read while
//! the answer is written) that tell tokio when a read emptied it, the lingering
//! close, and the connection handed to a tunnel.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use super::{LINGER_BYTES, LINGER_TIME};

/// Closes `stream` the way that lets its client read the whole answer:
/// the sending half first, then what the client still sends is read and
/// dropped for a moment (a close with unread bytes would reset the
/// connection, and the client could lose the answer before reading it).
pub(super) async fn linger(mut stream: TcpStream) {
    if tokio::io::AsyncWriteExt::shutdown(&mut stream)
        .await
        .is_err()
    {
        return;
    }
    let drain = async {
        let mut sink = [0u8; 4096];
        let mut left = LINGER_BYTES;
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER_TIME, drain).await;
}

/// Reads what `stream` has into the spare room of `buf` (which must have
/// some); `Ok(0)` at its end.
pub(super) async fn read_some(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        match try_read(stream, buf) {
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
pub(super) fn try_read(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
    let room = buf.capacity() - buf.len();
    let mut got = None;
    let read = stream.try_io(Interest::READABLE, || {
        let n = stream.try_read_buf(buf)?;
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
pub(super) async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
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

/// The client's connection handed to a tunnel: the bytes it sent after
/// its request (read already) first, then the connection.
pub(super) struct Prefixed {
    pub(super) prefix: Bytes,
    pub(super) io: TcpStream,
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
