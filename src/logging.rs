//! Log plumbing that an operator depends on: a `RUST_LOG` that cannot
//! silence the process by accident, and a limiter for lines that a flood
//! of failing requests would otherwise repeat thousands of times a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing_appender::non_blocking::ErrorCounter;

use tracing_subscriber::EnvFilter;

/// What logs when nothing (or something unusable) is asked for.
pub const DEFAULT_FILTER: &str = "info";

/// Crates whose events crawlgate emits, by the first segment of their
/// target: a bare word in `RUST_LOG` that is neither a level nor one of
/// these would select a target that never logs and silence everything.
const KNOWN_TARGETS: &[&str] = &[
    "crawlgate",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "tokio_rustls",
];

const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// The count of diagnostic lines (stderr) lost because its queue was
/// full, once the process's log writer has been set up.
static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// Keeps the log writer's count of lines it lost, for the metrics.
pub fn count_dropped_lines(counter: ErrorCounter) {
    let _ = DROPPED.set(counter);
}

/// Diagnostic lines lost so far (0 before the writer is set up).
pub fn dropped_lines() -> u64 {
    DROPPED
        .get()
        .map_or(0, |counter| counter.dropped_lines() as u64)
}

/// The filter for `value` (the `RUST_LOG` text, if set), and a warning to
/// log when it was unusable and [`DEFAULT_FILTER`] is used instead.
///
/// Unusable: a directive tracing cannot parse (`crawlgate=loud`), or a
/// bare word that is neither a level nor a crate crawlgate logs from
/// (`verbose`, which tracing would read as "everything from target
/// `verbose`" and so print nothing at all, the start-up line included).
pub fn filter(value: Option<&str>) -> (EnvFilter, Option<String>) {
    let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else {
        return (EnvFilter::new(DEFAULT_FILTER), None);
    };
    let fallback = |why: String| {
        let warning =
            format!("RUST_LOG={text:?} is not usable ({why}); logging at {DEFAULT_FILTER}");
        (EnvFilter::new(DEFAULT_FILTER), Some(warning))
    };
    for directive in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if directive.contains(['=', '[']) {
            continue;
        }
        let is_level = LEVELS.iter().any(|l| l.eq_ignore_ascii_case(directive));
        let crate_name = directive.split("::").next().unwrap_or(directive);
        if !is_level && !KNOWN_TARGETS.contains(&crate_name) {
            return fallback(format!(
                "{directive:?} is neither a level ({}) nor a target crawlgate logs",
                LEVELS.join(", ")
            ));
        }
    }
    match EnvFilter::builder().parse(text) {
        Ok(filter) => (filter, None),
        Err(err) => fallback(err.to_string()),
    }
}

/// Lets at most `per_second` lines through in each wall-clock second and
/// counts the rest, so that a dead upstream under load logs its cause a few
/// times a second instead of once per request. Lock-free; one per kind of
/// line, usually a `static`.
#[derive(Debug)]
pub struct LogLimiter {
    /// The current second (high 32 bits) and the lines let through in it.
    window: AtomicU64,
    /// Lines held back since the last one let through.
    suppressed: AtomicU64,
    per_second: u32,
}

impl LogLimiter {
    /// A limiter letting `per_second` lines through each second.
    pub const fn new(per_second: u32) -> Self {
        Self {
            window: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
            per_second,
        }
    }

    /// `Some(n)` when a line may be written now, `n` being how many were
    /// held back since the last one; `None` when this one is held back.
    pub fn admit(&self) -> Option<u64> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() & u64::from(u32::MAX));
        self.admit_at(now)
    }

    fn admit_at(&self, second: u64) -> Option<u64> {
        let mut current = self.window.load(Ordering::Relaxed);
        loop {
            let (window, count) = (current >> 32, current & u64::from(u32::MAX));
            let next = if window != second {
                (second << 32) | 1
            } else if count < u64::from(self.per_second) {
                current + 1
            } else {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                return None;
            };
            match self.window.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(self.suppressed.swap(0, Ordering::Relaxed)),
                Err(actual) => current = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_filters_fall_back_with_a_warning() {
        for bad in ["verbose", "crawlgate=loud", "info,nonsense", "[", "=x"] {
            let (filter, warning) = filter(Some(bad));
            assert!(warning.is_some(), "{bad:?} accepted as {filter}");
            assert_eq!(filter.to_string(), DEFAULT_FILTER);
        }
        for good in [
            "info",
            "WARN",
            "crawlgate=debug",
            "info,crawlgate::access=off",
            "hyper=trace,warn",
            "crawlgate",
            " debug ",
        ] {
            let (_, warning) = filter(Some(good));
            assert!(warning.is_none(), "{good:?}: {warning:?}");
        }
        assert!(filter(None).1.is_none());
        assert!(filter(Some("")).1.is_none());
    }

    #[test]
    fn the_limiter_lets_a_few_through_per_second_and_counts_the_rest() {
        let limiter = LogLimiter::new(3);
        let first: Vec<_> = (0..10).map(|_| limiter.admit_at(100)).collect();
        assert_eq!(first[..3], [Some(0), Some(0), Some(0)]);
        assert!(first[3..].iter().all(Option::is_none));
        // The next second's first line reports the 7 held back.
        assert_eq!(limiter.admit_at(101), Some(7));
        assert_eq!(limiter.admit_at(101), Some(0));
    }
}
