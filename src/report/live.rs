//! The crawl report of the running proxy: every request the proxy
//! classified, counted as it is recorded, for the admin listener's
//! `/report` and `/report.json`.
//!
//! Memory is bounded by time and by sketch: one [`Tally`] per hour
//! (small sketches, [`Capacity::LIVE`]), finished into a [`Report`] when
//! the hour ends, and the finished hours kept for a day. A reload starts
//! a new tally too (its rules may name other classes); the part it ends
//! is merged at once into the one of its hour, so however often the proxy
//! reloads, a day is at most one part per hour. The hours are merged when
//! the report is asked for.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use super::line::Entry;
use super::merge::merge;
use super::model::Report;
use super::{Capacity, Filter, Sources, Tally};
use crate::classify::Verdict;
use crate::outcome::Outcome;
use crate::verify::Identity;

/// Hours a live report covers.
pub const HOURS: i64 = 24;
/// Finished parts kept, at most: one per hour of the day.
const MAX_PARTS: usize = HOURS as usize;

/// The live report's counters (process state: it outlives reloads).
#[derive(Debug, Default)]
pub struct LiveReport {
    inner: Mutex<Hours>,
}

#[derive(Debug, Default)]
struct Hours {
    /// The hour being counted, with the sources it counts with.
    current: Option<(i64, Tally)>,
    /// Finished parts, oldest first, each with its hour.
    done: VecDeque<(i64, Report)>,
}

impl LiveReport {
    /// An empty report.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Hours> {
        // A panic while counting leaves counters, never a broken
        // invariant worth refusing the report for.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts one finished request, when it has its request line and was
    /// classified (a head refused before that is not a visit of anyone's).
    pub fn record_outcome(&self, sources: &Arc<Sources>, outcome: &Outcome) {
        let (Some(req), Some((class, reason))) = (&outcome.request, outcome.verdict) else {
            return;
        };
        let time = req
            .time
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));

        let entry = Entry {
            time,
            client: Some(req.client),
            method: Cow::Borrowed(req.method.as_str().as_bytes()),
            host: req.host().map(|h| Cow::Borrowed(h.as_bytes())),
            path: Cow::Borrowed(req.path().as_bytes()),
            query: req.query().map(|q| Cow::Borrowed(q.as_bytes())),
            status: outcome.status.map_or(0, |s| s.as_u16()),
            bytes: outcome.bytes_out,
            referer: req.referer().map(Cow::Borrowed),
            user_agent: req
                .user_agent()
                .filter(|ua| !ua.is_empty())
                .map(Cow::Borrowed),
            verified: None,
        };
        self.record(sources, &entry, Verdict { class, reason }, outcome.identity);
    }

    /// Counts one request, classified by the proxy with `sources`' rules.
    pub fn record(
        &self,
        sources: &Arc<Sources>,
        e: &Entry<'_>,
        verdict: Verdict,
        identity: Option<Identity>,
    ) {
        let hour = e.time.div_euclid(3600);
        let mut hours = self.lock();
        let fresh = match &hours.current {
            Some((h, tally)) => *h != hour || !Arc::ptr_eq(tally.sources(), sources),
            None => true,
        };
        if fresh {
            let mut next = Tally::new(Arc::clone(sources), Filter::default(), Capacity::LIVE);
            if let Some((h, mut tally)) = hours.current.take() {
                next.continue_from(&mut tally);
                let mut part = tally.finish(String::new());
                // A reload within the hour: one part for the hour.
                if hours.done.back().is_some_and(|(e, _)| *e == h) {
                    if let Some((_, earlier)) = hours.done.pop_back() {
                        part = merge(&[earlier, part], String::new());
                    }
                }
                hours.done.push_back((h, part));
            }
            while hours.done.len() > MAX_PARTS
                || hours.done.front().is_some_and(|(h, _)| *h <= hour - HOURS)
            {
                hours.done.pop_front();
            }
            hours.current = Some((hour, next));
        }
        if let Some((_, tally)) = &mut hours.current {
            tally.add_classified(e, verdict, identity);
        }
    }

    /// The report of the hours up to `now` (seconds since the epoch): the
    /// last [`HOURS`] of them.
    pub fn report(&self, now: i64, generator: String) -> Report {
        let since = now.div_euclid(3600) - HOURS;
        let hours = self.lock();
        let mut parts: Vec<Report> = hours
            .done
            .iter()
            .filter(|(h, _)| *h > since)
            .map(|(_, part)| part.clone())
            .collect();
        if let Some((h, tally)) = &hours.current {
            if *h > since {
                parts.push(tally.finish(String::new()));
            }
        }
        drop(hours);
        let mut report = merge(&parts, generator);
        report.input.files = vec!["(live)".to_owned()];
        report
    }
}

