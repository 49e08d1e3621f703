//! The HTML form's charts: stacked bars per bucket as inline SVG, with
//! UTC time labels and a rounded scale; sparklines and the horizontal
//! bars of shares and mixes.

use std::fmt::{self, Write as _};

use super::{Esc, Plain};
use crate::report::model::{Report, Verification};
use crate::report::text::{fold, group, per, percent, ratio, sum};

/// Bars in a chart at most; longer charts are summed into wider buckets.
pub(super) const MAX_BARS: usize = 240;

/// One series of a stacked chart; `tone` picks its colour (`p0`…`p11`).
pub(super) struct Series {
    pub(super) name: String,
    pub(super) tone: usize,
    pub(super) values: Vec<u64>,
}

/// A stacked bar chart of `series` over the report's buckets, as SVG.
pub(super) fn chart_svg(s: &mut String, r: &Report, series: &[Series], height: u32) -> fmt::Result {
    const W: f64 = 960.0;
    const LEFT: f64 = 58.0;
    const RIGHT: f64 = 8.0;
    const TOP: f64 = 8.0;
    const BOTTOM: f64 = 24.0;
    let len = series.iter().map(|x| x.values.len()).max().unwrap_or(0);
    let fold_by = len.div_ceil(MAX_BARS).max(1);
    let folded: Vec<Vec<u64>> = series
        .iter()
        .map(|x| {
            x.values
                .chunks(fold_by)
                .map(|c| sum(c.iter().copied()))
                .collect()
        })
        .collect();
    let bars = len.div_ceil(fold_by);
    let sums: Vec<u64> = (0..bars)
        .map(|b| sum(folded.iter().map(|v| v.get(b).copied().unwrap_or(0))))
        .collect();
    let h = f64::from(height);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = h - TOP - BOTTOM;
    // A gridline every 28 units at the closest.
    let lines = (plot_h / 28.0).max(2.0) as u64;
    let (step, top) = scale(sums.iter().copied().max().unwrap_or(0), lines);
    let y = |v: f64| TOP + plot_h * (1.0 - v / top as f64);
    let names: Vec<String> = series.iter().map(|x| x.name.clone()).collect();
    writeln!(
        s,
        "<svg class=\"chart\" viewBox=\"0 0 {W} {height}\" role=\"img\"><title>Requests per {} of {}</title>",
        per(r.bucket_seconds.saturating_mul(fold_by as i64)),
        Plain(&names.join(", "))
    )?;
    let mut level = 0;
    while level <= top {
        let ly = y(level as f64);
        writeln!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{ly:.1}\" y2=\"{ly:.1}\"/>\
             <text class=\"axis\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            ly + 4.0,
            compact(level)
        )?;
        match level.checked_add(step) {
            Some(next) => level = next,
            None => break,
        }
    }
    if bars == 0 {
        return s.write_str("</svg>\n");
    }
    let bw = plot_w / bars as f64;
    let gap = if bw > 4.0 { bw * 0.18 } else { 0.0 };
    let seconds = r.bucket_seconds.max(1).saturating_mul(fold_by as i64);
    for b in 0..bars {
        let x = LEFT + b as f64 * bw;
        let start = r
            .chart_start
            .saturating_add((b as i64).saturating_mul(seconds));
        let mut acc = 0u64;
        for (k, x_series) in series.iter().enumerate() {
            let v = folded[k].get(b).copied().unwrap_or(0);
            if v == 0 {
                continue;
            }
            let (y1, y0) = (y(acc.saturating_add(v) as f64), y(acc as f64));
            acc = acc.saturating_add(v);
            writeln!(
                s,
                "<rect class=\"p{}\" x=\"{:.1}\" y=\"{y1:.1}\" width=\"{:.1}\" height=\"{:.1}\">\
                 <title>{} UTC, {}: {}</title></rect>",
                x_series.tone,
                x + gap / 2.0,
                bw - gap,
                (y0 - y1).max(0.5),
                date(start, true),
                Plain(&x_series.name),
                group(v)
            )?;
        }
    }
    // Time labels: where a new period of a round length starts.
    let round = [
        3600,
        3 * 3600,
        6 * 3600,
        12 * 3600,
        86_400,
        2 * 86_400,
        7 * 86_400,
        30 * 86_400,
    ]
    .into_iter()
    .find(|p| (len as i64).saturating_mul(r.bucket_seconds) / p <= 8)
    .unwrap_or(365 * 86_400);
    let mut last = None;
    // Where the last label ended: a label that would overlap it is left out.
    let mut free_from = f64::MIN;
    for b in 0..bars {
        let t = r
            .chart_start
            .saturating_add((b as i64).saturating_mul(seconds));
        let period = t.div_euclid(round);
        let x = LEFT + b as f64 * bw;
        let label = if round >= 86_400 {
            date(t, false)
        } else if last.is_none() || t.rem_euclid(86_400) == 0 {
            when(t, true)
        } else {
            when(t, false)
        };
        if last != Some(period) && x >= free_from {
            writeln!(
                s,
                "<line class=\"tick\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
                 <text class=\"axis\" x=\"{x:.1}\" y=\"{:.1}\">{label}</text>",
                TOP + plot_h,
                TOP + plot_h + 4.0,
                h - 6.0,
            )?;
            // About 7 units a character at the axis' 12 px.
            free_from = x + label.len() as f64 * 7.0 + 12.0;
        }
        last = Some(period);
    }
    s.push_str("</svg>\n");
    Ok(())
}

