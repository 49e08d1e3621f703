//! The library entry production runs (`crawlgate::run::Runner`), driven by
//! control events in-process: a drain with several workers.

mod support;

use std::time::Duration;

use support::{two_workers, Upstream};
use tokio::io::AsyncReadExt;

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
