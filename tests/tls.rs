//! HTTPS: certificates chosen by SNI over real handshakes, bad certificate
//! folders refused at start-up, HTTP/2 and HTTP/1.1 answered alike, the
//! HTTP → HTTPS redirect in the canonical hop, HSTS, HTTP/1.1 over TLS on
//! both HTTP/1.1 layers, and an HTTPS upstream.

mod support;

use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use crawlgate::config::Overrides;
use crawlgate::tls::{CertStore, TlsError};
use http::Request;
use http_body_util::Full;
use support::tls::{self as t, Ca, Client};
use support::{Proxy, Upstream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BOT: &str = "Googlebot/2.1 (+http://www.google.com/bot.html)";
const BROWSER: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";

/// a.test (flat .crt), b.test (certbot layout), *.wild.test (flat .pem),
/// plus a lego-style issuer file that must be skipped.
fn three_domains(ca: &Ca, dir: &std::path::Path) -> [t::Leaf; 3] {
    let a = ca.leaf(&["a.test"]);
    let b = ca.leaf(&["b.test", "www.b.test"]);
    let w = ca.leaf(&["*.wild.test"]);
    t::write_flat(dir, "a.test.crt", &a);
    t::write_certbot(dir, "b.test", &b);
    t::write_flat(dir, "wild.pem", &w);
    std::fs::write(dir.join("a.test.issuer.crt"), &ca.pem).expect("issuer file");
    [a, b, w]
}

#[tokio::test]
async fn sni_chooses_the_certificate_from_either_layout() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let [a, b, w] = three_domains(&ca, dir.path());
    let upstream = Upstream::start().await;
    let proxy = Proxy::start_tls(
        "[tls]\ndefault_name = \"b.test\"",
        Overrides {
            upstream: Some(upstream.url()),
            certs_dir: Some(dir.path().to_owned()),
            ..Overrides::default()
        },
    )
    .await;
    let addr = proxy.tls_addr.expect("TLS listener");

    // Verified against the CA: the chain is complete and the name matches.
    for (sni, want) in [
        ("a.test", &a),
        ("b.test", &b),
        ("www.b.test", &b),
        ("x.wild.test", &w),
        ("X.Wild.Test", &w),
    ] {
        let config = t::client_config(ca.roots(), &[b"http/1.1"]);
        let stream = t::handshake(addr, config, Some(sni))
            .await
            .unwrap_or_else(|e| panic!("handshake for {sni}: {e}"));
        assert_eq!(t::presented(&stream), want.der, "certificate for {sni}");
    }
    // No SNI, an unknown name, and a name two labels under the wildcard get
    // the default (b.test), which a verifying client then refuses.
    for sni in [None, Some("unknown.test"), Some("y.x.wild.test")] {
        let stream = t::handshake(addr, t::client_config_any(&[]), sni)
            .await
            .expect("handshake");
        assert_eq!(t::presented(&stream), b.der, "default for {sni:?}");
    }
    let refused = t::handshake(
        addr,
        t::client_config(ca.roots(), &[]),
        Some("unknown.test"),
    )
    .await;
    assert!(refused.is_err(), "the default does not name unknown.test");
    proxy.stop().await;
}

