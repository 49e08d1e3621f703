//! Duplicate addresses get one redirect, in one hop, to the canonical one.

mod support;

use support::{get, request, send_raw, Proxy, Upstream, FIREFOX, GOOGLEBOT};

#[tokio::test]
async fn www_host_and_www_path_are_fixed_in_one_hop() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let rows = [
        ("www.example.com", "/", "http://example.com/"),
        (
            "www.example.com",
            "/a/b?x=1&y=%20z",
            "http://example.com/a/b?x=1&y=%20z",
        ),
        (
            "WWW.Example.com:8080",
            "/www/page?id=1",
            "http://example.com:8080/page?id=1",
        ),
        ("example.com", "/www", "http://example.com/"),
        ("example.com", "/www/", "http://example.com/"),
        (
            "example.com",
            "/www/www/deep?q",
            "http://example.com/deep?q",
        ),
        (
            "example.com",
            "/www//evil.example/x",
            "http://example.com//evil.example/x",
        ),
    ];
    for (host, target, want) in rows {
        for ua in [FIREFOX, GOOGLEBOT] {
            let res = get(proxy.addr, host, target, Some(ua)).await;
            assert_eq!(res.status, 301, "{host}{target}");
            assert_eq!(res.header("location"), Some(want), "{host}{target}");
        }
    }
    assert!(upstream.requests().is_empty(), "{:?}", upstream.requests());

    for (host, target) in [
        ("example.com", "/wwwx"),
        ("example.com", "/a/www/b"),
        ("wwwexample.com", "/"),
    ] {
        assert_eq!(
            get(proxy.addr, host, target, Some(FIREFOX)).await.status,
            200,
            "{host}{target}"
        );
    }
    assert_eq!(upstream.requests().len(), 3);
    proxy.stop().await;
}

#[tokio::test]
async fn other_methods_get_308_so_the_body_is_not_lost() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let res = request(
        proxy.addr,
        "POST",
        "www.example.com",
        "/form?x=1",
        Some(FIREFOX),
        "Content-Length: 3\r\n\r\nabc",
    )
    .await;
    assert_eq!(res.status, 308);
    assert_eq!(res.header("location"), Some("http://example.com/form?x=1"));
    let res = request(
        proxy.addr,
        "HEAD",
        "www.example.com",
        "/",
        Some(FIREFOX),
        "",
    )
    .await;
    assert_eq!(res.status, 301);
    assert!(upstream.requests().is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn absolute_form_targets_use_their_own_authority() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let res = send_raw(
        proxy.addr,
        b"GET http://www.example.com/www/a?b HTTP/1.1\r\nHost: other.test\r\nUser-Agent: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(res.status, 301);
    assert_eq!(res.header("location"), Some("http://example.com/a?b"));
    proxy.stop().await;
}

#[tokio::test]
async fn hostile_hosts_are_never_reflected() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    for host in [
        "www.evil.com@example.com",
        "www.exa mple.com",
        "www.example.com:99999",
        "www.",
    ] {
        let res = get(proxy.addr, host, "/", Some(FIREFOX)).await;
        assert_ne!(
            res.status,
            301,
            "{host:?} was redirected to {:?}",
            res.header("location")
        );
    }
    proxy.stop().await;
}

#[tokio::test]
async fn the_allow_list_and_modes_are_config() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("[redirect]\nhosts = [\"example.com\"]", &upstream.url()).await;
    assert_eq!(
        get(proxy.addr, "www.example.com", "/", Some(FIREFOX))
            .await
            .status,
        301
    );
    assert_eq!(
        get(proxy.addr, "www.other.org", "/", Some(FIREFOX))
            .await
            .status,
        200
    );
    assert_eq!(
        get(proxy.addr, "other.org", "/www/x", Some(FIREFOX))
            .await
            .status,
        200
    );
    proxy.stop().await;

    let proxy = Proxy::start(
        "[redirect]\nwww = \"www\"\nstrip_www_path = false",
        &upstream.url(),
    )
    .await;
    let res = get(proxy.addr, "example.com", "/www/a", Some(FIREFOX)).await;
    assert_eq!(res.header("location"), Some("http://www.example.com/www/a"));
    assert_eq!(
        get(proxy.addr, "www.example.com", "/www/a", Some(FIREFOX))
            .await
            .status,
        200
    );
    proxy.stop().await;

    let proxy = Proxy::start("[redirect]\nwww = \"off\"", &upstream.url()).await;
    assert_eq!(
        get(proxy.addr, "www.example.com", "/", Some(FIREFOX))
            .await
            .status,
        200
    );
    proxy.stop().await;
}
