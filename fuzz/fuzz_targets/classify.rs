//! The classifier on arbitrary bytes, alone and after a browser head: no
//! panic, and the quick check never disagrees with the full scan's verdict.
#![no_main]

use std::sync::OnceLock;

use crawlgate::classify::Classifier;
use crawlgate::rules::RuleLists;
use libfuzzer_sys::fuzz_target;

fn classifier() -> &'static Classifier {
    static C: OnceLock<Classifier> = OnceLock::new();
    C.get_or_init(|| Classifier::new(&RuleLists::embedded()).expect("rules"))
}

/// Starts of browser UAs that the quick check walks from their end (two
/// of its heads), so that the fuzzer also reaches that path.
const HEADS: [&[u8]; 2] = [
    b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) ",
    b"Mozilla/5.0 (iPhone; CPU iPhone OS ",
];

fuzz_target!(|data: &[u8]| {
    let c = classifier();
    let verdict = c.classify(Some(data));
    assert_eq!(verdict, c.classify_without_quick_check(data));
    for head in HEADS {
        let ua = [head, data].concat();
        assert_eq!(c.classify(Some(&ua)), c.classify_without_quick_check(&ua));
    }
});
