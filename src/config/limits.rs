//! `[limits]`: bounds on what a client may send.

use std::time::Duration;

use serde::Deserialize;

use super::{duration, invalid, ConfigError};

/// `[limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Bytes of request line plus headers.
    pub max_header_bytes: Option<usize>,
    /// Number of request headers.
    pub max_headers: Option<usize>,
    /// Bytes of the request-target.
    pub max_uri_bytes: Option<usize>,
    /// Concurrent client connections.
    pub max_connections: Option<usize>,
    /// Bytes of a request body (0 = no limit).
    pub max_body_bytes: Option<u64>,
    /// Longest pause inside an upstream response body.
    pub upstream_body_idle_timeout: Option<String>,
}

/// Resource limits, validated.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Bytes of a request head as [`crate::framing::head_len`] counts
    /// them, 8 KiB to 16 MiB.
    pub max_header_bytes: usize,
    /// Number of request headers.
    pub max_headers: usize,
    /// Bytes of the request-target.
    pub max_uri_bytes: usize,
    /// Bytes of a request body; `None` = no limit.
    pub max_body_bytes: Option<u64>,
    /// Longest pause inside an upstream response body.
    pub upstream_body_idle_timeout: Duration,
}

/// `[limits]`, validated, and `limits.max_connections` apart (it is a
/// [`super::Restart`] setting).
pub(super) fn limits_config(raw: RawLimits) -> Result<(Limits, usize), ConfigError> {
    let RawLimits {
        max_header_bytes,
        max_headers,
        max_uri_bytes,
        max_connections,
        max_body_bytes,
        upstream_body_idle_timeout,
    } = raw;
    let max_header_bytes = max_header_bytes.unwrap_or(64 * 1024);
    if !(8192..=16 * 1024 * 1024).contains(&max_header_bytes) {
        return Err(invalid(
            "limits.max_header_bytes",
            format!("{max_header_bytes} is outside 8192 to 16777216"),
        ));
    }
    let positive = |key: &'static str, value: Option<usize>, default: usize| match value {
        Some(0) => Err(invalid(key, "must be greater than zero")),
        Some(v) => Ok(v),
        None => Ok(default),
    };
    let max_connections = match positive("limits.max_connections", max_connections, 10_000)? {
        n if n > 1_000_000 => {
            return Err(invalid(
                "limits.max_connections",
                format!("{n} is over 1000000"),
            ))
        }
        n => n,
    };
    let limits = Limits {
        max_header_bytes,
        max_headers: positive("limits.max_headers", max_headers, 100)?,
        max_uri_bytes: positive("limits.max_uri_bytes", max_uri_bytes, 8 * 1024)?,
        max_body_bytes: max_body_bytes.filter(|&b| b > 0),
        upstream_body_idle_timeout: duration(
            "limits.upstream_body_idle_timeout",
            upstream_body_idle_timeout,
            "60s",
        )?,
    };
    Ok((limits, max_connections))
}
