//! The Prometheus metrics, registered once per process with the official
//! client (`prometheus-client`), served by the admin listener.
//!
//! Every label value comes from a closed set: the route, the class (a
//! rule list's name, `human`, `no-user-agent` or `none`), the status class,
//! an error kind, a protocol, a result, and a certificate's configured
//! name. No host, path or User-Agent text is ever a label.
//!
//! On the request path a counter is an atomic add: the request counters
//! are resolved once per (route, class, status class) into
//! [`RequestCounters`], a table built with each reloaded state, so the
//! family's lock and hash are paid on the first request of a kind only.

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::classify::{ClassId, Classifier};
use crate::route::Route;

/// Which side made an exchange fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The client (a broken or oversized request body).
    Client,
    /// The upstream (refused, timed out, broke off).
    Upstream,
    /// crawlgate itself: the end of a drain's grace period closed the
    /// connection.
    Proxy,
}

impl Side {
    /// `client`, `upstream` or `proxy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Upstream => "upstream",
            Side::Proxy => "proxy",
        }
    }
}

/// The upstream response-time buckets, in seconds.
const UPSTREAM_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    decision: &'static str,
    class: Box<str>,
    code: &'static str,
    enforced: &'static str,
}

/// A range list, by name (`google.common-crawlers`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListLabels {
    /// `<operator>.<list>`.
    pub list: String,
}

/// A range list and how a fetch of it ended (`ok`, `error`, `malformed`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListResultLabels {
    /// `<operator>.<list>`.
    pub list: String,
    /// `ok`, `error` or `malformed`.
    pub result: &'static str,
}

/// A crawler operator and a verification's result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerifyLabels {
    /// The operator claimed (`google`).
    pub operator: Box<str>,
    /// [`crate::verify::Identity::as_str`].
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: &'static str,
    side: &'static str,
}

/// A client connection's protocol, as the `protocol` label.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Protocol {
    /// HTTP/1.x (plain, or TLS with ALPN `http/1.1` or none).
    http1,
    /// HTTP/2 over TLS (ALPN `h2`).
    http2,
    /// The plain port with h2c on: HTTP/1.1 or h2c by the client's
    /// first bytes.
    http1_or_h2c,
    /// An upgraded connection (WebSocket) spliced to the upstream.
    tunnel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProtocolLabels {
    protocol: Protocol,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    name: Box<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// Every metric of the process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    upstream_seconds: Histogram,
    upstream_in_flight: Gauge,
    shed_level: Gauge,
    upstream_errors: Family<ErrorLabels, Counter>,
    connections: Family<ProtocolLabels, Gauge>,
    tls_handshakes: Family<ResultLabels, Counter>,
    certificate_expiry: Family<NameLabels, Gauge>,
    reloads: Family<ResultLabels, Counter>,
    last_reload_success: Gauge,
    last_reload_time: Gauge,
    log_dropped: Counter,
    /// Diagnostic lines lost, as the log writer counts them; brought up
    /// to date when the metrics are read.
    diagnostic_dropped: std::sync::Mutex<Counter>,
    bot_cache_requests: Family<ResultLabels, Counter>,
    bot_cache_bytes_saved: Counter,
    bot_cache_bytes: Gauge,
    bot_cache_entries: Gauge,
    verify_list_age: Family<ListLabels, Gauge>,
    verify_list_prefixes: Family<ListLabels, Gauge>,
    verify_fetches: Family<ListResultLabels, Counter>,
    verifications: Family<VerifyLabels, Counter>,
}

/// The crawler range store's metrics (`verify::store`).
#[derive(Debug, Clone)]
pub struct VerifyMetrics {
    /// Seconds since each list's copy was fetched.
    pub age: Family<ListLabels, Gauge>,
    /// Prefixes in each list's copy.
    pub prefixes: Family<ListLabels, Gauge>,
    /// Fetches by list and result.
    pub fetches: Family<ListResultLabels, Counter>,
    /// Verifications by operator and result.
    pub verifications: Family<VerifyLabels, Counter>,
}

/// The robots cache's metrics, handed to each cache a reload builds.
#[derive(Debug)]
pub struct BotCacheMetrics {
    requests: Family<ResultLabels, Counter>,
    /// Response body bytes served from the cache instead of the upstream.
    pub bytes_saved: Counter,
    /// Bytes held.
    pub bytes: Gauge,
    /// Entries held.
    pub entries: Gauge,
}

