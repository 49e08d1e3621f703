//! Verified crawlers over real sockets, offline: the operators' range lists
//! served by a local HTTP server (and a file), a DNS server on loopback
//! that the test controls, a recording upstream, and crawlgate between.
//! Client addresses other than 127.0.0.1 come through a trusted proxy's
//! X-Forwarded-For, as behind a load balancer.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use crawlgate::config::Overrides;
use crawlgate::verify::Operators;
use support::dns::{DnsServer, Zone};
use support::here::Here;
use support::lists::{ranges_toml, ListServer};
use support::signing::{AgentKey, Signing};
use support::verdict::{told, verdict};
use support::{forwarded_for, lines, metric, scrape, Proxy, Upstream, FIREFOX, GOOGLEBOT};
use tokio::net::UdpSocket;
use tokio::time::{sleep, Instant};

const GPTBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const CHATGPT_USER: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot";
const YANDEX: &str = "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)";
const CURL: &str = "curl/8.5.0";

const GOOGLE_LIST: &[u8] = br#"{"creationTime": "2026-12-01T10:00:00.000000", "syncToken": "7",
  "prefixes": [{"ipv4Prefix": "66.249.66.0/24"}, {"ipv6Prefix": "2001:4860:4801:10::/64"}]}"#;
const OPENAI_LIST: &[u8] = br#"{"creationTime": "2026-12-01", "prefixes": [{"ipv4Prefix": "20.171.207.0/24", "extra": true}]}"#;

/// (client, User-Agent, what the upstream is told: class, verified).
type Case<'a> = (&'a str, &'a str, (Option<&'a str>, Option<&'a str>));

fn pair(class: Option<&str>, verified: Option<&str>) -> (Option<String>, Option<String>) {
    (class.map(str::to_owned), verified.map(str::to_owned))
}

/// `crawlgate_crawler_verifications_total` of `operator` and `result`.
fn verifications(m: &prometheus_parse::Scrape, operator: &str, result: &str) -> f64 {
    metric(
        m,
        "crawlgate_crawler_verifications_total",
        &[("operator", operator), ("result", result)],
    )
}

