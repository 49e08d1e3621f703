//! Observe mode over real sockets: every request is decided as in enforce
//! mode, recorded with `enforced` false where the decision was not
//! carried out, and forwarded to a recording upstream as it came; what is
//! not policy (framing, limits) stays refused; a reload back to enforce
//! carries decisions out again.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::here::Here;
use support::process::{self, BIN};
use support::{
    get, hold_humans, metric, release_humans, request, scrape, send_raw, Proxy, Upstream, FIREFOX,
    GOOGLEBOT,
};
use tokio::time::sleep;

const CURL: &str = "curl/8.5.0";

/// The access log beside the proxy's config file, once it has `n` lines.
async fn log_lines(proxy: &Proxy, n: usize) -> Vec<String> {
    let dir = proxy.config_path.parent().expect("config dir");
    support::wait_lines(&dir.join("access.log"), n).await
}

/// The admin listener's `/robots.txt?{query}`: status and body.
async fn admin_robots(admin: std::net::SocketAddr, query: &str) -> (u16, String) {
    let res = get(admin, "localhost", &format!("/robots.txt?{query}"), None).await;
    (res.status, String::from_utf8_lossy(&res.body).into_owned())
}

/// A robot's action URL reaches the upstream with the robot headers set
/// (the client's copies stripped), is logged as `block` with
/// `"enforced": false` and counted with `enforced="false"`; a human's
/// request is enforced as ever; a request with two Host headers is still
/// refused (400), and a head over the limit too (431).
#[tokio::test]
async fn a_robots_action_url_reaches_the_site_and_is_logged_as_a_block_not_enforced() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start_with(
        "mode = \"observe\"\n[log]\nfile = \"access.log\"\nformat = \"json\"\n[limits]\nmax_header_bytes = 8192\n",
        support::with_admin(&upstream),
    )
    .await;
    let admin = proxy.admin_addr.expect("admin listener");

    let forged = "X-Crawler: 0\r\nX-Crawler-Class: human\r\nX-Crawler-Verified: ip\r\n";
    let res = request(
        proxy.addr,
        "GET",
        "example.com",
        "/?do=vote",
        Some(GOOGLEBOT),
        forged,
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.head);
    assert_eq!(res.text(), "upstream saw GET /?do=vote");
    let seen = upstream.last("/?do=vote").expect("reached the upstream");
    assert_eq!(seen.all("x-crawler"), ["1"]);
    assert_eq!(seen.all("x-crawler-class"), ["search"]);
    // Verification is off: nobody vouches, and the client's copy is gone.
    assert!(seen.all("x-crawler-verified").is_empty(), "{seen:?}");
    assert_eq!(seen.all("x-forwarded-for"), ["127.0.0.1"]);

    assert_eq!(
        get(proxy.addr, "example.com", "/page", Some(FIREFOX))
            .await
            .status,
        200
    );

    // Not policy: still refused.
    let two_hosts = send_raw(
        proxy.addr,
        b"GET / HTTP/1.1\r\nHost: example.com\r\nHost: other.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(two_hosts.status, 400);
    let big = format!("X-Big: {}\r\n", "a".repeat(10_000));
    let too_large = request(proxy.addr, "GET", "example.com", "/big", Some(CURL), &big).await;
    assert_eq!(too_large.status, 431);
    assert!(upstream.last("/big").is_none());

    let lines = log_lines(&proxy, 4).await;
    let json: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let of = |path: &str| {
        json.iter()
            .find(|j| j["path"] == path && j["query"] == serde_json::Value::Null)
            .unwrap_or_else(|| panic!("a line for {path} in {lines:?}"))
    };
    let blocked = json
        .iter()
        .find(|j| j["query"] == "do=vote")
        .expect("the robot's line");
    assert_eq!(blocked["decision"], "block", "{blocked}");
    assert_eq!(blocked["enforced"], false, "{blocked}");
    assert_eq!(blocked["status"], 200, "{blocked}");
    assert_eq!(of("/page")["decision"], "forward");
    assert_eq!(of("/page")["enforced"], true);
    let rejects: Vec<_> = json.iter().filter(|j| j["decision"] == "reject").collect();
    assert_eq!(rejects.len(), 2, "{lines:?}");
    assert!(rejects.iter().all(|j| j["enforced"] == true), "{lines:?}");

    let metrics = scrape(admin).await;
    let labels = |decision, class, code, enforced| {
        [
            ("decision", decision),
            ("class", class),
            ("code", code),
            ("enforced", enforced),
        ]
    };
    let count = |l: &[(&str, &str)]| metric(&metrics, "crawlgate_requests_total", l);
    assert_eq!(count(&labels("block", "search", "2xx", "false")), 1.0);
    assert_eq!(count(&labels("block", "search", "4xx", "true")), 0.0);
    assert_eq!(count(&labels("forward", "human", "2xx", "true")), 1.0);
    assert_eq!(count(&labels("reject", "none", "4xx", "true")), 2.0);
    proxy.stop().await;
}

