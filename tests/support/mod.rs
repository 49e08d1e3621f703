//! Shared test fixtures: a recording upstream, an in-process crawlgate on
//! port 0, and a raw HTTP/1.1 client that sends exactly the bytes given.

#![allow(dead_code)]

pub mod corpus;
pub mod dns;
pub mod download;
pub mod here;
pub mod lists;
pub mod metrics;
pub mod process;
pub mod signing;
pub mod site;
pub mod tls;
pub mod verdict;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use crawlgate::config::Overrides;
use crawlgate::live::Live;
use crawlgate::run::{Control, Runner, Stopped};
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

/// What reached the upstream, one entry per request.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub uri: String,
    pub headers: HeaderMap,
    pub body_len: u64,
    pub body_sha256: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn all(&self, name: &str) -> Vec<String> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }
}

/// A real HTTP/1.1 upstream that records every request it receives.
///
/// Routes: `/download?bytes=N` streams N bytes of [`pattern`];
/// `/upload` answers with the SHA-256 of the body it read; `/hold` answers
/// only once the test calls [`Upstream::release_held`] (a request stuck
/// in a slow page); `/sleep?ms=N` answers after N ms; anything else
/// answers `upstream saw <method> <uri>` with a few response headers,
/// including hop-by-hop ones that crawlgate must remove.
pub struct Upstream {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Recorded>>>,
    pub connections: Arc<AtomicUsize>,
    hold: Arc<watch::Sender<bool>>,
}

impl Upstream {
    pub async fn start() -> Self {
        Self::start_with_tls(None).await
    }

    /// An upstream that speaks HTTPS with `acceptor`'s certificate.
    pub async fn start_with_tls(acceptor: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind upstream");
        Self::serve(listener, acceptor)
    }

    /// A plain upstream on `addr` (one a test reserved earlier).
    pub async fn start_on(addr: SocketAddr) -> Self {
        let listener = TcpListener::bind(addr).await.expect("bind upstream");
        Self::serve(listener, None)
    }

    fn serve(listener: TcpListener, acceptor: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let hold = Arc::new(watch::Sender::new(false));
        let (seen2, conns2, hold2) = (
            Arc::clone(&seen),
            Arc::clone(&connections),
            Arc::clone(&hold),
        );
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                conns2.fetch_add(1, Ordering::SeqCst);
                let seen = Arc::clone(&seen2);
                let hold = Arc::clone(&hold2);
                let service = service_fn(move |req| {
                    upstream_handler(req, Arc::clone(&seen), hold.subscribe())
                });
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        None => {
                            let io = TokioIo::new(stream);
                            let _ = upstream_http1().serve_connection(io, service).await;
                        }
                        Some(acceptor) => {
                            let Ok(tls) = acceptor.accept(stream).await else {
                                return;
                            };
                            let io = TokioIo::new(tls);
                            let _ = upstream_http1().serve_connection(io, service).await;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            seen,
            connections,
            hold,
        }
    }

    /// Lets every request to `/hold` (waiting or to come) answer.
    pub fn release_held(&self) {
        self.hold.send_replace(true);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().expect("lock").clone()
    }

