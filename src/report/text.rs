//! The crawl report for a terminal: a summary, a table of robots with a
//! sparkline each, then the busiest robots in detail, within a given
//! number of columns.
//!
//! Every text field of the report is what a client sent. Before it
//! reaches the terminal, control characters (ESC above all: escape
//! sequences would be obeyed), bidi controls and other invisible
//! characters are written as `\xHH` (below U+0080) or `\u{…}`, and a
//! key longer than the room it has is cut with `…`. The number and
//! size formats here are the HTML form's too.

use std::fmt::{self, Write as _};
use std::io;

use super::model::{Count, Report, Row, Waste};

/// The narrowest layout written; a smaller `width` is read as this.
pub const MIN_WIDTH: usize = 40;
/// The widest layout written; a larger `width` is read as this.
pub const MAX_WIDTH: usize = 400;
/// Robots shown in detail after the table.
const DETAILED: usize = 8;
/// Paths and patterns listed per robot in the details.
const TOP: usize = 5;
/// The sparkline's levels, lowest first.
const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Writes `report` for a terminal `width` columns wide (80 is usual),
/// clamped to [`MIN_WIDTH`]..=[`MAX_WIDTH`].
pub fn write(report: &Report, out: &mut (impl io::Write + ?Sized), width: usize) -> io::Result<()> {
    let width = width.clamp(MIN_WIDTH, MAX_WIDTH);
    let mut s = String::new();
    render(&mut s, report, width).map_err(|_| io::Error::other("formatting the report"))?;
    out.write_all(s.as_bytes())
}

fn render(s: &mut String, r: &Report, width: usize) -> fmt::Result {
    summary(s, r, width)?;
    classes(s, r, width)?;
    ai(s, r, width)?;
    operators(s, r, width)?;
    robots(s, r, width)?;
    details(s, r, width)
}

fn summary(s: &mut String, r: &Report, width: usize) -> fmt::Result {
    writeln!(
        s,
        "{}",
        cut(&format!("{} · crawl report", r.generator), width)
    )?;
    let field = |s: &mut String, name: &str, value: &str| {
        writeln!(s, "{name:<11} {}", cut(value, width.saturating_sub(12)))
    };
    let period = match (&r.first, &r.last) {
        (Some(first), Some(last)) => format!("{first} .. {last}"),
        _ => "no requests counted".to_owned(),
    };
    field(s, "Period", &period)?;
    let buckets = format!(
        "{} bucket{} of {}, UTC",
        group(r.chart_len as u64),
        if r.chart_len == 1 { "" } else { "s" },
        span(r.bucket_seconds)
    );
    field(s, "", &buckets)?;
    let files = r.input.files.join(", ");
    field(s, "Input", if files.is_empty() { "-" } else { &files })?;
    let i = &r.input;
    let skipped = sum([i.skipped.unreadable, i.skipped.too_long, i.skipped.empty]);
    let lines = format!(
        "{} read, {} counted, {} filtered, {} skipped",
        group(i.lines),
        group(i.counted),
        group(i.filtered),
        group(skipped)
    );
    field(s, "Lines", &lines)?;
    if skipped > 0 {
        let why = format!(
            "({} unreadable, {} too long, {} empty)",
            group(i.skipped.unreadable),
            group(i.skipped.too_long),
            group(i.skipped.empty)
        );
        field(s, "", &why)?;
    }
    if i.without_host > 0 {
        field(s, "", &format!("{} without a host", group(i.without_host)))?;
    }
    let total = format!(
        "{} requests, {}",
        group(r.total.requests),
        bytes(r.total.bytes)
    );
    field(s, "Total", &total)?;
    if let Some(robots_txt) = &r.robots_txt {
        field(s, "robots.txt", robots_txt)?;
    }
    if !r.ranges.loaded.is_empty() || r.ranges.from_log > 0 {
        let ranges = format!(
            "{} list{} loaded; {} verdicts from the log",
            r.ranges.loaded.len(),
            if r.ranges.loaded.len() == 1 { "" } else { "s" },
            group(r.ranges.from_log)
        );
        field(s, "Ranges", &ranges)?;
    }
    Ok(())
}

fn classes(s: &mut String, r: &Report, width: usize) -> fmt::Result {
    if r.classes.is_empty() {
        return Ok(());
    }
    let mut t = Table::new(vec![
        Col::flex("CLASS", 8),
        Col::num("requests", 0),
        Col::num("share", 0),
        Col::num("bytes", 1),
        Col::text("chart", 2),
    ]);
    for c in &r.classes {
        t.row(vec![
            c.class.clone(),
            group(c.volume.requests),
            percent(c.share),
            bytes(c.volume.bytes),
            spark(&c.chart, 24),
        ]);
    }
    writeln!(s)?;
    t.write(s, width)
}

