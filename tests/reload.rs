//! What a reload does, and what it keeps: new rules, certificates and
//! config reach every worker while requests in flight and connections
//! (to clients and to an unchanged upstream) go on; a broken file is
//! refused and the running state kept; the process-wide caches (robots
//! pages, DNS answers, key directories) outlive a reload that leaves their
//! settings alone.
//! Driven two ways: SIGHUP to the real binary as a child process, and the
//! in-process reload control event of the library entry production runs
//! ([`Proxy::reload`], what SIGHUP sends).

mod support;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use crawlgate::config::Overrides;
use support::dns::{DnsServer, Zone};
use support::download::{finish_download, start_download};
use support::lists::{lists_toml, ranges_toml, ListServer, GOOGLE_LIST};
use support::process::{self, free_addr, wait_for};
use support::signing::{AgentKey, Signing};
use support::site::Site;
use support::tls::{self as t, Ca};
use support::verdict::{told, verdict};
use support::{forwarded_for, get, request, two_workers, Proxy, Upstream, FIREFOX, GOOGLEBOT};

/// A robot only the reloaded rules know.
const FETCHER: &str = "Mozilla/5.0 (X11; Linux x86_64) FancyFetcher/3.1";
fn write_config(
    path: &Path,
    listen: SocketAddr,
    tls: SocketAddr,
    upstream: &str,
    rules: &Path,
    certs: &Path,
) {
    let text = format!(
        "listen = \"{listen}\"\nupstream = \"{upstream}\"\nrules_dir = {rules:?}\n\
         [proxy]\nshutdown_grace = \"20s\"\nworkers = 3\n\
         [tls]\nlisten = \"{tls}\"\ncerts = {certs:?}\n",
        rules = rules.display().to_string(),
        certs = certs.display().to_string(),
    );
    std::fs::write(path, text).expect("write config");
}
/// What the upstream was told about `ua`: `X-Crawler` of its latest request.
async fn class_of(addr: SocketAddr, upstream: &Upstream, ua: &str) -> String {
    let res = get(addr, "example.test", "/who", Some(ua)).await;
    assert_eq!(res.status, 200, "{}", res.text());
    let last = upstream.last("/who").expect("reached");
    last.header("x-crawler").unwrap_or("?").to_owned()
}
fn tls_get(addr: SocketAddr, path: &str) -> http::Request<http_body_util::Full<Bytes>> {
    http::Request::get(format!("https://example.test:{}{path}", addr.port()))
        .header("user-agent", FIREFOX)
        .body(http_body_util::Full::new(Bytes::new()))
        .expect("request")
}
/// The lines logged until the reload's outcome (within 10 s).
fn until_reloaded(lines: &std::sync::mpsc::Receiver<String>) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no reload outcome within 10 s: {seen:#?}"));
        let done = line.contains("reload: new config") || line.contains("reload failed");
        seen.push(line);
        if done {
            return seen;
        }
    }
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_rules_and_certificates_while_a_download_streams() {
    const SIZE: u64 = 64 * 1024 * 1024;
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules");
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&rules).expect("mkdir");
    std::fs::create_dir_all(&certs).expect("mkdir");
    std::fs::write(rules.join("search.txt"), "Googlebot\n").expect("rules");
    let ca = Ca::new();
    let first_cert = ca.leaf(&["example.test"]);
    t::write_flat(&certs, "example.test.crt", &first_cert);
    let (addr, tls_addr) = (free_addr(), free_addr());
    let config = dir.path().join("crawlgate.toml");
    write_config(&config, addr, tls_addr, &upstream.url(), &rules, &certs);
    let log = tempfile::NamedTempFile::new().expect("log file");
    let proxy = process::start(
        &["--config", config.to_str().expect("utf-8 path")],
        addr,
        Stdio::from(log.reopen().expect("log")),
    );
    process::wait_listening(tls_addr);

    assert_eq!(class_of(addr, &upstream, FETCHER).await, "0");
    // A TLS connection opened before the reload, kept alive across it.
    let stream = t::handshake(
        tls_addr,
        t::client_config(ca.roots(), &[b"http/1.1"]),
        Some("example.test"),
    )
    .await
    .expect("handshake");
    assert_eq!(t::presented(&stream), first_cert.der);
    let mut old_tls = t::Client::connect(stream).await;
    let (body, hasher, seen) = start_download(addr, SIZE, 1024 * 1024).await;

    // New rules and a renewed certificate, then SIGHUP.
    std::fs::write(rules.join("search.txt"), "Googlebot\nFancyFetcher\n").expect("rules");
    let renewed = ca.leaf(&["example.test"]);
    t::write_flat(&certs, "example.test.crt", &renewed);
    proxy.signal("HUP");
    wait_for("the new rules", async || {
        class_of(addr, &upstream, FETCHER).await == "1"
    })
    .await;
    // Every worker (each with its own state cell) has the new rules: new
    // connections land on any of the three.
    for _ in 0..30 {
        assert_eq!(class_of(addr, &upstream, FETCHER).await, "1");
    }

    let stream = t::handshake(
        tls_addr,
        t::client_config(ca.roots(), &[b"h2"]),
        Some("example.test"),
    )
    .await
    .expect("handshake after reload");
    assert_eq!(
        t::presented(&stream),
        renewed.der,
        "the renewed certificate"
    );
    let page = t::Client::connect(stream)
        .await
        .send(tls_get(tls_addr, "/after"))
        .await;
    assert_eq!(page.status, 200);
    let page = old_tls.send(tls_get(tls_addr, "/old-connection")).await;
    assert_eq!(
        page.status, 200,
        "the connection from before the reload still serves"
    );

    // An invalid config is refused; the running state keeps serving.
    std::fs::write(&config, "listen = [not toml").expect("break config");
    proxy.signal("HUP");
    wait_for("the reload error in the log", async || {
        std::fs::read_to_string(log.path()).is_ok_and(|l| l.contains("reload failed"))
    })
    .await;
    assert_eq!(
        class_of(addr, &upstream, FETCHER).await,
        "1",
        "old state kept"
    );

    // A changed listen address is reported as needing a restart.
    write_config(
        &config,
        free_addr(),
        tls_addr,
        &upstream.url(),
        &rules,
        &certs,
    );
    proxy.signal("HUP");
    wait_for("the restart notice", async || {
        std::fs::read_to_string(log.path()).is_ok_and(|l| l.contains("needs a restart"))
    })
    .await;
    assert_eq!(
        get(addr, "example.test", "/", Some(FIREFOX)).await.status,
        200
    );

    // The download started before the first reload completes intact.
    let (total, digest) = finish_download(body, hasher, seen).await;
    assert_eq!(total, SIZE);
    assert_eq!(digest, support::pattern_sha256(SIZE));
    let log = std::fs::read_to_string(log.path()).expect("log");
    assert!(log.contains("listen"), "{log}");
    drop(proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_upstream_connections_unless_the_upstream_changes() {
    use std::sync::atomic::Ordering;
    let (first, second) = (Upstream::start().await, Upstream::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).expect("mkdir");
    std::fs::write(rules.join("search.txt"), "Googlebot\n").expect("rules");
    let addr = free_addr();
    let config = dir.path().join("crawlgate.toml");
    let write = |upstream: &Upstream| {
        let text = format!(
            "listen = \"{addr}\"\nupstream = \"{}\"\nrules_dir = {:?}\n[proxy]\nworkers = 1\n",
            upstream.url(),
            rules.display().to_string(),
        );
        std::fs::write(&config, text).expect("config");
    };
    write(&first);
    let proxy = process::start(
        &["--config", config.to_str().expect("utf-8 path")],
        addr,
        Stdio::null(),
    );
    for _ in 0..3 {
        assert_eq!(class_of(addr, &first, FETCHER).await, "0");
    }
    assert_eq!(
        first.connections.load(Ordering::SeqCst),
        1,
        "one pooled connection"
    );

    // New rules, same upstream: the pooled connection is kept.
    std::fs::write(rules.join("search.txt"), "Googlebot\nFancyFetcher\n").expect("rules");
    proxy.signal("HUP");
    wait_for("the new rules", async || {
        class_of(addr, &first, FETCHER).await == "1"
    })
    .await;
    assert_eq!(
        first.connections.load(Ordering::SeqCst),
        1,
        "a reload that left the upstream alone reconnected"
    );

    // Another upstream: new requests go there, on a connection of their own.
    write(&second);
    proxy.signal("HUP");
    wait_for("the new upstream", async || {
        get(addr, "example.test", "/who", Some(FIREFOX)).await;
        !second.requests().is_empty()
    })
    .await;
    assert_eq!(class_of(addr, &second, FETCHER).await, "1");
    assert_eq!(second.connections.load(Ordering::SeqCst), 1);
    assert_eq!(first.connections.load(Ordering::SeqCst), 1);
}

/// A reload reaches every worker: after it, fresh connections (spread by
/// the kernel over both workers' sockets) all see the new block list; a
/// reload with a broken file changes nothing and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_reaches_every_worker() {
    let upstream = Upstream::start().await;
    let proxy = two_workers("[block]\nparams = [\"do\"]\n", &upstream).await;
    let before = get(proxy.addr, "example.com", "/?vote=1", Some(GOOGLEBOT)).await;
    assert_eq!(before.status, 200);

    proxy.rewrite("[block]\nparams = [\"vote\"]\n");
    let done = proxy.reload().await.expect("reload succeeds");
    assert!(done.restart_needed.is_empty(), "{:?}", done.restart_needed);
    for _ in 0..24 {
        let res = get(proxy.addr, "example.com", "/?vote=1", Some(GOOGLEBOT)).await;
        assert_eq!(res.status, 403, "a worker kept the old rules");
        let res = get(proxy.addr, "example.com", "/?do=1", Some(GOOGLEBOT)).await;
        assert_eq!(res.status, 200);
    }

    proxy.rewrite("[block]\nparams = [\"a b\"]\n");
    let err = proxy.reload().await.expect_err("invalid file");
    assert!(err.to_string().contains("block.params"), "{err}");
    let res = get(proxy.addr, "example.com", "/?vote=1", Some(GOOGLEBOT)).await;
    assert_eq!(res.status, 403, "a failed reload changed the running state");

    // The connection cap changed on disk needs a restart: reported, and
    // the running one kept.
    proxy.rewrite("[limits]\nmax_connections = 5\n");
    let done = proxy.reload().await.expect("reload succeeds");
    let keys: Vec<_> = done.restart_needed.iter().map(|c| c.0).collect();
    assert_eq!(keys, ["limits.max_connections"]);
    assert_eq!(
        get(proxy.addr, "example.com", "/", Some(GOOGLEBOT))
            .await
            .status,
        200
    );
    proxy.stop().await;
}

