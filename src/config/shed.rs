//! `[shed]`: shedding robots when the upstream is under pressure.

use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;

use super::{distinct_class_names, duration, invalid, ConfigError};

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

/// The class of a request that is not a robot's (metrics, the access
/// log).
pub const HUMAN_CLASS: &str = "human";

/// The class of a robot found by structure alone: it did not say what it
/// is.
pub const UNKNOWN_CLASS: &str = "unknown";

/// The class of an empty or missing User-Agent (`[shed] order`, metrics,
/// the class header).
pub const NO_USER_AGENT_CLASS: &str = "no-user-agent";

/// `[shed]`, validated (see `deploy/crawlgate.toml` for each key).
#[derive(Clone, Debug, PartialEq)]
pub struct ShedConfig {
    /// Requests in flight upstream at which shedding starts.
    pub max_inflight: u32,
    /// Recent 90th-percentile upstream response time at which shedding
    /// starts, if any.
    pub max_latency: Option<Duration>,
    /// 503 or 429.
    pub status: StatusCode,
    /// What `Retry-After` says.
    pub retry_after: Duration,
    /// Tiers of classes, shed first to last; a class in no tier is never
    /// shed.
    pub order: Vec<Vec<Box<str>>>,
    /// Longest continuous shedding of the `search` class before a share
    /// of it is let through.
    pub max_search_shed: Duration,
    /// That share, in per mille.
    pub capped_share_permille: u32,
    /// Pressure this long at one level raises it by one more.
    pub escalate_after: Duration,
    /// Calm this long lowers the level by one.
    pub calm_after: Duration,
}

impl ShedConfig {
    /// The default tiers: what a site lives from is shed last.
    pub fn default_order() -> Vec<Vec<Box<str>>> {
        let tier = |names: &[&str]| names.iter().map(|&n| n.into()).collect();
        vec![
            tier(&[
                "library",
                "automation",
                "seo",
                UNKNOWN_CLASS,
                "generic",
                "structural",
                NO_USER_AGENT_CLASS,
            ]),
            tier(&["ai", "archiver"]),
            tier(&["search", "feed", "preview"]),
        ]
    }
}

/// `[shed]`: `None` unless `max_upstream_inflight` is set and `enabled`
/// is not false.
pub(super) fn shed_config(raw: RawShed) -> Result<Option<ShedConfig>, ConfigError> {
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
            distinct_class_names("shed.order", tiers.iter().flatten())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::load;

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
}
