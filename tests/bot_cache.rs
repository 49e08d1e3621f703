//! The robots-only cache over real sockets: an upstream that counts what
//! reaches it and answers with the headers a test asks for, crawlgate in
//! front with `[bot_cache]` on, and the metrics read back.

mod support;

use std::time::Duration;

use crawlgate::config::Overrides;
use support::here::Here;
use support::site::{Site, DEAD, FAILING};
use support::{get, metric, request, scrape, Proxy, FIREFOX, GOOGLEBOT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CONFIG: &str = "[bot_cache]\nttl = \"10m\"\n";

async fn proxy(site: &Site, toml: &str) -> Proxy {
    Proxy::start_with(
        toml,
        Overrides {
            upstream: Some(site.url()),
            admin_listen: Some("127.0.0.1:0".to_owned()),
            ..Overrides::default()
        },
    )
    .await
}

/// [`proxy`] on the test's runtime, for a paused clock.
async fn here(site: &Site, toml: &str) -> Here {
    Here::start_with(
        toml,
        Overrides {
            upstream: Some(site.url()),
            admin_listen: Some("127.0.0.1:0".to_owned()),
            ..Overrides::default()
        },
    )
    .await
}

fn cache_metric(scrape: &prometheus_parse::Scrape, result: &str) -> f64 {
    metric(
        scrape,
        "crawlgate_bot_cache_requests_total",
        &[("result", result)],
    )
}

/// A robot's second GET of a page is answered from memory, with `Age`,
/// and never reaches the site; a human's always does, and never fills the
/// cache; HEAD is answered from the GET's entry; the metrics count it.
#[tokio::test(start_paused = true)]
async fn a_robots_second_get_does_not_reach_the_site_and_a_humans_does() {
    let site = Site::start().await;
    let proxy = here(&site, CONFIG).await;
    let addr = proxy.addr;

    let first = get(addr, "example.com", "/article?id=7", Some(GOOGLEBOT)).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "page /article?id=7");
    assert_eq!(first.header("age"), None, "from the site");
    tokio::time::advance(Duration::from_secs(1)).await;
    let second = get(addr, "example.com", "/article?id=7", Some(GOOGLEBOT)).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.text(), "page /article?id=7");
    assert_eq!(second.header("age"), Some("1"), "{}", second.head);
    assert_eq!(site.seen("/article?id=7", GOOGLEBOT), 1);
    // Another robot shares the entry.
    let other = get(addr, "example.com", "/article?id=7", Some("curl/8.5.0")).await;
    assert_eq!(other.text(), "page /article?id=7");
    assert_eq!(site.seen("/article?id=7", "curl/8.5.0"), 0);
    let head = request(
        addr,
        "HEAD",
        "example.com",
        "/article?id=7",
        Some(GOOGLEBOT),
        "",
    )
    .await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), Some("18"));

    // Humans: always forwarded, never served from it, never filling it.
    for _ in 0..2 {
        let res = get(addr, "example.com", "/article?id=7", Some(FIREFOX)).await;
        assert_eq!(res.header("age"), None);
    }
    assert_eq!(site.seen("/article?id=7", FIREFOX), 2);
    get(addr, "example.com", "/human-only", Some(FIREFOX)).await;
    get(addr, "example.com", "/human-only", Some(GOOGLEBOT)).await;
    assert_eq!(
        site.seen("/human-only", GOOGLEBOT),
        1,
        "a human's visit filled nothing"
    );

    let metrics = scrape(proxy.admin_addr.expect("admin")).await;
    assert_eq!(cache_metric(&metrics, "hit"), 3.0);
    assert_eq!(cache_metric(&metrics, "miss"), 2.0);
    assert_eq!(
        metric(&metrics, "crawlgate_bot_cache_saved_bytes_total", &[]),
        36.0,
        "two GET bodies of 18 bytes"
    );
    assert_eq!(metric(&metrics, "crawlgate_bot_cache_entries", &[]), 2.0);
    assert_eq!(
        metric(
            &metrics,
            "crawlgate_requests_total",
            &[("decision", "cache"), ("class", "search"), ("code", "2xx")]
        ),
        2.0
    );
    proxy.stop().await;
}

