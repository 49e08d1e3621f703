//! What a reload replaces, built from a config and the process's state.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderValue;

use crate::classify::{ClassId, Classifier};
use crate::config::{Config, Limits, LogFormat, Mode, Spoofed, VerifyConfig, UNKNOWN_CLASS};
use crate::metrics::RequestCounters;
use crate::policy::{LiveClasses, Policy};
use crate::proxy::{Upstream, UpstreamTlsError};
use crate::report::model::RangesUsed;
use crate::report::Sources as ReportSources;
use crate::robots::matcher::RobotsTxt;
use crate::robots::Robots;
use crate::rules::{RuleLists, RulesError};
use crate::shed::{ShedPolicy, UnknownClass};
use crate::sitemap::serve::Sitemaps;
use crate::verify::dns::{DnsChecker, DnsSetupError};
use crate::verify::fetch::{Fetcher, FetcherError};
use crate::verify::signature::{Agents, SignatureChecker};
use crate::verify::store::{Setup, Source};
use crate::verify::{Operators, OperatorsError};

use super::process::{Caches, Process};

/// What a reload replaces, built from a [`Config`] and the [`Process`]:
/// everything a request needs, and the settings a connection takes when
/// it is accepted ([`ConnSettings`]). Immutable: a reload builds a new one
/// and swaps the `Arc` ([`super::Current`]); a request in flight keeps
/// the one it started with. What only a
/// restart changes is in [`crate::config::Restart`], read once when the
/// listeners are bound.
#[derive(Debug)]
pub struct Snapshot {
    /// Whether decisions are carried out, or only recorded while every
    /// request is forwarded (`mode`).
    pub mode: Mode,
    /// The decision's inputs (shared by the workers' copies).
    pub policy: Arc<Policy>,
    /// The robots.txt responder (shared by the workers' copies).
    pub robots: Arc<Robots>,
    /// The upstream's settings (each worker's copy has a connection pool
    /// of its own, see [`super::Worker`]).
    pub upstream: Upstream,
    /// Write access-log lines.
    pub access_log: bool,
    /// Shutdown grace period, read when a drain starts.
    pub shutdown_grace: Duration,
    /// Where the rules came from (`None` = embedded).
    pub rules_source: Option<PathBuf>,
    /// Resource limits of a request (and the head limits a connection
    /// takes at accept).
    pub limits: Limits,
    /// `Strict-Transport-Security` for HTTPS responses that lack one.
    pub hsts: Option<HeaderValue>,
    /// What a connection takes when it is accepted and keeps for its life.
    pub conn: ConnSettings,
    /// The process's state (the same one across reloads).
    pub process: Arc<Process>,
    /// The request counters of these rules (shared by the workers' copies).
    pub counters: Arc<RequestCounters>,
    /// The access log's format.
    pub log_format: LogFormat,
    /// What the live crawl report counts with (`None`: not kept).
    pub report: Option<Arc<ReportSources>>,
    /// The process's caches this configuration uses (the robots cache
    /// when on, DNS answers, key directories).
    pub caches: Caches,
    /// Verifying crawler claims, when on.
    pub verify: Option<Verify>,
    /// The robot class header's value per class, built with the rules.
    pub class_values: Arc<ClassValues>,
    /// The crawler operators (`rules/crawlers.toml`), for AI claims when
    /// verification is off (on, the range store's copy is used).
    pub operators: Arc<Operators>,
    /// The sitemap folder served at `/sitemaps/`, when there is one.
    pub sitemaps: Option<Sitemaps>,
}

/// Crawler verification's part of the request-path state (each worker
/// takes its own copy of the checkers, over the process's caches).
#[derive(Debug)]
pub struct Verify {
    /// What the process-wide range store is set to hold.
    pub setup: Setup,
    /// Reverse-then-forward DNS, when on (each worker its own resolver,
    /// one answer cache).
    pub dns: Option<DnsChecker>,
    /// Web Bot Auth signatures, when on (each worker its own client, one
    /// directory cache).
    pub signatures: Option<SignatureChecker>,
}

/// `X-Crawler-Class` values, one per class of the table (none for
/// humans): a robot's header is a reference-counted clone, never an
/// allocation.
#[derive(Debug)]
pub struct ClassValues(Vec<Option<HeaderValue>>);

