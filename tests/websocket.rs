//! Issue 10.3: WebSockets through crawlgate against a real WebSocket echo
//! upstream (tokio-tungstenite): the policy runs first, then the upgrade is
//! forwarded, the upstream's 101 comes back and the two connections are
//! spliced both ways, over plain HTTP/1.1 and over TLS, with an idle
//! timeout and a place under the connection cap.

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crawlgate::config::Overrides;
use futures_util::{SinkExt, StreamExt};
use http::HeaderMap;
use support::here::Here;
use support::tls::{self as t, Ca};
use support::{get, Proxy, Upstream, FIREFOX};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

/// A WebSocket upstream that echoes every message, closes when it gets the
/// text `close-please`, and records each handshake's request headers.
struct Echo {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<HeaderMap>>>,
}

impl Echo {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&heads);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = Arc::clone(&seen);
                tokio::spawn(async move {
                    // tungstenite's callback type returns its error response by value.
                    #[allow(clippy::result_large_err)]
                    let record = |req: &Request, res: Response| {
                        seen.lock().expect("lock").push(req.headers().clone());
                        Ok(res)
                    };
                    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, record).await
                    else {
                        return;
                    };
                    while let Some(Ok(msg)) = ws.next().await {
                        match msg {
                            Message::Text(text) if text.as_str() == "close-please" => {
                                let frame = CloseFrame {
                                    code: CloseCode::Normal,
                                    reason: "server says bye".into(),
                                };
                                let _ = ws.close(Some(frame)).await;
                            }
                            Message::Text(_) | Message::Binary(_) => {
                                let sent = ws.send(msg).await;
                                if sent.is_err() {
                                    return;
                                }
                            }
                            _ => {}
                        }
                    }
                });
            }
        });
        Self { addr, heads }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn heads(&self) -> Vec<HeaderMap> {
        self.heads.lock().expect("lock").clone()
    }
}

/// The client side of a WebSocket handshake through `stream`, as `ua`,
/// for `host` and `target`.
async fn open<S>(
    stream: S,
    host: &str,
    target: &str,
    ua: &str,
) -> Result<WebSocketStream<S>, tungstenite::Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let req = http::Request::builder()
        .uri(format!("ws://{host}{target}"))
        .header("host", host)
        .header("user-agent", ua)
        .header("connection", "keep-alive, Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header(
            "sec-websocket-key",
            tungstenite::handshake::client::generate_key(),
        )
        .body(())
        .expect("request");
    tokio_tungstenite::client_async(req, stream)
        .await
        .map(|(ws, _)| ws)
}

/// Messages both ways (small and 4 MiB), then a close from the client.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) {
    ws.send(Message::text("hello")).await.expect("send");
    let echoed = ws.next().await.expect("a reply").expect("frame");
    assert_eq!(echoed, Message::text("hello"));
    let big: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    ws.send(Message::binary(big.clone()))
        .await
        .expect("send big");
    let echoed = ws.next().await.expect("a reply").expect("frame");
    assert_eq!(echoed.into_data().as_ref(), &big[..], "4 MiB echoed intact");
}

async fn wait_closed<S: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<S>) -> bool {
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(frame) = ws.next().await {
            if frame.is_err() {
                break;
            }
        }
    });
    end.await.is_ok()
}

#[tokio::test]
async fn websockets_are_tunnelled_both_ways_and_closed_from_either_side() {
    let echo = Echo::start().await;
    let proxy = Proxy::start("", &echo.url()).await;

    // Close from the client.
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    let mut ws = open(tcp, "example.test", "/chat", FIREFOX)
        .await
        .expect("handshake through crawlgate");
    exchange(&mut ws).await;
    ws.close(None).await.expect("close");
    assert!(wait_closed(&mut ws).await, "the close completes");
    drop(ws);

    // Close from the upstream.
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    let mut ws = open(tcp, "example.test", "/chat", FIREFOX)
        .await
        .expect("handshake");
    ws.send(Message::text("close-please")).await.expect("send");
    let frame = ws.next().await.expect("a frame").expect("frame");
    match frame {
        Message::Close(Some(close)) => assert_eq!(close.reason.as_str(), "server says bye"),
        other => panic!("expected the upstream's close, got {other:?}"),
    }
    assert!(wait_closed(&mut ws).await, "the connection ends");
    // A client that has closed its socket leaves no tunnel behind: the stop
    // below drains at once instead of waiting out the grace period.
    drop(ws);
    let stopping = std::time::Instant::now();

    // The upstream saw the handshake with crawlgate's headers.
    let heads = echo.heads();
    assert_eq!(heads.len(), 2);
    assert_eq!(heads[0].get("x-crawler").expect("class"), "0");
    assert_eq!(heads[0].get("upgrade").expect("upgrade"), "websocket");
    assert!(heads[0].get("sec-websocket-key").is_some());
    assert_eq!(heads[0].get("x-forwarded-for").expect("xff"), "127.0.0.1");
    proxy.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "a tunnel outlived its client"
    );
}