/// What must not be kept is not: Set-Cookie, private, no-store, Vary on
/// anything but Accept-Encoding, a 302; and a robot's request with a
/// cookie or credentials neither reads nor fills.
#[tokio::test]
async fn personal_or_uncacheable_answers_and_requests_bypass_it() {
    let site = Site::start().await;
    let proxy = proxy(&site, CONFIG).await;
    let addr = proxy.addr;
    for target in [
        "/a?set-cookie=sid=1",
        "/b?cache-control=private",
        "/c?cache-control=no-store",
        "/d?vary=Cookie",
        "/e?status=302&location=/x",
        "/f?status=500",
    ] {
        for _ in 0..2 {
            get(addr, "example.com", target, Some(GOOGLEBOT)).await;
        }
        assert_eq!(site.seen(target, GOOGLEBOT), 2, "{target} is not kept");
    }
    // Kept: 404, 410, 301 and Vary: Accept-Encoding.
    for target in [
        "/g?status=404",
        "/h?status=410",
        "/i?status=301&location=/x",
        "/j?vary=Accept-Encoding",
    ] {
        for _ in 0..2 {
            get(addr, "example.com", target, Some(GOOGLEBOT)).await;
        }
        assert_eq!(site.seen(target, GOOGLEBOT), 1, "{target} is kept");
    }
    // With a cookie or credentials: to the site, even though it is kept.
    for header in ["Cookie: sid=1\r\n", "Authorization: Basic eDp5\r\n"] {
        request(
            addr,
            "GET",
            "example.com",
            "/g?status=404",
            Some(GOOGLEBOT),
            header,
        )
        .await;
    }
    assert_eq!(site.seen("/g?status=404", GOOGLEBOT), 3);
    // Another Accept-Encoding is another entry.
    request(
        addr,
        "GET",
        "example.com",
        "/j?vary=Accept-Encoding",
        Some(GOOGLEBOT),
        "Accept-Encoding: br\r\n",
    )
    .await;
    assert_eq!(site.seen("/j?vary=Accept-Encoding", GOOGLEBOT), 2);

    let metrics = scrape(proxy.admin_addr.expect("admin")).await;
    assert_eq!(cache_metric(&metrics, "bypass"), 2.0);
    assert_eq!(cache_metric(&metrics, "hit"), 4.0);
    proxy.stop().await;
}

/// A robot's `If-None-Match` with the ETag of the first answer gets 304
/// from the cache (the site sent no ETag: crawlgate computed a strong one;
/// a site's own ETag is kept). `If-Modified-Since` is covered by the
/// validators' unit tests.
#[tokio::test]
async fn a_robot_revalidating_gets_304_from_the_cache() {
    let site = Site::start().await;
    let proxy = proxy(&site, CONFIG).await;
    let addr = proxy.addr;
    get(addr, "example.com", "/p", Some(GOOGLEBOT)).await;
    let cached = get(addr, "example.com", "/p", Some(GOOGLEBOT)).await;
    let etag = cached.header("etag").expect("a computed ETag").to_owned();
    assert!(etag.starts_with('"'), "strong: {etag}");
    let res = request(
        addr,
        "GET",
        "example.com",
        "/p",
        Some(GOOGLEBOT),
        &format!("If-None-Match: {etag}\r\n"),
    )
    .await;
    assert_eq!(res.status, 304, "{}", res.head);
    assert!(res.body.is_empty());
    assert_eq!(res.header("etag"), Some(etag.as_str()));
    let res = request(
        addr,
        "GET",
        "example.com",
        "/p",
        Some(GOOGLEBOT),
        "If-None-Match: \"other\"\r\n",
    )
    .await;
    assert_eq!(res.status, 200);

    let target = "/q?etag=v1";
    get(addr, "example.com", target, Some(GOOGLEBOT)).await;
    let res = request(
        addr,
        "GET",
        "example.com",
        target,
        Some(GOOGLEBOT),
        "If-None-Match: \"v1\"\r\n",
    )
    .await;
    assert_eq!(res.status, 304, "the site's own ETag is kept");
    assert_eq!(site.seen("/p", GOOGLEBOT), 1);
    assert_eq!(site.seen(target, GOOGLEBOT), 1);
    let metrics = scrape(proxy.admin_addr.expect("admin")).await;
    assert_eq!(cache_metric(&metrics, "not_modified"), 2.0);
    proxy.stop().await;
}

