//! The crawl report: per robot, what it fetched and what that cost, from
//! access-log lines (`crawlgate report`) or from the running proxy.
//!
//! [`line`] reads a log line into an [`line::Entry`]; a [`Tally`] counts
//! entries in one pass and in bounded memory (per robot: counters, a
//! chart, and [`topk`] sketches, never every URL); [`Tally::finish`]
//! makes the [`model::Report`] that every output form renders.
//!
//! Each line is classified with the proxy's own classifier, and a robot
//! that claims a crawler operator is verified offline: by the verdict
//! crawlgate logged at the time where the line has one, else by the
//! operator's published ranges as saved (never DNS: a report of last
//! month's log cannot ask last month's DNS).

pub mod html;
pub mod line;
pub mod live;
pub mod merge;
pub mod model;
pub mod text;
pub mod topk;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::classify::{ClassId, Classifier, Reason, UaClass, Verdict};
use crate::config::AiKind;
use crate::query::action_param;
use crate::robots::matcher::{GroupId, RobotsTxt};
use crate::verify::{by_ranges, Claim, Identity, Lists, Operators, PrefixTable, Step};

use line::{Entry, Skip};
use model::{
    Compliance, Input, OperatorSummary, RangesUsed, Report, Row, Status, Verification, Volume,
    Waste,
};
use topk::TopK;

/// What a report reads besides the log: the rules, the operators and
/// their saved ranges, the robots.txt, the blocked parameters.
#[derive(Debug)]
pub struct Sources {
    /// The User-Agent classifier.
    pub classifier: Arc<Classifier>,
    /// The crawler operators and their robots' tokens.
    pub operators: Arc<Operators>,
    /// The range lists, as one table (list `i` is bit `i`).
    pub ranges: PrefixTable,
    /// The lists that have data.
    pub loaded: Lists,
    /// Where the lists came from, for the report.
    pub ranges_used: RangesUsed,
    /// The robots.txt compliance is measured against, and where it is
    /// from.
    pub robots: Option<(RobotsTxt, String)>,
    /// The action parameters (`do`, `_fid`).
    pub blocked_params: Vec<Box<str>>,
}

/// Which lines count.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only this host (lines that name none are kept and counted apart).
    pub host: Option<String>,
    /// From this time on, seconds since the epoch.
    pub since: Option<i64>,
    /// Before this time.
    pub until: Option<i64>,
}

/// The most chart buckets a report holds; a longer period widens them.
pub const MAX_BUCKETS: i64 = 2048;
/// Keys longer than this are cut before counting.
pub const MAX_KEY: usize = 512;
/// Query strings seen for one page (a path and its first query
/// parameter: `/doku.php?id=start`, `/list.php?cat=3`) before its
/// requests count as query variants. The first parameter is the page's
/// own: a site that addresses its pages by query string
/// (`/index.php?title=…`) is not faceted navigation.
pub const VARIANTS: u32 = 5;
/// Query parameters that carry a session id: every URL with one is a
/// query variant of the URL without it.
const SESSION_PARAMS: [&[u8]; 7] = [
    b"phpsessid",
    b"sid",
    b"sessionid",
    b"session_id",
    b"jsessionid",
    b"zenid",
    b"oscsid",
];
/// A URL fetched again within this many seconds is a repeat.
const REPEAT_WINDOW: i64 = 3600;
/// How many of each top list are shown.
pub const SHOWN: usize = 10;

/// How much a tally keeps: the keys of each top-k sketch, and the slots
/// of the table of recent URLs that tells repeats (each slot one URL's
/// fingerprint and time, 16 bytes).
#[derive(Clone, Copy, Debug)]
pub struct Capacity {
    /// Paths per row.
    pub paths: usize,
    /// Path patterns per row.
    pub patterns: usize,
    /// Disallowed URLs per row.
    pub disallowed: usize,
    /// Spoofers' address blocks per operator.
    pub blocks: usize,
    /// Recent URLs (a power of two).
    pub recent: usize,
}

