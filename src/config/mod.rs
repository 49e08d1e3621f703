//! The configuration: one TOML file, command-line overrides, validation.
//!
//! [`RawConfig`] mirrors the file as written (every key optional, unknown
//! keys rejected); [`Config::from_raw`] turns it into real types and checks
//! every value, so an error names the key (`redirect.www: …`) and nothing
//! downstream has to re-validate. `deploy/crawlgate.toml` documents every key
//! with its default.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::uri::{Authority, Scheme, Uri};
use http::StatusCode;
use ipnet::IpNet;
use serde::Deserialize;

use crate::cache::{BotCacheConfig, SIZE_PER_ITEM};
use crate::canonical::{HttpsRedirect, WwwMode};
use crate::query::MAX_NAME_LEN;
use crate::shed::ShedConfig;

/// A configuration that cannot be used, with the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key is unknown or of the wrong type.
    #[error("{}: {key}: {message}", Location(path, *line))]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem, when known.
        line: Option<usize>,
        /// The dotted key path (`syntax error` when the problem is not at a
        /// key).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A value read from a file cannot be used: [`ConfigError::Invalid`]
    /// with the file and the line of its key.
    #[error("{}: {error}", Location(path, *line))]
    InFile {
        /// The file.
        path: PathBuf,
        /// 1-based line of the key, when the file has it.
        line: Option<usize>,
        /// The problem.
        error: Box<ConfigError>,
    },
    /// A value has the right type but cannot be used.
    #[error("{key}: {message}")]
    Invalid {
        /// The dotted key path.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl ConfigError {
    /// A value of the file at `path` that passed [`Config::load`] but not
    /// a later check against other files (a class name against the rules):
    /// reported like any invalid value, with the file and its key's line.
    pub fn invalid_in(path: &Path, key: &'static str, message: String) -> Self {
        let line = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| key_line(&text, key));
        ConfigError::InFile {
            path: path.to_owned(),
            line,
            error: Box::new(invalid(key, message)),
        }
    }
}

/// `FILE:LINE`, or `FILE` when the line is unknown: the shape of every
/// error that points into a file (config, rules, certificates).
pub(crate) struct Location<'a>(pub(crate) &'a Path, pub(crate) Option<usize>);

impl std::fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            Some(line) => write!(f, "{}:{line}", self.0.display()),
            None => write!(f, "{}", self.0.display()),
        }
    }
}

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

/// `Cache-Control` of the sitemap files served, unless configured: an
/// hour (they change when a build runs; a conditional request costs
/// little).
pub const DEFAULT_SITEMAP_CACHE_CONTROL: &str = "max-age=3600";

/// The file as written. Every key is optional; `None` means "default".
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Plain-HTTP listen address.
    pub listen: Option<String>,
    /// The origin, `http://host:port`.
    pub upstream: Option<String>,
    /// Folder holding `sitemap.xml`; enables the robots.txt `Sitemap:` line.
    pub sitemap_dir: Option<PathBuf>,
    /// `Cache-Control` of the sitemap files served.
    pub sitemap_cache_control: Option<String>,
    /// Folder replacing the embedded rules.
    pub rules_dir: Option<PathBuf>,
    /// `[proxy]`
    #[serde(default)]
    pub proxy: RawProxy,
    /// `[block]`
    #[serde(default)]
    pub block: RawBlock,
    /// `[redirect]`
    #[serde(default)]
    pub redirect: RawRedirect,
    /// `[robots]`
    #[serde(default)]
    pub robots: RawRobots,
    /// `[log]`
    #[serde(default)]
    pub log: RawLog,
    /// `[limits]`
    #[serde(default)]
    pub limits: RawLimits,
    /// `[admin]`
    #[serde(default)]
    pub admin: RawAdmin,
    /// `[tls]`
    #[serde(default)]
    pub tls: RawTls,
    /// `[shed]`
    #[serde(default)]
    pub shed: RawShed,
    /// `[bot_cache]`
    #[serde(default)]
    pub bot_cache: RawBotCache,
    /// `[verify]`
    #[serde(default)]
    pub verify: RawVerify,
    /// `[ai]`
    #[serde(default)]
    pub ai: RawAi,
}

/// `[ai]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAi {
    /// Crawlers collecting training data: `allow` or `disallow`.
    pub training: Option<String>,
    /// Crawlers indexing for AI search and answers.
    pub search: Option<String>,
    /// Fetchers acting for a person's request to an assistant.
    pub user_fetch: Option<String>,
    /// Answer 403 to a disallowed kind's requests, not only say so in
    /// robots.txt.
    pub enforce: Option<bool>,
}

/// `[verify]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVerify {
    /// Verification on (the default) or off.
    pub enabled: Option<bool>,
    /// How often each range list is fetched again ("12h").
    pub refresh: Option<String>,
    /// Where the last good copy of each list is kept.
    pub state_dir: Option<PathBuf>,
    /// Reverse-then-forward DNS for the operators that document it.
    pub dns: Option<bool>,
    /// The DNS server (`IP` or `IP:port`); the system's by default.
    pub resolver: Option<String>,
    /// The longest a request waits for DNS.
    pub dns_timeout: Option<String>,
    /// DNS lookups in flight at once, at most.
    pub dns_max_inflight: Option<u32>,
    /// What to do with a spoofed claim: `log` (default) or `block`.
    pub spoofed: Option<String>,
    /// The header telling the upstream the verdict.
    pub header: Option<String>,
    /// Lists replaced by a local file or another URL, per operator.
    pub ranges:
        Option<std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>>,
    /// Verify Web Bot Auth signatures.
    pub signatures: Option<bool>,
    /// Agents whose key directories may be fetched, beyond the operators'.
    pub signature_agents: Option<Vec<String>>,
    /// The longest a request waits for an agent's key directory.
    pub directory_timeout: Option<String>,
    /// Extra root certificates (PEM) for fetching lists and directories.
    pub ca_file: Option<PathBuf>,
}

/// `[bot_cache]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBotCache {
    /// Switch the cache off while keeping its settings.
    pub enabled: Option<bool>,
    /// How long an entry is fresh; turns the cache on.
    pub ttl: Option<String>,
    /// Bytes the cache holds at most ("64MiB").
    pub size: Option<String>,
    /// Largest response body kept ("1MiB").
    pub max_item: Option<String>,
    /// How long past `ttl` an entry may stand in for an error.
    pub max_stale: Option<String>,
}

/// `[shed]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShed {
    /// Switch shedding off while keeping its settings.
    pub enabled: Option<bool>,
    /// Requests in flight upstream at which robots are shed; turns
    /// shedding on.
    pub max_upstream_inflight: Option<u32>,
    /// Recent 90th-percentile upstream response time at which robots are
    /// shed.
    pub max_upstream_latency: Option<String>,
    /// 503 or 429.
    pub status: Option<u16>,
    /// `Retry-After`.
    pub retry_after: Option<String>,
    /// Tiers of robot classes, shed first to last.
    pub order: Option<Vec<Vec<String>>>,
    /// Longest continuous shedding of search engines.
    pub max_search_shed: Option<String>,
    /// Share of search-engine requests let through past that cap (0 to 1).
    pub capped_share: Option<f64>,
    /// Pressure this long at one level sheds the next tier too.
    pub escalate_after: Option<String>,
    /// Calm this long stops shedding the last tier shed.
    pub calm_after: Option<String>,
}

/// `[tls]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// HTTPS listen address; none = no TLS listener.
    pub listen: Option<String>,
    /// Certificate folder.
    pub certs: Option<PathBuf>,
    /// Host whose certificate answers clients without SNI.
    pub default_name: Option<String>,
    /// Offer HTTP/2 by ALPN.
    pub http2: Option<bool>,
    /// Redirect plain-HTTP requests to HTTPS.
    pub redirect_http: Option<bool>,
    /// Strict-Transport-Security value for HTTPS responses.
    pub hsts: Option<String>,
    /// Refuse to start (or reload) when any certificate pair is unusable,
    /// instead of skipping it.
    pub strict: Option<bool>,
}

/// `[limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Bytes of request line plus headers.
    pub max_header_bytes: Option<usize>,
    /// Number of request headers.
    pub max_headers: Option<usize>,
    /// Bytes of the request-target.
    pub max_uri_bytes: Option<usize>,
    /// Concurrent client connections.
    pub max_connections: Option<usize>,
    /// Bytes of a request body (0 = no limit).
    pub max_body_bytes: Option<u64>,
    /// Longest pause inside an upstream response body.
    pub upstream_body_idle_timeout: Option<String>,
}

