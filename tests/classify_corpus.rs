//! The classifier measured on public real-world User-Agent corpora: recall
//! on robots and false positives on browsers, with floors that make a
//! regression fail CI. The numbers are printed (`--nocapture`) and recorded
//! in bench/README.md.

mod support;

use crawlgate::classify::{Classifier, UaClass};
use crawlgate::rules::RuleLists;
use support::corpus::{self, disputed_browser_label, Label};

/// Minimum share of robots caught, per corpus.
fn recall_floor(name: &str) -> f64 {
    match name {
        // 68 entries: one miss is 1.5 points.
        "ua-parser bots" => 0.95,
        _ => 0.97,
    }
}

/// Maximum share of browsers taken for robots (disputed labels excluded),
/// per corpus.
fn fpr_ceiling(name: &str) -> f64 {
    match name {
        "user-agents (npm)" | "top-user-agents" | "omrilotan browsers" => 0.0,
        _ => 0.0003,
    }
}

#[test]
fn recall_and_false_positives_on_public_corpora() {
    let corpora = match corpus::load_all() {
        Ok(c) => c,
        Err(why) => return corpus::missing(&why),
    };
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules compile");
    let mut failures = Vec::new();
    let (mut browsers, mut false_positives) = (0usize, 0usize);
    eprintln!(
        "{:<22} {:>8} {:>9} {:>9}",
        "corpus", "size", "recall", "FPR"
    );
    for c in &corpora {
        let wrong: Vec<&String> = c
            .uas
            .iter()
            .filter(|ua| {
                let class = classifier.classify(Some(ua.as_bytes())).class;
                (class == UaClass::Bot) != (c.label == Label::Bot)
            })
            .collect();
        match c.label {
            Label::Bot => {
                let recall = 1.0 - wrong.len() as f64 / c.uas.len() as f64;
                eprintln!(
                    "{:<22} {:>8} {:>9.4} {:>9}",
                    c.name,
                    c.uas.len(),
                    recall,
                    ""
                );
                if recall < recall_floor(c.name) {
                    failures.push(format!(
                        "{}: recall {recall:.4} < {}; missed e.g. {:?}",
                        c.name,
                        recall_floor(c.name),
                        &wrong[..wrong.len().min(5)]
                    ));
                }
            }
            Label::Browser => {
                browsers += c.uas.len();
                false_positives += wrong.len();
                let undisputed: Vec<&&String> = wrong
                    .iter()
                    .filter(|ua| !disputed_browser_label(ua))
                    .collect();
                let fpr = undisputed.len() as f64 / c.uas.len() as f64;
                eprintln!(
                    "{:<22} {:>8} {:>9} {:>9.5}  ({} flagged, {} of them automation labelled as browser)",
                    c.name,
                    c.uas.len(),
                    "",
                    fpr,
                    wrong.len(),
                    wrong.len() - undisputed.len()
                );
                if fpr > fpr_ceiling(c.name) {
                    failures.push(format!(
                        "{}: FPR {fpr:.5} > {}; e.g. {:?}",
                        c.name,
                        fpr_ceiling(c.name),
                        &undisputed[..undisputed.len().min(5)]
                    ));
                }
            }
        }
    }
    let pooled = false_positives as f64 / browsers as f64;
    eprintln!("all browsers, raw: {false_positives} of {browsers} flagged, FPR {pooled:.5}");
    if pooled > 0.0003 {
        failures.push(format!("pooled raw FPR {pooled:.5} > 0.0003"));
    }
    assert!(
        failures.is_empty(),
        "classifier regressions:\n{}",
        failures.join("\n")
    );
}
