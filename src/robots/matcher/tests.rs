use super::*;
use crate::config::AiConfig;
use crate::robots::Robots;
use crate::verify::Operators;

/// The deciding rule for `agent` and `path`, as `Allow: …`/`Disallow: …`,
/// or `""` when no rule decides.
fn rule(body: &str, agent: &str, path: &str) -> String {
    let txt = RobotsTxt::parse(body.as_bytes());
    txt.decide(txt.group(agent), path.as_bytes())
        .map(|m| m.to_string())
        .unwrap_or_default()
}

fn allowed(body: &str, agent: &str, path: &str) -> bool {
    let txt = RobotsTxt::parse(body.as_bytes());
    txt.allowed(txt.group(agent), path.as_bytes())
}

#[test]
fn longest_match_wins_and_allow_wins_a_tie() {
    let body = "User-agent: *\nAllow: /\nDisallow: /private\nAllow: /private/open\nDisallow: /same\nAllow: /same\n";
    assert_eq!(rule(body, "x", "/page"), "Allow: /");
    assert_eq!(rule(body, "x", "/private/x"), "Disallow: /private");
    assert_eq!(rule(body, "x", "/private/open/x"), "Allow: /private/open");
    assert_eq!(rule(body, "x", "/same"), "Allow: /same");
    assert!(allowed(body, "x", "/same/more"));
}

#[test]
fn wildcards_and_the_end_anchor() {
    let body = "User-agent: *\nDisallow: /*.pdf$\nDisallow: /*ab\nDisallow: /x$y\nDisallow: /**z\n";
    assert!(!allowed(body, "x", "/docs/a.pdf"));
    assert!(allowed(body, "x", "/docs/a.pdf?x=1"));
    assert!(allowed(body, "x", "/docs/a.pdfx"));
    // The `*` must retry past an earlier partial match.
    assert!(!allowed(body, "x", "/aab"));
    assert!(!allowed(body, "x", "/a/b/xab"));
    assert!(allowed(body, "x", "/aa"));
    // `$` inside a pattern is a plain character.
    assert!(!allowed(body, "x", "/x$y"));
    assert!(allowed(body, "x", "/xy"));
    assert!(!allowed(body, "x", "/q/z"));
    // `$` alone matches nothing (a path is never empty); `/$` only `/`.
    let body = "User-agent: *\nDisallow: $\nDisallow: /$\n";
    assert_eq!(rule(body, "x", "/"), "Disallow: /$");
    assert_eq!(rule(body, "x", "/a"), "");
}

#[test]
fn percent_encoding_is_compared_as_rfc_9309_says() {
    let body =
        "User-agent: *\nDisallow: /%41b\nDisallow: /x%2fy\nDisallow: /caf\u{e9}\nDisallow: /~u\n";
    // Unreserved octets are decoded on both sides.
    assert!(!allowed(body, "x", "/Ab"));
    assert!(!allowed(body, "x", "/%41b"));
    assert!(!allowed(body, "x", "/%41%62"));
    assert!(!allowed(body, "x", "/%7Eu"));
    // Reserved ones are compared encoded, hex without regard to case.
    assert!(!allowed(body, "x", "/x%2Fy"));
    assert!(!allowed(body, "x", "/x%2fy"));
    assert!(allowed(body, "x", "/x/y"));
    // Non-ASCII in the file matches its UTF-8 percent-encoding.
    assert!(!allowed(body, "x", "/caf%C3%A9"));
    assert!(!allowed(body, "x", "/caf%c3%a9"));
    assert!(allowed(body, "x", "/cafe"));
    // A `*` takes whole octets, never part of a `%XX`.
    let body = "User-agent: *\nDisallow: /*2F\n";
    assert!(allowed(body, "x", "/%2F"));
    assert!(!allowed(body, "x", "/a2F"));
    // A `%` without two hex digits is itself.
    let body = "User-agent: *\nDisallow: /100%\nDisallow: /%zz\n";
    assert!(!allowed(body, "x", "/100%"));
    assert!(!allowed(body, "x", "/%zz"));
    assert!(allowed(body, "x", "/100"));
}