/// `[proxy]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProxy {
    /// Keep the client's Host header (true) or send the upstream's.
    pub preserve_host: Option<bool>,
    /// Name of the classification header sent upstream.
    pub class_header: Option<String>,
    /// Name of the header carrying a robot's class.
    pub robot_class_header: Option<String>,
    /// Upstream TCP connect timeout.
    pub connect_timeout: Option<String>,
    /// Time allowed for the upstream's response headers.
    pub response_timeout: Option<String>,
    /// How long an idle pooled upstream connection is kept.
    pub pool_idle_timeout: Option<String>,
    /// Idle pooled upstream connections kept at most.
    pub pool_max_idle: Option<usize>,
    /// Peers whose X-Forwarded-* headers are trusted.
    pub trusted_proxies: Option<Vec<String>>,
    /// Time allowed for a client to send its request headers.
    pub header_read_timeout: Option<String>,
    /// How long in-flight requests may run after a shutdown signal.
    pub shutdown_grace: Option<String>,
    /// Accept HTTP/2 with prior knowledge (h2c) on the plain port.
    pub h2c: Option<bool>,
    /// Close an HTTP/2 connection without open streams after this long.
    pub http2_idle_timeout: Option<String>,
    /// Close a WebSocket (or other upgraded) tunnel after this long
    /// without a byte in either direction.
    pub websocket_idle_timeout: Option<String>,
    /// Worker threads, each with its own listening sockets and upstream
    /// pool; 0 = one per available CPU.
    pub workers: Option<usize>,
    /// PEM file of CA certificates for an https:// upstream (instead of
    /// the system's).
    pub upstream_ca: Option<PathBuf>,
    /// Name to send as SNI and verify for an https:// upstream.
    pub upstream_sni: Option<String>,
}

/// `[block]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBlock {
    /// Parameter names that make a URL an action.
    pub params: Option<Vec<String>>,
}

/// `[redirect]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRedirect {
    /// `apex`, `www` or `off`.
    pub www: Option<String>,
    /// Remove a leading `/www` path segment.
    pub strip_www_path: Option<bool>,
    /// Only redirect to these hosts (empty: any).
    pub hosts: Option<Vec<String>>,
}

/// `[robots]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRobots {
    /// Path prefixes disallowed for everyone.
    pub disallow: Option<Vec<String>>,
    /// Extra lines appended verbatim.
    pub extra: Option<Vec<String>>,
}

/// `[log]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    /// Write one access-log line per request.
    pub access: Option<bool>,
    /// `combined` or `json`.
    pub format: Option<String>,
    /// The access-log file (default: standard error).
    pub file: Option<PathBuf>,
}

/// `[admin]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// Address of the metrics and health listener (off when absent).
    pub listen: Option<String>,
}

/// How access-log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Apache/nginx `combined`, then crawlgate's fields.
    Combined,
    /// One JSON object per line with every field of the outcome.
    Json,
}

/// Command-line values that override the file.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--listen`
    pub listen: Option<String>,
    /// `--upstream`
    pub upstream: Option<String>,
    /// `--sitemap-dir`
    pub sitemap_dir: Option<PathBuf>,
    /// `--rules`
    pub rules_dir: Option<PathBuf>,
    /// `--tls-listen`
    pub tls_listen: Option<String>,
    /// `--certs`
    pub certs_dir: Option<PathBuf>,
    /// `--admin-listen`
    pub admin_listen: Option<String>,
    /// `proxy.workers` (tests and the demo pick their own count).
    pub workers: Option<usize>,
    /// `verify.state_dir` when the file does not set it: under systemd's
    /// `StateDirectory=`, `$STATE_DIRECTORY/verify` (see `main`).
    pub default_state_dir: Option<PathBuf>,
    /// `verify.enabled` (the demo, on loopback, turns verification off:
    /// it would fetch the operators' range lists from the internet).
    pub verify: Option<bool>,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// What the process binds at start (a reload reports changes to it).
    pub restart: Restart,
    /// The origin.
    pub upstream: Upstream,
    /// Folder holding `sitemap.xml`, if any.
    pub sitemap_dir: Option<PathBuf>,
    /// `Cache-Control` of the sitemap files served.
    pub sitemap_cache_control: HeaderValue,
    /// Folder replacing the embedded rules, if any.
    pub rules_dir: Option<PathBuf>,
    /// Forwarding behaviour.
    pub proxy: ProxyConfig,
    /// Parameter names that make a URL an action (each ≤ 64 bytes).
    pub blocked_params: Vec<Box<str>>,
    /// Canonical redirects.
    pub redirect: RedirectConfig,
    /// Disallowed path prefixes in robots.txt.
    pub robots_disallow: Vec<String>,
    /// Extra robots.txt lines.
    pub robots_extra: Vec<String>,
    /// Write access-log lines.
    pub access_log: bool,
    /// Their format.
    pub log_format: LogFormat,
    /// Resource limits.
    pub limits: Limits,
    /// The HTTPS listener, if any.
    pub tls: Option<TlsConfig>,
    /// Shedding robots under upstream pressure, when on.
    pub shed: Option<ShedConfig>,
    /// The robots-only cache, when on.
    pub bot_cache: Option<BotCacheConfig>,
    /// Verifying crawlers, when on.
    pub verify: Option<VerifyConfig>,
    /// The AI-crawler policy, when stated.
    pub ai: Option<AiConfig>,
}

/// `[ai]`, validated: per kind, allowed (`Some(true)`), refused
/// (`Some(false)`) or not stated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AiConfig {
    /// Training crawlers.
    pub training: Option<bool>,
    /// AI search crawlers.
    pub search: Option<bool>,
    /// User-triggered fetchers.
    pub user_fetch: Option<bool>,
    /// 403 for a refused kind's requests.
    pub enforce: bool,
}

impl AiConfig {
    /// What was stated for `kind`.
    pub fn stated(&self, kind: crate::verify::AiKind) -> Option<bool> {
        match kind {
            crate::verify::AiKind::Training => self.training,
            crate::verify::AiKind::Search => self.search,
            crate::verify::AiKind::UserFetch => self.user_fetch,
        }
    }

    /// Whether `kind` may fetch (not stated: yes).
    pub fn allows(&self, kind: crate::verify::AiKind) -> bool {
        self.stated(kind).unwrap_or(true)
    }
}

/// What to do with a request whose crawler claim is spoofed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spoofed {
    /// Treat it as the unknown robot it is, and log it.
    Log,
    /// Answer 403 on every URL.
    Block,
}

/// `[verify]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyConfig {
    /// How often each list is fetched again.
    pub refresh: Duration,
    /// Where the last good copies are kept.
    pub state_dir: Option<PathBuf>,
    /// Reverse-then-forward DNS on.
    pub dns: bool,
    /// The DNS server; `None`: the system's (`/etc/resolv.conf`).
    pub resolver: Option<SocketAddr>,
    /// The longest a request waits for DNS.
    pub dns_timeout: Duration,
    /// DNS lookups in flight at once, at most.
    pub dns_max_inflight: usize,
    /// What a spoofed claim gets.
    pub spoofed: Spoofed,
    /// The verdict's header to the upstream.
    pub header: HeaderName,
    /// `(operator, list) → source` replacing official URLs.
    pub ranges: Vec<(String, String, String)>,
    /// Web Bot Auth signatures verified.
    pub signatures: bool,
    /// Agents (`host` or `host:port`, lower case) whose directories may be
    /// fetched beyond the operators' (`rules/crawlers.toml`); `None`: any
    /// https agent on a public address.
    pub signature_agents: Option<Vec<String>>,
    /// The longest a request waits for an agent's key directory.
    pub directory_timeout: Duration,
    /// Extra root certificates for the lists' and directories' fetches.
    pub ca_file: Option<PathBuf>,
}

/// The settings the process takes once, at start: the sockets it binds,
/// the threads it runs, the connection cap they share. A reload that
/// changes one reports it ([`Config::restart_needed`]) and keeps the
/// running value; everything else in [`Config`] follows a reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    /// Plain-HTTP listen address.
    pub listen: SocketAddr,
    /// HTTPS listen address, when there is a TLS listener.
    pub tls_listen: Option<SocketAddr>,
    /// Offer HTTP/2 by ALPN on the TLS listener (set into its acceptor).
    pub tls_http2: bool,
    /// Worker threads (≥ 1).
    pub workers: usize,
    /// Concurrent client connections across the workers; more wait in the
    /// listen backlog.
    pub max_connections: usize,
    /// The admin listener (metrics, health), when on.
    pub admin_listen: Option<SocketAddr>,
    /// The access-log file; `None` = standard error.
    pub log_file: Option<PathBuf>,
}