    /// The last request for `uri` that reached the upstream.
    pub fn last(&self, uri: &str) -> Option<Recorded> {
        let seen = self.seen.lock().expect("lock");
        seen.iter().rev().find(|r| r.uri == uri).cloned()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// The recording upstream's HTTP/1 settings: heads up to the largest
/// `limits.max_header_bytes` crawlgate accepts (16 MiB) are read, so that
/// a head crawlgate forwards is recorded rather than refused here.
fn upstream_http1() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.max_buf_size(20 << 20);
    builder
}

type UpBody = http_body_util::Either<Full<Bytes>, Chunks>;

async fn upstream_handler(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<Recorded>>>,
    mut hold: watch::Receiver<bool>,
) -> Result<Response<UpBody>, Infallible> {
    let (parts, mut body) = req.into_parts();
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        if let Ok(data) = frame.into_data() {
            len += data.len() as u64;
            hasher.update(&data);
        }
    }
    let sha = hex(&hasher.finalize());
    seen.lock().expect("lock").push(Recorded {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        headers: parts.headers.clone(),
        body_len: len,
        body_sha256: sha.clone(),
    });
    let path = parts.uri.path();
    if path == "/hold" {
        let _ = hold.wait_for(|released| *released).await;
    }
    // `?name=N`, the query of /sleep and /download (0 when absent).
    let number = |name: &str| -> u64 {
        parts
            .uri
            .query()
            .and_then(|q| q.strip_prefix(name)?.strip_prefix('='))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    if path == "/sleep" {
        tokio::time::sleep(Duration::from_millis(number("ms"))).await;
    }
    if path == "/download" {
        let n = number("bytes");
        let body = Chunks::new(n);
        return Ok(Response::new(http_body_util::Either::Right(body)));
    }
    let text = if path == "/upload" {
        sha
    } else {
        format!("upstream saw {} {}", parts.method, parts.uri)
    };
    let mut res = Response::builder();
    if path == "/hsts" {
        // A site with its own HTTPS policy.
        res = res.header("strict-transport-security", "max-age=60");
    }
    let res = res
        .header("x-upstream", "yes")
        .header("keep-alive", "timeout=5")
        .header("connection", "x-private")
        .header("x-private", "secret")
        .body(http_body_util::Either::Left(Full::new(Bytes::from(text))))
        .expect("response");
    Ok(res)
}

/// A raw upstream for one connection that answers its request with a
/// `101` and the bytes `first` in one write, then echoes what comes.
pub async fn switching_echo() -> SocketAddr {
    switching_echo_over(None).await
}

/// [`switching_echo`], over TLS with `acceptor`'s certificate when given.
pub async fn switching_echo_over(acceptor: Option<tokio_rustls::TlsAcceptor>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let (s, _) = listener.accept().await.expect("accept");
        match acceptor {
            None => echo_after_switch(s).await,
            Some(acceptor) => {
                if let Ok(tls) = acceptor.accept(s).await {
                    echo_after_switch(tls).await;
                }
            }
        }
    });
    addr
}

async fn echo_after_switch<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    read_head(&mut s).await.expect("request head");
    s.write_all(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nfirst",
    )
    .await
    .expect("101");
    s.flush().await.expect("101 sent");
    let mut buf = [0u8; 64 << 10];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if s.write_all(&buf[..n]).await.is_err() || s.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads what a client of [`switching_echo`] gets, through `layer`'s
/// proxy, up to the bytes sent with the `101` (`first`): within 5 s, and
/// failing if the connection closes first.
pub async fn read_switched<R: tokio::io::AsyncRead + Unpin>(
    client: &mut R,
    layer: &str,
) -> Vec<u8> {
    let mut got = Vec::new();
    let wanted = b"\r\n\r\nfirst";
    tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 1024];
        while !got.windows(wanted.len()).any(|w| w == wanted) {
            let n = client.read(&mut buf).await.expect("read");
            assert!(
                n > 0,
                "{layer}: closed after {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{layer}: {:?}", String::from_utf8_lossy(&got)));
    got
}

/// Reads one message head, up to and including its blank line, from
/// `stream` a byte at a time, so that nothing after it is taken (a raw
/// upstream reads the request, or a test the answer, and then what
/// follows); `None` when the stream ends or fails first.
pub async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(stream.read_u8().await.ok()?);
    }
    Some(head)
}

/// The deterministic byte pattern of downloads: byte i is `(i * 31 + i / 4093) % 251`.
pub fn pattern_chunk(offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|k| {
            let i = offset + k;
            ((i.wrapping_mul(31) + i / 4093) % 251) as u8
        })
        .collect()
}

/// SHA-256 of the first `n` bytes of the pattern.
pub fn pattern_sha256(n: u64) -> String {
    let mut hasher = Sha256::new();
    let mut off = 0;
    while off < n {
        let len = (n - off).min(64 * 1024) as usize;
        hasher.update(pattern_chunk(off, len));
        off += len as u64;
    }
    hex(&hasher.finalize())
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A streaming body of `total` pattern bytes, produced 64 KiB at a time.
pub struct Chunks {
    offset: u64,
    total: u64,
    /// Announce the length (Content-Length) or not (chunked).
    exact: bool,
}

impl Chunks {
    pub fn new(total: u64) -> Self {
        Self {
            offset: 0,
            total,
            exact: true,
        }
    }

    pub fn chunked(total: u64) -> Self {
        Self {
            offset: 0,
            total,
            exact: false,
        }
    }
}

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.offset >= self.total {
            return std::task::Poll::Ready(None);
        }
        let len = (self.total - self.offset).min(64 * 1024) as usize;
        let chunk = pattern_chunk(self.offset, len);
        self.offset += len as u64;
        std::task::Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        if self.exact {
            hyper::body::SizeHint::with_exact(self.total - self.offset)
        } else {
            hyper::body::SizeHint::default()
        }
    }
}