impl Capacity {
    /// For a report of files: 4 MiB of recent URLs.
    pub const FILE: Capacity = Capacity {
        paths: 64,
        patterns: 32,
        disallowed: 16,
        blocks: 32,
        recent: 1 << 18,
    };
    /// For each hour of the live report: small, there are 24 of them.
    pub const LIVE: Capacity = Capacity {
        paths: 24,
        patterns: 12,
        disallowed: 10,
        blocks: 10,
        recent: 1 << 14,
    };
}

/// Who a row counts: a robot by the token it is known by, or humans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Robot {
    Human,
    /// A claim to an operator: the claimed token's index.
    Claim(usize),
    /// A bot token of the rules.
    Rule(usize),
    Empty,
    NoBrowserShape,
}

/// A row's counters.
#[derive(Debug)]
struct RowTally {
    robot: String,
    /// Hash of the robot and class, the same in every tally: a URL's
    /// fingerprint in the table of recent URLs starts from it.
    seed: u64,
    class: ClassId,
    operator: Option<usize>,
    ai: Option<AiKind>,
    /// The robots.txt token and group.
    group: Option<(String, GroupId)>,
    volume: Volume,
    status: Status,
    chart: BTreeMap<i64, u64>,
    verification: Verification,
    waste: Waste,
    disallowed: u64,
    disallowed_paths: TopK<()>,
    paths: TopK<()>,
    /// Per page (path and first query parameter): a 64-bit sketch of
    /// the rest of the query strings seen with it.
    pages: TopK<u64>,
    patterns: TopK<()>,
}

/// An operator's verification counters.
#[derive(Debug)]
struct OperatorTally {
    verification: Verification,
    blocks: TopK<()>,
}

/// The counters of one report, fed line by line.
#[derive(Debug)]
pub struct Tally {
    sources: Arc<Sources>,
    capacity: Capacity,
    filter: Filter,
    input: Input,
    rows: Vec<RowTally>,
    index: HashMap<(ClassId, Robot), usize, ahash::RandomState>,
    operators: Vec<OperatorTally>,
    first: i64,
    last: i64,
    /// Seconds per chart bucket.
    width: i64,
    /// Fingerprint and time of recently fetched URLs.
    recent: Box<[(u64, i64)]>,
    from_log: u64,
    hasher: ahash::RandomState,
    /// Reused for keys built per line.
    scratch: Vec<u8>,
}

impl Tally {
    /// An empty tally.
    pub fn new(sources: Arc<Sources>, filter: Filter, capacity: Capacity) -> Self {
        Self {
            operators: (0..sources.operators.operators.len())
                .map(|_| OperatorTally {
                    verification: Verification::default(),
                    blocks: TopK::new(capacity.blocks),
                })
                .collect(),
            sources,
            capacity,
            filter,
            input: Input::default(),
            rows: Vec::new(),
            index: HashMap::with_hasher(topk::hasher()),
            first: i64::MAX,
            last: i64::MIN,
            width: 3600,
            recent: vec![(0, i64::MIN); capacity.recent.next_power_of_two()].into_boxed_slice(),
            from_log: 0,
            hasher: topk::hasher(),
            scratch: Vec::with_capacity(1024),
        }
    }

    /// Takes over `older`'s table of recent URLs, when it is the same
    /// size: a URL fetched at the end of one hour and again at the start
    /// of the next is a repeat.
    pub fn continue_from(&mut self, older: &mut Tally) {
        if older.recent.len() == self.recent.len() {
            std::mem::swap(&mut self.recent, &mut older.recent);
        }
    }

    /// What this tally counts with.
    pub fn sources(&self) -> &Arc<Sources> {
        &self.sources
    }

    /// Names an input, for the report.
    pub fn input_named(&mut self, name: &str) {
        self.input.files.push(name.to_owned());
    }

    /// Counts one line (without its line end).
    pub fn line(&mut self, line: &[u8]) {
        match line::parse(line) {
            Ok(entry) => self.add(&entry),
            Err(skip) => self.skip(skip),
        }
    }

    /// Counts a line that was not read.
    pub fn skip(&mut self, why: Skip) {
        self.input.lines += 1;
        let skipped = &mut self.input.skipped;
        match why {
            Skip::Unreadable => skipped.unreadable += 1,
            Skip::TooLong => skipped.too_long += 1,
            Skip::Empty => skipped.empty += 1,
        }
    }

