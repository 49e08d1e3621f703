//! `[robots]`: what the synthesized robots.txt adds for everyone.

use serde::Deserialize;

/// `[robots]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRobots {
    /// Path prefixes disallowed for everyone.
    pub disallow: Option<Vec<String>>,
    /// Extra lines appended verbatim.
    pub extra: Option<Vec<String>>,
}
