//! `crawlgate classify`: User-Agents on stdin, `bot` or `human` for each on
//! stdout.

use std::io::{self, BufReader};
use std::path::Path;

use super::{Failure, Outcome, EXIT_CONFIG};
use crate::classify::{classify_lines, Classifier};
use crate::rules::RuleLists;

/// Classifies stdin's lines with the built-in rules, or the token lists in
/// `rules`; with `explain`, each answer names the rule that decided.
pub fn run(explain: bool, rules: Option<&Path>) -> Outcome {
    let lists = match rules {
        Some(dir) => RuleLists::from_dir(dir),
        None => Ok(RuleLists::embedded()),
    };
    let classifier = match lists.and_then(|l| Classifier::new(&l)) {
        Ok(c) => c,
        Err(err) => return Err(Failure::chain(EXIT_CONFIG, &err)),
    };
    let mut input = BufReader::with_capacity(64 * 1024, io::stdin().lock());
    let mut output = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    match classify_lines(&classifier, explain, &mut input, &mut output) {
        Ok(_) => Ok(()),
        // `crawlgate classify | head` is fine.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(Failure::chain(1, &err)),
    }
}
