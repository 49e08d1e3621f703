//! The crawl report as one self-contained HTML5 page: inline CSS, charts
//! as inline SVG, no script and nothing loaded from anywhere (a
//! Content-Security-Policy says so to the browser), light and dark,
//! printable.
//!
//! Every text field of the report is what a client sent: it is only
//! ever written as element text, escaped (`&<>"'`), with control, bidi
//! and other invisible characters shown as `\u{…}`, and cut at
//! [`KEY_CAP`] characters. Anchors, ids, classes and styles are made of
//! numbers the page computes (`#robot-3`), never of log text.

use std::fmt::{self, Write as _};
use std::io;

use super::model::{Count, Report, Row, Status, Verification, Volume};
mod chart;

use super::text::{bytes, group, hidden, is_human, per, percent, ratio, span, sum, waste_parts};
use chart::{bar, chart_svg, date, legend, share_bar, sparkline, verification_bar, Series};

/// Characters of a key shown before it is cut with `…`.
pub const KEY_CAP: usize = 200;
/// Classes drawn apart in the summary chart; the rest are summed.
const MAX_SERIES: usize = 9;
/// Robots listed as the top wasters of crawl budget.
const TOP_WASTERS: usize = 10;

/// Writes `report` as one HTML page.
pub fn write(report: &Report, out: &mut (impl io::Write + ?Sized)) -> io::Result<()> {
    let mut s = String::new();
    page(&mut s, report).map_err(|_| io::Error::other("formatting the report"))?;
    out.write_all(s.as_bytes())
}

/// Log text, escaped for element content and cut at [`KEY_CAP`].
struct Esc<'a>(&'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        escape(f, self.0, true)
    }
}

/// Like [`Esc`], without markup: for SVG `<title>`s.
struct Plain<'a>(&'a str);

impl fmt::Display for Plain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        escape(f, self.0, false)
    }
}

