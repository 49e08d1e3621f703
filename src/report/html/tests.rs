use super::*;
use crate::report::text::tests::{empty, hostile};

fn render(r: &Report) -> String {
    let mut out = Vec::new();
    write(r, &mut out).expect("writes to a Vec");
    String::from_utf8(out).expect("the page is UTF-8")
}

#[test]
fn hostile_text_is_escaped_and_invisible_characters_shown() {
    let page = render(&hostile());
    assert!(!page.contains("<script"), "a raw script tag");
    assert!(
        !page.contains("\"onmouseover"),
        "a raw quote before an attribute"
    );
    assert!(!page.contains("' \u{1b}"), "a raw apostrophe");
    assert!(!page.contains('\u{1b}'), "a raw ESC");
    assert!(!page.contains('\u{202e}'), "a raw RLO");
    assert!(!page.contains('\u{0}'), "a raw NUL");
    assert!(
        !page.chars().any(|c| hidden(c) && c != '\n'),
        "an invisible character"
    );
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;onmouseover=alert(2) &#39; "));
    assert!(page.contains("<span class=\"esc\">\\u{1b}</span>[31mred"));
    assert!(page.contains(
        "<span class=\"esc\">\\u{202e}</span>evil<span class=\"esc\">\\u{0}</span>nul\u{fffd}"
    ));
    // In SVG titles, the same without the marking.
    assert!(page.contains("<title>2024-05-01 00:00 UTC, &lt;script&gt;"));
    assert!(page.contains("\\u{1b}[31mred\\u{202e}evil\\u{0}nul"));
}

#[test]
fn log_text_stays_out_of_attributes_and_style() {
    let page = render(&hostile());
    let style_end = page.find("</style>").expect("a style element");
    assert!(
        !page[..style_end].contains("alert"),
        "log text in the head or style"
    );
    // Every attribute value is one of the page's own: no log text in one.
    for (n, _) in page.match_indices("=\"") {
        let value = &page[n + 2..];
        let end = value.find('"').expect("a closed attribute");
        assert!(
            !value[..end].contains("alert"),
            "log text in an attribute: {}",
            &value[..end]
        );
    }
    assert!(page.contains("<a href=\"#robot-0\">"));
    assert!(page.contains("id=\"robot-0\""));
    assert!(!page.contains("<script") && !page.contains("<link") && !page.contains("src="));
}

#[test]
fn a_huge_key_is_cut() {
    let page = render(&hostile());
    assert!(page.len() < 200_000, "{} bytes", page.len());
    let cut = format!(
        "/{}…<span class=\"cut\"> (1,048,377 more characters)</span>",
        "a".repeat(KEY_CAP - 1)
    );
    assert!(page.contains(&cut));
}

#[test]
fn an_empty_report_renders() {
    let page = render(&empty());
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("no requests counted"));
    assert!(page.trim_end().ends_with("</html>"));
}

#[test]
fn the_summary_has_the_chart_the_tables_and_links() {
    let page = render(&hostile());
    let summary = page.find("<section id=\"summary\">").expect("the summary");
    let first_svg = page[summary..].find("<svg").expect("a chart") + summary;
    let svg_end = page[first_svg..].find("</svg>").expect("a closed svg") + first_svg;
    assert!(page[first_svg..svg_end].matches("<rect").count() > 0);
    assert!(page.contains("<h3>Classes</h3>"));
    assert!(page.contains("Humans compared with all robots"));
    // The humans' section comes after every robot's.
    assert!(page.find("id=\"robot-1\"") > page.find("id=\"robot-0\""));
}

#[test]
fn a_long_chart_is_folded_and_odd_buckets_do_not_panic() {
    let mut r = hostile();
    r.chart_len = 5000;
    r.bucket_seconds = 0;
    r.chart_start = i64::MAX - 10;
    for row in &mut r.rows {
        row.chart = vec![u64::MAX / 4; 5000];
        row.share = f64::NAN;
    }
    let page = render(&r);
    let first = page.find("<svg class=\"chart\"").expect("a chart");
    let end = page[first..].find("</svg>").expect("closed") + first;
    assert!(page[first..end].matches("<rect").count() <= chart::MAX_BARS * (MAX_SERIES + 1));
}

#[test]
fn the_disallowed_column_only_with_a_robots_txt() {
    let mut r = hostile();
    assert!(render(&r).contains("<th class=\"n\">Disallowed</th>"));
    r.robots_txt = None;
    assert!(!render(&r).contains("<th class=\"n\">Disallowed</th>"));
}
