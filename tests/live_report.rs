//! The live crawl report on the admin listener: `/report.json` counts a
//! known request mix as it was served, `/report` is one page that loads
//! nothing and shows what clients sent only escaped, and
//! `[admin] report = false` turns both off.

mod support;

use serde_json::Value;
use support::{get, send_raw, Proxy, Upstream, FIREFOX, GOOGLEBOT};

const AHREFS: &str = "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)";

async fn report_json(admin: std::net::SocketAddr) -> Value {
    let res = get(admin, "localhost", "/report.json", None).await;
    assert_eq!(res.status, 200, "{}", String::from_utf8_lossy(&res.body));
    assert_eq!(res.header("content-type"), Some("application/json"));
    serde_json::from_slice(&res.body).expect("JSON report")
}

fn row<'a>(report: &'a Value, robot: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["robot"] == robot)
        .unwrap_or_else(|| panic!("no row {robot}: {report:#}"))
}

#[tokio::test]
async fn the_live_report_counts_what_was_served() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start_with("", support::with_admin(&upstream)).await;
    let admin = proxy.admin_addr.expect("admin listener");
    let addr = proxy.addr;
    for path in ["/wiki/A", "/wiki/B", "/wiki/A"] {
        assert_eq!(
            get(addr, "example.com", path, Some(GOOGLEBOT)).await.status,
            200
        );
    }
    for path in ["/", "/shop?cat=1"] {
        assert_eq!(
            get(addr, "example.com", path, Some(FIREFOX)).await.status,
            200
        );
    }
    // Blocked: an action URL, and robots.txt (answered by crawlgate).
    assert_eq!(
        get(addr, "example.com", "/doku.php?do=edit", Some(AHREFS))
            .await
            .status,
        403
    );
    assert_eq!(
        get(addr, "example.com", "/robots.txt", Some(AHREFS))
            .await
            .status,
        200
    );
    // Refused before classification: not a visit, not counted.
    let twice = send_raw(
        addr,
        b"GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
    )
    .await;
    assert_eq!(twice.status, 400);

    let report = report_json(admin).await;
    assert_eq!(report["input"]["counted"], 7, "{report:#}");
    assert_eq!(report["input"]["files"][0], "(live)");
    let google = row(&report, "Googlebot");
    assert_eq!(google["volume"]["requests"], 3);
    assert_eq!(google["operator"], "google");
    assert_eq!(
        google["waste"]["repeats"], 1,
        "/wiki/A twice within the hour"
    );
    assert_eq!(google["top_paths"][0]["key"], "/wiki/A");
    assert_eq!(google["top_paths"][0]["requests"], 2);
    let ahrefs = row(&report, "AhrefsBot");
    assert_eq!(ahrefs["volume"]["requests"], 2);
    assert_eq!(ahrefs["status"]["s4xx"], 1);
    assert_eq!(ahrefs["waste"]["action_urls"], 1);
    assert_eq!(ahrefs["waste"]["robots_and_sitemaps"], 1);
    assert_eq!(
        ahrefs["robots_txt"]["disallowed"], 1,
        "/*?do= in the synthesized robots.txt"
    );
    let humans = row(&report, "humans");
    assert_eq!(humans["volume"]["requests"], 2);
    assert_eq!(
        report["rows"]
            .as_array()
            .expect("rows")
            .last()
            .expect("row")["robot"],
        "humans"
    );
    assert_eq!(report["chart_len"], 1);
    assert_eq!(report["total"]["requests"], 7);
    proxy.stop().await;
}

/// What a client puts in a path reaches the page only escaped, and the
/// page says by its headers that it loads nothing.
#[tokio::test]
async fn the_live_page_escapes_what_clients_sent() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start_with("", support::with_admin(&upstream)).await;
    let admin = proxy.admin_addr.expect("admin listener");
    let hostile = "/x'onmouseover='alert(1)'/%3Cscript%3E";
    assert_eq!(
        get(proxy.addr, "example.com", hostile, Some(AHREFS))
            .await
            .status,
        200
    );
    // Raw bytes no URI parser would take: refused, never shown.
    let raw = send_raw(
        proxy.addr,
        b"GET /\x1b[2J\xff<script> HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\n\r\n",
    )
    .await;
    assert_eq!(raw.status, 400);
    let res = get(admin, "localhost", "/report", None).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(res
        .header("content-security-policy")
        .is_some_and(|csp| csp.starts_with("default-src 'none'")));
    let page = String::from_utf8(res.body).expect("utf-8 page");
    assert!(page.contains("AhrefsBot"), "the robot's section");
    assert!(page.contains("<svg"), "a chart");
    assert!(
        !page.contains("'onmouseover='"),
        "a quote breaks out of nothing"
    );
    assert!(page.contains("&#39;onmouseover=&#39;") || page.contains("&#x27;onmouseover=&#x27;"));
    assert!(!page.contains('\u{1b}') && !page.to_lowercase().contains("<script"));
    proxy.stop().await;
}

#[tokio::test]
async fn report_false_turns_the_live_report_off() {
    let upstream = Upstream::start().await;
    let proxy =
        Proxy::start_with("[admin]\nreport = false\n", support::with_admin(&upstream)).await;
    let admin = proxy.admin_addr.expect("admin listener");
    assert_eq!(
        get(proxy.addr, "example.com", "/", Some(GOOGLEBOT))
            .await
            .status,
        200
    );
    for path in ["/report", "/report.json"] {
        let res = get(admin, "localhost", path, None).await;
        assert_eq!(res.status, 404, "{path}");
        assert!(String::from_utf8_lossy(&res.body).contains("report = false"));
    }
    proxy.stop().await;
}

/// The request line the live report keeps is not an access-log line:
/// with `[log] access = false` nothing is written, report or not.
#[tokio::test]
async fn the_live_report_writes_no_access_log_when_the_log_is_off() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start_with(
        "[log]\naccess = false\nfile = \"access.log\"\n",
        support::with_admin(&upstream),
    )
    .await;
    let admin = proxy.admin_addr.expect("admin listener");
    for _ in 0..3 {
        assert_eq!(
            get(proxy.addr, "example.com", "/", Some(GOOGLEBOT))
                .await
                .status,
            200
        );
    }
    assert_eq!(report_json(admin).await["input"]["counted"], 3);
    // The writer batches for 20 ms: give it ten times that.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let log = proxy.config_path.parent().expect("dir").join("access.log");
    let lines = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(lines, "", "no access-log line with log.access off");
    proxy.stop().await;
}