/// A reload that meets a malformed local range list is refused with the
/// file and line, and everything of the previous configuration keeps
/// serving: the list's old copy and the rest of the config alike.
#[tokio::test]
async fn a_reload_with_a_malformed_local_list_is_refused() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let list = dir.path().join("google.json");
    std::fs::write(&list, GOOGLE_LIST).expect("write");
    let toml = |params: &str| {
        format!(
            "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[block]\nparams = [{params:?}]\n\
             [verify]\ndns = false\nsignatures = false\n{}",
            lists_toml(&[("google.common-crawlers", &list)])
        )
    };
    let proxy = Proxy::start_with(
        &toml("do"),
        Overrides {
            upstream: Some(upstream.url()),
            ..Overrides::default()
        },
    )
    .await;
    let verdict = async |path: &str| {
        let (res, seen) =
            support::forwarded_for(&proxy, &upstream, "66.249.66.1", GOOGLEBOT, path, "").await;
        let told = seen.and_then(|r| r.header("x-crawler-verified").map(str::to_owned));
        (res.status, told)
    };
    assert_eq!(verdict("/before").await, (200, Some("ip".to_owned())));

    std::fs::write(
        &list,
        "{\"prefixes\": [\n{\"ipv4Prefix\": \"66.249.66.0/24\"},\n{\"ipv4Prefix\": \"not a net\"}]}",
    )
    .expect("write");
    proxy.rewrite(&toml("edit"));
    let err = proxy
        .reload()
        .await
        .expect_err("a malformed list is refused")
        .to_string();
    assert!(
        err.contains("verify.ranges: google.common-crawlers: ")
            && err.contains("google.json:3: entry 1: \"not a net\""),
        "{err}"
    );
    // The previous configuration: the list's copy, and `do` still blocked.
    assert_eq!(verdict("/after").await, (200, Some("ip".to_owned())));
    let res = request(
        proxy.addr,
        "GET",
        "example.com",
        "/?do=edit",
        Some(GOOGLEBOT),
        "",
    )
    .await;
    assert_eq!(res.status, 403, "the old block.params keep serving");
    let res = request(
        proxy.addr,
        "GET",
        "example.com",
        "/?edit=1",
        Some(GOOGLEBOT),
        "",
    )
    .await;
    assert_eq!(res.status, 200, "the new block.params were not applied");

    // Fixed, the same reload goes through.
    std::fs::write(&list, GOOGLE_LIST).expect("write");
    proxy.reload().await.expect("a good list reloads");
    let res = request(
        proxy.addr,
        "GET",
        "example.com",
        "/?edit=1",
        Some(GOOGLEBOT),
        "",
    )
    .await;
    assert_eq!(res.status, 403, "the new block.params apply");
    proxy.stop().await;
}