/// A header's bytes, borrowed.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Classifier;
    use crate::report::model::RangesUsed;
    use crate::rules::RuleLists;
    use crate::verify::{Operators, PrefixTable};

    fn sources() -> Arc<Sources> {
        Arc::new(Sources {
            classifier: Arc::new(Classifier::new(&RuleLists::embedded()).expect("rules")),
            operators: Arc::new(Operators::embedded()),
            ranges: PrefixTable::default(),
            loaded: 0,
            ranges_used: RangesUsed::default(),
            robots: None,
            blocked_params: vec!["do".into()],
        })
    }

    fn seen(report: &LiveReport, sources: &Arc<Sources>, time: i64, ua: &str) {
        let line = format!(
            "192.0.2.1 - - [01/Jan/1970:00:00:00 +0000] \"GET /x HTTP/1.1\" 200 5 \"-\" \"{ua}\""
        );
        let mut entry = crate::report::line::parse(line.as_bytes()).expect("line");
        entry.time = time;
        let verdict = sources.classifier.classify(entry.user_agent.as_deref());
        report.record(sources, &entry, verdict, None);
    }

    #[test]
    fn the_last_day_by_hour_across_reloads() {
        let live = LiveReport::new();
        let (a, b) = (sources(), sources());
        let day = 20_000 * 86_400;
        // Yesterday, outside the window; then three hours, a reload in
        // the second.
        seen(&live, &a, day - 2 * 86_400, "curl/8");
        seen(&live, &a, day, "curl/8");
        seen(&live, &a, day + 3600, "curl/8");
        seen(&live, &b, day + 3700, "curl/8");
        seen(
            &live,
            &b,
            day + 7200,
            "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        );
        let report = live.report(day + 7300, "test".into());
        assert_eq!(report.input.counted, 4);
        assert_eq!(report.chart_len, 3);
        let curl = report
            .rows
            .iter()
            .find(|r| r.robot == "curl")
            .expect("curl row");
        assert_eq!(curl.chart, [1, 2, 0]);
        assert_eq!(curl.volume.requests, 3);
        // 01:00 and 01:01:40 (after a reload): a repeat; 00:00 and 01:00,
        // an hour apart, not.
        assert_eq!(curl.waste.repeats, 1);
        assert_eq!(report.rows.last().map(|r| r.robot.as_str()), Some("humans"));
        // A day later, only what is newer than a day.
        let later = live.report(day + 86_400 + 3600, "test".into());
        assert_eq!(later.input.counted, 1, "{:?}", later.rows);
    }

    /// A proxy reloaded every few seconds keeps its day: the parts of an
    /// hour are one (they were one part per reload, 48 at most, and the
    /// day shrank to the last minutes).
    #[test]
    fn frequent_reloads_keep_the_whole_day() {
        let live = LiveReport::new();
        let day = 20_000 * 86_400;
        let base = sources();
        for hour in 0..24 {
            // 100 reloads an hour (new sources, the same rules), one
            // request between each.
            for i in 0..100 {
                let sources = Arc::new(Sources {
                    classifier: Arc::clone(&base.classifier),
                    operators: Arc::clone(&base.operators),
                    ranges: PrefixTable::default(),
                    loaded: 0,
                    ranges_used: RangesUsed::default(),
                    robots: None,
                    blocked_params: vec!["do".into()],
                });
                seen(&live, &sources, day + hour * 3600 + i * 30, "curl/8");
            }
        }
        assert!(live.lock().done.len() <= HOURS as usize);
        let report = live.report(day + 23 * 3600 + 3599, "test".into());
        assert_eq!(report.input.counted, 2400);
        let curl = report
            .rows
            .iter()
            .find(|r| r.robot == "curl")
            .expect("curl row");
        assert_eq!(curl.chart.len(), 24);
        assert!(curl.chart.iter().all(|&n| n == 100), "{:?}", curl.chart);
    }
}
