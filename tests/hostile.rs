//! Hostile input and faults, over raw TCP: what the client gets and exactly
//! what reached the upstream (nothing, for a rejected request). Every loop
//! is bounded; all traffic stays on 127.0.0.1.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::here::Here;
use support::{get, send_raw, try_send_raw, Proxy, Upstream, FIREFOX, GOOGLEBOT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn req(head: &str) -> String {
    format!("{head}\r\nUser-Agent: {FIREFOX}\r\nConnection: close\r\n\r\n")
}

/// Requests that are ambiguous to frame: 400, never forwarded.
#[tokio::test]
async fn ambiguous_framing_is_rejected_and_never_forwarded() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let cases: Vec<(&str, String)> = vec![
        ("two different Content-Lengths", req("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6") + "hello!"),
        ("a Content-Length list", req("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6") + "hello!"),
        ("Content-Length not a number", req("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: +5") + "hello"),
        ("Transfer-Encoding gzip", req("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip") + "xxxxx"),
        ("chunked not final", req("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip") + "0\r\n\r\n"),
        ("chunked twice", req("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked") + "0\r\n\r\n"),
        ("unknown coding", req("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked") + "0\r\n\r\n"),
        ("Transfer-Encoding in HTTP/1.0", req("POST /a HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked") + "0\r\n\r\n"),
        ("obs-fold", req("GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2")),
        ("white space before the colon", req("GET /a HTTP/1.1\r\nHost: x\r\nX-A : 1")),
        ("NUL in a value", req("GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\0 2")),
        ("bare CR in a value", req("GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r2")),
        ("two Host headers", req("GET /a HTTP/1.1\r\nHost: x\r\nHost: y")),
        ("no Host in HTTP/1.1", req("GET /a HTTP/1.1")),
        ("space in the target", req("GET /a b HTTP/1.1\r\nHost: x")),
    ];
    for (name, raw) in &cases {
        let res = try_send_raw(proxy.addr, raw.as_bytes()).await;
        assert_eq!(res.as_ref().map(|r| r.status), Some(400), "{name}");
    }
    assert!(
        upstream.requests().is_empty(),
        "forwarded: {:?}",
        upstream.requests()
    );
    proxy.stop().await;
}

/// Issue 10.1: a request with two User-Agent fields is answered 400 and
/// closed, in either order, over HTTP/1.1 and HTTP/2 alike: PHP would see a
/// joined or the last value, so the classifier's reading of the first one
/// could let a robot through as a human.
#[tokio::test]
async fn two_user_agent_fields_are_refused_in_either_order() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("[proxy]\nh2c = true", &upstream.url()).await;
    let orders = [[FIREFOX, GOOGLEBOT], [GOOGLEBOT, FIREFOX]];
    for [first, second] in orders {
        let raw = format!(
            "GET /?do=x HTTP/1.1\r\nHost: x\r\nUser-Agent: {first}\r\nUser-Agent: {second}\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n"
        );
        // No `Connection: close` asked: the server must close by itself,
        // after one answer.
        let res = try_send_raw(proxy.addr, raw.as_bytes()).await;
        let res = res.expect("an answer");
        assert_eq!(res.status, 400, "{first} then {second}");
        assert_eq!(res.header("connection"), Some("close"));
        assert!(
            !res.text().contains("HTTP/1.1"),
            "a second answer: {}",
            res.text()
        );

        // HTTP/2 (h2c prior knowledge): two `user-agent` fields in one block.
        let stream = TcpStream::connect(proxy.addr).await.expect("connect");
        let (mut send, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .expect("h2c");
        tokio::spawn(conn);
        let req = http::Request::builder()
            .uri(format!("http://{}/?do=x", proxy.addr))
            .header("user-agent", first)
            .header("user-agent", second)
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        let res = send.send_request(req).await.expect("h2 response");
        assert_eq!(res.status(), 400, "h2: {first} then {second}");
    }
    // One User-Agent is fine, and the robot is blocked as usual.
    let res = get(proxy.addr, "x", "/?do=x", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 403);
    assert!(
        upstream.requests().is_empty(),
        "forwarded: {:?}",
        upstream.requests()
    );
    proxy.stop().await;
}

