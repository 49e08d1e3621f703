//! The classifier measured on public real-world User-Agent corpora, per
//! source, two ways:
//!
//! * **tuned**: the rules as shipped, on every source (most of them were
//!   looked at while the rules were written, so these figures flatter);
//! * **left out** (leave-one-source-out): for each source, the rules that
//!   only that source gives evidence for are dropped, and each structural
//!   signal is switched on only if the *other* sources say it pays; then
//!   that source is scored. This is what a source the rules never saw
//!   would get.
//!
//! Floors on both make a regression fail CI. The numbers are printed
//! (`--nocapture`) and recorded in `bench/README.md` and `rules/README.md`.

mod support;

use std::collections::BTreeSet;

use crawlgate::classify::{Classifier, Reason, UaClass};
use crawlgate::rules::{Kind, RuleLists, Signal};
use support::corpus::{self, disputed_browser_label, Corpus, Label};

/// Minimum share of robots caught, per corpus: (tuned, left out).
fn recall_floor(name: &str) -> (f64, f64) {
    match name {
        // 68 and 38 entries: one miss is 1.5 and 2.6 points.
        "ua-parser bots" | "express-useragent bots" => (0.95, 0.90),
        _ => (0.97, 0.95),
    }
}

/// Maximum share of browsers taken for robots (disputed labels excluded),
/// per corpus, tuned and left out.
fn fpr_ceiling(name: &str) -> f64 {
    match name {
        "user-agents (npm)" | "top-user-agents" => 0.0,
        "isbot browsers.txt" => 0.001,
        // 500 entries: one is 0.2 %.
        // 502 entries, test strings among them ("Hello, world").
        "omrilotan browsers" => 0.02,
        "ua-parser-js tests" => 0.01,
        _ => 0.0003,
    }
}

/// Bot or not, per UA.
fn verdicts(classifier: &Classifier, corpus: &Corpus) -> Vec<bool> {
    corpus
        .uas
        .iter()
        .map(|ua| classifier.classify(Some(ua.as_bytes())).class == UaClass::Bot)
        .collect()
}

/// Recall for robots; for browsers, the false-positive rate raw and without
/// the disputed labels.
#[derive(Clone, Copy, Debug)]
struct Score {
    rate: f64,
    undisputed: f64,
    flagged: usize,
}

fn score(corpus: &Corpus, bots: &[bool]) -> Score {
    let n = corpus.uas.len().max(1) as f64;
    match corpus.label {
        Label::Bot => {
            let caught = bots.iter().filter(|&&b| b).count();
            Score {
                rate: caught as f64 / n,
                undisputed: caught as f64 / n,
                flagged: corpus.uas.len() - caught,
            }
        }
        Label::Browser | Label::App => {
            let flagged: Vec<&String> = corpus
                .uas
                .iter()
                .zip(bots)
                .filter(|(_, &b)| b)
                .map(|(ua, _)| ua)
                .collect();
            let undisputed = flagged
                .iter()
                .filter(|ua| !disputed_browser_label(ua))
                .count();
            Score {
                rate: flagged.len() as f64 / n,
                undisputed: undisputed as f64 / n,
                flagged: flagged.len(),
            }
        }
    }
}

/// The sources each rule decided for: the bot token or exception that
/// decided, and for a UA without a bot token its first browser-grammar mark.
fn evidence(classifier: &Classifier, corpora: &[Corpus]) -> Vec<BTreeSet<usize>> {
    let mut seen = vec![BTreeSet::new(); classifier.rules().len()];
    for (ci, c) in corpora.iter().enumerate() {
        for ua in &c.uas {
            let ua = ua.as_bytes();
            match classifier.classify(Some(ua)).reason {
                Reason::Token(i) => {
                    seen[i].insert(ci);
                }
                Reason::NoBotToken(exception) => {
                    if let Some(i) = exception {
                        seen[i].insert(ci);
                    }
                    if let Some(m) = classifier.first_shape_mark(ua) {
                        seen[m].insert(ci);
                    }
                }
                Reason::DeviceModel(i) => {
                    seen[i].insert(ci);
                    if let Some(m) = classifier.first_shape_mark(ua) {
                        seen[m].insert(ci);
                    }
                }
                Reason::Structure(_) | Reason::EmptyUserAgent => {}
            }
        }
    }
    seen
}