impl Restart {
    /// Every setting with its key, as an operator would write it: the one
    /// list [`Config::restart_needed`] compares.
    fn entries(&self) -> [(&'static str, String); 7] {
        let none = || "none".to_owned();
        let tls_listen = self.tls_listen.map_or_else(none, |a| a.to_string());
        let admin_listen = self.admin_listen.map_or_else(none, |a| a.to_string());
        let log_file = self
            .log_file
            .as_ref()
            .map_or_else(|| "stderr".to_owned(), |p| p.display().to_string());
        [
            ("listen", self.listen.to_string()),
            ("tls.listen", tls_listen),
            ("tls.http2", self.tls_http2.to_string()),
            ("proxy.workers", self.workers.to_string()),
            ("limits.max_connections", self.max_connections.to_string()),
            ("admin.listen", admin_listen),
            ("log.file", log_file),
        ]
    }
}

/// The HTTPS listener's certificates and headers, validated (the
/// certificates are loaded by [`crate::tls::CertStore::load`]; the address
/// and ALPN are in [`Restart`]).
#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// Certificate folder.
    pub certs_dir: PathBuf,
    /// Host whose certificate answers clients without SNI.
    pub default_name: Option<String>,
    /// `Strict-Transport-Security` added to HTTPS responses that lack one.
    pub hsts: Option<HeaderValue>,
    /// Fail on any unusable certificate pair instead of skipping it.
    pub strict: bool,
}

/// Resource limits, validated.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes of a request head as [`crate::framing::head_len`] counts
    /// them, 8 KiB to 16 MiB.
    pub max_header_bytes: usize,
    /// Number of request headers.
    pub max_headers: usize,
    /// Bytes of the request-target.
    pub max_uri_bytes: usize,
    /// Bytes of a request body; `None` = no limit.
    pub max_body_bytes: Option<u64>,
    /// Longest pause inside an upstream response body.
    pub upstream_body_idle_timeout: Duration,
}

/// The upstream origin.
#[derive(Clone, Debug)]
pub struct Upstream {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// `host:port` as given.
    pub authority: Authority,
    /// CA certificates (PEM) trusted for an `https` upstream instead of the
    /// system's roots.
    pub ca_file: Option<PathBuf>,
    /// Name sent as SNI and verified, instead of the URL's host.
    pub sni: Option<String>,
}

/// Forwarding behaviour.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Keep the client's Host header.
    pub preserve_host: bool,
    /// The classification header (`X-Crawler` by default).
    pub class_header: HeaderName,
    /// A robot's class (`X-Crawler-Class` by default).
    pub robot_class_header: HeaderName,
    /// Upstream connect timeout.
    pub connect_timeout: Duration,
    /// Upstream response-header timeout.
    pub response_timeout: Duration,
    /// Idle pooled connection lifetime.
    pub pool_idle_timeout: Duration,
    /// Idle pooled connections kept at most.
    pub pool_max_idle: usize,
    /// Peers whose forwarding headers are trusted.
    pub trusted_proxies: Vec<IpNet>,
    /// Client request-header read timeout.
    pub header_read_timeout: Duration,
    /// Shutdown grace period.
    pub shutdown_grace: Duration,
    /// Accept h2c (HTTP/2 with prior knowledge) on the plain port.
    pub h2c: bool,
    /// Close an HTTP/2 connection without open streams after this long.
    pub http2_idle_timeout: Duration,
    /// Close an upgraded tunnel (WebSocket) idle this long.
    pub websocket_idle_timeout: Duration,
}

/// Canonical redirect settings.
#[derive(Clone, Debug)]
pub struct RedirectConfig {
    /// Send plain-HTTP requests to HTTPS (in the same hop as the other
    /// fixes).
    pub https: Option<HttpsRedirect>,
    /// Which host form is canonical.
    pub www: WwwMode,
    /// Remove a leading `/www` segment.
    pub strip_www_path: bool,
    /// Canonical hosts allowed as redirect targets, lowercase, without a
    /// trailing dot; empty = any.
    pub hosts: Vec<Box<str>>,
}