#[test]
fn bad_certificate_folders_name_the_file() {
    let ca = Ca::new();
    let now = crawlgate::clock::unix_now();
    let check = |setup: &dyn Fn(&std::path::Path), want_file: &str, want: &str| {
        let dir = tempfile::tempdir().expect("tempdir");
        setup(dir.path());
        // Alone in its folder, a bad pair leaves nothing to serve: an
        // error naming the file, strict or not.
        for strict in [false, true] {
            let err = CertStore::load(dir.path(), None, strict).expect_err(want);
            let text = err.to_string();
            assert!(
                text.contains(want_file) && text.contains(want),
                "{text:?} should name {want_file} and say {want:?}"
            );
            assert!(!text.contains('\n'), "one line: {text:?}");
        }
        // Beside a good one, it is skipped (and named), unless strict.
        t::write_flat(dir.path(), "zz-good.crt", &ca.leaf(&["good.test"]));
        let store = CertStore::load(dir.path(), None, false).expect("the good one serves");
        assert_eq!(store.loaded.len(), 1);
        let skipped: Vec<String> = store.skipped.iter().map(ToString::to_string).collect();
        if !want_file.is_empty() {
            assert!(
                skipped.len() == 1 && skipped[0].contains(want_file) && skipped[0].contains(want),
                "{skipped:?}"
            );
            let err = CertStore::load(dir.path(), None, true).expect_err("strict");
            assert!(err.to_string().contains(want_file), "{err}");
        }
    };

    check(
        &|d| {
            t::write_flat(
                d,
                "old.crt",
                &ca.leaf_valid(&["old.test"], now - 900_000, now - 3600),
            )
        },
        "old.crt",
        "expired",
    );
    check(
        &|d| {
            t::write_flat(
                d,
                "new.crt",
                &ca.leaf_valid(&["new.test"], now + 3600, now + 900_000),
            )
        },
        "new.crt",
        "not valid before",
    );
    check(
        &|d| {
            let one = ca.leaf(&["one.test"]);
            let two = ca.leaf(&["two.test"]);
            std::fs::write(d.join("one.crt"), &one.chain_pem).expect("write");
            std::fs::write(d.join("one.key"), &two.key_pem).expect("write");
        },
        "one.key",
        "does not match",
    );
    check(
        &|d| std::fs::write(d.join("lonely.key"), ca.leaf(&["l.test"]).key_pem).expect("write"),
        "lonely.key",
        "without a certificate",
    );
    check(
        &|d| {
            std::fs::write(d.join("junk.crt"), "not pem at all").expect("write");
            std::fs::write(d.join("junk.key"), ca.leaf(&["j.test"]).key_pem).expect("write");
        },
        "junk.crt",
        "no CERTIFICATE",
    );
    check(
        &|d| {
            let leaf = ca.leaf(&["k.test"]);
            std::fs::write(d.join("k.crt"), &leaf.chain_pem).expect("write");
            std::fs::write(
                d.join("k.key"),
                "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            )
            .expect("write");
        },
        "k.key",
        "private key",
    );
    check(
        &|d| {
            let live = d.join("live/c.test");
            std::fs::create_dir_all(&live).expect("mkdir");
            std::fs::write(live.join("fullchain.pem"), ca.leaf(&["c.test"]).chain_pem)
                .expect("write");
        },
        "privkey.pem",
        "missing",
    );
    check(&|_| {}, "", "no certificate found");

    // A default name that no certificate serves: an error when strict, a
    // warning otherwise (the first certificate answers instead).
    let dir = tempfile::tempdir().expect("tempdir");
    t::write_flat(dir.path(), "a.crt", &ca.leaf(&["a.test"]));
    let err = CertStore::load(dir.path(), Some("z.test"), true).expect_err("no such default");
    assert!(matches!(err, TlsError::NoDefault { .. }), "{err}");
    let store = CertStore::load(dir.path(), Some("z.test"), false).expect("loads");
    assert!(store.default_warning.is_some_and(|w| w.contains("z.test")));
}

/// Issue 10.4: one expired certificate among good ones is skipped with a
/// line naming the file, the reason and its names; the others serve, and
/// a later reload with another bad one and an unrelated edit applies the
/// edit. Only a folder with nothing usable (or `tls.strict`) stops
/// start-up. Start-up and `check-config` list names and expiry dates and
/// warn about a certificate expiring within 14 days.
#[tokio::test]
async fn one_bad_certificate_does_not_take_the_others_down() {
    let ca = Ca::new();
    let upstream = support::Upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs).expect("mkdir");
    let now = crawlgate::clock::unix_now();
    let good = ca.leaf(&["good.test"]);
    t::write_flat(&certs, "good.crt", &good);
    t::write_flat(
        &certs,
        "expired.crt",
        &ca.leaf_valid(&["old.test", "www.old.test"], now - 900_000, now - 60),
    );
    // Expires in 5 days: served, with a warning.
    t::write_flat(
        &certs,
        "soon.crt",
        &ca.leaf_valid(&["soon.test"], now - 3600, now + 5 * 86_400 + 600),
    );
    let (addr, tls_addr) = (support::process::free_addr(), support::process::free_addr());
    let config = dir.path().join("crawlgate.toml");
    let write = |extra: &str| {
        std::fs::write(
            &config,
            format!(
                "listen = \"{addr}\"\nupstream = \"{}\"\n{extra}[tls]\nlisten = \"{tls_addr}\"\ncerts = \"certs\"\n",
                upstream.url()
            ),
        )
        .expect("config");
    };
    write("");

    let out = Command::new(env!("CARGO_BIN_EXE_crawlgate"))
        .arg("check-config")
        .arg(&config)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("with 2 certificates"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("good.crt") && l.contains("good.test") && l.contains("expires 20")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("warning") && l.contains("soon.crt") && l.contains("in 5 days")),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.contains("warning")
            && l.contains("expired.crt")
            && l.contains("expired on")
            && l.contains("old.test www.old.test")),
        "{stdout}"
    );

    let log = tempfile::NamedTempFile::new().expect("log file");
    let proxy = support::process::start_logging(
        &["--config", config.to_str().expect("utf-8")],
        addr,
        std::process::Stdio::from(log.reopen().expect("log")),
        "info",
    );
    support::process::wait_listening(tls_addr);
    let text = std::fs::read_to_string(log.path()).expect("log");
    assert!(
        text.lines()
            .any(|l| l.contains("WARN") && l.contains("expired.crt") && l.contains("old.test")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("good.crt") && l.contains("expires")),
        "{text}"
    );
    let stream = t::handshake(
        tls_addr,
        t::client_config(ca.roots(), &[b"http/1.1"]),
        Some("good.test"),
    )
    .await
    .expect("the good certificate serves");
    assert_eq!(t::presented(&stream), good.der);

    // A reload with another broken pair and an unrelated edit: the edit
    // applies, the broken pair is reported.
    std::fs::write(certs.join("broken.crt"), "not pem").expect("write");
    std::fs::write(certs.join("broken.key"), good.key_pem.clone()).expect("write");
    write("[redirect]\nwww = \"off\"\n");
    let moved = support::get(addr, "www.good.test", "/", Some(support::FIREFOX)).await;
    assert_eq!(moved.status, 301);
    proxy.signal("HUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let res = support::get(addr, "www.good.test", "/", Some(support::FIREFOX)).await;
        if res.status == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the reload did not apply"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = std::fs::read_to_string(log.path()).expect("log");
    assert!(
        text.lines()
            .any(|l| l.contains("WARN") && l.contains("broken.crt") && l.contains("skipped")),
        "{text}"
    );
    assert!(!text.contains("reload failed"), "{text}");
    let stream = t::handshake(
        tls_addr,
        t::client_config(ca.roots(), &[b"http/1.1"]),
        Some("good.test"),
    )
    .await
    .expect("still served after the reload");
    assert_eq!(t::presented(&stream), good.der);
    drop(proxy);

    // tls.strict asks for the old behaviour: any bad pair stops start-up.
    write("");
    let text = std::fs::read_to_string(&config).expect("config") + "strict = true\n";
    std::fs::write(&config, text).expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_crawlgate"))
        .args(["--config", config.to_str().expect("utf-8")])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn the_binary_refuses_to_start_with_a_bad_certificate() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let now = crawlgate::clock::unix_now();
    t::write_flat(
        dir.path(),
        "expired.crt",
        &ca.leaf_valid(&["e.test"], now - 900_000, now - 60),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_crawlgate"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--tls-listen",
            "127.0.0.1:0",
            "--certs",
        ])
        .arg(dir.path())
        .output()
        .expect("run crawlgate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert_eq!(out.status.code(), Some(64), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("expired.crt") && stderr.contains("expired on"),
        "{stderr}"
    );
}

/// A crawlgate with HTTPS in front of a recording upstream, one
/// certificate for `names`.
struct Site {
    ca: Ca,
    upstream: Upstream,
    proxy: Proxy,
    _certs: tempfile::TempDir,
}

impl Site {
    async fn start(toml: &str, names: &[&str]) -> Self {
        Self::start_on(toml, names, None).await
    }