/// The robots cache belongs to the process: a reload (SIGHUP to the real
/// binary, as every certificate renewal sends) that leaves `[bot_cache]`
/// as it was keeps its entries, so a robot's page is still answered from
/// memory and the site is not asked again; a reload that resizes it
/// starts an empty one, says so in one line, and the next robot's request
/// reaches the site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_robots_cache_outlives_a_reload_and_a_resize_empties_it() {
    let site = Site::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crawlgate.toml");
    let addr = support::process::free_addr();
    let write = |size: &str, disallow: &str| {
        let text = format!(
            "listen = \"{addr}\"\nupstream = \"{}\"\n\
             [proxy]\nworkers = 2\n[log]\nfile = {log:?}\n[verify]\nenabled = false\n\
             [robots]\ndisallow = [\"{disallow}\"]\n\
             [bot_cache]\nttl = \"10m\"\nsize = \"{size}\"\n",
            site.url(),
            log = dir.path().join("access.log").display().to_string(),
        );
        std::fs::write(&path, text).expect("write config");
    };
    write("64MiB", "/admin/");
    let mut proxy = support::process::start_logging(
        &["--config", path.to_str().expect("utf-8 path")],
        addr,
        std::process::Stdio::piped(),
        "info",
    );
    let lines = support::process::stderr_lines(&mut proxy.0);

    let first = get(addr, "example.com", "/kept", Some(GOOGLEBOT)).await;
    assert_eq!(first.header("age"), None, "from the site");
    let again = get(addr, "example.com", "/kept", Some(GOOGLEBOT)).await;
    assert!(
        again.header("age").is_some(),
        "from the cache: {}",
        again.head
    );
    assert_eq!(site.seen("/kept", GOOGLEBOT), 1);

    // A reload that changes something else: the entry is still there.
    write("64MiB", "/private/");
    proxy.signal("HUP");
    let logged = until_reloaded(&lines);
    assert!(
        logged
            .last()
            .is_some_and(|l| l.contains("reload: new config")),
        "{logged:#?}"
    );
    assert!(
        !logged.iter().any(|l| l.contains("bot_cache:")),
        "the cache was kept: {logged:#?}"
    );
    let robots = get(addr, "example.com", "/robots.txt", Some(GOOGLEBOT)).await;
    assert!(robots.text().contains("Disallow: /private/"), "reloaded");
    let after = get(addr, "example.com", "/kept", Some(GOOGLEBOT)).await;
    assert_eq!(after.text(), "page /kept");
    assert!(
        after.header("age").is_some(),
        "from the cache: {}",
        after.head
    );
    assert_eq!(
        site.seen("/kept", GOOGLEBOT),
        1,
        "the site was not asked again"
    );

    // A resize: a new, empty cache, and the log says so.
    write("32MiB", "/private/");
    proxy.signal("HUP");
    let logged = until_reloaded(&lines);
    let resized: Vec<&String> = logged.iter().filter(|l| l.contains("bot_cache:")).collect();
    assert_eq!(resized.len(), 1, "{logged:#?}");
    assert!(
        resized[0].contains("bot_cache: settings changed, the cache starts empty")
            && resized[0].contains("size=33554432"),
        "{}",
        resized[0]
    );
    let emptied = get(addr, "example.com", "/kept", Some(GOOGLEBOT)).await;
    assert_eq!(emptied.header("age"), None, "from the site");
    assert_eq!(site.seen("/kept", GOOGLEBOT), 2);
    let refilled = get(addr, "example.com", "/kept", Some(GOOGLEBOT)).await;
    assert!(refilled.header("age").is_some(), "the new cache fills");
    assert_eq!(site.seen("/kept", GOOGLEBOT), 2);
}