/// Polls until `check` holds, for at most `limit`.
async fn until(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn published_ranges_verify_spoof_and_survive_bad_refreshes_and_restarts() {
    let upstream = Upstream::start().await;
    let lists = ListServer::start().await;
    lists.set("/google.common-crawlers.json", GOOGLE_LIST);
    let dir = tempfile::tempdir().expect("tempdir");
    let openai = dir.path().join("gptbot.json");
    std::fs::write(&openai, OPENAI_LIST).expect("write");
    let state = dir.path().join("state");
    let toml = |spoofed: &str| {
        format!(
            "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[verify]\nrefresh = \"1s\"\ndns = false\nspoofed = {spoofed:?}\nstate_dir = {:?}\n{}",
            state.display(),
            ranges_toml(&lists, &[("openai.gptbot", &openai)])
        )
    };
    let proxy = Proxy::start_with(&toml("log"), support::with_admin(&upstream)).await;
    let admin = proxy.admin_addr.expect("admin");

    // The list arrives in the background, from the local server.
    let mut n = 0;
    until(
        Duration::from_secs(10),
        "google.common-crawlers loads",
        async || {
            n += 1;
            let path = format!("/wait{n}");
            verdict(&proxy, &upstream, "66.249.66.1", GOOGLEBOT, &path)
                .await
                .as_deref()
                == Some("ip")
        },
    )
    .await;

    // (client, User-Agent, what the upstream is told: class, verified)
    let cases: &[Case<'_>] = &[
        ("66.249.66.1", GOOGLEBOT, (Some("search"), Some("ip"))),
        (
            "2001:4860:4801:10::5",
            GOOGLEBOT,
            (Some("search"), Some("ip")),
        ),
        // Outside the loaded list, no DNS: the operator's own list says no.
        ("203.0.113.9", GOOGLEBOT, (Some("unknown"), Some("spoofed"))),
        // From a file source.
        ("20.171.207.3", GPTBOT, (Some("ai"), Some("ip"))),
        ("66.249.66.1", GPTBOT, (Some("unknown"), Some("spoofed"))),
        // Its list answers 404: never loaded, so nothing is certain.
        (
            "203.0.113.9",
            CHATGPT_USER,
            (Some("ai"), Some("unverified")),
        ),
        // A robot that claims no operator: a class, no verdict.
        ("66.249.66.1", CURL, (Some("library"), None)),
        // A browser: no lookup, no robot headers, from anywhere.
        ("66.249.66.1", FIREFOX, (None, None)),
    ];
    for (i, &(client, ua, (class, verified))) in cases.iter().enumerate() {
        // The client's own copies of the headers never reach the site.
        let forged = "X-Crawler-Verified: ip\r\nX-Crawler-Class: search\r\n";
        let (res, seen) =
            forwarded_for(&proxy, &upstream, client, ua, &format!("/case{i}"), forged).await;
        assert_eq!(res.status, 200, "{client} {ua}");
        assert_eq!(told(&seen), pair(class, verified), "{client} {ua}");
    }
    let log_path = proxy.config_path.with_file_name("access.log");
    until(
        Duration::from_secs(5),
        "the access log carries the verdict",
        async || {
            lines(&log_path)
                .iter()
                .any(|l| l.contains("/case2 ") && l.ends_with("verified=spoofed"))
        },
    )
    .await;
    let m = scrape(admin).await;
    let count = |operator: &str, result: &str| verifications(&m, operator, result);
    assert!(count("google", "ip") >= 3.0);
    assert_eq!(count("google", "spoofed"), 1.0);
    assert_eq!(count("openai", "spoofed"), 1.0);
    assert_eq!(count("openai", "unverified"), 1.0);
    let list = [("list", "google.common-crawlers")];
    assert_eq!(metric(&m, "crawlgate_verify_list_prefixes", &list), 2.0);
    assert!(metric(&m, "crawlgate_verify_list_age_seconds", &list) <= 5.0);
    assert!(
        metric(
            &m,
            "crawlgate_verify_list_fetches_total",
            &[("list", "openai.chatgpt-user"), ("result", "error")]
        ) >= 1.0
    );

    // The last good copy is on disk, whole.
    let saved = state.join("google.common-crawlers.json");
    assert_eq!(std::fs::read(&saved).expect("state copy"), GOOGLE_LIST);

    // A malformed and then an empty list are refused; the good copy stays.
    lists.set("/google.common-crawlers.json", b"<html>maintenance</html>");
    let malformed = [("list", "google.common-crawlers"), ("result", "malformed")];
    until(
        Duration::from_secs(10),
        "a malformed refresh is refused",
        async || {
            metric(
                &scrape(admin).await,
                "crawlgate_verify_list_fetches_total",
                &malformed,
            ) >= 1.0
        },
    )
    .await;
    lists.set(
        "/google.common-crawlers.json",
        br#"{"creationTime": "x", "prefixes": []}"#,
    );
    until(
        Duration::from_secs(10),
        "an empty refresh is refused",
        async || {
            metric(
                &scrape(admin).await,
                "crawlgate_verify_list_fetches_total",
                &malformed,
            ) >= 2.0
        },
    )
    .await;
    assert_eq!(
        verdict(&proxy, &upstream, "66.249.66.1", GOOGLEBOT, "/after-bad")
            .await
            .as_deref(),
        Some("ip"),
        "the good copy is kept"
    );
    assert_eq!(std::fs::read(&saved).expect("state copy"), GOOGLE_LIST);

    // A reload to spoofed = "block", with GPTBot's list file changed: the
    // file is read again, and a spoofed claim is 403 on every URL,
    // robots.txt too, while a verified crawler is untouched.
    std::fs::write(
        &openai,
        br#"{"prefixes": [{"ipv4Prefix": "198.51.100.0/24"}]}"#,
    )
    .expect("rewrite");
    proxy.rewrite(&toml("block"));
    proxy.reload().await.expect("reload");
    assert_eq!(
        verdict(&proxy, &upstream, "198.51.100.4", GPTBOT, "/reread")
            .await
            .as_deref(),
        Some("ip"),
        "the file was read again"
    );
    for path in ["/blocked", "/robots.txt"] {
        let (res, seen) =
            forwarded_for(&proxy, &upstream, "203.0.113.9", GOOGLEBOT, path, "").await;
        assert_eq!(res.status, 403, "{path}");
        assert!(
            res.text().contains("could not be verified"),
            "{}",
            res.text()
        );
        assert!(seen.is_none(), "never reaches the site");
    }
    let (res, _) = forwarded_for(&proxy, &upstream, "66.249.66.1", GOOGLEBOT, "/ok", "").await;
    assert_eq!(res.status, 200, "the reload kept the loaded list");
    proxy.stop().await;

    // A restart starts from the saved copy, even with the source gone.
    lists.files.lock().expect("files").clear();
    let proxy = Proxy::start_with(&toml("log"), support::with_admin(&upstream)).await;
    assert_eq!(
        verdict(&proxy, &upstream, "66.249.66.1", GOOGLEBOT, "/restarted")
            .await
            .as_deref(),
        Some("ip"),
        "verified from the saved copy at once"
    );
    proxy.stop().await;
}

#[tokio::test(start_paused = true)]
async fn reverse_then_forward_dns_verifies_spoofs_and_never_waits_past_the_timeout() {
    let upstream = Upstream::start().await;
    let lists = ListServer::start().await; // serves nothing: DNS decides
    let mut zone = Zone::default();
    let mut host = |ip: &str, ptr: &str, forward: &[&str]| {
        let ip: IpAddr = ip.parse().expect("ip");
        zone.ptr.insert(ip, ptr.to_owned());
        if !forward.is_empty() {
            zone.addrs.insert(
                ptr.to_ascii_lowercase(),
                forward.iter().map(|a| a.parse().expect("ip")).collect(),
            );
        }
    };
    host(
        "66.249.66.1",
        "crawl-66-249-66-1.googlebot.com",
        &["66.249.66.1"],
    );
    host(
        "2001:4860:4801:10::5",
        "crawl-v6.googlebot.com",
        &["2001:4860:4801:10::5"],
    );
    // A forged PTR: the name is Google's, its forward lookup is not this.
    host(
        "198.51.100.7",
        "crawl-198-51-100-7.googlebot.com",
        &["66.249.66.99"],
    );
    // A PTR outside Google's domains.
    host(
        "198.51.100.8",
        "crawl.googlebot.com.evil.example",
        &["198.51.100.8"],
    );
    // Answers after 1.5 s: past the 200 ms a request waits.
    host(
        "198.51.100.10",
        "crawl-198-51-100-10.googlebot.com",
        &["198.51.100.10"],
    );
    zone.slow.insert(
        "198.51.100.10".parse().expect("ip"),
        Duration::from_millis(1500),
    );
    host(
        "5.255.253.1",
        "5-255-253-1.spider.yandex.ru",
        &["5.255.253.1"],
    );
    let dns = DnsServer::start(zone).await;

    let toml = format!(
        "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[verify]\ndns = true\nresolver = \"{}\"\ndns_timeout = \"200ms\"\n{}",
        dns.addr,
        ranges_toml(&lists, &[])
    );
    let proxy = Here::start_with(&toml, support::with_admin(&upstream)).await;
    let cases: &[Case<'_>] = &[
        ("66.249.66.1", GOOGLEBOT, (Some("search"), Some("dns"))),
        (
            "2001:4860:4801:10::5",
            GOOGLEBOT,
            (Some("search"), Some("dns")),
        ),
        (
            "198.51.100.7",
            GOOGLEBOT,
            (Some("unknown"), Some("spoofed")),
        ),
        (
            "198.51.100.8",
            GOOGLEBOT,
            (Some("unknown"), Some("spoofed")),
        ),
        // No reverse name at all, for an operator that gives every
        // crawler one.
        (
            "198.51.100.9",
            GOOGLEBOT,
            (Some("unknown"), Some("spoofed")),
        ),
        ("5.255.253.1", YANDEX, (Some("search"), Some("dns"))),
        // OpenAI documents no DNS and its lists are not loaded.
        ("198.51.100.9", GPTBOT, (Some("ai"), Some("unverified"))),
    ];
    for (i, &(client, ua, (class, verified))) in cases.iter().enumerate() {
        let (res, seen) =
            forwarded_for(&proxy, &upstream, client, ua, &format!("/dns{i}"), "").await;
        assert_eq!(res.status, 200, "{client} {ua}");
        assert_eq!(told(&seen), pair(class, verified), "{client} {ua}");
    }

    // Cached per address: a second request asks the server nothing.
    let asked = dns.asked("66.249.66.1");
    assert_eq!(
        verdict(&proxy, &upstream, "66.249.66.1", GOOGLEBOT, "/cached")
            .await
            .as_deref(),
        Some("dns")
    );
    assert_eq!(dns.asked("66.249.66.1"), asked, "answered from the cache");

    // A slow answer: the request goes on unverified after the timeout
    // (measured against a request that needs no DNS, side by side)...
    let started = Instant::now();
    let _ = forwarded_for(&proxy, &upstream, "66.249.66.1", GOOGLEBOT, "/baseline", "").await;
    let baseline = started.elapsed();
    let started = Instant::now();
    let (res, seen) =
        forwarded_for(&proxy, &upstream, "198.51.100.10", GOOGLEBOT, "/slow", "").await;
    let waited = started.elapsed();
    assert_eq!(res.status, 200);
    assert_eq!(told(&seen).1.as_deref(), Some("unverified"));
    // On the paused clock, exactly: the bound, and no more.
    assert!(
        waited < baseline + Duration::from_millis(200 + 5),
        "a DNS timeout delays a request by at most its bound: {waited:?} vs {baseline:?}"
    );
    assert!(
        waited >= Duration::from_millis(200),
        "it did wait for DNS: {waited:?}"
    );

    // ...and the lookup, finished in the background once the answer
    // comes (1.5 s after the query), settles the next one a moment later.
    // (The resolver may resend its query while the server is silent: that
    // is UDP, not a second lookup.)
    sleep(Duration::from_millis(1500 + 1) - waited).await;
    let asked = dns.asked("198.51.100.10");
    assert_eq!(
        verdict(&proxy, &upstream, "198.51.100.10", GOOGLEBOT, "/slow-again")
            .await
            .as_deref(),
        Some("dns")
    );
    assert_eq!(
        dns.asked("198.51.100.10"),
        asked,
        "the second request asks nothing"
    );

    let m = scrape(proxy.admin_addr.expect("admin")).await;
    let google = |result: &str| verifications(&m, "google", result);
    assert_eq!(google("spoofed"), 3.0);
    assert_eq!(google("unverified"), 1.0);
    assert!(google("dns") >= 4.0);
    proxy.stop().await;
}

/// Humans never pay: with a resolver that never answers, a browser's
/// request does no lookup at all and a robot's waits only the bound.
#[tokio::test(start_paused = true)]
async fn browsers_never_wait_for_verification() {
    let upstream = Upstream::start().await;
    let lists = ListServer::start().await;
    // A UDP socket that reads and never answers.
    let silent = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let silent_addr = silent.local_addr().expect("addr");
    let toml = format!(
        "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[verify]\nresolver = \"{silent_addr}\"\ndns_timeout = \"300ms\"\n{}",
        ranges_toml(&lists, &[])
    );
    let proxy = Here::start_with(&toml, support::with_admin(&upstream)).await;
    let started = Instant::now();
    for i in 0..5 {
        let (res, _) = forwarded_for(
            &proxy,
            &upstream,
            &format!("198.51.100.{i}"),
            FIREFOX,
            &format!("/h{i}"),
            "",
        )
        .await;
        assert_eq!(res.status, 200);
    }
    // On the paused clock, any wait for DNS would show whole.
    let humans = started.elapsed();
    assert!(
        humans < Duration::from_millis(5),
        "five browser requests took {humans:?}"
    );
    let mut buf = [0u8; 512];
    let asked = tokio::time::timeout(Duration::from_millis(50), silent.recv_from(&mut buf)).await;
    assert!(asked.is_err(), "a browser caused a DNS query");
    let started = Instant::now();
    let (res, seen) =
        forwarded_for(&proxy, &upstream, "198.51.100.77", GOOGLEBOT, "/robot", "").await;
    assert_eq!(res.status, 200);
    assert_eq!(told(&seen).1.as_deref(), Some("unverified"));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_millis(300 + 5),
        "{waited:?}"
    );
    proxy.stop().await;
}