#[test]
fn priority_is_the_pattern_as_written() {
    // `/%41` is four octets as written, `/*$` three: the Allow wins.
    let body = "User-agent: *\nDisallow: /*$\nAllow: /%41\n";
    assert_eq!(rule(body, "x", "/A"), "Allow: /%41");
    let body = "User-agent: *\nDisallow: /*$\nAllow: /A\n";
    assert_eq!(rule(body, "x", "/A"), "Disallow: /*$");
    // Non-ASCII counts as its escape: `/é` is seven octets.
    let body = "User-agent: *\nAllow: /\u{e9}\nDisallow: /%C3%A9\n";
    assert_eq!(rule(body, "x", "/%C3%A9"), "Allow: /\u{e9}");
}

#[test]
fn empty_disallow_allows_everything_and_robots_txt_is_always_allowed() {
    let body = "User-agent: *\nDisallow:\n";
    let txt = RobotsTxt::parse(body.as_bytes());
    assert!(txt.group("x").applies());
    assert_eq!(txt.decide(txt.group("x"), b"/any"), None);
    let body = "User-agent: *\nDisallow: /\n";
    assert_eq!(rule(body, "x", "/"), "Disallow: /");
    assert_eq!(rule(body, "x", "/robots.txt"), "");
    assert_eq!(rule(body, "x", "/robots.txt?x=1"), "");
    assert_eq!(rule(body, "x", "/robots.txt/x"), "Disallow: /");
    assert_eq!(rule(body, "x", ""), "Disallow: /", "empty is /");
}

#[test]
fn the_named_group_else_star_else_none() {
    let body = "User-agent: Googlebot\nDisallow: /g\n\nUser-agent: *\nDisallow: /all\n";
    assert_eq!(rule(body, "googlebot", "/g"), "Disallow: /g");
    assert_eq!(rule(body, "GOOGLEBOT", "/all"), "", "star not used");
    assert_eq!(rule(body, "bingbot", "/all"), "Disallow: /all");
    assert_eq!(rule(body, "bingbot", "/g"), "");
    let txt = RobotsTxt::parse(b"User-agent: Googlebot\nDisallow: /\n");
    assert_eq!(txt.group("bingbot"), GroupId::NONE);
    assert!(!txt.group("bingbot").applies());
    assert!(txt.allowed(txt.group("bingbot"), b"/"));
    // A group naming the robot with no rules still beats `*`.
    let body = "User-agent: *\nDisallow: /\n\nUser-agent: Googlebot\nSitemap: /s\n";
    assert!(allowed(body, "Googlebot", "/x"));
    assert!(!allowed(body, "bingbot", "/x"));
    // An empty token never names a group.
    assert_eq!(
        RobotsTxt::parse(b"User-agent: /x\nDisallow: /\n").group(""),
        GroupId::NONE
    );
}

#[test]
fn user_agent_lines_name_their_product_token() {
    let body = "User-agent: Googlebot/2.1 (+http://www.google.com/bot.html)\nDisallow: /a\n\nUser-agent: * # all\nDisallow: /b\n\nUser-agent: *bot\nDisallow: /c\n";
    assert!(!allowed(body, "Googlebot", "/a"));
    assert!(!allowed(body, "other", "/b"));
    assert!(allowed(body, "other", "/c"), "`*bot` names no robot");
    assert!(allowed(body, "bot", "/c"));
    // `* x` is still every robot (Google's reading).
    assert!(!allowed("User-agent: * x\nDisallow: /\n", "y", "/"));
    // The token given is compared whole.
    assert!(allowed(body, "Googlebot/2.1", "/a"));
}