/// The DNS answer cache belongs to the process: after a reload that
/// leaves the resolver's settings as they were, a crawler verified by DNS
/// is verified again without a query (the server counts them); a reload
/// that changes them starts an empty cache.
#[tokio::test]
async fn dns_answers_outlive_a_reload() {
    let upstream = Upstream::start().await;
    let lists = ListServer::start().await; // serves nothing: DNS decides
    let mut zone = Zone::default();
    let ip: IpAddr = "66.249.66.1".parse().expect("ip");
    zone.ptr
        .insert(ip, "crawl-66-249-66-1.googlebot.com".to_owned());
    zone.addrs
        .insert("crawl-66-249-66-1.googlebot.com".to_owned(), vec![ip]);
    let dns = DnsServer::start(zone).await;
    let toml = |timeout: &str, disallow: &str| {
        format!(
            "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[verify]\ndns = true\nresolver = \"{}\"\ndns_timeout = \"{timeout}\"\n{}\n[robots]\ndisallow = [\"{disallow}\"]\n",
            dns.addr,
            ranges_toml(&lists, &[])
        )
    };
    let proxy = Proxy::start_with(&toml("2s", "/admin/"), support::with_admin(&upstream)).await;
    let verified =
        async |path: &str| verdict(&proxy, &upstream, "66.249.66.1", GOOGLEBOT, path).await;
    assert_eq!(verified("/first").await.as_deref(), Some("dns"));
    let asked = dns.asked("66.249.66.1");
    assert!(asked >= 1, "looked up once");

    // A reload that changes something else: answered from the cache.
    proxy.rewrite(&toml("2s", "/private/"));
    proxy.reload().await.expect("reload succeeds");
    let robots = get(proxy.addr, "example.com", "/robots.txt", Some(GOOGLEBOT)).await;
    assert!(robots.text().contains("Disallow: /private/"), "reloaded");
    assert_eq!(verified("/after-reload").await.as_deref(), Some("dns"));
    assert_eq!(
        dns.asked("66.249.66.1"),
        asked,
        "no query after the reload: the answer was kept"
    );

    // New resolver settings: a new cache, so the server is asked again.
    proxy.rewrite(&toml("3s", "/private/"));
    proxy.reload().await.expect("reload succeeds");
    assert_eq!(verified("/new-settings").await.as_deref(), Some("dns"));
    assert!(dns.asked("66.249.66.1") > asked, "asked again");
    proxy.stop().await;
}