/// The AI policy, stated once: robots.txt says it (Content-Signal, one
/// group per refused kind), and with `enforce` a claim to a training
/// crawler gets 403 everywhere but robots.txt in every verification state
/// (verified, its list not loaded, spoofed: the refusal is of the purpose
/// the User-Agent states), while a spoofed one is still counted as spoofed;
/// user-triggered fetchers, allowed, and search engines pass.
#[tokio::test]
async fn the_ai_policy_is_written_to_robots_txt_and_enforced() {
    let upstream = Upstream::start().await;
    let lists = ListServer::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let openai = dir.path().join("gptbot.json");
    std::fs::write(&openai, OPENAI_LIST).expect("write");
    let toml = format!(
        "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[ai]\ntraining = \"disallow\"\nuser_fetch = \"allow\"\nenforce = true\n[verify]\ndns = false\n{}",
        ranges_toml(&lists, &[("openai.gptbot", &openai)])
    );
    let proxy = Proxy::start_with(&toml, support::with_admin(&upstream)).await;

    let (robots, _) =
        forwarded_for(&proxy, &upstream, "20.171.207.3", GPTBOT, "/robots.txt", "").await;
    assert_eq!(robots.status, 200, "robots.txt stays readable");
    let body = robots.text();
    assert!(
        body.contains("Content-Signal: search=yes, ai-input=yes, ai-train=no\n"),
        "{body}"
    );
    for group in [
        "User-agent: GPTBot\n",
        "User-agent: CCBot\n",
        "User-agent: Google-Extended\n",
    ] {
        assert!(body.contains(group), "{group}: {body}");
    }
    assert!(!body.contains("User-agent: ChatGPT-User"), "{body}");

    const CLAUDEBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
    // (client, User-Agent, status, verified header upstream when forwarded)
    let cases: &[(&str, &str, u16, Option<&str>)] = &[
        ("20.171.207.3", GPTBOT, 403, None),
        // Anthropic's list answers 404 here: unverified, refused all the
        // same (issue 25: the state that surprised an operator).
        ("198.51.100.4", CLAUDEBOT, 403, None),
        // Outside OpenAI's list: not GPTBot, but it asked to be treated
        // as GPTBot.
        ("198.51.100.4", GPTBOT, 403, None),
        ("198.51.100.4", CHATGPT_USER, 200, Some("unverified")),
        ("198.51.100.4", GOOGLEBOT, 200, Some("unverified")),
        ("198.51.100.4", FIREFOX, 200, None),
    ];
    for (i, &(client, ua, status, verified)) in cases.iter().enumerate() {
        let path = format!("/ai{i}");
        let (res, seen) = forwarded_for(&proxy, &upstream, client, ua, &path, "").await;
        assert_eq!(res.status, status, "{client} {ua}");
        if status == 403 {
            assert!(res.text().contains("AI training"), "{}", res.text());
            assert!(seen.is_none(), "a refused crawler never reaches the site");
        } else {
            assert_eq!(told(&seen).1.as_deref(), verified, "{client} {ua}");
        }
    }
    // The refused spoofer is counted as what verification found.
    let m = scrape(proxy.admin_addr.expect("admin")).await;
    assert!(verifications(&m, "openai", "spoofed") >= 1.0);
    assert!(verifications(&m, "anthropic", "unverified") >= 1.0);
    proxy.stop().await;
}

