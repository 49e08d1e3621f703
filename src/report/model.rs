//! The finished report: what every output form (text, HTML, JSON) shows,
//! computed once from the tally. Text fields hold what the log said
//! (lossily decoded when it was not UTF-8); each renderer escapes them
//! for its own form.

use serde::Serialize;

/// A crawl report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `crawlgate <version>`.
    pub generator: String,
    /// What was read and what was counted.
    pub input: Input,
    /// First and last request counted, RFC 3339 UTC (`None`: none).
    pub first: Option<String>,
    /// See `first`.
    pub last: Option<String>,
    /// Seconds per chart bucket: 3600 (hourly) unless the period is
    /// long, then a multiple.
    pub bucket_seconds: i64,
    /// Start of the first bucket, seconds since the epoch (every row's
    /// `chart` starts here).
    pub chart_start: i64,
    /// Buckets in every row's `chart`.
    pub chart_len: usize,
    /// Requests and bytes counted, all rows.
    pub total: Volume,
    /// Per class (search, ai, seo, …, human), most requests first.
    pub classes: Vec<ClassSummary>,
    /// Per operator whose robots claim it: verification.
    pub operators: Vec<OperatorSummary>,
    /// AI crawlers by purpose.
    pub ai: Vec<AiSummary>,
    /// One per robot (and class), then humans as one row; most requests
    /// first.
    pub rows: Vec<Row>,
    /// Where the robots.txt compliance was measured against, if anywhere.
    pub robots_txt: Option<String>,
    /// Where the range lists came from, and how many were loaded.
    pub ranges: RangesUsed,
}

/// The lines read.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Input {
    /// The inputs, as named (`-` for standard input).
    pub files: Vec<String>,
    /// Lines read, all inputs.
    pub lines: u64,
    /// Lines counted in the report.
    pub counted: u64,
    /// Lines left out by `--host`, `--since` or `--until`.
    pub filtered: u64,
    /// Lines not read: unreadable (no known shape, binary junk),
    /// too long, blank.
    pub skipped: Skipped,
    /// Lines without a host that `--host` kept (their log does not say).
    pub without_host: u64,
}

/// Lines not read, by why.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Skipped {
    /// No known shape.
    pub unreadable: u64,
    /// Longer than the longest line read.
    pub too_long: u64,
    /// Blank.
    pub empty: u64,
}

/// Requests and body bytes.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Volume {
    /// Requests.
    pub requests: u64,
    /// Body bytes sent.
    pub bytes: u64,
}

/// One class's share.
#[derive(Clone, Debug, Serialize)]
pub struct ClassSummary {
    /// `search`, `ai`, …, `unknown` (spoofed claims), `human`.
    pub class: String,
    /// Requests and bytes.
    pub volume: Volume,
    /// Share of all requests, 0–1.
    pub share: f64,
    /// Requests per chart bucket.
    pub chart: Vec<u64>,
}

/// Verification of one operator's claims.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorSummary {
    /// `google`, `bing`, …
    pub operator: String,
    /// Requests whose claim was proven.
    pub verified: u64,
    /// Requests whose claim nothing settled.
    pub unverified: u64,
    /// Requests whose claim the operator's own method refutes.
    pub spoofed: u64,
    /// The address blocks (IPv4 /24, IPv6 /48) spoofed claims came
    /// from, most requests first.
    pub spoofer_blocks: Vec<Count>,
}

/// AI crawlers of one purpose.
#[derive(Clone, Debug, Serialize)]
pub struct AiSummary {
    /// `training`, `search` or `user_fetch`.
    pub purpose: String,
    /// Requests and bytes.
    pub volume: Volume,
    /// The robots, most requests first.
    pub robots: Vec<Count>,
}

/// A key and how often it was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Count {
    /// The path, pattern, address block or robot.
    pub key: String,
    /// Requests (a lower bound when `error` is not 0).
    pub requests: u64,
    /// How many requests the count may miss (the top-k sketch dropped
    /// the key at times); 0: exact.
    pub error: u64,
}

/// The `robot` of the humans' row.
pub const HUMANS: &str = "humans";

/// Rows in the order they are shown: robots by requests (most first; ties
/// by name, then class), the humans' row last. One order for a report of
/// a log and for one merged from the live hours.
pub fn sort_rows(rows: &mut [Row]) {
    rows.sort_by(|a, b| {
        a.is_humans()
            .cmp(&b.is_humans())
            .then(b.volume.requests.cmp(&a.volume.requests))
            .then(a.robot.cmp(&b.robot))
            .then(a.class.cmp(&b.class))
    });
}