fn ai(s: &mut String, r: &Report, width: usize) -> fmt::Result {
    if r.ai.is_empty() {
        return Ok(());
    }
    writeln!(s, "\nAI CRAWLERS BY PURPOSE")?;
    for a in &r.ai {
        let head = format!(
            "  {} {} requests, {}:",
            visible(&a.purpose, 40),
            group(a.volume.requests),
            bytes(a.volume.bytes)
        );
        let items: Vec<String> = a.robots.iter().map(count_item).collect();
        list(s, &head, &items, width)?;
    }
    Ok(())
}

fn operators(s: &mut String, r: &Report, width: usize) -> fmt::Result {
    if r.operators.is_empty() {
        return Ok(());
    }
    let mut t = Table::new(vec![
        Col::flex("OPERATOR", 8),
        Col::num("verified", 0),
        Col::num("unverified", 1),
        Col::num("spoofed", 0),
    ]);
    for o in &r.operators {
        t.row(vec![
            o.operator.clone(),
            group(o.verified),
            group(o.unverified),
            group(o.spoofed),
        ]);
    }
    writeln!(s)?;
    t.write(s, width)?;
    for o in r.operators.iter().filter(|o| !o.spoofer_blocks.is_empty()) {
        let head = format!("  {} spoofed from:", visible(&o.operator, 40));
        let items: Vec<String> = o.spoofer_blocks.iter().take(TOP).map(count_item).collect();
        list(s, &head, &items, width)?;
    }
    Ok(())
}

fn robots(s: &mut String, r: &Report, width: usize) -> fmt::Result {
    if r.rows.is_empty() {
        return Ok(());
    }
    let mut t = Table::new(vec![
        Col::num("#", 0),
        Col::flex("ROBOT", 12),
        Col::text("class", 4),
        Col::num("requests", 0),
        Col::num("share", 0),
        Col::num("bytes", 5),
        Col::num("verif", 6),
        Col::num("spoofed", 1),
        Col::num("waste", 1),
        Col::num("disallow", 3),
        Col::text("chart", 2),
    ]);
    // The sparkline grows with the room: 8 characters at 80 columns, 24
    // from 112.
    let spark_len = (width.saturating_sub(80) / 2 + 8).min(24);
    for (i, row) in ordered(r) {
        let v = &row.verification;
        let claims = sum([v.verified, v.unverified, v.spoofed]);
        let human = is_human(row);
        t.row(vec![
            (i + 1).to_string(),
            row.robot.clone(),
            row.class.clone(),
            group(row.volume.requests),
            percent(row.share),
            bytes(row.volume.bytes),
            if claims == 0 {
                "-".to_owned()
            } else {
                percent(ratio(v.verified, claims))
            },
            if claims == 0 {
                "-".to_owned()
            } else {
                group(v.spoofed)
            },
            if human {
                "-".to_owned()
            } else {
                percent(ratio(row.waste.total, row.volume.requests))
            },
            match &row.robots_txt {
                Some(c) => group(c.disallowed),
                None => "-".to_owned(),
            },
            spark(&row.chart, spark_len),
        ]);
    }
    writeln!(s)?;
    t.write(s, width)
}