/// Issue 25.5: a Host that is not a host name, IPv4 address or bracketed
/// IPv6 literal with an optional port 1-65535 is 400 and never reaches
/// PHP (as `HTTP_HOST` or `X-Forwarded-Host`), over HTTP/1.1 (Host header
/// or absolute-form target) and HTTP/2 (`:authority` or Host); valid ones
/// are forwarded as sent.
#[tokio::test]
async fn hostile_hosts_are_refused_and_valid_ones_forwarded_as_sent() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("[proxy]\nh2c = true", &upstream.url()).await;
    let hostile = [
        "example.com/evil",
        "exa mple.com",
        "evil.com@example.com",
        "www.example.com:99999",
        "example.com, www.evil.com",
        "example.com:0",
        "example.com:",
        "ex%61mple.com",
        "example.com;evil",
        "example..com",
        "[::1",
        "[fe80::1%25eth0]:80",
        "",
    ];
    for host in hostile {
        let raw = req(&format!("GET /page HTTP/1.1\r\nHost: {host}"));
        let res = try_send_raw(proxy.addr, raw.as_bytes()).await;
        let res = res.unwrap_or_else(|| panic!("no answer for {host:?}"));
        assert_eq!(res.status, 400, "{host:?}");
        assert_eq!(res.header("connection"), Some("close"), "{host:?}");
    }
    // The authority of an absolute-form target, whatever the Host says.
    for target in [
        "http://evil.com@example.com/page",
        "http://example.com:99999/page",
    ] {
        let raw = req(&format!("GET {target} HTTP/1.1\r\nHost: example.com"));
        let res = try_send_raw(proxy.addr, raw.as_bytes()).await;
        assert_eq!(res.map(|r| r.status), Some(400), "{target}");
    }
    // HTTP/2: a hostile Host beside a good `:authority` is 400; a hostile
    // `:authority` is 400 or, where the HTTP/2 layer cannot parse it, a
    // refused stream.
    let stream = TcpStream::connect(proxy.addr).await.expect("connect");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2c");
    tokio::spawn(conn);
    let h2 = |uri: &str, host: Option<&str>| {
        let mut req = http::Request::builder()
            .uri(uri)
            .header("user-agent", FIREFOX);
        if let Some(host) = host {
            req = req.header("host", host);
        }
        req.body(http_body_util::Empty::<bytes::Bytes>::new())
    };
    for host in [
        "example.com, www.evil.com",
        "evil.com@example.com",
        "example.com:0",
    ] {
        let req = h2("http://example.com/page", Some(host)).expect("request");
        let status = send.send_request(req).await.map(|r| r.status().as_u16());
        assert_eq!(status.ok(), Some(400), "h2 host {host:?}");
    }
    let mut sent = 0;
    for uri in [
        "http://evil.com@example.com/page",
        "http://example.com:99999/page",
        "http://example.com:0/page",
    ] {
        let Ok(req) = h2(uri, None) else {
            continue; // not a URI the client can send
        };
        sent += 1;
        let res = send.send_request(req).await;
        let status = res.as_ref().map(|r| r.status().as_u16()).ok();
        assert!(matches!(status, None | Some(400)), "h2 {uri}: {status:?}");
    }
    assert!(sent > 0, "no hostile :authority could be sent");
    assert!(
        upstream.requests().is_empty(),
        "forwarded: {:?}",
        upstream.requests()
    );

    // Valid hosts reach PHP exactly as sent, as Host and X-Forwarded-Host.
    let valid = [
        "example.com:8080",
        "[::1]:8080",
        "127.0.0.1",
        "Example.COM.",
        "xn--bcher-kva.example",
        "my_host.example.com:65535",
    ];
    for host in valid {
        let raw = req(&format!("GET /page HTTP/1.1\r\nHost: {host}"));
        let res = send_raw(proxy.addr, raw.as_bytes()).await;
        assert_eq!(res.status, 200, "{host}");
    }
    let req = h2("http://[::1]:8080/page", None).expect("request");
    let status = send.send_request(req).await.map(|r| r.status().as_u16());
    assert_eq!(status.ok(), Some(200), "h2 [::1]:8080");
    let seen = upstream.requests();
    let hosts: Vec<(String, String)> = seen
        .iter()
        .map(|r| {
            let one = |name| r.all(name).join(" | ");
            (one("host"), one("x-forwarded-host"))
        })
        .collect();
    let want: Vec<(String, String)> = valid
        .iter()
        .chain(&["[::1]:8080"])
        .map(|h| (h.to_string(), h.to_string()))
        .collect();
    assert_eq!(hosts, want);
    proxy.stop().await;
}

