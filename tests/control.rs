//! The library entry production runs (`crawlgate::run::Runner`), driven by
//! control events in-process: reload and drain with several workers.

mod support;

use std::time::Duration;

use support::{get, two_workers, Upstream, GOOGLEBOT};
use tokio::io::AsyncReadExt;

/// A reload reaches every worker: after it, fresh connections (spread by
/// the kernel over both workers' sockets) all see the new block list; a
/// reload with a broken file changes nothing and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_reaches_every_worker() {
    let upstream = Upstream::start().await;
    let proxy = two_workers("[block]\nparams = [\"do\"]\n", &upstream).await;
    let before = get(proxy.addr, "example.com", "/?vote=1", Some(GOOGLEBOT)).await;
    assert_eq!(before.status, 200);

    proxy.rewrite("[block]\nparams = [\"vote\"]\n");
    let done = proxy.reload().await.expect("reload succeeds");
    assert!(done.restart_needed.is_empty(), "{:?}", done.restart_needed);
    for _ in 0..24 {
        let res = get(proxy.addr, "example.com", "/?vote=1", Some(GOOGLEBOT)).await;
        assert_eq!(res.status, 403, "a worker kept the old rules");
        let res = get(proxy.addr, "example.com", "/?do=1", Some(GOOGLEBOT)).await;
        assert_eq!(res.status, 200);
    }

    proxy.rewrite("[block]\nparams = [\"a b\"]\n");
    let err = proxy.reload().await.expect_err("invalid file");
    assert!(err.to_string().contains("block.params"), "{err}");
    let res = get(proxy.addr, "example.com", "/?vote=1", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 403, "a failed reload changed the running state");

    // The connection cap changed on disk needs a restart: reported, and
    // the running one kept.
    proxy.rewrite("[limits]\nmax_connections = 5\n");
    let done = proxy.reload().await.expect("reload succeeds");
    let keys: Vec<_> = done.restart_needed.iter().map(|c| c.0).collect();
    assert_eq!(keys, ["limits.max_connections"]);
    assert_eq!(
        get(proxy.addr, "example.com", "/", Some(GOOGLEBOT))
            .await
            .status,
        200
    );
    proxy.stop().await;
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