fn escape(f: &mut fmt::Formatter<'_>, s: &str, marked: bool) -> fmt::Result {
    for (n, c) in s.chars().enumerate() {
        if n == KEY_CAP {
            let more = s.chars().count() - KEY_CAP;
            return if marked {
                write!(
                    f,
                    "…<span class=\"cut\"> ({} more characters)</span>",
                    group(more as u64)
                )
            } else {
                f.write_char('…')
            };
        }
        match c {
            '&' => f.write_str("&amp;")?,
            '<' => f.write_str("&lt;")?,
            '>' => f.write_str("&gt;")?,
            '"' => f.write_str("&quot;")?,
            '\'' => f.write_str("&#39;")?,
            c if hidden(c) && marked => {
                write!(f, "<span class=\"esc\">\\u{{{:x}}}</span>", c as u32)?
            }
            c if hidden(c) => write!(f, "\\u{{{:x}}}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    Ok(())
}

fn page(s: &mut String, r: &Report) -> fmt::Result {
    let period = match (&r.first, &r.last) {
        (Some(first), Some(last)) => format!("{first} – {last}"),
        _ => "no requests counted".to_owned(),
    };
    writeln!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <title>Crawl report, {}</title>\n<style>{CSS}</style>\n</head>\n<body>",
        Plain(&period)
    )?;
    writeln!(
        s,
        "<header><h1>Crawl report</h1><p class=\"sub\">{} <span class=\"muted\">(UTC), \
         per {}</span></p></header>\n<main>",
        Esc(&period),
        per(r.bucket_seconds)
    )?;
    summary(s, r)?;
    for (i, row) in r.rows.iter().enumerate().filter(|(_, row)| !is_human(row)) {
        robot(s, r, i, row)?;
    }
    humans(s, r)?;
    input(s, r)?;
    writeln!(
        s,
        "</main>\n<footer class=\"muted\">Written by {}.</footer>\n</body>\n</html>",
        Esc(&r.generator)
    )
}

fn summary(s: &mut String, r: &Report) -> fmt::Result {
    let i = &r.input;
    let skipped = sum([i.skipped.unreadable, i.skipped.too_long, i.skipped.empty]);
    let robots = sum(r
        .rows
        .iter()
        .filter(|row| !is_human(row))
        .map(|row| row.volume.requests));
    s.push_str("<section id=\"summary\"><h2>Summary</h2>\n<div class=\"cards\">");
    card(
        s,
        "Requests",
        &group(r.total.requests),
        &format!("{} sent", bytes(r.total.bytes)),
    )?;
    card(
        s,
        "Robots",
        &percent(ratio(robots, r.total.requests)),
        &format!("{} requests", group(robots)),
    )?;
    card(
        s,
        "Lines read",
        &group(i.lines),
        &format!("{} counted", group(i.counted)),
    )?;
    card(
        s,
        "Left out",
        &group(i.filtered.saturating_add(skipped)),
        &format!("{} filtered, {} skipped", group(i.filtered), group(skipped)),
    )?;
    s.push_str("</div>\n");
    // The chart: requests per bucket by class, the smallest classes summed.
    let mut series: Vec<Series> = Vec::new();
    let mut rest = vec![0u64; r.chart_len];
    for (n, c) in r.classes.iter().enumerate() {
        if n < MAX_SERIES {
            series.push(Series {
                name: c.class.clone(),
                tone: tone(r, &c.class),
                values: c.chart.clone(),
            });
        } else {
            add(&mut rest, &c.chart);
        }
    }
    if r.classes.len() > MAX_SERIES {
        series.push(Series {
            name: "other classes".to_owned(),
            tone: 11,
            values: rest,
        });
    }
    writeln!(
        s,
        "<h3>Requests per {} by class</h3>",
        per(r.bucket_seconds)
    )?;
    chart_svg(s, r, &series, 260)?;
    legend(s, &series)?;
    classes(s, r)?;
    robots_table(s, r)?;
    ai(s, r)?;
    operators(s, r)?;
    wasters(s, r)?;
    s.push_str("</section>\n");
    Ok(())
}

fn card(s: &mut String, name: &str, value: &str, note: &str) -> fmt::Result {
    write!(
        s,
        "<div class=\"card\"><div class=\"muted\">{name}</div><div class=\"big\">{value}</div>\
         <div class=\"muted\">{note}</div></div>"
    )
}

fn classes(s: &mut String, r: &Report) -> fmt::Result {
    if r.classes.is_empty() {
        return Ok(());
    }
    s.push_str(
        "<h3>Classes</h3>\n<table class=\"classes\"><thead><tr><th>Class</th>\
         <th class=\"n\">Requests</th><th>Share</th><th class=\"n\">Bytes</th></tr></thead><tbody>\n",
    );
    for c in &r.classes {
        writeln!(
            s,
            "<tr><td><span class=\"sw p{}\"></span>{}</td><td class=\"n\">{}</td><td>{}</td>\
             <td class=\"n\">{}</td></tr>",
            tone(r, &c.class),
            Esc(&c.class),
            group(c.volume.requests),
            share_bar(c.share),
            bytes(c.volume.bytes)
        )?;
    }
    s.push_str("</tbody></table>\n");
    Ok(())
}

fn robots_table(s: &mut String, r: &Report) -> fmt::Result {
    if r.rows.is_empty() {
        return Ok(());
    }
    // The robots.txt column only when one was read.
    let compliance = r.robots_txt.is_some();
    s.push_str(
        "<h3>Robots</h3>\n<table class=\"robots\"><thead><tr><th>#</th><th>Robot</th><th>Class</th>\
         <th>Operator</th><th class=\"n\">Requests</th><th>Share</th><th class=\"n\">Bytes</th>\
         <th class=\"n\">Verified</th><th class=\"n\">Spoofed</th><th class=\"n\">Waste</th>",
    );
    if compliance {
        s.push_str("<th class=\"n\">Disallowed</th>");
    }
    s.push_str("<th>Per bucket</th></tr></thead><tbody>\n");
    let humans = r.rows.iter().enumerate().filter(|(_, row)| is_human(row));
    let robots = r.rows.iter().enumerate().filter(|(_, row)| !is_human(row));
    for (i, row) in robots.chain(humans) {
        let v = &row.verification;
        let claims = sum([v.verified, v.unverified, v.spoofed]);
        let dash = |show: bool, text: String| if show { text } else { "–".to_owned() };
        write!(
            s,
            "<tr{}><td class=\"n\">{}</td><td><a href=\"#robot-{i}\">{}</a></td><td>{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n{}\">{}</td><td class=\"n\">{}</td>",
            if is_human(row) { " class=\"human\"" } else { "" },
            i + 1,
            Esc(&row.robot),
            Esc(&row.class),
            Esc(row.operator.as_deref().unwrap_or("")),
            group(row.volume.requests),
            share_bar(row.share),
            bytes(row.volume.bytes),
            dash(claims > 0, percent(ratio(v.verified, claims))),
            if v.spoofed > 0 { " bad" } else { "" },
            dash(claims > 0, group(v.spoofed)),
            dash(!is_human(row), percent(ratio(row.waste.total, row.volume.requests))),
        )?;
        if compliance {
            let disallowed = row
                .robots_txt
                .as_ref()
                .map_or("–".to_owned(), |c| group(c.disallowed));
            write!(s, "<td class=\"n\">{disallowed}</td>")?;
        }
        s.push_str("<td>");
        sparkline(s, &row.chart, tone(r, &row.class))?;
        s.push_str("</td></tr>\n");
    }
    s.push_str("</tbody></table>\n");
    Ok(())
}

fn ai(s: &mut String, r: &Report) -> fmt::Result {
    if r.ai.is_empty() {
        return Ok(());
    }
    s.push_str(
        "<h3>AI crawlers by purpose</h3>\n<table><thead><tr><th>Purpose</th><th class=\"n\">Requests</th>\
         <th class=\"n\">Bytes</th><th>Robots</th></tr></thead><tbody>\n",
    );
    for a in &r.ai {
        write!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>",
            Esc(&a.purpose),
            group(a.volume.requests),
            bytes(a.volume.bytes)
        )?;
        inline_counts(s, &a.robots, 8)?;
        s.push_str("</td></tr>\n");
    }
    s.push_str("</tbody></table>\n");
    Ok(())
}

fn operators(s: &mut String, r: &Report) -> fmt::Result {
    if r.operators.is_empty() {
        return Ok(());
    }
    s.push_str(
        "<h3>Verification by operator</h3>\n<table><thead><tr><th>Operator</th>\
         <th class=\"n\">Verified</th><th class=\"n\">Unverified</th><th class=\"n\">Spoofed</th>\
         <th>Mix</th><th>Spoofed from</th></tr></thead><tbody>\n",
    );
    for o in &r.operators {
        let v = Verification {
            verified: o.verified,
            unverified: o.unverified,
            spoofed: o.spoofed,
        };
        write!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n{}\">{}</td><td>",
            Esc(&o.operator),
            group(o.verified),
            group(o.unverified),
            if o.spoofed > 0 { " bad" } else { "" },
            group(o.spoofed)
        )?;
        verification_bar(s, &v)?;
        s.push_str("</td><td>");
        inline_counts(s, &o.spoofer_blocks, 6)?;
        s.push_str("</td></tr>\n");
    }
    s.push_str("</tbody></table>\n");
    Ok(())
}

