//! The configuration: one TOML file, command-line overrides, validation.
//!
//! [`RawConfig`] mirrors the file as written (every key optional, unknown
//! keys rejected); [`Config::from_raw`] turns it into real types and checks
//! every value, so an error names the key (`redirect.www: …`) and nothing
//! downstream has to re-validate. `deploy/crawlgate.toml` documents every key
//! with its default.

mod admin;
mod ai;
mod bot_cache;
mod keys;
mod limits;
mod log;
mod mode;
mod proxy;
mod redirect;
mod restart;
mod robots;
mod shed;
#[cfg(test)]
mod tests;
mod tls;
mod verify;

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::header::HeaderValue;
use serde::Deserialize;

use admin::admin_config;
use ai::ai_config;
use bot_cache::bot_cache_config;
use limits::limits_config;
use log::log_config;
use mode::{mode_config, mode_flag};
use proxy::proxy_config;
use redirect::{blocked_params, redirect_config};
use robots::robots_config;
use shed::shed_config;
use tls::tls_config;
use verify::verify_config;

pub use admin::RawAdmin;
pub use ai::{AiConfig, AiKind, RawAi};
pub use bot_cache::{BotCacheConfig, RawBotCache, SIZE_PER_ITEM};
pub use keys::keys;
pub use limits::{Limits, RawLimits};
pub use log::{LogFormat, RawLog};
pub use mode::Mode;
pub use proxy::{parse_upstream, Http1Layer, ProxyConfig, RawProxy, UpstreamAddr};
pub use redirect::{HttpsRedirect, RawBlock, RawRedirect, RedirectConfig, WwwMode};
pub use restart::Restart;
pub use robots::RawRobots;
pub use shed::{RawShed, ShedConfig, HUMAN_CLASS, NO_USER_AGENT_CLASS, UNKNOWN_CLASS};
pub use tls::{RawTls, TlsConfig};
pub use verify::{RawVerify, Spoofed, VerifyConfig};

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

/// Refuses a list of class names under `key` (`shed.order`,
/// `bot_cache.live_classes`) with an empty or repeated name; whether each
/// is a class of the rules is checked when the rules are loaded.
fn distinct_class_names<'a>(
    key: &'static str,
    names: impl IntoIterator<Item = &'a String>,
) -> Result<(), ConfigError> {
    let mut seen: Vec<&str> = Vec::new();
    for name in names {
        if name.is_empty() || seen.contains(&name.as_str()) {
            return Err(invalid(key, format!("{name:?} is empty or named twice")));
        }
        seen.push(name);
    }
    Ok(())
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
    /// `enforce` or `observe`.
    pub mode: Option<String>,
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

/// Command-line values that override the file: the flags of a run (each
/// field's doc is its `--help` line) and what tests and the demo set in
/// their place. `Overrides::apply` names each one's key. `--help`
/// lists the flags by `display_order`; 3 is `--config`'s (in `main`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct Overrides {
    /// Address to listen on for plain HTTP [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR", value_parser = socket_addr, display_order = 1)]
    pub listen: Option<String>,
    /// The site to forward to, http://host:port or https://host:port [default: http://127.0.0.1:8000]
    #[arg(long, value_name = "URL", value_parser = upstream_url, display_order = 2)]
    pub upstream: Option<String>,
    /// Folder holding sitemap.xml; robots.txt advertises it while it exists
    #[arg(long, value_name = "DIR", display_order = 4)]
    pub sitemap_dir: Option<PathBuf>,
    /// Folder of *.txt User-Agent token lists replacing the built-in rules
    #[arg(long = "rules", value_name = "DIR", display_order = 5)]
    pub rules_dir: Option<PathBuf>,
    /// Address to listen on for HTTPS, e.g. 0.0.0.0:443 [default: none]
    #[arg(long, value_name = "ADDR", value_parser = socket_addr, display_order = 6)]
    pub tls_listen: Option<String>,
    /// Certificate folder for HTTPS (see certs/README.md) [default: certs]
    #[arg(long = "certs", value_name = "DIR", display_order = 7)]
    pub certs_dir: Option<PathBuf>,
    /// Address for /metrics, /healthz and /readyz, e.g. 127.0.0.1:9090 [default: none]
    #[arg(long, value_name = "ADDR", value_parser = socket_addr, display_order = 8)]
    pub admin_listen: Option<String>,
    /// enforce: carry decisions out; observe: log them and forward every request as it came [default: enforce]
    #[arg(long, value_name = "MODE", value_parser = mode_flag, display_order = 9)]
    pub mode: Option<String>,
    /// `proxy.workers` (tests and the demo pick their own count).
    #[arg(skip)]
    pub workers: Option<usize>,
    /// `verify.state_dir` when the file does not set it: under systemd's
    /// `StateDirectory=`, `$STATE_DIRECTORY/verify` (see `main`).
    #[arg(skip)]
    pub default_state_dir: Option<PathBuf>,
    /// `verify.enabled` (the demo, on loopback, turns verification off:
    /// it would fetch the operators' range lists from the internet).
    #[arg(skip)]
    pub verify: Option<bool>,
    /// `proxy.http1` (the tests run on either layer:
    /// `CRAWLGATE_TEST_HTTP1=native`).
    #[arg(skip)]
    pub http1: Option<String>,
}