#[test]
fn groups_naming_one_robot_are_merged() {
    let body = "User-agent: a\nDisallow: /x\n\nUser-agent: b\nUser-agent: A\nDisallow: /y\nAllow: /y/ok\n\nUser-agent: *\nDisallow: /\n";
    assert!(!allowed(body, "a", "/x"));
    assert!(!allowed(body, "a", "/y"));
    assert!(allowed(body, "a", "/y/ok"));
    assert!(allowed(body, "a", "/z"));
    assert!(allowed(body, "b", "/x"));
    assert!(!allowed(body, "b", "/y"));
    // Lines in a row start one group; blank lines, Sitemap and unknown
    // records between them do not end it.
    let body = "User-agent: a\n\nSitemap: http://e.com/s.xml\nCrawl-delay: 1\nUser-agent: b\nDisallow: /\nUser-agent: c\nAllow: /\n";
    assert!(!allowed(body, "a", "/x"));
    assert!(!allowed(body, "b", "/x"));
    assert!(allowed(body, "c", "/x"));
    // The same token twice in one group counts once.
    let body = "User-agent: a\nUser-agent: A\nDisallow: /x\n";
    let txt = RobotsTxt::parse(body.as_bytes());
    assert_eq!(txt.agents.len(), 1);
    assert_eq!(txt.agent_groups.len(), 1);
}

#[test]
fn rules_before_any_user_agent_are_ignored_and_counted() {
    let body = "Disallow: /\nAllow: /x\nnonsense\n# comment\n\n   \nUser-agent: *\nDisallow: /y\n";
    let txt = RobotsTxt::parse(body.as_bytes());
    assert_eq!(txt.ignored_lines(), 3);
    assert!(txt.allowed(txt.group("a"), b"/z"));
    assert_eq!(
        txt.decide(txt.group("a"), b"/y"),
        Some(Match {
            allowed: false,
            pattern: "/y",
            line: 8
        })
    );
}

#[test]
fn keys_as_google_reads_them() {
    let body = "USER-AGENT: a\ndisalow: /typo\nDisallow /nocolon\nAllow\t/tab\nDisallow: /a # comment\nDisallow / two words\nuseragent: b\nDisallow: /b\n";
    let txt = RobotsTxt::parse(body.as_bytes());
    assert_eq!(txt.ignored_lines(), 1, "three words without a colon");
    let a = txt.group("a");
    assert!(!txt.allowed(a, b"/typo"));
    assert!(!txt.allowed(a, b"/nocolon"));
    assert_eq!(
        txt.decide(a, b"/a").map(|m| m.to_string()),
        Some("Disallow: /a".to_owned())
    );
    assert!(txt.allowed(a, b"/two"));
    assert!(!txt.allowed(txt.group("b"), b"/b"));
    assert!(txt.allowed(a, b"/b"), "b's group is its own");
    // A key with no name is unreadable.
    assert_eq!(RobotsTxt::parse(b": /x\n").ignored_lines(), 1);
}

#[test]
fn allow_of_an_index_page_allows_its_folder() {
    let body = "User-agent: *\nDisallow: /d/\nAllow: /d/index.html\n";
    assert_eq!(rule(body, "x", "/d/"), "Allow: /d/index.html");
    assert_eq!(rule(body, "x", "/d/index.html"), "Allow: /d/index.html");
    assert_eq!(rule(body, "x", "/d/x"), "Disallow: /d/");
}

#[test]
fn bom_and_every_line_end() {
    for body in [
        "\u{feff}User-agent: a\nDisallow: /x\n",
        "User-agent: a\r\nDisallow: /x\r\n",
        "User-agent: a\rDisallow: /x\r",
        "User-agent: a\r\n\rDisallow: /x",
    ] {
        let txt = RobotsTxt::parse(body.as_bytes());
        assert!(!txt.allowed(txt.group("a"), b"/x"), "{body:?}");
        assert_eq!(txt.ignored_lines(), 0, "{body:?}");
    }
    // A partial BOM is skipped too; line numbers count CRLF once.
    let txt = RobotsTxt::parse(b"\xef\xbbUser-agent: a\r\n\r\nDisallow: /x\n");
    assert_eq!(txt.decide(txt.group("a"), b"/x").map(|m| m.line), Some(3));
}