impl Config {
    /// Reads, overrides and validates. `path = None` means defaults only.
    /// A value that cannot be used is reported with the file and the line
    /// of its key.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Self, ConfigError> {
        let Some(path) = path else {
            return Self::from_raw(RawConfig::default(), overrides);
        };
        let (mut raw, text) = RawConfig::read(path)?;
        // Paths in the file are relative to the file, not to wherever the
        // process was started (`/` under systemd); made absolute so that a
        // reload and every error mean the same folder.
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        if let Some(dir) = absolute.parent() {
            raw.resolve_paths(dir);
        }
        Self::from_raw(raw, overrides).map_err(|error| match error {
            ConfigError::Invalid { key, .. } => ConfigError::InFile {
                path: path.to_owned(),
                line: key_line(&text, key),
                error: Box::new(error),
            },
            other => other,
        })
    }

    /// Validates `raw` with `overrides` applied.
    pub fn from_raw(raw: RawConfig, overrides: &Overrides) -> Result<Self, ConfigError> {
        // Destructured field by field so that a new key cannot be ignored.
        let RawConfig {
            listen,
            upstream,
            sitemap_dir,
            sitemap_cache_control,
            rules_dir,
            proxy,
            block,
            redirect,
            robots,
            log,
            limits,
            admin,
            tls,
            shed,
            bot_cache,
            verify,
            ai,
        } = raw;
        let RawProxy {
            preserve_host,
            class_header,
            robot_class_header,
            connect_timeout,
            response_timeout,
            pool_idle_timeout,
            pool_max_idle,
            trusted_proxies,
            header_read_timeout,
            shutdown_grace,
            h2c,
            http2_idle_timeout,
            websocket_idle_timeout,
            workers,
            upstream_ca,
            upstream_sni,
        } = proxy;
        let RawBlock { params } = block;
        let RawRedirect {
            www,
            strip_www_path,
            hosts,
        } = redirect;
        let RawRobots { disallow, extra } = robots;
        let RawLog {
            access,
            format,
            file: log_file,
        } = log;
        let log_format = match format.as_deref().unwrap_or("combined") {
            "combined" => LogFormat::Combined,
            "json" => LogFormat::Json,
            other => {
                return Err(invalid(
                    "log.format",
                    format!("{other:?} is not one of \"combined\", \"json\""),
                ))
            }
        };
        if log_file.as_ref().is_some_and(|f| f.as_os_str().is_empty()) {
            return Err(invalid(
                "log.file",
                "is empty (leave it out for standard error)",
            ));
        }
        let RawAdmin {
            listen: admin_listen,
        } = admin;
        let admin_listen = match overrides.admin_listen.clone().or(admin_listen) {
            None => None,
            Some(a) => Some(a.parse::<SocketAddr>().map_err(|_| {
                invalid(
                    "admin.listen",
                    format!("{a:?} is not an address like 127.0.0.1:9090"),
                )
            })?),
        };
        let RawLimits {
            max_header_bytes,
            max_headers,
            max_uri_bytes,
            max_connections,
            max_body_bytes,
            upstream_body_idle_timeout,
        } = limits;
        let max_header_bytes = max_header_bytes.unwrap_or(64 * 1024);
        if !(8192..=16 * 1024 * 1024).contains(&max_header_bytes) {
            return Err(invalid(
                "limits.max_header_bytes",
                format!("{max_header_bytes} is outside 8192 to 16777216"),
            ));
        }
        let positive = |key: &'static str, value: Option<usize>, default: usize| match value {
            Some(0) => Err(invalid(key, "must be greater than zero")),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let max_connections = match positive("limits.max_connections", max_connections, 10_000)? {
            n if n > 1_000_000 => {
                return Err(invalid(
                    "limits.max_connections",
                    format!("{n} is over 1000000"),
                ))
            }
            n => n,
        };
        let limits = Limits {
            max_header_bytes,
            max_headers: positive("limits.max_headers", max_headers, 100)?,
            max_uri_bytes: positive("limits.max_uri_bytes", max_uri_bytes, 8 * 1024)?,
            max_body_bytes: max_body_bytes.filter(|&b| b > 0),
            upstream_body_idle_timeout: duration(
                "limits.upstream_body_idle_timeout",
                upstream_body_idle_timeout,
                "60s",
            )?,
        };

        let listen = overrides
            .listen
            .clone()
            .or(listen)
            .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
        let listen = listen.parse().map_err(|_| {
            invalid(
                "listen",
                format!("{listen:?} is not an address like 127.0.0.1:8080"),
            )
        })?;
        let upstream = overrides
            .upstream
            .clone()
            .or(upstream)
            .unwrap_or_else(|| "http://127.0.0.1:8000".to_owned());
        let mut upstream = parse_upstream(&upstream)?;
        if upstream.scheme == Scheme::HTTPS {
            if let Some(sni) = &upstream_sni {
                if !crate::canonical::is_hostname(sni.as_bytes()) {
                    return Err(invalid(
                        "proxy.upstream_sni",
                        format!("{sni:?} is not a host name"),
                    ));
                }
            }
            upstream.ca_file = upstream_ca;
            upstream.sni = upstream_sni;
        } else if upstream_ca.is_some() || upstream_sni.is_some() {
            let key = if upstream_ca.is_some() {
                "proxy.upstream_ca"
            } else {
                "proxy.upstream_sni"
            };
            return Err(invalid(key, "only applies to an https:// upstream"));
        }

        let class_header = class_header.unwrap_or_else(|| "x-crawler".to_owned());
        let class_header = HeaderName::from_bytes(class_header.as_bytes()).map_err(|_| {
            invalid(
                "proxy.class_header",
                format!("{class_header:?} is not a header name"),
            )
        })?;
        let robot_class_header = robot_class_header.unwrap_or_else(|| "x-crawler-class".to_owned());
        let robot_class_header =
            HeaderName::from_bytes(robot_class_header.as_bytes()).map_err(|_| {
                invalid(
                    "proxy.robot_class_header",
                    format!("{robot_class_header:?} is not a header name"),
                )
            })?;
        let trusted_proxies = trusted_proxies
            .unwrap_or_default()
            .iter()
            .map(|s| parse_net(s))
            .collect::<Result<_, _>>()?;
        let pool_max_idle = pool_max_idle.unwrap_or(256);
        let proxy = ProxyConfig {
            preserve_host: preserve_host.unwrap_or(true),
            class_header,
            robot_class_header,
            connect_timeout: duration("proxy.connect_timeout", connect_timeout, "2s")?,
            response_timeout: duration("proxy.response_timeout", response_timeout, "60s")?,
            pool_idle_timeout: duration("proxy.pool_idle_timeout", pool_idle_timeout, "60s")?,
            pool_max_idle,
            trusted_proxies,
            header_read_timeout: duration("proxy.header_read_timeout", header_read_timeout, "10s")?,
            shutdown_grace: duration("proxy.shutdown_grace", shutdown_grace, "10s")?,
            h2c: h2c.unwrap_or(false),
            http2_idle_timeout: duration("proxy.http2_idle_timeout", http2_idle_timeout, "60s")?,
            websocket_idle_timeout: duration(
                "proxy.websocket_idle_timeout",
                websocket_idle_timeout,
                "300s",
            )?,
        };
        let workers = match overrides.workers.or(workers).unwrap_or(0) {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n if n > 1024 => {
                return Err(invalid("proxy.workers", format!("{n} is over 1024")));
            }
            n => n,
        };
        let (tls, https_redirect) = tls_config(tls, overrides)?;
        let restart = Restart {
            listen,
            tls_listen: tls.as_ref().map(|(listen, _, _)| *listen),
            tls_http2: tls.as_ref().is_some_and(|(_, http2, _)| *http2),
            workers,
            max_connections,
            admin_listen,
            log_file,
        };
        let tls = tls.map(|(_, _, tls)| tls);

        let params = params.unwrap_or_else(|| vec!["do".to_owned(), "_fid".to_owned()]);
        for p in &params {
            if p.is_empty() || p.len() > MAX_NAME_LEN {
                return Err(invalid(
                    "block.params",
                    format!("{p:?}: a name must be 1 to {MAX_NAME_LEN} bytes"),
                ));
            }
            if p.bytes()
                .any(|b| matches!(b, b'&' | b'=' | b'[' | b'#') || b <= b' ')
            {
                return Err(invalid(
                    "block.params",
                    format!("{p:?}: a name cannot contain '&', '=', '[', '#', spaces or control characters"),
                ));
            }
        }
        let blocked_params = params.into_iter().map(String::into_boxed_str).collect();

        let www = match www.as_deref().unwrap_or("apex") {
            "apex" => WwwMode::Apex,
            "www" => WwwMode::Www,
            "off" => WwwMode::Off,
            other => {
                return Err(invalid(
                    "redirect.www",
                    format!("{other:?} is not one of \"apex\", \"www\", \"off\""),
                ))
            }
        };
        let mut allowed = Vec::new();
        for host in hosts.unwrap_or_default() {
            let h = host.trim_end_matches('.').to_ascii_lowercase();
            if !crate::canonical::is_hostname(h.as_bytes()) {
                return Err(invalid(
                    "redirect.hosts",
                    format!("{host:?} is not a host name (no scheme, port or path)"),
                ));
            }
            allowed.push(h.into_boxed_str());
        }
        let redirect = RedirectConfig {
            https: https_redirect,
            www,
            strip_www_path: strip_www_path.unwrap_or(true),
            hosts: allowed,
        };

        let robots_disallow =
            disallow.unwrap_or_else(|| ["/admin/", "/api/", "/cron/"].map(str::to_owned).to_vec());
        for d in &robots_disallow {
            if !d.starts_with('/') || d.chars().any(char::is_control) || d.contains(' ') {
                return Err(invalid(
                    "robots.disallow",
                    format!("{d:?}: a path must start with '/' and hold no spaces or control characters"),
                ));
            }
        }
        let robots_extra = extra.unwrap_or_default();
        for line in &robots_extra {
            if line.chars().any(char::is_control) {
                return Err(invalid(
                    "robots.extra",
                    format!("{line:?}: a line cannot hold control characters"),
                ));
            }
        }

        let sitemap_dir = overrides.sitemap_dir.clone().or(sitemap_dir);
        let sitemap_cache_control = match sitemap_cache_control {
            None => HeaderValue::from_static(DEFAULT_SITEMAP_CACHE_CONTROL),
            Some(value) => HeaderValue::from_str(&value)
                .ok()
                .filter(|_| !value.trim().is_empty())
                .ok_or_else(|| {
                    invalid(
                        "sitemap_cache_control",
                        format!("{value:?} is not a Cache-Control value like \"max-age=3600\""),
                    )
                })?,
        };
        let rules_dir = overrides.rules_dir.clone().or(rules_dir);
        Ok(Config {
            restart,
            upstream,
            sitemap_dir,
            sitemap_cache_control,
            rules_dir,
            proxy,
            blocked_params,
            redirect,
            robots_disallow,
            robots_extra,
            access_log: access.unwrap_or(true),
            log_format,
            limits,
            tls,
            shed: shed_config(shed)?,
            bot_cache: bot_cache_config(bot_cache)?,
            verify: verify_config(RawVerify {
                enabled: overrides.verify.or(verify.enabled),
                ..verify
            })?
            .map(|mut v| {
                if v.state_dir.is_none() {
                    v.state_dir.clone_from(&overrides.default_state_dir);
                }
                v
            }),
            ai: ai_config(ai)?,
        })
    }

    /// The settings of [`Restart`] that differ between `self` and `new`:
    /// (key, running value, new value).
    pub fn restart_needed(&self, new: &Config) -> Vec<(&'static str, String, String)> {
        self.restart
            .entries()
            .into_iter()
            .zip(new.restart.entries())
            .filter(|(old, new)| old.1 != new.1)
            .map(|((key, old), (_, new))| (key, old, new))
            .collect()
    }

    /// Takes back from `running` what a reload cannot change ([`Restart`]),
    /// so that the config in effect after a reload says what is really
    /// running. The certificates follow the new file while there is a TLS
    /// listener; one cannot be added or removed without a restart.
    pub fn keep_restart_settings(&mut self, running: Config) {
        self.restart = running.restart;
        self.tls = match (running.tls, self.tls.take()) {
            (Some(_), Some(new)) => Some(new),
            // Still listening until a restart removes it.
            (Some(old), None) => Some(old),
            // Not listening until a restart adds it.
            (None, _) => None,
        };
    }
}

/// The TLS listener as (address, HTTP/2 by ALPN, the rest), and the
/// redirect to it.
type TlsListener = (SocketAddr, bool, TlsConfig);

fn tls_config(
    raw: RawTls,
    overrides: &Overrides,
) -> Result<(Option<TlsListener>, Option<HttpsRedirect>), ConfigError> {
    let RawTls {
        listen,
        certs,
        default_name,
        http2,
        redirect_http,
        hsts,
        strict,
    } = raw;
    let hsts = match hsts.filter(|h| !h.is_empty()) {
        None => None,
        Some(h) => {
            let ok = h
                .get(..8)
                .is_some_and(|p| p.eq_ignore_ascii_case("max-age="));
            match HeaderValue::from_str(&h) {
                Ok(value) if ok => Some(value),
                _ => {
                    return Err(invalid(
                        "tls.hsts",
                        format!(
                        "{h:?} is not a Strict-Transport-Security value like \"max-age=31536000\""
                    ),
                    ))
                }
            }
        }
    };
    let Some(listen) = overrides.tls_listen.clone().or(listen) else {
        if redirect_http == Some(true) {
            return Err(invalid("tls.redirect_http", "needs tls.listen"));
        }
        if hsts.is_some() {
            return Err(invalid("tls.hsts", "needs tls.listen"));
        }
        return Ok((None, None));
    };
    let listen: SocketAddr = listen.parse().map_err(|_| {
        invalid(
            "tls.listen",
            format!("{listen:?} is not an address like 0.0.0.0:443"),
        )
    })?;
    if let Some(name) = &default_name {
        let host = name.trim_end_matches('.');
        if !crate::canonical::is_hostname(host.as_bytes()) {
            return Err(invalid(
                "tls.default_name",
                format!("{name:?} is not a host name"),
            ));
        }
    }
    let https = redirect_http.unwrap_or(false).then(|| HttpsRedirect {
        port: (listen.port() != 443).then_some(listen.port()),
    });
    let tls = TlsConfig {
        certs_dir: overrides
            .certs_dir
            .clone()
            .or(certs)
            .unwrap_or_else(|| PathBuf::from("certs")),
        default_name: default_name.map(|n| n.trim_end_matches('.').to_ascii_lowercase()),
        hsts,
        strict: strict.unwrap_or(false),
    };
    Ok((Some((listen, http2.unwrap_or(true), tls)), https))
}

