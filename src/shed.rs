//! Shedding robots first when the upstream is under pressure.
//!
//! Three parts, from pure to shared:
//!
//! * [`Shedder`], a pure state machine: given a [`Reading`] of the
//!   upstream's load (requests in flight, the recent 90th-percentile
//!   response time) and the time, it keeps a **level**: how many tiers of
//!   `[shed] order` are shed (0 = none). Pressure raises the level by one
//!   at once and by one more every `escalate_after` while it lasts; calm
//!   (below three quarters of every threshold) lowers it by one every
//!   `calm_after`; in between it holds, so the level does not flap. Both
//!   periods count only time the shedder saw: a quiet gap between two
//!   loads is calm, not pressure, so load that returns after it does not
//!   escalate at once.
//! * [`ShedPolicy`], the per-rules part of the decision: each class's tier,
//!   the status and `Retry-After` to answer with. [`ShedPolicy::decide`]
//!   turns a verdict and a [`Pressure`] into a shed decision or none; it is
//!   what `policy::decide` asks.
//! * [`Load`], the process-wide tracker: it records each upstream response
//!   time in a ten-second window and, at most every [`CHECK_EVERY`], steps
//!   the `Shedder`: from the request that happens to come along, and from
//!   a clock ([`Load::tick`], every `CHECK_EVERY`) so that calm is seen
//!   when it begins, on an idle site too, and the level, its gauge and its
//!   log line drop on time without waiting for a request. Between checks
//!   a request reads two atomics.
//!
//! Search engines are not shed for long: after `max_search_shed` of
//! continuous shedding of the `search` class, a `capped_share` of their
//! requests is let through again while the shedding lasts, because days of
//! 503 answers drop pages from an index.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use http::StatusCode;
use tokio::time::Instant;

use crate::classify::{ClassId, Classifier};
use crate::config::ShedConfig;

/// How often, at most, the level is re-evaluated.
pub const CHECK_EVERY: Duration = Duration::from_millis(100);

/// The latency window: this many one-second slots.
const SLOTS: u64 = 10;

/// Fewer upstream responses than this in the window say nothing about its
/// latency (one slow export must not shed every robot).
const MIN_SAMPLES: u32 = 20;

/// Upper bounds of the latency buckets, in milliseconds (the last one
/// holds everything slower).
const BUCKETS_MS: [u64; 20] = [
    1, 2, 5, 10, 20, 50, 100, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 10_000,
    20_000, 30_000, 60_000,
];

/// The upstream's load at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    /// Requests sent upstream whose response is not complete.
    pub in_flight: u64,
    /// The recent 90th-percentile response time, when enough responses
    /// were seen.
    pub latency_p90: Option<Duration>,
}

/// How the load compares with the thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strain {
    /// At or past a threshold.
    Over,
    /// Below three quarters of every threshold.
    Calm,
    /// In between: hold.
    Between,
}

fn strain(config: &ShedConfig, reading: Reading) -> Strain {
    let max = u64::from(config.max_inflight);
    let latency = |scale: u32| match (config.max_latency, reading.latency_p90) {
        (Some(max), Some(p90)) => p90 * 4 >= max * scale,
        _ => false,
    };
    if reading.in_flight >= max || latency(4) {
        Strain::Over
    } else if reading.in_flight * 4 <= max * 3 && !latency(3) {
        Strain::Calm
    } else {
        Strain::Between
    }
}

/// A change worth one log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Shedding started (level 1).
    Started,
    /// The level went up to this.
    Raised(u8),
    /// The level went down to this (not 0).
    Lowered(u8),
    /// Shedding ended.
    Ended,
    /// Search engines have been shed for `max_search_shed`: a share of
    /// them goes through from now on.
    SearchCapped,
}

/// The pure state machine behind the level (see the module docs).
#[derive(Clone, Debug)]
pub struct Shedder {
    level: u8,
    /// When the level last changed.
    changed: Instant,
    /// Since when the load has been calm, if it is.
    calm_since: Option<Instant>,
    /// Since when the load has been over or near a threshold without a
    /// calm reading in between, if it is: escalation counts only this
    /// time, never a calm gap since the last change.
    strained_since: Option<Instant>,
    /// Since when the `search` class has been shed, if it is.
    search_since: Option<Instant>,
    /// Past `max_search_shed`.
    capped: bool,
}

