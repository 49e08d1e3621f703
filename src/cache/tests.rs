use super::*;
use crate::testing::header_map as headers;

fn config() -> BotCacheConfig {
    BotCacheConfig {
        ttl: Duration::from_secs(600),
        size: 1 << 20,
        max_item: 16 * 1024,
        max_stale: Duration::from_secs(86_400),
        live_classes: None,
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
        (200, &[("cache-control", " , PRIVATE ,")], false),
        (
            200,
            &[
                ("cache-control", "max-age=60"),
                ("cache-control", "no-cache"),
            ],
            false,
        ),
        // A comma in a quoted argument does not split it.
        (200, &[("cache-control", "ext=\"a, private\"")], true),
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

/// `(headers, fresh, stale)` in seconds: `ttl` 600, `max_stale` 86400;
/// `Date` (when set) is 1,700,000,000 and the answer is received 5 s
/// later.
#[test]
fn the_sites_freshness_bounds_the_lifetime() {
    const DATE: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
    const IN_60S: &str = "Tue, 14 Nov 2023 22:14:20 GMT";
    const IN_1H: &str = "Tue, 14 Nov 2023 23:13:20 GMT";
    const DAY: u64 = 86_400;
    type Case<'a> = (&'a [(&'a str, &'a str)], u64, u64);
    let cases: &[Case<'_>] = &[
        // No bound from the site: ttl.
        (&[], 600, DAY),
        (&[("cache-control", "public")], 600, DAY),
        (&[("cache-control", "max-age=3600")], 600, DAY),
        // max-age below ttl bounds it, whatever the spacing and case.
        (&[("cache-control", "public, max-age=60")], 60, DAY),
        (&[("cache-control", "  Max-Age = 60 ,public")], 60, DAY),
        (&[("cache-control", "MAX-AGE=\"60\"")], 60, DAY),
        (
            &[("cache-control", "public"), ("cache-control", "max-age=60")],
            60,
            DAY,
        ),
        // Given twice: the smaller.
        (&[("cache-control", "max-age=60, max-age=30")], 30, DAY),
        // s-maxage before max-age (either way), and no stale copies.
        (&[("cache-control", "max-age=60, s-maxage=120")], 120, 0),
        (&[("cache-control", "s-maxage=20, max-age=60")], 20, 0),
        (&[("cache-control", "max-age=0, s-maxage=60")], 60, 0),
        (&[("cache-control", "s-maxage=0, max-age=60")], 0, 0),
        (&[("cache-control", "max-age=0")], 0, DAY),
        // max-age before Expires.
        (
            &[
                ("cache-control", "max-age=30"),
                ("expires", IN_1H),
                ("date", DATE),
            ],
            30,
            DAY,
        ),
        // Expires relative to Date, or to the time received.
        (&[("expires", IN_60S), ("date", DATE)], 60, DAY),
        (&[("expires", IN_1H), ("date", DATE)], 600, DAY),
        (&[("expires", IN_60S)], 55, DAY),
        (&[("expires", IN_60S), ("date", "yesterday")], 55, DAY),
        (&[("expires", DATE), ("date", DATE)], 0, DAY),
        (&[("expires", IN_60S), ("date", IN_1H)], 0, DAY),
        // Unreadable bounds count as zero (expired), not as no bound.
        (&[("expires", "0"), ("date", DATE)], 0, DAY),
        (&[("expires", "-1")], 0, DAY),
        (&[("cache-control", "max-age=soon")], 0, DAY),
        (&[("cache-control", "max-age=-1")], 0, DAY),
        (&[("cache-control", "max-age=1.5")], 0, DAY),
        (&[("cache-control", "max-age=")], 0, DAY),
        (&[("cache-control", "max-age")], 0, DAY),
        (&[("cache-control", "max-age=\"60")], 0, DAY),
        // An unreadable Expires is ignored beside max-age.
        (
            &[("cache-control", "max-age=60"), ("expires", "0")],
            60,
            DAY,
        ),
        // Huge values saturate (2^31 s), which ttl bounds.
        (
            &[("cache-control", "max-age=99999999999999999999999")],
            600,
            DAY,
        ),
        // Other directives named alike are not these.
        (&[("cache-control", "max-ages=5, x-max-age=5")], 600, DAY),
        (&[("cache-control", "ext=\"max-age=5\"")], 600, DAY),
        // No stale copies when the site forbids them.
        (&[("cache-control", "max-age=60, must-revalidate")], 60, 0),
        (&[("cache-control", "Proxy-Revalidate")], 600, 0),
        // An upstream's Age has run part of the site's bound already.
        (&[("cache-control", "max-age=60"), ("age", "50")], 10, DAY),
        (&[("cache-control", "max-age=60"), ("age", "70")], 0, DAY),
        (
            &[("expires", IN_60S), ("date", DATE), ("age", "20")],
            40,
            DAY,
        ),
        (&[("age", "50")], 600, DAY),
        (&[("cache-control", "max-age=60"), ("age", "soon")], 60, DAY),
    ];
    let received =
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_secs(5);
    for (pairs, fresh, stale) in cases {
        let got = Lifetime::of(&headers(pairs), received, &config());
        let want = (Duration::from_secs(*fresh), Duration::from_secs(*stale));
        assert_eq!((got.fresh, got.stale), want, "{pairs:?}");
    }
    let aged = Lifetime::of(
        &headers(&[("cache-control", "max-age=60"), ("age", " 50 ")]),
        received,
        &config(),
    );
    assert_eq!(aged.arrived_age, Duration::from_secs(50));
}

/// An answer the site says is fresh for 60 s is served fresh until then,
/// then stale (only in place of an error) for `max_stale`; a zero
/// lifetime is not kept at all; `must-revalidate` has no stale window.
#[tokio::test(start_paused = true)]
async fn an_entry_lives_as_long_as_its_site_says() {
    let metrics = Metrics::new();
    let cache = Arc::new(BotCache::new(config(), &metrics));
    let now = Instant::now();
    let at = |s: u64| now + Duration::from_secs(s);
    filled(&cache, "/60", 200, &[("cache-control", "max-age=60")], b"x").await;
    assert_eq!(probe(&cache, "/60", &[], at(30)).cached(), Cached::Fresh);
    assert_eq!(probe(&cache, "/60", &[], at(61)).cached(), Cached::Stale);
    assert_eq!(
        probe(&cache, "/60", &[], at(61 + 86_400)).cached(),
        Cached::None
    );
    filled(
        &cache,
        "/strict",
        200,
        &[("cache-control", "max-age=60, must-revalidate")],
        b"x",
    )
    .await;
    assert_eq!(
        probe(&cache, "/strict", &[], at(30)).cached(),
        Cached::Fresh
    );
    assert!(matches!(
        probe(&cache, "/strict", &[], at(61)),
        Probe::Miss(_)
    ));
    // Arrived 50 s old from a cache behind: fresh 10 s more, and its Age
    // counts on from 50.
    filled(
        &cache,
        "/aged",
        200,
        &[("cache-control", "max-age=60"), ("age", "50")],
        b"x",
    )
    .await;
    let Probe::Found(entry, Cached::Fresh, _) = probe(&cache, "/aged", &[], at(5)) else {
        panic!("fresh at 5 s");
    };
    let res = cache.respond(&entry, false, &Method::GET, &HeaderMap::new(), at(5));
    assert_eq!(res.headers()["age"], "55");
    assert_eq!(probe(&cache, "/aged", &[], at(11)).cached(), Cached::Stale);
    for refused in ["max-age=0", "max-age=never", "s-maxage=0, max-age=60"] {
        let miss = probe(&cache, "/zero", &[], now);
        let pairs = headers(&[("cache-control", refused)]);
        assert!(
            cache
                .fill(miss, &Method::GET, StatusCode::OK, &pairs)
                .is_none(),
            "{refused}"
        );
    }
    let miss = probe(&cache, "/gone", &[], now);
    let pairs = headers(&[("expires", "0")]);
    assert!(cache
        .fill(miss, &Method::GET, StatusCode::OK, &pairs)
        .is_none());
}

/// Which answers are read whole before the robot gets them: a `200`
/// without the site's `ETag` whose `Content-Length` fits `max_item`; the
/// length counts among the copies in progress at once, and the `ETag`
/// returned is the one the entry answers with.
#[tokio::test]
async fn a_page_of_known_size_without_an_etag_is_read_whole() {
    let metrics = Metrics::new();
    let cache = Arc::new(BotCache::new(config(), &metrics));
    let now = Instant::now();
    let fill = |uri: &str, status: u16, pairs: &[(&str, &str)]| {
        cache
            .fill(
                probe(&cache, uri, &[], now),
                &Method::GET,
                StatusCode::from_u16(status).expect("status"),
                &headers(pairs),
            )
            .expect("storable")
    };
    /// (status, response headers, length read whole)
    type Case<'a> = (u16, &'a [(&'a str, &'a str)], Option<usize>);
    let cases: &[Case<'_>] = &[
        (200, &[("content-length", "5")], Some(5)),
        (200, &[("content-length", "16384")], Some(16384)),
        (200, &[("content-length", "0")], Some(0)),
        (200, &[], None),
        (200, &[("content-length", "5"), ("etag", "\"v1\"")], None),
        (200, &[("content-length", "5"), ("etag", "W/\"v1\"")], None),
        (404, &[("content-length", "5")], None),
        (301, &[("content-length", "5"), ("location", "/b")], None),
        (
            200,
            &[("content-length", "5"), ("content-length", "5")],
            None,
        ),
        (200, &[("content-length", " 5")], None),
        (200, &[("content-length", "five")], None),
    ];
    for (status, pairs, want) in cases {
        assert_eq!(
            fill("/w", *status, pairs).reserve_whole(),
            *want,
            "{status} {pairs:?}"
        );
    }
    assert_eq!(cache.filling.load(Ordering::Relaxed), 0, "all given back");

    let mut whole = fill("/w", 200, &[("content-length", "12")]);
    assert_eq!(whole.reserve_whole(), Some(12));
    assert_eq!(cache.filling.load(Ordering::Relaxed), 12, "counted at once");
    assert!(whole.push(b"<p>hello"));
    assert!(whole.push(b"</p>"));
    assert_eq!(cache.filling.load(Ordering::Relaxed), 12, "not twice");
    let (body, etag) = whole.finish();
    assert_eq!(body, &b"<p>hello</p>"[..]);
    assert_eq!(etag, Some(etag_of(b"<p>hello</p>")));
    assert_eq!(cache.filling.load(Ordering::Relaxed), 0);
    let Probe::Found(entry, ..) = probe(&cache, "/w", &[], now) else {
        panic!("kept");
    };
    let res = cache.respond(&entry, false, &Method::GET, &HeaderMap::new(), now);
    assert_eq!(res.headers().get("etag"), etag.as_ref(), "the same tag");

    // Past a quarter of size at once: streamed instead.
    let mut big = Vec::new();
    for i in 0..16 {
        let mut f = fill(&format!("/b{i}"), 200, &[("content-length", "16384")]);
        assert_eq!(f.reserve_whole(), Some(16384));
        big.push(f);
    }
    let mut over = fill("/over", 200, &[("content-length", "16384")]);
    assert_eq!(over.reserve_whole(), None);
    drop(big);
    assert_eq!(cache.filling.load(Ordering::Relaxed), 0);
}