impl RawConfig {
    /// Reads and parses a TOML file; errors name the key path and line.
    /// The text comes back too, to find the line of a key whose value later
    /// fails validation.
    pub fn read(path: &Path) -> Result<(Self, String), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let raw = Self::parse(&text).map_err(|(key, line, message)| ConfigError::Parse {
            path: path.to_owned(),
            line,
            key,
            message,
        })?;
        Ok((raw, text))
    }

    /// Makes the file's relative paths relative to `dir`, the file's
    /// folder: `sitemap_dir`, `rules_dir`, `tls.certs` (default `certs`,
    /// beside the file) and `proxy.upstream_ca`. Flags are not touched:
    /// they are relative to the working directory, as on any command line.
    pub fn resolve_paths(&mut self, dir: &Path) {
        let tls_certs = self.tls.certs.get_or_insert_with(|| PathBuf::from("certs"));
        for path in [
            self.sitemap_dir.as_mut(),
            self.rules_dir.as_mut(),
            Some(tls_certs),
            self.proxy.upstream_ca.as_mut(),
            self.log.file.as_mut(),
            self.verify.state_dir.as_mut(),
            self.verify.ca_file.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
        // A range list replaced by a file: relative to the config too.
        for lists in self.verify.ranges.iter_mut().flat_map(|r| r.values_mut()) {
            for source in lists.values_mut() {
                let is_url = source.starts_with("http://") || source.starts_with("https://");
                if !is_url && Path::new(source.as_str()).is_relative() {
                    *source = dir.join(source.as_str()).to_string_lossy().into_owned();
                }
            }
        }
    }

    /// Parses TOML text; the error is (dotted key path, line, message).
    pub fn parse(text: &str) -> Result<Self, (String, Option<usize>, String)> {
        let de = toml::Deserializer::new(text);
        serde_path_to_error::deserialize(de).map_err(|err| {
            let key = match err.path().to_string() {
                root if root == "." => "syntax error".to_owned(),
                key => key,
            };
            let inner = err.into_inner();
            let message = inner.message().trim().replace('\n', "; ");
            let line = inner
                .span()
                .map(|span| line_at(text, span.start))
                .or_else(|| key_line(text, &key));
            (key, line, message)
        })
    }
}

/// The 1-based line holding byte `offset` of `text`.
fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The line where the dotted `key` (`proxy.connect_timeout`) is written in
/// `text`, if it is.
fn key_line(text: &str, key: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut table: &dyn toml_edit::TableLike = doc.as_table();
    let mut span = None;
    for part in key.split('.') {
        let part = part.split('[').next().unwrap_or(part);
        let (k, item) = table.get_key_value(part)?;
        span = k.span().or_else(|| item.span());
        match item.as_table_like() {
            Some(inner) => table = inner,
            None => break,
        }
    }
    span.map(|s| line_at(text, s.start))
}

/// Parses an upstream URL, `http://host:port` or `https://host:port`.
pub fn parse_upstream(s: &str) -> Result<Upstream, ConfigError> {
    let bad = |why: &str| invalid("upstream", format!("{s:?}: {why}"));
    let uri: Uri = s
        .parse()
        .map_err(|_| bad("not a URL like http://127.0.0.1:8000"))?;
    let scheme = uri
        .scheme()
        .cloned()
        .ok_or_else(|| bad("missing http://"))?;
    if scheme != Scheme::HTTP && scheme != Scheme::HTTPS {
        return Err(bad("the scheme must be http:// or https://"));
    }
    let authority = uri
        .authority()
        .cloned()
        .ok_or_else(|| bad("missing host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("user info is not supported"));
    }
    if authority.host().is_empty() {
        return Err(bad("missing host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad(
            "a path or query is not supported; give only scheme, host and port",
        ));
    }
    Ok(Upstream {
        scheme,
        authority,
        ca_file: None,
        sni: None,
    })
}

fn parse_net(s: &str) -> Result<IpNet, ConfigError> {
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| {
            invalid(
                "proxy.trusted_proxies",
                format!("{s:?} is not an IP address or network like 10.0.0.0/8"),
            )
        })
}

/// `[shed]`: `None` unless `max_upstream_inflight` is set and `enabled`
/// is not false.
fn shed_config(raw: RawShed) -> Result<Option<ShedConfig>, ConfigError> {
    let RawShed {
        enabled,
        max_upstream_inflight,
        max_upstream_latency,
        status,
        retry_after,
        order,
        max_search_shed,
        capped_share,
        escalate_after,
        calm_after,
    } = raw;
    // Every value is checked even when shedding is off, so that turning it
    // on cannot reveal an old mistake.
    let max_latency = max_upstream_latency
        .map(|l| duration("shed.max_upstream_latency", Some(l), ""))
        .transpose()?;
    let status = match status.unwrap_or(503) {
        503 => StatusCode::SERVICE_UNAVAILABLE,
        429 => StatusCode::TOO_MANY_REQUESTS,
        other => return Err(invalid("shed.status", format!("{other} is not 503 or 429"))),
    };
    let retry_after = duration("shed.retry_after", retry_after, "120s")?;
    if retry_after < Duration::from_secs(1) || retry_after > Duration::from_secs(86_400) {
        return Err(invalid(
            "shed.retry_after",
            "must be between 1s and 1 day (Retry-After is in whole seconds)",
        ));
    }
    let order = match order {
        None => ShedConfig::default_order(),
        Some(tiers) => {
            if tiers.is_empty() || tiers.len() > 8 {
                return Err(invalid(
                    "shed.order",
                    "must hold 1 to 8 tiers of class names",
                ));
            }
            let mut seen: Vec<&str> = Vec::new();
            for class in tiers.iter().flatten() {
                if class.is_empty() || seen.contains(&class.as_str()) {
                    return Err(invalid(
                        "shed.order",
                        format!("{class:?} is empty or named twice"),
                    ));
                }
                seen.push(class);
            }
            if tiers.iter().any(Vec::is_empty) {
                return Err(invalid("shed.order", "a tier is empty"));
            }
            tiers
                .into_iter()
                .map(|t| t.into_iter().map(String::into_boxed_str).collect())
                .collect()
        }
    };
    let capped_share = capped_share.unwrap_or(0.25);
    if !(0.0..=1.0).contains(&capped_share) {
        return Err(invalid(
            "shed.capped_share",
            format!("{capped_share} is not between 0 and 1"),
        ));
    }
    let config = ShedConfig {
        max_inflight: match max_upstream_inflight {
            Some(0) => {
                return Err(invalid(
                    "shed.max_upstream_inflight",
                    "must be greater than zero",
                ))
            }
            Some(n) => n,
            None => 0,
        },
        max_latency,
        status,
        retry_after,
        order,
        max_search_shed: duration("shed.max_search_shed", max_search_shed, "3h")?,
        capped_share_permille: (capped_share * 1000.0).round() as u32,
        escalate_after: duration("shed.escalate_after", escalate_after, "10s")?,
        calm_after: duration("shed.calm_after", calm_after, "30s")?,
    };
    if max_upstream_inflight.is_none() {
        if config.max_latency.is_some() {
            return Err(invalid(
                "shed.max_upstream_latency",
                "needs shed.max_upstream_inflight (which turns shedding on)",
            ));
        }
        return Ok(None);
    }
    Ok(enabled.unwrap_or(true).then_some(config))
}

/// `[bot_cache]`: `None` unless `ttl` is set and `enabled` is not false.
fn bot_cache_config(raw: RawBotCache) -> Result<Option<BotCacheConfig>, ConfigError> {
    let RawBotCache {
        enabled,
        ttl,
        size,
        max_item,
        max_stale,
    } = raw;
    let ttl_set = ttl.is_some();
    let size = byte_size("bot_cache.size", size, "64MiB")?;
    let config = BotCacheConfig {
        ttl: duration("bot_cache.ttl", ttl, "10m")?,
        size,
        // By default 1 MiB, or less in a small cache.
        max_item: match max_item {
            Some(text) => byte_size("bot_cache.max_item", Some(text), "")?,
            None => (1 << 20).min(size / SIZE_PER_ITEM).max(1),
        },
        max_stale: duration("bot_cache.max_stale", max_stale, "1d")?,
    };
    if config.size < 1024 * 1024 || config.size > 1 << 40 {
        return Err(invalid(
            "bot_cache.size",
            format!("{} bytes is outside 1MiB to 1TiB", config.size),
        ));
    }
    if config.max_item.saturating_mul(SIZE_PER_ITEM) > config.size {
        return Err(invalid(
            "bot_cache.max_item",
            format!(
                "{} bytes is over {} bytes, 1/{SIZE_PER_ITEM} of bot_cache.size ({} bytes)",
                config.max_item,
                config.size / SIZE_PER_ITEM,
                config.size
            ),
        ));
    }
    if !ttl_set {
        return Ok(None);
    }
    Ok(enabled.unwrap_or(true).then_some(config))
}

