//! Reads and writes through a shared `&TcpStream`, for crawlgate's own
//! HTTP/1.1 layer on both sides of the proxy (the client's connection in
//! `crate::server`, the upstream's in [`super::conn`]): one half can read
//! while the other writes without splitting the stream, and a read that
//! empties the socket tells tokio so.

use std::io;
use std::task::{Context, Poll};

use bytes::BytesMut;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Reads what `stream` has into the spare room of `buf` (which must have
/// some); `Ok(0)` at its end.
pub async fn read_some(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
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
pub fn try_read(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
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

/// Polls for one read of what `stream` has into the spare room of `buf`
/// (which must have some); `Ok(0)` at its end.
pub fn poll_read_some(
    stream: &TcpStream,
    cx: &mut Context<'_>,
    buf: &mut BytesMut,
) -> Poll<io::Result<usize>> {
    loop {
        std::task::ready!(stream.poll_read_ready(cx))?;
        match try_read(stream, buf) {
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            read => return Poll::Ready(read),
        }
    }
}
