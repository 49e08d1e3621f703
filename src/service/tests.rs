//! The request flow of [`handle`], called with in-memory requests: each
//! branch's answer and what the process counted, with no client socket
//! (a forward goes to an address nothing listens on, and fails 502).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_LENGTH, HOST, LOCATION, RETRY_AFTER, USER_AGENT};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use tokio::time::Instant;

use super::{handle, ConnInfo};
use crate::config::{Config, Overrides, RawConfig};
use crate::state::{Process, Snapshot, Worker};

/// An upstream nothing listens on: a forward fails to connect (502).
const DEAD_UPSTREAM: &str = "upstream = \"http://127.0.0.1:1\"\n";
const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const CURL: &str = "curl/8.5.0";

/// A worker over a snapshot of `toml` (after the dead upstream), built as
/// `Live::start` builds it: the range store configured, the caches kept.
fn worker(toml: &str) -> Arc<Worker> {
    let raw = RawConfig::parse(&format!("{DEAD_UPSTREAM}{toml}")).expect("toml");
    let config = Config::from_raw(raw, &Overrides::default()).expect("valid config");
    let process = Arc::new(Process::new());
    let snapshot = Snapshot::new(&config, Arc::clone(&process)).expect("snapshot");
    process
        .ranges
        .configure(snapshot.verify.as_ref().map(|v| v.setup.clone()));
    process.keep(&snapshot.caches, false);
    Arc::new(Worker::new(Arc::new(snapshot)))
}

/// A plain-HTTP connection from `peer`.
fn conn(peer: &str) -> ConnInfo {
    ConnInfo {
        peer: SocketAddr::new(peer.parse().expect("address"), 40000),
        local_port: 8080,
        scheme: "http",
    }
}

/// A body-less request for `uri` at `example.com` as `ua`, with `extra`
/// headers.
fn get(uri: &str, ua: &str, extra: &[(&str, &str)]) -> Request<Empty<Bytes>> {
    let mut req = Request::get(uri)
        .header(HOST, "example.com")
        .header(USER_AGENT, ua)
        .body(Empty::new())
        .expect("request");
    req.headers_mut().extend(crate::testing::header_map(extra));
    req
}

/// What the client got: the status, the headers and the whole body. The
/// response is finished (its outcome counted) when this returns.
struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