impl BotCacheMetrics {
    /// The request counter of `result` (`hit`, `stale`, `miss`, `bypass`,
    /// `not_modified`).
    pub fn result(&self, result: &'static str) -> Counter {
        self.requests.get_or_create_owned(&ResultLabels { result })
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("crawlgate");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by decision, User-Agent class, status class and whether the decision was carried out",
            requests.clone(),
        );
        let upstream_seconds = Histogram::new(UPSTREAM_BUCKETS);
        registry.register(
            "upstream_response_seconds",
            "Time from sending a request upstream to its response head",
            upstream_seconds.clone(),
        );
        let upstream_in_flight = Gauge::default();
        registry.register(
            "upstream_requests_in_flight",
            "Requests sent upstream whose response is not yet complete",
            upstream_in_flight.clone(),
        );
        let shed_level = Gauge::default();
        registry.register(
            "shed_level",
            "Tiers of robot classes being shed under upstream pressure (0: none)",
            shed_level.clone(),
        );
        let upstream_errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "upstream_errors",
            "Forwarded requests that failed, by error kind and the side at fault",
            upstream_errors.clone(),
        );
        let connections = Family::<ProtocolLabels, Gauge>::default();
        registry.register(
            "client_connections_open",
            "Open client connections by protocol",
            connections.clone(),
        );
        let tls_handshakes = Family::<ResultLabels, Counter>::default();
        registry.register(
            "tls_handshakes",
            "TLS handshakes with clients, by result (ok, failed, timeout)",
            tls_handshakes.clone(),
        );
        let certificate_expiry = Family::<NameLabels, Gauge>::default();
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "When the certificate serving each name expires (Unix time)",
            certificate_expiry.clone(),
        );
        let reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "config_reloads",
            "Configuration reloads, by result (success, failure)",
            reloads.clone(),
        );
        let last_reload_success = Gauge::default();
        registry.register(
            "config_last_reload_successful",
            "1 if the last reload (or the start) succeeded, 0 if it failed",
            last_reload_success.clone(),
        );
        let last_reload_time = Gauge::default();
        registry.register(
            "config_last_reload_timestamp_seconds",
            "When the configuration was last loaded or a reload attempted (Unix time)",
            last_reload_time.clone(),
        );
        let bot_cache_requests = Family::<ResultLabels, Counter>::default();
        registry.register(
            "bot_cache_requests",
            "Robot requests by what the robots cache did: hit, stale (served in place of an error), miss (forwarded), bypass (may not use it), not_modified (304, also counted as hit or stale)",
            bot_cache_requests.clone(),
        );
        let bot_cache_bytes_saved = Counter::default();
        registry.register(
            "bot_cache_saved_bytes",
            "Response body bytes robots got from the cache instead of the upstream",
            bot_cache_bytes_saved.clone(),
        );
        let bot_cache_bytes = Gauge::default();
        registry.register(
            "bot_cache_bytes",
            "Bytes held by the robots cache (bodies, headers, keys, bookkeeping)",
            bot_cache_bytes.clone(),
        );
        let bot_cache_entries = Gauge::default();
        registry.register(
            "bot_cache_entries",
            "Responses held by the robots cache",
            bot_cache_entries.clone(),
        );
        let verify_list_age = Family::<ListLabels, Gauge>::default();
        registry.register(
            "verify_list_age_seconds",
            "Seconds since each crawler range list's copy was fetched (absent until one is loaded)",
            verify_list_age.clone(),
        );
        let verify_list_prefixes = Family::<ListLabels, Gauge>::default();
        registry.register(
            "verify_list_prefixes",
            "Prefixes in each crawler range list's copy",
            verify_list_prefixes.clone(),
        );
        let verify_fetches = Family::<ListResultLabels, Counter>::default();
        registry.register(
            "verify_list_fetches",
            "Range list fetches by list and result: ok, error (no answer, not 200), malformed (refused; the last good copy is kept)",
            verify_fetches.clone(),
        );
        let verifications = Family::<VerifyLabels, Counter>::default();
        registry.register(
            "crawler_verifications",
            "Robot requests that claim a crawler operator, by operator and result: ip, dns, signature (verified), spoofed, unverified",
            verifications.clone(),
        );
        let log_dropped = Counter::default();
        registry.register(
            "access_log_dropped_lines",
            "Access-log lines dropped because the writer could not keep up",
            log_dropped.clone(),
        );
        let diagnostic_dropped = Counter::default();
        registry.register(
            "log_dropped_lines",
            "Diagnostic log lines (stderr) dropped because stderr could not keep up",
            diagnostic_dropped.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "crawlgate's version (always 1)", build);
        last_reload_success.set(1);
        last_reload_time.set(crate::clock::unix_now());
        Self {
            registry,
            requests,
            upstream_seconds,
            upstream_in_flight,
            shed_level,
            upstream_errors,
            connections,
            tls_handshakes,
            certificate_expiry,
            reloads,
            last_reload_success,
            last_reload_time,
            log_dropped,
            diagnostic_dropped: std::sync::Mutex::new(diagnostic_dropped),
            bot_cache_requests,
            bot_cache_bytes_saved,
            bot_cache_bytes,
            bot_cache_entries,
            verify_list_age,
            verify_list_prefixes,
            verify_fetches,
            verifications,
        }
    }

    /// The text exposition (OpenMetrics, which Prometheus reads).
    pub fn encode(&self) -> String {
        self.diagnostic_lines_dropped(crate::logging::dropped_lines());
        let mut text = String::with_capacity(8 * 1024);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// One upstream response head after `elapsed`.
    pub fn upstream_answered(&self, elapsed: Duration) {
        self.upstream_seconds.observe(elapsed.as_secs_f64());
    }

    /// A forwarded request that failed.
    pub fn upstream_error(&self, kind: &'static str, side: Side) {
        self.upstream_errors
            .get_or_create(&ErrorLabels {
                kind,
                side: side.as_str(),
            })
            .inc();
    }

    /// The in-flight gauge: incremented now, decremented when the guard
    /// drops.
    pub fn upstream_in_flight(&self) -> InFlight {
        self.upstream_in_flight.inc();
        InFlight(self.upstream_in_flight.clone())
    }

    /// The robots cache's metrics.
    pub fn bot_cache(&self) -> BotCacheMetrics {
        BotCacheMetrics {
            requests: self.bot_cache_requests.clone(),
            bytes_saved: self.bot_cache_bytes_saved.clone(),
            bytes: self.bot_cache_bytes.clone(),
            entries: self.bot_cache_entries.clone(),
        }
    }

    /// The range store's metrics.
    pub fn verify(&self) -> VerifyMetrics {
        VerifyMetrics {
            age: self.verify_list_age.clone(),
            prefixes: self.verify_list_prefixes.clone(),
            fetches: self.verify_fetches.clone(),
            verifications: self.verifications.clone(),
        }
    }

    /// Requests in flight upstream now.
    pub fn upstream_in_flight_now(&self) -> u64 {
        self.upstream_in_flight.get().max(0) as u64
    }

    /// The shedding level now.
    pub fn shed_level(&self, level: u8) {
        self.shed_level.set(i64::from(level));
    }

    /// A client connection open in `protocol` until the guard drops.
    pub fn connection(&self, protocol: Protocol) -> InFlight {
        let gauge = self
            .connections
            .get_or_create_owned(&ProtocolLabels { protocol });
        gauge.inc();
        InFlight(gauge)
    }

    /// A TLS handshake's result: `ok`, `failed` or `timeout`.
    pub fn tls_handshake(&self, result: &'static str) {
        self.tls_handshakes
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// The certificates now served: (name, expiry as Unix time) each.
    pub fn certificates<'a>(&self, served: impl IntoIterator<Item = (&'a str, i64)>) {
        self.certificate_expiry.clear();
        for (name, not_after) in served {
            self.certificate_expiry
                .get_or_create(&NameLabels { name: name.into() })
                .set(not_after);
        }
    }

    /// A reload's result.
    pub fn reloaded(&self, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.reloads.get_or_create(&ResultLabels { result }).inc();
        self.last_reload_success.set(i64::from(ok));
        self.last_reload_time.set(crate::clock::unix_now());
    }

    /// One access-log line dropped.
    pub fn log_line_dropped(&self) {
        self.log_dropped.inc();
    }

    /// Lines dropped so far.
    pub fn log_lines_dropped(&self) -> u64 {
        self.log_dropped.get()
    }

    /// Brings the count of lost diagnostic lines up to `total` (the
    /// writer's own count, which only grows).
    fn diagnostic_lines_dropped(&self, total: u64) {
        let counter = self
            .diagnostic_dropped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let seen = counter.get();
        if total > seen {
            counter.inc_by(total - seen);
        }
    }
}

