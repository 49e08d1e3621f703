use super::*;

fn policy() -> Policy {
    test_policy()
}

/// With a sitemap folder, `GET|HEAD /sitemaps/…` is answered by the
/// proxy, after the action block and the canonical redirect and before
/// shedding (it costs the site nothing); other methods, and every
/// request without a folder, are forwarded.
#[test]
fn sitemaps_are_served_when_there_is_a_folder() {
    let mut with = shedding_policy();
    with.sitemaps = true;
    // Every robot tier shed: a sitemap is still answered.
    let busy = Pressure {
        level: u8::MAX,
        search_pass: Some(false),
    };
    let get = Method::GET;
    for (policy, method, host, target, ua, expected) in [
        (
            &with,
            &get,
            "example.com",
            "/sitemaps/sitemap.xml",
            BOT,
            "sitemap",
        ),
        (
            &with,
            &Method::HEAD,
            "example.com",
            "/sitemaps/x.xml",
            HUMAN,
            "sitemap",
        ),
        (
            &with,
            &get,
            "example.com",
            "/sitemaps/../etc/passwd",
            BOT,
            "sitemap",
        ),
        (
            &with,
            &Method::POST,
            "example.com",
            "/sitemaps/sitemap.xml",
            HUMAN,
            "forward",
        ),
        (&with, &get, "example.com", "/sitemaps", HUMAN, "forward"),
        (
            &with,
            &get,
            "example.com",
            "/sitemaps/s.xml?do=x",
            BOT,
            "block do",
        ),
        (
            &with,
            &get,
            "www.example.com",
            "/sitemaps/sitemap.xml",
            BOT,
            "301 http://example.com/sitemaps/sitemap.xml",
        ),
        (
            &shedding_policy(),
            &get,
            "example.com",
            "/sitemaps/sitemap.xml",
            HUMAN,
            "forward",
        ),
        // The same robot elsewhere is shed.
        (&with, &get, "example.com", "/page", BOT, "503 after 120"),
    ] {
        let (_, shown) = run_with(policy, busy, method.clone(), host, target, Some(ua));
        assert_eq!(shown, expected, "{method} {host}{target}");
    }
}

/// [`policy`] with shedding on, in the default order, 503 after 120 s.
fn shedding_policy() -> Policy {
    let mut policy = policy();
    let config = crate::config::ShedConfig {
        max_inflight: 10,
        max_latency: None,
        status: StatusCode::SERVICE_UNAVAILABLE,
        retry_after: std::time::Duration::from_secs(120),
        order: crate::config::ShedConfig::default_order(),
        max_search_shed: std::time::Duration::from_secs(3 * 3600),
        capped_share_permille: 250,
        escalate_after: std::time::Duration::from_secs(10),
        calm_after: std::time::Duration::from_secs(30),
    };
    policy.shed = Some(ShedPolicy::new(config, &policy.classifier).expect("known classes"));
    policy
}

const HUMAN: &[u8] = b"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
const BOT: &[u8] = b"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)";

fn run(method: Method, host: &str, target: &str, ua: Option<&[u8]>) -> (UaClass, String) {
    run_with(&policy(), Pressure::default(), method, host, target, ua)
}

fn run_with(
    policy: &Policy,
    pressure: Pressure,
    method: Method,
    host: &str,
    target: &str,
    ua: Option<&[u8]>,
) -> (UaClass, String) {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let facts = Facts {
        method: &method,
        scheme: "http",
        authority: Some(host),
        path,
        query,
        user_agent: ua,
        pressure,
        cache: None,
        identity: None,
        ai: None,
    };
    let (verdict, decision) = decide(&facts, policy);
    let shown = match decision {
        Decision::Block { param } => format!("block {}", policy.blocked_params[param]),
        Decision::Redirect { status, location } => format!("{} {location}", status.as_u16()),
        Decision::Shed(shed) => format!("{} after {}", shed.status.as_u16(), shed.retry_after),
        other => other.route().as_str().to_owned(),
    };
    (verdict.class, shown)
}

