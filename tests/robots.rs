//! robots.txt is synthesized by the proxy and never fetched upstream.

mod support;

use crawlgate::config::Overrides;
use support::{get, request, Proxy, Upstream, GOOGLEBOT};

const DESIGN_BODY: &str = "User-agent: *\nAllow: /\nDisallow: /*?do=\nDisallow: /*&do=\nDisallow: /*?_fid=\nDisallow: /*&_fid=\nDisallow: /admin/\nDisallow: /api/\nDisallow: /cron/\n";

#[tokio::test]
async fn robots_txt_is_answered_by_the_proxy() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let res = get(proxy.addr, "example.com", "/robots.txt", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 200);
    assert_eq!(
        res.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(res.text(), DESIGN_BODY);
    let len = DESIGN_BODY.len().to_string();
    assert_eq!(res.header("content-length"), Some(len.as_str()));

    let head = request(proxy.addr, "HEAD", "example.com", "/robots.txt", None, "").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert!(upstream.requests().is_empty(), "{:?}", upstream.requests());
    proxy.stop().await;
}

/// robots.txt carries a strong ETag and a Last-Modified; a crawler's
/// conditional request with either gets 304 and no body; a stale tag gets
/// the text again.
#[tokio::test]
async fn robots_txt_answers_conditional_requests_with_304() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start("", &upstream.url()).await;
    let first = get(proxy.addr, "example.com", "/robots.txt", Some(GOOGLEBOT)).await;
    assert_eq!(first.status, 200);
    let etag = first.header("etag").expect("an ETag").to_owned();
    assert!(
        etag.starts_with('"') && !etag.starts_with("W/"),
        "strong: {etag}"
    );
    let modified = first
        .header("last-modified")
        .expect("a Last-Modified")
        .to_owned();
    assert!(httpdate::parse_http_date(&modified).is_ok(), "{modified}");

    let conditional = |header: String| {
        let addr = proxy.addr;
        async move {
            request(
                addr,
                "GET",
                "example.com",
                "/robots.txt",
                Some(GOOGLEBOT),
                &header,
            )
            .await
        }
    };
    let res = conditional(format!("If-None-Match: {etag}\r\n")).await;
    assert_eq!(res.status, 304, "{}", res.head);
    assert!(res.body.is_empty());
    assert_eq!(res.header("etag"), Some(etag.as_str()));
    let res = conditional(format!("If-None-Match: \"old\", W/{etag}\r\n")).await;
    assert_eq!(res.status, 304, "a weak comparison matches in a list");
    let res = conditional(format!("If-Modified-Since: {modified}\r\n")).await;
    assert_eq!(res.status, 304);
    let res = conditional("If-None-Match: \"old\"\r\n".to_owned()).await;
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), DESIGN_BODY);
    let res = conditional("If-Modified-Since: Thu, 01 Jan 2015 00:00:00 GMT\r\n".to_owned()).await;
    assert_eq!(res.status, 200);
    assert!(upstream.requests().is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn the_sitemap_line_follows_the_index_file_and_the_request_host() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let proxy = Proxy::start_with(
        "",
        Overrides {
            upstream: Some(upstream.url()),
            sitemap_dir: Some(dir.path().to_owned()),
            ..Overrides::default()
        },
    )
    .await;
    let res = get(proxy.addr, "example.com", "/robots.txt", None).await;
    assert_eq!(
        res.text(),
        DESIGN_BODY,
        "no index file yet: no Sitemap line"
    );

    std::fs::write(dir.path().join("sitemap.xml"), "<sitemapindex/>").expect("write");
    // The existence check is cached for at most a second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let res = get(proxy.addr, "shop.example.org:8443", "/robots.txt", None).await;
    assert_eq!(
        res.text(),
        format!("{DESIGN_BODY}\nSitemap: http://shop.example.org:8443/sitemaps/sitemap.xml\n")
    );
    assert!(upstream.requests().is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn robots_lines_derive_from_config() {
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(
        "[block]\nparams = [\"act\"]\n[robots]\ndisallow = [\"/private/\"]\nextra = [\"Crawl-delay: 2\"]",
        &upstream.url(),
    )
    .await;
    let res = get(proxy.addr, "example.com", "/robots.txt", None).await;
    assert_eq!(
        res.text(),
        "User-agent: *\nAllow: /\nDisallow: /*?act=\nDisallow: /*&act=\nDisallow: /private/\nCrawl-delay: 2\n"
    );
    // Other methods on /robots.txt are the site's business.
    let post = request(
        proxy.addr,
        "POST",
        "example.com",
        "/robots.txt",
        None,
        "Content-Length: 0\r\n",
    )
    .await;
    assert_eq!(post.status, 200);
    assert_eq!(upstream.requests().len(), 1);
    proxy.stop().await;
}
