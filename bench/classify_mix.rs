//! The User-Agent mix both classifier benchmarks run: 850 browsers and 150
//! robots sampled evenly from the fixtures shipped in the isbot crate,
//! interleaved (roughly one robot every six requests).

#[path = "../tests/support/corpus.rs"]
mod corpus;

/// Every `step`-th line of a fixture file, up to `n` lines.
fn sample(file: &str, n: usize) -> Vec<String> {
    let dir = corpus::isbot_fixtures().expect("isbot fixtures (cargo fetches the dev-dependency)");
    let text = std::fs::read(dir.join(file)).expect("fixture");
    let lines: Vec<String> = String::from_utf8_lossy(&text)
        .lines()
        .map(|l| l.trim_matches('"').to_owned())
        .filter(|l| !l.is_empty())
        .collect();
    let step = (lines.len() / n).max(1);
    lines.into_iter().step_by(step).take(n).collect()
}

/// The 1,000 User-Agents, in benchmark order.
pub fn mix() -> Vec<String> {
    let mut uas = sample("browsers.txt", 850);
    let bots = sample("bots.txt", 150);
    for (i, bot) in bots.into_iter().enumerate() {
        uas.insert((i * 6).min(uas.len()), bot);
    }
    uas
}