/// A gridline step and the chart's top (a multiple of it) for `max`,
/// with at most `lines` steps.
fn scale(max: u64, lines: u64) -> (u64, u64) {
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            let s = step.saturating_mul(m);
            if max.div_ceil(s) <= lines || s == u64::MAX {
                return (s, max.div_ceil(s).max(1).saturating_mul(s));
            }
        }
        step = step.saturating_mul(10);
    }
}

/// `1.2k`, `34M`: axis labels.
fn compact(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{}k", n / 1000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// A time in UTC: `13:00`, or with `day`, `12-01 13:00`.
pub(super) fn when(t: i64, day: bool) -> String {
    match time::OffsetDateTime::from_unix_timestamp(t) {
        Ok(d) if day => format!(
            "{:02}-{:02} {:02}:{:02}",
            d.month() as u8,
            d.day(),
            d.hour(),
            d.minute()
        ),
        Ok(d) => format!("{:02}:{:02}", d.hour(), d.minute()),
        Err(_) => t.to_string(),
    }
}

/// A day in UTC: `2026-12-01`; with the time (`2026-12-01 13:00`)
/// when asked or when it is not midnight.
pub(super) fn date(t: i64, time: bool) -> String {
    match time::OffsetDateTime::from_unix_timestamp(t) {
        Ok(d) if !time && t.rem_euclid(86_400) == 0 => {
            format!("{}-{:02}-{:02}", d.year(), d.month() as u8, d.day())
        }
        Ok(d) => format!(
            "{}-{:02}-{:02} {:02}:{:02}",
            d.year(),
            d.month() as u8,
            d.day(),
            d.hour(),
            d.minute()
        ),
        Err(_) => t.to_string(),
    }
}

pub(super) fn legend(s: &mut String, series: &[Series]) -> fmt::Result {
    s.push_str("<p class=\"legend\">");
    for x in series {
        write!(
            s,
            "<span><span class=\"sw p{}\"></span>{}</span>",
            x.tone,
            Esc(&x.name)
        )?;
    }
    s.push_str("</p>\n");
    Ok(())
}

/// A one-line bar chart for a table cell.
pub(super) fn sparkline(s: &mut String, chart: &[u64], tone: usize) -> fmt::Result {
    let folded = fold(chart, 48);
    let max = folded.iter().copied().max().unwrap_or(0).max(1) as f64;
    let w = 2.5;
    write!(
        s,
        "<svg class=\"spark\" viewBox=\"0 0 {} 20\" preserveAspectRatio=\"none\"><path class=\"p{tone}\" d=\"",
        folded.len() as f64 * w
    )?;
    for (n, v) in folded.iter().enumerate().filter(|(_, v)| **v > 0) {
        let h = (*v as f64 / max * 20.0).max(1.0);
        write!(s, "M{:.1} 20v-{h:.1}h{:.1}v{h:.1}z", n as f64 * w, w * 0.8)?;
    }
    s.push_str("\"/></svg>");
    Ok(())
}

/// A horizontal stacked bar of `(colour index, count, name)` segments,
/// coloured `{prefix}{index}`.
pub(super) fn bar(s: &mut String, segments: &[(usize, u64, &str)], prefix: &str) -> fmt::Result {
    let total = sum(segments.iter().map(|x| x.1));
    s.push_str("<div class=\"bar\">");
    for (n, c, name) in segments.iter().filter(|x| x.1 > 0) {
        write!(
            s,
            "<span class=\"{prefix}{n}\" style=\"width:{:.2}%\" title=\"{name}: {}\"></span>",
            ratio(*c, total) * 100.0,
            group(*c)
        )?;
    }
    s.push_str("</div>");
    Ok(())
}

pub(super) fn verification_bar(s: &mut String, v: &Verification) -> fmt::Result {
    bar(
        s,
        &[
            (0, v.verified, "verified"),
            (1, v.unverified, "unverified"),
            (2, v.spoofed, "spoofed"),
        ],
        "v",
    )
}

pub(super) fn share_bar(share: f64) -> String {
    let w = if share.is_finite() {
        (share * 100.0).clamp(0.0, 100.0)
    } else {
        0.0
    };
    format!(
        "<span class=\"share\"><span style=\"width:{w:.2}%\"></span></span> {}",
        percent(share)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_and_labels() {
        assert_eq!(scale(0, 4), (1, 1));
        assert_eq!(scale(4, 4), (1, 4));
        assert_eq!(scale(7, 4), (2, 8));
        assert_eq!(scale(950, 4), (500, 1000));
        assert_eq!(scale(6100, 8), (1000, 7000));
        assert!(scale(u64::MAX, 4).1 >= u64::MAX / 2);
        assert!(scale(u64::MAX, 0).1 >= u64::MAX / 2);
        assert_eq!(compact(12_345), "12k");
        assert_eq!(compact(2_500_000), "2.5M");
        assert_eq!(when(1_714_521_600, true), "05-01 00:00");
        assert_eq!(when(1_714_521_600 + 13 * 3600, false), "13:00");
        assert_eq!(when(i64::MAX, true), i64::MAX.to_string());
        assert_eq!(date(1_714_521_600, false), "2024-05-01");
        assert_eq!(date(1_714_521_600, true), "2024-05-01 00:00");
        assert_eq!(date(1_714_521_600 + 13 * 3600, false), "2024-05-01 13:00");
        assert_eq!(date(i64::MIN, true), i64::MIN.to_string());
    }
}