/// A body whose chunk framing breaks mid-way never reaches the upstream as
/// a complete request; the client gets 400.
#[tokio::test]
async fn a_broken_chunked_body_is_not_forwarded_as_complete() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let raw = req("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked")
        + "5\r\nhello\r\nzz\r\nworld\r\n0\r\n\r\n";
    let res = try_send_raw(proxy.addr, raw.as_bytes()).await;
    assert_eq!(res.map(|r| r.status), Some(400));
    // The recording upstream only records requests whose body it could read
    // to the end; a partial one may appear with what arrived before the cut.
    assert!(
        upstream.requests().iter().all(|r| r.body_len < 10),
        "{:?}",
        upstream.requests()
    );
    proxy.stop().await;
}

/// Transfer-Encoding with Content-Length: hyper reads the message as
/// chunked (RFC 9112 §6.3: Transfer-Encoding overrides), drops the
/// Content-Length and closes the connection after the response; the
/// upstream receives crawlgate's own framing, so it cannot disagree.
#[tokio::test]
async fn transfer_encoding_wins_over_content_length_and_the_connection_closes() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let raw = format!(
        "POST /upload HTTP/1.1\r\nHost: x\r\nUser-Agent: {FIREFOX}\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    );
    let res = try_send_raw(proxy.addr, raw.as_bytes())
        .await
        .expect("a response");
    if support::native_layer() {
        // crawlgate's own layer refuses the shape outright, as nginx does.
        assert_eq!(res.status, 400);
        assert!(upstream.requests().is_empty(), "{:?}", upstream.requests());
        proxy.stop().await;
        return;
    }
    assert_eq!(res.status, 200);
    assert!(
        !res.text().contains("HTTP/1.1"),
        "a second response was sent: {}",
        res.text()
    );
    let seen = upstream.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].uri, "/upload");
    assert_eq!(seen[0].body_len, 5);
    assert!(seen[0].header("content-length").is_none());
    proxy.stop().await;
}

#[tokio::test]
async fn oversized_heads_and_targets_get_431_and_414() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(
        "[limits]\nmax_header_bytes = 8192\nmax_headers = 20\nmax_uri_bytes = 100",
        &upstream.url(),
    )
    .await;
    let many: String = (0..30).map(|i| format!("X-H{i}: v\r\n")).collect();
    let res = try_send_raw(
        proxy.addr,
        req(&format!("GET / HTTP/1.1\r\nHost: x\r\n{many}")).as_bytes(),
    )
    .await;
    assert_eq!(res.map(|r| r.status), Some(431), "too many headers");
    let big = format!("X-Big: {}\r\n", "a".repeat(9000));
    let res = try_send_raw(
        proxy.addr,
        req(&format!("GET / HTTP/1.1\r\nHost: x\r\n{big}")).as_bytes(),
    )
    .await;
    assert_eq!(res.map(|r| r.status), Some(431), "head over 8 KiB");
    let long = format!("/{}", "a".repeat(200));
    assert_eq!(get(proxy.addr, "x", &long, Some(FIREFOX)).await.status, 414);
    assert_eq!(
        get(proxy.addr, "x", "/short", Some(FIREFOX)).await.status,
        200
    );
    assert_eq!(upstream.requests().len(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn request_bodies_over_the_limit_get_413() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("[limits]\nmax_body_bytes = 1000", &upstream.url()).await;
    let declared =
        req("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 2000") + &"a".repeat(2000);
    assert_eq!(
        try_send_raw(proxy.addr, declared.as_bytes())
            .await
            .map(|r| r.status),
        Some(413)
    );
    assert!(upstream.requests().is_empty());
    let chunk = "a".repeat(600);
    let chunked = req("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked")
        + &format!("258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n");
    assert_eq!(
        try_send_raw(proxy.addr, chunked.as_bytes())
            .await
            .map(|r| r.status),
        Some(413)
    );
    assert!(
        upstream.requests().iter().all(|r| r.body_len <= 1000),
        "{:?}",
        upstream.requests()
    );
    let small = req("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5") + "hello";
    assert_eq!(
        try_send_raw(proxy.addr, small.as_bytes())
            .await
            .map(|r| r.status),
        Some(200)
    );
    proxy.stop().await;
}

/// Slowloris: a client dribbling its headers is cut off after the
/// header-read timeout, while another client is served meanwhile.
#[tokio::test(start_paused = true)]
async fn a_client_dribbling_headers_is_cut_off_and_others_are_served() {
    let upstream = Upstream::start().await;
    let proxy = Here::start("[proxy]\nheader_read_timeout = \"500ms\"", &upstream.url()).await;
    let mut slow = TcpStream::connect(proxy.addr).await.expect("connect");
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    let start = tokio::time::Instant::now();
    let dribble = async {
        for _ in 0..40 {
            if slow.write_all(b"X-A: b\r\n").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut buf)).await;
        buf
    };
    let other = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        get(proxy.addr, "x", "/other", Some(FIREFOX)).await
    };
    let (answer, res) = tokio::join!(dribble, other);
    assert_eq!(res.status, 200);
    let cut_after = start.elapsed();
    // On the paused clock: cut at the timeout (the writes after it fail
    // within two more steps of 50 ms), not before.
    assert!(
        cut_after >= Duration::from_millis(500) && cut_after < Duration::from_millis(700),
        "dribbling client kept for {cut_after:?}"
    );
    assert!(!String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    assert_eq!(upstream.requests().len(), 1);
    proxy.stop().await;
}