/// Past its ttl an entry is not served while the site answers; when the
/// site fails (503) or is dead (no answer), robots get the stale copy
/// instead of the error; humans get the error.
#[tokio::test(start_paused = true)]
async fn a_stale_copy_stands_in_when_the_site_fails() {
    let site = Site::start().await;
    let proxy = here(&site, "[bot_cache]\nttl = \"1s\"\n").await;
    let addr = proxy.addr;
    get(addr, "example.com", "/news", Some(GOOGLEBOT)).await;
    // Fresh until the ttl is over, to the millisecond.
    tokio::time::advance(Duration::from_millis(999)).await;
    let res = get(addr, "example.com", "/news", Some(GOOGLEBOT)).await;
    assert_eq!(res.header("age"), Some("0"), "{}", res.head);
    assert_eq!(site.seen("/news", GOOGLEBOT), 1);
    tokio::time::advance(Duration::from_millis(1)).await;
    // Stale, the site is up: forwarded (and kept again).
    let res = get(addr, "example.com", "/news", Some(GOOGLEBOT)).await;
    assert_eq!(res.header("age"), None);
    assert_eq!(site.seen("/news", GOOGLEBOT), 2);
    tokio::time::advance(Duration::from_secs(1)).await;

    for (mode, error) in [(FAILING, 503), (DEAD, 502)] {
        site.set(mode);
        let res = get(addr, "example.com", "/news", Some(GOOGLEBOT)).await;
        assert_eq!(res.status, 200, "{}", res.head);
        assert_eq!(res.text(), "page /news");
        assert!(res.header("age").is_some());
        let human = get(addr, "example.com", "/news", Some(FIREFOX)).await;
        assert_eq!(human.status, error);
    }
    // Nothing to stand in: the error.
    let res = get(addr, "example.com", "/never-seen", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 502);

    let metrics = scrape(proxy.admin_addr.expect("admin")).await;
    assert_eq!(cache_metric(&metrics, "stale"), 2.0);
    proxy.stop().await;
}

/// A flood of distinct addresses keeps the cache within its size.
#[tokio::test]
async fn a_flood_of_addresses_stays_within_the_size() {
    let site = Site::start().await;
    let proxy = proxy(&site, "[bot_cache]\nttl = \"10m\"\nsize = \"1MiB\"\n").await;
    let addr = proxy.addr;
    let admin = proxy.admin_addr.expect("admin");
    let mut tasks = Vec::new();
    for worker in 0..8 {
        tasks.push(tokio::spawn(async move {
            for i in 0..250 {
                let target = format!("/flood/{worker}/{i}?size=4096");
                let res = get(addr, "example.com", &target, Some("curl/8.5.0")).await;
                assert_eq!(res.status, 200);
            }
        }));
    }
    for task in tasks {
        task.await.expect("flood");
    }
    let metrics = scrape(admin).await;
    let bytes = metric(&metrics, "crawlgate_bot_cache_bytes", &[]);
    assert!(bytes <= 1_048_576.0, "{bytes} bytes held");
    assert!(bytes >= 524_288.0, "the cache is used: {bytes} bytes");
    assert_eq!(cache_metric(&metrics, "miss"), 2000.0);
    proxy.stop().await;
}

/// A page the site says is fresh for 60 s (`max-age=60`, below the
/// configured 10 minutes) is answered from the cache at 30 s and fetched
/// from the site again at 61 s (it was served at `age: 64` before).
#[tokio::test(start_paused = true)]
async fn a_page_is_kept_no_longer_than_the_site_says() {
    let site = Site::start().await;
    let here = Here::start(CONFIG, &site.url()).await;
    let target = "/fresh?cache-control=max-age=60";
    let first = get(here.addr, "example.com", target, Some(GOOGLEBOT)).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("age"), None, "from the site");

    tokio::time::advance(Duration::from_secs(30)).await;
    let cached = get(here.addr, "example.com", target, Some(GOOGLEBOT)).await;
    assert_eq!(cached.header("age"), Some("30"), "{}", cached.head);
    assert_eq!(site.seen(target, GOOGLEBOT), 1);

    tokio::time::advance(Duration::from_secs(31)).await;
    let again = get(here.addr, "example.com", target, Some(GOOGLEBOT)).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("age"), None, "from the site: {}", again.head);
    assert_eq!(site.seen(target, GOOGLEBOT), 2);
    // Kept again, for another 60 s.
    tokio::time::advance(Duration::from_secs(59)).await;
    let cached = get(here.addr, "example.com", target, Some(GOOGLEBOT)).await;
    assert_eq!(cached.header("age"), Some("59"), "{}", cached.head);
    assert_eq!(site.seen(target, GOOGLEBOT), 2);
}

