//! A TLS session over a TCP connection, read and written through a
//! shared reference ([`Socket`]) as crawlgate's own HTTP/1.1 layer does a
//! plain one: a request body is read while the answer is written (the
//! server's side of a session), or written while the answer is read (the
//! upstream's). The handshake is done already (by `tokio_rustls`, whose
//! stream is taken apart); rustls
//! decrypts what is read into its own buffer of plaintext, from which
//! reads copy, and encrypts what is written into records that are sent
//! at once, or kept until the socket takes them.
//!
//! rustls's buffers are its own: at rest, a session keeps its read
//! buffer (4 KiB once shrunk) and no plaintext; a server connection's
//! scratch buffers are taken only when plaintext is there, as on a plain
//! connection.

use std::io::{self, BufRead, IoSlice, Read, Write};
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::BytesMut;
use rustls::Connection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::Socket;

/// A TLS session over `tcp`, after its handshake: the server's or the
/// client's side of it.
#[derive(Debug)]
pub struct TlsSocket {
    tcp: TcpStream,
    /// Boxed: a session is large, and the connection's task holds this
    /// for its life.
    tls: Box<Mutex<Connection>>,
}

impl TlsSocket {
    /// The session `tls` over `tcp`, its handshake done.
    pub fn new(tcp: TcpStream, tls: impl Into<Connection>) -> Self {
        Self {
            tcp,
            tls: Box::new(Mutex::new(tls.into())),
        }
    }

    fn session(&self) -> MutexGuard<'_, Connection> {
        self.tls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One read of plaintext, handed to `take` piece by piece (it copies
    /// what it can and says how much; it is called again while it takes
    /// whole pieces and rustls has more): the plaintext rustls holds,
    /// else what the connection has, decrypted. `Ok(0)` at the end (a
    /// session the client closed, or a `take` with no room); `WouldBlock`
    /// when a whole record has not come yet.
    fn try_read_with(&self, mut take: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        let mut tls = self.session();
        loop {
            let mut reader = tls.reader();
            match reader.fill_buf() {
                Ok(first) => {
                    let mut whole = first.len();
                    let mut n = take(first);
                    let mut total = 0;
                    loop {
                        reader.consume(n);
                        total += n;
                        if n == 0 || n < whole {
                            break;
                        }
                        match reader.fill_buf() {
                            Ok(more) if !more.is_empty() => {
                                whole = more.len();
                                n = take(more);
                            }
                            _ => break,
                        }
                    }
                    return Ok(total);
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err),
            }
            // Nothing decrypted: read records off the connection
            // (`WouldBlock` when it has none, which also tells tokio).
            tls.read_tls(&mut Raw(&self.tcp))?;
            if let Err(err) = tls.process_new_packets() {
                // The alert rustls queued goes out if it can.
                let _ = send(&mut tls, &self.tcp);
                return Err(io::Error::new(io::ErrorKind::InvalidData, err));
            }
            // Records the session queued while reading (an alert, say) go
            // out now if the connection takes them, else with the next
            // write.
            if tls.wants_write() {
                let _ = send(&mut tls, &self.tcp);
            }
        }
    }

    /// Whether rustls holds plaintext not yet read, or the session's end.
    pub(super) fn holds_plaintext(&self) -> bool {
        !matches!(
            self.session().reader().fill_buf(),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock
        )
    }

    /// Queues a `close_notify` (rustls queues it once) and sends what is
    /// left to send.
    fn try_close(&self) -> io::Result<bool> {
        let mut tls = self.session();
        tls.send_close_notify();
        send(&mut tls, &self.tcp)
    }
}

/// Sends the records `tls` holds: `Ok(false)` when the connection took
/// only some (the rest stays with `tls`).
fn send(tls: &mut Connection, tcp: &TcpStream) -> io::Result<bool> {
    while tls.wants_write() {
        match tls.write_tls(&mut Raw(tcp)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(err) => return Err(err),
        }
    }
    Ok(true)
}

/// The connection as `std::io` sees it, without waiting.
struct Raw<'a>(&'a TcpStream);

/// A read that leaves room over has emptied the socket's queue, and
/// tokio is told so (as for a plain connection, `proxy::socket`): the
/// next wait is for new records, not a readiness already used up.
impl Read for Raw<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let tcp = self.0;
        super::read_emptying(tcp, buf.len(), || tcp.try_read(buf))
    }
}

