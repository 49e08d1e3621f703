use super::*;
use crate::testing::header_map as headers;

fn config() -> BotCacheConfig {
    BotCacheConfig {
        ttl: Duration::from_secs(600),
        size: 1 << 20,
        max_item: 16 * 1024,
        max_stale: Duration::from_secs(86_400),
    }
}

#[test]
fn which_requests_may_use_the_cache() {
    let ok = [
        (Method::GET, vec![]),
        (Method::HEAD, vec![("accept-encoding", "gzip")]),
        (Method::GET, vec![("content-length", "0")]),
    ];
    for (method, pairs) in ok {
        assert!(
            cacheable_request(&method, &headers(&pairs)),
            "{method} {pairs:?}"
        );
    }
    let not = [
        (Method::POST, vec![]),
        (Method::OPTIONS, vec![]),
        (Method::GET, vec![("cookie", "sid=1")]),
        (Method::GET, vec![("authorization", "Basic eDp5")]),
        (Method::GET, vec![("range", "bytes=0-10")]),
        (Method::GET, vec![("content-length", "5")]),
        (Method::GET, vec![("transfer-encoding", "chunked")]),
    ];
    for (method, pairs) in not {
        assert!(
            !cacheable_request(&method, &headers(&pairs)),
            "{method} {pairs:?}"
        );
    }
}

#[test]
fn which_responses_are_kept() {
    let max = 1000;
    /// (status, response headers, kept)
    type Case<'a> = (u16, &'a [(&'a str, &'a str)], bool);
    let cases: &[Case<'_>] = &[
        (200, &[], true),
        (301, &[("location", "/b")], true),
        (404, &[], true),
        (410, &[], true),
        (200, &[("cache-control", "public, max-age=60")], true),
        (200, &[("cache-control", "max-age=600, s-maxage=10")], true),
        (200, &[("vary", "Accept-Encoding")], true),
        (200, &[("vary", "accept-encoding, ")], true),
        (200, &[("content-length", "1000")], true),
        (302, &[], false),
        (206, &[], false),
        (500, &[], false),
        (503, &[], false),
        (304, &[], false),
        (200, &[("set-cookie", "sid=1")], false),
        (200, &[("cache-control", "private")], false),
        (200, &[("cache-control", "max-age=60, no-store")], false),
        (200, &[("cache-control", "No-Cache")], false),
        (200, &[("cache-control", "private=\"set-cookie\"")], false),
        (200, &[("cache-control", "max-age=0")], false),
        (200, &[("cache-control", "public, s-maxage=0")], false),
        (200, &[("vary", "Cookie")], false),
        (200, &[("vary", "Accept-Encoding, User-Agent")], false),
        (200, &[("vary", "*")], false),
        (200, &[("content-range", "bytes 0-1/2")], false),
        (200, &[("content-length", "1001")], false),
    ];
    for (status, pairs, kept) in cases {
        let status = StatusCode::from_u16(*status).expect("status");
        assert_eq!(
            storable(status, &headers(pairs), max),
            *kept,
            "{status} {pairs:?}"
        );
    }
}

#[test]
fn keys_compare_in_full() {
    let parts: [&[u8]; 3] = [b"http", b"example.com", b"/a"];
    assert!(same_key(b"http\xffexample.com\xff/a", &parts));
    assert!(!same_key(b"http\xffexample.com\xff/ab", &parts));
    assert!(!same_key(b"http\xffexample.co\xff/a", &parts));
    assert!(!same_key(b"httpexample.com/a", &parts));
}

async fn filled(
    cache: &Arc<BotCache>,
    uri: &str,
    status: u16,
    pairs: &[(&str, &str)],
    body: &[u8],
) {
    let uri: Uri = uri.parse().expect("uri");
    let probe = cache.probe(
        &Method::GET,
        "http",
        Some("example.com"),
        &uri,
        &HeaderMap::new(),
        Instant::now(),
    );
    let mut fill = cache
        .fill(
            probe,
            &Method::GET,
            StatusCode::from_u16(status).expect("status"),
            &headers(pairs),
        )
        .expect("storable");
    assert!(fill.push(body));
    fill.finish();
}

fn probe(cache: &BotCache, uri: &str, pairs: &[(&str, &str)], now: Instant) -> Probe {
    let uri: Uri = uri.parse().expect("uri");
    cache.probe(
        &Method::GET,
        "http",
        Some("example.com"),
        &uri,
        &headers(pairs),
        now,
    )
}

