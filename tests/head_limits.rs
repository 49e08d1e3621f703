//! Issue 25.2: `limits.max_header_bytes` is exact for every value the key
//! accepts, over HTTP/1.1 (on the HTTP/1-only port and on the h2c port,
//! which hyper serves with two different builders) and over HTTP/2 (h2c
//! prior knowledge; the TLS port's HTTP/2 has the same settings). A head
//! of exactly the limit is forwarded whole; one byte more is 431, closed,
//! and never reaches the upstream. Heads are counted as docs/how-it-works.md says:
//! the head as HTTP/1.1 carries it, `name: value` and CRLF per field.

mod support;

use bytes::Bytes;
use http_body_util::Empty;
use support::{try_send_raw, Proxy, Upstream, FIREFOX};
use tokio::net::TcpStream;

fn padded(pad: &str) -> String {
    format!(
        "GET /limit HTTP/1.1\r\nHost: x\r\nUser-Agent: {FIREFOX}\r\nConnection: close\r\nX-Pad: {pad}\r\n\r\n"
    )
}

/// An HTTP/1.1 request head of exactly `n` bytes, padded in one field.
fn h1_head(n: usize) -> Vec<u8> {
    let bare = padded("").len();
    assert!(n >= bare, "{n} is shorter than the bare head");
    let raw = padded(&"a".repeat(n - bare));
    assert_eq!(raw.len(), n);
    raw.into_bytes()
}

/// Sends `n` bytes of head over HTTP/1.1: the status (`None` when the
/// server closed without an answer, as it may while a head far over its
/// cap is still being written).
async fn h1_status(addr: std::net::SocketAddr, n: usize) -> Option<(u16, Option<String>)> {
    let res = try_send_raw(addr, &h1_head(n)).await?;
    Some((res.status, res.header("connection").map(str::to_owned)))
}

/// Sends a GET over h2c whose head counts `n` bytes: the status, or
/// `None` when the stream was refused without one.
async fn h2_status(addr: std::net::SocketAddr, n: usize) -> Option<u16> {
    let authority = addr.to_string();
    // `GET /limit HTTP/1.1` CRLF, `host: <authority>` CRLF,
    // `user-agent: …` CRLF, `x-pad: …` CRLF, CRLF.
    let bare = (3 + 1 + "/limit".len() + 1 + 8 + 2)
        + (4 + 2 + authority.len() + 2)
        + (10 + 2 + FIREFOX.len() + 2)
        + (5 + 2 + 2)
        + 2;
    assert!(n >= bare);
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2c");
    tokio::spawn(conn);
    let req = http::Request::builder()
        .uri(format!("http://{authority}/limit"))
        .header("user-agent", FIREFOX)
        .header("x-pad", "a".repeat(n - bare))
        .body(Empty::<Bytes>::new())
        .expect("request");
    let res = tokio::time::timeout(std::time::Duration::from_secs(10), send.send_request(req))
        .await
        .expect("an answer within 10 s");
    res.ok().map(|r| r.status().as_u16())
}

/// The checks for one value of the key (`None`: the default, 64 KiB).
async fn exact(limit: Option<usize>) {
    let upstream = Upstream::start().await;
    let key = limit.map_or(String::new(), |l| format!("\nmax_header_bytes = {l}"));
    let limit = limit.unwrap_or(64 * 1024);
    let h1_only = Proxy::start(&format!("[limits]{key}"), &upstream.url()).await;
    let h2c = Proxy::start(
        &format!("[proxy]\nh2c = true\n[limits]{key}"),
        &upstream.url(),
    )
    .await;
    let mut forwarded = 0;
    for (port, proxy) in [("HTTP/1-only", &h1_only), ("h2c", &h2c)] {
        // Just under, and exactly at the limit: forwarded whole.
        for n in [limit - 1, limit] {
            let status = h1_status(proxy.addr, n).await;
            assert_eq!(status.map(|s| s.0), Some(200), "{port}: {n} of {limit}");
            forwarded += 1;
            let seen = upstream.requests();
            assert_eq!(seen.len(), forwarded, "{port}: {n} of {limit}");
            let pad = seen[forwarded - 1].header("x-pad").map_or(0, str::len);
            assert_eq!(pad, n - padded("").len(), "{port}: the whole head");
        }
        // One byte over: 431 from crawlgate, closed, nothing upstream.
        let status = h1_status(proxy.addr, limit + 1).await;
        assert_eq!(
            status,
            Some((431, Some("close".to_owned()))),
            "{port}: {} of {limit}",
            limit + 1
        );
        // Far over: cut off while reading (431, or closed mid-send).
        for n in [limit + limit / 2, 2 * limit] {
            let status = h1_status(proxy.addr, n).await.map(|s| s.0);
            assert!(
                matches!(status, None | Some(431)),
                "{port}: {n}: {status:?}"
            );
        }
        assert_eq!(upstream.requests().len(), forwarded, "{port}: {limit}");
    }
    // HTTP/2, the same count.
    for n in [limit - 1, limit] {
        assert_eq!(
            h2_status(h2c.addr, n).await,
            Some(200),
            "h2: {n} of {limit}"
        );
        forwarded += 1;
        assert_eq!(upstream.requests().len(), forwarded, "h2: {n} of {limit}");
    }
    for n in [limit + 1, limit + 100, 2 * limit] {
        let status = h2_status(h2c.addr, n).await;
        assert!(
            matches!(status, None | Some(431)),
            "h2: {n} of {limit}: {status:?}"
        );
        if n == limit + 1 {
            assert_eq!(status, Some(431), "h2: one byte over {limit}");
        }
    }
    assert_eq!(upstream.requests().len(), forwarded, "h2: {limit}");
    h1_only.stop().await;
    h2c.stop().await;
}

#[tokio::test]
async fn the_head_limit_is_exact_at_8192() {
    exact(Some(8192)).await;
}

#[tokio::test]
async fn the_head_limit_is_exact_at_16384() {
    exact(Some(16384)).await;
}

#[tokio::test]
async fn the_head_limit_is_exact_at_32768() {
    exact(Some(32768)).await;
}

/// The default (64 KiB): a 70 KB head and a 114,688-byte one (the largest
/// taken before) were forwarded.
#[tokio::test]
async fn the_head_limit_is_exact_at_the_default() {
    exact(None).await;
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let status = h1_status(proxy.addr, 70_000).await;
    assert_eq!(status.map(|s| s.0), Some(431), "70,000");
    // Past hyper's read cap (80 KiB): 431, or closed while still sending.
    let status = h1_status(proxy.addr, 114_688).await.map(|s| s.0);
    assert!(matches!(status, None | Some(431)), "114,688: {status:?}");
    assert!(upstream.requests().is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn the_head_limit_is_exact_at_1_mib() {
    exact(Some(1 << 20)).await;
}