    /// With the HTTP/1.1 layer `layer` (`None`: the suite's).
    async fn start_on(toml: &str, names: &[&str], layer: Option<&str>) -> Self {
        let ca = Ca::new();
        let certs = tempfile::tempdir().expect("tempdir");
        t::write_flat(certs.path(), "site.crt", &ca.leaf(names));
        let upstream = Upstream::start().await;
        let proxy = Proxy::start_tls(
            toml,
            Overrides {
                upstream: Some(upstream.url()),
                certs_dir: Some(certs.path().to_owned()),
                http1: layer.map(str::to_owned),
                ..Overrides::default()
            },
        )
        .await;
        Self {
            ca,
            upstream,
            proxy,
            _certs: certs,
        }
    }
}

fn get(uri: &str, ua: &str) -> Request<Full<Bytes>> {
    Request::get(uri)
        .header("user-agent", ua)
        .body(Full::new(Bytes::new()))
        .expect("request")
}

#[tokio::test]
async fn http2_and_http1_get_the_same_answers() {
    let Site {
        ca,
        upstream,
        proxy,
        ..
    } = Site::start("", &["example.test", "www.example.test"]).await;
    let addr = proxy.tls_addr.expect("TLS listener");
    let port = addr.port();

    let mut answers = Vec::new();
    for (alpn, want_version) in [
        (&b"h2"[..], http::Version::HTTP_2),
        (&b"http/1.1"[..], http::Version::HTTP_11),
    ] {
        let config = t::client_config(ca.roots(), &[alpn]);
        let stream = t::handshake(addr, config, Some("example.test"))
            .await
            .expect("handshake");
        let mut client = Client::connect(stream).await;
        let base = format!("https://example.test:{port}");
        let www = format!("https://www.example.test:{port}");
        let mut seen = Vec::new();
        for req in [
            get(&format!("{base}/page?do=delete"), BOT),
            get(&format!("{base}/page?do=delete"), BROWSER),
            get(&format!("{www}/www/a?b=1"), BROWSER),
            get(&format!("{base}/robots.txt"), BOT),
            Request::get(format!("{base}/hello?x=1"))
                .header("user-agent", BROWSER)
                .header("cookie", "a=1")
                .header("cookie", "b=2")
                .body(Full::new(Bytes::new()))
                .expect("request"),
            Request::post(format!("{base}/upload"))
                .header("user-agent", BROWSER)
                .body(Full::new(Bytes::from(vec![7u8; 100_000])))
                .expect("request"),
        ] {
            let got = client.send(req).await;
            assert_eq!(got.version, want_version);
            seen.push((
                got.status,
                got.header("location").map(str::to_owned),
                got.header("content-type").map(str::to_owned),
                got.body.clone(),
            ));
        }
        answers.push(seen);
    }
    assert_eq!(answers[0], answers[1], "h2 and HTTP/1.1 answered alike");
    let statuses: Vec<u16> = answers[0].iter().map(|a| a.0).collect();
    assert_eq!(statuses, [403, 200, 301, 200, 200, 200]);
    assert_eq!(
        answers[0][2].1.as_deref(),
        Some(format!("https://example.test:{port}/a?b=1").as_str()),
        "the redirect keeps https and the authority's port"
    );
    let robots = String::from_utf8_lossy(&answers[0][3].3);
    assert!(robots.contains("Disallow: /*?do="), "{robots}");

    // What the upstream saw from each protocol: HTTP/1.1 with the client's
    // authority as Host, X-Forwarded-Proto https, and the body intact.
    let seen = upstream.requests();
    let hello: Vec<_> = seen.iter().filter(|r| r.uri == "/hello?x=1").collect();
    assert_eq!(hello.len(), 2);
    for r in hello {
        assert_eq!(
            r.header("host"),
            Some(format!("example.test:{port}").as_str())
        );
        assert_eq!(r.header("x-forwarded-proto"), Some("https"));
        assert_eq!(r.header("x-crawler"), Some("0"));
        assert_eq!(r.all("cookie").join(" | "), "a=1; b=2", "one Cookie field");
    }
    let uploads: Vec<_> = seen.iter().filter(|r| r.uri == "/upload").collect();
    assert_eq!(uploads.len(), 2);
    assert!(uploads.iter().all(|r| r.body_len == 100_000));
    assert!(
        !seen
            .iter()
            .any(|r| r.uri.contains("do=delete") && r.header("x-crawler") == Some("1")),
        "the bot's action URL never reached the site"
    );
    proxy.stop().await;
}