/// A crawlgate served in-process through the library entry production
/// uses ([`crawlgate::run::Runner`]), on free loopback ports, with one
/// worker unless the overrides ask for more.
pub struct Proxy {
    pub addr: SocketAddr,
    /// The HTTPS listener, when started with [`Proxy::start_tls`].
    pub tls_addr: Option<SocketAddr>,
    /// The admin listener, when `overrides.admin_listen` asked for one.
    pub admin_addr: Option<SocketAddr>,
    /// The config file (rewrite it, then [`Proxy::reload`]).
    pub config_path: std::path::PathBuf,
    control: mpsc::Sender<Control>,
    task: Option<tokio::task::JoinHandle<std::io::Result<Stopped>>>,
    _dir: tempfile::TempDir,
}

impl Proxy {
    /// Starts crawlgate with `toml` as its config file and `upstream`.
    pub async fn start(toml: &str, upstream: &str) -> Self {
        Self::start_with(
            toml,
            Overrides {
                upstream: Some(upstream.to_owned()),
                ..Overrides::default()
            },
        )
        .await
    }

    /// Starts crawlgate with `toml` as its config file and `overrides`.
    pub async fn start_with(toml: &str, overrides: Overrides) -> Self {
        Self::launch(toml, overrides, false).await
    }

    /// Starts crawlgate with a plain and an HTTPS listener on free ports
    /// (known before the config is read, so that redirects name them).
    /// `overrides.certs_dir` must be set.
    pub async fn start_tls(toml: &str, mut overrides: Overrides) -> Self {
        overrides.listen = Some(process::free_addr().to_string());
        overrides.tls_listen = Some(process::free_addr().to_string());
        Self::launch(toml, overrides, false).await
    }