    /// Counts one request of a log: classified, and a claim verified by
    /// the line's own verdict or the range lists.
    pub fn add(&mut self, e: &Entry<'_>) {
        self.input.lines += 1;
        if !self.wanted(e) {
            self.input.filtered += 1;
            return;
        }
        let sources = Arc::clone(&self.sources);
        let ua = e.user_agent.as_deref();
        let verdict = sources.classifier.classify(ua);
        let logged = e.verified.as_deref().and_then(identity_named);
        self.count_classified(e, verdict, |claim| {
            if let Some(logged) = logged {
                return (logged, true);
            }
            let found = e.client.map_or(0, |ip| sources.ranges.lookup(ip));
            match by_ranges(claim, found, sources.loaded, false) {
                Step::Done(identity) => (identity, false),
                Step::AskDns => (Identity::Unverified, false),
            }
        });
    }

    /// Counts one request the proxy classified and verified itself
    /// (`identity`: its verdict on a claim, if it made one).
    pub fn add_classified(&mut self, e: &Entry<'_>, verdict: Verdict, identity: Option<Identity>) {
        self.input.lines += 1;
        self.count_classified(e, verdict, |_| {
            (identity.unwrap_or(Identity::Unverified), true)
        });
    }

    /// Counts a request of `verdict`; `verify` says what a claim is,
    /// and whether that came from the record rather than the lists.
    fn count_classified(
        &mut self,
        e: &Entry<'_>,
        verdict: Verdict,
        verify: impl FnOnce(&Claim) -> (Identity, bool),
    ) {
        self.input.counted += 1;
        let sources = Arc::clone(&self.sources);
        let ua = e.user_agent.as_deref();
        let mut robot = match verdict.reason {
            _ if verdict.class == UaClass::Human => Robot::Human,
            Reason::Token(i) => Robot::Rule(i),
            Reason::EmptyUserAgent => Robot::Empty,
            Reason::Structure(_) => Robot::NoBrowserShape,
            Reason::NoBotToken(_) | Reason::DeviceModel(_) => Robot::Human,
        };
        let claim = match (robot, ua) {
            (Robot::Human, _) | (_, None) => None,
            (_, Some(ua)) => sources.operators.claim_at(ua),
        };
        let identity = claim.map(|(claim, token)| {
            robot = Robot::Claim(token);
            let (identity, recorded) = verify(&claim);
            self.from_log += u64::from(recorded);
            identity
        });
        let spoofed = identity == Some(Identity::Spoofed);
        let class = sources.classifier.class_of(&verdict, spoofed);
        let row = self.row(class, robot, claim.map(|(c, _)| (c.operator, c.ai)));
        self.count(row, e, robot != Robot::Human);
        if let (Some((claim, _)), Some(identity)) = (claim, identity) {
            let op = &mut self.operators[claim.operator];
            let (mine, theirs) = (&mut self.rows[row].verification, &mut op.verification);
            for v in [mine, theirs] {
                match identity {
                    Identity::Verified(_) => v.verified += 1,
                    Identity::Unverified => v.unverified += 1,
                    Identity::Spoofed => v.spoofed += 1,
                }
            }
            if let (true, Some(ip)) = (spoofed, e.client) {
                op.blocks.add(block_of(ip).as_bytes());
            }
        }
    }

    /// Whether the filter keeps the line.
    fn wanted(&mut self, e: &Entry<'_>) -> bool {
        if self.filter.since.is_some_and(|since| e.time < since)
            || self.filter.until.is_some_and(|until| e.time >= until)
        {
            return false;
        }
        match (&self.filter.host, &e.host) {
            (None, _) => true,
            (Some(want), Some(host)) => host.eq_ignore_ascii_case(want.as_bytes()),
            (Some(_), None) => {
                self.input.without_host += 1;
                true
            }
        }
    }

