//! Finished reports combined into one: the live report's hours into its
//! day. Counters add up; charts are laid on one time axis; top lists are
//! merged by key (a key outside one part's top list is missing from that
//! part's count, so merged tops are lower bounds, as each part's are).

use std::collections::BTreeMap;

use super::model::{
    AiSummary, ClassSummary, Count, OperatorSummary, Report, Row, Status, Verification, Volume,
    Waste,
};
use super::SHOWN;
use crate::config::AiKind;

/// `parts` as one report, written by `generator`.
pub fn merge(parts: &[Report], generator: String) -> Report {
    let charted = || parts.iter().filter(|p| p.chart_len > 0);
    let width = charted()
        .map(|p| p.bucket_seconds)
        .max()
        .unwrap_or(3600)
        .max(1);
    let start = charted()
        .map(|p| p.chart_start.div_euclid(width) * width)
        .min()
        .unwrap_or(0);
    let end = charted()
        .map(|p| p.chart_start + p.chart_len as i64 * p.bucket_seconds)
        .max()
        .unwrap_or(start);
    let len = usize::try_from((end - start + width - 1).div_euclid(width)).unwrap_or(0);
    let relay = |part: &Report, chart: &[u64], into: &mut Vec<u64>| {
        for (i, n) in chart.iter().enumerate() {
            let t = part.chart_start + i as i64 * part.bucket_seconds;
            if let Some(slot) = usize::try_from((t - start).div_euclid(width))
                .ok()
                .and_then(|i| into.get_mut(i))
            {
                *slot += n;
            }
        }
    };
    let mut rows: BTreeMap<(String, String), Row> = BTreeMap::new();
    let mut operators: BTreeMap<String, OperatorSummary> = BTreeMap::new();
    let mut report = Report {
        generator,
        input: Default::default(),
        first: parts.iter().filter_map(|p| p.first.clone()).min(),
        last: parts.iter().filter_map(|p| p.last.clone()).max(),
        bucket_seconds: width,
        chart_start: start,
        chart_len: len,
        total: Volume::default(),
        classes: Vec::new(),
        operators: Vec::new(),
        ai: Vec::new(),
        rows: Vec::new(),
        robots_txt: parts.iter().rev().find_map(|p| p.robots_txt.clone()),
        ranges: parts.last().map(|p| p.ranges.clone()).unwrap_or_default(),
    };
    report.ranges.from_log = parts.iter().map(|p| p.ranges.from_log).sum();
    for part in parts {
        let input = &mut report.input;
        for file in &part.input.files {
            if !input.files.contains(file) {
                input.files.push(file.clone());
            }
        }
        input.lines += part.input.lines;
        input.counted += part.input.counted;
        input.filtered += part.input.filtered;
        input.without_host += part.input.without_host;
        input.skipped.unreadable += part.input.skipped.unreadable;
        input.skipped.too_long += part.input.skipped.too_long;
        input.skipped.empty += part.input.skipped.empty;
        add_volume(&mut report.total, part.total);
        for row in &part.rows {
            let into = rows
                .entry((row.robot.clone(), row.class.clone()))
                .or_insert_with(|| Row {
                    chart: vec![0; len],
                    volume: Volume::default(),
                    status: Status::default(),
                    verification: Verification::default(),
                    waste: Waste::default(),
                    robots_txt: row.robots_txt.clone().map(|mut c| {
                        c.disallowed = 0;
                        c.paths.clear();
                        c
                    }),
                    top_paths: Vec::new(),
                    top_patterns: Vec::new(),
                    ..row.clone()
                });
            add_volume(&mut into.volume, row.volume);
            relay(part, &row.chart, &mut into.chart);
            add_status(&mut into.status, row.status);
            add_verification(&mut into.verification, row.verification);
            add_waste(&mut into.waste, row.waste);
            if let (Some(into), Some(part)) = (&mut into.robots_txt, &row.robots_txt) {
                into.disallowed += part.disallowed;
                into.paths = merged(&into.paths, &part.paths);
            }
            into.top_paths = merged(&into.top_paths, &row.top_paths);
            into.top_patterns = merged(&into.top_patterns, &row.top_patterns);
        }
        for op in &part.operators {
            let into = operators
                .entry(op.operator.clone())
                .or_insert_with(|| OperatorSummary {
                    operator: op.operator.clone(),
                    verified: 0,
                    unverified: 0,
                    spoofed: 0,
                    spoofer_blocks: Vec::new(),
                });
            into.verified += op.verified;
            into.unverified += op.unverified;
            into.spoofed += op.spoofed;
            into.spoofer_blocks = merged(&into.spoofer_blocks, &op.spoofer_blocks);
        }
    }
    let total = report.total.requests;
    let mut rows: Vec<Row> = rows
        .into_values()
        .map(|mut row| {
            row.share = share(row.volume.requests, total);
            row
        })
        .collect();
    super::model::sort_rows(&mut rows);
    (report.classes, report.ai) = summaries(&rows, len, total);
    report.rows = rows;
    report.operators = operators.into_values().collect();
    report
}