    /// Starts crawlgate (on a free loopback port unless `overrides` names
    /// one); with `here`, its workers serve on the current runtime
    /// ([`here::Here`]) instead of threads of their own.
    async fn launch(toml: &str, mut overrides: Overrides, here: bool) -> Self {
        overrides
            .listen
            .get_or_insert_with(|| "127.0.0.1:0".to_owned());
        overrides.workers.get_or_insert(1);
        if overrides.http1.is_none() {
            overrides.http1 = layer_under_test();
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let config_path = dir.path().join("crawlgate.toml");
        std::fs::write(&config_path, test_config(toml)).expect("write config");
        let live = Live::start(Some(config_path.clone()), overrides).expect("test config is valid");
        let server = Runner::bind(Arc::new(live)).expect("bind proxy");
        let addrs = server.addrs();
        let (control, events) = mpsc::channel(4);
        let task = if here {
            tokio::spawn(server.run_here(events))
        } else {
            tokio::spawn(server.run(events))
        };
        Self {
            addr: addrs.plain,
            tls_addr: addrs.tls,
            admin_addr: addrs.admin,
            config_path,
            control,
            task: Some(task),
            _dir: dir,
        }
    }

    /// Replaces the config file (with the same default log file as at
    /// start); [`Proxy::reload`] reads it.
    pub fn rewrite(&self, toml: &str) {
        std::fs::write(&self.config_path, test_config(toml)).expect("write config");
    }

    /// Reloads the config file, as SIGHUP does; the outcome.
    pub async fn reload(&self) -> Result<crawlgate::live::Reloaded, crawlgate::live::LoadError> {
        let (reply, outcome) = oneshot::channel();
        self.control
            .send(Control::Reload(Some(reply)))
            .await
            .expect("proxy running");
        outcome.await.expect("reload answered")
    }

    /// Starts a drain (as the first SIGTERM does) without waiting for it.
    pub async fn drain(&self) {
        let _ = self.control.send(Control::Drain).await;
    }

    /// Drains and waits (at most 15 s) for the server to return.
    pub async fn stop(mut self) {
        let _ = self.control.send(Control::Drain).await;
        if let Some(task) = self.task.take() {
            let stopped = tokio::time::timeout(Duration::from_secs(15), task)
                .await
                .expect("drained within 15 s");
            let stopped = stopped.expect("server task").expect("server ran");
            assert_eq!(stopped, Stopped::Drained);
        }
    }
}

/// The HTTP/1.1 layer the suite runs on, when `CRAWLGATE_TEST_HTTP1`
/// names one (`native` or `hyper`; unset: the config's default).
pub fn layer_under_test() -> Option<String> {
    std::env::var("CRAWLGATE_TEST_HTTP1")
        .ok()
        .filter(|v| !v.is_empty())
}

/// Whether the suite runs on crawlgate's own HTTP/1.1 layer (where it is
/// stricter than hyper's, a test says which answer each layer gives):
/// when `CRAWLGATE_TEST_HTTP1` names it, or names none and it is the
/// config's default.
pub fn native_layer() -> bool {
    match layer_under_test().as_deref() {
        Some(layer) => layer == "native",
        None => crawlgate::config::Http1Layer::default() == crawlgate::config::Http1Layer::Native,
    }
}

/// Overrides for crawlgate in front of `upstream` with an admin listener
/// on a free loopback port (`Proxy::admin_addr`).
pub fn with_admin(upstream: &Upstream) -> Overrides {
    Overrides {
        upstream: Some(upstream.url()),
        admin_listen: Some("127.0.0.1:0".to_owned()),
        ..Overrides::default()
    }
}

/// crawlgate with `toml` and two workers, in front of `upstream`.
pub async fn two_workers(toml: &str, upstream: &Upstream) -> Proxy {
    let overrides = Overrides {
        upstream: Some(upstream.url()),
        workers: Some(2),
        ..Overrides::default()
    };
    Proxy::start_with(toml, overrides).await
}

/// `toml`, with the access log going to a file beside it unless the test
/// chose (standard error would fill the test output), and crawler
/// verification off unless the test configures it (it would fetch the
/// operators' lists from the internet: tests stay on loopback).
fn test_config(toml: &str) -> String {
    let mut text = toml.to_owned();
    if !toml.contains("[log]") {
        text.push_str("\n[log]\nfile = \"access.log\"\n");
    }
    if !toml.contains("[verify") {
        text.push_str("\n[verify]\nenabled = false\n");
    }
    text
}

/// The lines of the file at `path` (none if it does not exist yet).
pub fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The lines of the file at `path` once it has at least `n` (an access
/// log is written in batches by a thread of its own); fails after 5 s.
pub async fn wait_lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let got = lines(path);
        if got.len() >= n {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} lines in {}: {got:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `n` human requests for the upstream's held page (see
/// [`Upstream::release_held`]), each in its own task; returns once the
/// upstream has seen them all.
pub async fn hold_humans(
    proxy: SocketAddr,
    upstream: &Upstream,
    n: usize,
) -> Vec<tokio::task::JoinHandle<u16>> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            tokio::spawn(async move {
                get(proxy, "example.com", "/hold", Some(FIREFOX))
                    .await
                    .status
            })
        })
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let held = || {
        upstream
            .requests()
            .iter()
            .filter(|r| r.uri == "/hold" && r.header("user-agent") == Some(FIREFOX))
            .count()
    };
    while held() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the held requests reach the upstream"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tasks
}

/// Lets the held requests answer; each gets its 200.
pub async fn release_humans(upstream: &Upstream, held: Vec<tokio::task::JoinHandle<u16>>) {
    upstream.release_held();
    for task in held {
        assert_eq!(task.await.expect("held request"), 200);
    }
}

/// A response as read off the wire.
#[derive(Debug)]
pub struct Raw {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Raw {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends `request` (raw bytes, should say `Connection: close`) and reads the
/// whole response until the server closes. Fails after 10 s.
pub async fn send_raw(addr: SocketAddr, request: &[u8]) -> Raw {
    let io = async {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request).await.expect("write");
        let mut buf = Vec::new();
        stream.read_to_end(&mut buf).await.expect("read");
        buf
    };
    let buf = tokio::time::timeout(Duration::from_secs(10), io)
        .await
        .expect("response within 10 s");
    parse_raw(&buf)
}

/// Like [`send_raw`], but `None` when the server closed without a complete
/// response head (what a rejected or aborted exchange may look like).
pub async fn try_send_raw(addr: SocketAddr, request: &[u8]) -> Option<Raw> {
    let io = async {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let _ = stream.write_all(request).await;
        let mut buf = Vec::new();
        let _ = stream.read_to_end(&mut buf).await;
        buf
    };
    let buf = tokio::time::timeout(Duration::from_secs(10), io)
        .await
        .expect("server answered or closed within 10 s");
    buf.windows(4)
        .any(|w| w == b"\r\n\r\n")
        .then(|| parse_raw(&buf))
}

/// Opens a connection, sends `request` and reads the first bytes of the
/// answer, keeping the connection open: a keep-alive client, or a download
/// in flight that the caller reads no further.
pub async fn open_exchange(addr: SocketAddr, request: &[u8]) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("write");
    let mut first = vec![0u8; 4096];
    let n = stream.read(&mut first).await.unwrap_or(0);
    first.truncate(n);
    (stream, first)
}

