//! `[log]`: the access log.

use std::path::PathBuf;

use serde::Deserialize;

use super::{invalid, ConfigError};

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

/// `[log]`, validated: (lines on, their format, the file or standard
/// error).
pub(super) fn log_config(raw: RawLog) -> Result<(bool, LogFormat, Option<PathBuf>), ConfigError> {
    let RawLog {
        access,
        format,
        file,
    } = raw;
    let format = match format.as_deref().unwrap_or("combined") {
        "combined" => LogFormat::Combined,
        "json" => LogFormat::Json,
        other => {
            return Err(invalid(
                "log.format",
                format!("{other:?} is not one of \"combined\", \"json\""),
            ))
        }
    };
    if file.as_ref().is_some_and(|f| f.as_os_str().is_empty()) {
        return Err(invalid(
            "log.file",
            "is empty (leave it out for standard error)",
        ));
    }
    Ok((access.unwrap_or(true), format, file))
}
