//! `[admin]`: the metrics and health listener.

use serde::Deserialize;

/// `[admin]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// Address of the metrics and health listener (off when absent).
    pub listen: Option<String>,
}
