//! The canonical redirect on arbitrary host, path and query: no panic, the
//! Location is a valid header value and URI, stays inside the allow-list,
//! and redirecting it again is the identity.
#![no_main]

use crawlgate::canonical::{location, split_authority};
use crawlgate::config::{HttpsRedirect, RedirectConfig, WwwMode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut parts = text.splitn(3, '\u{1}');
    let (host, path, query) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or("/"),
        parts.next(),
    );
    let www = [WwwMode::Apex, WwwMode::Www, WwwMode::Off][usize::from(mode % 3)];
    let listed = mode & 4 != 0;
    let hosts: Vec<Box<str>> = if listed {
        vec!["example.com".into(), "www.example.com".into()]
    } else {
        Vec::new()
    };
    let https = (mode & 16 != 0).then_some(HttpsRedirect {
        port: (mode & 32 != 0).then_some(8443),
    });
    let config = RedirectConfig {
        https,
        www,
        strip_www_path: mode & 8 == 0,
        hosts,
    };
    // Only what hyper hands over: a request-target parsed as path and query.
    let target = format!(
        "{path}{}",
        query.map(|q| format!("?{q}")).unwrap_or_default()
    );
    let Ok(pq) = target.parse::<http::uri::PathAndQuery>() else {
        return;
    };
    if !pq.path().starts_with('/') {
        return;
    }
    if let Some(loc) = location(&config, "http", host, pq.path(), pq.query()) {
        // As the service turns it into a header (obs-text allowed, as the
        // path is copied byte for byte).
        assert!(http::HeaderValue::try_from(loc.clone()).is_ok(), "{loc:?}");
        assert!(
            !loc.bytes().any(|b| b.is_ascii_control() || b == b' '),
            "{loc:?}"
        );
        let (scheme, rest) = loc.split_once("://").expect("absolute");
        let slash = rest.find('/').expect("a path");
        let (authority, target) = rest.split_at(slash);
        let (target_host, _) = split_authority(authority).expect("valid host");
        if listed {
            let bare = target_host.trim_end_matches('.').to_ascii_lowercase();
            assert!(bare == "example.com" || bare == "www.example.com", "{loc}");
        }
        let (p2, q2) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        assert_eq!(location(&config, scheme, authority, p2, q2), None, "{loc}");
    }
});
