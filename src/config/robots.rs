//! `[robots]`: what the synthesized robots.txt adds for everyone.

use serde::Deserialize;

use super::{invalid, ConfigError};

/// `[robots]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRobots {
    /// Path prefixes disallowed for everyone.
    pub disallow: Option<Vec<String>>,
    /// Extra lines appended verbatim.
    pub extra: Option<Vec<String>>,
}

/// `[robots]`, validated: (disallowed path prefixes, extra lines).
pub(super) fn robots_config(raw: RawRobots) -> Result<(Vec<String>, Vec<String>), ConfigError> {
    let RawRobots { disallow, extra } = raw;
    let disallow =
        disallow.unwrap_or_else(|| ["/admin/", "/api/", "/cron/"].map(str::to_owned).to_vec());
    for d in &disallow {
        if !d.starts_with('/') || d.chars().any(char::is_control) || d.contains(' ') {
            return Err(invalid(
                "robots.disallow",
                format!(
                    "{d:?}: a path must start with '/' and hold no spaces or control characters"
                ),
            ));
        }
    }
    let extra = extra.unwrap_or_default();
    for line in &extra {
        if line.chars().any(char::is_control) {
            return Err(invalid(
                "robots.extra",
                format!("{line:?}: a line cannot hold control characters"),
            ));
        }
    }
    Ok((disallow, extra))
}
