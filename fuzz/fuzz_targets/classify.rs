//! The classifier on arbitrary bytes: no panic, and the quick check never
//! disagrees with the full scan's verdict.
#![no_main]

use std::sync::OnceLock;

use crawlgate::classify::Classifier;
use crawlgate::rules::RuleLists;
use libfuzzer_sys::fuzz_target;

fn classifier() -> &'static Classifier {
    static C: OnceLock<Classifier> = OnceLock::new();
    C.get_or_init(|| Classifier::new(&RuleLists::embedded()).expect("rules"))
}

fuzz_target!(|data: &[u8]| {
    let c = classifier();
    let verdict = c.classify(Some(data));
    assert_eq!(verdict, c.classify_without_quick_check(data));
});
