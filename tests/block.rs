//! A robot's action URL is answered 403 and never reaches the upstream; a
//! human's goes through.

mod support;

use support::{get, Proxy, Upstream, FIREFOX, GOOGLEBOT};

#[tokio::test]
async fn bot_action_urls_are_blocked_in_every_php_spelling() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let spellings = [
        "/?do=vote",
        "/article?id=5&do=vote",
        "/?%64o=vote",
        "/?%64%6F=vote",
        "/?do[]=vote",
        "/?do[x]=vote",
        "/?do%5B%5D=vote",
        "/?do[=vote",
        "/?do%5D=vote",
        "/?+do=vote",
        "/?%20do=vote",
        "/?do%00junk=vote",
        "/?do",
        "/?_fid=abc",
        "/?.fid=abc",
        "/?%5Ffid=abc",
    ];
    for target in spellings {
        for ua in [Some(GOOGLEBOT), Some("curl/8.5.0"), None, Some("")] {
            let res = get(proxy.addr, "example.com", target, ua).await;
            assert_eq!(res.status, 403, "{target} as {ua:?}");
            assert_eq!(res.header("cache-control"), Some("no-store"));
        }
    }
    assert!(
        upstream.requests().is_empty(),
        "blocked requests reached the upstream: {:?}",
        upstream.requests()
    );
    proxy.stop().await;
}

#[tokio::test]
async fn humans_and_harmless_queries_pass() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;

    let res = get(proxy.addr, "example.com", "/?do=vote", Some(FIREFOX)).await;
    assert_eq!(res.status, 200);
    for target in ["/?undo=1", "/?x=do", "/?DO=1", "/?d.o=1", "/?fid=1"] {
        assert_eq!(
            get(proxy.addr, "example.com", target, Some(GOOGLEBOT))
                .await
                .status,
            200,
            "{target}"
        );
    }

    let seen = upstream.requests();
    let uris: Vec<&str> = seen.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "/?do=vote",
            "/?undo=1",
            "/?x=do",
            "/?DO=1",
            "/?d.o=1",
            "/?fid=1"
        ]
    );
    assert_eq!(seen[0].header("x-crawler"), Some("0"));
    assert!(seen[1..].iter().all(|r| r.header("x-crawler") == Some("1")));
    proxy.stop().await;
}

#[tokio::test]
async fn blocked_parameter_names_are_config() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("[block]\nparams = [\"action\"]", &upstream.url()).await;
    assert_eq!(
        get(proxy.addr, "example.com", "/?action=x", Some(GOOGLEBOT))
            .await
            .status,
        403
    );
    assert_eq!(
        get(proxy.addr, "example.com", "/?do=x", Some(GOOGLEBOT))
            .await
            .status,
        200
    );
    assert_eq!(upstream.requests().len(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn a_blocked_post_closes_the_connection_instead_of_reading_the_body() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    // Keep-alive request with a body, then a second request on the same
    // connection: the unread body must not be taken for a request.
    let raw = format!(
        "POST /?do=vote HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8\r\nContent-Length: 52\r\n\r\n{}",
        "GET /smuggled HTTP/1.1\r\nHost: example.com\r\n\r\nxxxx"
    );
    let res = support::send_raw(proxy.addr, raw.as_bytes()).await;
    assert_eq!(res.status, 403);
    assert_eq!(res.header("connection"), Some("close"));
    assert!(!res.text().contains("upstream saw"), "{}", res.text());
    assert!(upstream.requests().is_empty(), "{:?}", upstream.requests());
    proxy.stop().await;
}