    /// The row of `class` and `robot`, made on first sight.
    fn row(
        &mut self,
        class: ClassId,
        robot: Robot,
        claim: Option<(usize, Option<AiKind>)>,
    ) -> usize {
        if let Some(&row) = self.index.get(&(class, robot)) {
            return row;
        }
        let sources = Arc::clone(&self.sources);
        let name = match robot {
            Robot::Human => model::HUMANS.to_owned(),
            Robot::Claim(token) => sources.operators.token(token).to_owned(),
            Robot::Rule(rule) => sources.classifier.rules()[rule].token.to_string(),
            Robot::Empty => "(no User-Agent)".to_owned(),
            Robot::NoBrowserShape => "(no browser shape)".to_owned(),
        };
        let group = match (&sources.robots, robot) {
            (None, _) | (_, Robot::Human) => None,
            (Some((robots, _)), Robot::Claim(_) | Robot::Rule(_)) => {
                Some((name.clone(), robots.group(&name)))
            }
            (Some((robots, _)), _) => Some(("*".to_owned(), robots.group("*"))),
        };
        let seed = self
            .hasher
            .hash_one((&name, sources.classifier.class_name(class)));
        self.rows.push(RowTally {
            seed,
            robot: name,
            class,
            operator: claim.map(|(op, _)| op),
            ai: claim.and_then(|(_, ai)| ai),
            group,
            volume: Volume::default(),
            status: Status::default(),
            chart: BTreeMap::new(),
            verification: Verification::default(),
            waste: Waste::default(),
            disallowed: 0,
            disallowed_paths: TopK::new(self.capacity.disallowed),
            paths: TopK::new(self.capacity.paths),
            pages: TopK::new(self.capacity.paths),
            patterns: TopK::new(self.capacity.patterns),
        });
        let row = self.rows.len() - 1;
        self.index.insert((class, robot), row);
        row
    }

    /// Counts `e` in row `r`.
    fn count(&mut self, r: usize, e: &Entry<'_>, is_robot: bool) {
        self.first = self.first.min(e.time);
        self.last = self.last.max(e.time);
        self.widen();
        let bucket = e.time.div_euclid(self.width);
        let path = cut(&e.path);
        let query = e.query.as_deref().map(cut);
        let row = &mut self.rows[r];
        row.volume.requests += 1;
        row.volume.bytes += e.bytes;
        *row.chart.entry(bucket).or_default() += 1;
        let status = &mut row.status;
        match e.status {
            304 => status.s304 += 1,
            200..=299 => status.s2xx += 1,
            300..=399 => status.s3xx += 1,
            400..=499 => status.s4xx += 1,
            500..=599 => status.s5xx += 1,
            _ => status.other += 1,
        }
        row.paths.add(path);
        let variant = match query {
            Some(q) if is_robot => {
                let (first, rest) = match q.iter().position(|&b| b == b'&') {
                    Some(amp) => (&q[..amp], &q[amp + 1..]),
                    None => (q, &b""[..]),
                };
                self.scratch.clear();
                self.scratch.extend_from_slice(path);
                self.scratch.push(b'?');
                self.scratch.extend_from_slice(first);
                let seen = row.pages.add(cut(&self.scratch));
                *seen |= 1u64 << (self.hasher.hash_one(rest) & 63);
                seen.count_ones() >= VARIANTS || has_session_id(q)
            }
            _ => false,
        };
        pattern(path, query, &mut self.scratch);
        row.patterns.add(&self.scratch);
        if !is_robot {
            return;
        }
        // The URL, once, for the robots.txt and the repeat table.
        self.scratch.clear();
        self.scratch.extend_from_slice(path);
        if let Some(q) = query {
            self.scratch.push(b'?');
            self.scratch.extend_from_slice(q);
        }
        let url = cut(&self.scratch);
        let fingerprint = self.hasher.hash_one((self.rows[r].seed, url)) | 1;
        let slots = self.recent.len();
        let slot = &mut self.recent[(fingerprint >> 40) as usize & (slots - 1)];
        let repeat = slot.0 == fingerprint && (0..REPEAT_WINDOW).contains(&(e.time - slot.1));
        *slot = (fingerprint, e.time);
        let sources = &self.sources;
        let row = &mut self.rows[r];
        if let (Some((robots, _)), Some((_, group))) = (&sources.robots, &row.group) {
            if !robots.allowed(*group, url) {
                row.disallowed += 1;
                row.disallowed_paths.add(url);
            }
        }
        let waste = &mut row.waste;
        let wasted = if query.is_some_and(|q| action_param(q, &sources.blocked_params).is_some()) {
            &mut waste.action_urls
        } else if is_robots_or_sitemap(path) {
            &mut waste.robots_and_sitemaps
        } else if (500..=599).contains(&e.status) {
            &mut waste.server_errors
        } else if matches!(e.status, 404 | 410) {
            &mut waste.not_found
        } else if matches!(e.status, 301 | 302 | 303 | 307 | 308) {
            &mut waste.redirects
        } else if repeat {
            &mut waste.repeats
        } else if variant {
            &mut waste.query_variants
        } else {
            return;
        };
        *wasted += 1;
        waste.total += 1;
    }

