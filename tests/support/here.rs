//! crawlgate's request handling served on the test's own runtime, so
//! that a paused clock governs its timers.

use std::net::SocketAddr;
use std::sync::Arc;

use crawlgate::config::Overrides;
use crawlgate::live::Live;
use crawlgate::service::{self, ConnInfo};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// crawlgate's request handling ([`service::handle`], what every worker
/// runs) served on the test's own runtime, with real sockets on both
/// sides: [`super::Proxy`] runs its workers on threads with runtimes of their
/// own, whose clocks a test cannot pause; this one follows the test's
/// paused clock (`#[tokio::test(start_paused = true)]`).
pub struct Here {
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Here {
    pub async fn start(toml: &str, upstream: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("crawlgate.toml");
        let text = format!("{toml}\n[log]\nfile = \"access.log\"\n[verify]\nenabled = false\n");
        std::fs::write(&path, text).expect("write config");
        let overrides = Overrides {
            upstream: Some(upstream.to_owned()),
            ..Overrides::default()
        };
        let live = Live::start(Some(path), overrides).expect("valid config");
        let slot = Arc::clone(&live.workers[0]);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _live = live;
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                let conn = ConnInfo {
                    peer,
                    local_port: addr.port(),
                    scheme: "http",
                };
                let slot = Arc::clone(&slot);
                let service = service_fn(move |req| service::handle(slot.get(), conn, None, req));
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, _dir: dir }
    }
}
