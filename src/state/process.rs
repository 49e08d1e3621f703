//! The process's state: created once at start, kept across reloads.
//!
//! [`Process`] holds what belongs to the process rather than to a
//! configuration: the metrics and the health the admin listener reports,
//! the access log's writer, the upstream's load for shedding, the crawler
//! range lists, and the caches a reload must not empty (the robots cache,
//! DNS answers, key directories). A snapshot built at a reload takes the
//! caches whose settings did not change ([`Process::caches_for`]); the
//! process adopts the snapshot's caches once it is in effect
//! ([`Process::keep`]), and says in the log which ones start empty.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::access_log::AccessLog;
use crate::cache::BotCache;
use crate::classify::Classifier;
use crate::config::{Config, VerifyConfig};
use crate::metrics::Metrics;
use crate::report::live::LiveReport;
use crate::rules::{RuleLists, RulesError};
use crate::shed::Load;
use crate::verify::dns::{self, DnsSetup};
use crate::verify::signature::{self, Directories};
use crate::verify::store::RangeStore;

/// The process's state: created once, at start, and shared by every
/// snapshot a reload builds, so what it keeps outlives reloads.
#[derive(Debug)]
pub struct Process {
    /// Every metric.
    pub metrics: Arc<Metrics>,
    /// What `/readyz` reports.
    pub health: Health,
    /// The upstream's load, for shedding.
    pub load: Load,
    /// The crawler operators' range lists, for verification.
    pub ranges: Arc<RangeStore>,
    log: OnceLock<AccessLog>,
    /// The live crawl report (`/report`), kept across reloads.
    pub report: LiveReport,
    /// The caches of the snapshot in effect.
    caches: Mutex<Caches>,
    /// The last rule lists compiled, and their classifier while a
    /// snapshot holds it.
    compiled: Mutex<Option<(RuleLists, Weak<Classifier>)>>,
}

/// The caches a snapshot uses: the process's own as long as their
/// settings stay, new (and empty) when they change.
#[derive(Clone, Debug, Default)]
pub struct Caches {
    /// The robots cache, when `[bot_cache]` is on.
    pub bot: Option<Arc<BotCache>>,
    /// DNS answers by address, with the settings they are kept under,
    /// when reverse DNS is on.
    pub dns: Option<(DnsSetup, Arc<dns::Answers>)>,
    /// Key directories by URL, with the settings they were fetched under,
    /// when signatures are on.
    pub directories: Option<(DirectorySettings, Arc<Directories>)>,
}

/// What a key directory cache is kept under: the wait, the bound on
/// fetches in flight, the extra root certificates.
pub type DirectorySettings = (Duration, usize, Option<PathBuf>);

/// The resolver's settings of `verify`.
pub fn dns_setup(verify: &VerifyConfig) -> DnsSetup {
    DnsSetup {
        server: verify.resolver,
        wait: verify.dns_timeout,
        max_inflight: verify.dns_max_inflight,
    }
}

impl Default for Process {
    fn default() -> Self {
        Self::new()
    }
}

impl Process {
    /// A process without an access log yet, and with no cache.
    pub fn new() -> Self {
        let metrics = Arc::new(Metrics::new());
        let ranges = Arc::new(RangeStore::new(&metrics));
        Self {
            metrics,
            health: Health::default(),
            load: Load::default(),
            ranges,
            log: OnceLock::new(),
            report: LiveReport::new(),
            caches: Mutex::new(Caches::default()),
            compiled: Mutex::new(None),
        }
    }

    /// The classifier of `lists`: the one compiled last when the lists are
    /// the same and a snapshot still holds it, else compiled now. A reload
    /// that leaves the rules alone so neither builds nor frees the
    /// automata, a few MiB in blocks large enough that glibc's malloc
    /// keeps part of them after each reload (bench/README.md §8).
    pub fn classifier_for(&self, lists: &RuleLists) -> Result<Arc<Classifier>, RulesError> {
        let mut compiled = self
            .compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((same, kept)) = &*compiled {
            if let Some(classifier) = kept.upgrade().filter(|_| same == lists) {
                return Ok(classifier);
            }
        }
        let classifier = Arc::new(Classifier::new(lists)?);
        *compiled = Some((lists.clone(), Arc::downgrade(&classifier)));
        Ok(classifier)
    }

    /// Opens the access log (`None` = standard error) and starts its
    /// writer; once per process.
    pub fn start_log(&self, file: Option<&Path>) -> std::io::Result<()> {
        if self.log.get().is_some() {
            return Ok(());
        }
        let log = AccessLog::start(file, Arc::clone(&self.metrics))?;
        let _ = self.log.set(log);
        Ok(())
    }

    /// Has the access log's writer open its file again (SIGUSR1).
    pub fn reopen_log(&self) {
        if let Some(log) = self.log.get() {
            log.reopen();
        }
    }

