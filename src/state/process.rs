//! The process's state: created once at start, kept across reloads.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::access_log::AccessLog;
use crate::metrics::Metrics;
use crate::observe::Outcome;
use crate::shed::Load;
use crate::verify::store::RangeStore;

use super::Shared;

/// The process-wide observer: created once, shared by every state a
/// reload builds. It holds the metrics, the health the admin listener
/// reports, the access log's queue, and what outlives a reload: the
/// upstream's load and the crawler range lists.
#[derive(Debug)]
pub struct Observer {
    /// Every metric.
    pub metrics: Arc<Metrics>,
    /// What `/readyz` reports.
    pub health: Health,
    /// The upstream's load, for shedding.
    pub load: Load,
    /// The crawler operators' range lists, for verification.
    pub ranges: Arc<RangeStore>,
    log: OnceLock<AccessLog>,
}

impl Default for Observer {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer {
    /// An observer without an access log yet.
    pub fn new() -> Self {
        let metrics = Arc::new(Metrics::new());
        let ranges = Arc::new(RangeStore::new(&metrics));
        Self {
            metrics,
            health: Health::default(),
            load: Load::default(),
            ranges,
            log: OnceLock::new(),
        }
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

    /// Takes one finished request: counted, and queued for the log.
    pub fn record(&self, shared: &Shared, outcome: Outcome) {
        shared.counters.count(
            outcome.route,
            outcome.class(),
            outcome.status.map_or(0, |s| s.as_u16()),
        );
        if outcome.request.is_none() {
            return;
        }
        if let Some(log) = self.log.get() {
            if !log.send(outcome, shared.log_format, Arc::clone(&shared.policy)) {
                self.metrics.log_line_dropped();
            }
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
        let now = crate::proxy::millis_since(self.epoch) + 1;
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
        seen != 0 && crate::proxy::millis_since(self.epoch) + 1 - seen <= millis(window)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
