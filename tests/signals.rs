//! The real binary under real signals: SIGHUP reloads config, rules and
//! certificates while a download streams on; a bad reload keeps the old
//! state; SIGTERM drains in-flight requests, refuses new connections and
//! exits 0; a second SIGTERM exits at once.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::download::{finish_download, start_download};
use support::process::{self, free_addr, wait_for, Running};
use support::tls::{self as t, Ca};
use support::{get, Upstream, FIREFOX};

/// A robot only the reloaded rules know.
const FETCHER: &str = "Mozilla/5.0 (X11; Linux x86_64) FancyFetcher/3.1";

fn write_config(
    path: &Path,
    listen: SocketAddr,
    tls: SocketAddr,
    upstream: &str,
    rules: &Path,
    certs: &Path,
) {
    let text = format!(
        "listen = \"{listen}\"\nupstream = \"{upstream}\"\nrules_dir = {rules:?}\n\
         [proxy]\nshutdown_grace = \"20s\"\nworkers = 3\n\
         [tls]\nlisten = \"{tls}\"\ncerts = {certs:?}\n",
        rules = rules.display().to_string(),
        certs = certs.display().to_string(),
    );
    std::fs::write(path, text).expect("write config");
}

/// What the upstream was told about `ua`: `X-Crawler` of its latest request.
async fn class_of(addr: SocketAddr, upstream: &Upstream, ua: &str) -> String {
    let res = get(addr, "example.test", "/who", Some(ua)).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let last = upstream.last("/who").expect("reached");
    last.header("x-crawler").unwrap_or("?").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_rules_and_certificates_while_a_download_streams() {
    const SIZE: u64 = 64 * 1024 * 1024;
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules");
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&rules).expect("mkdir");
    std::fs::create_dir_all(&certs).expect("mkdir");
    std::fs::write(rules.join("search.txt"), "Googlebot\n").expect("rules");
    let ca = Ca::new();
    let first_cert = ca.leaf(&["example.test"]);
    t::write_flat(&certs, "example.test.crt", &first_cert);
    let (addr, tls_addr) = (free_addr(), free_addr());
    let config = dir.path().join("crawlgate.toml");
    write_config(&config, addr, tls_addr, &upstream.url(), &rules, &certs);
    let log = tempfile::NamedTempFile::new().expect("log file");
    let proxy = process::start(
        &["--config", config.to_str().expect("utf-8 path")],
        addr,
        Stdio::from(log.reopen().expect("log")),
    );
    process::wait_listening(tls_addr);

    assert_eq!(class_of(addr, &upstream, FETCHER).await, "0");
    // A TLS connection opened before the reload, kept alive across it.
    let stream = t::handshake(
        tls_addr,
        t::client_config(ca.roots(), &[b"http/1.1"]),
        Some("example.test"),
    )
    .await
    .expect("handshake");
    assert_eq!(t::presented(&stream), first_cert.der);
    let mut old_tls = t::Client::connect(stream).await;
    let (body, hasher, seen) = start_download(addr, SIZE, 1024 * 1024).await;

    // New rules and a renewed certificate, then SIGHUP.
    std::fs::write(rules.join("search.txt"), "Googlebot\nFancyFetcher\n").expect("rules");
    let renewed = ca.leaf(&["example.test"]);
    t::write_flat(&certs, "example.test.crt", &renewed);
    proxy.signal("HUP");
    wait_for("the new rules", async || {
        class_of(addr, &upstream, FETCHER).await == "1"
    })
    .await;
    // Every worker (each with its own state cell) has the new rules: new
    // connections land on any of the three.
    for _ in 0..30 {
        assert_eq!(class_of(addr, &upstream, FETCHER).await, "1");
    }

    let stream = t::handshake(
        tls_addr,
        t::client_config(ca.roots(), &[b"h2"]),
        Some("example.test"),
    )
    .await
    .expect("handshake after reload");
    assert_eq!(
        t::presented(&stream),
        renewed.der,
        "the renewed certificate"
    );
    let page = t::Client::connect(stream)
        .await
        .send(tls_get(tls_addr, "/after"))
        .await;
    assert_eq!(page.status, 200);
    let page = old_tls.send(tls_get(tls_addr, "/old-connection")).await;
    assert_eq!(
        page.status, 200,
        "the connection from before the reload still serves"
    );

    // An invalid config is refused; the running state keeps serving.
    std::fs::write(&config, "listen = [not toml").expect("break config");
    proxy.signal("HUP");
    wait_for("the reload error in the log", async || {
        std::fs::read_to_string(log.path()).is_ok_and(|l| l.contains("reload failed"))
    })
    .await;
    assert_eq!(
        class_of(addr, &upstream, FETCHER).await,
        "1",
        "old state kept"
    );

    // A changed listen address is reported as needing a restart.
    write_config(
        &config,
        free_addr(),
        tls_addr,
        &upstream.url(),
        &rules,
        &certs,
    );
    proxy.signal("HUP");
    wait_for("the restart notice", async || {
        std::fs::read_to_string(log.path()).is_ok_and(|l| l.contains("needs a restart"))
    })
    .await;
    assert_eq!(
        get(addr, "example.test", "/", Some(FIREFOX)).await.status,
        200
    );

    // The download started before the first reload completes intact.
    let (total, digest) = finish_download(body, hasher, seen).await;
    assert_eq!(total, SIZE);
    assert_eq!(digest, support::pattern_sha256(SIZE));
    let log = std::fs::read_to_string(log.path()).expect("log");
    assert!(log.contains("listen"), "{log}");
    drop(proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_upstream_connections_unless_the_upstream_changes() {
    use std::sync::atomic::Ordering;
    let (first, second) = (Upstream::start().await, Upstream::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).expect("mkdir");
    std::fs::write(rules.join("search.txt"), "Googlebot\n").expect("rules");
    let addr = free_addr();
    let config = dir.path().join("crawlgate.toml");
    let write = |upstream: &Upstream| {
        let text = format!(
            "listen = \"{addr}\"\nupstream = \"{}\"\nrules_dir = {:?}\n[proxy]\nworkers = 1\n",
            upstream.url(),
            rules.display().to_string(),
        );
        std::fs::write(&config, text).expect("config");
    };
    write(&first);
    let proxy = process::start(
        &["--config", config.to_str().expect("utf-8 path")],
        addr,
        Stdio::null(),
    );
    for _ in 0..3 {
        assert_eq!(class_of(addr, &first, FETCHER).await, "0");
    }
    assert_eq!(
        first.connections.load(Ordering::SeqCst),
        1,
        "one pooled connection"
    );

    // New rules, same upstream: the pooled connection is kept.
    std::fs::write(rules.join("search.txt"), "Googlebot\nFancyFetcher\n").expect("rules");
    proxy.signal("HUP");
    wait_for("the new rules", async || {
        class_of(addr, &first, FETCHER).await == "1"
    })
    .await;
    assert_eq!(
        first.connections.load(Ordering::SeqCst),
        1,
        "a reload that left the upstream alone reconnected"
    );

    // Another upstream: new requests go there, on a connection of their own.
    write(&second);
    proxy.signal("HUP");
    wait_for("the new upstream", async || {
        get(addr, "example.test", "/who", Some(FIREFOX)).await;
        !second.requests().is_empty()
    })
    .await;
    assert_eq!(class_of(addr, &second, FETCHER).await, "1");
    assert_eq!(second.connections.load(Ordering::SeqCst), 1);
    assert_eq!(first.connections.load(Ordering::SeqCst), 1);
}

fn tls_get(addr: SocketAddr, path: &str) -> http::Request<http_body_util::Full<Bytes>> {
    http::Request::get(format!("https://example.test:{}{path}", addr.port()))
        .header("user-agent", FIREFOX)
        .body(http_body_util::Full::new(Bytes::new()))
        .expect("request")
}

fn plain_proxy(upstream: &Upstream, grace: &str) -> (Running, SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("crawlgate.toml");
    let addr = free_addr();
    std::fs::write(
        &config,
        format!(
            "listen = \"{addr}\"\nupstream = \"{}\"\n[proxy]\nshutdown_grace = \"{grace}\"\n",
            upstream.url()
        ),
    )
    .expect("config");
    let proxy = process::start(
        &["--config", config.to_str().expect("utf-8 path")],
        addr,
        Stdio::null(),
    );
    (proxy, addr, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_requests_and_refuses_new_connections() {
    const SIZE: u64 = 32 * 1024 * 1024;
    let upstream = Upstream::start().await;
    let (mut proxy, addr, _dir) = plain_proxy(&upstream, "20s");
    let (body, hasher, seen) = start_download(addr, SIZE, 1024 * 1024).await;

    let stopped_at = Instant::now();
    proxy.signal("TERM");
    wait_for("new connections to be refused", async || {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    let (total, digest) = finish_download(body, hasher, seen).await;
    assert_eq!(total, SIZE, "the in-flight download completed");
    assert_eq!(digest, support::pattern_sha256(SIZE));
    let status = tokio::task::spawn_blocking(move || proxy.wait_exit(Duration::from_secs(20)))
        .await
        .expect("join");
    assert_eq!(status.code(), Some(0));
    assert!(
        stopped_at.elapsed() < Duration::from_secs(20),
        "within the grace period"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_exits_at_once() {
    const SIZE: u64 = 256 * 1024 * 1024;
    let upstream = Upstream::start().await;
    let (mut proxy, addr, _dir) = plain_proxy(&upstream, "60s");
    let (body, hasher, seen) = start_download(addr, SIZE, 1024 * 1024).await;
    proxy.signal("TERM");
    wait_for("new connections to be refused", async || {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    let second = Instant::now();
    proxy.signal("TERM");
    let status = tokio::task::spawn_blocking(move || proxy.wait_exit(Duration::from_secs(5)))
        .await
        .expect("join");
    assert!(second.elapsed() < Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    // The download was cut, and the client can tell: not all bytes came.
    let (total, _) = finish_download(body, hasher, seen).await;
    assert!(total < SIZE, "a cut download is not passed off as complete");
}