fn details(s: &mut String, r: &Report, width: usize) -> fmt::Result {
    let robots = ordered(r).filter(|(_, row)| !is_human(row)).take(DETAILED);
    let humans = ordered(r).filter(|(_, row)| is_human(row));
    for (i, row) in robots.chain(humans) {
        writeln!(s)?;
        let mut head = format!("{}. {} ({}", i + 1, row.robot, row.class);
        if let Some(op) = &row.operator {
            head.push_str(", ");
            head.push_str(op);
        }
        if let Some(purpose) = &row.ai {
            head.push_str(", AI ");
            head.push_str(purpose);
        }
        head.push(')');
        writeln!(s, "{}", cut(&head, width))?;
        let room = width.saturating_sub(3);
        let volume = format!(
            "{} requests ({}), {}",
            group(row.volume.requests),
            percent(row.share),
            bytes(row.volume.bytes)
        );
        writeln!(s, "   {}", cut(&volume, room))?;
        let n = row.volume.requests;
        let st = &row.status;
        let mix: Vec<String> = st
            .parts()
            .iter()
            .filter(|(_, c)| *c > 0)
            .map(|(name, c)| format!("{name} {}", percent(ratio(*c, n))))
            .collect();
        list(s, "   status", &mix, width)?;
        let v = &row.verification;
        if row.operator.is_some() || sum([v.verified, v.unverified, v.spoofed]) > 0 {
            let line = format!(
                "claim: {} verified, {} unverified, {} spoofed",
                group(v.verified),
                group(v.unverified),
                group(v.spoofed)
            );
            writeln!(s, "   {}", cut(&line, room))?;
        }
        if row.waste.total > 0 {
            let head = format!(
                "   waste {} ({}):",
                group(row.waste.total),
                percent(ratio(row.waste.total, n))
            );
            let parts: Vec<String> = waste_parts(&row.waste)
                .iter()
                .filter(|(_, c)| *c > 0)
                .map(|(name, c)| format!("{name} {}", group(*c)))
                .collect();
            list(s, &head, &parts, width)?;
        }
        if let Some(c) = &row.robots_txt {
            let head = format!(
                "   robots.txt group {}: {} disallowed",
                visible(&c.group, 40),
                group(c.disallowed)
            );
            writeln!(s, "{}", cut(&head, width))?;
            top(s, &c.paths, width)?;
        }
        if !row.top_paths.is_empty() {
            writeln!(s, "   top paths")?;
            top(s, &row.top_paths, width)?;
        }
    }
    Ok(())
}

/// The rows in the report's order, humans last.
fn ordered(r: &Report) -> impl Iterator<Item = (usize, &Row)> {
    let robots = r.rows.iter().enumerate().filter(|(_, row)| !is_human(row));
    robots.chain(r.rows.iter().enumerate().filter(|(_, row)| is_human(row)))
}

fn top(s: &mut String, counts: &[Count], width: usize) -> fmt::Result {
    let shown = &counts[..counts.len().min(TOP)];
    let w = shown
        .iter()
        .map(|c| group(c.requests).len())
        .max()
        .unwrap_or(0);
    for c in shown {
        let room = width.saturating_sub(w + 7);
        let mark = if c.error > 0 { '+' } else { ' ' };
        writeln!(
            s,
            "     {:>w$}{mark} {}",
            group(c.requests),
            cut(&c.key, room)
        )?;
    }
    Ok(())
}

fn count_item(c: &Count) -> String {
    let plus = if c.error > 0 { "+" } else { "" };
    format!("{} {}{plus}", visible(&c.key, 60), group(c.requests))
}

/// Writes `head` then `items` (already made visible) separated by
/// commas, wrapped at `width` under an indent of four.
fn list(s: &mut String, head: &str, items: &[String], width: usize) -> fmt::Result {
    let mut line = cut(head, width);
    let mut used = cols(&line);
    let mut first = true;
    for item in items {
        let item = cut(item, width.saturating_sub(5));
        let sep = if first { " " } else { ", " };
        let w = cols(&item);
        if used + sep.len() + w + 1 > width {
            writeln!(s, "{line}{}", if first { "" } else { "," })?;
            line = format!("    {item}");
            used = 4 + w;
        } else {
            line.push_str(sep);
            line.push_str(&item);
            used += sep.len() + w;
        }
        first = false;
    }
    writeln!(s, "{line}")
}

/// A column of a [`Table`].
struct Col {
    head: &'static str,
    /// Right-aligned.
    right: bool,
    /// Takes the room left; cut down to `min` when it is short.
    flex: Option<usize>,
    /// Dropped when the table is too wide, highest first (0: never).
    drop: u8,
    /// The widest it gets.
    max: usize,
}

impl Col {
    fn num(head: &'static str, drop: u8) -> Col {
        Col {
            head,
            right: true,
            flex: None,
            drop,
            max: usize::MAX,
        }
    }
    fn text(head: &'static str, drop: u8) -> Col {
        Col {
            head,
            right: false,
            flex: None,
            drop,
            max: 24,
        }
    }
    fn flex(head: &'static str, min: usize) -> Col {
        Col {
            head,
            right: false,
            flex: Some(min),
            drop: 0,
            max: usize::MAX,
        }
    }
}

/// A table whose cells are cut and whose columns are dropped to fit.
struct Table {
    cols: Vec<Col>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(cols: Vec<Col>) -> Table {
        Table {
            cols,
            rows: Vec::new(),
        }
    }