impl ClassValues {
    /// The values of `classifier`'s classes (a list name that is no
    /// header value is sent as `unknown`).
    pub fn new(classifier: &Classifier) -> Self {
        let classes = classifier.classes();
        let values = classes
            .ids()
            .map(|id| match id {
                ClassId::HUMAN => None,
                _ => Some(
                    HeaderValue::from_str(classes.name(id))
                        .unwrap_or_else(|_| HeaderValue::from_static(UNKNOWN_CLASS)),
                ),
            })
            .collect();
        Self(values)
    }

    /// The class header of a request of `class` (after verification: a
    /// spoofed claim is `unknown`); `None` for humans.
    pub fn of(&self, class: ClassId) -> Option<HeaderValue> {
        self.0.get(class.index()).cloned().flatten()
    }
}

/// The settings of a connection, taken when it is accepted: a reload
/// reaches the connections accepted after it.
#[derive(Clone, Copy, Debug)]
pub struct ConnSettings {
    /// Request-header read timeout (also the TLS handshake's and the
    /// HTTP/1 keep-alive idle time).
    pub header_read_timeout: Duration,
    /// Accept h2c with prior knowledge on the plain port.
    pub h2c: bool,
    /// The HTTP/1.1 layer of the plain port and of HTTP/1.1 over TLS.
    pub http1: crate::config::Http1Layer,
    /// Close an HTTP/2 connection without open streams after this long.
    pub http2_idle_timeout: Duration,
    /// Close an upgraded tunnel idle this long.
    pub websocket_idle_timeout: Duration,
}