#[tokio::test]
async fn http_goes_to_https_in_one_hop_with_hsts_on_https() {
    let Site {
        ca,
        upstream,
        proxy,
        ..
    } = Site::start(
        "[tls]\nredirect_http = true\nhsts = \"max-age=31536000\"",
        &["example.test"],
    )
    .await;
    let port = proxy.tls_addr.expect("TLS").port();

    let res = support::send_raw(
        proxy.addr,
        b"GET /www/a?b=1 HTTP/1.1\r\nHost: www.example.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(res.status, 301);
    assert_eq!(
        res.header("location"),
        Some(format!("https://example.test:{port}/a?b=1").as_str())
    );
    assert_eq!(res.header("strict-transport-security"), None, "not on http");
    // A POST keeps its method: 308.
    let res = support::send_raw(
        proxy.addr,
        b"POST /form HTTP/1.1\r\nHost: example.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(res.status, 308);
    // ACME HTTP-01 challenges stay on plain HTTP and reach the site.
    let res = support::send_raw(
        proxy.addr,
        b"GET /.well-known/acme-challenge/tok HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(res.status, 200);
    assert!(upstream
        .requests()
        .iter()
        .any(|r| r.uri == "/.well-known/acme-challenge/tok"));

    let config = t::client_config(ca.roots(), &[b"h2"]);
    let stream = t::handshake(proxy.tls_addr.expect("TLS"), config, Some("example.test"))
        .await
        .expect("handshake");
    let mut client = Client::connect(stream).await;
    let base = format!("https://example.test:{port}");
    for (path, status) in [("/page", 200), ("/robots.txt", 200), ("/www/x", 301)] {
        let got = client.send(get(&format!("{base}{path}"), BROWSER)).await;
        assert_eq!(got.status, status, "{path}");
        assert_eq!(
            got.header("strict-transport-security"),
            Some("max-age=31536000"),
            "{path}"
        );
    }
    proxy.stop().await;
}

#[tokio::test]
async fn an_https_upstream_is_verified() {
    let ca = Ca::new();
    let origin_leaf = ca.leaf(&["origin.test"]);
    let origin_tls = Ca::acceptor(&origin_leaf);
    let upstream = Upstream::start_with_tls(Some(origin_tls)).await;
    let ca_dir = tempfile::tempdir().expect("tempdir");
    let ca_file = ca_dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.pem).expect("write CA");
    let url = format!("https://{}", upstream.addr);

    for layer in ["hyper", "native"] {
        // With the CA and the origin's name: forwarded over TLS.
        let toml = format!(
            "[proxy]\nupstream_ca = {:?}\nupstream_sni = \"origin.test\"",
            ca_file.display().to_string()
        );
        let proxy = Proxy::start_with(&toml, on_layer(&url, layer)).await;
        let res = support::send_raw(
            proxy.addr,
            b"GET /over-tls HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert_eq!(res.status, 200, "{layer}: {}", res.text());
        assert_eq!(res.text(), "upstream saw GET /over-tls", "{layer}");
        proxy.stop().await;

        // Without the SNI override the certificate does not name the IP:
        // 502, and nothing reached the origin.
        let toml = format!("[proxy]\nupstream_ca = {:?}", ca_file.display().to_string());
        let proxy = Proxy::start_with(&toml, on_layer(&url, layer)).await;
        let res = support::send_raw(
            proxy.addr,
            b"GET /unverified HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert_eq!(res.status, 502, "{layer}");
        assert!(!upstream.requests().iter().any(|r| r.uri == "/unverified"));
        proxy.stop().await;
    }
}

/// Writes 1 MiB to a tunnel's `client` end while reading it back from the
/// echo behind it (both ways at once, more than a TLS record and a socket
/// buffer): the bytes come back as sent, within 10 s.
async fn echoes_both_ways<S: tokio::io::AsyncRead + tokio::io::AsyncWrite>(client: S, layer: &str) {
    let sent = support::pattern_chunk(0, 1 << 20);
    let (mut from, mut to) = tokio::io::split(client);
    let echoed = tokio::time::timeout(Duration::from_secs(10), async {
        let writing = async {
            to.write_all(&sent).await.expect("write");
            to.flush().await.expect("sent");
        };
        let reading = async {
            let mut echoed = vec![0u8; sent.len()];
            from.read_exact(&mut echoed).await.expect("echo");
            echoed
        };
        tokio::join!(writing, reading).1
    })
    .await
    .unwrap_or_else(|_| panic!("{layer}: echoed within 10 s"));
    assert!(echoed == sent, "{layer}: the bytes came back as sent");
}

/// An `https://` upstream that takes the connection and never finishes
/// the handshake: on both layers the request waits out the response
/// timeout (504), not the connect timeout, which is the TCP connection's.
#[tokio::test]
async fn a_stalled_upstream_handshake_waits_out_the_response_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let ca = Ca::new();
    let (_ca_dir, toml) = trusting(&ca);
    let toml = format!("{toml}\nconnect_timeout = \"200ms\"\nresponse_timeout = \"1s\"");
    for layer in ["hyper", "native"] {
        let proxy = Proxy::start_with(&toml, on_layer(&format!("https://{addr}"), layer)).await;
        let started = std::time::Instant::now();
        let res = support::send_raw(
            proxy.addr,
            b"GET /stalled HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert_eq!(res.status, 504, "{layer}: {}", res.text());
        assert!(started.elapsed() >= Duration::from_millis(900), "{layer}");
        proxy.stop().await;
    }
    held.abort();
}

/// crawlgate's overrides for `upstream` on `layer`.
fn on_layer(upstream: &str, layer: &str) -> Overrides {
    Overrides {
        upstream: Some(upstream.to_owned()),
        http1: Some(layer.to_owned()),
        ..Overrides::default()
    }
}

/// The CA's certificate in a file, for `proxy.upstream_ca`, and the
/// config that trusts it for an upstream named `origin.test`.
fn trusting(ca: &Ca) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ca.pem");
    std::fs::write(&file, &ca.pem).expect("write CA");
    let toml = format!(
        "[proxy]\nupstream_ca = {:?}\nupstream_sni = \"origin.test\"",
        file.display().to_string()
    );
    (dir, toml)
}

/// An `https://` upstream reached on both layers alike, over one kept-alive
/// TLS connection: a GET, a chunked upload, a 3 MB download and another
/// GET from one client connection, each whole; then a WebSocket to an
/// `https://` upstream, 1 MiB echoed both ways at once.
#[tokio::test]
async fn an_https_upstream_is_reached_alike_on_both_layers() {
    let ca = Ca::new();
    let origin = Ca::acceptor(&ca.leaf(&["origin.test"]));
    let upstream = Upstream::start_with_tls(Some(origin.clone())).await;
    let (_ca_dir, toml) = trusting(&ca);
    for layer in ["hyper", "native"] {
        let proxy = Proxy::start_with(
            &toml,
            on_layer(&format!("https://{}", upstream.addr), layer),
        )
        .await;
        let connections = upstream
            .connections
            .load(std::sync::atomic::Ordering::SeqCst);
        let io = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        let mut answers = Answers {
            io,
            buf: Vec::new(),
        };
        let head = |line: &str, more: &str| {
            format!("{line} HTTP/1.1\r\nHost: site.test\r\nUser-Agent: {BROWSER}\r\n{more}\r\n")
        };
        answers
            .io
            .write_all(head("GET /first", "").as_bytes())
            .await
            .expect("GET");
        let first = answers.next().await;
        assert_eq!(first.status, 200, "{layer}");
        assert_eq!(first.text(), "upstream saw GET /first", "{layer}");

        let upload = support::pattern_chunk(0, 100_000);
        let mut request = head("POST /upload", "Transfer-Encoding: chunked\r\n").into_bytes();
        for piece in upload.chunks(30_000) {
            request.extend(format!("{:x}\r\n", piece.len()).into_bytes());
            request.extend_from_slice(piece);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        answers.io.write_all(&request).await.expect("POST");
        let uploaded = answers.next().await;
        assert_eq!(uploaded.status, 200, "{layer}");
        assert_eq!(
            uploaded.text(),
            support::pattern_sha256(100_000),
            "{layer}: the upload whole"
        );

        const SIZE: usize = 3_000_000;
        answers
            .io
            .write_all(head(&format!("GET /download?bytes={SIZE}"), "").as_bytes())
            .await
            .expect("download");
        let download = answers.next().await;
        assert_eq!(download.status, 200, "{layer}");
        assert!(
            download.body == support::pattern_chunk(0, SIZE),
            "{layer}: the download whole"
        );

        answers
            .io
            .write_all(head("GET /last", "").as_bytes())
            .await
            .expect("GET");
        let last = answers.next().await;
        assert_eq!(last.text(), "upstream saw GET /last", "{layer}");
        assert_eq!(
            upstream
                .connections
                .load(std::sync::atomic::Ordering::SeqCst)
                - connections,
            1,
            "{layer}: every request on one TLS connection, kept alive"
        );
        proxy.stop().await;

        let up = support::switching_echo_over(Some(origin.clone())).await;
        let proxy = Proxy::start_with(&toml, on_layer(&format!("https://{up}"), layer)).await;
        let mut client = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        let request = format!(
            "GET /chat HTTP/1.1\r\nHost: site.test\r\nUser-Agent: {BROWSER}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        );
        client.write_all(request.as_bytes()).await.expect("request");
        let got = support::read_switched(&mut client, layer).await;
        assert!(got.starts_with(b"HTTP/1.1 101 "), "{layer}: {got:?}");
        echoes_both_ways(client, layer).await;
        proxy.stop().await;
    }
}

/// Which client reached an `https://` upstream, seen in the bytes it
/// got: crawlgate's own copies the client's field lines as they came
/// (`X-Probe-Case`), hyper's writes names in lower case. And a kept-alive
/// TLS connection the upstream closes (`close_notify`) is not used again:
/// the next request (a POST, which is never sent twice) goes on a new one
/// and is answered.
#[tokio::test]
async fn an_https_upstream_gets_the_native_layers_own_bytes() {
    use std::sync::{Arc, Mutex};
    let ca = Ca::new();
    let origin = Ca::acceptor(&ca.leaf(&["origin.test"]));
    let (_ca_dir, toml) = trusting(&ca);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let heads = Arc::new(Mutex::new(Vec::<(usize, String)>::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            n += 1;
            let (origin, seen) = (origin.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                let Ok(mut tls) = origin.accept(tcp).await else {
                    return;
                };
                while let Some(head) = support::read_head(&mut tls).await {
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let bye = head.starts_with("GET /bye ");
                    seen.lock().expect("lock").push((n, head));
                    let answer: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if tls.write_all(answer).await.is_err() || tls.flush().await.is_err() {
                        return;
                    }
                    if bye {
                        // A close_notify alone, no FIN: the connection
                        // stays open a while.
                        tls.get_mut().1.send_close_notify();
                        let _ = tls.flush().await;
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        return;
                    }
                }
            });
        }
    });
    for layer in ["hyper", "native"] {
        heads.lock().expect("lock").clear();
        let proxy = Proxy::start_with(&toml, on_layer(&format!("https://{addr}"), layer)).await;
        for (method, path) in [("GET", "/probe"), ("GET", "/bye"), ("POST", "/after")] {
            let request = format!(
                "{method} {path} HTTP/1.1\r\nHost: site.test\r\nUser-Agent: {BROWSER}\r\nX-Probe-Case: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let res = support::send_raw(proxy.addr, request.as_bytes()).await;
            assert_eq!(res.status, 200, "{layer} {path}: {}", res.text());
            assert_eq!(res.text(), "ok", "{layer} {path}");
            // The close_notify is in before the next request.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let heads = heads.lock().expect("lock").clone();
        assert_eq!(heads.len(), 3, "{layer}: {heads:?}");
        let native = heads[0].1.contains("\r\nX-Probe-Case: 1\r\n");
        let hyper = heads[0].1.contains("\r\nx-probe-case: 1\r\n");
        assert_eq!(
            (native, hyper),
            (layer == "native", layer == "hyper"),
            "{layer}: {}",
            heads[0].1
        );
        assert_eq!(heads[0].0, heads[1].0, "{layer}: kept alive over TLS");
        assert_ne!(
            heads[1].0, heads[2].0,
            "{layer}: a new connection after the close_notify"
        );
        proxy.stop().await;
    }
}

#[tokio::test]
async fn h2c_prior_knowledge_only_when_enabled() {
    let upstream = Upstream::start().await;
    for (toml, enabled) in [("", false), ("[proxy]\nh2c = true", true)] {
        let proxy = Proxy::start(toml, &upstream.url()).await;
        let tcp = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        let handshake = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await;
        let answered = match handshake {
            Ok((mut send, conn)) => {
                tokio::spawn(conn);
                let req = Request::get(format!("http://example.test/h2c-{enabled}"))
                    .header("user-agent", BROWSER)
                    .body(Full::new(Bytes::new()))
                    .expect("request");
                match send.send_request(req).await {
                    Ok(res) => res.status() == 200,
                    Err(_) => false,
                }
            }
            Err(_) => false,
        };
        assert_eq!(answered, enabled, "h2c with {toml:?}");
        let reached = upstream
            .requests()
            .iter()
            .any(|r| r.uri == format!("/h2c-{enabled}"));
        assert_eq!(reached, enabled);
        proxy.stop().await;
    }
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_but_a_slow_stream_is_not() {
    use http_body_util::BodyExt;
    let Site {
        ca,
        upstream: _upstream,
        proxy,
        ..
    } = Site::start("[proxy]\nhttp2_idle_timeout = \"300ms\"", &["example.test"]).await;
    let addr = proxy.tls_addr.expect("TLS");
    let stream = t::handshake(
        addr,
        t::client_config(ca.roots(), &[b"h2"]),
        Some("example.test"),
    )
    .await
    .expect("handshake");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2");
    let conn = tokio::spawn(conn);

    // A download read slowly for well over the idle timeout keeps the
    // connection open: halfway through (server still sending, seconds
    // past the timeout) the same connection takes another request.
    const SIZE: u64 = 16 * 1024 * 1024;
    let res = send
        .send_request(get(
            &format!("https://example.test:{}/download?bytes={SIZE}", addr.port()),
            BROWSER,
        ))
        .await
        .expect("response");
    assert_eq!(res.status(), 200);
    let mut body = res.into_body();
    let started = std::time::Instant::now();
    let mut total = 0u64;
    let mut checked = false;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.expect("frame").into_data() {
            total += data.len() as u64;
            if total % (512 * 1024) < data.len() as u64 {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            if !checked && total >= SIZE / 2 {
                checked = true;
                assert!(started.elapsed() > std::time::Duration::from_millis(1000));
                let page = send
                    .send_request(get(
                        &format!("https://example.test:{}/mid-stream", addr.port()),
                        BROWSER,
                    ))
                    .await
                    .expect("the connection still takes requests");
                assert_eq!(page.status(), 200);
            }
        }
    }
    assert_eq!(total, SIZE);

    // Then, with nothing open, the server closes the connection.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(5), conn).await;
    assert!(
        closed.is_ok(),
        "idle HTTP/2 connection still open after 5 s"
    );
    assert!(send.is_closed());
    proxy.stop().await;
}

#[tokio::test]
async fn a_silent_or_plain_text_client_on_the_tls_port_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Site {
        ca,
        upstream: _upstream,
        proxy,
        ..
    } = Site::start(
        "[proxy]\nheader_read_timeout = \"300ms\"",
        &["example.test"],
    )
    .await;
    let addr = proxy.tls_addr.expect("TLS");

    // Plain HTTP to the TLS port: no panic, no hang; the connection ends
    // (TLS alert or close), and the port keeps serving.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .expect("write");
    let mut buf = Vec::new();
    let read =
        tokio::time::timeout(std::time::Duration::from_secs(5), tcp.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "plain text on the TLS port was not closed");
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));

    // A client that connects and never starts the handshake is cut after
    // the header-read timeout.
    let started = std::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        silent.read_to_end(&mut Vec::new()),
    )
    .await;
    assert!(read.is_ok(), "a silent client was held open");
    assert!(started.elapsed() >= std::time::Duration::from_millis(250));

    let stream = t::handshake(
        addr,
        t::client_config(ca.roots(), &[b"h2"]),
        Some("example.test"),
    )
    .await
    .expect("the port still serves");
    let got = Client::connect(stream)
        .await
        .send(get(
            &format!("https://example.test:{}/", addr.port()),
            BROWSER,
        ))
        .await;
    assert_eq!(got.status, 200);
    proxy.stop().await;
}

#[test]
fn check_config_loads_the_certificate_folder() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs).expect("mkdir");
    t::write_flat(&certs, "site.crt", &ca.leaf(&["example.test"]));
    let config = dir.path().join("crawlgate.toml");
    std::fs::write(
        &config,
        format!(
            "[tls]\nlisten = \"127.0.0.1:8443\"\ncerts = {:?}\n",
            certs.display().to_string()
        ),
    )
    .expect("config");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_crawlgate"))
            .arg("check-config")
            .arg(&config)
            .output()
            .expect("run crawlgate")
    };
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("tls 127.0.0.1:8443 with 1 certificate,"),
        "{stdout}"
    );

    // A key that does not belong to the certificate: exit 64, the file named.
    std::fs::write(certs.join("site.key"), ca.leaf(&["other.test"]).key_pem).expect("key");
    let out = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("site.key") && stderr.contains("does not match"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// Reads answers off one HTTP/1.1 connection: each framed by its
/// Content-Length or chunked (trailers none), what follows kept for the
/// next.
struct Answers<S> {
    io: S,
    buf: Vec<u8>,
}

impl Answers<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    /// An HTTP/1.1 connection over TLS to `addr` as `example.test`,
    /// trusting `ca`.
    async fn https(ca: &Ca, addr: std::net::SocketAddr) -> Self {
        let config = t::client_config(ca.roots(), &[b"http/1.1"]);
        let io = t::handshake(addr, config, Some("example.test"))
            .await
            .expect("handshake");
        Self {
            io,
            buf: Vec::new(),
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> Answers<S> {
    async fn more(&mut self) -> bool {
        let mut piece = [0u8; 16 << 10];
        match self.io.read(&mut piece).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&piece[..n]);
                true
            }
        }
    }

    /// The next answer, within 10 s.
    async fn next(&mut self) -> support::Raw {
        tokio::time::timeout(Duration::from_secs(10), self.read_next())
            .await
            .expect("an answer within 10 s")
    }

    /// The head up to its blank line, parsed, and its body.
    async fn read_next(&mut self) -> support::Raw {
        let end = loop {
            if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            assert!(self.more().await, "closed in a head: {:?}", self.text());
        };
        let head: Vec<u8> = self.buf.drain(..end).collect();
        let raw = support::parse_raw(&head);
        let mut body = Vec::new();
        if let Some(len) = raw.header("content-length") {
            let len: usize = len.parse().expect("length");
            while self.buf.len() < len {
                assert!(self.more().await, "closed in a body");
            }
            body.extend(self.buf.drain(..len));
        } else if raw.header("transfer-encoding") == Some("chunked") {
            loop {
                let line = loop {
                    if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        break at;
                    }
                    assert!(self.more().await, "closed in a chunk size");
                };
                let size = std::str::from_utf8(&self.buf[..line]).expect("size");
                let size = usize::from_str_radix(size, 16).expect("hex size");
                while self.buf.len() < line + 2 + size + 2 {
                    assert!(self.more().await, "closed in a chunk");
                }
                self.buf.drain(..line + 2);
                body.extend(self.buf.drain(..size));
                self.buf.drain(..2);
                if size == 0 {
                    break;
                }
            }
        }
        support::Raw { body, ..raw }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf).into_owned()
    }
}