    /// Adds a row of raw cells (log text included: made visible here).
    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn write(&self, s: &mut String, width: usize) -> fmt::Result {
        // An optional column that says nothing ("-" in every row) is left out.
        let mut shown: Vec<bool> = (0..self.cols.len())
            .map(|c| {
                self.cols[c].drop == 0
                    || self.rows.is_empty()
                    || self.rows.iter().any(|r| r.get(c).is_some_and(|v| v != "-"))
            })
            .collect();
        let mut widths: Vec<usize> = self
            .cols
            .iter()
            .enumerate()
            .map(|(c, col)| {
                let cells = self.rows.iter().filter_map(|r| r.get(c));
                let natural = cells.map(|v| cut_cols(v, width)).max().unwrap_or(0);
                natural.max(col.head.len()).min(col.max)
            })
            .collect();
        let total = |shown: &[bool], widths: &[usize]| -> usize {
            let n = shown.iter().filter(|s| **s).count();
            let sum: usize = (0..widths.len())
                .filter(|c| shown[*c])
                .map(|c| widths[c])
                .sum();
            sum + 2 * n.saturating_sub(1) + 1
        };
        // Shrink the flexible column to its minimum, then drop the
        // optional columns, then shrink it further.
        for pass in 0..2 {
            loop {
                let over = total(&shown, &widths).saturating_sub(width);
                if over == 0 {
                    break;
                }
                let flex = (0..self.cols.len()).find(|c| shown[*c] && self.cols[*c].flex.is_some());
                if let Some(f) = flex {
                    let min = if pass == 0 {
                        self.cols[f].flex.unwrap_or(1).max(self.cols[f].head.len())
                    } else {
                        3
                    };
                    if widths[f] > min {
                        widths[f] = widths[f].saturating_sub(over).max(min);
                        continue;
                    }
                }
                if pass == 1 {
                    break;
                }
                let droppable = (0..self.cols.len())
                    .filter(|c| shown[*c] && self.cols[*c].drop > 0)
                    .max_by_key(|c| (self.cols[*c].drop, *c));
                match droppable {
                    Some(c) => shown[c] = false,
                    None => break,
                }
            }
        }
        let heads: Vec<String> = self.cols.iter().map(|c| c.head.to_owned()).collect();
        for cells in std::iter::once(&heads).chain(&self.rows) {
            let mut line = String::from(" ");
            let mut first = true;
            for (c, col) in self.cols.iter().enumerate() {
                if !shown[c] {
                    continue;
                }
                if !first {
                    line.push_str("  ");
                }
                first = false;
                let cell = cut(cells.get(c).map_or("", String::as_str), widths[c]);
                let pad = " ".repeat(widths[c].saturating_sub(cols(&cell)));
                if col.right {
                    line.push_str(&pad);
                    line.push_str(&cell);
                } else {
                    line.push_str(&cell);
                    line.push_str(&pad);
                }
            }
            writeln!(s, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// Whether a row is the humans' row.
pub(super) fn is_human(row: &Row) -> bool {
    row.class == "human"
}

/// Whether a character is invisible or acts on the display rather than
/// showing: C0 and C1 controls, DEL, bidi controls and marks, zero-width
/// characters, line and paragraph separators, interlinear annotation
/// marks, tag characters and the noncharacters U+FFFE, U+FFFF.
pub(super) fn hidden(c: char) -> bool {
    matches!(c as u32,
        0x00..=0x1f | 0x7f..=0x9f | 0xad | 0x34f | 0x61c | 0x180e
        | 0x200b..=0x200f | 0x2028..=0x202e | 0x2060..=0x206f
        | 0xfeff | 0xfff9..=0xfffb | 0xfffe | 0xffff | 0xe0000..=0xe007f)
}

/// `s` with every [`hidden`] character written as `\xHH` (below U+0080)
/// or `\u{…}`, cut at `cap` characters with `…`.
pub fn visible(s: &str, cap: usize) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == cap {
            out.push('…');
            break;
        }
        push_visible(&mut out, c);
    }
    out
}

fn push_visible(out: &mut String, c: char) {
    if !hidden(c) {
        out.push(c);
    } else if (c as u32) < 0x80 {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    }
}

/// `s` made [`visible`] and cut to `width` terminal columns, the last
/// one `…` when it was cut.
pub fn cut(s: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    // Where `out` stood when it last fitted in `width - 1` columns.
    let mut fits = (0, 0);
    let mut piece = String::new();
    for c in s.chars() {
        piece.clear();
        push_visible(&mut piece, c);
        for p in piece.chars() {
            let w = char_cols(p);
            if used + w > width {
                out.truncate(fits.0);
                if width > 0 {
                    out.push('…');
                }
                return out;
            }
            out.push(p);
            used += w;
            if used < width {
                fits = (out.len(), used);
            }
        }
    }
    out
}

/// The columns `s` takes once [`cut`] to `width`.
fn cut_cols(s: &str, width: usize) -> usize {
    cols(&cut(s, width))
}

/// The terminal columns `s` takes: two for East Asian wide and
/// fullwidth characters, none for combining marks, one otherwise.
pub fn cols(s: &str) -> usize {
    s.chars().map(char_cols).sum()
}

fn char_cols(c: char) -> usize {
    match c as u32 {
        0x300..=0x36f
        | 0x483..=0x489
        | 0x591..=0x5bd
        | 0x610..=0x61a
        | 0x64b..=0x65f
        | 0x1ab0..=0x1aff
        | 0x1dc0..=0x1dff
        | 0x20d0..=0x20ff
        | 0xfe00..=0xfe0f
        | 0xfe20..=0xfe2f => 0,
        0x1100..=0x115f
        | 0x2e80..=0x303e
        | 0x3041..=0x33ff
        | 0x3400..=0x4dbf
        | 0x4e00..=0x9fff
        | 0xa000..=0xa4cf
        | 0xac00..=0xd7a3
        | 0xf900..=0xfaff
        | 0xfe30..=0xfe4f
        | 0xff00..=0xff60
        | 0xffe0..=0xffe6
        | 0x1f300..=0x1f64f
        | 0x1f900..=0x1f9ff
        | 0x20000..=0x3fffd => 2,
        _ => 1,
    }
}

/// `n` with a comma every three digits: `1,234,567`.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A size in bytes, in B, KiB, MiB, GiB or TiB: `12.3 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v < 10.0 {
        format!("{v:.2} {}", UNITS[unit])
    } else if v < 100.0 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.0} {}", UNITS[unit])
    }
}

