//! Everything else is forwarded: headers rewritten, bodies streamed, the
//! upstream pooled, upstream failures turned into 502/504.

mod support;

use std::time::{Duration, Instant};

use http::Request;
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use support::{get, pattern_sha256, send_raw, Chunks, Proxy, Upstream, FIREFOX, GOOGLEBOT};
use tokio::net::TcpListener;

#[tokio::test]
async fn forwarded_requests_carry_our_headers_and_not_the_clients_copies() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let req = format!(
        "GET /page?id=1&x=%20y HTTP/1.1\r\n\
         Host: example.com\r\n\
         User-Agent: {GOOGLEBOT}\r\n\
         X-Crawler: 0\r\n\
         x-crawler: 0\r\n\
         X-Forwarded-For: 6.6.6.6\r\n\
         X-Forwarded-Proto: https\r\n\
         X-Forwarded-Host: evil.test\r\n\
         Forwarded: for=6.6.6.6\r\n\
         Proxy: http://evil.test:3128\r\n\
         Keep-Alive: timeout=100\r\n\
         TE: trailers\r\n\
         X-Hop: 1\r\n\
         Connection: close, X-Hop\r\n\
         Accept: text/html\r\n\
         Cookie: a=b\r\n\r\n"
    );
    let res = send_raw(proxy.addr, req.as_bytes()).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), "upstream saw GET /page?id=1&x=%20y");
    // Response hop-by-hop headers (and the ones its Connection names) are gone.
    assert_eq!(res.header("x-upstream"), Some("yes"));
    assert_eq!(res.header("keep-alive"), None);
    assert_eq!(res.header("x-private"), None);

    let seen = upstream.requests();
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(r.uri, "/page?id=1&x=%20y");
    assert_eq!(r.all("x-crawler"), ["1"]);
    assert_eq!(r.all("x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(r.all("x-forwarded-proto"), ["http"]);
    assert_eq!(r.all("x-forwarded-host"), ["example.com"]);
    assert_eq!(r.all("host"), ["example.com"]);
    for gone in [
        "forwarded",
        "proxy",
        "keep-alive",
        "te",
        "x-hop",
        "connection",
    ] {
        assert!(
            r.header(gone).is_none() || gone == "connection",
            "{gone} reached the upstream"
        );
    }
    assert_ne!(r.header("connection"), Some("close, X-Hop"));
    assert_eq!(r.header("accept"), Some("text/html"));
    assert_eq!(r.header("cookie"), Some("a=b"));
    assert_eq!(r.header("user-agent"), Some(GOOGLEBOT));
    proxy.stop().await;
}

#[tokio::test]
async fn a_trusted_proxy_chain_is_extended_and_the_header_name_is_config() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(
        "[proxy]\ntrusted_proxies = [\"127.0.0.0/8\"]\nclass_header = \"X-Robot\"",
        &upstream.url(),
    )
    .await;
    let res = support::request(
        proxy.addr,
        "GET",
        "example.com",
        "/",
        Some(FIREFOX),
        "X-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Proto: https\r\nX-Robot: 1\r\n",
    )
    .await;
    assert_eq!(res.status, 200);
    let r = &upstream.requests()[0];
    assert_eq!(r.all("x-forwarded-for"), ["203.0.113.9, 127.0.0.1"]);
    assert_eq!(r.all("x-forwarded-proto"), ["https"]);
    assert_eq!(r.all("x-robot"), ["0"]);
    assert!(r.header("x-crawler").is_none());
    proxy.stop().await;
}