/// A `www.` host is forwarded, not redirected, and its combined line ends
/// in ` enforced=0`; the site's own robots.txt and sitemaps are served;
/// the admin listener has the robots.txt crawlgate would serve, equal to
/// what the proxy answers once a reload puts it back in enforce mode,
/// where a robot's action URL is blocked again.
#[tokio::test]
async fn the_site_answers_everything_until_a_reload_back_to_enforce() {
    let upstream = Upstream::start().await;
    let sitemaps = tempfile::tempdir().expect("tempdir");
    std::fs::write(sitemaps.path().join("sitemap.xml"), "<sitemapindex/>").expect("write");
    let toml = |mode: &str| {
        format!(
            "{mode}sitemap_dir = {:?}\n",
            sitemaps.path().to_str().expect("utf-8")
        )
    };
    let proxy = Proxy::start_with(
        &toml("mode = \"observe\"\n"),
        support::with_admin(&upstream),
    )
    .await;
    let admin = proxy.admin_addr.expect("admin listener");

    let res = get(proxy.addr, "www.example.com", "/page", Some(FIREFOX)).await;
    assert_eq!(res.status, 200, "{}", res.head);
    let seen = upstream.last("/page").expect("forwarded");
    assert_eq!(seen.header("host"), Some("www.example.com"));
    let robots = get(proxy.addr, "example.com", "/robots.txt", Some(GOOGLEBOT)).await;
    assert_eq!(robots.text(), "upstream saw GET /robots.txt");
    let sitemap = get(
        proxy.addr,
        "example.com",
        "/sitemaps/sitemap.xml",
        Some(GOOGLEBOT),
    )
    .await;
    assert_eq!(sitemap.text(), "upstream saw GET /sitemaps/sitemap.xml");
    let blocked = get(proxy.addr, "example.com", "/?do=vote", Some(CURL)).await;
    assert_eq!(blocked.status, 200);

    let lines = log_lines(&proxy, 4).await;
    let line = |needle: &str| {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {lines:?}"))
            .clone()
    };
    let www = line("GET /page ");
    assert!(www.contains(" decision=redirect "), "{www}");
    assert!(www.ends_with(" enforced=0"), "{www}");
    assert!(line("GET /robots.txt ").contains(" decision=robots "));
    assert!(line("GET /sitemaps/sitemap.xml ").contains(" decision=sitemap "));
    let vote = line("GET /?do=vote ");
    assert!(vote.contains(" decision=block "), "{vote}");
    assert!(vote.ends_with(" enforced=0"), "{vote}");

    // The would-be robots.txt, with its Sitemap line for the host.
    let (status, would_be) = admin_robots(admin, "host=example.com").await;
    assert_eq!(status, 200);
    assert!(
        would_be.contains("Sitemap: http://example.com/sitemaps/sitemap.xml"),
        "{would_be}"
    );
    let (_, https) = admin_robots(admin, "host=www.example.com&scheme=https").await;
    assert!(
        https.contains("Sitemap: https://www.example.com/sitemaps/sitemap.xml"),
        "{https}"
    );
    assert_eq!(admin_robots(admin, "host=a/b").await.0, 400);
    assert_eq!(admin_robots(admin, "").await.0, 400);
    assert_eq!(
        admin_robots(admin, "host=example.com&scheme=ftp").await.0,
        400
    );

    proxy.rewrite(&toml(""));
    proxy.reload().await.expect("reload");
    let blocked = get(proxy.addr, "example.com", "/?do=edit", Some(CURL)).await;
    assert_eq!(blocked.status, 403);
    assert!(upstream.last("/?do=edit").is_none());
    let redirect = get(proxy.addr, "www.example.com", "/page2", Some(FIREFOX)).await;
    assert_eq!(redirect.status, 301);
    let served = get(proxy.addr, "example.com", "/robots.txt", Some(GOOGLEBOT)).await;
    assert_eq!(served.status, 200);
    assert_eq!(served.text(), would_be);
    assert_eq!(admin_robots(admin, "host=example.com").await.1, would_be);

    let lines = log_lines(&proxy, 7).await;
    let edit = lines
        .iter()
        .find(|l| l.contains("GET /?do=edit "))
        .expect("the enforced block's line");
    assert!(edit.contains(" decision=block "), "{edit}");
    assert!(!edit.contains("enforced"), "{edit}");
    proxy.stop().await;
}