/// A share 0–1 as a percentage: `12.3%`, `<0.1%` for a sliver.
pub fn percent(share: f64) -> String {
    if !share.is_finite() || share <= 0.0 {
        "0%".to_owned()
    } else if share < 0.001 {
        "<0.1%".to_owned()
    } else {
        format!("{:.1}%", (share * 100.0).min(100.0))
    }
}

/// `part / whole`, 0 when `whole` is.
pub fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// A period in seconds in words: `1 hour`, `6 hours`, `1 day`.
pub fn span(seconds: i64) -> String {
    let (n, unit) = match seconds {
        s if s > 0 && s % 86_400 == 0 => (s / 86_400, "day"),
        s if s > 0 && s % 3600 == 0 => (s / 3600, "hour"),
        s if s > 0 && s % 60 == 0 => (s / 60, "minute"),
        s => (s, "second"),
    };
    let plural = if n == 1 { "" } else { "s" };
    format!("{n} {unit}{plural}")
}

/// A period after "per": `hour`, `6 hours`, `day`.
pub fn per(seconds: i64) -> String {
    match span(seconds).strip_prefix("1 ") {
        Some(one) => one.to_owned(),
        None => span(seconds),
    }
}

/// `values` summed into at most `n` groups of equal size (the last may
/// be short).
pub fn fold(values: &[u64], n: usize) -> Vec<u64> {
    if n == 0 || values.is_empty() {
        return Vec::new();
    }
    let per = values.len().div_ceil(n);
    values.chunks(per).map(|c| sum(c.iter().copied())).collect()
}

/// The sum of `values`, saturating rather than overflowing.
pub fn sum(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

/// A sparkline of `chart` at most `n` characters wide, blank for none.
pub fn spark(chart: &[u64], n: usize) -> String {
    let folded = fold(chart, n);
    let max = folded.iter().copied().max().unwrap_or(0);
    folded
        .iter()
        .map(|&v| {
            if v == 0 || max == 0 {
                ' '
            } else {
                let level = (v as u128 * 8).div_ceil(max as u128) as usize;
                BLOCKS[level.clamp(1, 8) - 1]
            }
        })
        .collect()
}

/// The waste categories in the model's order of precedence, named.
pub fn waste_parts(w: &Waste) -> [(&'static str, u64); 7] {
    [
        ("action URLs", w.action_urls),
        ("robots.txt and sitemaps", w.robots_and_sitemaps),
        ("server errors", w.server_errors),
        ("not found", w.not_found),
        ("redirects", w.redirects),
        ("repeats within the hour", w.repeats),
        ("query variants", w.query_variants),
    ]
}

#[cfg(test)]
pub(crate) mod tests;
