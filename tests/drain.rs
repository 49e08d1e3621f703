//! What a drain does: requests in flight finish (a download read to its
//! last byte), new connections are refused, and the process returns once
//! the connections are gone, within the grace period; a second SIGTERM
//! ends it at once and cuts what was left. Driven two ways: SIGTERM to the
//! real binary as a child process (its exit code read), and the in-process
//! drain control event of the library entry production runs
//! ([`Proxy::drain`](support::Proxy::drain), what the first SIGTERM sends).

mod support;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::download::{finish_download, start_download};
use support::process::{self, free_addr, wait_for, Running};
use support::{two_workers, Upstream};
use tokio::io::AsyncReadExt;

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

/// A drain with two workers lets a request in flight finish, refuses new
/// connections, and returns once the connections are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_finishes_what_is_in_flight_then_returns() {
    let upstream = Upstream::start().await;
    let proxy = two_workers("", &upstream).await;
    let addr = proxy.addr;
    // A large download, read slowly: in flight when the drain starts.
    let (mut slow, first) = support::open_exchange(
        addr,
        b"GET /download?bytes=8000000 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\n\r\n",
    )
    .await;
    assert!(first.starts_with(b"HTTP/1.1 200"));

    proxy.drain().await;
    // New connections are refused once the listeners are closed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still accepting while draining"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The download in flight completes in full.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut rest))
        .await
        .expect("the download finished during the drain")
        .expect("read");
    let body = first.len() + rest.len();
    assert!(body > 8_000_000, "only {body} bytes arrived");
    proxy.stop().await;
}

/// The access-log lines of requests answered just before SIGTERM are
/// written before the process exits: the writer gathers lines for 20 ms
/// before it writes them, and the exit waits for that batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_answered_just_before_sigterm_keep_their_log_lines() {
    const REQUESTS: usize = 20;
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("crawlgate.toml");
    let log = dir.path().join("access.log");
    let addr = free_addr();
    std::fs::write(
        &config,
        format!(
            "listen = \"{addr}\"\nupstream = \"{}\"\n[log]\naccess = true\nfile = \"{}\"\n[verify]\nenabled = false\n",
            upstream.url(),
            log.display()
        ),
    )
    .expect("config");
    let mut proxy = process::start(
        &["--config", config.to_str().expect("utf-8 path")],
        addr,
        Stdio::null(),
    );
    for i in 0..REQUESTS {
        let res = support::get(addr, "example.com", &format!("/page/{i}"), None).await;
        assert_eq!(res.status, 200);
    }
    // At once, while the last lines wait in the writer's batch.
    proxy.signal("TERM");
    let status = tokio::task::spawn_blocking(move || proxy.wait_exit(Duration::from_secs(20)))
        .await
        .expect("join");
    assert_eq!(status.code(), Some(0));
    let lines = support::lines(&log);
    assert_eq!(lines.len(), REQUESTS, "{lines:#?}");
    assert!(lines[REQUESTS - 1].contains(&format!("/page/{}", REQUESTS - 1)));
}
