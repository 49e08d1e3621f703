use super::*;
use crate::report::model::*;

/// The hostile strings every text field of [`hostile`] is made of.
pub(crate) const HOSTILE: &str =
    "<script>alert(1)</script>\"onmouseover=alert(2) ' \u{1b}[31mred\u{202e}evil\u{0}nul\u{fffd}";

fn count(key: &str, requests: u64) -> Count {
    Count {
        key: key.to_owned(),
        requests,
        error: 0,
    }
}

fn row(robot: &str, class: &str, requests: u64, chart_len: usize) -> Row {
    Row {
        robot: robot.to_owned(),
        class: class.to_owned(),
        operator: None,
        ai: None,
        volume: Volume {
            requests,
            bytes: requests * 5000,
        },
        share: 0.0,
        chart: (0..chart_len as u64)
            .map(|i| (i * 7 + requests) % 13)
            .collect(),
        status: Status {
            s2xx: requests,
            ..Status::default()
        },
        verification: Verification::default(),
        waste: Waste::default(),
        robots_txt: None,
        top_paths: Vec::new(),
        top_patterns: Vec::new(),
    }
}

/// A report whose every text field a client could have written holds
/// [`HOSTILE`], and one key is a megabyte long.
pub(crate) fn hostile() -> Report {
    let h = || HOSTILE.to_owned();
    let huge = format!("/{}", "a".repeat(1 << 20));
    let mut bot = row(HOSTILE, "unknown", 900, 48);
    bot.operator = Some(h());
    bot.ai = Some(h());
    bot.verification = Verification {
        verified: 1,
        unverified: 2,
        spoofed: 897,
    };
    bot.waste = Waste {
        action_urls: 10,
        not_found: 5,
        total: 15,
        ..Waste::default()
    };
    bot.robots_txt = Some(Compliance {
        token: h(),
        group: h(),
        disallowed: 3,
        paths: vec![count(HOSTILE, 3)],
    });
    bot.top_paths = vec![count(HOSTILE, 500), count(&huge, 400)];
    bot.top_patterns = vec![Count {
        key: h(),
        requests: 900,
        error: 4,
    }];
    bot.share = 0.9;
    let mut humans = row("humans", "human", 100, 48);
    humans.share = 0.1;
    humans.top_paths = vec![count(HOSTILE, 100)];
    Report {
        generator: "crawlgate 0.1.0".to_owned(),
        input: Input {
            files: vec![h()],
            lines: 1010,
            counted: 1000,
            filtered: 5,
            skipped: Skipped {
                unreadable: 3,
                too_long: 1,
                empty: 1,
            },
            without_host: 0,
        },
        first: Some("2024-05-01T00:00:03Z".to_owned()),
        last: Some("2024-05-02T23:59:58Z".to_owned()),
        bucket_seconds: 3600,
        chart_start: 1_714_521_600,
        chart_len: 48,
        total: Volume {
            requests: 1000,
            bytes: 5_000_000,
        },
        classes: vec![ClassSummary {
            class: h(),
            volume: Volume {
                requests: 900,
                bytes: 4_500_000,
            },
            share: 0.9,
            chart: bot.chart.clone(),
        }],
        operators: vec![OperatorSummary {
            operator: h(),
            verified: 1,
            unverified: 2,
            spoofed: 897,
            spoofer_blocks: vec![count(HOSTILE, 897), count(&huge, 1)],
        }],
        ai: vec![AiSummary {
            purpose: h(),
            volume: Volume {
                requests: 900,
                bytes: 1,
            },
            robots: vec![count(HOSTILE, 900)],
        }],
        rows: vec![bot, humans],
        robots_txt: Some(h()),
        ranges: RangesUsed {
            sources: vec![h()],
            loaded: vec![h()],
            from_log: 0,
        },
    }
}

/// A report of no lines at all.
pub(crate) fn empty() -> Report {
    Report {
        generator: "crawlgate 0.1.0".to_owned(),
        input: Input::default(),
        first: None,
        last: None,
        bucket_seconds: 3600,
        chart_start: 0,
        chart_len: 0,
        total: Volume::default(),
        classes: Vec::new(),
        operators: Vec::new(),
        ai: Vec::new(),
        rows: Vec::new(),
        robots_txt: None,
        ranges: RangesUsed::default(),
    }
}