/// One robot, or all humans.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The robot's name: the token its operator or the rules know it by
    /// (`Googlebot`, `AhrefsBot`), `(no User-Agent)`, `(no browser
    /// shape)` for tools without a known token, or `humans`.
    pub robot: String,
    /// Its class (`unknown` for spoofed claims).
    pub class: String,
    /// The operator it claims, if any.
    pub operator: Option<String>,
    /// Its AI purpose, if it is an AI crawler.
    pub ai: Option<String>,
    /// Requests and bytes.
    pub volume: Volume,
    /// Share of all requests, 0–1.
    pub share: f64,
    /// Requests per chart bucket, from `Report::chart_start`.
    pub chart: Vec<u64>,
    /// Status mix.
    pub status: Status,
    /// Verification of its claim (all zero when it claims no operator).
    pub verification: Verification,
    /// Crawl budget spent on nothing (robots only; zero for humans).
    pub waste: Waste,
    /// robots.txt compliance (robots only, when a robots.txt was read).
    pub robots_txt: Option<Compliance>,
    /// Most requested paths (without the query).
    pub top_paths: Vec<Count>,
    /// Most requested path patterns (numbers and ids folded, query
    /// parameter names kept).
    pub top_patterns: Vec<Count>,
}

impl Row {
    /// Whether this is the humans' row.
    pub fn is_humans(&self) -> bool {
        self.robot == HUMANS && self.class == "human"
    }
}

/// Requests by status.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Status {
    /// 200–299.
    pub s2xx: u64,
    /// 300–399 but 304.
    pub s3xx: u64,
    /// 304 Not Modified.
    pub s304: u64,
    /// 400–499.
    pub s4xx: u64,
    /// 500–599.
    pub s5xx: u64,
    /// Anything else (0, 1xx, nonsense).
    pub other: u64,
}

impl Status {
    /// Each part with its name (`2xx`, `3xx`, `304`, `4xx`, `5xx`,
    /// `other`), in that order: what every form shows.
    pub fn parts(&self) -> [(&'static str, u64); 6] {
        [
            ("2xx", self.s2xx),
            ("3xx", self.s3xx),
            ("304", self.s304),
            ("4xx", self.s4xx),
            ("5xx", self.s5xx),
            ("other", self.other),
        ]
    }
}

/// Verification of a robot's claims.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Verification {
    /// Proven.
    pub verified: u64,
    /// Not settled.
    pub unverified: u64,
    /// Refuted.
    pub spoofed: u64,
}

/// Crawl budget spent on nothing, each request counted once, in this
/// order of precedence.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Waste {
    /// Action URLs (a blocked parameter: `?do=`, `_fid`).
    pub action_urls: u64,
    /// robots.txt and sitemap fetches.
    pub robots_and_sitemaps: u64,
    /// 5xx answers.
    pub server_errors: u64,
    /// 404 and 410 answers.
    pub not_found: u64,
    /// Redirects (301, 302, 303, 307, 308).
    pub redirects: u64,
    /// The same URL fetched again within the hour.
    pub repeats: u64,
    /// A page fetched under many query strings (faceted navigation,
    /// session ids): requests to a page (a path and its first query
    /// parameter) seen with at least five different rests of the query,
    /// and any request with a session-id parameter.
    pub query_variants: u64,
    /// The sum.
    pub total: u64,
}

/// A robot's requests against the robots.txt.
#[derive(Clone, Debug, Serialize)]
pub struct Compliance {
    /// The user-agent token the group was looked up by.
    pub token: String,
    /// The group that applies (`*`, the token, or none).
    pub group: String,
    /// Requests to disallowed paths.
    pub disallowed: u64,
    /// The disallowed paths requested most, with the query.
    pub paths: Vec<Count>,
}

/// The range lists verification read.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RangesUsed {
    /// The folders and files they were read from.
    pub sources: Vec<String>,
    /// The lists loaded, by name (`google.common-crawlers`).
    pub loaded: Vec<String>,
    /// Requests whose verdict came from the log's own `verified` field
    /// (crawlgate's verdict at the time, DNS included), not the lists.
    pub from_log: u64,
}
