//! `Classifier::classify` side by side with the `isbot` crate (one big
//! regex) and a `regex::RegexSet` built from the same tokens, on the same
//! realistic mix of real-world User-Agents (850 browsers, 150 robots, from
//! the fixtures shipped in the isbot crate). Run:
//! `cargo bench --bench classify`.

#![allow(missing_docs)] // criterion_group! generates undocumented items

#[path = "classify_mix.rs"]
mod classify_mix;

use classify_mix::mix;
use crawlgate::classify::{Classifier, UaClass};
use crawlgate::rules::{Edge, Kind, RuleLists};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};

/// The same rules as one RegexSet: a literal per token, case-insensitive,
/// edge conditions as anchors and word boundaries. Exceptions are not
/// expressible in a set, so human rules are left out (this is the speed
/// reference, not a second classifier).
fn regex_set(lists: &RuleLists) -> regex::bytes::RegexSet {
    let patterns = lists.rules.iter().filter(|r| r.kind == Kind::Bot).map(|r| {
        let start = match r.start {
            Edge::Anchor => "^",
            Edge::Word => r"\b",
            _ => "",
        };
        let end = match r.end {
            Edge::Anchor => "$",
            Edge::Word => r"\b",
            _ => "",
        };
        let case = if r.exact_case { "" } else { "(?i)" };
        format!("{case}{start}{}{end}", regex::escape(&r.token))
    });
    regex::bytes::RegexSet::new(patterns).expect("regex set builds")
}

fn bench(c: &mut Criterion) {
    let uas = mix();
    let mean = uas.iter().map(String::len).sum::<usize>() as f64 / uas.len() as f64;
    let lists = RuleLists::embedded();
    let classifier = Classifier::new(&lists).expect("rules compile");
    let isbot = isbot::Bots::default();
    let set = regex_set(&lists);
    let bots = uas
        .iter()
        .filter(|ua| classifier.classify(Some(ua.as_bytes())).class == UaClass::Bot)
        .count();
    eprintln!(
        "mix: {} UAs, mean {mean:.0} bytes, crawlgate flags {bots}, isbot flags {}",
        uas.len(),
        uas.iter().filter(|ua| isbot.is_bot(ua)).count()
    );

    let mut group = c.benchmark_group("classify_1000_uas");
    group.throughput(Throughput::Elements(uas.len() as u64));
    group.bench_function("crawlgate", |b| {
        b.iter(|| {
            for ua in &uas {
                black_box(classifier.classify(Some(black_box(ua.as_bytes()))));
            }
        })
    });
    group.bench_function("isbot_crate", |b| {
        b.iter(|| {
            for ua in &uas {
                black_box(isbot.is_bot(black_box(ua)));
            }
        })
    });
    group.bench_function("regex_set_same_tokens", |b| {
        b.iter(|| {
            for ua in &uas {
                black_box(set.is_match(black_box(ua.as_bytes())));
            }
        })
    });
    group.finish();

    // Where the time goes: the same contenders on the browsers and on the
    // robots of the mix separately.
    let (robots, browsers): (Vec<&String>, Vec<&String>) = uas
        .iter()
        .partition(|ua| classifier.classify(Some(ua.as_bytes())).class == UaClass::Bot);
    for (name, part) in [("browsers", &browsers), ("robots", &robots)] {
        let mut group = c.benchmark_group(format!("classify_{name}"));
        group.throughput(Throughput::Elements(part.len() as u64));
        group.bench_function("crawlgate", |b| {
            b.iter(|| {
                for ua in part.iter() {
                    black_box(classifier.classify(Some(black_box(ua.as_bytes()))));
                }
            })
        });
        group.bench_function("isbot_crate", |b| {
            b.iter(|| {
                for ua in part.iter() {
                    black_box(isbot.is_bot(black_box(ua)));
                }
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