/// Two top lists as one: counts and errors of a key added, most first
/// (ties by key), the first [`SHOWN`].
fn merged(a: &[Count], b: &[Count]) -> Vec<Count> {
    let mut all: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for c in a.iter().chain(b) {
        let slot = all.entry(&c.key).or_default();
        slot.0 += c.requests;
        slot.1 += c.error;
    }
    let mut out: Vec<Count> = all
        .into_iter()
        .map(|(key, (requests, error))| Count {
            key: key.to_owned(),
            requests,
            error,
        })
        .collect();
    out.sort_by(|x, y| y.requests.cmp(&x.requests).then(x.key.cmp(&y.key)));
    out.truncate(SHOWN);
    out
}

/// `n` of `all` requests, 0–1.
pub(crate) fn share(n: u64, all: u64) -> f64 {
    match all {
        0 => 0.0,
        all => n as f64 / all as f64,
    }
}

/// The per-class and per-AI-purpose summaries of finished rows (each
/// chart `len` buckets).
pub(crate) fn summaries(
    rows: &[Row],
    len: usize,
    total: u64,
) -> (Vec<ClassSummary>, Vec<AiSummary>) {
    let mut classes: BTreeMap<&str, (Volume, Vec<u64>)> = BTreeMap::new();
    for row in rows {
        let (volume, chart) = classes
            .entry(&row.class)
            .or_insert_with(|| (Volume::default(), vec![0; len]));
        add_volume(volume, row.volume);
        for (sum, n) in chart.iter_mut().zip(&row.chart) {
            *sum += n;
        }
    }
    let mut classes: Vec<ClassSummary> = classes
        .into_iter()
        .map(|(class, (volume, chart))| ClassSummary {
            class: class.to_owned(),
            volume,
            share: share(volume.requests, total),
            chart,
        })
        .collect();
    classes.sort_by(|a, b| {
        b.volume
            .requests
            .cmp(&a.volume.requests)
            .then(a.class.cmp(&b.class))
    });
    let ai = AiKind::ALL
        .iter()
        .filter_map(|&kind| {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| r.ai.as_deref() == Some(kind.as_str()))
                .collect();
            if mine.is_empty() {
                return None;
            }
            let mut volume = Volume::default();
            for r in &mine {
                add_volume(&mut volume, r.volume);
            }
            Some(AiSummary {
                purpose: kind.as_str().to_owned(),
                volume,
                robots: mine
                    .iter()
                    .map(|r| Count {
                        key: r.robot.clone(),
                        requests: r.volume.requests,
                        error: 0,
                    })
                    .collect(),
            })
        })
        .collect();
    (classes, ai)
}

fn add_volume(into: &mut Volume, v: Volume) {
    into.requests += v.requests;
    into.bytes += v.bytes;
}

fn add_status(into: &mut Status, s: Status) {
    into.s2xx += s.s2xx;
    into.s3xx += s.s3xx;
    into.s304 += s.s304;
    into.s4xx += s.s4xx;
    into.s5xx += s.s5xx;
    into.other += s.other;
}

fn add_verification(into: &mut Verification, v: Verification) {
    into.verified += v.verified;
    into.unverified += v.unverified;
    into.spoofed += v.spoofed;
}

fn add_waste(into: &mut Waste, w: Waste) {
    into.action_urls += w.action_urls;
    into.robots_and_sitemaps += w.robots_and_sitemaps;
    into.server_errors += w.server_errors;
    into.not_found += w.not_found;
    into.redirects += w.redirects;
    into.repeats += w.repeats;
    into.query_variants += w.query_variants;
    into.total += w.total;
}