    /// Widens the chart buckets while the period needs more than
    /// [`MAX_BUCKETS`].
    fn widen(&mut self) {
        while self.last.div_euclid(self.width) - self.first.div_euclid(self.width) >= MAX_BUCKETS {
            self.width *= 2;
            let width = self.width;
            for row in &mut self.rows {
                let old = std::mem::take(&mut row.chart);
                for (bucket, n) in old {
                    // Old buckets were half as wide: bucket * old width.
                    *row.chart
                        .entry((bucket * (width / 2)).div_euclid(width))
                        .or_default() += n;
                }
            }
        }
    }

    /// The finished report.
    pub fn finish(&self, generator: String) -> Report {
        let total = self.rows.iter().fold(Volume::default(), |t, r| Volume {
            requests: t.requests + r.volume.requests,
            bytes: t.bytes + r.volume.bytes,
        });
        let share = |n: u64| merge::share(n, total.requests);
        let counted = self.input.counted > 0;
        let (start, len) = match counted {
            true => {
                let first = self.first.div_euclid(self.width);
                let last = self.last.div_euclid(self.width);
                (first, (last - first + 1) as usize)
            }
            false => (0, 0),
        };
        let dense = |chart: &BTreeMap<i64, u64>| {
            let mut out = vec![0u64; len];
            for (&bucket, &n) in chart {
                if let Some(slot) = usize::try_from(bucket - start)
                    .ok()
                    .and_then(|i| out.get_mut(i))
                {
                    *slot += n;
                }
            }
            out
        };
        let sources = &*self.sources;
        let classifier = &sources.classifier;
        let operators = &sources.operators;
        let mut rows: Vec<Row> = self
            .rows
            .iter()
            .map(|r| {
                let robots_txt = r.group.as_ref().map(|(token, group)| Compliance {
                    token: token.clone(),
                    group: group_name(sources, token, *group),
                    disallowed: r.disallowed,
                    paths: r.disallowed_paths.top(SHOWN),
                });
                Row {
                    robot: r.robot.clone(),
                    class: classifier.class_name(r.class).to_owned(),
                    operator: r
                        .operator
                        .map(|op| operators.operators[op].name.to_string()),
                    ai: r.ai.map(|kind| kind.as_str().to_owned()),
                    volume: r.volume,
                    share: share(r.volume.requests),
                    chart: dense(&r.chart),
                    status: r.status,
                    verification: r.verification,
                    waste: r.waste,
                    robots_txt,
                    top_paths: r.paths.top(SHOWN),
                    top_patterns: r.patterns.top(SHOWN),
                }
            })
            .collect();
        model::sort_rows(&mut rows);
        let (classes, ai) = merge::summaries(&rows, len, total.requests);
        let operators_summary = self
            .operators
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                let v = t.verification;
                v.verified + v.unverified + v.spoofed > 0
            })
            .map(|(i, t)| OperatorSummary {
                operator: operators.operators[i].name.to_string(),
                verified: t.verification.verified,
                unverified: t.verification.unverified,
                spoofed: t.verification.spoofed,
                spoofer_blocks: t.blocks.top(SHOWN),
            })
            .collect();
        let mut ranges = sources.ranges_used.clone();
        ranges.from_log = self.from_log;
        Report {
            generator,
            first: counted.then(|| rfc3339(self.first)),
            last: counted.then(|| rfc3339(self.last)),
            bucket_seconds: self.width,
            chart_start: start * self.width,
            chart_len: len,
            total,
            classes,
            operators: operators_summary,
            ai,
            rows,
            robots_txt: sources.robots.as_ref().map(|(_, from)| from.clone()),
            ranges,
            input: self.input.clone(),
        }
    }
}