/// The shortcuts (the quick check, the browser heads, the shape fast path)
/// change no verdict and no reason on any UA of any source: the same as
/// scanning every UA whole.
#[test]
fn the_shortcuts_agree_with_the_full_scan_on_every_ua() {
    let corpora = match corpus::load_all() {
        Ok(c) => c,
        Err(why) => return corpus::missing(&why),
    };
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules compile");
    let mut checked = 0;
    for c in &corpora {
        for ua in &c.uas {
            let ua = ua.as_bytes();
            assert_eq!(
                classifier.classify(Some(ua)),
                classifier.classify_without_quick_check(ua),
                "{}: {}",
                c.name,
                String::from_utf8_lossy(ua)
            );
            checked += 1;
        }
    }
    assert!(checked > 100_000, "only {checked} UAs");
}

#[test]
fn recall_and_false_positives_per_source_tuned_and_left_out() {
    let corpora = match corpus::load_all() {
        Ok(c) => c,
        Err(why) => return corpus::missing(&why),
    };
    let lists = RuleLists::embedded();
    let classifier = Classifier::new(&lists).expect("rules compile");
    let tuned: Vec<Vec<bool>> = corpora.iter().map(|c| verdicts(&classifier, c)).collect();

    let evidence = evidence(&classifier, &corpora);
    // The rules as if source `h` had never been seen: those only it gives
    // evidence for are dropped.
    // Bot tokens and human exceptions are names learnt from data; the
    // browser-grammar marks are a closed vocabulary of platforms, engines and
    // handset makers, kept unless `marks_too`.
    let without = |h: usize, marks_too: bool| -> Vec<_> {
        lists
            .rules
            .iter()
            .zip(&evidence)
            .filter(|(rule, seen)| {
                let learnt = marks_too || rule.kind != Kind::Shape;
                !(learnt && seen.len() == 1 && seen.contains(&h))
            })
            .map(|(rule, _)| rule.clone())
            .collect()
    };
    let build = |rules: Vec<_>, signals| {
        Classifier::new(&RuleLists {
            rules,
            signals,
            source: None,
        })
        .expect("rules compile")
    };
    // Each source scored as if unseen, with the signals as shipped.
    let left_out: Vec<Score> = corpora
        .iter()
        .enumerate()
        .map(|(i, c)| score(c, &verdicts(&build(without(i, false), lists.signals), c)))
        .collect();
    // Each signal's effect on each source as an unseen source would feel
    // it: with that source's own rules dropped, the rate (recall, or
    // undisputed FPR) with the signal on minus off.
    let effects: Vec<(Signal, Vec<f64>)> = Signal::ALL
        .into_iter()
        .filter(|&s| lists.signals.is_on(s))
        .map(|signal| {
            let delta = corpora
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let off = build(without(i, false), lists.signals.with(signal, false));
                    left_out[i].undisputed - score(c, &verdicts(&off, c)).undisputed
                })
                .collect();
            (signal, delta)
        })
        .collect();
    for (signal, delta) in &effects {
        let row: Vec<String> = corpora
            .iter()
            .zip(delta)
            .map(|(c, d)| format!("{} {d:+.5}", c.name))
            .collect();
        eprintln!("{} when unseen: {}", signal.name(), row.join(", "));
    }

    let mut failures = Vec::new();
    let (mut browsers, mut flagged) = (0usize, 0usize);
    eprintln!(
        "{:<24} {:>7} {:>9} {:>9} {:>11} {:>10} {:>7}",
        "source", "size", "tuned", "left out", "undisputed", "marks too", "dropped"
    );
    for (h, c) in corpora.iter().enumerate() {
        let dropped = lists.rules.len() - without(h, false).len();
        // The pessimistic reading: the browser-grammar marks only this
        // source gave evidence for are dropped too.
        let marks_too = build(without(h, true), lists.signals);
        let t = score(c, &tuned[h]);
        let l = left_out[h];
        let m = score(c, &verdicts(&marks_too, c));
        eprintln!(
            "{:<24} {:>7} {:>9.4} {:>9.4} {:>11} {:>10.4} {:>7}",
            c.name,
            c.uas.len(),
            t.rate,
            l.rate,
            match c.label {
                Label::Bot => String::new(),
                _ => format!("{:.5}", l.undisputed),
            },
            m.undisputed,
            dropped,
        );
        match c.label {
            Label::Bot => {
                let (tuned_floor, left_floor) = recall_floor(c.name);
                for (what, s, floor) in [("tuned", t, tuned_floor), ("left out", l, left_floor)] {
                    if s.rate < floor {
                        let missed: Vec<&String> = c
                            .uas
                            .iter()
                            .zip(&tuned[h])
                            .filter(|(_, &b)| !b)
                            .map(|(ua, _)| ua)
                            .take(5)
                            .collect();
                        failures.push(format!(
                            "{}: {what} recall {:.4} < {floor}; missed e.g. {missed:?}",
                            c.name, s.rate
                        ));
                    }
                }
            }
            Label::App => {}
            Label::Browser => {
                browsers += c.uas.len();
                flagged += t.flagged;
                for (what, s) in [("tuned", t), ("left out", l)] {
                    if s.undisputed > fpr_ceiling(c.name) {
                        let wrong: Vec<&String> = c
                            .uas
                            .iter()
                            .zip(&tuned[h])
                            .filter(|(ua, &b)| b && !disputed_browser_label(ua))
                            .map(|(ua, _)| ua)
                            .take(5)
                            .collect();
                        failures.push(format!(
                            "{}: {what} FPR {:.5} > {}; e.g. {wrong:?}",
                            c.name,
                            s.undisputed,
                            fpr_ceiling(c.name)
                        ));
                    }
                }
            }
        }
    }
    let pooled = flagged as f64 / browsers as f64;
    eprintln!("all browsers, tuned, raw: {flagged} of {browsers} flagged, FPR {pooled:.5}");
    if pooled > 0.0015 {
        failures.push(format!("pooled raw FPR {pooled:.5} > 0.0015"));
    }
    assert!(
        failures.is_empty(),
        "classifier regressions:\n{}",
        failures.join("\n")
    );
}