/// Web Bot Auth: a signed request is verified against the key directory
/// its Signature-Agent names (fetched over HTTPS, a 200 without
/// redirects, cached); an expired, not yet valid, uncovered, foreign-key or
/// non-https signature fails and is spoofed; a wrong tag is no Web Bot Auth
/// request at all; a signer that is not the operator the User-Agent claims
/// does not verify that claim.
#[tokio::test]
async fn web_bot_auth_signatures_verify_against_the_agents_directory() {
    let ca = support::tls::Ca::new();
    let leaf = ca.leaf(&["127.0.0.1"]);
    let agent = ListServer::start_with(Some(support::tls::Ca::acceptor(&leaf))).await;
    let other = ListServer::start_with(Some(support::tls::Ca::acceptor(&leaf))).await;
    let moved = ListServer::start_with(Some(support::tls::Ca::acceptor(&leaf))).await;
    let key = AgentKey::new(7);
    let foreign = AgentKey::new(9);
    let directory = "/.well-known/http-message-signatures-directory";
    agent.set(
        directory,
        format!(r#"{{"keys": [{}]}}"#, key.jwk).as_bytes(),
    );
    other.set(
        directory,
        format!(r#"{{"keys": [{}]}}"#, foreign.jwk).as_bytes(),
    );
    moved.set_status(directory, 302, agent.url(directory).as_bytes());

    let upstream = Upstream::start().await;
    let lists = ListServer::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.pem).expect("write CA");
    // The agents whose directories may be fetched: not `other`'s.
    let toml = format!(
        "[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[verify]\ndns = false\ndirectory_timeout = \"2s\"\nca_file = {:?}\nsignature_agents = [{:?}, {:?}]\n{}",
        ca_file.display(),
        agent.addr.to_string(),
        moved.addr.to_string(),
        ranges_toml(&lists, &[])
    );
    let proxy = Proxy::start_with(&toml, support::with_admin(&upstream)).await;

    let now = crawlgate::clock::unix_now();
    let valid = Signing {
        key: &key,
        authority: "example.com",
        agent: agent.url(""),
        components: &["@authority", "signature-agent"],
        window: (now - 5, now + 300),
        tag: "web-bot-auth",
    };
    const AGENT_UA: &str = "ExampleAgent/1.0";
    let cases: Vec<(&str, &str, String, Option<&str>)> = vec![
        ("valid", AGENT_UA, valid.headers(), Some("signature")),
        // Signed agents may send a browser's User-Agent: still verified.
        (
            "valid, browser UA",
            FIREFOX,
            valid.headers(),
            Some("signature"),
        ),
        (
            "expired",
            AGENT_UA,
            Signing {
                window: (now - 600, now - 300),
                ..valid.clone()
            }
            .headers(),
            Some("spoofed"),
        ),
        (
            "not yet valid",
            AGENT_UA,
            Signing {
                window: (now + 600, now + 900),
                ..valid.clone()
            }
            .headers(),
            Some("spoofed"),
        ),
        (
            "signature-agent not covered",
            AGENT_UA,
            Signing {
                components: &["@authority"],
                ..valid.clone()
            }
            .headers(),
            Some("spoofed"),
        ),
        (
            "signed for another host",
            AGENT_UA,
            Signing {
                authority: "other.example",
                ..valid.clone()
            }
            .headers(),
            Some("spoofed"),
        ),
        (
            "a key of another directory",
            AGENT_UA,
            Signing {
                key: &foreign,
                ..valid.clone()
            }
            .headers(),
            Some("spoofed"),
        ),
        // Validly signed by an agent crawlgate does not fetch keys from
        // (not in signature_agents): nothing certain.
        (
            "an agent not allowed",
            FIREFOX,
            Signing {
                key: &foreign,
                agent: other.url(""),
                ..valid.clone()
            }
            .headers(),
            None,
        ),
        (
            "an http agent",
            AGENT_UA,
            Signing {
                agent: agent.url("").replace("https", "http"),
                ..valid.clone()
            }
            .headers(),
            Some("spoofed"),
        ),
        // Not Web Bot Auth at all: nothing to verify.
        (
            "another tag",
            FIREFOX,
            Signing {
                tag: "other",
                ..valid.clone()
            }
            .headers(),
            None,
        ),
        // A directory behind a redirect is not fetched: nothing certain.
        (
            "a redirected directory",
            FIREFOX,
            Signing {
                agent: moved.url(""),
                ..valid.clone()
            }
            .headers(),
            None,
        ),
        // Signed by an agent that is not Google's: the Googlebot claim is
        // judged on its own (its lists are not loaded: unverified).
        (
            "claims another operator",
            GOOGLEBOT,
            valid.headers(),
            Some("unverified"),
        ),
    ];
    for (i, (what, ua, headers, want)) in cases.iter().enumerate() {
        let (res, seen) = forwarded_for(
            &proxy,
            &upstream,
            "198.51.100.20",
            ua,
            &format!("/signed{i}"),
            headers,
        )
        .await;
        assert_eq!(res.status, 200, "{what}");
        assert_eq!(told(&seen).1.as_deref(), *want, "{what}");
    }
    let m = scrape(proxy.admin_addr.expect("admin")).await;
    let none = |result: &str| verifications(&m, "none", result);
    assert_eq!(none("signature"), 2.0);
    assert_eq!(none("spoofed"), 6.0);
    proxy.stop().await;
}

/// A list replaced by a file that does not exist is an error at start,
/// naming the key and its line, not a list left unloaded forever.
#[test]
fn a_missing_range_file_is_a_start_up_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crawlgate.toml");
    std::fs::write(
        &path,
        "[verify]\ndns = false\n[verify.ranges.google]\ncommon-crawlers = \"lists/missing.json\"\n",
    )
    .expect("write");
    let process = std::sync::Arc::new(crawlgate::state::Process::new());
    let err = match crawlgate::live::load(Some(&path), &Overrides::default(), &process, true) {
        Ok(_) => panic!("a missing list file is refused"),
        Err(err) => err.to_string(),
    };
    assert!(
        err.contains("crawlgate.toml:3")
            && err.contains("verify.ranges: google.common-crawlers: ")
            && err.contains("missing.json: no such file"),
        "{err}"
    );
}