/// HTTP/1.1 over TLS on each layer (ALPN `http/1.1`): requests written
/// together on one connection (a chunked upload among them) answered in
/// order, the decision made on each, a chunked download relayed whole,
/// HSTS added once, where the upstream sent none, and the upstream's own
/// kept; the layer that served is the one asked for (a request line
/// naming HTTP/2.0 is 505 on crawlgate's own, 400 on hyper's).
#[tokio::test]
async fn http1_over_tls_is_served_alike_on_both_layers() {
    for layer in ["hyper", "native"] {
        let Site {
            ca,
            upstream,
            proxy,
            ..
        } = Site::start_on(
            "[tls]\nhsts = \"max-age=31536000\"",
            &["example.test"],
            Some(layer),
        )
        .await;
        let addr = proxy.tls_addr.expect("TLS listener");
        let mut answers = Answers::https(&ca, addr).await;
        let upload = support::pattern_chunk(0, 100_000);
        let mut requests = Vec::new();
        let head = |line: &str, more: &str| {
            format!("{line} HTTP/1.1\r\nHost: example.test\r\nUser-Agent: {BROWSER}\r\n{more}\r\n")
        };
        requests.extend(head("GET /hello?x=1", "").into_bytes());
        requests.extend(head("POST /upload", "Transfer-Encoding: chunked\r\n").into_bytes());
        for piece in upload.chunks(30_000) {
            requests.extend(format!("{:x}\r\n", piece.len()).into_bytes());
            requests.extend_from_slice(piece);
            requests.extend_from_slice(b"\r\n");
        }
        requests.extend_from_slice(b"0\r\n\r\n");
        requests.extend(
            format!(
                "GET /page?do=delete HTTP/1.1\r\nHost: example.test\r\nUser-Agent: {BOT}\r\n\r\n"
            )
            .into_bytes(),
        );
        requests.extend(head("GET /hsts", "").into_bytes());
        answers.io.write_all(&requests).await.expect("requests");
        answers.io.flush().await.expect("sent");

        let hello = answers.next().await;
        assert_eq!(hello.status, 200, "{layer}");
        assert_eq!(hello.text(), "upstream saw GET /hello?x=1", "{layer}");
        assert_eq!(
            hello.header("strict-transport-security"),
            Some("max-age=31536000"),
            "{layer}: ours where the upstream sent none"
        );
        let uploaded = answers.next().await;
        assert_eq!(uploaded.status, 200, "{layer}");
        let sha = upstream
            .last("/upload")
            .expect("upload upstream")
            .body_sha256;
        assert_eq!(uploaded.text(), sha, "{layer}");
        let refused = answers.next().await;
        assert_eq!(refused.status, 403, "{layer}: the bot's action link");
        let hsts = answers.next().await;
        assert_eq!(hsts.status, 200, "{layer}");
        let policies: Vec<_> = hsts
            .head
            .lines()
            .filter(|l| {
                l.to_ascii_lowercase()
                    .starts_with("strict-transport-security:")
            })
            .collect();
        assert_eq!(
            policies,
            ["strict-transport-security: max-age=60"],
            "{layer}: the upstream's own, once"
        );

        // A download larger than any buffer, chunked by the upstream.
        let size = 3_000_000;
        answers
            .io
            .write_all(head(&format!("GET /download?bytes={size}"), "").as_bytes())
            .await
            .expect("download");
        answers.io.flush().await.expect("sent");
        let download = answers.next().await;
        assert_eq!(download.status, 200, "{layer}");
        assert_eq!(download.body.len(), size, "{layer}");
        assert!(
            download.body == support::pattern_chunk(0, size),
            "{layer}: the bytes"
        );

        // Which layer answered.
        answers
            .io
            .write_all(b"GET / HTTP/2.0\r\nHost: example.test\r\n\r\n")
            .await
            .expect("probe");
        answers.io.flush().await.expect("sent");
        let probe = answers.next().await;
        let want = if layer == "native" { 505 } else { 400 };
        assert_eq!(probe.status, want, "{layer}");
        let more = tokio::time::timeout(Duration::from_secs(10), answers.more()).await;
        assert!(!more.expect("closed in time"), "{layer}: closed");

        // A head the service refuses (two Hosts): 400, closed, and over
        // TLS with the HSTS policy, on both layers.
        let mut refused = Answers::https(&ca, addr).await;
        refused
            .io
            .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\nHost: other.test\r\n\r\n")
            .await
            .expect("two hosts");
        refused.io.flush().await.expect("sent");
        let two_hosts = refused.next().await;
        assert_eq!(two_hosts.status, 400, "{layer}");
        assert_eq!(
            two_hosts.header("strict-transport-security"),
            Some("max-age=31536000"),
            "{layer}: {}",
            two_hosts.head
        );

        let seen = upstream.requests();
        let uploads: Vec<_> = seen.iter().filter(|r| r.uri == "/upload").collect();
        assert_eq!(uploads.len(), 1, "{layer}");
        assert_eq!(uploads[0].body_len, 100_000, "{layer}");
        assert_eq!(
            uploads[0].header("x-forwarded-proto"),
            Some("https"),
            "{layer}"
        );
        assert!(
            !seen.iter().any(|r| r.uri.contains("do=delete")),
            "{layer}: the bot's action URL never reached the site"
        );
        proxy.stop().await;
    }
}