/// A robot revalidating a page the cache no longer holds (past its
/// `max-age` here) with the ETag of its first answer gets `304`: the site
/// is asked, the body it sends is the same, so its tag is too; another
/// tag gets the page.
#[tokio::test(start_paused = true)]
async fn a_robot_revalidating_an_expired_page_gets_304_after_the_site_is_asked() {
    let site = Site::start().await;
    let here = Here::start(CONFIG, &site.url()).await;
    let target = "/again?cache-control=max-age=60";
    let first = get(here.addr, "example.com", target, Some(GOOGLEBOT)).await;
    let etag = first.header("etag").expect("an ETag").to_owned();
    tokio::time::advance(Duration::from_secs(61)).await;
    let revalidate = format!("If-None-Match: {etag}\r\n");
    let res = request(
        here.addr,
        "GET",
        "example.com",
        target,
        Some(GOOGLEBOT),
        &revalidate,
    )
    .await;
    assert_eq!(res.status, 304, "{}", res.head);
    assert!(res.body.is_empty());
    assert_eq!(res.header("etag"), Some(etag.as_str()));
    assert_eq!(res.header("age"), None, "from the site");
    assert_eq!(res.header("content-length"), None, "{}", res.head);
    assert_eq!(site.seen(target, GOOGLEBOT), 2);
    tokio::time::advance(Duration::from_secs(61)).await;
    let other = "If-None-Match: \"other\"\r\n";
    let res = request(
        here.addr,
        "GET",
        "example.com",
        target,
        Some(GOOGLEBOT),
        other,
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.head);
    assert_eq!(res.header("etag"), Some(etag.as_str()));
    assert_eq!(site.seen(target, GOOGLEBOT), 3);
}

/// Past the site's `max-age` the copy is stale: it stands in when the
/// site fails; with `must-revalidate` it does not (the site's error is
/// passed on).
#[tokio::test(start_paused = true)]
async fn a_stale_copy_past_max_age_stands_in_unless_the_site_forbids_it() {
    let site = Site::start().await;
    let here = Here::start(CONFIG, &site.url()).await;
    let lenient = "/lenient?cache-control=max-age=60";
    let strict = "/strict?cache-control=max-age=60,must-revalidate";
    for target in [lenient, strict] {
        get(here.addr, "example.com", target, Some(GOOGLEBOT)).await;
    }
    tokio::time::advance(Duration::from_secs(61)).await;
    site.set(FAILING);
    let res = get(here.addr, "example.com", lenient, Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 200, "{}", res.head);
    assert_eq!(res.header("age"), Some("61"));
    let res = get(here.addr, "example.com", strict, Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 503, "{}", res.head);
}

/// A robot's first GET of a page the site sends without an ETag (but with
/// its length) already carries the ETag the cache answers with, so its
/// next visit, `If-None-Match` with it, is a 304 from the cache; a human's
/// GET streams with no ETag added; the site's own ETag is passed as is.
#[tokio::test]
async fn a_robots_first_answer_carries_the_etag_of_the_cache() {
    let site = Site::start().await;
    let proxy = proxy(&site, CONFIG).await;
    let addr = proxy.addr;

    let first = get(addr, "example.com", "/first", Some(GOOGLEBOT)).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "page /first");
    assert_eq!(first.header("age"), None, "from the site");
    assert_eq!(first.header("content-length"), Some("11"));
    let etag = first.header("etag").expect("an ETag on the first answer");
    let computed = crawlgate::validators::etag_of(b"page /first");
    assert_eq!(etag, computed.to_str().expect("ascii"));
    let res = request(
        addr,
        "GET",
        "example.com",
        "/first",
        Some(GOOGLEBOT),
        &format!("If-None-Match: {etag}\r\n"),
    )
    .await;
    assert_eq!(res.status, 304, "{}", res.head);
    assert_eq!(res.header("etag"), Some(etag));
    assert!(res.header("age").is_some(), "from the cache");
    assert_eq!(site.seen("/first", GOOGLEBOT), 1);

    // A human: streamed, nothing added.
    let human = get(addr, "example.com", "/first", Some(FIREFOX)).await;
    assert_eq!(human.text(), "page /first");
    assert_eq!(human.header("etag"), None, "{}", human.head);
    // The site's own ETag is passed unchanged, alone.
    let res = get(addr, "example.com", "/own?etag=v1", Some(GOOGLEBOT)).await;
    let sent: Vec<&str> = res
        .head
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("etag:"))
        .collect();
    assert_eq!(sent, ["etag: \"v1\""], "{}", res.head);
    // Streamed as before, no ETag added: not kept (private), too big
    // for max_item, or a status the cache gives no ETag.
    for target in [
        "/private?cache-control=private",
        "/big?size=2000000",
        "/missing?status=404",
    ] {
        let res = get(addr, "example.com", target, Some(GOOGLEBOT)).await;
        assert_eq!(res.header("etag"), None, "{target}: {}", res.head);
    }
    proxy.stop().await;
}

