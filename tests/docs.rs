//! The reference documents cannot drift from the code: docs/configuration.md
//! is what `cli::reference` makes of deploy/crawlgate.toml (itself checked
//! against every key of the config's types), and docs/metrics-and-logs.md
//! names every metric crawlgate exports and every field of its access log,
//! as a real crawlgate writes them, and no metric it does not export.
//!
//! After changing deploy/crawlgate.toml, refresh the reference with
//! `CRAWLGATE_UPDATE_DOCS=1 cargo test --test docs`.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use support::metrics::exported;
use support::{get, Proxy, Upstream};

fn doc_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

fn read(name: &str) -> String {
    let path = doc_path(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_configuration_reference_is_made_from_the_example() {
    let made = crawlgate::cli::reference::configuration();
    let path = doc_path("docs/configuration.md");
    if std::env::var_os("CRAWLGATE_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &made).expect("write docs/configuration.md");
        return;
    }
    let committed = read("docs/configuration.md");
    if committed != made {
        let line = committed
            .lines()
            .zip(made.lines())
            .position(|(a, b)| a != b)
            .map_or(committed.lines().count().min(made.lines().count()), |n| n);
        panic!(
            "docs/configuration.md differs from deploy/crawlgate.toml's reference from line {}; \
             refresh it with `CRAWLGATE_UPDATE_DOCS=1 cargo test --test docs`",
            line + 1
        );
    }
    // And what it is made from names every key (the example is checked
    // against the config's types in src/config/tests.rs).
    for key in crawlgate::config::keys() {
        assert!(
            committed.contains(&format!("### `{key}`")) || committed.contains(&format!("`{key}`")),
            "{key}"
        );
    }
}

/// The metric names a document mentions: `crawlgate_` and then lower-case
/// letters, digits and `_`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crawlgate_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let before = rest[..at].chars().next_back();
        // `crawlgate::verify` and words that merely end in it are not names.
        // `crawlgate_<version>.deb`, `crawlgate_*.deb`: a file, not a name.
        let name = tail[..end].trim_end_matches('_');
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && name.len() > "crawlgate_".len()
        {
            names.insert(name.to_owned());
        }
        rest = &tail[end..];
    }
    names
}

#[test]
fn every_exported_metric_is_documented_and_every_documented_one_exported() {
    let exported = exported();
    let reference = read("docs/metrics-and-logs.md");
    let documented = metric_names(&reference);
    // A histogram is documented by its name, exported as its three series.
    let family = |name: &str| -> String {
        ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name)
            .to_owned()
    };
    let families: BTreeSet<String> = exported.iter().map(|n| family(n)).collect();
    let missing: Vec<&String> = families.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "docs/metrics-and-logs.md does not describe {missing:?}"
    );
    // Every document, not only the reference, names only real metrics.
    let mut texts = vec![("README.md".to_owned(), read("README.md"))];
    for entry in std::fs::read_dir(doc_path("docs")).expect("docs/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = format!("docs/{}", path.file_name().expect("name").to_string_lossy());
            texts.push((name.clone(), read(&name)));
        }
    }
    for (name, text) in texts {
        for metric in metric_names(&text) {
            assert!(
                families.contains(&metric) || exported.contains(&metric),
                "{name} names {metric}, which crawlgate does not export ({families:?})"
            );
        }
    }
}

/// The access log's fields, from the lines a real crawlgate writes in both
/// formats: a forwarded request, a robot's blocked one, and one whose
/// upstream is gone (for the error fields).
async fn log_fields(format: &str) -> BTreeSet<String> {
    let upstream = Upstream::start().await;
    let toml = format!("[log]\nformat = \"{format}\"\nfile = \"access.log\"\n");
    let proxy = Proxy::start(&toml, &upstream.url()).await;
    let log = proxy.config_path.with_file_name("access.log");
    let browser = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
    assert_eq!(
        get(proxy.addr, "example.com", "/", Some(browser))
            .await
            .status,
        200
    );
    let robot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    assert_eq!(
        get(proxy.addr, "example.com", "/?do=x", Some(robot))
            .await
            .status,
        403
    );
    let mut lines = support::wait_lines(&log, 2).await;
    proxy.stop().await;
    // The same log, with the upstream gone.
    let dead = format!("http://{}", support::process::free_addr());
    let proxy = Proxy::start(&toml, &dead).await;
    let log = proxy.config_path.with_file_name("access.log");
    assert_eq!(
        get(proxy.addr, "example.com", "/", Some(browser))
            .await
            .status,
        502
    );
    lines.extend(support::wait_lines(&log, 1).await);
    proxy.stop().await;
    let mut fields = BTreeSet::new();
    for line in &lines {
        if format == "json" {
            let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            fields.extend(value.as_object().expect("an object").keys().cloned());
        } else {
            // crawlgate's own fields follow the User-Agent's closing quote as
            // `name=value` (a quote inside a field is written `\x22`).
            let at = line.find("\" class=").expect("crawlgate's fields");
            let ours = &line[at + 2..];
            for word in ours.split(' ') {
                if let Some((name, _)) = word.split_once('=') {
                    if name.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !name.is_empty()
                    {
                        fields.insert(name.to_owned());
                    }
                }
            }
        }
    }
    fields
}

#[tokio::test]
async fn every_access_log_field_is_documented() {
    let reference = read("docs/metrics-and-logs.md");
    for format in ["json", "combined"] {
        let fields = log_fields(format).await;
        assert!(
            fields.contains("decision") && fields.contains("class"),
            "{format}: {fields:?}"
        );
        if format == "json" {
            assert!(fields.len() >= 20, "{fields:?}");
        } else {
            assert!(
                fields.contains("error") && fields.contains("total"),
                "{fields:?}"
            );
        }
        let missing: Vec<&String> = fields
            .iter()
            .filter(|f| !reference.contains(&format!("`{f}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/metrics-and-logs.md does not describe the {format} log's {missing:?}"
        );
    }
}
