//! The real binary under real signals: SIGTERM drains in-flight requests,
//! refuses new connections and exits 0; a second SIGTERM exits at once.

mod support;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::download::{finish_download, start_download};
use support::process::{self, free_addr, wait_for, Running};
use support::Upstream;

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