/// An upstream on a raw socket: reads each request's head and answers
/// the connection's `answers[n]` (the last one for every later
/// connection), then closes it, or holds it open (`hold`).
async fn raw_site(answers: &'static [&'static [u8]], hold: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        for n in 0.. {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            let answer = answers[n.min(answers.len() - 1)];
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(answer).await;
                if hold {
                    std::future::pending::<()>().await;
                }
            });
        }
    });
    format!("http://{addr}")
}

/// A robot's page read whole before it is answered: a body that ends
/// short of its Content-Length is a 502 and one that stalls past
/// `limits.upstream_body_idle_timeout` a 504, never a truncated 200;
/// nothing is kept. A body of unknown length still streams. A stale copy,
/// when there is one, stands in for a failed body as for any failure.
#[tokio::test(start_paused = true)]
async fn a_body_read_whole_that_fails_is_a_502_or_504() {
    const SHORT: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b";
    let config = format!("{CONFIG}[limits]\nupstream_body_idle_timeout = \"5s\"\n");
    let cut = Here::start(&config, &raw_site(&[SHORT], false).await).await;
    let res = get(cut.addr, "example.com", "/cut", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 502, "{}", res.head);
    assert_eq!(res.header("etag"), None);

    let stalled = Here::start(&config, &raw_site(&[SHORT], true).await).await;
    let start = tokio::time::Instant::now();
    let res = get(stalled.addr, "example.com", "/stall", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 504, "{}", res.head);
    assert!(start.elapsed() >= Duration::from_secs(5));
    // Nothing was kept: asked again, the same.
    let res = get(stalled.addr, "example.com", "/stall", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 504, "{}", res.head);

    const CHUNKED: &[u8] =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let chunked = Here::start(&config, &raw_site(&[CHUNKED], false).await).await;
    let res = get(chunked.addr, "example.com", "/chunked", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("etag"), None, "streamed: {}", res.head);
    // Kept as it streamed: the cache's answer has the tag.
    let res = get(chunked.addr, "example.com", "/chunked", Some(GOOGLEBOT)).await;
    assert_eq!(res.text(), "hello");
    assert!(res.header("age").is_some());
    assert!(res.header("etag").is_some());

    // A stale copy stands in for a body that fails as for any failure.
    const FRESH_60S: &[u8] =
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\nhello";
    let site = raw_site(&[FRESH_60S, SHORT], false).await;
    let stale = Here::start(&config, &site).await;
    let res = get(stale.addr, "example.com", "/s", Some(GOOGLEBOT)).await;
    assert_eq!(res.text(), "hello");
    tokio::time::advance(Duration::from_secs(61)).await;
    let res = get(stale.addr, "example.com", "/s", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 200, "{}", res.head);
    assert_eq!(res.text(), "hello");
    assert_eq!(res.header("age"), Some("61"));
}

/// An uptime monitor, a robot that must see the live site.
const UPTIME_ROBOT: &str = "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)";