fn wasters(s: &mut String, r: &Report) -> fmt::Result {
    let mut rows: Vec<(usize, &Row)> = r
        .rows
        .iter()
        .enumerate()
        .filter(|(_, row)| !is_human(row) && row.waste.total > 0)
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    rows.sort_by_key(|(_, row)| std::cmp::Reverse(row.waste.total));
    s.push_str(
        "<h3>Top wasters of crawl budget</h3>\n<table><thead><tr><th>Robot</th>\
         <th class=\"n\">Wasted</th><th class=\"n\">Of its requests</th><th>By category</th>\
         </tr></thead><tbody>\n",
    );
    for (i, row) in rows.into_iter().take(TOP_WASTERS) {
        write!(
            s,
            "<tr><td><a href=\"#robot-{i}\">{}</a> <span class=\"muted\">{}</span></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>",
            Esc(&row.robot),
            Esc(&row.class),
            group(row.waste.total),
            percent(ratio(row.waste.total, row.volume.requests))
        )?;
        let parts = waste_parts(&row.waste);
        let segments: Vec<(usize, u64, &str)> = parts
            .iter()
            .enumerate()
            .map(|(n, (name, c))| (n, *c, *name))
            .collect();
        bar(s, &segments, "w")?;
        s.push_str("</td></tr>\n");
    }
    s.push_str("</tbody></table>\n<p class=\"legend\">");
    for (n, (name, _)) in waste_parts(&Default::default()).iter().enumerate() {
        write!(s, "<span><span class=\"sw w{n}\"></span>{name}</span>")?;
    }
    s.push_str("</p>\n");
    Ok(())
}

