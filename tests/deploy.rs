//! The files under deploy/ that operators copy: every PromQL expression of
//! the Prometheus rules and the Grafana dashboard parses, and names only
//! metrics crawlgate exports.

use std::collections::BTreeSet;
use std::path::Path;

fn deploy(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The series names crawlgate's exposition can hold, from its `# TYPE`
/// lines (counters end in `_total`, histograms in `_bucket`, `_sum`,
/// `_count`).
fn exported() -> BTreeSet<String> {
    use crawlgate::metrics::{Metrics, Protocol, RequestCounters};
    // A family shows in the exposition once it has a series: one of each.
    let metrics = Metrics::new();
    let classifier = crawlgate::classify::Classifier::new(&crawlgate::rules::RuleLists::embedded())
        .expect("rules");
    RequestCounters::new(&metrics, &classifier).count(crawlgate::route::Route::Forward, None, 200);
    metrics.upstream_error("connect", crawlgate::metrics::Side::Upstream);
    let _open = metrics.connection(Protocol::http1);
    metrics.tls_handshake("ok");
    metrics.certificates([("example.com", 0)]);
    metrics.reloaded(true);
    metrics.log_line_dropped();
    metrics.bot_cache().result("hit").inc();
    // The verification counters exist per operator once a store is built.
    let _ranges = crawlgate::verify::store::RangeStore::new(&metrics);
    let list = crawlgate::metrics::ListLabels { list: "x.y".into() };
    metrics.verify().age.get_or_create(&list).set(1);
    let text = metrics.encode();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            for suffix in suffixes {
                names.insert(format!("{name}{suffix}"));
            }
        }
    }
    assert!(names.len() > 10, "{text}");
    names
}

fn check(expr: &str, exported: &BTreeSet<String>, source: &str) {
    promql_parser::parser::parse(expr).unwrap_or_else(|e| panic!("{source}: {expr}: {e}"));
    let re = regex::Regex::new(r"\bcrawlgate_[a-z_]+").expect("regex");
    for name in re.find_iter(expr) {
        assert!(
            exported.contains(name.as_str()),
            "{source}: {expr} names {} which crawlgate does not export ({exported:?})",
            name.as_str()
        );
    }
}

#[test]
fn the_prometheus_rules_parse_and_name_real_metrics() {
    let exported = exported();
    let rules = deploy("prometheus/crawlgate.rules.yml");
    let exprs: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .map(str::trim)
        .collect();
    assert!(exprs.len() >= 8, "{exprs:?}");
    for expr in exprs {
        check(expr, &exported, "crawlgate.rules.yml");
    }
}

#[test]
fn the_grafana_dashboard_parses_and_names_real_metrics() {
    let exported = exported();
    let dashboard: serde_json::Value =
        serde_json::from_str(&deploy("grafana/crawlgate.json")).expect("valid JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut count = 0;
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            check(expr, &exported, "grafana/crawlgate.json");
            count += 1;
        }
    }
    // The four questions of the README are on the dashboard.
    let all: String = panels.iter().map(|p| p["targets"].to_string()).collect();
    for question in [
        "decision=\\\"block\\\"",
        "class!~\\\"human|none\\\"",
        "histogram_quantile(0.99",
        "code=\\\"5xx\\\"",
    ] {
        assert!(all.contains(question), "the dashboard lacks {question}");
    }
    assert!(count >= 10, "{count} queries");
}
