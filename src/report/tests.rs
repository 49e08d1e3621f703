//! The tally's own rules: patterns, sitemap paths, address blocks, and
//! the chart's buckets over a long period.

use super::*;

fn sources() -> Sources {
    let lists = crate::rules::RuleLists::embedded();
    Sources {
        classifier: Arc::new(Classifier::new(&lists).expect("rules compile")),
        operators: Arc::new(Operators::embedded()),
        ranges: PrefixTable::default(),
        loaded: 0,
        ranges_used: RangesUsed::default(),
        robots: None,
        blocked_params: vec!["do".into(), "_fid".into()],
    }
}

fn line(time: &str, path: &str, ua: &str) -> String {
    format!("192.0.2.1 - - [{time} +0000] \"GET {path} HTTP/1.1\" 200 10 \"-\" \"{ua}\"")
}

#[test]
fn patterns_fold_numbers_and_ids_and_keep_parameter_names() {
    let mut out = Vec::new();
    for (path, query, want) in [
        (
            "/forum/viewtopic.php",
            Some("t=123&start=40"),
            "/forum/viewtopic.php?t=&start=",
        ),
        ("/user/12345/posts", None, "/user/{n}/posts"),
        ("/s/a1b2c3d4e5/x", None, "/s/{id}/x"),
        ("/wiki/Main_Page", None, "/wiki/Main_Page"),
        ("/", Some(""), "/"),
        ("", None, "/"),
    ] {
        pattern(path.as_bytes(), query.map(str::as_bytes), &mut out);
        assert_eq!(String::from_utf8_lossy(&out), want, "{path} {query:?}");
    }
}

#[test]
fn robots_and_sitemap_paths() {
    for yes in [
        "/robots.txt",
        "/ROBOTS.TXT",
        "/sitemap.xml",
        "/sitemap-posts-1.xml.gz",
        "/sitemaps/a.xml",
        "/sitemap.txt",
    ] {
        assert!(is_robots_or_sitemap(yes.as_bytes()), "{yes}");
    }
    for no in ["/robots.txt.bak", "/sitemap", "/wiki/sitemap.xml", "/"] {
        assert!(!is_robots_or_sitemap(no.as_bytes()), "{no}");
    }
}

#[test]
fn spoofers_are_listed_by_block() {
    assert_eq!(
        block_of("198.51.100.77".parse().expect("ip")),
        "198.51.100.0/24"
    );
    assert_eq!(
        block_of("2001:db8:1:2::9".parse().expect("ip")),
        "2001:db8:1::/48"
    );
    assert_eq!(
        block_of("::ffff:192.0.2.9".parse().expect("ip")),
        "192.0.2.0/24"
    );
}

#[test]
fn a_long_period_widens_the_buckets_and_keeps_every_request() {
    let mut tally = Tally::new(Arc::new(sources()), Filter::default(), Capacity::FILE);
    // A request every day for a year: 8,760 hours, more than MAX_BUCKETS.
    let start = line::days_from_civil(2025, 1, 1);
    for day in 0..365 {
        let t = (start + day) * 86_400;
        let date = time::OffsetDateTime::from_unix_timestamp(t).expect("time");
        let clf = format!(
            "{:02}/{}/{}:00:00:00",
            date.day(),
            &["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
                [usize::from(u8::from(date.month())) - 1],
            date.year()
        );
        tally.line(line(&clf, "/", "Mozilla/5.0 (compatible; Googlebot/2.1)").as_bytes());
    }
    let report = tally.finish("test".into());
    assert_eq!(report.input.counted, 365);
    assert!(report.bucket_seconds > 3600 && report.bucket_seconds % 3600 == 0);
    assert!(report.chart_len as i64 <= MAX_BUCKETS);
    let row = &report.rows[0];
    assert_eq!(row.chart.iter().sum::<u64>(), 365);
    assert_eq!(row.chart.len(), report.chart_len);
    assert_eq!(report.classes[0].chart.iter().sum::<u64>(), 365);
}

#[test]
fn an_empty_log_is_an_empty_report() {
    let report =
        Tally::new(Arc::new(sources()), Filter::default(), Capacity::FILE).finish("test".into());
    assert_eq!(
        (report.chart_len, report.rows.len(), report.first.clone()),
        (0, 0, None)
    );
}

/// The test site's log, split in two by time and merged, is the report
/// of the whole log (its top lists hold every key, so nothing is lost),
/// but for the repeats that span the split: each part tells repeats by
/// its own table of recent URLs.
#[test]
fn a_log_split_in_two_and_merged_is_the_whole_log() {
    let log = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/report/site.log"
    ))
    .expect("site.log");
    let sources = Arc::new(sources());
    let tally = |filter: Filter| {
        let mut tally = Tally::new(Arc::clone(&sources), filter, Capacity::FILE);
        for line in log.split(|&b| b == b'\n') {
            tally.line(line);
        }
        tally.finish("test".into())
    };
    let nine = 1_796_115_600; // 2026-12-01T09:00:00Z
    let whole = tally(Filter::default());
    let early = tally(Filter {
        until: Some(nine),
        ..Filter::default()
    });
    let late = tally(Filter {
        since: Some(nine),
        ..Filter::default()
    });
    assert!(early.input.counted > 0 && late.input.counted > 0);
    let merged = merge::merge(&[early, late], "test".into());
    let json = |r: &Report| {
        let mut v = serde_json::to_value(r).expect("json");
        v["input"] = serde_json::Value::Null;
        for row in v["rows"].as_array_mut().expect("rows") {
            row["waste"]["repeats"] = serde_json::Value::Null;
            row["waste"]["total"] = serde_json::Value::Null;
        }
        v
    };
    let google = |r: &Report| {
        r.rows
            .iter()
            .find(|r| r.robot == "Googlebot" && r.class == "search")
            .map(|r| r.waste.repeats)
    };
    assert_eq!(
        (google(&whole), google(&merged)),
        (Some(8), Some(4)),
        "four repeats span 09:00"
    );
    assert_eq!(json(&merged), json(&whole));
    assert_eq!(merged.input.counted, whole.input.counted);
}

/// A site that addresses its pages by query string is not faceted
/// navigation; sort orders of one page are, and so is a session id.
#[test]
fn query_variants_are_of_one_page_not_of_a_script() {
    let mut tally = Tally::new(Arc::new(sources()), Filter::default(), Capacity::FILE);
    let bot = "Mozilla/5.0 (compatible; AhrefsBot/7.0)";
    for i in 0..20 {
        tally.line(
            line(
                "01/Dec/2026:10:00:00",
                &format!("/doku.php?id=page{i}"),
                bot,
            )
            .as_bytes(),
        );
    }
    for i in 0..8 {
        tally.line(
            line(
                "01/Dec/2026:10:00:00",
                &format!("/list.php?cat=3&sort={i}"),
                bot,
            )
            .as_bytes(),
        );
    }
    tally.line(line("01/Dec/2026:10:00:00", "/a?PHPSESSID=x1", bot).as_bytes());
    let report = tally.finish("test".into());
    assert_eq!(
        report.rows[0].waste.query_variants,
        4 + 1,
        "{:?}",
        report.rows[0].waste
    );
}