/// The saved copies under `tests/data/ranges/`, written in each operator's
/// published shape.
fn saved_copy(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ranges")
        .join(name)
}

/// The lists added in issue 25, from saved copies: Anthropic's one list
/// for ClaudeBot, Claude-User and Claude-SearchBot (not for its older
/// tokens), Mistral's for MistralAI-User, Google's user-triggered agents
/// (Google-Agent, and the user-triggered fetchers), and Google's older
/// `googlebot.json` address set as `google.common-crawlers`, answered with
/// a 301 to the current one as Google does.
#[tokio::test]
async fn the_newer_lists_verify_from_saved_copies() {
    const CLAUDE_USER: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; +Claude-User@anthropic.com)";
    const CLAUDE_SEARCHBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-SearchBot/1.0; +Claude-SearchBot@anthropic.com)";
    const CLAUDEBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
    const MISTRAL_USER: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; MistralAI-User/1.0; +https://docs.mistral.ai/robots)";
    const GOOGLE_AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko; compatible; Google-Agent; +https://developers.google.com/crawling/docs/crawlers-fetchers/google-agent) Chrome/139.0.0.0 Safari/537.36";
    const FEEDFETCHER: &str = "FeedFetcher-Google; (+http://www.google.com/feedfetcher.html)";
    let upstream = Upstream::start().await;
    let lists = ListServer::start().await;
    let old = "/static/search/apis/ipranges/googlebot.json";
    let current = "/static/crawling/ipranges/common-crawlers.json";
    lists.set_status(old, 301, lists.url(current).as_bytes());
    lists.set(
        current,
        &std::fs::read(saved_copy("googlebot.json")).expect("saved copy"),
    );
    let (anthropic, mistral, agents) = (
        saved_copy("anthropic-bots.json"),
        saved_copy("mistralai-user-ips.json"),
        saved_copy("user-triggered-agents.json"),
    );
    let ranges = ranges_toml(
        &lists,
        &[
            ("anthropic.bots", &anthropic),
            ("mistral.mistralai-user", &mistral),
            ("google.user-triggered-agents", &agents),
        ],
    )
    .replace(&lists.url("/google.common-crawlers.json"), &lists.url(old));
    assert!(ranges.contains(old), "{ranges}");
    let toml =
        format!("[proxy]\ntrusted_proxies = [\"127.0.0.1/32\"]\n[verify]\ndns = false\n{ranges}");
    let proxy = Proxy::start_with(&toml, support::with_admin(&upstream)).await;

    // The older Google address: fetched in the background, through the 301.
    let mut n = 0;
    until(
        Duration::from_secs(10),
        "google.common-crawlers loads from the older address",
        async || {
            n += 1;
            let path = format!("/wait{n}");
            verdict(&proxy, &upstream, "203.0.113.201", GOOGLEBOT, &path)
                .await
                .as_deref()
                == Some("ip")
        },
    )
    .await;

    // (client, User-Agent, verdict told to the site)
    let cases: &[(&str, &str, &str)] = &[
        ("203.0.113.5", CLAUDEBOT, "ip"),
        ("2001:db8:a11::7", CLAUDE_USER, "ip"),
        ("203.0.113.77", CLAUDE_SEARCHBOT, "ip"),
        // Outside Anthropic's loaded list, no DNS method: not Anthropic's.
        ("198.51.100.4", CLAUDEBOT, "spoofed"),
        // Its older token is on no list: nothing can settle it.
        ("203.0.113.5", "anthropic-ai", "unverified"),
        ("203.0.113.130", MISTRAL_USER, "ip"),
        ("2001:db8:5a1::1", MISTRAL_USER, "ip"),
        ("203.0.113.5", MISTRAL_USER, "spoofed"),
        ("203.0.113.170", GOOGLE_AGENT, "ip"),
        // Google-Agent comes from user-triggered-agents.json alone.
        ("203.0.113.201", GOOGLE_AGENT, "spoofed"),
        // A user-triggered fetcher may use any of Google's three files:
        // in the agents' file, it is Google's …
        ("203.0.113.170", FEEDFETCHER, "ip"),
        // … outside it, with the other two not loaded, nothing is certain.
        ("198.51.100.4", FEEDFETCHER, "unverified"),
        ("2001:db8:6b0::9", GOOGLEBOT, "ip"),
        ("203.0.113.170", GOOGLEBOT, "spoofed"),
    ];
    for (i, &(client, ua, want)) in cases.iter().enumerate() {
        let got = verdict(&proxy, &upstream, client, ua, &format!("/new{i}")).await;
        assert_eq!(got.as_deref(), Some(want), "{client} {ua}");
    }
    let m = scrape(proxy.admin_addr.expect("admin")).await;
    assert!(verifications(&m, "anthropic", "ip") >= 3.0);
    assert!(verifications(&m, "mistral", "ip") >= 2.0);
    proxy.stop().await;
}