fn render(r: &Report, width: usize) -> String {
    let mut out = Vec::new();
    write(r, &mut out, width).expect("writes to a Vec");
    String::from_utf8(out).expect("the text form is UTF-8")
}

#[test]
fn hostile_text_reaches_the_terminal_only_escaped() {
    for width in [40, 80, 132, 400] {
        let out = render(&hostile(), width);
        assert!(!out.contains('\u{1b}'), "ESC at {width}");
        assert!(!out.contains('\u{202e}'), "RLO at {width}");
        assert!(!out.contains('\u{0}'), "NUL at {width}");
        assert!(
            !out.chars().any(|c| hidden(c) && c != '\n'),
            "an invisible character at {width}"
        );
        if width >= 80 {
            assert!(out.contains("\\x1b[31m"), "ESC shown at {width}:\n{out}");
        }
        for line in out.lines() {
            assert!(cols(line) <= width, "{} > {width}: {line}", cols(line));
        }
    }
    let wide = render(&hostile(), 400);
    assert!(wide.contains("\\u{202e}evil\\x00nul\u{fffd}"), "{wide}");
    assert!(
        wide.contains("<script>alert(1)</script>"),
        "a terminal needs no HTML escaping"
    );
}

#[test]
fn a_huge_key_is_cut_to_the_width() {
    let out = render(&hostile(), 80);
    assert!(out.len() < 40_000, "{} bytes", out.len());
    assert!(out.contains("/aaaa"));
    assert!(out.contains("a…"));
}

#[test]
fn an_empty_report_renders() {
    let out = render(&empty(), 80);
    assert!(out.contains("no requests counted"), "{out}");
    assert!(out.contains("0 requests, 0 B"), "{out}");
}

#[test]
fn the_robot_table_has_a_sparkline_and_the_humans_last() {
    let out = render(&hostile(), 100);
    let table = out.find(" #  ROBOT").expect("the robot table");
    let humans = out[table..].find("humans").expect("the humans row");
    assert!(out[table..table + humans].contains("90.0%"));
    let first = out[table..].lines().nth(1).unwrap_or_default();
    assert!(first.chars().any(|c| BLOCKS.contains(&c)), "{out}");
}

#[test]
fn cut_counts_columns_and_marks_the_cut() {
    assert_eq!(cut("abcdef", 6), "abcdef");
    assert_eq!(cut("abcdefg", 6), "abcde…");
    assert_eq!(cut("\u{1b}[0m", 4), "\\x1…");
    assert_eq!(cut("日本語テキスト", 7), "日本語…");
    assert_eq!(cols("日本"), 4);
    assert_eq!(cut("", 0), "");
}

#[test]
fn numbers_sizes_and_sparklines() {
    assert_eq!(group(0), "0");
    assert_eq!(group(999), "999");
    assert_eq!(group(1000), "1,000");
    assert_eq!(group(1_234_567), "1,234,567");
    assert_eq!(group(u64::MAX), "18,446,744,073,709,551,615");
    assert_eq!(bytes(512), "512 B");
    assert_eq!(bytes(1536), "1.50 KiB");
    assert_eq!(bytes(50 << 20), "50.0 MiB");
    assert_eq!(bytes(300 << 30), "300 GiB");
    assert_eq!(bytes(u64::MAX), "16384 PiB");
    assert_eq!(percent(0.1234), "12.3%");
    assert_eq!(percent(0.0001), "<0.1%");
    assert_eq!(percent(f64::NAN), "0%");
    assert_eq!(span(3600), "1 hour");
    assert_eq!(span(6 * 3600), "6 hours");
    assert_eq!(span(86_400), "1 day");
    assert_eq!(per(3600), "hour");
    assert_eq!(per(7200), "2 hours");
    assert_eq!(spark(&[0, 1, 2, 4, 8], 5), " ▁▂▄█");
    assert_eq!(spark(&[], 5), "");
    assert_eq!(spark(&[1; 48], 24).chars().count(), 24);
    assert_eq!(fold(&[1, 2, 3, 4, 5], 2), vec![6, 9]);
    assert_eq!(spark(&[u64::MAX, 1], 2), "█▁");
}

#[test]
fn a_column_that_says_nothing_is_left_out() {
    let mut r = hostile();
    assert!(render(&r, 132).contains("disallow"));
    r.rows.iter_mut().for_each(|row| row.robots_txt = None);
    assert!(!render(&r, 132).contains("disallow"));
}