/// The final held-out source (see `corpus::final_source`): never looked at
/// while the rules were written; measured once at the end of issue 12 and
/// kept as a floor.
#[test]
fn the_final_held_out_source() {
    let corpora = match corpus::final_source() {
        Ok(c) => c,
        Err(why) => return corpus::missing(&why),
    };
    let classifier = Classifier::new(&RuleLists::embedded()).expect("rules compile");
    let mut failures = Vec::new();
    for c in &corpora {
        let bots = verdicts(&classifier, c);
        let s = score(c, &bots);
        // Floors a little under the one measurement (0.969, 0.0054).
        match c.label {
            Label::Bot if s.rate < 0.95 => {
                failures.push(format!("{}: recall {:.4}", c.name, s.rate))
            }
            Label::Browser if s.undisputed > 0.008 => {
                failures.push(format!("{}: FPR {:.4}", c.name, s.undisputed))
            }
            _ => {}
        }
        eprintln!(
            "{:<26} {:>5}  {} {:.4} (undisputed {:.4})",
            c.name,
            c.uas.len(),
            if c.label == Label::Bot {
                "recall"
            } else {
                "FPR"
            },
            s.rate,
            s.undisputed
        );
        for (ua, bot) in c.uas.iter().zip(&bots) {
            if *bot != (c.label == Label::Bot) {
                eprintln!("    wrong: {ua}");
            }
        }
    }
    assert!(failures.is_empty(), "final source: {}", failures.join("; "));
}