#[tokio::test]
async fn the_policy_runs_before_an_upgrade() {
    let echo = Echo::start().await;
    let proxy = Proxy::start("", &echo.url()).await;
    // A robot upgrading to an action URL: 403, the upstream never sees it.
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    let err = open(tcp, "example.test", "/chat?do=vote", "curl/8.5.0")
        .await
        .expect_err("refused");
    match err {
        tungstenite::Error::Http(res) => assert_eq!(res.status(), 403),
        other => panic!("expected an HTTP answer, got {other}"),
    }
    // A `www.` host gets its redirect.
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    let err = open(tcp, "www.example.test", "/chat", FIREFOX)
        .await
        .expect_err("redirected");
    match err {
        tungstenite::Error::Http(res) => {
            assert_eq!(res.status(), 301);
            assert_eq!(
                res.headers().get("location").expect("location"),
                "http://example.test/chat"
            );
        }
        other => panic!("expected an HTTP answer, got {other}"),
    }
    assert!(echo.heads().is_empty(), "nothing reached the upstream");
    proxy.stop().await;
}

/// An upstream that does not speak WebSocket answers as it likes; its
/// answer reaches the client as it is, and the connection stays HTTP.
#[tokio::test]
async fn an_upstream_refusing_the_upgrade_has_its_answer_passed_through() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    let err = open(tcp, "example.test", "/chat", FIREFOX)
        .await
        .expect_err("no 101");
    match err {
        tungstenite::Error::Http(res) => {
            assert_eq!(res.status(), 200);
            assert_eq!(res.headers().get("x-upstream").expect("upstream's"), "yes");
        }
        other => panic!("expected an HTTP answer, got {other}"),
    }
    let seen = upstream.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("upgrade"), Some("websocket"));
    assert_eq!(seen[0].header("connection"), Some("upgrade"));
    // h2c is still ignored, never forwarded as an upgrade.
    let res = support::request(
        proxy.addr,
        "GET",
        "example.test",
        "/",
        Some(FIREFOX),
        "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings, close\r\n",
    )
    .await;
    assert_eq!(res.status, 200);
    assert!(upstream.requests()[1].header("upgrade").is_none());
    proxy.stop().await;
}

#[tokio::test]
async fn websockets_over_tls() {
    let echo = Echo::start().await;
    let ca = Ca::new();
    let certs = tempfile::tempdir().expect("tempdir");
    t::write_flat(certs.path(), "site.crt", &ca.leaf(&["example.test"]));
    let proxy = Proxy::start_tls(
        "",
        Overrides {
            upstream: Some(echo.url()),
            certs_dir: Some(certs.path().to_owned()),
            ..Overrides::default()
        },
    )
    .await;
    let tls_addr = proxy.tls_addr.expect("TLS listener");
    let stream = t::handshake(
        tls_addr,
        t::client_config(ca.roots(), &[b"http/1.1"]),
        Some("example.test"),
    )
    .await
    .expect("TLS handshake");
    let mut ws = open(stream, "example.test", "/chat", FIREFOX)
        .await
        .expect("WebSocket over TLS");
    exchange(&mut ws).await;
    ws.close(None).await.expect("close");
    assert!(wait_closed(&mut ws).await);
    drop(ws);
    let heads = echo.heads();
    assert_eq!(heads[0].get("x-forwarded-proto").expect("proto"), "https");
    proxy.stop().await;
}