/// Why the request-path state cannot be built from a valid config.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The rules folder is unusable.
    #[error(transparent)]
    Rules(#[from] RulesError),
    /// The upstream's TLS settings are unusable.
    #[error(transparent)]
    UpstreamTls(#[from] UpstreamTlsError),
    /// `[shed] order` names a class the rules do not have.
    #[error("shed.order: {0}")]
    Shed(#[from] UnknownClass),
    /// `[bot_cache] live_classes` names a class the rules do not have.
    #[error("bot_cache.live_classes: {0}")]
    LiveClasses(UnknownClass),
    /// The crawler operators' file is unusable.
    #[error(transparent)]
    Operators(#[from] OperatorsError),
    /// `[verify.ranges]` names a list the operators' file does not have.
    #[error("verify.ranges: {0}")]
    VerifyRanges(String),
    /// The DNS resolver cannot be set up.
    #[error(transparent)]
    Dns(#[from] DnsSetupError),
    /// The client for lists and key directories cannot be set up.
    #[error(transparent)]
    Fetcher(#[from] FetcherError),
    /// The sitemap folder is not a folder.
    #[error("sitemap_dir {0}: no such folder (create it, or leave sitemap_dir out)")]
    SitemapDir(PathBuf),
}

impl Snapshot {
    /// Loads the rules and builds the request-path state for `config`,
    /// with `process`'s caches where their settings did not change.
    pub fn new(config: &Config, process: Arc<Process>) -> Result<Self, SetupError> {
        let lists = match &config.rules_dir {
            Some(dir) => RuleLists::from_dir(dir)?,
            None => RuleLists::embedded(),
        };
        let classifier = process.classifier_for(&lists)?;
        let counters = Arc::new(RequestCounters::new(&process.metrics, &classifier));
        let shed = match &config.shed {
            Some(shed) => Some(ShedPolicy::new(shed.clone(), &classifier)?),
            None => None,
        };
        // Checked only while the cache is on, as `[shed] order` is only
        // while shedding is.
        let live_classes = match &config.bot_cache {
            Some(cache) => LiveClasses::new(cache.live_classes.as_deref(), &classifier)
                .map_err(SetupError::LiveClasses)?,
            None => LiveClasses::default(),
        };
        let operators = Arc::new(match &config.rules_dir {
            Some(dir) => Operators::from_dir(dir)?,
            None => Operators::embedded(),
        });
        let caches = process.caches_for(config);
        let verify = match &config.verify {
            Some(v) => Some(verify_state(v, Arc::clone(&operators), &caches)?),
            None => None,
        };
        let sitemaps = match &config.sitemap_dir {
            Some(dir) if !dir.is_dir() => return Err(SetupError::SitemapDir(dir.clone())),
            Some(dir) => Some(Sitemaps {
                dir: dir.clone(),
                cache_control: config.sitemap_cache_control.clone(),
            }),
            None => None,
        };
        let mut robots = Robots::new(
            &config.blocked_params,
            &config.robots_disallow,
            &config.robots_extra,
            config.sitemap_dir.clone(),
        );
        if let Some(ai) = &config.ai {
            robots = robots.with_ai(ai, &operators);
        }
        let class_values = Arc::new(ClassValues::new(&classifier));
        // The live report measures robots.txt compliance against the
        // robots.txt this configuration serves (its fixed part).
        let report = config.live_report.then(|| {
            Arc::new(ReportSources {
                classifier: Arc::clone(&classifier),
                operators: Arc::clone(&operators),
                ranges: Default::default(),
                loaded: 0,
                ranges_used: RangesUsed::default(),
                robots: Some((
                    RobotsTxt::parse(robots.fixed_body()),
                    "synthesized by this configuration".to_owned(),
                )),
                blocked_params: config.blocked_params.clone(),
            })
        });
        Ok(Self {
            mode: config.mode,
            policy: Arc::new(Policy {
                classifier,
                blocked_params: config.blocked_params.clone(),
                redirect: config.redirect.clone(),
                shed,
                spoofed: config.verify.as_ref().map_or(Spoofed::Log, |v| v.spoofed),
                ai: config.ai,
                sitemaps: sitemaps.is_some(),
                live_classes,
            }),
            sitemaps,
            robots: Arc::new(robots),
            upstream: Upstream::new(config)?,
            access_log: config.access_log,
            shutdown_grace: config.proxy.shutdown_grace,
            rules_source: lists.source,
            limits: config.limits.clone(),
            hsts: config.tls.as_ref().and_then(|t| t.hsts.clone()),
            conn: ConnSettings {
                header_read_timeout: config.proxy.header_read_timeout,
                h2c: config.proxy.h2c,
                http1: config.proxy.http1,
                http2_idle_timeout: config.proxy.http2_idle_timeout,
                websocket_idle_timeout: config.proxy.websocket_idle_timeout,
            },
            caches,
            process,
            counters,
            log_format: config.log_format,
            report,
            verify,
            class_values,
            operators,
        })
    }
}

/// The operators (from the rules folder, or embedded), each list's source
/// (official, or the config's replacement), and the DNS checker.
fn verify_state(
    config: &VerifyConfig,
    operators: Arc<Operators>,
    caches: &Caches,
) -> Result<Verify, SetupError> {
    let mut sources: Vec<Source> = operators
        .lists
        .iter()
        .map(|l| Source::Url(l.url.clone()))
        .collect();
    let mut local = vec![None; sources.len()];
    for (operator, list, source) in &config.ranges {
        let name = format!("{operator}.{list}");
        let Some(i) = operators.list(&name) else {
            let known: Vec<&str> = operators.lists.iter().map(|l| &*l.name).collect();
            return Err(SetupError::VerifyRanges(format!(
                "{name}: no such list (the lists are {})",
                known.join(", ")
            )));
        };
        let source = Source::parse(source);
        if let Source::File(path) = &source {
            // A typo or a broken file is an error now (at start, in
            // check-config, refusing a reload), not an unverified list
            // forever.
            let nets = crate::verify::store::read_local(path)
                .map_err(|err| SetupError::VerifyRanges(format!("{name}: {err}")))?;
            local[i] = Some(Arc::new(nets));
        }
        sources[i] = source;
    }
    let fetcher = Fetcher::new(config.ca_file.as_deref())?;
    let agents = match &config.signature_agents {
        None => Agents::Public,
        Some(extra) => Agents::Listed(
            operators
                .operators
                .iter()
                .flat_map(|op| op.signature.iter().cloned())
                .chain(extra.iter().map(|a| a.as_str().into()))
                .collect(),
        ),
    };
    let signatures = caches
        .directories
        .as_ref()
        .map(|(_, cache)| SignatureChecker::new(fetcher.for_worker(), agents, Arc::clone(cache)));
    let dns = if let Some((setup, answers)) = &caches.dns {
        match (
            DnsChecker::new(setup.clone(), Arc::clone(answers)),
            config.resolver,
        ) {
            (Ok(dns), _) => Some(dns),
            // A configured server that cannot be used is an error; a host
            // without a resolver configuration (a bare container) keeps
            // the ranges and goes without DNS.
            (Err(e), Some(_)) => return Err(e.into()),
            (Err(e), None) => {
                tracing::warn!(error = %e, "verify: no system resolver; reverse DNS is off (set verify.resolver)");
                None
            }
        }
    } else {
        None
    };
    Ok(Verify {
        setup: Setup {
            operators,
            sources,
            local,
            state_dir: config.state_dir.clone(),
            refresh: config.refresh,
            fetcher,
        },
        dns,
        signatures,
    })
}