/// `[ai]`: `None` when it states nothing.
fn ai_config(raw: RawAi) -> Result<Option<AiConfig>, ConfigError> {
    let RawAi {
        training,
        search,
        user_fetch,
        enforce,
    } = raw;
    let allow = |key: &'static str, value: Option<String>| match value.as_deref() {
        None => Ok(None),
        Some("allow") => Ok(Some(true)),
        Some("disallow") => Ok(Some(false)),
        Some(other) => Err(invalid(
            key,
            format!("{other:?} is not \"allow\" or \"disallow\""),
        )),
    };
    let config = AiConfig {
        training: allow("ai.training", training)?,
        search: allow("ai.search", search)?,
        user_fetch: allow("ai.user_fetch", user_fetch)?,
        enforce: enforce.unwrap_or(false),
    };
    let stated =
        config.training.is_some() || config.search.is_some() || config.user_fetch.is_some();
    if config.enforce && !stated {
        return Err(invalid(
            "ai.enforce",
            "there is nothing to enforce: set training, search or user_fetch to \"disallow\"",
        ));
    }
    Ok(stated.then_some(config))
}

/// `[verify]`: on unless `enabled = false`.
fn verify_config(raw: RawVerify) -> Result<Option<VerifyConfig>, ConfigError> {
    let RawVerify {
        enabled,
        refresh,
        state_dir,
        dns,
        resolver,
        dns_timeout,
        dns_max_inflight,
        spoofed,
        header,
        ranges,
        signatures,
        signature_agents,
        directory_timeout,
        ca_file,
    } = raw;
    let refresh = duration("verify.refresh", refresh, "12h")?;
    if refresh < Duration::from_secs(1) || refresh > Duration::from_secs(30 * 86_400) {
        return Err(invalid("verify.refresh", "must be between 1s and 30 days"));
    }
    let dns_timeout = duration("verify.dns_timeout", dns_timeout, "200ms")?;
    if dns_timeout > Duration::from_secs(5) {
        return Err(invalid(
            "verify.dns_timeout",
            "must be at most 5s: a request waits this long at worst",
        ));
    }
    let resolver = match resolver {
        None => None,
        Some(text) => Some(
            text.parse::<SocketAddr>()
                .or_else(|_| {
                    text.parse::<std::net::IpAddr>()
                        .map(|ip| SocketAddr::new(ip, 53))
                })
                .map_err(|_| {
                    invalid(
                        "verify.resolver",
                        format!("{text:?} is not an address like 127.0.0.1 or 127.0.0.1:5353"),
                    )
                })?,
        ),
    };
    let dns_max_inflight = match dns_max_inflight.unwrap_or(64) {
        0 => {
            return Err(invalid(
                "verify.dns_max_inflight",
                "must be greater than zero",
            ))
        }
        n => n as usize,
    };
    let spoofed = match spoofed.as_deref().unwrap_or("log") {
        "log" => Spoofed::Log,
        "block" => Spoofed::Block,
        other => {
            return Err(invalid(
                "verify.spoofed",
                format!("{other:?} is not \"log\" or \"block\""),
            ))
        }
    };
    let header = header.unwrap_or_else(|| "x-crawler-verified".to_owned());
    let header = HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| invalid("verify.header", format!("{header:?} is not a header name")))?;
    let mut overrides = Vec::new();
    for (operator, lists) in ranges.unwrap_or_default() {
        for (list, source) in lists {
            let source = source.trim().to_owned();
            if source.is_empty() || source.chars().any(char::is_control) {
                return Err(invalid(
                    "verify.ranges",
                    format!("{operator}.{list}: {source:?} is not a path or URL"),
                ));
            }
            let is_url = source.starts_with("http://") || source.starts_with("https://");
            if is_url && source.parse::<Uri>().is_err() {
                return Err(invalid(
                    "verify.ranges",
                    format!("{operator}.{list}: {source:?} is not a URL"),
                ));
            }
            overrides.push((operator.clone(), list, source));
        }
    }
    let directory_timeout = duration("verify.directory_timeout", directory_timeout, "500ms")?;
    if directory_timeout > Duration::from_secs(5) {
        return Err(invalid(
            "verify.directory_timeout",
            "must be at most 5s: a request waits this long at worst",
        ));
    }
    let config = VerifyConfig {
        refresh,
        state_dir,
        dns: dns.unwrap_or(true),
        resolver,
        dns_timeout,
        dns_max_inflight,
        spoofed,
        header,
        ranges: overrides,
        signatures: signatures.unwrap_or(true),
        signature_agents: match signature_agents {
            None => Some(Vec::new()),
            Some(list) if list.iter().any(|a| a == "*") => None,
            Some(list) => Some(
                list.into_iter()
                    .map(|agent| {
                        let agent = agent.trim().to_ascii_lowercase();
                        let valid = !agent.is_empty()
                            && agent
                                .parse::<http::uri::Authority>()
                                .is_ok_and(|a| a.as_str() == agent && !agent.contains('@'));
                        if valid {
                            Ok(agent)
                        } else {
                            Err(invalid(
                                "verify.signature_agents",
                                format!("{agent:?} is not a host or host:port (or \"*\")"),
                            ))
                        }
                    })
                    .collect::<Result<_, _>>()?,
            ),
        },
        directory_timeout,
        ca_file,
    };
    Ok(enabled.unwrap_or(true).then_some(config))
}

/// A size such as `"64MiB"`, `"512KiB"` or a number of bytes; more than 0.
fn byte_size(key: &'static str, value: Option<String>, default: &str) -> Result<u64, ConfigError> {
    let text = value.as_deref().unwrap_or(default);
    let size = text
        .trim()
        .parse::<bytesize::ByteSize>()
        .map_err(|_| invalid(key, format!("{text:?} is not a size like \"64MiB\"")))?
        .as_u64();
    if size == 0 {
        return Err(invalid(key, "must be greater than zero"));
    }
    Ok(size)
}

