//! Arbitrary bytes, sent in arbitrary pieces over a real loopback
//! connection, to crawlgate's own HTTP/1.1 layer (`proxy.http1 =
//! "native"`) in front of a real upstream (hyper's HTTP/1.1 server).
//!
//! This drives the connection's state machine itself: the idle wait, head
//! reads across pieces, refusals, request bodies fed while the answer is
//! written (lengths, chunks, `100-continue`), pipelining, lingering
//! closes, upgrades handed to the tunnel, and the upstream side's own
//! connections and pool.
//!
//! The first byte of the input picks how the rest is cut into writes
//! (1 to 64 bytes each). After the last piece the client shuts its
//! sending half and reads to the end. Checked:
//! - nothing panics (a panic in any of the proxy's tasks aborts);
//! - the proxy closes the connection within [`ENDS_WITHIN`] of the
//!   client's last byte: no state waits forever on a client that is gone;
//! - whatever it wrote opens with one whole, parseable response head;
//! - every head it sent upstream is one hyper's parser accepts;
//! - it still accepts the next connection.
#![no_main]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use crawlgate::config::Overrides;
use crawlgate::http1::parse_response;
use crawlgate::live::Live;
use crawlgate::run::Runner;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

mod pieces;
use pieces::pieces;

/// How long the proxy may take to close a connection once its client has
/// sent everything: well past the header read timeout below, and past
/// any wait a gone client could leave behind.
const ENDS_WITHIN: Duration = Duration::from_secs(10);

/// The proxy's config: the native layer, one worker, no access log, no
/// crawler verification; timeouts short enough that a stuck state shows.
const CONFIG: &str = r#"
[proxy]
http1 = "native"
header_read_timeout = "2s"
response_timeout = "3s"
connect_timeout = "1s"

[limits]
max_header_bytes = 8192
max_body_bytes = 65536
upstream_body_idle_timeout = "3s"

[log]
access = false

[verify]
enabled = false
"#;

struct Setup {
    runtime: Runtime,
    proxy: SocketAddr,
    /// The first error hyper's parser found in a head the proxy sent.
    upstream_refused: Arc<Mutex<Option<String>>>,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

fn setup() -> &'static Setup {
    SETUP.get_or_init(|| {
        // As in crawlgate's own binary, whose Rust runtime ignores SIGPIPE:
        // a write to a connection its peer has reset is an error, not the
        // end of the process. libFuzzer's `main` is C's and leaves the
        // default, which ended a first run (a `writev`, which std does not
        // send with MSG_NOSIGNAL, to a peer that had reset).
        // SAFETY: called once, before any thread of ours writes to a socket.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let upstream_refused = Arc::new(Mutex::new(None));
        let proxy = runtime.block_on(start(Arc::clone(&upstream_refused)));
        Setup {
            runtime,
            proxy,
            upstream_refused,
        }
    })
}