/// (method, host, request-target, User-Agent, expected class, expected decision)
type Row<'a> = (
    &'a Method,
    &'a str,
    &'a str,
    Option<&'a [u8]>,
    UaClass,
    &'a str,
);

#[test]
fn table() {
    use UaClass::{Bot, Human};
    let get = Method::GET;
    let rows: &[Row<'_>] = &[
        (&get, "example.com", "/", Some(HUMAN), Human, "forward"),
        (
            &get,
            "example.com",
            "/?do=vote",
            Some(HUMAN),
            Human,
            "forward",
        ),
        (&get, "example.com", "/?do=vote", Some(BOT), Bot, "block do"),
        (
            &get,
            "example.com",
            "/a?x=1&%64o=vote",
            Some(BOT),
            Bot,
            "block do",
        ),
        (
            &get,
            "example.com",
            "/a?_fid=abc",
            Some(BOT),
            Bot,
            "block _fid",
        ),
        (
            &get,
            "example.com",
            "/a?.fid=abc",
            Some(BOT),
            Bot,
            "block _fid",
        ),
        (&get, "example.com", "/a?undo=1", Some(BOT), Bot, "forward"),
        (&get, "example.com", "/a?x=do", Some(BOT), Bot, "forward"),
        (&get, "example.com", "/?do=1", None, Bot, "block do"),
        (&get, "example.com", "/?do=1", Some(b""), Bot, "block do"),
        // Block wins over redirect: no hop toward an action for a bot.
        (
            &get,
            "www.example.com",
            "/www/?do=1",
            Some(BOT),
            Bot,
            "block do",
        ),
        (
            &get,
            "www.example.com",
            "/www/a?do=1",
            Some(HUMAN),
            Human,
            "301 http://example.com/a?do=1",
        ),
        (
            &get,
            "www.example.com",
            "/a?b=1",
            Some(BOT),
            Bot,
            "301 http://example.com/a?b=1",
        ),
        (
            &Method::POST,
            "www.example.com",
            "/form",
            Some(HUMAN),
            Human,
            "308 http://example.com/form",
        ),
        (
            &Method::HEAD,
            "example.com",
            "/www/",
            Some(HUMAN),
            Human,
            "301 http://example.com/",
        ),
        (&get, "example.com", "/robots.txt", Some(BOT), Bot, "robots"),
        (
            &Method::HEAD,
            "example.com",
            "/robots.txt",
            Some(HUMAN),
            Human,
            "robots",
        ),
        (
            &get,
            "example.com",
            "/robots.txt?x=1",
            Some(BOT),
            Bot,
            "robots",
        ),
        (
            &Method::POST,
            "example.com",
            "/robots.txt",
            Some(BOT),
            Bot,
            "forward",
        ),
        (
            &get,
            "www.example.com",
            "/robots.txt",
            Some(BOT),
            Bot,
            "301 http://example.com/robots.txt",
        ),
        (
            &get,
            "example.com",
            "/robots.txt/",
            Some(BOT),
            Bot,
            "forward",
        ),
    ];
    for &(method, host, target, ua, class, want) in rows {
        let (got_class, got) = run(method.clone(), host, target, ua);
        assert_eq!(
            (got_class, got.as_str()),
            (class, want),
            "{method} {host}{target}"
        );
    }
}