fn duration(
    key: &'static str,
    value: Option<String>,
    default: &str,
) -> Result<Duration, ConfigError> {
    let text = value.as_deref().unwrap_or(default);
    let d = humantime::parse_duration(text)
        .map_err(|e| invalid(key, format!("{text:?} is not a duration like \"2s\": {e}")))?;
    if d.is_zero() {
        return Err(invalid(key, "must be greater than zero"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, String> {
        let raw = RawConfig::parse(text).map_err(|(k, _, m)| format!("{k}: {m}"))?;
        Config::from_raw(raw, &Overrides::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults() {
        let c = load("").expect("empty config is valid");
        assert_eq!(c.restart.listen, "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(c.upstream.authority.as_str(), "127.0.0.1:8000");
        assert_eq!(
            &*c.blocked_params,
            &["do".into(), "_fid".into()] as &[Box<str>]
        );
        assert_eq!(c.redirect.www, WwwMode::Apex);
        assert_eq!(c.proxy.class_header.as_str(), "x-crawler");
        assert_eq!(c.proxy.connect_timeout, Duration::from_secs(2));
        assert!(c.access_log);
    }

    #[test]
    fn shedding_is_on_only_with_max_upstream_inflight() {
        assert!(load("").expect("valid").shed.is_none());
        assert!(load("[shed]\nretry_after = \"60s\"")
            .expect("valid")
            .shed
            .is_none());
        let shed = load("[shed]\nmax_upstream_inflight = 32")
            .expect("valid")
            .shed
            .expect("on");
        assert_eq!(shed.max_inflight, 32);
        assert_eq!(shed.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(shed.retry_after, Duration::from_secs(120));
        assert_eq!(shed.max_search_shed, Duration::from_secs(3 * 3600));
        assert_eq!(shed.capped_share_permille, 250);
        assert_eq!(shed.order, ShedConfig::default_order());
        let off = load("[shed]\nmax_upstream_inflight = 32\nenabled = false").expect("valid");
        assert!(off.shed.is_none());
        let custom = load(
            "[shed]\nmax_upstream_inflight = 4\nmax_upstream_latency = \"1500ms\"\nstatus = 429\norder = [[\"library\"], [\"search\", \"ai\"]]\ncapped_share = 0.1",
        )
        .expect("valid")
        .shed
        .expect("on");
        assert_eq!(custom.max_latency, Some(Duration::from_millis(1500)));
        assert_eq!(custom.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(custom.order.len(), 2);
        assert_eq!(custom.capped_share_permille, 100);
    }

    #[test]
    fn verification_is_on_by_default_and_its_values_are_checked() {
        let on = load("").expect("valid").verify.expect("on by default");
        assert_eq!(on.refresh, Duration::from_secs(12 * 3600));
        assert_eq!(on.dns_timeout, Duration::from_millis(200));
        assert!(on.dns && on.resolver.is_none() && on.state_dir.is_none());
        assert_eq!(
            (on.spoofed, on.header.as_str()),
            (Spoofed::Log, "x-crawler-verified")
        );
        assert!(load("[verify]\nenabled = false")
            .expect("valid")
            .verify
            .is_none());
        let custom = load("[verify]\nresolver = \"127.0.0.1\"\nspoofed = \"block\"\n[verify.ranges.google]\ncommon-crawlers = \"https://lists.example/g.json\"")
            .expect("valid")
            .verify
            .expect("on");
        assert_eq!(custom.resolver, Some("127.0.0.1:53".parse().expect("addr")));
        assert_eq!(custom.spoofed, Spoofed::Block);
        assert_eq!(
            on.signature_agents,
            Some(Vec::new()),
            "the operators' agents only"
        );
        let any = load("[verify]\nsignature_agents = [\"*\"]")
            .expect("valid")
            .verify
            .expect("on");
        assert_eq!(any.signature_agents, None);
        let listed = load("[verify]\nsignature_agents = [\"Agent.example:8443\"]")
            .expect("valid")
            .verify
            .expect("on");
        assert_eq!(
            listed.signature_agents,
            Some(vec!["agent.example:8443".to_owned()])
        );
        assert_eq!(
            custom.ranges,
            [(
                "google".to_owned(),
                "common-crawlers".to_owned(),
                "https://lists.example/g.json".to_owned()
            )]
        );
        for (text, want) in [
            ("refresh = \"0s\"", "verify.refresh: must be greater"),
            ("refresh = \"60d\"", "verify.refresh: must be between"),
            (
                "dns_timeout = \"10s\"",
                "verify.dns_timeout: must be at most 5s",
            ),
            (
                "resolver = \"dns.example\"",
                "verify.resolver: \"dns.example\" is not an address",
            ),
            (
                "dns_max_inflight = 0",
                "verify.dns_max_inflight: must be greater",
            ),
            ("spoofed = \"drop\"", "verify.spoofed: \"drop\" is not"),
            ("header = \"X Verified\"", "verify.header: "),
            (
                "[verify.ranges.google]\ncommon-crawlers = \"\"",
                "verify.ranges: google.common-crawlers: \"\"",
            ),
            ("colour = 1", "verify.colour: unknown field `colour`"),
        ] {
            let err = load(&format!("[verify]\n{text}")).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn the_ai_policy_is_stated_or_absent() {
        assert!(load("").expect("valid").ai.is_none());
        assert!(load("[ai]").expect("valid").ai.is_none());
        let ai = load("[ai]\ntraining = \"disallow\"\nuser_fetch = \"allow\"\nenforce = true")
            .expect("valid")
            .ai
            .expect("stated");
        assert_eq!(
            (ai.training, ai.search, ai.user_fetch, ai.enforce),
            (Some(false), None, Some(true), true)
        );
        for (text, want) in [
            (
                "training = \"no\"",
                "ai.training: \"no\" is not \"allow\" or \"disallow\"",
            ),
            ("enforce = true", "ai.enforce: there is nothing to enforce"),
        ] {
            let err = load(&format!("[ai]\n{text}")).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn the_bot_cache_is_on_only_with_a_ttl() {
        assert!(load("").expect("valid").bot_cache.is_none());
        assert!(load("[bot_cache]\nsize = \"8MiB\"")
            .expect("valid")
            .bot_cache
            .is_none());
        let on = load("[bot_cache]\nttl = \"10m\"")
            .expect("valid")
            .bot_cache
            .expect("on");
        assert_eq!(on.ttl, Duration::from_secs(600));
        assert_eq!(on.size, 64 * 1024 * 1024);
        assert_eq!(on.max_item, 1024 * 1024);
        assert_eq!(on.max_stale, Duration::from_secs(86_400));
        let custom = load("[bot_cache]\nttl = \"30s\"\nsize = \"512 MiB\"\nmax_item = \"4MiB\"\nmax_stale = \"2h\"")
            .expect("valid")
            .bot_cache
            .expect("on");
        assert_eq!((custom.size, custom.max_item), (512 << 20, 4 << 20));
        assert!(load("[bot_cache]\nttl = \"10m\"\nenabled = false")
            .expect("valid")
            .bot_cache
            .is_none());
        for (text, want) in [
            ("ttl = \"0s\"", "bot_cache.ttl: must be greater"),
            (
                "ttl = \"1m\"\nsize = \"lots\"",
                "bot_cache.size: \"lots\" is not a size",
            ),
            (
                "ttl = \"1m\"\nsize = \"100KiB\"",
                "bot_cache.size: 102400 bytes is outside",
            ),
            (
                "ttl = \"1m\"\nmax_item = \"0\"",
                "bot_cache.max_item: must be greater",
            ),
            (
                "ttl = \"1m\"\nsize = \"8MiB\"\nmax_item = \"1MiB\"",
                "bot_cache.max_item: 1048576 bytes is over 262144 bytes, 1/32 of bot_cache.size (8388608 bytes)",
            ),
            (
                "ttl = \"1m\"\ncapacity = 1",
                "bot_cache.capacity: unknown field",
            ),
        ] {
            let err = load(&format!("[bot_cache]\n{text}")).expect_err(text);
            assert!(err.starts_with(want), "{text}: {err}");
        }
    }

    #[test]
    fn shed_errors_name_the_key() {
        let cases = [
            (
                "max_upstream_inflight = 0",
                "shed.max_upstream_inflight: must be greater",
            ),
            (
                "max_upstream_inflight = -1",
                "shed.max_upstream_inflight: invalid value",
            ),
            (
                "max_upstream_latency = \"2s\"",
                "shed.max_upstream_latency: needs shed.max_upstream_inflight",
            ),
            (
                "max_upstream_inflight = 8\nstatus = 500",
                "shed.status: 500 is not 503 or 429",
            ),
            (
                "max_upstream_inflight = 8\nretry_after = \"500ms\"",
                "shed.retry_after: must be between",
            ),
            (
                "max_upstream_inflight = 8\nretry_after = \"2days\"",
                "shed.retry_after: must be between",
            ),
            (
                "max_upstream_inflight = 8\norder = []",
                "shed.order: must hold 1 to 8",
            ),
            (
                "max_upstream_inflight = 8\norder = [[\"ai\"], []]",
                "shed.order: a tier is empty",
            ),
            (
                "max_upstream_inflight = 8\norder = [[\"ai\"], [\"ai\"]]",
                "shed.order: \"ai\" is empty or named twice",
            ),
            (
                "max_upstream_inflight = 8\ncapped_share = 1.5",
                "shed.capped_share: 1.5 is not between 0 and 1",
            ),
            (
                "max_upstream_inflight = 8\ncalm_after = \"soon\"",
                "shed.calm_after: ",
            ),
            (
                "max_upstream_inflight = 8\nshed_humans = true",
                "shed.shed_humans: unknown field",
            ),
        ];
        for (text, want) in cases {
            let err = load(&format!("[shed]\n{text}")).expect_err(text);
            assert!(err.starts_with(want), "{text}: {err}");
        }
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("listen = \"nope\"", "listen: "),
            ("lisen = \"x\"", "lisen: unknown field `lisen`"),
            (
                "[proxy]\nconect_timeout = \"1s\"",
                "proxy.conect_timeout: unknown field `conect_timeout`",
            ),
            (
                "[proxy]\nconnect_timeout = 5",
                "proxy.connect_timeout: invalid type",
            ),
            (
                "[proxy]\nconnect_timeout = \"5 parsecs\"",
                "proxy.connect_timeout: ",
            ),
            (
                "[proxy]\nconnect_timeout = \"0s\"",
                "proxy.connect_timeout: must be greater",
            ),
            (
                "[proxy]\nclass_header = \"X Crawler\"",
                "proxy.class_header: ",
            ),
            (
                "[proxy]\ntrusted_proxies = [\"10.0.0.0/33\"]",
                "proxy.trusted_proxies: ",
            ),
            ("upstream = \"ftp://x\"", "upstream: "),
            (
                "[proxy]\nupstream_ca = \"ca.pem\"",
                "proxy.upstream_ca: only applies",
            ),
            (
                "upstream = \"https://x\"\n[proxy]\nupstream_sni = \"a b\"",
                "proxy.upstream_sni: ",
            ),
            ("[proxy]\nh2c = 1", "proxy.h2c: invalid type"),
            ("[proxy]\nworkers = 5000", "proxy.workers: "),
            ("[tls]\nlisten = \"443\"", "tls.listen: "),
            (
                "[tls]\nredirect_http = true",
                "tls.redirect_http: needs tls.listen",
            ),
            (
                "[tls]\nlisten = \"127.0.0.1:443\"\nhsts = \"1 year\"",
                "tls.hsts: ",
            ),
            (
                "[tls]\nlisten = \"127.0.0.1:443\"\ndefault_name = \"*.x\"",
                "tls.default_name: ",
            ),
            ("[tls]\ncert = \"x\"", "tls.cert: unknown field"),
            ("upstream = \"http://x/app\"", "upstream: "),
            ("upstream = \"x:80\"", "upstream: "),
            ("[block]\nparams = [\"\"]", "block.params: "),
            ("[block]\nparams = [\"a=b\"]", "block.params: "),
            ("[redirect]\nwww = \"always\"", "redirect.www: "),
            (
                "[redirect]\nhosts = [\"http://example.com\"]",
                "redirect.hosts: ",
            ),
            ("[robots]\ndisallow = [\"admin\"]", "robots.disallow: "),
            ("[robots]\nextra = [\"a\\nb\"]", "robots.extra: "),
            ("[log]\naccess = \"yes\"", "log.access: invalid type"),
            (
                "[limits]\nmax_header_bytes = 100",
                "limits.max_header_bytes: ",
            ),
            ("[limits]\nmax_connections = 0", "limits.max_connections: "),
            (
                "[limits]\nmax_headers = -1",
                "limits.max_headers: invalid value",
            ),
            (
                "[limits]\nupstream_body_idle_timeout = \"never\"",
                "limits.upstream_body_idle_timeout: ",
            ),
        ];
        for (text, want) in cases {
            let err = load(text).expect_err(text);
            assert!(
                err.starts_with(want),
                "{text:?} gave {err:?}, want {want:?}…"
            );
            assert!(!err.contains('\n'), "one line: {err:?}");
        }
    }

    /// Issue 10.9: an error from the file names the file and the line of
    /// the key, `FILE:LINE: key: message`, like a rules error.
    #[test]
    fn file_errors_name_the_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.toml");
        let cases = [
            (
                "listen = \"127.0.0.1:8080\"\n\n[proxy]\nconnect_timeout = \"5 parsecs\"\n",
                ":4: proxy.connect_timeout: ",
            ),
            ("[redirect]\n\nwww = \"always\"\n", ":3: redirect.www: "),
            (
                "[tls]\nredirect_http = true\n",
                ":2: tls.redirect_http: needs",
            ),
            (
                "[proxy]\nconect_timeout = \"1s\"\n",
                ":2: proxy.conect_timeout: unknown",
            ),
            (
                "\n\n[log]\naccess = \"yes\"\n",
                ":4: log.access: invalid type",
            ),
            ("listen = [\n", ":2: syntax error: "),
        ];
        for (text, want) in cases {
            std::fs::write(&path, text).expect("write");
            let err = Config::load(Some(&path), &Overrides::default())
                .expect_err(text)
                .to_string();
            let prefix = format!("{}{want}", path.display());
            assert!(
                err.starts_with(&prefix),
                "{text:?} gave {err:?}, want {prefix:?}…"
            );
        }
    }

    /// Issue 10.5: paths in the file are relative to the file's folder;
    /// absolute ones and flags stay as given.
    #[test]
    fn paths_in_the_file_are_relative_to_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "sitemap_dir = \"maps\"\nrules_dir = \"/abs/rules\"\nupstream = \"https://x:1\"\n\
             [proxy]\nupstream_ca = \"ca/root.pem\"\n[tls]\nlisten = \"127.0.0.1:8443\"\n",
        )
        .expect("write");
        let c = Config::load(Some(&path), &Overrides::default()).expect("valid");
        assert_eq!(c.sitemap_dir, Some(dir.path().join("maps")));
        assert_eq!(c.rules_dir, Some(PathBuf::from("/abs/rules")));
        assert_eq!(c.upstream.ca_file, Some(dir.path().join("ca/root.pem")));
        assert_eq!(c.tls.expect("tls").certs_dir, dir.path().join("certs"));
        let flags = Overrides {
            certs_dir: Some(PathBuf::from("mine")),
            sitemap_dir: Some(PathBuf::from("here")),
            ..Overrides::default()
        };
        let c = Config::load(Some(&path), &flags).expect("valid");
        assert_eq!(c.sitemap_dir, Some(PathBuf::from("here")));
        assert_eq!(c.tls.expect("tls").certs_dir, PathBuf::from("mine"));
    }

    #[test]
    fn overrides_win_over_the_file() {
        let raw = RawConfig::parse("listen = \"127.0.0.1:1\"\nupstream = \"http://a:1\"")
            .expect("parses");
        let o = Overrides {
            listen: Some("127.0.0.1:2".into()),
            upstream: Some("http://b:2".into()),
            ..Overrides::default()
        };
        let c = Config::from_raw(raw, &o).expect("valid");
        assert_eq!(c.restart.listen.port(), 2);
        assert_eq!(c.upstream.authority.as_str(), "b:2");
    }

    #[test]
    fn restart_needed_names_what_a_reload_cannot_change() {
        let old = load("listen = \"127.0.0.1:1\"\n[tls]\nlisten = \"127.0.0.1:2\"").expect("valid");
        let same = load(
            "listen = \"127.0.0.1:1\"\n[tls]\nlisten = \"127.0.0.1:2\"\n[redirect]\nwww = \"off\"",
        )
        .expect("valid");
        assert!(old.restart_needed(&same).is_empty());
        let moved = load("listen = \"127.0.0.1:3\"\n[limits]\nmax_connections = 5").expect("valid");
        let keys: Vec<_> = old
            .restart_needed(&moved)
            .into_iter()
            .map(|c| c.0)
            .collect();
        assert_eq!(
            keys,
            [
                "listen",
                "tls.listen",
                "tls.http2",
                "limits.max_connections"
            ]
        );
    }

    /// Issue 25: the example says it sets every key to its default, and
    /// does (a value meant for one setup stays a comment), and its header
    /// names every flag that overrides it.
    #[test]
    fn the_deploy_example_sets_every_key_to_its_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crawlgate.toml");
        let text = std::fs::read_to_string(&path).expect("deploy/crawlgate.toml exists");
        let example = load(&text).expect("the example config is valid");
        let defaults = load("").expect("defaults");
        assert_eq!(format!("{example:?}"), format!("{defaults:?}"));
        let header: String = text.lines().take_while(|l| l.starts_with('#')).collect();
        for flag in [
            "--listen",
            "--upstream",
            "--sitemap-dir",
            "--rules",
            "--tls-listen",
            "--certs",
            "--admin-listen",
        ] {
            assert!(header.contains(flag), "the header does not name {flag}");
        }
    }

    /// Issue 25: without `verify.state_dir` in the file, systemd's state
    /// folder (given by `main` as an override's default) is used; the
    /// file's own value wins over it.
    #[test]
    fn the_state_dir_defaults_to_the_one_given() {
        let given = Overrides {
            default_state_dir: Some(PathBuf::from("/var/lib/crawlgate/verify")),
            ..Overrides::default()
        };
        let state_dir = |text: &str| {
            let raw = RawConfig::parse(text).expect("parses");
            Config::from_raw(raw, &given)
                .expect("valid")
                .verify
                .and_then(|v| v.state_dir)
        };
        assert_eq!(
            state_dir(""),
            Some(PathBuf::from("/var/lib/crawlgate/verify"))
        );
        assert_eq!(
            state_dir("[verify]\nstate_dir = \"/srv/lists\""),
            Some(PathBuf::from("/srv/lists"))
        );
        assert_eq!(state_dir("[verify]\nenabled = false"), None);
    }

    #[test]
    fn the_deploy_example_is_valid_and_complete() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crawlgate.toml");
        let text = std::fs::read_to_string(&path).expect("deploy/crawlgate.toml exists");
        load(&text).expect("the example config is valid");
        // Every key of the raw structs appears in the example.
        for key in [
            "listen",
            "upstream",
            "sitemap_dir",
            "sitemap_cache_control",
            "rules_dir",
            "[proxy]",
            "preserve_host",
            "class_header",
            "robot_class_header",
            "connect_timeout",
            "response_timeout",
            "pool_idle_timeout",
            "pool_max_idle",
            "trusted_proxies",
            "header_read_timeout",
            "shutdown_grace",
            "[block]",
            "params",
            "[redirect]",
            "www",
            "strip_www_path",
            "hosts",
            "[robots]",
            "disallow",
            "extra",
            "[log]",
            "access",
            "format",
            "file",
            "[admin]",
            "h2c",
            "http2_idle_timeout",
            "websocket_idle_timeout",
            "workers",
            "upstream_ca",
            "upstream_sni",
            "[tls]",
            "certs",
            "default_name",
            "http2",
            "redirect_http",
            "hsts",
            "strict",
            "[verify]",
            "refresh",
            "state_dir",
            "dns",
            "resolver",
            "dns_timeout",
            "dns_max_inflight",
            "spoofed",
            "header",
            "[verify.ranges.",
            "signatures",
            "signature_agents",
            "directory_timeout",
            "ca_file",
            "[ai]",
            "training",
            "user_fetch",
            "enforce",
        ] {
            assert!(
                text.contains(key),
                "deploy/crawlgate.toml does not document {key}"
            );
        }
    }
}