/// Starts the upstream and the proxy in front of it; the proxy's address.
async fn start(refused: Arc<Mutex<Option<String>>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind upstream");
    let upstream = listener.local_addr().expect("upstream addr");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let refused = Arc::clone(&refused);
            tokio::spawn(async move {
                // Room for every field the proxy may pass (its
                // `limits.max_headers`, 100) and those it adds: hyper's
                // server, like Apache, refuses more than 100 by default.
                let served = hyper::server::conn::http1::Builder::new()
                    .max_headers(256)
                    .serve_connection(TokioIo::new(stream), hyper::service::service_fn(answer))
                    .with_upgrades()
                    .await;
                if let Err(err) = served {
                    if err.is_parse() {
                        refused
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(err.to_string());
                    }
                }
            });
        }
    });

    let dir = tempfile::tempdir().expect("temp dir").keep();
    let config = dir.join("crawlgate.toml");
    std::fs::write(&config, CONFIG).expect("write config");
    let overrides = Overrides {
        listen: Some("127.0.0.1:0".to_owned()),
        upstream: Some(format!("http://{upstream}")),
        workers: Some(1),
        ..Overrides::default()
    };
    let live = Live::start(Some(config), overrides).expect("the fuzz config is valid");
    let runner = Runner::bind(Arc::new(live)).expect("bind proxy");
    let proxy = runner.addrs().plain;
    let (control, events) = tokio::sync::mpsc::channel(1);
    // Kept for as long as the process runs: a closed channel would drain.
    std::mem::forget(control);
    tokio::spawn(runner.run(events));
    proxy
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The upstream's answer, by the path's first letter after `/`: `c` a
/// chunked body, `n` a 204, `u` a 101 to an upgrade (then an echo), `h` a
/// body the size the path's length says with its length; anything else a
/// short body with its length. The request's body is read first.
async fn answer(mut req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().as_bytes().to_vec();
    let upgrade = req.headers().contains_key(hyper::header::UPGRADE);
    if path.get(1) == Some(&b'u') && upgrade {
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            if let Ok(upgraded) = on.await {
                let mut io = TokioIo::new(upgraded);
                let mut buf = [0; 4096];
                while let Ok(n @ 1..) = io.read(&mut buf).await {
                    if io.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        });
        let res = Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .body(Full::new(Bytes::new()).boxed())
            .expect("response");
        return Ok(res);
    }
    let read = req.into_body().collect().await;
    let status = if read.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let res = match path.get(1) {
        Some(b'c') => {
            let frames = [Bytes::from_static(b"chunk one "), Bytes::from(path)]
                .map(|b| Ok::<_, Infallible>(Frame::data(b)));
            let body = StreamBody::new(futures_util::stream::iter(frames));
            Response::builder().status(status).body(body.boxed())
        }
        Some(b'n') => Response::builder()
            .status(StatusCode::NO_CONTENT)
            .body(Full::new(Bytes::new()).boxed()),
        Some(b'h') => Response::builder()
            .status(status)
            .body(Full::new(Bytes::from(vec![b'x'; path.len() * 997])).boxed()),
        _ => Response::builder()
            .status(status)
            .body(Full::new(Bytes::from_static(b"hello")).boxed()),
    };
    Ok(res.expect("response"))
}

/// Panics with what hyper's parser refused, if the proxy ever sent it a
/// head it could not read.
fn check_upstream(setup: &Setup) {
    if let Some(err) = setup
        .upstream_refused
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        panic!("the upstream could not parse what the proxy sent: {err}");
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&seed, data)) = input.split_first() else {
        return;
    };
    let setup = setup();
    check_upstream(setup);
    let got = setup.runtime.block_on(async {
        let stream = TcpStream::connect(setup.proxy)
            .await
            .expect("the proxy accepts connections");
        stream.set_nodelay(true).expect("nodelay");
        let (mut rx, mut tx) = stream.into_split();
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            // A reset (the proxy refusing with bytes unread) ends it too.
            let _ = rx.read_to_end(&mut got).await;
            got
        });
        let mut at = 0;
        for end in pieces(seed, data.len()) {
            if tx.write_all(&data[at..end]).await.is_err() {
                break;
            }
            at = end;
            tokio::task::yield_now().await;
        }
        let _ = tx.shutdown().await;
        match tokio::time::timeout(ENDS_WITHIN, reading).await {
            Ok(got) => got.expect("reader"),
            Err(_) => panic!(
                "the proxy kept the connection open {ENDS_WITHIN:?} after its client finished"
            ),
        }
    });
    if !got.is_empty() {
        let mut fields = Vec::new();
        match parse_response(&got, false, 64 * 1024, 128, &mut fields) {
            Ok(Some(_)) => {}
            other => panic!(
                "the proxy's answer does not open with a whole head: {other:?}\n{:?}",
                String::from_utf8_lossy(&got[..got.len().min(2048)])
            ),
        }
    }
    check_upstream(setup);
});