/// Under pressure, robots of the shed tiers get 503 (in the default
/// order: libraries and unknown robots first, AI crawlers next, search
/// engines last); humans never do, and the earlier steps keep their
/// place: an action URL is still 403, a redirect still a redirect,
/// robots.txt still served.
#[test]
fn shedding_follows_the_tiers_and_comes_after_block_redirect_and_robots() {
    use UaClass::{Bot, Human};
    let policy = shedding_policy();
    const CURL: &[u8] = b"curl/8.5.0";
    const GPTBOT: &[u8] = b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
    const TOOL: &[u8] = b"SiteTool/2.1";
    const MONITOR: &[u8] =
        b"Mozilla/5.0 (compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)";
    let at = |level: u8| Pressure {
        level,
        search_pass: None,
    };
    let shed = "503 after 120";
    /// (pressure, host, request-target, User-Agent, class, decision)
    type ShedRow<'a> = (
        Pressure,
        &'a str,
        &'a str,
        Option<&'a [u8]>,
        UaClass,
        &'a str,
    );
    let rows: &[ShedRow<'_>] = &[
        (at(0), "example.com", "/", Some(CURL), Bot, "forward"),
        (at(1), "example.com", "/", Some(CURL), Bot, shed),
        (at(1), "example.com", "/", Some(TOOL), Bot, shed),
        (at(1), "example.com", "/", None, Bot, shed),
        (at(1), "example.com", "/", Some(GPTBOT), Bot, "forward"),
        (at(1), "example.com", "/", Some(BOT), Bot, "forward"),
        (at(1), "example.com", "/", Some(HUMAN), Human, "forward"),
        (at(2), "example.com", "/", Some(GPTBOT), Bot, shed),
        (at(2), "example.com", "/", Some(BOT), Bot, "forward"),
        (at(3), "example.com", "/", Some(BOT), Bot, shed),
        (at(3), "example.com", "/", Some(HUMAN), Human, "forward"),
        // Uptime monitors are in no tier: never shed.
        (at(3), "example.com", "/", Some(MONITOR), Bot, "forward"),
        (
            Pressure {
                level: 3,
                search_pass: Some(true),
            },
            "example.com",
            "/",
            Some(BOT),
            Bot,
            "forward",
        ),
        (
            Pressure {
                level: 3,
                search_pass: Some(false),
            },
            "example.com",
            "/",
            Some(BOT),
            Bot,
            shed,
        ),
        // The share is for search engines only.
        (
            Pressure {
                level: 3,
                search_pass: Some(true),
            },
            "example.com",
            "/",
            Some(GPTBOT),
            Bot,
            shed,
        ),
        (at(3), "example.com", "/?do=1", Some(CURL), Bot, "block do"),
        (
            at(3),
            "www.example.com",
            "/a",
            Some(BOT),
            Bot,
            "301 http://example.com/a",
        ),
        (
            at(3),
            "example.com",
            "/robots.txt",
            Some(CURL),
            Bot,
            "robots",
        ),
    ];
    for &(pressure, host, target, ua, class, want) in rows {
        let (got_class, got) = run_with(&policy, pressure, Method::GET, host, target, ua);
        assert_eq!(
            (got_class, got.as_str()),
            (class, want),
            "{host}{target} {:?} at {pressure:?}",
            ua.map(String::from_utf8_lossy)
        );
    }
}

/// The cache is asked only for robots past block, redirect and
/// robots.txt; a fresh entry answers; a stale one only in place of a
/// shed answer.
#[test]
fn the_cache_answers_robots_only_and_stale_copies_replace_shed_answers() {
    let policy = shedding_policy();
    let asked = std::cell::Cell::new(0);
    let shed = Pressure {
        level: 3,
        search_pass: None,
    };
    let calm = Pressure::default();
    /// (request-target, User-Agent, what the cache holds, pressure,
    /// decision, lookups asked)
    type CacheRow<'a> = (&'a str, &'a [u8], Cached, Pressure, &'a str, u32);
    let rows: &[CacheRow<'_>] = &[
        ("/", BOT, Cached::Fresh, calm, "cache", 1),
        ("/", BOT, Cached::Stale, calm, "forward", 1),
        ("/", BOT, Cached::None, calm, "forward", 1),
        ("/", BOT, Cached::Fresh, shed, "cache", 1),
        ("/", BOT, Cached::Stale, shed, "cache", 1),
        ("/", BOT, Cached::None, shed, "shed", 1),
        ("/", HUMAN, Cached::Fresh, shed, "forward", 0),
        ("/?do=1", BOT, Cached::Fresh, calm, "block", 0),
        ("/robots.txt", BOT, Cached::Fresh, calm, "robots", 0),
    ];
    for &(target, ua, cached, pressure, want, probes) in rows {
        asked.set(0);
        let lookup = || {
            asked.set(asked.get() + 1);
            cached
        };
        let facts = Facts {
            pressure,
            cache: Some(CacheProbe(&lookup)),
            ..get(target, ua)
        };
        let (_, decision) = decide(&facts, &policy);
        assert_eq!(
            (decision.route().as_str(), asked.get()),
            (want, probes),
            "{target} {cached:?} {pressure:?} {}",
            String::from_utf8_lossy(ua)
        );
    }
}