/// With the connection cap reached, a new connection waits (it is not
/// served) until another closes; nothing falls over.
#[tokio::test]
async fn the_connection_cap_makes_newcomers_wait() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("[limits]\nmax_connections = 2", &upstream.url()).await;
    let idle1 = TcpStream::connect(proxy.addr).await.expect("connect");
    let idle2 = TcpStream::connect(proxy.addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let third = tokio::spawn(get(proxy.addr, "x", "/third", Some(FIREFOX)));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(upstream.requests().is_empty(), "served past the cap");
    drop(idle1);
    let res = tokio::time::timeout(Duration::from_secs(5), third)
        .await
        .expect("served after a slot freed")
        .expect("task");
    assert_eq!(res.status, 200);
    drop(idle2);
    proxy.stop().await;
}

#[tokio::test]
async fn expect_100_continue_and_pipelining_work() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;

    let mut s = TcpStream::connect(proxy.addr).await.expect("connect");
    let head = format!("POST /upload HTTP/1.1\r\nHost: x\r\nUser-Agent: {FIREFOX}\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n");
    s.write_all(head.as_bytes()).await.expect("write");
    let mut buf = [0u8; 25];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf))
        .await
        .expect("100 in time")
        .expect("read");
    assert!(
        buf.starts_with(b"HTTP/1.1 100 Continue\r\n"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    s.write_all(b"hello").await.expect("body");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).await.expect("read");
    assert!(String::from_utf8_lossy(&rest).contains("200 OK"));

    let two = format!(
        "GET /first HTTP/1.1\r\nHost: x\r\nUser-Agent: {FIREFOX}\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\nUser-Agent: {FIREFOX}\r\nConnection: close\r\n\r\n"
    );
    let all = send_raw(proxy.addr, two.as_bytes()).await;
    let text = format!("{}\r\n\r\n{}", all.head, all.text());
    let first = text
        .find("upstream saw GET /first")
        .expect("first answered");
    let second = text
        .find("upstream saw GET /second")
        .expect("second answered");
    assert!(first < second, "pipelined answers out of order");
    proxy.stop().await;
}

#[tokio::test]
async fn upgrade_h2c_never_reaches_the_upstream() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let raw = format!(
        "GET /a HTTP/1.1\r\nHost: x\r\nUser-Agent: {FIREFOX}\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"
    );
    let res = send_raw(proxy.addr, raw.as_bytes()).await;
    assert_eq!(res.status, 200);
    let r = &upstream.requests()[0];
    for name in ["upgrade", "http2-settings", "connection"] {
        assert!(r.header(name).is_none(), "{name} reached the upstream");
    }
    proxy.stop().await;
}