/// A WebSocket over HTTPS on each layer: the upstream's `101` and the
/// bytes it sent with it reach the client through the TLS session, then
/// the tunnel carries both ways (with `native`, the session is
/// crawlgate's own driver of rustls, handed to the tunnel).
#[tokio::test]
async fn a_websocket_over_tls_is_tunnelled_on_both_layers() {
    for layer in ["hyper", "native"] {
        let up = support::switching_echo().await;
        let ca = Ca::new();
        let certs = tempfile::tempdir().expect("tempdir");
        t::write_flat(certs.path(), "site.crt", &ca.leaf(&["example.test"]));
        let proxy = Proxy::start_tls(
            "",
            Overrides {
                upstream: Some(format!("http://{up}")),
                certs_dir: Some(certs.path().to_owned()),
                http1: Some(layer.to_owned()),
                ..Overrides::default()
            },
        )
        .await;
        let config = t::client_config(ca.roots(), &[b"http/1.1"]);
        let mut client = t::handshake(proxy.tls_addr.expect("TLS"), config, Some("example.test"))
            .await
            .expect("handshake");
        let request = format!(
            "GET /chat HTTP/1.1\r\nHost: example.test\r\nUser-Agent: {BROWSER}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        );
        client.write_all(request.as_bytes()).await.expect("request");
        client.flush().await.expect("sent");
        let got = support::read_switched(&mut client, layer).await;
        assert!(got.starts_with(b"HTTP/1.1 101 "), "{layer}: {got:?}");
        assert!(got.ends_with(b"\r\n\r\nfirst"), "{layer}: {got:?}");
        echoes_both_ways(client, layer).await;
        // Which layer served (a request line naming HTTP/2.0 is 505 on
        // crawlgate's own, 400 on hyper's).
        let config = t::client_config(ca.roots(), &[b"http/1.1"]);
        let mut probe = t::handshake(proxy.tls_addr.expect("TLS"), config, Some("example.test"))
            .await
            .expect("handshake");
        probe
            .write_all(b"GET / HTTP/2.0\r\nHost: example.test\r\n\r\n")
            .await
            .expect("probe");
        probe.flush().await.expect("sent");
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), probe.read_to_end(&mut got)).await;
        let want = if layer == "native" { 505 } else { 400 };
        assert_eq!(support::parse_raw(&got).status, want, "{layer}");
        proxy.stop().await;
    }
}