impl Write for Raw<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Socket for TlsSocket {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Plaintext rustls holds (a next request read with this one), or
        // its end, is there already.
        if self.holds_plaintext() {
            Poll::Ready(Ok(()))
        } else {
            self.tcp.poll_read_ready(cx)
        }
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.tcp.poll_write_ready(cx)
    }

    fn try_read_most(&self, buf: &mut BytesMut, most: usize) -> io::Result<usize> {
        let mut room = (buf.capacity() - buf.len()).min(most);
        debug_assert!(room > 0, "a read needs room");
        self.try_read_with(|plain| {
            let n = plain.len().min(room);
            buf.extend_from_slice(&plain[..n]);
            room -= n;
            n
        })
    }

    fn try_write(&self, bytes: &[u8]) -> io::Result<usize> {
        self.try_write_vectored(&[IoSlice::new(bytes)])
    }

    /// Takes bytes only when the records of earlier ones have gone (so
    /// that what rustls keeps stays bounded by one write), encrypts
    /// them and sends what the connection takes.
    fn try_write_vectored(&self, parts: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut tls = self.session();
        if !send(&mut tls, &self.tcp)? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = tls.writer().write_vectored(parts)?;
        send(&mut tls, &self.tcp)?;
        Ok(n)
    }

    fn try_flush(&self) -> io::Result<bool> {
        send(&mut self.session(), &self.tcp)
    }

    fn say_closing(&self) {
        let _ = self.try_close();
    }

    fn tcp(&self) -> &TcpStream {
        &self.tcp
    }
}

/// For a tunnel (a WebSocket over HTTPS) and the lingering close.
impl AsyncRead for TlsSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            std::task::ready!(Socket::poll_read_ready(&*self, cx))?;
            let read = self.try_read_with(|plain| {
                let n = plain.len().min(buf.remaining());
                buf.put_slice(&plain[..n]);
                n
            });
            match read {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Poll::Ready(Err(err)),
            }
        }
    }
}