pub fn parse_raw(buf: &[u8]) -> Raw {
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(buf)));
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    Raw {
        status,
        head,
        body: buf[split + 4..].to_vec(),
    }
}

/// `GET target` with `Host: host` and the given User-Agent (None: no header).
/// An HTTP/1.1 client connection to `addr` (its driver spawned), for
/// requests whose body or response must stream.
pub async fn h1_client<B>(addr: SocketAddr) -> hyper::client::conn::http1::SendRequest<B>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    sender
}

pub async fn get(addr: SocketAddr, host: &str, target: &str, ua: Option<&str>) -> Raw {
    request(addr, "GET", host, target, ua, "").await
}

pub async fn request(
    addr: SocketAddr,
    method: &str,
    host: &str,
    target: &str,
    ua: Option<&str>,
    extra_headers: &str,
) -> Raw {
    let ua = ua
        .map(|ua| format!("User-Agent: {ua}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\n{ua}{extra_headers}Connection: close\r\n\r\n"
    );
    send_raw(addr, req.as_bytes()).await
}

pub const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
pub const GOOGLEBOT: &str =
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

/// Scrapes the admin listener's `/metrics` and parses it with a
/// Prometheus text parser.
pub async fn scrape(admin: SocketAddr) -> prometheus_parse::Scrape {
    let res = get(admin, "localhost", "/metrics", None).await;
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(
        res.header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{}",
        res.head
    );
    let text = res.text();
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .expect("a valid exposition")
}

/// The value of `name` with exactly `labels` (0 when absent); histograms
/// answer their count. `labels` without `enforced` mean
/// `enforced="true"` where a sample has that label (a request count: the
/// decision was carried out).
pub fn metric(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    use prometheus_parse::Value;
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| {
            let enforced = s.labels.get("enforced");
            let implied = enforced == Some("true") && !labels.iter().any(|(k, _)| *k == "enforced");
            labels.len() + usize::from(implied) == s.labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v))
        })
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            Value::Summary(_) => f64::NAN,
        })
        .sum()
}

/// The sum of every sample of `name`.
pub fn metric_total(scrape: &prometheus_parse::Scrape, name: &str) -> f64 {
    use prometheus_parse::Value;
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            _ => 0.0,
        })
        .sum()
}

/// A frame helper for streaming request bodies in tests.
pub fn data_frame(bytes: Vec<u8>) -> Result<Frame<Bytes>, Infallible> {
    Ok(Frame::data(Bytes::from(bytes)))
}

/// `[verify.ranges.*]` naming every shipped list (`rules/crawlers.toml`),
/// each at `source(list name)`: a local file, a loopback server, or a
/// closed loopback port, so that nothing leaves the machine.
pub fn ranges_toml(source: impl Fn(&str) -> String) -> String {
    let operators = crawlgate::verify::Operators::embedded();
    let mut out = String::new();
    for (i, op) in operators.operators.iter().enumerate() {
        let lists: Vec<_> = operators.lists.iter().filter(|l| l.operator == i).collect();
        if lists.is_empty() {
            continue;
        }
        out.push_str(&format!("[verify.ranges.{}]\n", op.name));
        for list in lists {
            let short = &list.name[op.name.len() + 1..];
            out.push_str(&format!("{short} = {:?}\n", source(&list.name)));
        }
    }
    out
}

/// A GET of `path` through `proxy` from `client` (as the trusted proxy's
/// X-Forwarded-For says), as `ua`, with `extra` header lines; the answer
/// and the last request for `path` that reached `upstream`, if any did.
pub async fn forwarded_for(
    proxy: &Proxy,
    upstream: &Upstream,
    client: &str,
    ua: &str,
    path: &str,
    extra: &str,
) -> (Raw, Option<Recorded>) {
    let headers = format!("X-Forwarded-For: {client}\r\n{extra}");
    let res = request(proxy.addr, "GET", "example.com", path, Some(ua), &headers).await;
    (res, upstream.last(path))
}
