//! The speed ratio of `Classifier::classify` to the `isbot` crate, measured
//! interleaved so that the machine's noise falls on both alike.
//!
//! Criterion (`bench/classify.rs`) measures one contender for seconds, then
//! the other: on a shared machine a busy spell during one of them moves the
//! ratio by 10 % or more between runs of the same code. Here the two take
//! turns: each round times crawlgate and isbot on the same User-Agents for
//! about 20 ms each, in alternating order (AB, BA, …), and the ratio is
//! taken per round; the report is the median over the rounds with its
//! quartiles. Run, pinned to one core:
//!
//! ```sh
//! taskset -c 1 cargo bench --bench classify_ratio
//! ```
//!
//! `CLASSIFY_ROUNDS` sets the number of rounds (default 31).

use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "classify_mix.rs"]
mod classify_mix;

use classify_mix::mix;
use crawlgate::classify::{Classifier, UaClass};
use crawlgate::rules::RuleLists;

/// How long one contender's turn in a round should take.
const TURN: Duration = Duration::from_millis(20);

/// Times `passes` passes of `classify` over `uas`; nanoseconds per UA.
fn turn(uas: &[&str], passes: u32, classify: &dyn Fn(&str) -> bool) -> f64 {
    let start = Instant::now();
    for _ in 0..passes {
        for ua in uas {
            black_box(classify(black_box(ua)));
        }
    }
    start.elapsed().as_nanos() as f64 / (f64::from(passes) * uas.len() as f64)
}

/// The value at quantile `q` of sorted `values` (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

fn main() {
    let rounds: usize = std::env::var("CLASSIFY_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(31);
    let lists = RuleLists::embedded();
    let classifier = Classifier::new(&lists).expect("rules compile");
    let isbot = isbot::Bots::default();
    let crawlgate = |ua: &str| classifier.classify(Some(ua.as_bytes())).class == UaClass::Bot;
    let isbot = |ua: &str| isbot.is_bot(ua);

    let uas = mix();
    let mix: Vec<&str> = uas.iter().map(String::as_str).collect();
    let (robots, browsers): (Vec<&str>, Vec<&str>) = mix.iter().partition(|ua| crawlgate(ua));
    println!(
        "classify_ratio: {rounds} rounds, turns of ~{} ms, crawlgate vs isbot crate",
        TURN.as_millis()
    );
    println!(
        "{:<10} {:>6} {:>14} {:>14} {:>8} {:>16}",
        "input", "UAs", "crawlgate ns", "isbot ns", "ratio", "ratio q1–q3"
    );
    for (name, set) in [("mix", &mix), ("browsers", &browsers), ("robots", &robots)] {
        // Warm both up, then size a turn from crawlgate's speed.
        turn(set, 50, &crawlgate);
        turn(set, 20, &isbot);
        let probe = turn(set, 20, &crawlgate);
        let passes = ((TURN.as_nanos() as f64 / (probe * set.len() as f64)).round() as u32).max(1);
        let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let (a, b) = if round % 2 == 0 {
                let a = turn(set, passes, &crawlgate);
                (a, turn(set, passes, &isbot))
            } else {
                let b = turn(set, passes, &isbot);
                (turn(set, passes, &crawlgate), b)
            };
            ours.push(a);
            theirs.push(b);
            ratios.push(b / a);
        }
        let (ours, theirs, ratios) = (sorted(ours), sorted(theirs), sorted(ratios));
        println!(
            "{name:<10} {:>6} {:>14.1} {:>14.1} {:>7.2}× {:>7.2}–{:.2}×",
            set.len(),
            quantile(&ours, 0.5),
            quantile(&theirs, 0.5),
            quantile(&ratios, 0.5),
            quantile(&ratios, 0.25),
            quantile(&ratios, 0.75),
        );
    }
}