/// A raw upstream that runs `behave` on every connection and counts them.
async fn raw_upstream<F, Fut>(behave: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let count = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(behave(stream));
        }
    });
    (addr, count)
}

async fn read_head(stream: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") && buf.len() < 65536 {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        buf.push(byte[0]);
    }
}

#[tokio::test]
async fn an_upstream_closing_mid_body_never_looks_complete() {
    let (addr, _) = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            .await;
    })
    .await;
    let proxy = Proxy::start("", &format!("http://{addr}")).await;
    let res = try_send_raw(proxy.addr, req("GET / HTTP/1.1\r\nHost: x").as_bytes())
        .await
        .expect("head");
    assert_eq!(res.header("content-length"), Some("100"));
    assert!(
        res.body.len() < 100,
        "a short body must end with the connection, not look complete"
    );
    // Chunked: the terminating chunk never comes.
    let (addr, _) = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n")
            .await;
    })
    .await;
    let proxy2 = Proxy::start("", &format!("http://{addr}")).await;
    let res = try_send_raw(proxy2.addr, req("GET / HTTP/1.1\r\nHost: x").as_bytes())
        .await
        .expect("head");
    assert!(
        !res.text().ends_with("0\r\n\r\n"),
        "completed a truncated chunked body: {:?}",
        res.text()
    );
    proxy.stop().await;
    proxy2.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_upstream_body_is_cut_after_the_idle_timeout() {
    let (addr, _) = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            .await;
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let proxy = Here::start(
        "[limits]\nupstream_body_idle_timeout = \"300ms\"",
        &format!("http://{addr}"),
    )
    .await;
    let start = tokio::time::Instant::now();
    let res = try_send_raw(proxy.addr, req("GET / HTTP/1.1\r\nHost: x").as_bytes())
        .await
        .expect("head");
    // On the paused clock: cut when the body has been idle for the
    // timeout, not before, and long before the upstream's 30 s.
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(400),
        "took {took:?}"
    );
    assert_eq!(res.body, b"0123456789");
    proxy.stop().await;
}

#[tokio::test]
async fn upstream_resets_and_garbage_are_502_and_a_post_is_sent_once() {
    let (reset, _) = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        drop(s);
    })
    .await;
    let (garbage, _) = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nBad Header Line\r\n\r\nhello")
            .await;
    })
    .await;
    let (nonsense, _) = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        let _ = s.write_all(b"SSH-2.0-OpenSSH\r\n\r\n").await;
    })
    .await;
    for addr in [reset, garbage, nonsense] {
        let proxy = Proxy::start("", &format!("http://{addr}")).await;
        let res = get(proxy.addr, "x", "/", Some(FIREFOX)).await;
        assert_eq!(res.status, 502, "{addr}");
        proxy.stop().await;
    }
    // The connection is counted; a POST must reach it exactly once.
    let (closing, connections) = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        drop(s);
    })
    .await;
    let proxy = Proxy::start("", &format!("http://{closing}")).await;
    let post = req("POST /vote HTTP/1.1\r\nHost: x\r\nContent-Length: 5") + "hello";
    let res = try_send_raw(proxy.addr, post.as_bytes()).await;
    assert_eq!(res.map(|r| r.status), Some(502));
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "the POST was sent more than once"
    );
    proxy.stop().await;
}

/// A pooled connection the upstream drops without answering: a GET is
/// retried once on a fresh connection and succeeds.
#[tokio::test]
async fn an_idempotent_request_is_retried_once_on_a_dead_connection() {
    let first = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&first);
    let (addr, connections) = raw_upstream(move |mut s| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        async move {
            read_head(&mut s).await;
            if n > 0 {
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            }
        }
    })
    .await;
    let proxy = Proxy::start("", &format!("http://{addr}")).await;
    let res = get(proxy.addr, "x", "/page", Some(FIREFOX)).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), "ok");
    assert_eq!(connections.load(Ordering::SeqCst), 2);
    proxy.stop().await;
}