impl Shedder {
    /// Not shedding.
    pub fn new(now: Instant) -> Self {
        Self {
            level: 0,
            changed: now,
            calm_since: None,
            strained_since: None,
            search_since: None,
            capped: false,
        }
    }

    /// How many tiers are shed.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// Whether search engines are past their cap (let through at a share).
    pub fn search_capped(&self) -> bool {
        self.capped
    }

    /// Takes `reading` at `now` into account. `tiers` is the number of
    /// tiers (the highest level); `search_tier` the tier of the `search`
    /// class, if it is shed at all.
    pub fn step(
        &mut self,
        config: &ShedConfig,
        tiers: u8,
        search_tier: Option<u8>,
        reading: Reading,
        now: Instant,
    ) -> Option<Change> {
        if self.level > tiers {
            // Fewer tiers after a reload.
            self.level = tiers;
        }
        let change = self.step_level(config, tiers, reading, now);
        if search_tier.is_some_and(|t| t < self.level) {
            let since = *self.search_since.get_or_insert(now);
            if change.is_none()
                && !self.capped
                && now.saturating_duration_since(since) >= config.max_search_shed
            {
                self.capped = true;
                return Some(Change::SearchCapped);
            }
        } else {
            self.search_since = None;
            self.capped = false;
        }
        change
    }

    fn step_level(
        &mut self,
        config: &ShedConfig,
        tiers: u8,
        reading: Reading,
        now: Instant,
    ) -> Option<Change> {
        let since_change = now.saturating_duration_since(self.changed);
        let strain = strain(config, reading);
        if strain == Strain::Calm {
            self.strained_since = None;
        } else {
            self.calm_since = None;
            self.strained_since.get_or_insert(now);
        }
        match strain {
            Strain::Over => {
                if self.level == 0 && tiers > 0 {
                    self.set(1, now);
                    return Some(Change::Started);
                }
                // Time under pressure at this level: since the change, or
                // since the strain began again after a calm gap.
                let strained = self
                    .strained_since
                    .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
                if self.level < tiers && since_change.min(strained) >= config.escalate_after {
                    self.set(self.level + 1, now);
                    return Some(Change::Raised(self.level));
                }
                None
            }
            Strain::Between => None,
            Strain::Calm => {
                if self.level == 0 {
                    return None;
                }
                let calm_since = *self.calm_since.get_or_insert(now);
                let calm = now.saturating_duration_since(calm_since);
                if calm < config.calm_after || since_change < config.calm_after {
                    return None;
                }
                self.set(self.level - 1, now);
                // The next step down needs its own calm period.
                self.calm_since = Some(now);
                Some(if self.level == 0 {
                    Change::Ended
                } else {
                    Change::Lowered(self.level)
                })
            }
        }
    }

    fn set(&mut self, level: u8, now: Instant) {
        self.level = level;
        self.changed = now;
    }
}

/// What the decision is told about the load, for one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pressure {
    /// How many tiers are shed (0: none).
    pub level: u8,
    /// `None` while search engines are not past their cap; `Some(pass)`
    /// when they are, with this request's draw of the capped share.
    pub search_pass: Option<bool>,
}

/// A class's place in the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tier {
    /// Shed once the level is above this; `u8::MAX` = never.
    index: u8,
    /// The `search` class, which the cap lets through at a share.
    search: bool,
}

const NEVER: Tier = Tier {
    index: u8::MAX,
    search: false,
};

/// A shed answer: the status and `Retry-After` in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shed {
    /// 503 or 429.
    pub status: StatusCode,
    /// Seconds.
    pub retry_after: u64,
}

/// The shed part of the decision, compiled for one rules generation.
#[derive(Debug)]
pub struct ShedPolicy {
    /// The validated settings.
    pub config: ShedConfig,
    /// Each class's tier, indexed by [`ClassId`] (human: never).
    tiers: Vec<Tier>,
    /// The tier of `search`, if it is in the order.
    search_tier: Option<u8>,
}

/// A class named in `[shed] order` that the rules do not have.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a robot class of these rules (one of: {1})")]
pub struct UnknownClass(pub String, pub String);