/// A monitor's (and a callback's) requests always reach the site: its
/// second GET of a page a search robot has cached is forwarded, its own
/// answers fill nothing, and each counts as a bypass; a search robot's
/// second GET is answered from memory.
#[tokio::test(start_paused = true)]
async fn a_monitors_get_always_reaches_the_site() {
    let site = Site::start().await;
    let proxy = here(&site, CONFIG).await;
    let addr = proxy.addr;

    // The monitor first: its answer is not kept for anyone.
    for _ in 0..2 {
        let res = get(addr, "example.com", "/status", Some(UPTIME_ROBOT)).await;
        assert_eq!(res.status, 200);
        assert_eq!(res.header("age"), None, "from the site: {}", res.head);
    }
    assert_eq!(site.seen("/status", UPTIME_ROBOT), 2);
    let first = get(addr, "example.com", "/status", Some(GOOGLEBOT)).await;
    assert_eq!(first.header("age"), None, "not filled by the monitor");
    assert_eq!(site.seen("/status", GOOGLEBOT), 1);

    // Cached now: the search robot is answered from memory, the monitor
    // and a payment callback are not (nor with a matching validator).
    tokio::time::advance(Duration::from_secs(1)).await;
    let second = get(addr, "example.com", "/status", Some(GOOGLEBOT)).await;
    assert_eq!(second.header("age"), Some("1"), "{}", second.head);
    assert_eq!(site.seen("/status", GOOGLEBOT), 1);
    let monitor = get(addr, "example.com", "/status", Some(UPTIME_ROBOT)).await;
    assert_eq!(monitor.header("age"), None, "{}", monitor.head);
    assert_eq!(site.seen("/status", UPTIME_ROBOT), 3);
    let callback = get(addr, "example.com", "/status", Some("Shopify-Captain-Hook")).await;
    assert_eq!(callback.header("age"), None, "{}", callback.head);
    assert_eq!(site.seen("/status", "Shopify-Captain-Hook"), 1);
    let etag = second.header("etag").expect("an ETag").to_owned();
    let revalidate = request(
        addr,
        "GET",
        "example.com",
        "/status",
        Some(UPTIME_ROBOT),
        &format!("If-None-Match: {etag}\r\n"),
    )
    .await;
    assert_eq!(revalidate.header("age"), None, "{}", revalidate.head);
    assert_eq!(site.seen("/status", UPTIME_ROBOT), 4);

    let metrics = scrape(proxy.admin_addr.expect("admin")).await;
    assert_eq!(cache_metric(&metrics, "hit"), 1.0);
    assert_eq!(cache_metric(&metrics, "miss"), 1.0);
    assert_eq!(cache_metric(&metrics, "bypass"), 5.0);
    proxy.stop().await;
}

/// While the site fails, a search robot gets the stale copy, but the
/// monitor gets the site's error: a monitor must see the outage.
#[tokio::test(start_paused = true)]
async fn a_monitor_sees_the_outage_a_stale_copy_hides_from_robots() {
    let site = Site::start().await;
    let proxy = here(&site, "[bot_cache]\nttl = \"1s\"\n").await;
    let addr = proxy.addr;
    get(addr, "example.com", "/status", Some(GOOGLEBOT)).await;
    tokio::time::advance(Duration::from_secs(2)).await;
    for (mode, error) in [(FAILING, 503), (DEAD, 502)] {
        site.set(mode);
        let robot = get(addr, "example.com", "/status", Some(GOOGLEBOT)).await;
        assert_eq!(robot.status, 200, "{}", robot.head);
        assert!(robot.header("age").is_some());
        let monitor = get(addr, "example.com", "/status", Some(UPTIME_ROBOT)).await;
        assert_eq!(monitor.status, error, "{}", monitor.head);
    }
    let metrics = scrape(proxy.admin_addr.expect("admin")).await;
    assert_eq!(cache_metric(&metrics, "stale"), 2.0);
    proxy.stop().await;
}

/// `live_classes` names classes of the loaded rules: a name they do not
/// have is refused at start (and so at a reload, which loads the same
/// way), with the file, the line and the key; an empty list lets every
/// robot use the cache.
#[tokio::test(start_paused = true)]
async fn live_classes_must_be_classes_of_the_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crawlgate.toml");
    std::fs::write(
        &path,
        "[bot_cache]\nttl = \"10m\"\nlive_classes = [\"monitor\", \"monitors\"]\n",
    )
    .expect("write");
    let process = std::sync::Arc::new(crawlgate::state::Process::new());
    let err = match crawlgate::live::load(Some(&path), &Overrides::default(), &process, true) {
        Ok(_) => panic!("a class the rules do not have is refused"),
        Err(err) => err.to_string(),
    };
    assert!(
        err.contains("crawlgate.toml:3: bot_cache.live_classes: \"monitors\" is not a robot class"),
        "{err}"
    );
    // The same for a reload.
    assert!(crawlgate::live::load(Some(&path), &Overrides::default(), &process, false).is_err());

    let site = Site::start().await;
    let proxy = here(&site, "[bot_cache]\nttl = \"10m\"\nlive_classes = []\n").await;
    let addr = proxy.addr;
    get(addr, "example.com", "/status", Some(UPTIME_ROBOT)).await;
    let again = get(addr, "example.com", "/status", Some(UPTIME_ROBOT)).await;
    assert!(again.header("age").is_some(), "{}", again.head);
    assert_eq!(site.seen("/status", UPTIME_ROBOT), 1);
    proxy.stop().await;
}