/// The identity crawlgate logged as `text` (the inverse of
/// [`Identity::as_str`], whose names the log writes).
fn identity_named(text: &[u8]) -> Option<Identity> {
    Identity::ALL
        .into_iter()
        .find(|identity| identity.as_str().as_bytes() == text)
}

/// The address block a spoofer is listed by: IPv4 /24, IPv6 /48.
fn block_of(ip: std::net::IpAddr) -> String {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            format!("{a}.{b}.{c}.0/24")
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => block_of(IpAddr::V4(v4)),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}::/48", s[0], s[1], s[2])
            }
        },
    }
}

/// Whether a query names a session-id parameter ([`SESSION_PARAMS`]).
fn has_session_id(query: &[u8]) -> bool {
    query.split(|&b| b == b'&').any(|pair| {
        let name = pair.split(|&b| b == b'=').next().unwrap_or(pair);
        SESSION_PARAMS.iter().any(|s| name.eq_ignore_ascii_case(s))
    })
}

/// At most [`MAX_KEY`] bytes.
fn cut(key: &[u8]) -> &[u8] {
    &key[..key.len().min(MAX_KEY)]
}

/// robots.txt, and the usual sitemap addresses (crawlgate's `/sitemaps/`
/// among them).
fn is_robots_or_sitemap(path: &[u8]) -> bool {
    let lower = |p: &[u8], s: &[u8]| p.len() >= s.len() && p[..s.len()].eq_ignore_ascii_case(s);
    path.eq_ignore_ascii_case(b"/robots.txt")
        || lower(path, b"/sitemaps/")
        || (lower(path, b"/sitemap")
            && [&b".xml"[..], b".xml.gz", b".txt"].iter().any(|end| {
                path.len() >= end.len() && path[path.len() - end.len()..].eq_ignore_ascii_case(end)
            }))
}

/// A path's pattern into `out`: a segment of digits is `{n}`, an id-like
/// segment (eight or more letters and digits with a digit, or a long
/// hex run) is `{id}`; the query keeps its parameter names in order.
fn pattern(path: &[u8], query: Option<&[u8]>, out: &mut Vec<u8>) {
    out.clear();
    for segment in path.split(|&b| b == b'/').skip(1) {
        out.push(b'/');
        let digits = !segment.is_empty() && segment.iter().all(u8::is_ascii_digit);
        let id_like = segment.len() >= 8
            && segment.iter().any(u8::is_ascii_digit)
            && segment
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_');
        if digits {
            out.extend_from_slice(b"{n}");
        } else if id_like {
            out.extend_from_slice(b"{id}");
        } else {
            out.extend_from_slice(segment);
        }
    }
    if out.is_empty() {
        out.push(b'/');
    }
    if let Some(query) = query {
        let mut sep = b'?';
        for pair in query.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
            let name = pair.split(|&b| b == b'=').next().unwrap_or(pair);
            out.push(sep);
            out.extend_from_slice(name);
            out.push(b'=');
            sep = b'&';
        }
    }
    out.truncate(MAX_KEY);
}

/// Which group a robots.txt applies to `token`: the token's own, `*`, or
/// none.
fn group_name(sources: &Sources, token: &str, group: GroupId) -> String {
    let Some((robots, _)) = &sources.robots else {
        return "none".to_owned();
    };
    if !group.applies() {
        "none".to_owned()
    } else if token != "*" && group == robots.group("*") {
        "*".to_owned()
    } else {
        token.to_owned()
    }
}

/// Seconds since the epoch as RFC 3339 UTC.
fn rfc3339(seconds: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(seconds)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| seconds.to_string())
}

#[cfg(test)]
mod tests;