/// The robot class `name` of `classifier`'s rules, or an error listing
/// the names it may be (`human` is never one).
pub fn robot_class(classifier: &Classifier, name: &str) -> Result<ClassId, UnknownClass> {
    let classes = classifier.classes();
    let robot = |id: &ClassId| *id != ClassId::HUMAN;
    classes.find(name).filter(robot).ok_or_else(|| {
        let known: Vec<&str> = classes
            .ids()
            .filter(robot)
            .map(|id| classes.name(id))
            .collect();
        UnknownClass(name.to_owned(), known.join(", "))
    })
}

impl ShedPolicy {
    /// Compiles `config` against `classifier`'s rule lists.
    pub fn new(config: ShedConfig, classifier: &Classifier) -> Result<Self, UnknownClass> {
        let classes = classifier.classes();
        // Every robot class may be named; `human` is never shed.
        for class in config.order.iter().flatten() {
            robot_class(classifier, class)?;
        }
        let tier_of = |class: &str| {
            config
                .order
                .iter()
                .position(|tier| tier.iter().any(|c| **c == *class))
                .map_or(NEVER, |i| Tier {
                    index: i as u8,
                    search: class == "search",
                })
        };
        let tiers = classes
            .ids()
            .map(|id| match id {
                ClassId::HUMAN => NEVER,
                _ => tier_of(classes.name(id)),
            })
            .collect();
        let search = tier_of("search");
        Ok(Self {
            tiers,
            search_tier: (search != NEVER).then_some(search.index),
            config,
        })
    }

    /// The number of tiers (the highest level).
    pub fn tiers(&self) -> u8 {
        self.config.order.len() as u8
    }

    /// Whether a request of `class` is shed under `pressure`. Humans
    /// never are (a spoofed crawler claim is an unknown robot by then).
    pub fn decide(&self, class: ClassId, pressure: Pressure) -> Option<Shed> {
        if pressure.level == 0 {
            return None;
        }
        let tier = self.tiers.get(class.index()).copied().unwrap_or(NEVER);
        if tier.index >= pressure.level {
            return None;
        }
        if tier.search && pressure.search_pass == Some(true) {
            return None;
        }
        Some(Shed {
            status: self.config.status,
            retry_after: self.config.retry_after.as_secs(),
        })
    }
}

/// Upstream response times of the last [`SLOTS`] seconds, bucketed; the
/// slots are reused round-robin (approximate under races, which is
/// enough for a threshold).
#[derive(Debug)]
struct LatencyWindow {
    /// Per slot: the second it holds, plus one (0 = empty).
    epochs: [AtomicU64; SLOTS as usize],
    counts: [[AtomicU32; BUCKETS_MS.len()]; SLOTS as usize],
}