/// With h2c on, the plain port serves HTTP/2 with prior knowledge and
/// HTTP/1.1 side by side on each HTTP/1.1 layer, telling them apart by
/// the first bytes even when they come one or two at a time: a preface
/// sent in pieces is HTTP/2 (the server's SETTINGS come back), a `P…`
/// that goes on as `POST` is HTTP/1.1. Which layer served the HTTP/1.1
/// is the one asked for (a request line naming HTTP/2.0 is 505 on
/// crawlgate's own, 400 on hyper's).
#[tokio::test]
async fn h2c_and_http1_share_the_plain_port_on_both_layers() {
    let upstream = Upstream::start().await;
    for layer in ["hyper", "native"] {
        let overrides = Overrides {
            upstream: Some(upstream.url()),
            http1: Some(layer.to_owned()),
            ..Overrides::default()
        };
        let proxy = Proxy::start_with("[proxy]\nh2c = true", overrides).await;

        // HTTP/2 with prior knowledge, by hyper's client.
        let tcp = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        let (mut send, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tcp),
        )
        .await
        .expect("h2 handshake");
        tokio::spawn(conn);
        for n in 0..2 {
            let res = send
                .send_request(get(
                    &format!("http://example.test/h2c-{layer}-{n}"),
                    BROWSER,
                ))
                .await
                .expect("h2 answer");
            assert_eq!(res.status(), 200, "{layer}");
            assert_eq!(res.version(), http::Version::HTTP_2, "{layer}");
        }

        // The preface in pieces, then an empty SETTINGS frame.
        let mut tcp = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        tcp.write_all(b"PR").await.expect("write");
        tokio::time::sleep(Duration::from_millis(50)).await;
        tcp.write_all(b"I * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .expect("write");
        let mut frame = [0u8; 9];
        tokio::time::timeout(Duration::from_secs(5), tcp.read_exact(&mut frame))
            .await
            .expect("in time")
            .expect("the server's first frame");
        assert_eq!(frame[3], 0x04, "{layer}: a SETTINGS frame, got {frame:?}");
        // Closed, so that the drain below does not wait on them.
        drop((tcp, send));

        // HTTP/1.1 whose first byte could have begun the preface.
        let mut tcp = tokio::net::TcpStream::connect(proxy.addr)
            .await
            .expect("connect");
        tcp.write_all(b"P").await.expect("write");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let rest = format!(
            "OST /h1-{layer} HTTP/1.1\r\nHost: example.test\r\nUser-Agent: {BROWSER}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
        );
        tcp.write_all(rest.as_bytes()).await.expect("write");
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut got))
            .await
            .expect("in time")
            .expect("read");
        let res = support::parse_raw(&got);
        assert_eq!(res.status, 200, "{layer}");
        assert_eq!(
            res.text(),
            format!("upstream saw POST /h1-{layer}"),
            "{layer}"
        );

        let probe = support::send_raw(
            proxy.addr,
            b"GET / HTTP/2.0\r\nHost: example.test\r\nConnection: close\r\n\r\n",
        )
        .await;
        let want = if layer == "native" { 505 } else { 400 };
        assert_eq!(probe.status, want, "{layer}");
        proxy.stop().await;
    }
    let seen = upstream.requests();
    for layer in ["hyper", "native"] {
        for n in 0..2 {
            let uri = format!("/h2c-{layer}-{n}");
            assert!(seen.iter().any(|r| r.uri == uri), "{uri} reached the site");
        }
        let h1 = upstream.last(&format!("/h1-{layer}")).expect("the POST");
        assert_eq!(h1.body_len, 2, "{layer}");
    }
}

/// A kept-alive HTTPS connection that waits longer than the header-read
/// timeout is closed with a `close_notify` on crawlgate's own layer: its
/// client reads a clean end, not a cut connection.
#[tokio::test]
async fn an_idle_https_connection_is_closed_cleanly() {
    let Site { ca, proxy, .. } = Site::start_on(
        "[proxy]\nheader_read_timeout = \"1s\"",
        &["example.test"],
        Some("native"),
    )
    .await;
    let mut answers = Answers::https(&ca, proxy.tls_addr.expect("TLS")).await;
    let request = format!("GET /a HTTP/1.1\r\nHost: example.test\r\nUser-Agent: {BROWSER}\r\n\r\n");
    answers
        .io
        .write_all(request.as_bytes())
        .await
        .expect("request");
    answers.io.flush().await.expect("sent");
    assert_eq!(answers.next().await.status, 200);
    let mut rest = Vec::new();
    let end = tokio::time::timeout(Duration::from_secs(5), answers.io.read_to_end(&mut rest))
        .await
        .expect("closed within 5 s");
    assert!(end.is_ok() && rest.is_empty(), "{end:?} {rest:?}");
    proxy.stop().await;
}
