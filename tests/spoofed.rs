//! Issue 25.3: a spoofed crawler claim is one class everywhere. A robot
//! whose claimed operator's own list refutes it is `unknown` in the header
//! the site gets, in the access log and in the metrics, whether it is
//! forwarded (`spoofed = "log"`) or refused (`spoofed = "block"`); a
//! verified claim keeps its class. Over real sockets, with Google's list
//! from a local file and every other list pointing at a closed port.

mod support;

use std::path::Path;
use std::time::Duration;

use crawlgate::config::Overrides;
use support::{forwarded_for, lines, metric, scrape, Proxy, Upstream, GOOGLEBOT};
use tokio::time::{sleep, Instant};

const GOOGLE_LIST: &[u8] = br#"{"creationTime": "2026-12-01T10:00:00.000000",
  "prefixes": [{"ipv4Prefix": "66.249.66.0/24"}]}"#;

/// `[verify]` with every shipped list pointing at a closed loopback port,
/// except Google's common crawlers, read from `google`.
fn config(spoofed: &str, state: &Path, google: &Path) -> String {
    let mut out = format!(
        "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n\
         [log]\nfile = \"access.log\"\nformat = \"json\"\n\
         [verify]\ndns = false\nsignatures = false\nspoofed = {spoofed:?}\nstate_dir = {:?}\n",
        state.display()
    );
    out.push_str(&support::ranges_toml(|name| {
        if name == "google.common-crawlers" {
            google.display().to_string()
        } else {
            // The discard port: nothing listens, the fetch fails.
            format!("http://127.0.0.1:9/{name}.json")
        }
    }));
    out
}

/// A GET of `path` from `client` (through the trusted proxy) as
/// Googlebot: the status, and the class header the site got if it got
/// the request.
async fn googlebot(
    proxy: &Proxy,
    upstream: &Upstream,
    client: &str,
    path: &str,
) -> (u16, Option<String>) {
    let (res, seen) = forwarded_for(proxy, upstream, client, GOOGLEBOT, path, "").await;
    let class = seen.and_then(|r| r.header("x-crawler-class").map(str::to_owned));
    (res.status, class)
}

/// The JSON access-log record of `path`, once it is written.
async fn logged(log: &Path, path: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let found = lines(log).into_iter().find_map(|l| {
            let record: serde_json::Value = serde_json::from_str(&l).ok()?;
            (record["path"] == path).then_some(record)
        });
        if let Some(record) = found {
            return record;
        }
        assert!(Instant::now() < deadline, "{path} is logged");
        sleep(Duration::from_millis(20)).await;
    }
}

fn requests(m: &prometheus_parse::Scrape, decision: &str, class: &str, code: &str) -> f64 {
    metric(
        m,
        "crawlgate_requests_total",
        &[("decision", decision), ("class", class), ("code", code)],
    )
}

#[tokio::test]
async fn a_spoofed_claim_is_unknown_in_the_header_the_log_and_the_metrics() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let google = dir.path().join("google.json");
    std::fs::write(&google, GOOGLE_LIST).expect("write list");
    let state = dir.path().join("state");
    let overrides = Overrides {
        upstream: Some(upstream.url()),
        admin_listen: Some("127.0.0.1:0".to_owned()),
        ..Overrides::default()
    };
    let proxy = Proxy::start_with(&config("log", &state, &google), overrides).await;
    let admin = proxy.admin_addr.expect("admin listener");
    let log = proxy.config_path.with_file_name("access.log");

    // The local list is in use once a Googlebot from its range is
    // verified (the site is told `search`).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    loop {
        n += 1;
        let path = format!("/wait{n}");
        let (status, class) = googlebot(&proxy, &upstream, "66.249.66.1", &path).await;
        assert_eq!(status, 200);
        let verified = upstream
            .last(&path)
            .and_then(|r| r.header("x-crawler-verified").map(str::to_owned));
        if verified.as_deref() == Some("ip") {
            assert_eq!(class.as_deref(), Some("search"));
            break;
        }
        assert!(Instant::now() < deadline, "Google's list loads");
        sleep(Duration::from_millis(50)).await;
    }
    let before = scrape(admin).await;

    // Outside Google's range: spoofed, forwarded as `unknown`.
    let (status, class) = googlebot(&proxy, &upstream, "203.0.113.9", "/spoofed").await;
    assert_eq!((status, class.as_deref()), (200, Some("unknown")));
    let record = logged(&log, "/spoofed").await;
    assert_eq!(record["verified"], "spoofed", "{record}");
    assert_eq!(record["class"], "unknown", "{record}");
    let after = scrape(admin).await;
    let delta = |decision: &str, class: &str, code: &str| {
        requests(&after, decision, class, code) - requests(&before, decision, class, code)
    };
    assert_eq!(delta("forward", "unknown", "2xx"), 1.0);
    assert_eq!(delta("forward", "search", "2xx"), 0.0);

    // A verified Googlebot is still `search` everywhere.
    let (status, class) = googlebot(&proxy, &upstream, "66.249.66.7", "/verified").await;
    assert_eq!((status, class.as_deref()), (200, Some("search")));
    let record = logged(&log, "/verified").await;
    assert_eq!(
        (&record["class"], &record["verified"]),
        (&"search".into(), &"ip".into()),
        "{record}"
    );

    // `spoofed = "block"`: the 403 counts as `unknown` too.
    proxy.rewrite(&config("block", &state, &google));
    proxy.reload().await.expect("reload");
    let before = scrape(admin).await;
    let (status, class) = googlebot(&proxy, &upstream, "203.0.113.9", "/refused").await;
    assert_eq!((status, class), (403, None));
    let record = logged(&log, "/refused").await;
    assert_eq!(record["class"], "unknown", "{record}");
    let after = scrape(admin).await;
    let delta = |decision: &str, class: &str, code: &str| {
        requests(&after, decision, class, code) - requests(&before, decision, class, code)
    };
    assert_eq!(delta("block", "unknown", "4xx"), 1.0);
    assert_eq!(delta("block", "search", "4xx"), 0.0);
    proxy.stop().await;
}
