//! A site behind crawlgate that counts what reaches it: each request's
//! target and User-Agent recorded, answers shaped by the query (headers,
//! status, size), and a switch that makes it fail or die, for the tests of
//! what crawlgate keeps and serves without asking the site.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// How the upstream answers.
pub const UP: u8 = 0;
/// `503 Service Unavailable` to everything.
pub const FAILING: u8 = 1;
/// Closes each connection without an answer (crawlgate answers 502).
pub const DEAD: u8 = 2;

/// An upstream that records each request's target and User-Agent and
/// answers `page <target>` with the response headers named in the query
/// (`?set-cookie=a=1&cache-control=private`; `etag=v1` sends `"v1"`;
/// `status=404` sets the status; `size=N` pads the body to N bytes).
pub struct Site {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    mode: Arc<AtomicU8>,
}

impl Site {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mode = Arc::new(AtomicU8::new(UP));
        let (seen2, mode2) = (Arc::clone(&seen), Arc::clone(&mode));
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (seen, mode) = (Arc::clone(&seen2), Arc::clone(&mode2));
                let service =
                    service_fn(move |req| answer(req, Arc::clone(&seen), Arc::clone(&mode)));
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, seen, mode }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests for `target` from `ua` reached the site.
    pub fn seen(&self, target: &str, ua: &str) -> usize {
        let seen = self.seen.lock().expect("lock");
        seen.iter().filter(|(t, u)| t == target && u == ua).count()
    }

    pub fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }
}

async fn answer(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    mode: Arc<AtomicU8>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let target = req.uri().to_string();
    let ua = req
        .headers()
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    seen.lock().expect("lock").push((target.clone(), ua));
    match mode.load(Ordering::SeqCst) {
        FAILING => {
            let res = Response::builder()
                .status(503)
                .body(Full::new(Bytes::from_static(b"down for maintenance")))
                .expect("response");
            return Ok(res);
        }
        DEAD => return Err(std::io::Error::other("dead")),
        _ => {}
    }
    let mut res = Response::builder();
    let mut body = format!("page {target}");
    for pair in req.uri().query().unwrap_or("").split('&') {
        let Some((name, value)) = pair.split_once('=') else {
            continue;
        };
        match name {
            "status" => res = res.status(value.parse::<u16>().expect("status")),
            "size" => {
                let size: usize = value.parse().expect("size");
                body = format!("{body:x<size$}");
            }
            "etag" => res = res.header(name, format!("\"{value}\"")),
            _ => res = res.header(name, value),
        }
    }
    Ok(res.body(Full::new(Bytes::from(body))).expect("response"))
}