/// After all of the above kinds of abuse, the server still serves. Input
/// that is merely incomplete (a TLS hello, blank lines) waits for the
/// header-read timeout, then is closed.
#[tokio::test(start_paused = true)]
async fn the_server_survives_a_burst_of_garbage() {
    let upstream = Upstream::start().await;
    let proxy = Here::start("[proxy]\nheader_read_timeout = \"300ms\"", &upstream.url()).await;
    let garbage: [&[u8]; 6] = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"GET\r\n\r\n",
        b"\r\n\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"G\xffT / HTTP/1.1\r\nHost: x\r\n\r\n",
    ];
    let start = tokio::time::Instant::now();
    for g in (0..5).flat_map(|_| garbage) {
        let _ = try_send_raw(proxy.addr, g).await;
    }
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "garbage held for {:?}",
        start.elapsed()
    );
    assert_eq!(
        get(proxy.addr, "x", "/still-alive", Some(FIREFOX))
            .await
            .status,
        200
    );
    assert_eq!(upstream.requests().len(), 1);
    proxy.stop().await;
}

/// An idle keep-alive connection is closed after the header-read timeout:
/// the timer runs while the server waits for the next request head.
#[tokio::test(start_paused = true)]
async fn idle_keep_alive_connections_are_closed() {
    let upstream = Upstream::start().await;
    let proxy = Here::start("[proxy]\nheader_read_timeout = \"400ms\"", &upstream.url()).await;
    let mut s = TcpStream::connect(proxy.addr).await.expect("connect");
    let one = format!("GET /one HTTP/1.1\r\nHost: x\r\nUser-Agent: {FIREFOX}\r\n\r\n");
    s.write_all(one.as_bytes()).await.expect("write");
    let start = tokio::time::Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "idle connection kept open for 5 s");
    assert!(String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 200"));
    // On the paused clock: closed at the timeout, to the millisecond.
    let idle = start.elapsed();
    assert!(
        idle >= Duration::from_millis(400) && idle < Duration::from_millis(450),
        "closed after {idle:?}"
    );
    // A connection that never sends anything is closed too, also when h2c
    // makes the server read the first bytes to choose the protocol.
    let silent_for = async |addr| {
        let mut silent = TcpStream::connect(addr).await.expect("connect");
        let start = tokio::time::Instant::now();
        let mut nothing = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut nothing)).await;
        read.is_ok().then(|| start.elapsed())
    };
    let closed = silent_for(proxy.addr)
        .await
        .expect("silent connection closed within 5 s");
    assert!(
        closed >= Duration::from_millis(400) && closed < Duration::from_millis(450),
        "silent connection closed after {closed:?}"
    );
    proxy.stop().await;
    let h2c = Here::start(
        "[proxy]\nheader_read_timeout = \"400ms\"\nh2c = true",
        &upstream.url(),
    )
    .await;
    let closed = silent_for(h2c.addr)
        .await
        .expect("silent h2c-port connection closed within 5 s");
    assert!(
        closed >= Duration::from_millis(400) && closed < Duration::from_millis(450),
        "silent h2c-port connection closed after {closed:?}"
    );
    h2c.stop().await;
}

/// An h2c connection (HTTP/2 with prior knowledge on the plain port) with
/// no open stream is closed after `proxy.http2_idle_timeout`, as over TLS:
/// HTTP/2 has no header-read timeout that would end it.
#[tokio::test(start_paused = true)]
async fn an_idle_h2c_connection_is_closed() {
    use http_body_util::BodyExt;
    let upstream = Upstream::start().await;
    let proxy = Here::start(
        "[proxy]\nh2c = true\nhttp2_idle_timeout = \"1s\"",
        &upstream.url(),
    )
    .await;
    let stream = TcpStream::connect(proxy.addr).await.expect("connect");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2c");
    let conn = tokio::spawn(conn);
    let req = http::Request::builder()
        .uri(format!("http://{}/page", proxy.addr))
        .header("user-agent", FIREFOX)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    let res = send.send_request(req).await.expect("h2c response");
    assert_eq!(res.status(), 200);
    res.into_body().collect().await.expect("body");
    let start = tokio::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(5), conn).await;
    assert!(closed.is_ok(), "idle h2c connection still open after 5 s");
    // On the paused clock: closed at the timeout, to the millisecond.
    let idle = start.elapsed();
    assert!(
        idle >= Duration::from_millis(1000) && idle < Duration::from_millis(1050),
        "closed after {idle:?}"
    );
    assert_eq!(upstream.requests().len(), 1);
    proxy.stop().await;
}
