//! Issue 11: metrics, health endpoints and access logs, over real sockets
//! through the library entry production runs.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use crawlgate::config::Overrides;
use prometheus_parse::Scrape;
use support::process::free_addr;
use support::{
    get, metric as value, metric_total as total, request, scrape, send_raw, Proxy, Upstream,
    FIREFOX, GOOGLEBOT,
};

/// Scrapes until `crawlgate_requests_total` sums to `n` (a request is
/// counted when its response body is done, a moment after the client has
/// it), at most 5 s.
async fn scrape_after(admin: SocketAddr, n: f64) -> Scrape {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let scrape = scrape(admin).await;
        let seen = total(&scrape, "crawlgate_requests_total");
        if seen == n || tokio::time::Instant::now() > deadline {
            assert_eq!(seen, n, "requests counted");
            return scrape;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn with_admin(upstream: &str) -> Overrides {
    Overrides {
        upstream: Some(upstream.to_owned()),
        admin_listen: Some("127.0.0.1:0".to_owned()),
        ..Overrides::default()
    }
}

#[tokio::test]
async fn metrics_count_a_known_request_mix_exactly() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start_with("", with_admin(&upstream.url())).await;
    let admin = proxy.admin_addr.expect("admin listener");
    let addr = proxy.addr;
    for _ in 0..3 {
        assert_eq!(
            get(addr, "example.com", "/", Some(FIREFOX)).await.status,
            200
        );
    }
    for _ in 0..2 {
        let res = get(addr, "example.com", "/?do=vote", Some(GOOGLEBOT)).await;
        assert_eq!(res.status, 403);
    }
    let res = get(addr, "www.example.com", "/page", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 301);
    let res = get(addr, "example.com", "/robots.txt", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 200);
    let res = get(addr, "example.com", "/", None).await;
    assert_eq!(res.status, 200);
    let res = send_raw(
        addr,
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    )
    .await;
    assert_eq!(res.status, 405);

    let s = scrape_after(admin, 9.0).await;
    let requests = |decision, class, code| {
        value(
            &s,
            "crawlgate_requests_total",
            &[("decision", decision), ("class", class), ("code", code)],
        )
    };
    assert_eq!(requests("forward", "human", "2xx"), 3.0);
    assert_eq!(requests("block", "search", "4xx"), 2.0);
    assert_eq!(requests("redirect", "search", "3xx"), 1.0);
    assert_eq!(requests("robots", "search", "2xx"), 1.0);
    assert_eq!(requests("forward", "no-user-agent", "2xx"), 1.0);
    assert_eq!(requests("reject", "none", "4xx"), 1.0);
    // Four forwarded requests, four upstream timings; none left in flight.
    assert_eq!(value(&s, "crawlgate_upstream_response_seconds", &[]), 4.0);
    assert_eq!(value(&s, "crawlgate_upstream_requests_in_flight", &[]), 0.0);
    assert_eq!(total(&s, "crawlgate_upstream_errors_total"), 0.0);
    // A keep-alive connection is counted while it is open.
    let (held, _) = support::open_exchange(
        addr,
        b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\n\r\n",
    )
    .await;
    let open = value(
        &scrape(admin).await,
        "crawlgate_client_connections_open",
        &[("protocol", "http1")],
    );
    assert!(open >= 1.0, "the held connection is not counted: {open}");
    drop(held);

    // Every connection was closed (`Connection: close`); the server's side
    // of the last one ends a moment after the client has its response.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let open = value(
            &scrape(admin).await,
            "crawlgate_client_connections_open",
            &[("protocol", "http1")],
        );
        if open == 0.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{open} connections still open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        value(&s, "crawlgate_config_last_reload_successful", &[]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "crawlgate_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    // No label carries request text.
    for sample in &s.samples {
        for (key, v) in sample.labels.iter() {
            assert!(
                !v.contains("example") && !v.contains('/') && !v.contains("Mozilla"),
                "{} has {key}={v}",
                sample.metric
            );
        }
    }

    // A reload is counted, and a failed one says so.
    proxy.rewrite("[block]\nparams = [\"\"]\n");
    proxy.reload().await.expect_err("invalid");
    let s = scrape(admin).await;
    let reloads = |result| value(&s, "crawlgate_config_reloads_total", &[("result", result)]);
    assert_eq!(reloads("failure"), 1.0);
    assert_eq!(reloads("success"), 0.0);
    assert_eq!(
        value(&s, "crawlgate_config_last_reload_successful", &[]),
        0.0
    );
    proxy.stop().await;
}

#[tokio::test]
async fn upstream_errors_are_counted_by_kind_and_readyz_says_why() {
    // Nobody listens on the upstream's port yet.
    let upstream_addr = free_addr();
    let proxy = Proxy::start_with(
        "[proxy]\nshutdown_grace = \"3s\"\n",
        with_admin(&format!("http://{upstream_addr}")),
    )
    .await;
    let admin = proxy.admin_addr.expect("admin listener");
    for _ in 0..2 {
        let res = get(proxy.addr, "example.com", "/", Some(FIREFOX)).await;
        assert_eq!(res.status, 502);
    }
    let s = scrape_after(admin, 2.0).await;
    assert_eq!(
        value(
            &s,
            "crawlgate_upstream_errors_total",
            &[("kind", "connect"), ("side", "upstream")]
        ),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "crawlgate_requests_total",
            &[("decision", "forward"), ("class", "human"), ("code", "5xx")]
        ),
        2.0
    );
    assert_eq!(get(admin, "localhost", "/healthz", None).await.status, 200);
    let ready = get(admin, "localhost", "/readyz", None).await;
    assert_eq!(ready.status, 503);
    assert!(ready.text().contains("unreachable"), "{}", ready.text());
    assert_eq!(ready.text().lines().count(), 1, "{}", ready.text());

    // The upstream comes up: ready.
    let upstream = Upstream::start_on(upstream_addr).await;
    let ready = get(admin, "localhost", "/readyz", None).await;
    assert_eq!(ready.status, 200, "{}", ready.text());

    // A download in flight keeps the drain going: not ready meanwhile.
    let (slow, _) = support::open_exchange(
        proxy.addr,
        b"GET /download?bytes=100000000 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\n\r\n",
    )
    .await;
    proxy.drain().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let ready = get(admin, "localhost", "/readyz", None).await;
        if ready.status == 503 {
            assert!(ready.text().contains("draining"), "{}", ready.text());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still ready while draining"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(slow);
    proxy.stop().await;
    drop(upstream);
}

/// The common combined log format, as GoAccess and fail2ban read it.
fn combined_regex() -> regex::Regex {
    regex::Regex::new(
        r#"^(?P<client>\S+) (?P<ident>\S+) (?P<user>\S+) \[(?P<time>\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] "(?P<method>\S+) (?P<target>\S+) (?P<proto>HTTP/\d\.\d)" (?P<status>\d{3}) (?P<bytes>\d+|-) "(?P<referer>[^"]*)" "(?P<agent>[^"]*)"(?P<rest>.*)$"#,
    )
    .expect("regex")
}

#[tokio::test]
async fn the_combined_log_names_the_real_client() {
    let upstream = Upstream::start().await;
    for (trusted, expected) in [(true, "203.0.113.9"), (false, "127.0.0.1")] {
        let trust = if trusted {
            "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n"
        } else {
            ""
        };
        let toml = format!("{trust}[log]\nfile = \"access.log\"\n");
        let proxy = Proxy::start(&toml, &upstream.url()).await;
        let log = proxy.config_path.with_file_name("access.log");
        let res = request(
            proxy.addr,
            "GET",
            "example.com",
            "/page?id=1",
            Some(FIREFOX),
            "X-Forwarded-For: 203.0.113.9\r\nReferer: https://example.com/\"q\"\r\n",
        )
        .await;
        assert_eq!(res.status, 200);
        let res = get(proxy.addr, "example.com", "/?do=vote", Some(GOOGLEBOT)).await;
        assert_eq!(res.status, 403);
        let lines = support::wait_lines(&log, 2).await;
        assert_eq!(lines.len(), 2, "{lines:?}");
        let re = combined_regex();
        let first = re
            .captures(&lines[0])
            .unwrap_or_else(|| panic!("{}", lines[0]));
        assert_eq!(&first["client"], expected, "trusted: {trusted}");
        assert_eq!(&first["method"], "GET");
        assert_eq!(&first["target"], "/page?id=1");
        assert_eq!(&first["proto"], "HTTP/1.1");
        assert_eq!(&first["status"], "200");
        let body = "upstream saw GET /page?id=1".len();
        assert_eq!(first["bytes"].parse::<usize>().expect("bytes"), body);
        assert_eq!(&first["referer"], "https://example.com/\\x22q\\x22");
        assert_eq!(&first["agent"], FIREFOX);
        assert!(
            first["rest"].starts_with(" class=human rule=\"no-bot-token"),
            "{}",
            &first["rest"]
        );
        assert!(
            first["rest"].contains(" decision=forward upstream=0."),
            "{}",
            &first["rest"]
        );
        let second = re
            .captures(&lines[1])
            .unwrap_or_else(|| panic!("{}", lines[1]));
        assert_eq!(&second["status"], "403");
        assert_eq!(&second["client"], "127.0.0.1", "a robot without XFF");
        assert!(
            second["rest"].starts_with(" class=search rule=\"search:"),
            "{}",
            &second["rest"]
        );
        assert!(
            second["rest"].contains(" decision=block upstream=- "),
            "{}",
            &second["rest"]
        );
        proxy.stop().await;
    }
}

#[tokio::test]
async fn the_json_log_has_every_field() {
    let upstream = Upstream::start().await;
    let toml = "[proxy]\ntrusted_proxies = [\"127.0.0.0/8\"]\n[log]\nformat = \"json\"\nfile = \"access.json\"\n";
    let proxy = Proxy::start(toml, &upstream.url()).await;
    let log = proxy.config_path.with_file_name("access.json");
    let res = request(
        proxy.addr,
        "POST",
        "example.com",
        "/form",
        Some(FIREFOX),
        "X-Forwarded-For: 198.51.100.7, 127.0.0.5\r\nContent-Length: 5\r\n\r\nhello",
    )
    .await;
    assert_eq!(res.status, 200);
    let res = get(proxy.addr, "example.com", "/robots.txt", Some("curl/8.5.0")).await;
    assert_eq!(res.status, 200);
    // A chunked upload: the bytes passed upstream, no length declared.
    let res = request(
        proxy.addr,
        "POST",
        "example.com",
        "/upload",
        Some(FIREFOX),
        "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    )
    .await;
    assert_eq!(res.status, 200);
    let lines = support::wait_lines(&log, 3).await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    let first: serde_json::Value = serde_json::from_str(&lines[0]).expect("json");
    assert_eq!(first["client"], "198.51.100.7");
    assert_eq!(first["method"], "POST");
    assert_eq!(first["host"], "example.com");
    assert_eq!(first["path"], "/form");
    assert_eq!(first["protocol"], "HTTP/1.1");
    assert_eq!(first["tls"], false);
    assert_eq!(first["status"], 200);
    assert_eq!(first["bytes_in"], 5);
    assert_eq!(first["bytes_out"], "upstream saw POST /form".len());
    assert_eq!(first["user_agent"], FIREFOX);
    assert_eq!(first["class"], "human");
    assert_eq!(first["decision"], "forward");
    assert!(first["upstream_seconds"].as_f64().is_some_and(|s| s >= 0.0));
    assert!(first["total_seconds"].as_f64().is_some_and(|s| s >= 0.0));
    assert!(first["time"].as_str().is_some_and(|t| t.contains('T')));
    assert_eq!(first["error"], serde_json::Value::Null);
    let second: serde_json::Value = serde_json::from_str(&lines[1]).expect("json");
    assert_eq!(second["decision"], "robots");
    assert_eq!(second["class"], "library");
    assert_eq!(second["upstream_seconds"], serde_json::Value::Null);
    assert!(second["rule"]
        .as_str()
        .is_some_and(|r| r.starts_with("library:")));
    let third: serde_json::Value = serde_json::from_str(&lines[2]).expect("json");
    assert_eq!(third["bytes_in"], 11, "{third}");
    proxy.stop().await;
}

/// Issue 25: requests still going when the drain's grace period ends are
/// cut off, and still have their access-log lines: one waiting for the
/// site with status 0 and nothing sent, one in the middle of its body with
/// its status and the bytes sent, both `error=aborted error_side=proxy`.
#[tokio::test]
async fn a_request_cut_off_by_the_end_of_a_drain_is_logged() {
    let upstream = Upstream::start().await;
    // The log outside the proxy's folder, which goes when it stops.
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("access.log");
    let proxy = Proxy::start_with(
        &format!(
            "[proxy]\nshutdown_grace = \"300ms\"\n[log]\nfile = {:?}\nformat = \"json\"\n",
            log.display()
        ),
        with_admin(&upstream.url()),
    )
    .await;
    // The site holds the page until the end of the test.
    let mut held = tokio::net::TcpStream::connect(proxy.addr)
        .await
        .expect("connect");
    tokio::io::AsyncWriteExt::write_all(
        &mut held,
        b"GET /hold HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 x\r\n\r\n",
    )
    .await
    .expect("write");
    // A download its client does not read: cut off in the middle.
    let (_download, first) = support::open_exchange(
        proxy.addr,
        b"GET /download?bytes=100000000 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 x\r\n\r\n",
    )
    .await;
    assert!(first.starts_with(b"HTTP/1.1 200"), "{first:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while upstream.requests().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the requests reach the site"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    proxy.stop().await;
    let lines = support::wait_lines(&log, 2).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    let record = |path: &str| -> serde_json::Value {
        lines
            .iter()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
            .find(|r| r["path"] == path)
            .expect("logged")
    };
    let held = record("/hold");
    assert_eq!(held["status"], 0, "{held}");
    assert_eq!(held["bytes_out"], 0, "{held}");
    assert_eq!(held["error"], "aborted", "{held}");
    assert_eq!(held["error_side"], "proxy", "{held}");
    let cut = record("/download");
    assert_eq!(cut["status"], 200, "{cut}");
    let sent = cut["bytes_out"].as_u64().expect("bytes_out");
    assert!(sent > 0 && sent < 100_000_000, "{cut}");
    assert_eq!(cut["error"], "aborted", "{cut}");
    assert_eq!(cut["error_side"], "proxy", "{cut}");
    upstream.release_held();
}