impl Overrides {
    /// Puts the flags' values over the file's: one line per key.
    fn apply(&self, raw: &mut RawConfig) {
        // Destructured so that a new flag cannot be left out.
        let Overrides {
            listen,
            upstream,
            sitemap_dir,
            rules_dir,
            tls_listen,
            certs_dir,
            admin_listen,
            mode,
            workers,
            default_state_dir,
            verify,
            http1,
        } = self;
        over(&mut raw.mode, mode);
        over(&mut raw.listen, listen);
        over(&mut raw.upstream, upstream);
        over(&mut raw.sitemap_dir, sitemap_dir);
        over(&mut raw.rules_dir, rules_dir);
        over(&mut raw.tls.listen, tls_listen);
        over(&mut raw.tls.certs, certs_dir);
        over(&mut raw.admin.listen, admin_listen);
        over(&mut raw.proxy.workers, workers);
        over(&mut raw.verify.enabled, verify);
        over(&mut raw.proxy.http1, http1);
        // A default, not an override: the file's own value wins.
        if raw.verify.state_dir.is_none() {
            raw.verify.state_dir.clone_from(default_state_dir);
        }
    }
}

/// `flag`'s value, when given, in place of the file's.
fn over<T: Clone>(file: &mut Option<T>, flag: &Option<T>) {
    if flag.is_some() {
        file.clone_from(flag);
    }
}

/// A flag value that must be an address: a bad one is a bad flag (exit 2).
fn socket_addr(value: &str) -> Result<String, String> {
    value
        .parse::<std::net::SocketAddr>()
        .map(|_| value.to_owned())
        .map_err(|_| format!("{value:?} is not an address like 127.0.0.1:8080"))
}

/// A flag value that must be an upstream URL.
fn upstream_url(value: &str) -> Result<String, String> {
    parse_upstream(value)
        .map(|_| value.to_owned())
        .map_err(|err| err.to_string())
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Whether decisions are carried out or only recorded.
    pub mode: Mode,
    /// What the process binds at start (a reload reports changes to it).
    pub restart: Restart,
    /// The origin.
    pub upstream: UpstreamAddr,
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
    /// Keep the live crawl report (`admin.report`, with an admin
    /// listener to read it).
    pub live_report: bool,
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

    /// Validates `raw` with `overrides` applied: each section by its own
    /// module, assembled here.
    pub fn from_raw(mut raw: RawConfig, overrides: &Overrides) -> Result<Self, ConfigError> {
        overrides.apply(&mut raw);
        // Destructured field by field so that a new key cannot be ignored.
        let RawConfig {
            listen,
            upstream,
            sitemap_dir,
            sitemap_cache_control,
            rules_dir,
            mode,
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
        let (access_log, log_format, log_file) = log_config(log)?;
        let (admin_listen, live_report) = admin_config(admin)?;
        let (limits, max_connections) = limits_config(limits)?;
        let listen = listen.unwrap_or_else(|| "127.0.0.1:8080".to_owned());
        let listen = listen.parse().map_err(|_| {
            invalid(
                "listen",
                format!("{listen:?} is not an address like 127.0.0.1:8080"),
            )
        })?;
        let (proxy, upstream, workers) = proxy_config(proxy, upstream)?;
        let (tls, https_redirect) = tls_config(tls)?;
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
        let blocked_params = blocked_params(block)?;
        let redirect = redirect_config(redirect, https_redirect)?;
        let (robots_disallow, robots_extra) = robots_config(robots)?;
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
        Ok(Config {
            mode: mode_config(mode)?,
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
            access_log,
            log_format,
            live_report,
            limits,
            tls,
            shed: shed_config(shed)?,
            bot_cache: bot_cache_config(bot_cache)?,
            verify: verify_config(verify)?,
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

/// A DNS-style host name: labels of ASCII letters, digits, `-` and `_`,
/// separated by single dots, optionally ending in one dot; at most 253
/// bytes. IPv4 addresses pass too.
pub fn is_hostname(host: &[u8]) -> bool {
    let host = host.strip_suffix(b".").unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split(|&b| b == b'.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
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