/// A class that must see the live site (`[bot_cache] live_classes`, by
/// default monitor and service) is never looked up: the cache answers it
/// neither fresh nor stale, even while robots are shed; a search robot
/// still is. A written list replaces the default; a name that is not a
/// robot class of the rules is refused; a default name the rules lack is
/// left out.
#[test]
fn classes_that_must_see_the_live_site_never_read_the_cache() {
    const MONITOR: &[u8] =
        b"Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)";
    const WEBHOOK: &[u8] = b"Shopify-Captain-Hook";
    let mut policy = shedding_policy();
    policy.live_classes = LiveClasses::new(None, &policy.classifier).expect("default");
    let classifier = &policy.classifier;
    let class = |ua: &[u8]| classifier.class_of(&classifier.classify(Some(ua)), false);
    assert_eq!(classifier.class_name(class(MONITOR)), "monitor");
    assert_eq!(classifier.class_name(class(WEBHOOK)), "service");
    assert!(policy.live_classes.contains(class(MONITOR)));
    assert!(policy.live_classes.contains(class(WEBHOOK)));
    assert!(!policy.live_classes.contains(class(BOT)));
    assert!(!policy.live_classes.contains(ClassId::HUMAN));

    let asked = std::cell::Cell::new(0);
    let every_tier = Pressure {
        level: u8::MAX,
        search_pass: Some(false),
    };
    for (ua, cached, pressure, want, probes) in [
        (MONITOR, Cached::Fresh, Pressure::default(), "forward", 0),
        (MONITOR, Cached::Stale, every_tier, "forward", 0),
        (WEBHOOK, Cached::Fresh, Pressure::default(), "forward", 0),
        (BOT, Cached::Fresh, Pressure::default(), "cache", 1),
        (BOT, Cached::Stale, every_tier, "cache", 1),
    ] {
        asked.set(0);
        let lookup = || {
            asked.set(asked.get() + 1);
            cached
        };
        let facts = Facts {
            pressure,
            cache: Some(CacheProbe(&lookup)),
            ..get("/status", ua)
        };
        let (_, decision) = decide(&facts, &policy);
        assert_eq!(
            (decision.route().as_str(), asked.get()),
            (want, probes),
            "{cached:?} {}",
            String::from_utf8_lossy(ua)
        );
    }

    // Written: only what it names; empty: none.
    let search: Vec<Box<str>> = vec!["search".into()];
    let only_search = LiveClasses::new(Some(&search), classifier).expect("search");
    assert!(only_search.contains(class(BOT)) && !only_search.contains(class(MONITOR)));
    let none = LiveClasses::new(Some(&[]), classifier).expect("empty");
    assert!(!none.contains(class(MONITOR)));
    for name in ["monitr", "human"] {
        let names: Vec<Box<str>> = vec![name.into()];
        let err = LiveClasses::new(Some(&names), classifier).expect_err(name);
        assert!(
            err.to_string()
                .starts_with(&format!("{name:?} is not a robot class of these rules")),
            "{err}"
        );
    }
    // A rules folder without the default classes: none of them, no error.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("search.txt"), "Googlebot\nbingbot\n").expect("write");
    let lists = crate::rules::RuleLists::from_dir(dir.path()).expect("rules");
    let own = Classifier::new(&lists).expect("compile");
    let default = LiveClasses::new(None, &own).expect("default names left out");
    assert!(own.classes().ids().all(|id| !default.contains(id)));
}