    /// The access log's writer, once started.
    pub fn access_log(&self) -> Option<&AccessLog> {
        self.log.get()
    }

    /// The caches `config` asks for: the ones in effect where their
    /// settings are the same, new ones where they changed or were off.
    /// Nothing changes here: [`Process::keep`] adopts them once the
    /// snapshot holding them is in effect.
    pub fn caches_for(&self, config: &Config) -> Caches {
        let kept = self.kept();
        let bot = config.bot_cache.as_ref().map(|wanted| match &kept.bot {
            Some(cache) if cache.config().same_store(wanted) => Arc::clone(cache),
            _ => Arc::new(BotCache::new(wanted.clone(), &self.metrics)),
        });
        let verify = config.verify.as_ref();
        let dns = verify.filter(|v| v.dns).map(|v| {
            let setup = dns_setup(v);
            match &kept.dns {
                Some((same, answers)) if *same == setup => (setup, Arc::clone(answers)),
                _ => {
                    let answers = dns::answer_cache(&setup);
                    (setup, answers)
                }
            }
        });
        let directories = verify.filter(|v| v.signatures).map(|v| {
            let settings = (v.directory_timeout, v.dns_max_inflight, v.ca_file.clone());
            match &kept.directories {
                Some((same, cache)) if *same == settings => (settings, Arc::clone(cache)),
                _ => (
                    settings,
                    signature::directory_cache(v.directory_timeout, v.dns_max_inflight),
                ),
            }
        });
        Caches {
            bot,
            dns,
            directories,
        }
    }

    /// Adopts `caches`, those of the snapshot now in effect. After a
    /// `reload`, one line for each cache that starts empty or is dropped.
    /// When the robots cache changed, its gauges describe the new one at
    /// once (zero when it is off), not the old one until the next fill.
    pub fn keep(&self, caches: &Caches, reload: bool) {
        let old = std::mem::replace(&mut *self.kept(), caches.clone());
        self.show_bot_cache(old.bot.as_ref(), caches.bot.as_ref());
        if reload {
            log_changes(&old, caches);
        }
    }

