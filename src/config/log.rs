//! `[log]`: the access log.

use std::path::PathBuf;

use serde::Deserialize;

/// `[log]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    /// Write one access-log line per request.
    pub access: Option<bool>,
    /// `combined` or `json`.
    pub format: Option<String>,
    /// The access-log file (default: standard error).
    pub file: Option<PathBuf>,
}

/// How access-log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Apache/nginx `combined`, then crawlgate's fields.
    Combined,
    /// One JSON object per line with every field of the outcome.
    Json,
}
