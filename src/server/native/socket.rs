//! The connection's socket as the native layer uses it: the reads and
//! writes of [`crate::proxy::socket`] (through a shared `&TcpStream`, so
//! that a request body is read while the answer is written), the
//! lingering close, and the connection handed to a tunnel.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub(super) use crate::proxy::socket::{read_some, try_read, write_all, ReadSize};

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
