//! Properties over generated input (proptest): the canonical redirect never
//! reflects anything unsafe and is idempotent; parsers never panic; the PHP
//! name parser agrees with real PHP on random names.

use crawlgate::canonical::{location, split_authority};
use crawlgate::classify::Classifier;
use crawlgate::config::{RedirectConfig, WwwMode};
use crawlgate::query::{action_param, nette_name, php_name};
use crawlgate::rules::RuleLists;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

fn config(www: WwwMode, hosts: &[&str]) -> RedirectConfig {
    RedirectConfig {
        https: None,
        www,
        strip_www_path: true,
        hosts: hosts.iter().map(|&h| h.into()).collect(),
    }
}

/// Hosts: mostly plausible, sometimes hostile.
fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        "(www\\.|WWW\\.)?[a-z0-9-]{1,12}(\\.[a-z]{2,6}){1,2}\\.?(:[0-9]{1,5})?",
        "[ -~]{0,30}",
        "[\\x00-\\xff]{0,20}".prop_map(|s: String| s),
    ]
}

/// Paths and queries as a request-target may carry them (visible ASCII).
fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        "(/www){0,3}(/[!-~&&[^?#\"<>\\\\^`{|}]]{0,10}){0,4}",
        "/[!-~&&[^?#\"<>\\\\^`{|}]]{0,40}",
    ]
}

fn query() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[!-~&&[^#\"<>\\\\^`{|}]]{0,40}")
}

fn classifier() -> &'static Classifier {
    static CLASSIFIER: std::sync::OnceLock<Classifier> = std::sync::OnceLock::new();
    CLASSIFIER.get_or_init(|| Classifier::new(&RuleLists::embedded()).expect("rules"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn redirect_targets_are_safe_and_canonical(h in host(), p in path(), q in query(), mode in 0..3u8, listed in any::<bool>()) {
        let www = [WwwMode::Apex, WwwMode::Www, WwwMode::Off][mode as usize];
        let allow: &[&str] = if listed { &["example.com", "www.example.com"] } else { &[] };
        let c = config(www, allow);
        // Only targets that can arrive: hyper parses them into a Uri first.
        let target = format!("{p}{}", q.as_deref().map(|q| format!("?{q}")).unwrap_or_default());
        prop_assume!(target.parse::<http::uri::PathAndQuery>().is_ok());
        if let Some(loc) = location(&c, "http", &h, &p, q.as_deref()) {
            prop_assert!(!loc.bytes().any(|b| b.is_ascii_control() || b == b' '), "{loc:?}");
            prop_assert!(http::HeaderValue::from_str(&loc).is_ok());
            let uri: http::Uri = loc.parse().map_err(|e| TestCaseError::fail(format!("{loc}: {e}")))?;
            let authority = uri.authority().expect("absolute").as_str();
            let (target_host, _) = split_authority(authority).expect("valid host");
            if listed {
                let bare = target_host.trim_end_matches('.').to_ascii_lowercase();
                prop_assert!(allow.contains(&bare.as_str()), "{loc} is outside the allow-list");
            }
            // Redirecting the canonical address is the identity.
            prop_assert_eq!(location(&c, "http", authority, uri.path(), uri.query()), None, "{}", loc);
        }
    }

    #[test]
    fn classifier_and_query_parsers_take_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = classifier().classify(Some(&bytes));
        let _ = action_param(&bytes, &["do", "_fid"]);
        let mut buf = [0u8; 64];
        let _ = php_name(&bytes, &mut buf);
        let _ = nette_name(&bytes, &mut buf);
    }
}

/// Random raw parameter names, batch-checked against real PHP's
/// `parse_str` and a Nette-style parse (needs `php`; see
/// `crawlgate::testing::php_binary`).
#[test]
fn php_name_parser_agrees_with_real_php_on_random_names() {
    let Some(php) = crawlgate::testing::php_binary() else {
        return;
    };
    let alphabet: Vec<&str> = vec![
        "d", "o", "_", "f", "i", "a", ".", " ", "+", "[", "]", "%5B", "%5b", "%5D", "%00", "%20",
        "%2E", "%64", "%6F", "%5F", "%", "%2", "%zz", "x",
    ];
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec(proptest::sample::select(alphabet), 1..10);
    let mut names = Vec::new();
    while names.len() < 3000 {
        let tree = strategy.new_tree(&mut runner).expect("value");
        names.push(tree.current().concat());
    }
    let script = r#"
        foreach (explode("\n", rtrim(stream_get_contents(STDIN), "\n")) as $raw) {
            parse_str($raw . '=1', $a);
            $s = str_replace(['%5B', '%5b'], '[', $raw . '=1');
            $s = preg_replace('#&([^[&=]+)([^&]*)#', '&0[$1]$2', '&' . $s);
            parse_str($s, $r);
            $n = array_filter(array_keys($r[0] ?? []), 'is_string');
            echo bin2hex(implode("\x01", array_map('strval', array_keys($a)))), "\t", bin2hex(implode("\x01", $n)), "\n";
        }
    "#;
    let input: String = names.iter().map(|n| format!("{n}\n")).collect();
    let out = crawlgate::testing::run_with_stdin(&php, &["-r", script], input.as_bytes());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), names.len());
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut buf = [0u8; 256];
    for (name, line) in names.iter().zip(lines) {
        let (php_keys, nette_keys) = line.split_once('\t').expect("two columns");
        let ours_php = php_name(name.as_bytes(), &mut buf)
            .map(&hex)
            .unwrap_or_default();
        assert_eq!(ours_php, php_keys, "PHP name of {name:?}");
        let ours_nette = nette_name(name.as_bytes(), &mut buf)
            .map(&hex)
            .unwrap_or_default();
        assert_eq!(ours_nette, nette_keys, "Nette name of {name:?}");
    }
}