impl LatencyWindow {
    fn new() -> Self {
        Self {
            epochs: std::array::from_fn(|_| AtomicU64::new(0)),
            counts: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU32::new(0))),
        }
    }

    fn record(&self, second: u64, latency: Duration) {
        let slot = (second % SLOTS) as usize;
        let epoch = second + 1;
        let held = self.epochs[slot].load(Ordering::Relaxed);
        if held != epoch
            && self.epochs[slot]
                .compare_exchange(held, epoch, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            for count in &self.counts[slot] {
                count.store(0, Ordering::Relaxed);
            }
        }
        let ms = latency.as_millis();
        let bucket = BUCKETS_MS
            .iter()
            .position(|&b| ms <= u128::from(b))
            .unwrap_or(BUCKETS_MS.len() - 1);
        self.counts[slot][bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// The 90th percentile's bucket bound over the seconds up to `second`,
    /// when there are enough samples.
    fn p90(&self, second: u64) -> Option<Duration> {
        let mut sums = [0u32; BUCKETS_MS.len()];
        for (epoch, counts) in self.epochs.iter().zip(&self.counts) {
            let epoch = epoch.load(Ordering::Relaxed);
            if epoch == 0 || epoch + SLOTS <= second + 1 || epoch > second + 1 {
                continue;
            }
            for (sum, count) in sums.iter_mut().zip(counts) {
                *sum += count.load(Ordering::Relaxed);
            }
        }
        let total: u32 = sums.iter().sum();
        if total < MIN_SAMPLES {
            return None;
        }
        let rank = (u64::from(total) * 9).div_ceil(10);
        let mut seen = 0u64;
        for (sum, bound) in sums.iter().zip(BUCKETS_MS) {
            seen += u64::from(*sum);
            if seen >= rank {
                return Some(Duration::from_millis(bound));
            }
        }
        None
    }
}

/// The process-wide load tracker (one per process, kept across reloads).
#[derive(Debug)]
pub struct Load {
    origin: Instant,
    window: LatencyWindow,
    /// When the next check is due, in milliseconds since `origin`.
    next_check: AtomicU64,
    shedder: Mutex<Shedder>,
    level: AtomicU8,
    capped: AtomicBool,
    tickets: AtomicU64,
}

impl Default for Load {
    fn default() -> Self {
        Self::new()
    }
}

impl Load {
    /// Not shedding, no samples.
    pub fn new() -> Self {
        let origin = Instant::now();
        Self {
            origin,
            window: LatencyWindow::new(),
            next_check: AtomicU64::new(0),
            shedder: Mutex::new(Shedder::new(origin)),
            level: AtomicU8::new(0),
            capped: AtomicBool::new(false),
            tickets: AtomicU64::new(0),
        }
    }

    /// One upstream response head after `latency`, at `now`.
    pub fn record(&self, latency: Duration, now: Instant) {
        let second = now.saturating_duration_since(self.origin).as_secs();
        self.window.record(second, latency);
    }

    /// The recent 90th-percentile upstream response time, when enough
    /// responses were seen.
    pub fn latency_p90(&self, now: Instant) -> Option<Duration> {
        self.window
            .p90(now.saturating_duration_since(self.origin).as_secs())
    }

    /// The current level (for metrics and tests).
    pub fn level(&self) -> u8 {
        self.level.load(Ordering::Relaxed)
    }

    /// Steps the level when a check is due, without a request: the
    /// process calls it every [`CHECK_EVERY`] so that calm is seen when
    /// it begins and the level drops on time on an idle site. Reports a
    /// change as [`Load::pressure`] does.
    pub fn tick(
        &self,
        policy: &ShedPolicy,
        in_flight: u64,
        now: Instant,
        changed: impl FnOnce(Change, Reading, u8),
    ) {
        if self.due(now) {
            self.check(policy, in_flight, now, changed);
        }
    }

    /// Whether a check is due at `now`; the caller that gets `true` makes
    /// it (one per [`CHECK_EVERY`], however many ask at once).
    fn due(&self, now: Instant) -> bool {
        let ms = now.saturating_duration_since(self.origin).as_millis() as u64;
        let due = self.next_check.load(Ordering::Relaxed);
        ms >= due
            && self
                .next_check
                .compare_exchange(
                    due,
                    ms + CHECK_EVERY.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// The pressure for a request at `now`, with `in_flight` requests
    /// upstream; re-evaluates the level when a check is due, and reports
    /// a change, with the reading and the level after it, through
    /// `changed`.
    pub fn pressure(
        &self,
        policy: &ShedPolicy,
        in_flight: u64,
        now: Instant,
        changed: impl FnOnce(Change, Reading, u8),
    ) -> Pressure {
        if self.due(now) {
            self.check(policy, in_flight, now, changed);
        }
        let level = self.level.load(Ordering::Relaxed);
        if level == 0 {
            return Pressure::default();
        }
        let search_pass = self.capped.load(Ordering::Relaxed).then(|| {
            // Spread evenly: ticket t passes when the running count of
            // passes, t × share, reaches a new whole number (a share of
            // 25 % lets every fourth through, not a burst of 250 in 1000).
            let t = self.tickets.fetch_add(1, Ordering::Relaxed) % 1000;
            let share = u64::from(policy.config.capped_share_permille);
            (t + 1) * share / 1000 > t * share / 1000
        });
        Pressure { level, search_pass }
    }

    fn check(
        &self,
        policy: &ShedPolicy,
        in_flight: u64,
        now: Instant,
        changed: impl FnOnce(Change, Reading, u8),
    ) {
        let reading = Reading {
            in_flight,
            latency_p90: self.latency_p90(now),
        };
        let mut shedder = self
            .shedder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let change = shedder.step(
            &policy.config,
            policy.tiers(),
            policy.search_tier,
            reading,
            now,
        );
        let level = shedder.level();
        self.level.store(level, Ordering::Relaxed);
        self.capped
            .store(shedder.search_capped(), Ordering::Relaxed);
        drop(shedder);
        if let Some(change) = change {
            changed(change, reading, level);
        }
    }
}

#[cfg(test)]
mod tests;