/// The key-directory cache belongs to the process: after a reload that
/// leaves the signature settings as they were, a robot signed the Web Bot
/// Auth way is verified again without its agent's directory being fetched
/// (the directory's server counts the fetches); a reload that changes them
/// starts an empty cache, and the directory is fetched again.
#[tokio::test]
async fn key_directories_outlive_a_reload() {
    let ca = Ca::new();
    let leaf = ca.leaf(&["127.0.0.1"]);
    let agent = ListServer::start_with(Some(Ca::acceptor(&leaf))).await;
    let key = AgentKey::new(7);
    let directory = "/.well-known/http-message-signatures-directory";
    agent.set(
        directory,
        format!(r#"{{"keys": [{}]}}"#, key.jwk).as_bytes(),
    );
    let upstream = Upstream::start().await;
    let lists = ListServer::start().await; // serves nothing: signatures decide
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.pem).expect("write CA");
    let toml = |timeout: &str, disallow: &str| {
        format!(
            "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[verify]\ndns = false\ndirectory_timeout = \"{timeout}\"\nca_file = {:?}\nsignature_agents = [{:?}]\n{}\n[robots]\ndisallow = [\"{disallow}\"]\n",
            ca_file.display(),
            agent.addr.to_string(),
            ranges_toml(&lists, &[])
        )
    };
    let proxy = Proxy::start_with(&toml("2s", "/admin/"), support::with_admin(&upstream)).await;
    let now = crawlgate::clock::unix_now();
    let signed = Signing {
        key: &key,
        authority: "example.com",
        agent: agent.url(""),
        components: &["@authority", "signature-agent"],
        window: (now - 5, now + 300),
        tag: "web-bot-auth",
    }
    .headers();
    let verified = async |path: &str| {
        let (res, seen) = forwarded_for(
            &proxy,
            &upstream,
            "198.51.100.20",
            "ExampleAgent/1.0",
            path,
            &signed,
        )
        .await;
        assert_eq!(res.status, 200, "{path}");
        told(&seen).1
    };
    assert_eq!(verified("/first").await.as_deref(), Some("signature"));
    let fetched = agent.asked(directory);
    assert!(fetched >= 1, "fetched once");

    // A reload that changes something else: verified from the cache.
    proxy.rewrite(&toml("2s", "/private/"));
    proxy.reload().await.expect("reload succeeds");
    let robots = get(proxy.addr, "example.com", "/robots.txt", Some(GOOGLEBOT)).await;
    assert!(robots.text().contains("Disallow: /private/"), "reloaded");
    assert_eq!(
        verified("/after-reload").await.as_deref(),
        Some("signature")
    );
    assert_eq!(
        agent.asked(directory),
        fetched,
        "no fetch after the reload: the directory was kept"
    );

    // New signature settings: a new cache, so the directory is fetched again.
    proxy.rewrite(&toml("3s", "/private/"));
    proxy.reload().await.expect("reload succeeds");
    assert_eq!(
        verified("/new-settings").await.as_deref(),
        Some("signature")
    );
    assert!(agent.asked(directory) > fetched, "fetched again");
    proxy.stop().await;
}