/// Decrements its gauge when dropped.
#[derive(Debug)]
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Status classes, as labels; `none` for a request that ended without an
/// answer (cut off by a drain's end, or its client went away first).
const CODES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "none"];

/// The request counters of one rules generation, resolved on first use.
#[derive(Debug)]
pub struct RequestCounters {
    family: Family<RequestLabels, Counter>,
    /// The class labels: the class table's names, indexed by [`ClassId`],
    /// then `none` (refused before classification).
    classes: Vec<Box<str>>,
    /// [route][class][code][enforced].
    cells: Vec<OnceLock<Counter>>,
}

/// The class label of a request refused before classification.
const NONE_CLASS: &str = "none";

impl RequestCounters {
    /// The table for `classifier`'s classes.
    pub fn new(metrics: &Metrics, classifier: &Classifier) -> Self {
        let table = classifier.classes();
        let classes: Vec<Box<str>> = table
            .ids()
            .map(|id| table.name(id).into())
            .chain([NONE_CLASS.into()])
            .collect();
        let cells = (0..Route::ALL.len() * classes.len() * CODES.len() * 2)
            .map(|_| OnceLock::new())
            .collect();
        Self {
            family: metrics.requests.clone(),
            classes,
            cells,
        }
    }

    /// Counts one answered request.
    /// `class` is the request's class after verification (`None` when
    /// it was refused before classification); `enforced` is false for a
    /// decision observe mode did not carry out (label `enforced="false"`).
    pub fn count(&self, route: Route, class: Option<ClassId>, status: u16, enforced: bool) {
        // `none` is the last label.
        let class = class.map_or(self.classes.len() - 1, ClassId::index);
        let code = match status {
            0 => CODES.len() - 1,
            _ => usize::from((status / 100).clamp(1, 5) - 1),
        };
        // `Route::ALL` lists the variants in declaration order.
        let route_index = route as usize;
        let index = ((route_index * self.classes.len() + class) * CODES.len() + code) * 2
            + usize::from(enforced);
        let Some(cell) = self.cells.get(index) else {
            return;
        };
        cell.get_or_init(|| {
            self.family.get_or_create_owned(&RequestLabels {
                decision: route.as_str(),
                class: self.classes[class].clone(),
                code: CODES[code],
                enforced: if enforced { "true" } else { "false" },
            })
        })
        .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleLists;

    #[test]
    fn route_all_is_in_declaration_order() {
        for (i, route) in Route::ALL.iter().enumerate() {
            assert_eq!(*route as usize, i, "{route:?}");
        }
    }

    /// The lost diagnostic lines follow the writer's own count, which
    /// only grows, and are in the exposition.
    #[test]
    fn lost_diagnostic_lines_follow_the_writers_count() {
        let metrics = Metrics::new();
        let count = |m: &Metrics| {
            m.diagnostic_dropped
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get()
        };
        metrics.diagnostic_lines_dropped(5);
        assert_eq!(count(&metrics), 5);
        metrics.diagnostic_lines_dropped(7);
        metrics.diagnostic_lines_dropped(7);
        assert_eq!(count(&metrics), 7);
        metrics.diagnostic_lines_dropped(3);
        assert_eq!(count(&metrics), 7);
        assert!(metrics
            .encode()
            .contains("crawlgate_log_dropped_lines_total 7"));
    }

    #[test]
    fn requests_are_counted_per_route_class_and_code() {
        let metrics = Metrics::new();
        let classifier = Classifier::new(&RuleLists::embedded()).expect("rules");
        let counters = RequestCounters::new(&metrics, &classifier);
        let google = classifier.classify(Some(b"Mozilla/5.0 (compatible; Googlebot/2.1)"));
        for _ in 0..3 {
            counters.count(
                Route::Block,
                Some(classifier.class_of(&google, false)),
                403,
                true,
            );
        }
        counters.count(Route::Reject, None, 400, true);
        counters.count(
            Route::Shed,
            Some(classifier.class_of(&google, false)),
            200,
            false,
        );
        let tool = classifier.classify(Some(b"SiteTool/2.1"));
        counters.count(
            Route::Forward,
            Some(classifier.class_of(&tool, false)),
            200,
            true,
        );
        let phone = classifier.classify(Some(
            b"Mozilla/5.0 (Linux; Android 6.0; B BOT 50 Build/MRA58K) AppleWebKit/537.36",
        ));
        counters.count(
            Route::Forward,
            Some(classifier.class_of(&phone, false)),
            200,
            true,
        );
        let text = metrics.encode();
        for line in [
            r#"crawlgate_requests_total{decision="forward",class="unknown",code="2xx",enforced="true"} 1"#,
            r#"crawlgate_requests_total{decision="forward",class="human",code="2xx",enforced="true"} 1"#,
            r#"crawlgate_requests_total{decision="block",class="search",code="4xx",enforced="true"} 3"#,
            r#"crawlgate_requests_total{decision="reject",class="none",code="4xx",enforced="true"} 1"#,
            r#"crawlgate_requests_total{decision="shed",class="search",code="2xx",enforced="false"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