/// Offline, with verification on: every list's source is a loopback port
/// nothing listens on, so every fetch fails at once, round after round.
/// The first round logs one short warning (how many lists, that they are
/// tried again, where the reasons are), not every source and its reason;
/// the rounds after it, still failing, log no warning; each list's reason
/// is at debug level.
#[test]
fn offline_start_up_warns_in_one_short_line() {
    use support::process::{free_addr, start_env};
    let dead = free_addr();
    let addr = free_addr();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("crawlgate.toml");
    let ranges = support::ranges_toml(|name| format!("http://{dead}/{name}.json"));
    std::fs::write(
        &config,
        format!("[verify]\ndns = false\nrefresh = \"1s\"\n{ranges}"),
    )
    .expect("write config");
    let mut running = start_env(
        &[
            "--config",
            config.to_str().expect("utf-8 path"),
            "--listen",
            &addr.to_string(),
            "--upstream",
            &format!("http://{dead}"),
        ],
        &[("RUST_LOG", "info,crawlgate::verify=debug")],
        addr,
        std::process::Stdio::piped(),
    );
    let lines = support::process::stderr_lines(&mut running.0);
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    // Until the warning, then 5 s more: rounds come every second (refresh
    // and retry: 1 s); at least two more must come on a busy machine too.
    let mut warned_at = None;
    loop {
        let now = std::time::Instant::now();
        let stop = warned_at.map_or(deadline, |at: std::time::Instant| {
            at + Duration::from_millis(5000)
        });
        if now >= stop {
            break;
        }
        match lines.recv_timeout(stop - now) {
            Ok(line) => {
                if warned_at.is_none() && line.contains(" WARN ") {
                    warned_at = Some(std::time::Instant::now());
                }
                seen.push(line);
            }
            Err(_) => break,
        }
    }
    drop(running);
    let text = seen.join("\n");
    let warnings: Vec<&String> = seen.iter().filter(|l| l.contains(" WARN ")).collect();
    assert_eq!(warnings.len(), 1, "one warning in all:\n{text}");
    let warning = warnings[0];
    let count = Operators::embedded().lists.len();
    assert!(
        warning.contains(&format!("verify: {count} range lists not updated"))
            && warning.contains("tried again every 1s")
            && warning.contains("RUST_LOG=crawlgate::verify=debug")
            && warning.contains("crawlgate_verify_list_fetches_total"),
        "{warning}"
    );
    assert!(
        !warning.contains(&dead.to_string()),
        "no source in the warning: {warning}"
    );
    assert!(warning.len() < 320, "{} bytes: {warning}", warning.len());
    // Each list's reason, at debug level; and the rounds went on.
    let reasons = seen
        .iter()
        .filter(|l| l.contains(" DEBUG ") && l.contains("range list not updated"))
        .count();
    assert_eq!(reasons, count, "{text}");
    let rounds = seen
        .iter()
        .filter(|l| l.contains("fetching the range lists that are due"))
        .count();
    assert!(rounds >= 3, "{rounds} rounds:\n{text}");
}

