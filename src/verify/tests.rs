use super::*;

#[test]
fn the_embedded_file_compiles() {
    let ops = Operators::parse(Path::new(FILE_NAME), EMBEDDED).expect("rules/crawlers.toml");
    assert!(ops.operators.len() >= 10, "{}", ops.operators.len());
    for name in [
        "google.common-crawlers",
        "google.special-crawlers",
        "google.user-triggered-fetchers",
        "bing.bingbot",
        "apple.applebot",
        "openai.gptbot",
        "openai.searchbot",
        "openai.chatgpt-user",
        "perplexity.perplexitybot",
        "commoncrawl.ccbot",
        "duckduckgo.duckduckbot",
        "google.user-triggered-agents",
        "anthropic.bots",
        "mistral.mistralai-user",
    ] {
        let list = ops.list(name).unwrap_or_else(|| panic!("{name} is listed"));
        assert!(ops.lists[list].url.starts_with("https://"), "{name}");
    }
}

fn claim_of(ops: &Operators, ua: &str) -> Option<(String, Vec<String>, bool)> {
    ops.claim(ua.as_bytes()).map(|c| {
        let lists = ops
            .lists
            .iter()
            .enumerate()
            .filter(|(i, _)| c.lists & (1 << i) != 0)
            .map(|(_, l)| l.name.to_string())
            .collect();
        (ops.operators[c.operator].name.to_string(), lists, c.dns)
    })
}

#[test]
fn each_robot_claims_its_operator_and_the_lists_that_vouch_for_it() {
    let ops = Operators::embedded();
    let cases: &[(&str, &str, &[&str], bool)] = &[
        (
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "google",
            &["google.common-crawlers"],
            true,
        ),
        (
            "AdsBot-Google (+http://www.google.com/adsbot.html)",
            "google",
            &["google.special-crawlers"],
            true,
        ),
        (
            "FeedFetcher-Google; (+http://www.google.com/feedfetcher.html)",
            "google",
            &[
                "google.user-triggered-agents",
                "google.user-triggered-fetchers",
                "google.user-triggered-fetchers-google",
            ],
            true,
        ),
        (
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko; compatible; Google-Agent; +https://developers.google.com/crawling/docs/crawlers-fetchers/google-agent) Chrome/139.0.0.0 Safari/537.36",
            "google",
            &["google.user-triggered-agents"],
            true,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
            "anthropic",
            &["anthropic.bots"],
            false,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; +Claude-User@anthropic.com)",
            "anthropic",
            &["anthropic.bots"],
            false,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-SearchBot/1.0; +Claude-SearchBot@anthropic.com)",
            "anthropic",
            &["anthropic.bots"],
            false,
        ),
        // The older Anthropic tokens are on no list.
        ("anthropic-ai", "anthropic", &[], false),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; MistralAI-User/1.0; +https://docs.mistral.ai/robots)",
            "mistral",
            &["mistral.mistralai-user"],
            false,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36",
            "bing",
            &["bing.bingbot"],
            true,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
            "openai",
            &["openai.gptbot"],
            false,
        ),
        (
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot",
            "openai",
            &["openai.chatgpt-user"],
            false,
        ),
        (
            "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
            "yandex",
            &[],
            true,
        ),
        ("CCBot/2.0 (https://commoncrawl.org/faq/)", "commoncrawl", &["commoncrawl.ccbot"], true),
    ];
    for (ua, operator, lists, dns) in cases {
        let got = claim_of(&ops, ua).unwrap_or_else(|| panic!("{ua} claims nothing"));
        assert_eq!(got.0, *operator, "{ua}");
        assert_eq!(got.1, *lists, "{ua}");
        assert_eq!(got.2, *dns, "{ua}");
    }
    for ua in [
        "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
        "curl/8.5.0",
        "",
    ] {
        assert_eq!(claim_of(&ops, ua), None, "{ua}");
    }
}

#[test]
fn the_ranges_settle_what_they_can() {
    let google = Claim {
        operator: 0,
        lists: 0b0011,
        dns: true,
        ai: None,
    };
    let openai = Claim {
        operator: 1,
        lists: 0b0100,
        dns: false,
        ai: Some(AiKind::Training),
    };
    let yandex = Claim {
        operator: 2,
        lists: 0,
        dns: true,
        ai: None,
    };
    let verified = Step::Done(Identity::Verified(Method::Ip));
    let spoofed = Step::Done(Identity::Spoofed);
    let unverified = Step::Done(Identity::Unverified);
    let all = 0b1111;
    // (claim, lists the address is in, lists loaded, dns on, expected)
    let cases = [
        (google, 0b0001, all, true, verified),
        (google, 0b0010, all, false, verified),
        (google, 0b0100, all, true, Step::AskDns),
        (google, 0, all, false, spoofed),
        (google, 0, 0b0001, false, unverified),
        (openai, 0b0100, all, true, verified),
        (openai, 0b0001, all, true, spoofed),
        (openai, 0, 0b0011, true, unverified),
        (yandex, 0, all, true, Step::AskDns),
        (yandex, 0, all, false, unverified),
    ];
    for (i, (claim, found, loaded, dns, want)) in cases.into_iter().enumerate() {
        assert_eq!(by_ranges(&claim, found, loaded, dns), want, "case {i}");
    }
}