/// A GET of `target` on `example.com` by `ua`, without pressure, cache
/// or verification.
fn get<'a>(target: &'a str, ua: &'a [u8]) -> Facts<'a> {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    Facts {
        method: &Method::GET,
        scheme: "http",
        authority: Some("example.com"),
        path,
        query,
        user_agent: Some(ua),
        pressure: Pressure::default(),
        cache: None,
        identity: None,
        ai: None,
    }
}

#[test]
fn no_authority_means_no_redirect() {
    let facts = Facts {
        method: &Method::GET,
        scheme: "http",
        authority: None,
        path: "/www/a",
        query: None,
        user_agent: Some(HUMAN),
        pressure: Pressure::default(),
        cache: None,
        identity: None,
        ai: None,
    };
    assert_eq!(decide(&facts, &policy()).1, Decision::Forward);
}

/// `[ai] training = "disallow"`, `user_fetch = "allow"`, `enforce`:
/// each verification state, as the ranges and DNS steps find it from
/// the shipped `rules/crawlers.toml`, and what the decision makes of
/// it. A claim of the refused kind is 403 everywhere but robots.txt in
/// every state (spoofed included: the refusal is of the purpose it
/// states); with `spoofed = "block"` a spoofed one is refused as
/// spoofed first, robots.txt too; an allowed kind passes in every state
/// but that one.
#[test]
fn an_ai_refusal_holds_in_every_verification_state() {
    use crate::verify::{by_dns, by_ranges, DnsAnswer, Lists, Method as By, Operators, Step};
    let ops = Operators::embedded();
    let bit = |name: &str| -> Lists { 1 << ops.list(name).expect(name) };
    let all: Lists = Lists::MAX;
    const GPTBOT: &[u8] = b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
    const CHATGPT_USER: &[u8] = b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot";
    const CCBOT: &[u8] = b"CCBot/2.0 (https://commoncrawl.org/faq/)";
    const ANTHROPIC_AI: &[u8] = b"anthropic-ai";
    const BYTESPIDER: &[u8] = b"Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)";
    let (gptbot, chatgpt_user) = (bit("openai.gptbot"), bit("openai.chatgpt-user"));
    let verified = Some(Identity::Verified(By::Ip));
    let spoofed = Some(Identity::Spoofed);
    let unverified = Some(Identity::Unverified);
    // (state, User-Agent, lists the address is in, lists loaded, the
    // DNS answer when the ranges ask for one, identity found)
    type State<'a> = (
        &'a str,
        &'a [u8],
        Lists,
        Lists,
        Option<DnsAnswer>,
        Option<Identity>,
    );
    let states: &[State<'_>] = &[
        ("verified: in its list", GPTBOT, gptbot, all, None, verified),
        (
            "spoofed: outside its loaded list",
            GPTBOT,
            0,
            all,
            None,
            spoofed,
        ),
        (
            "unverified: its list not loaded",
            GPTBOT,
            0,
            all & !gptbot,
            None,
            unverified,
        ),
        (
            "unverified: DNS failed",
            CCBOT,
            0,
            all,
            Some(DnsAnswer::Failed),
            unverified,
        ),
        (
            "unverified: no list vouches for the token",
            ANTHROPIC_AI,
            0,
            all,
            None,
            unverified,
        ),
        (
            "unverified: the operator publishes no method",
            BYTESPIDER,
            0,
            all,
            None,
            unverified,
        ),
        ("verification off", GPTBOT, 0, 0, None, None),
        (
            "allowed kind, verified",
            CHATGPT_USER,
            chatgpt_user,
            all,
            None,
            verified,
        ),
        ("allowed kind, spoofed", CHATGPT_USER, 0, all, None, spoofed),
        (
            "allowed kind, list not loaded",
            CHATGPT_USER,
            0,
            0,
            None,
            unverified,
        ),
    ];
    let mut policy = policy();
    policy.ai = Some(AiConfig {
        training: Some(false),
        search: None,
        user_fetch: Some(true),
        enforce: true,
    });
    let decide_for = |policy: &Policy, ua: &'static [u8], identity, target: &'static str| {
        let claim = ops.claim(ua).expect("claims an operator");
        let facts = Facts {
            identity,
            ai: claim.ai,
            ..get(target, ua)
        };
        decide(&facts, policy).1
    };
    let training = Decision::BlockAi(AiKind::Training);
    for (state, ua, found, loaded, dns, want) in states {
        let claim = ops.claim(ua).expect("claims an operator");
        let identity = if state.starts_with("verification off") {
            None
        } else {
            match (by_ranges(&claim, *found, *loaded, dns.is_some()), dns) {
                (Step::Done(identity), _) => Some(identity),
                (Step::AskDns, Some(answer)) => {
                    Some(by_dns(answer, &ops.operators[claim.operator].dns))
                }
                (Step::AskDns, None) => panic!("{state}: asks DNS"),
            }
        };
        assert_eq!(identity, *want, "{state}: identity");
        let refused = claim.ai == Some(AiKind::Training);
        let page = if refused {
            &training
        } else {
            &Decision::Forward
        };
        for (spoofed_policy, target) in [
            (Spoofed::Log, "/page"),
            (Spoofed::Log, "/robots.txt"),
            (Spoofed::Block, "/page"),
            (Spoofed::Block, "/robots.txt"),
        ] {
            policy.spoofed = spoofed_policy;
            let expected = match (spoofed_policy, identity, target) {
                (Spoofed::Block, Some(Identity::Spoofed), _) => &Decision::BlockSpoofed,
                (_, _, "/robots.txt") => &Decision::ServeRobots,
                _ => page,
            };
            assert_eq!(
                &decide_for(&policy, ua, identity, target),
                expected,
                "{state}, spoofed = {spoofed_policy:?}, {target}"
            );
        }
    }
}