    /// The robots cache's gauges after `old` gave way to `new`.
    fn show_bot_cache(&self, old: Option<&Arc<BotCache>>, new: Option<&Arc<BotCache>>) {
        if let (Some(old), Some(new)) = (old, new) {
            if Arc::ptr_eq(old, new) {
                return;
            }
        }
        if let Some(old) = old {
            old.retire();
        }
        match new {
            Some(cache) => cache.publish(),
            None => {
                let gauges = self.metrics.bot_cache();
                gauges.bytes.set(0);
                gauges.entries.set(0);
            }
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Caches> {
        self.caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What a reload did to the caches, one line each.
fn log_changes(old: &Caches, new: &Caches) {
    match (&old.bot, &new.bot) {
        (None, Some(_)) => tracing::info!("bot_cache: turned on, the cache starts empty"),
        (Some(_), None) => tracing::info!("bot_cache: turned off, the cache is dropped"),
        (Some(was), Some(now)) if !Arc::ptr_eq(was, now) => {
            let config = now.config();
            tracing::info!(
                size = config.size,
                max_item = config.max_item,
                ttl = %humantime::format_duration(config.ttl),
                max_stale = %humantime::format_duration(config.max_stale),
                "bot_cache: settings changed, the cache starts empty",
            );
        }
        _ => {}
    }
    if let (Some((_, was)), Some((_, now))) = (&old.dns, &new.dns) {
        if !Arc::ptr_eq(was, now) {
            tracing::info!("verify: resolver settings changed, the DNS answer cache starts empty");
        }
    }
    if let (Some((_, was)), Some((_, now))) = (&old.directories, &new.directories) {
        if !Arc::ptr_eq(was, now) {
            tracing::info!(
                "verify: signature settings changed, the key-directory cache starts empty"
            );
        }
    }
}

/// What readiness depends on, updated as the process goes.
#[derive(Debug)]
pub struct Health {
    epoch: Instant,
    serving: AtomicBool,
    draining: AtomicBool,
    /// The drain's grace period is over.
    closing: AtomicBool,
    /// Milliseconds after `epoch` (+1) of the upstream's last answer; 0 =
    /// never.
    upstream_seen: AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            serving: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            upstream_seen: AtomicU64::new(0),
        }
    }
}

impl Health {
    /// The listeners are bound and the workers serve.
    pub fn set_serving(&self) {
        self.serving.store(true, Ordering::Release);
    }

    /// A drain has started: not ready any more.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// A drain's grace period is over: the connections still open are
    /// being closed.
    pub fn set_closing(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Whether a drain's grace period is over (a request cut off now was
    /// cut off by crawlgate, not by its client).
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// The upstream answered (a response head, or a connection made).
    /// Stores at most every 100 ms, so workers do not fight over the line.
    pub fn upstream_answered(&self) {
        let now = crate::clock::millis_since(self.epoch) + 1;
        if now.saturating_sub(self.upstream_seen.load(Ordering::Relaxed)) >= 100 {
            self.upstream_seen.store(now, Ordering::Relaxed);
        }
    }

    /// Why the process is not ready, if it is not, upstream aside.
    pub fn not_ready(&self) -> Option<&'static str> {
        if self.draining.load(Ordering::Acquire) {
            Some("draining")
        } else if !self.serving.load(Ordering::Acquire) {
            Some("listeners not bound yet")
        } else {
            None
        }
    }

    /// The upstream answered within `window`.
    pub fn upstream_fresh(&self, window: Duration) -> bool {
        let seen = self.upstream_seen.load(Ordering::Relaxed);
        seen != 0 && crate::clock::millis_since(self.epoch) + 1 - seen <= millis(window)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, Method, StatusCode, Uri};

    use super::*;
    use crate::config::{Overrides, RawConfig};

    fn config(text: &str) -> Config {
        let raw = RawConfig::parse(text).expect("toml");
        Config::from_raw(raw, &Overrides::default()).expect("valid")
    }

    /// A reload with the same rules takes the classifier compiled before,
    /// while a snapshot holds it; other rules compile anew.
    #[test]
    fn the_same_rules_keep_their_classifier() {
        let process = Process::new();
        let lists = RuleLists::embedded();
        let first = process.classifier_for(&lists).expect("rules");
        let again = process
            .classifier_for(&RuleLists::embedded())
            .expect("rules");
        assert!(Arc::ptr_eq(&first, &again));

        let mut fewer = RuleLists::embedded();
        fewer.rules.pop();
        let other = process.classifier_for(&fewer).expect("rules");
        assert!(!Arc::ptr_eq(&first, &other));
        // The last lists compiled are the ones remembered.
        let back = process.classifier_for(&lists).expect("rules");
        assert!(!Arc::ptr_eq(&first, &back));
        // What the process remembers does not keep a classifier alive.
        drop((first, again, other));
        assert_eq!(Arc::strong_count(&back), 1);
    }

    /// Builds the caches of `text` and adopts them, as a reload does.
    fn reload(process: &Process, text: &str) -> Caches {
        let caches = process.caches_for(&config(text));
        process.keep(&caches, true);
        caches
    }

    /// Keeps a page of `len` bytes at `path` in `cache`.
    fn fill(cache: &Arc<BotCache>, path: &str, len: usize) {
        let uri: Uri = path.parse().expect("uri");
        let headers = HeaderMap::new();
        let probe = cache.probe(
            &Method::GET,
            "http",
            Some("example.com"),
            &uri,
            &headers,
            Instant::now(),
        );
        let mut fill = cache
            .fill(probe, &Method::GET, StatusCode::OK, &headers)
            .expect("storable");
        assert!(fill.push(&vec![b'x'; len]));
        let _kept = fill.finish();
    }

    /// (bytes, entries) as the gauges say.
    fn gauges(process: &Process) -> (i64, i64) {
        let m = process.metrics.bot_cache();
        (m.bytes.get(), m.entries.get())
    }

    /// After a reload that resizes the robots cache, its gauges describe
    /// the new (empty) cache at once, and a late fill of the old one does
    /// not bring its numbers back; turned off, they read zero.
    #[test]
    fn the_bot_cache_gauges_follow_a_resize() {
        let process = Process::new();
        let small = "[bot_cache]\nttl = \"1m\"\nsize = \"1MiB\"\n";
        let old = reload(&process, small).bot.expect("on");
        fill(&old, "/a", 1000);
        fill(&old, "/b", 1000);
        let (bytes, entries) = gauges(&process);
        assert_eq!(entries, 2);
        assert_eq!(bytes, i64::try_from(old.weight()).expect("small"));

        let same = reload(&process, small).bot.expect("on");
        assert!(Arc::ptr_eq(&old, &same), "same settings keep the cache");
        assert_eq!(gauges(&process), (bytes, entries));

        let large = "[bot_cache]\nttl = \"1m\"\nsize = \"2MiB\"\n";
        let new = reload(&process, large).bot.expect("on");
        assert!(!Arc::ptr_eq(&old, &new));
        assert_eq!(gauges(&process), (0, 0));
        fill(&old, "/c", 1000);
        assert_eq!(gauges(&process), (0, 0), "the old cache is retired");
        fill(&new, "/a", 1000);
        assert_eq!(gauges(&process).1, 1);

        assert!(reload(&process, "").bot.is_none());
        assert_eq!(gauges(&process), (0, 0));
    }
}