/// Issue 10.2: the headers by which a client claims an address, port,
/// scheme, host or URL never reach the upstream from an untrusted peer;
/// crawlgate's own `X-Real-IP` and `X-Forwarded-Port` do. From a trusted
/// proxy they are kept.
#[tokio::test]
async fn client_claims_are_dropped_unless_the_peer_is_trusted() {
    const CLAIMS: &[(&str, &str)] = &[
        ("X-Real-IP", "1.2.3.4"),
        ("X-Forwarded-Port", "443"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "evil.test"),
        ("X-Forwarded-For", "1.2.3.4"),
        ("Forwarded", "for=1.2.3.4;proto=https"),
        ("X-Client-IP", "1.2.3.4"),
        ("True-Client-IP", "1.2.3.4"),
        ("CF-Connecting-IP", "1.2.3.4"),
        ("X-Original-URL", "/admin/"),
        ("X-Rewrite-URL", "/admin/"),
        ("X-Forwarded-Ssl", "on"),
        ("X_Forwarded_For", "1.2.3.4"),
    ];
    let head: String = CLAIMS
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let res = support::request(proxy.addr, "GET", "example.com", "/", Some(FIREFOX), &head).await;
    assert_eq!(res.status, 200);
    let r = &upstream.requests()[0];
    for (name, _) in CLAIMS {
        let lower = name.to_ascii_lowercase();
        let want: &[&str] = match lower.as_str() {
            "x-real-ip" | "x-forwarded-for" => &["127.0.0.1"],
            "x-forwarded-proto" => &["http"],
            "x-forwarded-host" => &["example.com"],
            _ => &[],
        };
        if lower == "x-forwarded-port" {
            assert_eq!(r.all(name), [proxy.addr.port().to_string()], "{name}");
        } else {
            assert_eq!(r.all(name), want, "{name}");
        }
    }
    proxy.stop().await;

    let trusting = Proxy::start(
        "[proxy]\ntrusted_proxies = [\"127.0.0.1\"]",
        &upstream.url(),
    )
    .await;
    let res = support::request(
        trusting.addr,
        "GET",
        "example.com",
        "/",
        Some(FIREFOX),
        &head,
    )
    .await;
    assert_eq!(res.status, 200);
    let r = &upstream.requests()[1];
    for (name, value) in CLAIMS {
        let want = if name.eq_ignore_ascii_case("x-forwarded-for") {
            // The chain is extended by the peer.
            "1.2.3.4, 127.0.0.1".to_owned()
        } else {
            (*value).to_owned()
        };
        assert_eq!(r.all(name), [want], "{name} from a trusted proxy");
    }
    trusting.stop().await;
}

#[tokio::test]
async fn host_is_preserved_unless_configured_otherwise() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("[proxy]\npreserve_host = false", &upstream.url()).await;
    get(proxy.addr, "example.com", "/", Some(FIREFOX)).await;
    let r = &upstream.requests()[0];
    assert_eq!(r.header("host"), Some(upstream.addr.to_string().as_str()));
    assert_eq!(r.header("x-forwarded-host"), Some("example.com"));
    proxy.stop().await;
}

#[tokio::test]
async fn upstream_connections_are_kept_alive_and_reused() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    for i in 0..20 {
        let res = get(proxy.addr, "example.com", &format!("/n{i}"), Some(FIREFOX)).await;
        assert_eq!(res.status, 200);
    }
    assert_eq!(upstream.requests().len(), 20);
    let conns = upstream
        .connections
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        conns, 1,
        "20 sequential requests used {conns} upstream connections"
    );
    proxy.stop().await;
}

const BIG: u64 = 64 * 1024 * 1024;

#[tokio::test]
async fn a_64_mib_download_arrives_byte_identical() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let mut sender = support::h1_client::<Chunks>(proxy.addr).await;
    let req = Request::get(format!("/download?bytes={BIG}"))
        .header("host", "example.com")
        .header("user-agent", FIREFOX)
        .body(Chunks::new(0))
        .expect("request");
    let res = sender.send_request(req).await.expect("response");
    assert_eq!(res.status(), 200);
    let mut body = res.into_body();
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.expect("body frame");
        if let Ok(data) = frame.into_data() {
            len += data.len() as u64;
            hasher.update(&data);
        }
    }
    assert_eq!(len, BIG);
    assert_eq!(support::hex(&hasher.finalize()), pattern_sha256(BIG));
    proxy.stop().await;
}