#[test]
fn size_limits() {
    // A line is read up to MAX_LINE bytes.
    let long = format!("User-agent: a\nDisallow: /{}\n", "x".repeat(MAX_LINE * 2));
    let txt = RobotsTxt::parse(long.as_bytes());
    let pattern = txt.decide(txt.group("a"), &long.as_bytes()[24..]);
    assert_eq!(pattern.map(|m| m.pattern.len()), Some(MAX_LINE - 10));
    // Past MAX_BYTES nothing is read, and the line the limit cuts neither.
    let mut body = b"User-agent: a\nDisallow: /x\n".to_vec();
    body.resize(MAX_BYTES - 10, b'\n');
    body.extend_from_slice(b"Disallow: /cut-in-two\nDisallow: /after\n");
    let txt = RobotsTxt::parse(&body);
    let a = txt.group("a");
    assert!(!txt.allowed(a, b"/x"));
    assert!(txt.allowed(a, b"/c"), "not read as /c");
    assert!(txt.allowed(a, b"/cut-in-two"));
    assert!(txt.allowed(a, b"/after"));
}

#[test]
fn junk_never_panics() {
    let mut junk: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    junk.extend_from_slice(b"\nUser-agent: *\nDisallow: /%\nDisallow: /%4\nAllow: *%\xff$\n");
    let txt = RobotsTxt::parse(&junk);
    let g = txt.group("\u{0}\u{ff}");
    for path in [&b""[..], b"/", b"%", b"/%4", b"/%\xff", &junk[..300]] {
        let _ = txt.decide(g, path);
    }
    // A GroupId from another file is harmless.
    let other = RobotsTxt::parse(b"");
    assert_eq!(other.decide(g, b"/"), None);
}

/// The deciding rule for the body crawlgate serves.
fn synthesized(robots: &Robots, agent: &str, path: &str) -> String {
    let txt = RobotsTxt::parse(robots.fixed_body());
    txt.decide(txt.group(agent), path.as_bytes())
        .map(|m| m.to_string())
        .unwrap_or_default()
}

#[test]
fn crawlgates_own_robots_txt() {
    let defaults = ["/admin/", "/api/", "/cron/"].map(String::from).to_vec();
    let robots = Robots::new(&["do", "_fid"], &defaults, &[], None);
    for (path, want) in [
        ("/page", "Allow: /"),
        ("/robots.txt", ""),
        ("/page?do=logout", "Disallow: /*?do="),
        ("/?do=1", "Disallow: /*?do="),
        ("/p?a=1&do=2", "Disallow: /*&do="),
        ("/p?x_fid=1", "Allow: /"),
        ("/p?_fid=1", "Disallow: /*?_fid="),
        ("/p?a&_fid=", "Disallow: /*&_fid="),
        ("/p?undo=1", "Allow: /"),
        ("/p?do", "Allow: /"),
        ("/admin/users", "Disallow: /admin/"),
        ("/admin", "Allow: /"),
    ] {
        assert_eq!(synthesized(&robots, "Googlebot", path), want, "{path}");
        assert_eq!(synthesized(&robots, "GPTBot", path), want, "{path}");
    }

    let ai = AiConfig {
        training: Some(false),
        search: None,
        user_fetch: Some(true),
        enforce: false,
    };
    let robots = Robots::new(&["do"], &[], &[], None).with_ai(&ai, &Operators::embedded());
    for agent in ["GPTBot", "gptbot", "CCBot", "ClaudeBot", "Google-Extended"] {
        assert_eq!(
            synthesized(&robots, agent, "/page"),
            "Disallow: /",
            "{agent}"
        );
        assert_eq!(synthesized(&robots, agent, "/robots.txt"), "", "{agent}");
    }
    for agent in ["Googlebot", "ChatGPT-User", "OAI-SearchBot"] {
        assert_eq!(synthesized(&robots, agent, "/page"), "Allow: /", "{agent}");
        assert_eq!(
            synthesized(&robots, agent, "/a?b&do=1"),
            "Disallow: /*&do=",
            "{agent}"
        );
    }
    assert_eq!(
        RobotsTxt::parse(robots.fixed_body()).ignored_lines(),
        0,
        "{:?}",
        robots.fixed_body()
    );
}