impl AsyncWrite for TlsSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            std::task::ready!(Socket::poll_write_ready(&*self, cx))?;
            match Socket::try_write(&*self, bytes) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                written => return Poll::Ready(written),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        super::poll_flush(&*self, cx)
    }

    /// A `close_notify`, then the TCP connection's sending half closed.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.try_close() {
                Ok(true) => break,
                Ok(false) => {}
                Err(err) => return Poll::Ready(Err(err)),
            }
            std::task::ready!(self.tcp.poll_write_ready(cx))?;
        }
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::proxy::socket::{read_some, write_all};

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A server's session over a real handshake on loopback, taken apart
    /// as the server does, and the client's end of it.
    async fn pair() -> (
        TlsSocket,
        tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    ) {
        let (server, client) = sessions().await;
        let (tcp, session) = server.into_inner();
        (TlsSocket::new(tcp, session), client)
    }

    /// Both ends of a real TLS 1.3 handshake on loopback, with small
    /// socket buffers on the server's side of the connection.
    async fn sessions() -> (
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    ) {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
        let der = cert.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .expect("server config");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der).expect("root");
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accept = async {
            let (tcp, _) = listener.accept().await.expect("accept");
            socket2::SockRef::from(&tcp)
                .set_send_buffer_size(4096)
                .expect("send buffer");
            tokio_rustls::TlsAcceptor::from(Arc::new(server))
                .accept(tcp)
                .await
                .expect("server handshake")
        };
        let connect = async {
            // Small socket buffers: the server's writes fill them, and
            // rustls is left holding records the socket did not take.
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket.set_recv_buffer_size(4096).expect("receive buffer");
            let tcp = socket.connect(addr).await.expect("connect");
            let name = ServerName::try_from("localhost").expect("name");
            tokio_rustls::TlsConnector::from(Arc::new(client))
                .connect(name, tcp)
                .await
                .expect("client handshake")
        };
        tokio::join!(accept, connect)
    }

    /// An idle upstream connection over TLS (the client's side taken
    /// apart, as the upstream pool does) is fit for use while nothing
    /// came on it, and unfit once anything does: bytes, a `close_notify`
    /// alone (no FIN), even a record with nothing for it (a key update),
    /// which could as well be the start of an unasked answer's.
    #[tokio::test]
    async fn an_idle_upstream_session_is_quiet_until_anything_comes() {
        use super::super::MaybeTls;
        for end in ["key update", "bytes", "close_notify"] {
            let (mut server, client) = sessions().await;
            let (tcp, session) = client.into_inner();
            let conn = MaybeTls::Tls(TlsSocket::new(tcp, session));
            // The session's tickets come before a first answer, and are
            // read with it.
            server.write_all(b"x").await.expect("answer");
            server.flush().await.expect("sent");
            let mut buf = BytesMut::with_capacity(64);
            let n = read_some(&conn, &mut buf, 64).await.expect("answer");
            assert_eq!(&buf[..n], b"x");
            assert!(conn.is_quiet(false) && conn.is_quiet(true), "{end}: fit");
            match end {
                "key update" => server
                    .get_mut()
                    .1
                    .refresh_traffic_keys()
                    .expect("key update"),
                "bytes" => server
                    .write_all(b"HTTP/1.1 200 OK\r\n")
                    .await
                    .expect("write"),
                _ => server.get_mut().1.send_close_notify(),
            }
            server.flush().await.expect("sent");
            tokio::time::timeout(std::time::Duration::from_secs(5), conn.tcp().readable())
                .await
                .expect("a record within 5 s")
                .expect("readable");
            assert!(!conn.is_quiet(false), "{end}: seen from the readiness");
            assert!(!conn.is_quiet(true), "{end}: seen by a look");
            assert!(!conn.holds_plaintext(), "{end}: nothing read yet");
            if end == "bytes" {
                // Read in part: the rest stays with rustls, and the
                // session is unfit for the pool.
                let mut buf = BytesMut::with_capacity(4);
                let n = read_some(&conn, &mut buf, 4).await.expect("read");
                assert_eq!(n, 4);
                assert!(conn.holds_plaintext() && !conn.is_quiet(false));
            }
        }
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
    }

    /// Both ways at once through one shared session, each way larger than
    /// the socket buffers and rustls's own (so that each side waits on
    /// the other), byte for byte; then each side's close is seen as the
    /// end by the other.
    #[tokio::test]
    async fn reads_and_writes_go_on_at_once_and_end_cleanly() {
        const LEN: usize = 3 << 20;
        let (server, client) = pair().await;
        let (mut from_client, mut to_client) = tokio::io::split(client);
        let sent_up = pattern(LEN, 0x5a);
        let sent_down = pattern(LEN, 0xa5);
        let serving = async {
            let reading = async {
                let mut got = BytesMut::new();
                loop {
                    if got.capacity() - got.len() < 4096 {
                        got.reserve(64 << 10);
                    }
                    match read_some(&server, &mut got, 20_000).await {
                        Ok(0) => return got,
                        Ok(_) => {}
                        Err(err) => panic!("server read: {err}"),
                    }
                }
            };
            let writing = async {
                for piece in sent_down.chunks(100_000) {
                    write_all(&server, piece).await.expect("server write");
                    // Written means sent: nothing waits with rustls.
                    assert!(!server.session().wants_write(), "records left unsent");
                }
            };
            let (got, ()) = tokio::join!(reading, writing);
            got
        };
        let clienting = async {
            let writing = async {
                to_client.write_all(&sent_up).await.expect("client write");
                to_client.shutdown().await.expect("close_notify");
            };
            let reading = async {
                let mut got = Vec::new();
                let mut buf = vec![0u8; 16 << 10];
                while got.len() < LEN {
                    let n = from_client.read(&mut buf).await.expect("client read");
                    assert!(n > 0, "ended after {} bytes", got.len());
                    got.extend_from_slice(&buf[..n]);
                }
                got
            };
            let ((), got) = tokio::join!(writing, reading);
            got
        };
        let (server_got, client_got) =
            tokio::time::timeout(std::time::Duration::from_secs(20), async {
                tokio::join!(serving, clienting)
            })
            .await
            .expect("both ways within 20 s");
        assert!(
            server_got[..] == sent_up[..],
            "the server read what was sent"
        );
        assert!(client_got == sent_down, "the client read what was written");

        // The server's close: a close_notify the client reads as the end.
        let mut server = server;
        server.shutdown().await.expect("server close");
        let mut rest = Vec::new();
        let ended = from_client.read_to_end(&mut rest).await;
        assert!(ended.is_ok() && rest.is_empty(), "{ended:?} {rest:?}");
    }

    /// A record that does not decrypt is an error for the read, not
    /// bytes, and the session stays refused.
    #[tokio::test]
    async fn a_broken_record_is_an_error() {
        let (server, client) = pair().await;
        let (tcp, _) = client.into_inner();
        // An application-data record with garbage for its ciphertext.
        let mut record = vec![0x17, 0x03, 0x03, 0x00, 0x40];
        record.extend_from_slice(&[0xee; 0x40]);
        let mut tcp = tcp;
        tcp.write_all(&record).await.expect("write");
        let mut buf = BytesMut::with_capacity(1024);
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            read_some(&server, &mut buf, usize::MAX),
        )
        .await
        .expect("answered within 5 s");
        let err = read.expect_err("a broken record");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(buf.is_empty());
    }
}