#[tokio::test]
async fn a_64_mib_upload_arrives_byte_identical_with_and_without_length() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let want = pattern_sha256(BIG);
    for body in [Chunks::new(BIG), Chunks::chunked(BIG)] {
        let mut sender = support::h1_client::<Chunks>(proxy.addr).await;
        let req = Request::post("/upload")
            .header("host", "example.com")
            .header("user-agent", FIREFOX)
            .body(body)
            .expect("request");
        let res = sender.send_request(req).await.expect("response");
        assert_eq!(res.status(), 200);
        let text = res.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(text, want.as_bytes());
    }
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen
        .iter()
        .all(|r| r.body_len == BIG && r.body_sha256 == want));
    assert_eq!(
        seen[0].header("content-length"),
        Some(BIG.to_string().as_str())
    );
    assert_eq!(seen[1].header("transfer-encoding"), Some("chunked"));
    proxy.stop().await;
}

#[tokio::test]
async fn a_dead_upstream_is_a_quick_502() {
    // Free, and below the ephemeral range: no other test's listener can
    // take it and answer.
    let addr = support::process::free_addr();
    let proxy = Proxy::start("", &format!("http://{addr}")).await;
    let start = Instant::now();
    let res = get(proxy.addr, "example.com", "/", Some(FIREFOX)).await;
    assert_eq!(res.status, 502);
    assert!(res.text().contains("Bad Gateway"));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
    proxy.stop().await;
}

#[tokio::test]
async fn a_hung_upstream_is_a_504_after_the_response_timeout() {
    // Accepts connections and never answers.
    let hung = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = hung.local_addr().expect("addr");
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = hung.accept().await {
            held.push(stream);
        }
    });
    let proxy = Proxy::start(
        "[proxy]\nresponse_timeout = \"300ms\"",
        &format!("http://{addr}"),
    )
    .await;
    let start = Instant::now();
    let res = get(proxy.addr, "example.com", "/", Some(FIREFOX)).await;
    let took = start.elapsed();
    assert_eq!(res.status, 504);
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "took {took:?}"
    );
    proxy.stop().await;
    holder.abort();
}

/// The response timeout counts from the last upload progress: an upload
/// that keeps moving for four times `proxy.response_timeout` is not cut
/// off, and once its last byte is sent a hung upstream gets its 504 one
/// timeout later.
#[tokio::test]
async fn the_response_timeout_counts_from_the_last_upload_progress() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("[proxy]\nresponse_timeout = \"300ms\"", &upstream.url()).await;
    let chunk = [b'u'; 100];
    let mut stream = tokio::net::TcpStream::connect(proxy.addr)
        .await
        .expect("connect");
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: example.com\r\nUser-Agent: {FIREFOX}\r\nContent-Length: 800\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let start = Instant::now();
    for _ in 0..8 {
        stream.write_all(&chunk).await.expect("chunk");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let res = support::parse_raw(&answer);
    assert!(start.elapsed() >= Duration::from_millis(1200));
    assert_eq!(res.status, 200, "{}", res.text());
    let mut hasher = Sha256::new();
    for _ in 0..8 {
        hasher.update(chunk);
    }
    assert_eq!(res.text(), support::hex(&hasher.finalize()));
    proxy.stop().await;

    // A hung upstream: the 504 comes one timeout after the last byte.
    let hung = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = hung.local_addr().expect("addr");
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = hung.accept().await {
            let mut sink = vec![0u8; 4096];
            let _ = stream.read(&mut sink).await;
            held.push(stream);
        }
    });
    let proxy = Proxy::start(
        "[proxy]\nresponse_timeout = \"300ms\"",
        &format!("http://{addr}"),
    )
    .await;
    let mut stream = tokio::net::TcpStream::connect(proxy.addr)
        .await
        .expect("connect");
    stream.write_all(head.as_bytes()).await.expect("head");
    for _ in 0..8 {
        stream.write_all(&chunk).await.expect("chunk");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last_byte = Instant::now();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let took = last_byte.elapsed();
    assert_eq!(support::parse_raw(&answer).status, 504);
    assert!(took < Duration::from_secs(2), "504 after {took:?}");
    proxy.stop().await;
    holder.abort();
}

#[tokio::test]
async fn connect_method_is_refused() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let res = send_raw(
        proxy.addr,
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    )
    .await;
    assert_eq!(res.status, 405);
    assert!(upstream.requests().is_empty());
    proxy.stop().await;
}