/// `crawlgate demo` runs on loopback only: verification is off (it says
/// so), no range list is fetched, and nothing is logged as a warning.
#[test]
fn the_demo_fetches_no_range_list_and_warns_of_nothing() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(support::process::BIN)
        .args(["demo", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn demo");
    let stdout = child.stdout.take().expect("stdout");
    let errors = support::process::stderr_lines(&mut child);
    let demo = support::process::Running(child);
    let (tx, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut out = Vec::new();
    let addr: SocketAddr = loop {
        let line = printed
            .recv_timeout(Duration::from_secs(20))
            .expect("the demo prints its address");
        out.push(line.clone());
        if let Some(rest) = line.split("proxy listening on http://").nth(1) {
            break rest
                .split(' ')
                .next()
                .and_then(|a| a.parse().ok())
                .expect("socket address");
        }
    };
    while let Ok(line) = printed.recv_timeout(Duration::from_millis(300)) {
        out.push(line);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let res = support::get(addr, "127.0.0.1", "/page?id=1", Some(GOOGLEBOT)).await;
        assert_eq!(res.status, 200);
    });
    // Long enough for a first refresh round to have run and failed.
    std::thread::sleep(Duration::from_millis(1500));
    drop(demo);
    let mut logged = Vec::new();
    while let Ok(line) = errors.recv_timeout(Duration::from_secs(2)) {
        logged.push(line);
    }
    let out = out.join("\n");
    let logged = logged.join("\n");
    assert!(
        out.contains("Crawler verification is off here"),
        "the demo says what it does:\n{out}"
    );
    assert!(logged.contains("crawler verification off"), "{logged}");
    for bad in [" WARN ", " ERROR ", "verify:", "range list"] {
        assert!(
            !logged.contains(bad),
            "{bad:?} in the demo's log:\n{logged}"
        );
    }
}