/// An idle tunnel is closed after `proxy.websocket_idle_timeout`; a tunnel
/// holds its connection's place under `limits.max_connections`.
#[tokio::test(start_paused = true)]
async fn tunnels_time_out_when_idle_and_count_as_connections() {
    let echo = Echo::start().await;
    let proxy = Here::start(
        "[proxy]\nwebsocket_idle_timeout = \"500ms\"\n[limits]\nmax_connections = 1",
        &echo.url(),
    )
    .await;
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    let mut ws = open(tcp, "example.test", "/chat", FIREFOX)
        .await
        .expect("handshake");
    // Traffic keeps it open past the timeout.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        ws.send(Message::text("ping")).await.expect("send");
        assert_eq!(
            ws.next().await.expect("reply").expect("frame"),
            Message::text("ping")
        );
    }
    let quiet = tokio::time::Instant::now();
    // While it is open, the only connection place is taken: a newcomer waits.
    let waiting = tokio::spawn(get(proxy.addr, "example.test", "/", Some(FIREFOX)));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        !waiting.is_finished(),
        "served while the tunnel held the only place"
    );
    // Silence: the tunnel is closed, and the newcomer gets its turn.
    let closed = tokio::time::timeout(Duration::from_secs(5), ws.next()).await;
    assert!(
        matches!(closed, Ok(None | Some(Err(_)))),
        "the idle tunnel was not closed: {closed:?}"
    );
    // On the paused clock: closed when it had been quiet for the timeout
    // (its clock keeps whole milliseconds), not before.
    let idle = quiet.elapsed();
    assert!(
        idle >= Duration::from_millis(499) && idle < Duration::from_millis(600),
        "closed after {idle:?} of quiet"
    );
    let res = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("served after the tunnel closed")
        .expect("task");
    // The echo upstream answers plain HTTP with an error; any answer will do.
    assert!(res.status >= 200, "{}", res.status);
    proxy.stop().await;
}

/// A shutdown cannot close a WebSocket politely (crawlgate does not speak
/// the frames), so an open tunnel runs on through the drain and is closed
/// when `proxy.shutdown_grace` is over, not left hanging.
#[tokio::test(start_paused = true)]
async fn a_shutdown_closes_open_tunnels_after_the_grace_period() {
    let echo = Echo::start().await;
    let proxy = Here::start("[proxy]\nshutdown_grace = \"400ms\"", &echo.url()).await;
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    let mut ws = open(tcp, "example.test", "/chat", FIREFOX)
        .await
        .expect("handshake");
    let started = tokio::time::Instant::now();
    let stop = tokio::spawn(proxy.stop());
    // During the drain the tunnel still carries messages.
    tokio::time::sleep(Duration::from_millis(100)).await;
    ws.send(Message::text("still here")).await.expect("send");
    assert_eq!(
        ws.next().await.expect("reply").expect("frame"),
        Message::text("still here")
    );
    assert!(wait_closed(&mut ws).await, "closed after the grace period");
    stop.await.expect("stopped");
    let took = started.elapsed();
    // On the paused clock: closed when the grace period is over.
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(500),
        "{took:?}"
    );
}

/// An upstream that answers an upgrade with its `101` and its first bytes
/// in one write, then echoes: those bytes reach the client first, and the
/// tunnel carries both ways, on both HTTP/1.1 layers (with `native`, the
/// upstream's connection is crawlgate's own, handed to the tunnel with
/// what was read past the `101`).
#[tokio::test]
async fn bytes_sent_with_the_101_reach_the_client_on_both_layers() {
    for layer in ["hyper", "native"] {
        let addr = support::switching_echo().await;
        let overrides = Overrides {
            upstream: Some(format!("http://{addr}")),
            http1: Some(layer.to_owned()),
            ..Overrides::default()
        };
        let proxy = Proxy::start_with("", overrides).await;
        let mut client = TcpStream::connect(proxy.addr).await.expect("connect");
        let request = format!(
            "GET /chat HTTP/1.1\r\nHost: example.test\r\nUser-Agent: {FIREFOX}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        );
        client.write_all(request.as_bytes()).await.expect("request");
        let got = support::read_switched(&mut client, layer).await;
        assert!(got.starts_with(b"HTTP/1.1 101 "), "{layer}: {got:?}");
        assert!(got.ends_with(b"\r\n\r\nfirst"), "{layer}: {got:?}");
        client.write_all(b"ping").await.expect("ping");
        let mut echoed = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(5), client.read_exact(&mut echoed))
            .await
            .expect("echo in time")
            .expect("echo");
        assert_eq!(&echoed, b"ping", "{layer}");
        drop(client);
        proxy.stop().await;
    }
}