#[tokio::test]
async fn a_kept_answer_is_served_with_age_an_etag_and_304() {
    let metrics = Metrics::new();
    let cache = Arc::new(BotCache::new(config(), &metrics));
    let now = Instant::now();
    assert!(matches!(probe(&cache, "/a", &[], now), Probe::Miss(_)));
    filled(
        &cache,
        "/a",
        200,
        &[("content-type", "text/html")],
        b"<p>hello</p>",
    )
    .await;

    let found = probe(&cache, "/a", &[], now + Duration::from_secs(5));
    assert_eq!(found.cached(), Cached::Fresh);
    let Probe::Found(entry, ..) = &found else {
        panic!("found");
    };
    let res = cache.respond(
        entry,
        false,
        &Method::GET,
        &HeaderMap::new(),
        Instant::now() + Duration::from_secs(5),
    );
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["age"], "5");
    assert_eq!(res.headers()["content-type"], "text/html");
    assert_eq!(res.headers()["content-length"], "12");
    let etag = res.headers()["etag"].clone();
    assert_eq!(etag, etag_of(b"<p>hello</p>"));

    let conditional = headers(&[("if-none-match", etag.to_str().expect("ascii"))]);
    let res = cache.respond(entry, false, &Method::GET, &conditional, Instant::now());
    assert_eq!(res.status(), 304);
    assert_eq!(res.headers()["etag"], etag);

    // Another query, another encoding: other keys.
    assert!(matches!(probe(&cache, "/a?x=1", &[], now), Probe::Miss(_)));
    assert!(matches!(
        probe(&cache, "/a", &[("accept-encoding", "br")], now),
        Probe::Miss(_)
    ));
    // Past ttl: stale, then, past max_stale, gone.
    let later = now + Duration::from_secs(601);
    assert_eq!(probe(&cache, "/a", &[], later).cached(), Cached::Stale);
    let much_later = now + Duration::from_secs(600 + 86_401);
    assert!(matches!(
        probe(&cache, "/a", &[], much_later),
        Probe::Miss(_)
    ));
}

#[tokio::test]
async fn a_body_over_max_item_or_cut_short_is_not_kept() {
    let metrics = Metrics::new();
    let cache = Arc::new(BotCache::new(config(), &metrics));
    let now = Instant::now();
    let uri: Uri = "/big".parse().expect("uri");
    let miss = cache.probe(
        &Method::GET,
        "http",
        Some("example.com"),
        &uri,
        &HeaderMap::new(),
        now,
    );
    let mut fill = cache
        .fill(miss, &Method::GET, StatusCode::OK, &HeaderMap::new())
        .expect("storable");
    assert!(fill.push(&[b'x'; 16 * 1024]));
    assert!(!fill.push(b"x"), "one byte over max_item");
    drop(fill);
    // Dropped without finish (a body cut short): nothing kept.
    let miss = probe(&cache, "/cut", &[], now);
    let mut fill = cache
        .fill(miss, &Method::GET, StatusCode::OK, &HeaderMap::new())
        .expect("storable");
    assert!(fill.push(b"half"));
    drop(fill);
    assert!(matches!(probe(&cache, "/big", &[], now), Probe::Miss(_)));
    assert!(matches!(probe(&cache, "/cut", &[], now), Probe::Miss(_)));
    assert_eq!(cache.weight(), 0);
    assert_eq!(
        cache.filling.load(Ordering::Relaxed),
        0,
        "dropped fills gave their bytes back"
    );
    // HEAD answers are not kept (no body).
    let miss = probe(&cache, "/h", &[], now);
    assert!(cache
        .fill(miss, &Method::HEAD, StatusCode::OK, &HeaderMap::new())
        .is_none());
}

/// Many bodies copied at once may not pass a quarter of `size` together.
#[tokio::test]
async fn copies_in_progress_are_bounded() {
    let metrics = Metrics::new();
    let cache = Arc::new(BotCache::new(config(), &metrics));
    let now = Instant::now();
    let mut fills = Vec::new();
    let mut refused = 0;
    for i in 0..40 {
        let miss = probe(&cache, &format!("/p{i}"), &[], now);
        let mut fill = cache
            .fill(miss, &Method::GET, StatusCode::OK, &HeaderMap::new())
            .expect("storable");
        if fill.push(&[b'x'; 16 * 1024]) {
            fills.push(fill);
        } else {
            refused += 1;
        }
    }
    // 1 MiB / 4 = 256 KiB: sixteen bodies of 16 KiB.
    assert_eq!(fills.len(), 16);
    assert_eq!(refused, 24);
    for fill in fills {
        fill.finish();
    }
    assert_eq!(cache.filling.load(Ordering::Relaxed), 0);
    assert!(matches!(probe(&cache, "/p0", &[], now), Probe::Found(..)));
}

#[tokio::test]
async fn the_weight_stays_within_size_under_a_flood_of_addresses() {
    let metrics = Metrics::new();
    let cache = Arc::new(BotCache::new(config(), &metrics));
    for i in 0..5_000 {
        filled(&cache, &format!("/page/{i}"), 200, &[], &[b'x'; 2048]).await;
    }
    assert!(cache.weight() <= 1 << 20, "{} bytes", cache.weight());
    assert!(
        cache.weight() > 1 << 19,
        "the cache is used: {} bytes",
        cache.weight()
    );
}