fn robot(s: &mut String, r: &Report, i: usize, row: &Row) -> fmt::Result {
    write!(
        s,
        "<section class=\"robot\" id=\"robot-{i}\"><h2>{}. {}",
        i + 1,
        Esc(&row.robot)
    )?;
    write!(s, " <span class=\"tag\">{}</span>", Esc(&row.class))?;
    if let Some(op) = &row.operator {
        write!(s, " <span class=\"tag\">{}</span>", Esc(op))?;
    }
    if let Some(purpose) = &row.ai {
        write!(s, " <span class=\"tag\">AI {}</span>", Esc(purpose))?;
    }
    writeln!(
        s,
        "</h2>\n<p>{} requests ({} of all), {} sent, {} per request. \
         <a class=\"up\" href=\"#summary\">Summary ↑</a></p>",
        group(row.volume.requests),
        percent(row.share),
        bytes(row.volume.bytes),
        bytes(
            row.volume
                .bytes
                .checked_div(row.volume.requests)
                .unwrap_or(0)
        )
    )?;
    let series = [Series {
        name: row.robot.clone(),
        tone: tone(r, &row.class),
        values: row.chart.clone(),
    }];
    chart_svg(s, r, &series, 150)?;
    s.push_str("<div class=\"grid\"><div>");
    status(s, &row.status)?;
    let v = &row.verification;
    if row.operator.is_some() || sum([v.verified, v.unverified, v.spoofed]) > 0 {
        write!(
            s,
            "<h4>Verification</h4><p>{} verified, {} unverified, <span class=\"{}\">{} spoofed</span></p>",
            group(v.verified),
            group(v.unverified),
            if v.spoofed > 0 { "bad" } else { "" },
            group(v.spoofed)
        )?;
        verification_bar(s, v)?;
    }
    s.push_str("</div><div>");
    waste(s, row)?;
    s.push_str("</div></div>\n");
    if let Some(c) = &row.robots_txt {
        writeln!(
            s,
            "<h4>robots.txt</h4><p>Looked up as <q>{}</q>, group <q>{}</q>: \
             <span class=\"{}\">{} requests to disallowed paths</span>.</p>",
            Esc(&c.token),
            Esc(&c.group),
            if c.disallowed > 0 { "bad" } else { "" },
            group(c.disallowed)
        )?;
        counts(s, "Disallowed path", &c.paths)?;
    }
    s.push_str("<div class=\"grid\"><div>");
    counts(s, "Top path", &row.top_paths)?;
    s.push_str("</div><div>");
    counts(s, "Top pattern", &row.top_patterns)?;
    s.push_str("</div></div>\n</section>\n");
    Ok(())
}

fn status(s: &mut String, st: &Status) -> fmt::Result {
    let parts = st.parts();
    let segments: Vec<(usize, u64, &str)> = parts
        .iter()
        .enumerate()
        .map(|(n, (name, c))| (n, *c, *name))
        .collect();
    s.push_str("<h4>Status</h4>");
    bar(s, &segments, "s")?;
    s.push_str("<p class=\"legend\">");
    let total = sum(parts.iter().map(|p| p.1));
    for (n, (name, c)) in parts.iter().enumerate().filter(|(_, p)| p.1 > 0) {
        write!(
            s,
            "<span><span class=\"sw s{n}\"></span>{name} {} ({})</span>",
            group(*c),
            percent(ratio(*c, total))
        )?;
    }
    s.push_str("</p>");
    Ok(())
}