#[test]
fn dns_verifies_only_a_name_under_the_domains_that_resolves_back() {
    let domains: Vec<Box<str>> = vec!["googlebot.com".into(), "google.com".into()];
    let name = |n: &str, back: bool| DnsAnswer::Name {
        name: n.to_owned(),
        resolves_back: back,
    };
    let cases = [
        (
            name("crawl-66-249-66-1.googlebot.com.", true),
            Identity::Verified(Method::Dns),
        ),
        (
            name("CRAWL-66-249-66-1.GOOGLEBOT.COM", true),
            Identity::Verified(Method::Dns),
        ),
        (
            name("rate-limited-proxy-66-249-90-77.google.com", true),
            Identity::Verified(Method::Dns),
        ),
        (
            name("crawl-66-249-66-1.googlebot.com", false),
            Identity::Spoofed,
        ),
        (name("crawl-1.evilgooglebot.com", true), Identity::Spoofed),
        (name("googlebot.com.evil.example", true), Identity::Spoofed),
        (
            name("ec2-1-2-3-4.compute.amazonaws.com", true),
            Identity::Spoofed,
        ),
        (DnsAnswer::NoName, Identity::Spoofed),
        (DnsAnswer::Failed, Identity::Unverified),
    ];
    for (answer, want) in cases {
        assert_eq!(by_dns(&answer, &domains), want, "{answer:?}");
    }
    assert!(name_in_domains("googlebot.com", &domains));
}

#[test]
fn bad_operator_files_name_the_table() {
    let cases = [
        ("[google]\nrobots = []", "[google] robots: lists no robot"),
        (
            "[Google]\nrobots = [\"x\"]",
            "[Google] \"Google\": a name is",
        ),
        (
            "[g]\nrobots = [\"x\"]\ndns = [\"not a domain\"]",
            "[g] dns:",
        ),
        ("[g]\nrobots = [\"x\"]\ncolour = 1", "[g] unknown field"),
        (
            "[g]\nrobots = [\"x\"]\n[g.lists.a]\nurl = \"ftp://x/y\"",
            "[g.lists.a] url:",
        ),
        (
            "[g]\nrobots = [\"x\"]\n[g.lists.a]\nurl = \"https://x/y\"\nrobots = [\"y\"]",
            "[g.lists.a] robots: \"y\" is not one of [g] robots",
        ),
        (
            "[g]\nrobots = [\"x\"]\n[h]\nrobots = [\"X\"]",
            "[h] robots: \"X\" is named twice",
        ),
        ("[g]\nrobots = \"x\"", "[g] invalid type"),
        (
            "[g]\nrobots = [\"x\"]\nai.training = [\"a b\"]",
            "[g] ai.training: \"a b\" is not",
        ),
        (
            "[g]\nrobots = [\"x\"]\nai.chat = [\"x\"]",
            "[g] unknown field `chat`",
        ),
        ("[g", "crawlers.toml: TOML parse error at line 1"),
    ];
    for (text, want) in cases {
        let err = Operators::parse(Path::new("crawlers.toml"), text)
            .expect_err(text)
            .to_string();
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn a_rules_folder_without_the_file_gets_the_embedded_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ops = Operators::from_dir(dir.path()).expect("embedded");
    assert!(ops.source.is_none());
    std::fs::write(
        dir.path().join(FILE_NAME),
        "[acme]\nrobots = [\"AcmeBot\"]\n[acme.lists.main]\nurl = \"https://acme.example/bots.json\"\n",
    )
    .expect("write");
    let ops = Operators::from_dir(dir.path()).expect("own file");
    assert_eq!(ops.lists[0].name.as_ref(), "acme.main");
    assert_eq!(ops.claimed_token(b"acmebot/1.0"), Some("AcmeBot"));
}

#[test]
fn ai_crawlers_have_their_kind_and_robots_txt_only_tokens_are_listed() {
    let ops = Operators::embedded();
    let kind = |ua: &str| ops.claim(ua.as_bytes()).and_then(|c| c.ai);
    assert_eq!(kind("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"), Some(AiKind::Training));
    assert_eq!(
        kind("Mozilla/5.0 (compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot)"),
        Some(AiKind::Search)
    );
    assert_eq!(kind("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot"), Some(AiKind::UserFetch));
    assert_eq!(
        kind("Mozilla/5.0 (compatible; ClaudeBot/1.0; +claudebot@anthropic.com)"),
        Some(AiKind::Training)
    );
    assert_eq!(
        kind("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"),
        None
    );
    let training: Vec<&str> = ops.ai_tokens(AiKind::Training).collect();
    for token in [
        "GPTBot",
        "Google-Extended",
        "Applebot-Extended",
        "CCBot",
        "ClaudeBot",
        "Bytespider",
    ] {
        assert!(training.contains(&token), "{token}: {training:?}");
    }
    assert!(!training.contains(&"Googlebot"));
    let fetchers: Vec<&str> = ops.ai_tokens(AiKind::UserFetch).collect();
    assert!(fetchers.contains(&"ChatGPT-User") && fetchers.contains(&"Perplexity-User"));
}
