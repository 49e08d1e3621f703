//! Criterion benchmarks of the per-request decision work: User-Agent
//! classification, the PHP-aware action-parameter scan, and the whole
//! `policy::decide` on a realistic mix. Run: `cargo bench --bench decide`.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use crawlgate::classify::Classifier;
use crawlgate::config::{RedirectConfig, WwwMode};
use crawlgate::policy::{decide, Facts, Policy};
use crawlgate::query::action_param;
use crawlgate::rules::RuleLists;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use http::Method;

/// A mix of real-world shapes: mainstream browsers, in-app browsers,
/// crawlers, HTTP libraries.
const UAS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/130.0.6723.102 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/487.0.0.53.79;]",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 356.0.0.41.94",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36",
    "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
    "curl/8.5.0",
    "python-requests/2.32.3",
    "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
];

fn classifier() -> Classifier {
    Classifier::new(&RuleLists::embedded()).expect("embedded rules compile")
}

fn bench_classify(c: &mut Criterion) {
    let classifier = classifier();
    let mut group = c.benchmark_group("classify");
    group.throughput(Throughput::Elements(UAS.len() as u64));
    group.bench_function("mixed_14_uas", |b| {
        b.iter(|| {
            for ua in UAS {
                black_box(classifier.classify(Some(black_box(ua.as_bytes()))));
            }
        })
    });
    group.finish();
}

fn bench_action_param(c: &mut Criterion) {
    let blocked = ["do", "_fid"];
    let queries: &[&str] = &[
        "id=123",
        "page=2&sort=price&order=asc",
        "do=vote",
        "a=1&%64o[]=x",
        "utm_source=newsletter&utm_medium=email&utm_campaign=black-friday-2026",
    ];
    let mut group = c.benchmark_group("action_param");
    group.throughput(Throughput::Elements(queries.len() as u64));
    group.bench_function("mixed_5_queries", |b| {
        b.iter(|| {
            for q in queries {
                black_box(action_param(black_box(q.as_bytes()), &blocked));
            }
        })
    });
    group.finish();
}

fn bench_decide(c: &mut Criterion) {
    let policy = Policy {
        classifier: std::sync::Arc::new(classifier()),
        blocked_params: vec!["do".into(), "_fid".into()],
        redirect: RedirectConfig {
            https: None,
            www: WwwMode::Apex,
            strip_www_path: true,
            hosts: Vec::new(),
        },
        shed: None,
        spoofed: crawlgate::config::Spoofed::Log,
        ai: None,
        sitemaps: false,
        live_classes: Default::default(),
    };
    // (host, path, query, UA index): page views, an action, a redirect, robots.
    let requests: &[(&str, &str, Option<&str>, usize)] = &[
        ("example.com", "/", None, 0),
        ("example.com", "/product/123", Some("ref=home"), 1),
        ("example.com", "/category/shoes", Some("page=2"), 2),
        ("example.com", "/", None, 7),
        ("example.com", "/article", Some("id=5&do=vote"), 8),
        ("www.example.com", "/www/page", Some("id=1"), 3),
        ("example.com", "/robots.txt", None, 10),
    ];
    let mut group = c.benchmark_group("decide");
    group.throughput(Throughput::Elements(requests.len() as u64));
    group.bench_function("mixed_7_requests", |b| {
        b.iter(|| {
            for &(host, path, query, ua) in requests {
                let facts = Facts {
                    method: &Method::GET,
                    scheme: "http",
                    authority: Some(host),
                    path,
                    query,
                    user_agent: Some(UAS[ua].as_bytes()),
                    pressure: Default::default(),
                    cache: None,
                    identity: None,
                    ai: None,
                };
                black_box(decide(black_box(&facts), &policy));
            }
        })
    });
    group.finish();
}

/// A robot's verification on the request path: find the operator its
/// User-Agent claims, then look its address up in a table of every list
/// (14 lists of 100 IPv4 and 100 IPv6 prefixes each: 2,800 in all).
fn bench_verify(c: &mut Criterion) {
    use crawlgate::verify::{by_ranges, Operators, PrefixTable};
    let operators = Operators::embedded();
    let lists: Vec<Vec<ipnet::IpNet>> = (0..operators.lists.len())
        .map(|l| {
            (0..100u32)
                .flat_map(|i| {
                    let v4 = format!("{}.{}.{}.0/27", 20 + l, i / 4, (i % 4) * 64);
                    let v6 = format!("2001:db8:{l:x}:{i:x}::/64");
                    [v4.parse().expect("v4"), v6.parse().expect("v6")]
                })
                .collect()
        })
        .collect();
    let table = PrefixTable::new(&lists);
    let loaded = (1u64 << lists.len()) - 1;
    let googlebot = b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    let gptbot = b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
    let addresses: [std::net::IpAddr; 2] = [
        "21.7.64.9".parse().expect("ip"),
        "2001:db8:3:5::1".parse().expect("ip"),
    ];
    let mut group = c.benchmark_group("verify");
    group.throughput(Throughput::Elements(2));
    group.bench_function("claim_and_ranges_2_robots", |b| {
        b.iter(|| {
            for (ua, ip) in [(&googlebot[..], addresses[0]), (&gptbot[..], addresses[1])] {
                if let Some(claim) = operators.claim(black_box(ua)) {
                    let found = table.lookup(black_box(ip));
                    black_box(by_ranges(&claim, found, loaded, false));
                }
            }
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_classify,
    bench_action_param,
    bench_decide,
    bench_verify
);
criterion_main!(benches);