fn waste(s: &mut String, row: &Row) -> fmt::Result {
    if is_human(row) {
        return Ok(());
    }
    write!(
        s,
        "<h4>Crawl budget wasted: {} ({})</h4>",
        group(row.waste.total),
        percent(ratio(row.waste.total, row.volume.requests))
    )?;
    if row.waste.total == 0 {
        return Ok(());
    }
    s.push_str("<table class=\"waste\"><tbody>");
    for (n, (name, c)) in waste_parts(&row.waste)
        .iter()
        .enumerate()
        .filter(|(_, p)| p.1 > 0)
    {
        write!(
            s,
            "<tr><td><span class=\"sw w{n}\"></span>{name}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            group(*c),
            percent(ratio(*c, row.volume.requests))
        )?;
    }
    s.push_str("</tbody></table>");
    Ok(())
}

fn humans(s: &mut String, r: &Report) -> fmt::Result {
    // All robots summed, to set the humans beside.
    let mut chart = Vec::new();
    let mut robots = (Volume::default(), 0.0, Status::default());
    for row in r.rows.iter().filter(|row| !is_human(row)) {
        add(&mut chart, &row.chart);
        robots.0.requests = robots.0.requests.saturating_add(row.volume.requests);
        robots.0.bytes = robots.0.bytes.saturating_add(row.volume.bytes);
        robots.1 += row.share;
        add_status(&mut robots.2, &row.status);
    }
    let mut any = false;
    for (i, row) in r.rows.iter().enumerate().filter(|(_, row)| is_human(row)) {
        any = true;
        robot(s, r, i, row)?;
        s.push_str("<section class=\"robot\"><h3>Humans compared with all robots</h3>\n");
        let series = [
            Series {
                name: row.robot.clone(),
                tone: tone(r, &row.class),
                values: row.chart.clone(),
            },
            Series {
                name: "all robots".to_owned(),
                tone: 10,
                values: chart.clone(),
            },
        ];
        chart_svg(s, r, &series, 180)?;
        legend(s, &series)?;
        s.push_str(
            "<table><thead><tr><th></th><th class=\"n\">Requests</th><th>Share</th><th class=\"n\">Bytes</th>\
             <th class=\"n\">Per request</th><th class=\"n\">2xx</th><th class=\"n\">304</th>\
             <th class=\"n\">4xx</th><th class=\"n\">5xx</th></tr></thead><tbody>\n",
        );
        let sides = [
            (row.robot.as_str(), row.volume, row.share, row.status),
            ("all robots", robots.0, robots.1, robots.2),
        ];
        for (name, volume, share, st) in sides {
            let n = volume.requests;
            writeln!(
                s,
                "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                Esc(name),
                group(n),
                share_bar(share),
                bytes(volume.bytes),
                bytes(volume.bytes.checked_div(n).unwrap_or(0)),
                percent(ratio(st.s2xx, n)),
                percent(ratio(st.s304, n)),
                percent(ratio(st.s4xx, n)),
                percent(ratio(st.s5xx, n)),
            )?;
        }
        s.push_str("</tbody></table>\n</section>\n");
    }
    if !any && !r.rows.is_empty() {
        s.push_str("<p class=\"muted\">No human requests were counted.</p>\n");
    }
    Ok(())
}

fn input(s: &mut String, r: &Report) -> fmt::Result {
    let i = &r.input;
    s.push_str("<section id=\"input\"><h2>Input</h2><table class=\"kv\"><tbody>\n");
    s.push_str("<tr><th>Files</th><td>");
    for (n, f) in i.files.iter().enumerate() {
        write!(
            s,
            "{}<code>{}</code>",
            if n > 0 { ", " } else { "" },
            Esc(f)
        )?;
    }
    writeln!(
        s,
        "</td></tr>\n<tr><th>Lines</th><td>{} read, {} counted, {} filtered by host or time, \
         {} without a host</td></tr>\n<tr><th>Skipped</th><td>{} unreadable, {} too long, {} empty</td></tr>",
        group(i.lines),
        group(i.counted),
        group(i.filtered),
        group(i.without_host),
        group(i.skipped.unreadable),
        group(i.skipped.too_long),
        group(i.skipped.empty)
    )?;
    writeln!(
        s,
        "<tr><th>Charts</th><td>{} bucket{} of {}, from {} UTC</td></tr>",
        group(r.chart_len as u64),
        if r.chart_len == 1 { "" } else { "s" },
        span(r.bucket_seconds),
        date(r.chart_start, true)
    )?;
    if let Some(robots_txt) = &r.robots_txt {
        writeln!(
            s,
            "<tr><th>robots.txt</th><td><code>{}</code></td></tr>",
            Esc(robots_txt)
        )?;
    }
    let ranges = &r.ranges;
    s.push_str("<tr><th>Ranges</th><td>");
    for (n, src) in ranges.sources.iter().enumerate() {
        write!(
            s,
            "{}<code>{}</code>",
            if n > 0 { ", " } else { "" },
            Esc(src)
        )?;
    }
    writeln!(
        s,
        " ({} lists loaded); {} verdicts from the log's own field</td></tr>\n</tbody></table></section>",
        group(ranges.loaded.len() as u64),
        group(ranges.from_log)
    )
}