/// A spoofed claim: with `spoofed = "block"`, 403 on every URL, before
/// anything else (robots.txt too); by default it goes on as an unknown
/// robot, shed in the first tier where the search engine it claims
/// would not be. A verified or unverified claim changes nothing.
#[test]
fn spoofed_claims_are_blocked_or_shed_as_unknown_robots() {
    let mut policy = shedding_policy();
    let decide_with = |policy: &Policy, level: u8, target: &str, identity| {
        let facts = Facts {
            pressure: Pressure {
                level,
                search_pass: None,
            },
            identity,
            ..get(target, GOOGLEBOT)
        };
        decide(&facts, policy).1.route().as_str()
    };
    const GOOGLEBOT: &[u8] =
        b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    use crate::verify::Method as By;
    let spoofed = Some(Identity::Spoofed);
    let cases = [
        (0, "/", spoofed, "forward"),
        (1, "/", spoofed, "shed"),
        (1, "/", Some(Identity::Verified(By::Ip)), "forward"),
        (1, "/", Some(Identity::Unverified), "forward"),
        (1, "/", None, "forward"),
        (0, "/robots.txt", spoofed, "robots"),
    ];
    for (level, target, identity, want) in cases {
        assert_eq!(
            decide_with(&policy, level, target, identity),
            want,
            "{level} {target} {identity:?}"
        );
    }
    policy.spoofed = Spoofed::Block;
    for target in ["/", "/robots.txt", "/a?do=1"] {
        let facts_decision = decide_with(&policy, 0, target, spoofed);
        assert_eq!(facts_decision, "block", "{target}");
    }
    assert_eq!(
        decide_with(&policy, 0, "/", Some(Identity::Unverified)),
        "forward"
    );
}
