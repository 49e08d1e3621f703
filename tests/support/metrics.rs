//! The metric names crawlgate exports, for the tests that check what
//! names them (deploy/'s rules and dashboard, docs/).

use std::collections::BTreeSet;

/// The series names crawlgate's exposition can hold, from its `# TYPE`
/// lines (counters end in `_total`, histograms in `_bucket`, `_sum`,
/// `_count`).
pub fn exported() -> BTreeSet<String> {
    use crawlgate::metrics::{Metrics, Protocol, RequestCounters};
    // A family shows in the exposition once it has a series: one of each.
    let metrics = Metrics::new();
    let classifier = crawlgate::classify::Classifier::new(&crawlgate::rules::RuleLists::embedded())
        .expect("rules");
    RequestCounters::new(&metrics, &classifier).count(
        crawlgate::route::Route::Forward,
        None,
        200,
        true,
    );
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
    metrics.verify().prefixes.get_or_create(&list).set(1);
    let fetch = crawlgate::metrics::ListResultLabels {
        list: "x.y".into(),
        result: "ok",
    };
    metrics.verify().fetches.get_or_create(&fetch).inc();
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