/// A table of counts (paths, patterns), keys escaped and cut.
fn counts(s: &mut String, what: &str, counts: &[Count]) -> fmt::Result {
    if counts.is_empty() {
        return Ok(());
    }
    writeln!(s, "<table class=\"keys\"><thead><tr><th>{what}s</th><th class=\"n\">Requests</th></tr></thead><tbody>")?;
    for c in counts {
        write!(
            s,
            "<tr><td><code>{}</code></td><td class=\"n\">{}",
            Esc(&c.key),
            group(c.requests)
        )?;
        if c.error > 0 {
            write!(
                s,
                " <span class=\"muted\">(up to +{})</span>",
                group(c.error)
            )?;
        }
        s.push_str("</td></tr>\n");
    }
    s.push_str("</tbody></table>\n");
    Ok(())
}

/// The first `max` counts as `key 1,234`, comma-separated.
fn inline_counts(s: &mut String, counts: &[Count], max: usize) -> fmt::Result {
    for (n, c) in counts.iter().take(max).enumerate() {
        let sep = if n > 0 { ", " } else { "" };
        write!(s, "{sep}<code>{}</code> {}", Esc(&c.key), group(c.requests))?;
    }
    if counts.len() > max {
        write!(
            s,
            " <span class=\"muted\">and {} more</span>",
            group((counts.len() - max) as u64)
        )?;
    }
    Ok(())
}

/// The colour of the usual classes.
fn fixed_tone(class: &str) -> Option<usize> {
    Some(match class {
        "human" => 0,
        "search" => 1,
        "ai" => 2,
        "seo" => 3,
        "monitor" => 4,
        "unknown" => 5,
        "no-user-agent" => 6,
        "preview" => 7,
        "feed" => 8,
        "archiver" => 9,
        _ => return None,
    })
}

/// The colour of a class in `r`: fixed for the usual ones; the others,
/// in the order of `r.classes`, take the colours no class of `r` has.
fn tone(r: &Report, class: &str) -> usize {
    if let Some(t) = fixed_tone(class) {
        return t;
    }
    let taken: Vec<usize> = r
        .classes
        .iter()
        .filter_map(|c| fixed_tone(&c.class))
        .collect();
    let free: Vec<usize> = [10, 11, 9, 8, 7, 6, 4, 3]
        .into_iter()
        .filter(|t| !taken.contains(t))
        .collect();
    let others = r.classes.iter().filter(|c| fixed_tone(&c.class).is_none());
    let n = others.take_while(|c| c.class != class).count();
    free.get(n % free.len().max(1)).copied().unwrap_or(11)
}

fn add(sum: &mut Vec<u64>, values: &[u64]) {
    if sum.len() < values.len() {
        sum.resize(values.len(), 0);
    }
    for (a, v) in sum.iter_mut().zip(values) {
        *a = a.saturating_add(*v);
    }
}

fn add_status(a: &mut Status, b: &Status) {
    a.s2xx = a.s2xx.saturating_add(b.s2xx);
    a.s3xx = a.s3xx.saturating_add(b.s3xx);
    a.s304 = a.s304.saturating_add(b.s304);
    a.s4xx = a.s4xx.saturating_add(b.s4xx);
    a.s5xx = a.s5xx.saturating_add(b.s5xx);
    a.other = a.other.saturating_add(b.other);
}

const CSS: &str = include_str!("html/style.css");

#[cfg(test)]
mod tests;