async fn send<B>(worker: &Arc<Worker>, peer: &str, req: Request<B>) -> Answer
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<crate::proxy::BodyError>,
{
    let res = handle(Arc::clone(worker), conn(peer), None, req, None)
        .await
        .unwrap_or_else(|never| match never {});
    let (parts, body) = res.into_parts();
    let body = body.collect().await.expect("a whole body").to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// The sum of the metric lines that contain each of `parts`.
fn counted(worker: &Worker, parts: &[&str]) -> f64 {
    worker
        .snapshot
        .process
        .metrics
        .encode()
        .lines()
        .filter(|l| !l.starts_with('#') && parts.iter().all(|p| l.contains(p)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The upstream connection failures counted so far.
fn upstream_errors(worker: &Worker) -> f64 {
    counted(worker, &["upstream_errors"])
}

/// A robot asking for an action URL is refused 403 and never forwarded;
/// a human asking for it is.
#[tokio::test]
async fn a_robots_action_url_is_refused_and_never_forwarded() {
    let w = worker("");
    let robot = send(&w, "192.0.2.1", get("/cart?do=add", CURL, &[])).await;
    assert_eq!(robot.status, StatusCode::FORBIDDEN);
    assert_eq!(upstream_errors(&w), 0.0, "never forwarded");
    let human = send(&w, "192.0.2.1", get("/cart?do=add", FIREFOX, &[])).await;
    assert_eq!(human.status, StatusCode::BAD_GATEWAY, "forwarded");
    assert_eq!(upstream_errors(&w), 1.0);
}

/// A folder with Google's common-crawlers list (66.249.64.0/19) in a local
/// file, and the `[verify]` lines that use it (no DNS, no fetch).
fn google_ranges() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("google.json");
    std::fs::write(&file, r#"{"prefixes": [{"ipv4Prefix": "66.249.64.0/19"}]}"#).expect("write");
    let toml = format!(
        "[verify]\ndns = false\n[verify.ranges.google]\ncommon-crawlers = {:?}\n",
        file.display().to_string()
    );
    (dir, toml)
}

/// A User-Agent claim from inside the operator's ranges is verified by
/// address and keeps its class.
#[tokio::test]
async fn a_user_agent_claim_from_the_operators_ranges_is_verified() {
    let (_dir, toml) = google_ranges();
    let w = worker(&toml);
    let res = send(&w, "66.249.66.1", get("/page", GOOGLEBOT, &[])).await;
    assert_eq!(res.status, StatusCode::BAD_GATEWAY, "forwarded");
    let verified = [r#"operator="google""#, r#"result="ip""#];
    assert_eq!(counted(&w, &verified), 1.0);
    assert_eq!(counted(&w, &["requests", r#"class="search""#]), 1.0);
}

/// A User-Agent claim from outside the operator's ranges (all of them
/// loaded) is spoofed, and the request is an `unknown` robot.
#[tokio::test]
async fn a_spoofed_user_agent_claim_is_unknown() {
    let (_dir, toml) = google_ranges();
    let w = worker(&toml);
    let res = send(&w, "198.51.100.4", get("/page", GOOGLEBOT, &[])).await;
    assert_eq!(
        res.status,
        StatusCode::BAD_GATEWAY,
        "spoofed = log: forwarded"
    );
    let spoofed = [r#"operator="google""#, r#"result="spoofed""#];
    assert_eq!(counted(&w, &spoofed), 1.0);
    assert_eq!(counted(&w, &["requests", r#"class="unknown""#]), 1.0);
    assert_eq!(counted(&w, &["requests", r#"class="search""#]), 0.0);
}

/// A Web Bot Auth signature is checked before the User-Agent's claim: one
/// that cannot verify (expired, judged without fetching a key directory)
/// makes the request spoofed, even from inside the claimed operator's
/// ranges, and the request is an `unknown` robot.
#[tokio::test]
async fn a_spoofed_signature_claim_is_unknown() {
    let (_dir, toml) = google_ranges();
    let w = worker(&toml);
    let signed = [
        ("signature-agent", "\"https://agent.example\""),
        (
            "signature-input",
            "sig1=(\"@authority\" \"signature-agent\");created=1000;expires=2000;keyid=\"k\";alg=\"ed25519\";tag=\"web-bot-auth\"",
        ),
        ("signature", "sig1=:AAAA:"),
    ];
    let res = send(&w, "66.249.66.1", get("/page", GOOGLEBOT, &signed)).await;
    assert_eq!(
        res.status,
        StatusCode::BAD_GATEWAY,
        "spoofed = log: forwarded"
    );
    let spoofed = [r#"operator="google""#, r#"result="spoofed""#];
    assert_eq!(counted(&w, &spoofed), 1.0, "the signature, not the ranges");
    assert_eq!(counted(&w, &[r#"result="ip""#]), 0.0);
    assert_eq!(counted(&w, &["requests", r#"class="unknown""#]), 1.0);
}

/// Puts a `200` of `body` for `GET http://example.com{path}` into the
/// worker's robots cache, as a robot's forward would.
fn cache_page(w: &Worker, path: &str, body: &[u8]) {
    let cache = w.snapshot.caches.bot.as_ref().expect("the robots cache");
    let uri: http::Uri = path.parse().expect("uri");
    let probe = cache.probe(
        &Method::GET,
        "http",
        Some("example.com"),
        &uri,
        &http::HeaderMap::new(),
        Instant::now(),
    );
    let mut fill = cache
        .fill(probe, &Method::GET, StatusCode::OK, &http::HeaderMap::new())
        .expect("storable");
    assert!(fill.push(body));
    fill.finish();
}

/// A robot's request the robots cache holds fresh is answered from it
/// without forwarding; a human asking for the same page is forwarded.
#[tokio::test]
async fn a_cached_page_answers_robots_but_never_humans() {
    let w = worker("[bot_cache]\nttl = \"60s\"\n");
    cache_page(&w, "/page", b"the cached page");

    let robot = send(&w, "192.0.2.1", get("/page", CURL, &[])).await;
    assert_eq!(robot.status, StatusCode::OK);
    assert_eq!(&robot.body[..], b"the cached page");
    assert_eq!(upstream_errors(&w), 0.0, "never forwarded");
    assert_eq!(counted(&w, &["bot_cache_requests", r#"result="hit""#]), 1.0);

    let human = send(&w, "192.0.2.1", get("/page", FIREFOX, &[])).await;
    assert_eq!(human.status, StatusCode::BAD_GATEWAY, "forwarded");
    assert_eq!(upstream_errors(&w), 1.0);
}

/// Under pressure, a robot of the first tier shed is answered 503 with
/// Retry-After and not forwarded, while a human is forwarded.
#[tokio::test]
async fn a_shed_robot_is_answered_503_while_a_human_is_forwarded() {
    let w = worker("[shed]\nmax_upstream_inflight = 1\n");
    // Requests in flight upstream, over the limit.
    let _busy = [
        w.snapshot.process.metrics.upstream_in_flight(),
        w.snapshot.process.metrics.upstream_in_flight(),
    ];
    let robot = send(&w, "192.0.2.1", get("/page", CURL, &[])).await;
    assert_eq!(robot.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(robot.headers.contains_key(RETRY_AFTER));
    assert_eq!(upstream_errors(&w), 0.0, "never forwarded");
    let human = send(&w, "192.0.2.1", get("/page", FIREFOX, &[])).await;
    assert_eq!(human.status, StatusCode::BAD_GATEWAY, "forwarded");
}

/// `/sitemaps/<name>` is served from the sitemap folder; a name it does
/// not hold is 404, and neither is forwarded.
#[tokio::test]
async fn a_sitemap_is_served_from_the_sitemap_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let xml = "<?xml version=\"1.0\"?><urlset/>";
    std::fs::write(dir.path().join("sitemap.xml"), xml).expect("write");
    let w = worker(&format!(
        "sitemap_dir = {:?}\n",
        dir.path().display().to_string()
    ));
    let res = send(&w, "192.0.2.1", get("/sitemaps/sitemap.xml", CURL, &[])).await;
    assert_eq!(res.status, StatusCode::OK);
    assert_eq!(&res.body[..], xml.as_bytes());
    let missing = send(&w, "192.0.2.1", get("/sitemaps/other.xml", CURL, &[])).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(upstream_errors(&w), 0.0);
}

/// robots.txt is written by the proxy (its blocked parameters
/// disallowed), for robots and humans alike, never forwarded.
#[tokio::test]
async fn robots_txt_is_synthesized() {
    let w = worker("");
    for ua in [CURL, FIREFOX] {
        let res = send(&w, "192.0.2.1", get("/robots.txt", ua, &[])).await;
        assert_eq!(res.status, StatusCode::OK, "{ua}");
        let text = std::str::from_utf8(&res.body).expect("text");
        assert!(text.contains("User-agent: *"), "{text}");
        assert!(text.contains("do="), "{text}");
    }
    assert_eq!(upstream_errors(&w), 0.0);
}

/// A non-canonical host is redirected to the canonical one (`www.` off by
/// default), path and query kept.
#[tokio::test]
async fn a_non_canonical_host_is_redirected() {
    let w = worker("");
    let mut req = get("/page?a=1", FIREFOX, &[]);
    req.headers_mut()
        .insert(HOST, http::HeaderValue::from_static("www.example.com"));
    let res = send(&w, "192.0.2.1", req).await;
    assert!(res.status.is_redirection(), "{}", res.status);
    assert_eq!(
        res.headers.get(LOCATION).map(|v| v.as_bytes()),
        Some(&b"http://example.com/page?a=1"[..])
    );
    assert_eq!(upstream_errors(&w), 0.0);
}

/// Requests refused before any decision, each closing the connection: a
/// declared body over `limits.max_body_bytes` (413), a target over
/// `limits.max_uri_bytes` (414), CONNECT (405).
#[tokio::test]
async fn requests_over_the_limits_are_refused_before_any_decision() {
    let w = worker("[limits]\nmax_body_bytes = 16\nmax_uri_bytes = 64\n");
    let mut big = Request::post("/upload")
        .header(HOST, "example.com")
        .header(USER_AGENT, FIREFOX)
        .header(CONTENT_LENGTH, "17")
        .body(Full::new(Bytes::from_static(&[b'x'; 17])))
        .expect("request");
    let res = send(&w, "192.0.2.1", big).await;
    assert_eq!(res.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        res.headers.get(CONNECTION).map(|v| v.as_bytes()),
        Some(&b"close"[..])
    );

    let long = format!("/{}", "a".repeat(64));
    let res = send(&w, "192.0.2.1", get(&long, FIREFOX, &[])).await;
    assert_eq!(res.status, StatusCode::URI_TOO_LONG);

    big = Request::connect("example.com:443")
        .header(HOST, "example.com:443")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let res = send(&w, "192.0.2.1", big).await;
    assert_eq!(res.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(upstream_errors(&w), 0.0, "none forwarded");

    // Within the limit, the body goes upstream (which is not there).
    let small = Request::post("/upload")
        .header(HOST, "example.com")
        .header(USER_AGENT, FIREFOX)
        .header(CONTENT_LENGTH, "16")
        .body(Full::new(Bytes::from_static(&[b'x'; 16])))
        .expect("request");
    let res = send(&w, "192.0.2.1", small).await;
    assert_eq!(res.status, StatusCode::BAD_GATEWAY);
}

/// An uptime monitor or a callback must see the live site: with the page
/// cached, the monitor's request is forwarded (and fails here, as the
/// site does) while another robot's is answered from memory.
#[tokio::test]
async fn a_monitor_is_never_answered_from_the_cache() {
    const MONITOR: &str = "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)";
    let w = worker("[bot_cache]\nttl = \"60s\"\n");
    cache_page(&w, "/status", b"all good");

    let monitor = send(&w, "192.0.2.1", get("/status", MONITOR, &[])).await;
    assert_eq!(monitor.status, StatusCode::BAD_GATEWAY, "forwarded");
    assert_eq!(upstream_errors(&w), 1.0);
    assert_eq!(counted(&w, &["bot_cache_requests", r#"result="hit""#]), 0.0);
    assert_eq!(
        counted(&w, &["bot_cache_requests", r#"result="stale""#]),
        0.0
    );

    let robot = send(&w, "192.0.2.1", get("/status", CURL, &[])).await;
    assert_eq!(&robot.body[..], b"all good");
    assert_eq!(counted(&w, &["bot_cache_requests", r#"result="hit""#]), 1.0);
    assert_eq!(upstream_errors(&w), 1.0);
}
