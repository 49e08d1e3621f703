//! The connection's socket as the native layer uses it: the reads and
//! writes of [`crate::proxy::socket`] (through a shared reference, so
//! that a request body is read while the answer is written), the
//! lingering close, and the connection handed to a tunnel. A plain
//! `TcpStream`, or a TLS session over one ([`crate::proxy::socket::TlsSocket`]).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

pub(super) use crate::proxy::socket::{
    read_some, readable, try_read, write_all, Prefixed, ReadSize, Socket,
};

use super::{LINGER_BYTES, LINGER_TIME};

/// A client's connection the native layer serves.
pub(in crate::server) trait Stream:
    Socket + AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static
{
}

impl<S> Stream for S where S: Socket + AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {}

/// Closes `stream` the way that lets its client read the whole answer:
/// the sending half first, then what the client still sends is read and
/// dropped for a moment (a close with unread bytes would reset the
/// connection, and the client could lose the answer before reading it).
pub(super) async fn linger<S: Stream>(mut stream: S) {
    // Bounded: over TLS the close is a record to send (a `close_notify`,
    // after any the session still holds), which a client that reads no
    // more would leave waiting.
    let closed =
        tokio::time::timeout(LINGER_TIME, tokio::io::AsyncWriteExt::shutdown(&mut stream)).await;
    if !matches!(closed, Ok(Ok(()))) {
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