/// Under pressure a robot that enforce mode would shed is forwarded,
/// logged and counted as `shed` not enforced; the shed level is computed
/// and exported all the same.
#[tokio::test(start_paused = true)]
async fn a_shed_robot_is_forwarded_under_pressure_and_counted() {
    let upstream = Upstream::start().await;
    let proxy = Here::start_with(
        "mode = \"observe\"\n[shed]\nmax_upstream_inflight = 2\nretry_after = \"90s\"\nescalate_after = \"1s\"\ncalm_after = \"300ms\"\n",
        support::with_admin(&upstream),
    )
    .await;
    let admin = proxy.admin_addr.expect("admin listener");
    let addr = proxy.addr;

    let held = hold_humans(addr, &upstream, 2).await;
    sleep(crawlgate::shed::CHECK_EVERY + Duration::from_millis(20)).await;
    let res = get(addr, "example.com", "/b", Some(CURL)).await;
    assert_eq!(res.status, 200, "{}", res.head);
    assert!(
        upstream.last("/b").is_some(),
        "the robot reached the upstream"
    );

    let metrics = scrape(admin).await;
    assert_eq!(
        metric(
            &metrics,
            "crawlgate_requests_total",
            &[
                ("decision", "shed"),
                ("class", "library"),
                ("code", "2xx"),
                ("enforced", "false"),
            ],
        ),
        1.0
    );
    assert_eq!(metric(&metrics, "crawlgate_shed_level", &[]), 1.0);

    release_humans(&upstream, held).await;
    proxy.stop().await;
}

/// `check-config` prints the mode, and refuses one it does not know with
/// the file and the line.
#[test]
fn check_config_prints_the_mode_and_refuses_an_unknown_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crawlgate.toml");
    let check = |text: &str| {
        std::fs::write(&path, text).expect("write");
        Command::new(BIN)
            .args(["check-config", path.to_str().expect("utf-8")])
            .env_remove("STATE_DIRECTORY")
            .output()
            .expect("run check-config")
    };
    let out = check("mode = \"observe\"\n[verify]\nenabled = false\n");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("mode observe"), "{stdout}");

    let out = check("listen = \"127.0.0.1:8080\"\nmode = \"watch\"\n[verify]\nenabled = false\n");
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = format!(
        "{}:2: mode: \"watch\" is not one of",
        Path::new(&path).display()
    );
    assert!(stderr.contains(&at), "{stderr}");
}

/// The real binary: `mode = "observe"` in the file lets a robot's action
/// URL through and says so at start; SIGHUP with the key gone puts it
/// back in enforce mode (logged), and the same URL is 403. `--mode
/// observe` wins over the file.
#[tokio::test]
async fn sighup_switches_the_real_binary_between_modes() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("crawlgate.toml");
    let write = |mode: &str| {
        let text = format!("{mode}[log]\naccess = false\n[verify]\nenabled = false\n");
        std::fs::write(&config, text).expect("write config");
    };
    write("mode = \"observe\"\n");
    let addr = process::free_addr();
    let (listen, url) = (addr.to_string(), upstream.url());
    let args = [
        "--config",
        config.to_str().expect("utf-8"),
        "--listen",
        &listen,
        "--upstream",
        &url,
    ];
    let mut proxy = process::start_logging(&args, addr, Stdio::piped(), "info");
    let stderr = process::stderr_lines(&mut proxy.0);
    let wait_line = |needle: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return,
                Ok(_) => {}
                Err(_) => panic!("no line with {needle:?}"),
            }
        }
    };
    wait_line("mode: observe");
    let status = |target: &'static str| async move {
        get(addr, "example.com", target, Some(CURL)).await.status
    };
    assert_eq!(status("/?do=vote").await, 200);

    write("");
    proxy.signal("HUP");
    wait_line("mode: enforce");
    assert_eq!(status("/?do=edit").await, 403);
    assert!(upstream.last("/?do=edit").is_none());
    drop(proxy);

    // The flag over the file.
    let addr = process::free_addr();
    let listen = addr.to_string();
    let args = [
        "--config",
        config.to_str().expect("utf-8"),
        "--listen",
        &listen,
        "--upstream",
        &url,
        "--mode",
        "observe",
    ];
    let _proxy = process::start(&args, addr, Stdio::null());
    let res = get(addr, "example.com", "/?do=flag", Some(CURL)).await;
    assert_eq!(res.status, 200);
    assert!(upstream.last("/?do=flag").is_some());
}
